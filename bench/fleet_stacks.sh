#!/usr/bin/env bash
# bench/fleet_stacks.sh - the fleet client's benchmark (issue 17). Measures and prints; never gates.
# Issue 17's target: "Capturing `stacks` from 50 local agents: the total time beside a sequential loop
# of curl requests, and the client's RSS flat as targets grow (it streams, it never holds an artifact
# in memory)." Side by side in one run, each figure beside its reference:
#   1. stacks from N agents (N in NS), each with a real .NET webapp attached, ROUNDS rounds, the order
#      of the four ways reversed every other round:
#        seq  a bash loop: per agent `curl -s URL/processes`, then `curl -s -o FILE URL/stacks?pid=PID&format=text`
#        pN   `diagport capture stacks --targets-file F --parallel N --yes -o DIR` for N = 4, 8, 16
#      wall time, and peak RSS from /usr/bin/time -v ("Maximum resident set size": for the loop, the
#      largest of bash and its curls). Every file is checked (starts with "Thread"); the client's
#      manifest must say N succeeded.
#   2. one large artifact: a Full dump of one webapp, before and after GET /memory-leak?mb=LEAK_MB,
#      `curl -o` against `diagport capture dump --type Full`, DUMP_RUNS each: wall time, peak RSS,
#      MB/s. Flat means the client's RSS does not grow with the artifact's size.
#   3. common/sha256.c (which the client runs over every byte it downloads) on SHA_MB MiB, read from
#      a file in the page cache and in memory, against `sha256sum` of the same file (and, for what the
#      CPU's SHA instructions allow, `openssl dgst -sha256` when openssl is installed).
# The agents are all started once (in batches of BATCH webapps, as 50 .NET starts at once would
# stall two cores) and N = 10, 25 use the first N. The agent serves one stacks capture at a time
# per agent; with one app per agent and one capture per app, no capture here waits for another.
# Runs alone after `make` (it builds the apps with tests/apps/build.sh); bench/run.sh runs it last.
# Figures go to docs/BENCHMARKS.md ("Fleet client") by hand.
# Knobs: NS ("10 25 50"), PARALLEL ("4 8 16"), ROUNDS (3), BATCH (5), LEAK_MB (1500), DUMP_RUNS (2),
#        SHA_MB (256), SHA_RUNS (5), SETTLE (30 s at most after the starts), DIAGPORT (./diagport), BUILD (build).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=$(realpath "${DIAGPORT:-./diagport}")
NS=${NS:-10 25 50}
PARALLEL=${PARALLEL:-4 8 16}
ROUNDS=${ROUNDS:-3}
BATCH=${BATCH:-5}
LEAK_MB=${LEAK_MB:-1500}
DUMP_RUNS=${DUMP_RUNS:-2}
SHA_MB=${SHA_MB:-256}
SHA_RUNS=${SHA_RUNS:-5}
SETTLE=${SETTLE:-30}
W=$(mktemp -d /tmp/dp-bench.XXXXXX)
chmod 755 "$W"
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

MAXN=0
for n in $NS; do [ "$n" -gt "$MAXN" ] && MAXN=$n; done
load() { cut -d' ' -f1-3 /proc/loadavg; }
others() { ps -eo pid,args --no-headers | grep -E 'tests/run|make (test|bench)|dotnet test' | grep -v grep | head -3; }

echo "== machine: $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB, $(uname -r); $(date -u '+%F %H:%M UTC');" \
	"code $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo '+changes')"
echo "   load (1/5/15 min): $(load); other jobs: $(others | tr '\n' ';')"
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "the apps did not build: $(tail -3 "$W/build.log")"
mkdir -p "$B/bench"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -Icommon -fPIE -pie -o "$B/bench/bench_sha256" bench/bench_sha256.c \
	"$B/libdiagport.a" -ljansson -lyaml -lz -lseccomp -lpthread || die "cannot build bench/bench_sha256.c"

