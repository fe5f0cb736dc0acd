#!/usr/bin/env bash
# egress_agent.sh - the agent sending a WithHeap dump of a .NET app holding HEAP_MB MiB (about 1 GiB
# with the default) to S3 (s3rver on loopback) through its egress process, beside `aws s3 cp` of a dump
# of the same app (streamed to a file first) to the same s3rver, RUNS times. For the agent: the
# operation's time, MiB/s, the CPU time of the agent and of its egress process (utime + stime from
# /proc/PID/stat, before and after) and their peak RSS (VmRSS sampled every 50 ms); for the AWS CLI, its
# time and peak RSS (GNU time). The egress process holds at most PartBuffers (2) parts of CopyBufferSize
# (8 MiB). Measures and prints; gates nothing.
#   HEAP_MB=1000 RUNS=2 bench/egress_agent.sh
set -u
cd "$(dirname "$0")/.." || exit 1
W=$(mktemp -d /tmp/dp-bench-egress.XXXXXX)
chmod 755 "$W"
. bench/lib.sh
trap bench_cleanup EXIT
HEAP_MB=${HEAP_MB:-1000}
RUNS=${RUNS:-2}
B=${BUILD:-build}
D=./diagport
V=tests/validate
[ -x "$D" ] || die "./diagport is missing: run make first"
[ -d $V/node_modules/s3rver ] || die "s3rver is missing: scripts/prereqs.sh bench"
bash tests/apps/build.sh "$B/apps" > /dev/null || die "cannot build the test apps"
mkdir -p "$W/store" "$W/egress" -m 0777 "$W/dumps"
node $V/s3rver-run.mjs "$W/store" "$W/port" > /dev/null 2>&1 &
PIDS+=($!)
wait_for "$W/port" . 30 || die "s3rver did not start"
EP=http://127.0.0.1:$(cat "$W/port")
for kv in Endpoint="$EP" BucketName=diag RegionName=us-east-1 AccessKeyId=S3RVER SecretAccessKey=S3RVER \
	ForcePathStyle=true; do
	printf '%s\n' "${kv#*=}" > "$W/egress/Egress__S3Storage__s3__${kv%%=*}"
done
P=$(free_port)
U=http://127.0.0.1:$P
"$D" launch --config-dir "$W/egress" --socket "$W/dumps/port" --dumps "$W/dumps" --urls "$U" 2> "$W/agent.log" &
AG=$!
PIDS+=($AG)
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" tick "$HEAP_MB" \
	> "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/app.out" READY 120 || die "the app did not start"
wait_for "$W/agent.log" '"event":"attached"' 10 || die "the agent did not attach the app"
EG=$(tr ' ' '\n' < "/proc/$AG/task/$AG/children" | while read -r p; do
	[ -n "$p" ] && [ "$(cat "/proc/$p/comm")" = diagport-egress ] && echo "$p"; done | head -1)
[ -n "$EG" ] || die "no egress process"
cpu() { awk '{ print $14 + $15 }' "/proc/$1/stat"; }
rss() { awk '/^VmRSS:/ { print $2 }' "/proc/$1/status"; }
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1
HZ=$(getconf CLK_TCK)
echo "WithHeap dump of an app holding $HEAP_MB MiB, to s3rver on loopback (MiB/s = 2^20 bytes per second)"
echo "idle: agent RSS $(rss "$AG") KiB, egress process RSS $(rss "$EG") KiB"
for r in $(seq 1 "$RUNS"); do
	a0=$(cpu "$AG") e0=$(cpu "$EG") pa=0 pe=0
	t0=$(date +%s.%N)
	loc=$(curl -s -D - -o /dev/null "$U/dump?type=WithHeap&egressProvider=s3" | sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p')
	while [ "$(curl -s "$U$loc" | jq -r .status)" = Running ]; do
		x=$(rss "$AG"); [ "$x" -gt "$pa" ] && pa=$x
		x=$(rss "$EG"); [ "$x" -gt "$pe" ] && pe=$x
		sleep 0.05
	done
	t1=$(date +%s.%N)
	curl -s -D "$W/op.hdr" "$U$loc" > "$W/op.json"
	[ "$(jq -r .status "$W/op.json")" = Succeeded ] || die "the operation failed: $(cat "$W/op.json")"
	bytes=$(tr -d '\r' < "$W/op.hdr" | awk -F': ' 'tolower($1) == "x-diagport-bytes-sent" { print $2 }')
	secs=$(echo "$t1 - $t0" | bc)
	printf 'run %d  agent: %d MiB in %.2f s, %.1f MiB/s; CPU agent %.2f s, egress process %.2f s; peak RSS agent %d KiB, egress process %d KiB\n' \
		"$r" $((bytes >> 20)) "$secs" "$(echo "$bytes / 1048576 / $secs" | bc -l)" \
		"$(echo "($(cpu "$AG") - $a0) / $HZ" | bc -l)" "$(echo "($(cpu "$EG") - $e0) / $HZ" | bc -l)" "$pa" "$pe"
	curl -s -o "$W/core" "$U/dump?type=WithHeap"
	/usr/bin/time -f '%e %M' -o "$W/time" aws --endpoint-url "$EP" s3 cp "$W/core" "s3://diag/bench/a$r" \
		> /dev/null 2>&1 || die "aws s3 cp failed"
	read -r el mrss < "$W/time"
	printf 'run %d  aws s3 cp: %d MiB in %.2f s, %.1f MiB/s; peak RSS %d KiB\n' "$r" $(($(stat -c %s "$W/core") >> 20)) \
		"$el" "$(echo "$(stat -c %s "$W/core") / 1048576 / $el" | bc -l)" "$mrss"
	rm -f "$W/core"
	rm -rf "$W/store/diag/"* 2>/dev/null
done