# ---- MAXN agents, each with a webapp attached (connect,nosuspend), started BATCH at a time ----
declare -a URL APPPID APPURL
t0=$(date +%s.%N)
for i in $(seq 1 "$MAXN"); do
	mkdir -p -m 0777 "$W/a$i"
	URL[$i]=http://127.0.0.1:$(free_port)
	"$D" launch --socket "$W/a$i/port" --urls "${URL[$i]}" --dumps "$W/a$i" 2> "$W/a$i/agent.log" &
	PIDS+=($!)
done
for ((s = 1; s <= MAXN; s += BATCH)); do
	e=$((s + BATCH - 1))
	[ "$e" -gt "$MAXN" ] && e=$MAXN
	for i in $(seq "$s" "$e"); do
		APPURL[$i]=http://127.0.0.1:$(free_port)
		DOTNET_DiagnosticPorts=$W/a$i/port,connect,nosuspend ASPNETCORE_URLS=${APPURL[$i]} \
			dotnet "$B/apps/webapp/webapp.dll" > "$W/a$i/app.log" 2>&1 &
		PIDS+=($!)
	done
	for i in $(seq "$s" "$e"); do
		wait_for "$W/a$i/app.log" READY 60 || die "webapp $i printed no READY: $(tail -3 "$W/a$i/app.log")"
		APPPID[$i]=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/a$i/app.log")
		ok=0
		for _ in $(seq 1 100); do
			curl -s "${URL[$i]}/processes" | grep -q "\"pid\":${APPPID[$i]}" && { ok=1; break; }
			sleep 0.1
		done
		[ "$ok" = 1 ] || die "webapp $i did not attach to its agent: $(tail -3 "$W/a$i/agent.log")"
	done
done
echo "== $MAXN agents and webapps ready in $(echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.1f') s" \
	"(batches of $BATCH); one webapp's VmRSS $(awk '/VmRSS/{print $2, $3}' "/proc/${APPPID[1]}/status")," \
	"one agent's $(awk '/VmRSS/{print $2, $3}' "/proc/$(pgrep -f "launch --socket $W/a1/port" | head -1)/status")"
# the starts leave the load high for a while (JIT, the counters sessions): let it settle
for _ in $(seq 1 "$SETTLE"); do
	awk '{exit !($1 < 3)}' /proc/loadavg && break
	sleep 1
done
echo "   load after settling (1-min under 3, or $SETTLE s): $(load)"

for n in $NS; do
	: > "$W/targets-$n"
	: > "$W/urls-$n"
	for i in $(seq 1 "$n"); do
		echo "${URL[$i]} name=app-$i workload=app-$i" >> "$W/targets-$n"
		echo "${URL[$i]}" >> "$W/urls-$n"
	done
done

# timed NAME CMD...: runs CMD under /usr/bin/time -v; sets WALL (s, our own clock), RSS (KiB), CPU (user +
# system s, of CMD and its children), RC
timed() {
	local name=$1 t
	shift
	t=$(date +%s%N)
	/usr/bin/time -v -o "$W/$name.time" "$@" > "$W/$name.out" 2> "$W/$name.err"
	RC=$?
	WALL=$(echo "scale=3; ($(date +%s%N) - $t) / 1000000000" | bc)
	RSS=$(sed -n 's/^\s*Maximum resident set size (kbytes): //p' "$W/$name.time")
	CPU=$(awk -F': ' '/User time|System time/ {s += $2} END {printf "%.2f", s}' "$W/$name.time")
}

# the reference: one agent after another, as the client does it (the processes, then the capture)
cat > "$W/seq.sh" << 'EOF'
i=0
while read -r url; do
	i=$((i + 1))
	pid=$(curl -s "$url/processes" | sed -n 's/.*"pid":\([0-9]*\).*/\1/p')
	curl -s -o "$1/$i.txt" "$url/stacks?pid=$pid&format=text"
done < "$2"
EOF

# ---- 1. stacks from N agents ----
WAYS="seq"
for p in $PARALLEL; do WAYS="$WAYS p$p"; done
echo
echo "== stacks from N agents, $ROUNDS rounds (wall s / CPU s / peak RSS KiB / files checked)"
printf '%-4s %-5s %-6s %9s %7s %10s %s\n' N round way wall_s cpu_s rss_KiB ok
for n in $NS; do
	for r in $(seq 1 "$ROUNDS"); do
		order=$WAYS
		[ $((r % 2)) = 0 ] && order=$(echo "$WAYS" | tr ' ' '\n' | tac | tr '\n' ' ')
		for way in $order; do
			dir=$W/out-$n-$r-$way
			rm -rf "$dir"
			if [ "$way" = seq ]; then
				mkdir -p "$dir"
				timed "$n-$r-$way" bash "$W/seq.sh" "$dir" "$W/urls-$n"
				good=$(for f in "$dir"/*.txt; do head -c 6 "$f" | grep -q '^Thread' && echo; done | wc -l)
			else
				timed "$n-$r-$way" "$D" capture stacks --targets-file "$W/targets-$n" --parallel "${way#p}" --yes -o "$dir"
				good=$(jq -r '.succeeded' "$dir/manifest.json" 2>/dev/null || echo 0)
				bad=$(for f in "$dir"/*.txt; do head -c 6 "$f" | grep -q '^Thread' || echo; done | wc -l)
				[ "$bad" = 0 ] || good="$good ($bad files not stacks)"
			fi
			[ "$RC" = 0 ] || good="$good (exit $RC: $(tail -c 200 "$W/$n-$r-$way.err"))"
			printf '%-4s %-5s %-6s %9s %7s %10s %s\n' "$n" "$r" "$way" "$WALL" "$CPU" "$RSS" "$good/$n"
			echo "$n $way $WALL $RSS" >> "$W/stacks.tsv"
		done
		rm -rf "$W"/out-"$n"-"$r"-*
	done
done
echo
echo "== medians over $ROUNDS rounds (wall s, ratio to the curl loop, peak RSS KiB); load: $(load)"
printf '%-4s %-6s %9s %8s %10s\n' N way wall_s x_seq rss_KiB
for n in $NS; do
	base=$(awk -v n="$n" '$1 == n && $2 == "seq" {print $3}' "$W/stacks.tsv" | sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
	for way in $WAYS; do
		w=$(awk -v n="$n" -v w="$way" '$1 == n && $2 == w {print $3}' "$W/stacks.tsv" | sort -n |
			awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}')
		m=$(awk -v n="$n" -v w="$way" '$1 == n && $2 == w {print $4}' "$W/stacks.tsv" | sort -n |
			awk '{a[NR]=$1} END {print a[int((NR+1)/2)] " [" a[1] "-" a[NR] "]"}')
		printf '%-4s %-6s %9s %8s %10s\n' "$n" "$way" "$w" "$(echo "scale=2; $w / $base" | bc)" "$m"
	done
done
echo "   one stacks file: $(curl -s "${URL[1]}/stacks?pid=${APPPID[1]}&format=text" | wc -c) bytes"

# ---- 2. one large artifact: a Full dump, curl -o against the client ----
mb() { echo "scale=0; $1 / 1000000 / $2" | bc; }
dumps() {
	local label=$1 r size
	for r in $(seq 1 "$DUMP_RUNS"); do
		rm -rf "$W/dump-curl" "$W/dump-client"
		mkdir -p "$W/dump-curl"
		timed dump-curl curl -s -o "$W/dump-curl/core" "${URL[1]}/dump?pid=${APPPID[1]}&type=Full"
		size=$(stat -c %s "$W/dump-curl/core" 2>/dev/null || echo 0)
		printf '%-20s %-6s %-4s %14s %8s %7s %7s %9s\n' "$label" curl "$r" "$size" "$WALL" "$(mb "$size" "$WALL")" "$CPU" "$RSS"
		rm -rf "$W/dump-curl"
		timed dump-client "$D" capture dump --type Full --target "${URL[1]}" -o "$W/dump-client"
		size=$(jq -r '.items[0].bytes // 0' "$W/dump-client/manifest.json" 2>/dev/null || echo 0)
		[ "$RC" = 0 ] || echo "   client exit $RC: $(tail -c 300 "$W/dump-client.err")"
		printf '%-20s %-6s %-4s %14s %8s %7s %7s %9s\n' "$label" client "$r" "$size" "$WALL" "$(mb "$size" "$WALL")" "$CPU" "$RSS"
		rm -rf "$W/dump-client"
	done
}
echo
echo "== Full dump of webapp 1 (pid ${APPPID[1]}), curl -o against diagport capture dump; load: $(load)"
printf '%-20s %-6s %-4s %14s %8s %7s %7s %9s\n' app way run bytes wall_s MB/s cpu_s rss_KiB
dumps "idle ($(awk '/VmRSS/{print int($2/1024)}' "/proc/${APPPID[1]}/status") MiB)"
curl -s "${APPURL[1]}/memory-leak?mb=$LEAK_MB" > /dev/null || die "GET /memory-leak?mb=$LEAK_MB failed"
dumps "+$LEAK_MB MB ($(awk '/VmRSS/{print int($2/1024)}' "/proc/${APPPID[1]}/status") MiB)"

# ---- 3. common/sha256.c against sha256sum ----
echo
echo "== SHA-256 of $SHA_MB MiB (random, in the page cache), $SHA_RUNS runs each; load: $(load)"
head -c $((SHA_MB * 1024 * 1024)) /dev/urandom > "$W/sha.bin"
"$B/bench/bench_sha256" "$W/sha.bin" "$SHA_RUNS" | tee "$W/sha.out"
for _ in $(seq 1 "$SHA_RUNS"); do
	t=$(date +%s%N)
	sha256sum "$W/sha.bin" > "$W/sha.ref"
	echo "scale=3; ($(date +%s%N) - $t) / 1000000000" | bc
done | sort -n > "$W/sha.times"
med=$(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' "$W/sha.times")
best=$(head -1 "$W/sha.times")
printf '%-32s median %7.1f MB/s (%.3f s)  best %7.1f MB/s\n' "sha256sum (coreutils $(sha256sum --version | head -1 | awk '{print $NF}'))" \
	"$(echo "$SHA_MB * 1048576 / $med / 1000000" | bc -l)" "$med" "$(echo "$SHA_MB * 1048576 / $best / 1000000" | bc -l)"
if command -v openssl > /dev/null; then
	for _ in $(seq 1 "$SHA_RUNS"); do
		t=$(date +%s%N)
		openssl dgst -sha256 "$W/sha.bin" > /dev/null
		echo "scale=3; ($(date +%s%N) - $t) / 1000000000" | bc
	done | sort -n > "$W/ossl.times"
	med=$(awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}' "$W/ossl.times")
	best=$(head -1 "$W/ossl.times")
	printf '%-32s median %7.1f MB/s (%.3f s)  best %7.1f MB/s\n' "openssl dgst -sha256 ($(openssl version | awk '{print $2}'))" \
		"$(echo "$SHA_MB * 1048576 / $med / 1000000" | bc -l)" "$med" "$(echo "$SHA_MB * 1048576 / $best / 1000000" | bc -l)"
fi
[ "$(cut -d' ' -f1 "$W/sha.ref")" = "$(head -1 "$W/sha.out" | cut -d' ' -f1)" ] && echo "digests agree" ||
	echo "DIGESTS DIFFER: $(cut -d' ' -f1 "$W/sha.ref")"
grep -q -w sha_ni /proc/cpuinfo && echo "the CPU has SHA extensions (sha_ni)" || echo "the CPU has no SHA extensions (sha_ni)"
echo "== done; load: $(load)"
