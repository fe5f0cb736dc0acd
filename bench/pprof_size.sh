#!/usr/bin/env bash
# bench/pprof_size.sh - a CPU profile as pprof beside the same as speedscope (issue 36): the size of the answer
# and the agent's time to write it (its debug log's "profile-written" line: writeUs, from the counted, named
# stacks to the finished bytes), for a busy ASP.NET Core app (the test webapp serving wrk -t2 -c16), with the
# EventPipe engine and with perf events (999 Hz: native and kernel frames, many more stacks). ROUNDS (3)
# captures of SECS (10) s per engine and format, formats alternating; each capture is its own profile, so the
# samples are printed beside the sizes. Measures and prints; never gates. Figures go to docs/BENCHMARKS.md by hand.
# Runs alone after `make` and `scripts/prereqs.sh bench`. Knobs: ROUNDS, SECS, DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/dp-bench-pprof.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
for t in wrk curl jq; do command -v "$t" > /dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"

P=$(free_port); U=http://127.0.0.1:$P
"$D" launch --socket "$W/port" --urls "$U" --dumps "$W" --no-auth --log-level debug 2> "$W/agent.log" & AG=$!; PIDS+=("$AG")
AP=$(free_port)
DOTNET_DiagnosticPorts=$W/port,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:$AP dotnet "$B/apps/webapp/webapp.dll" \
	> "$W/app.out" 2>&1 & APP=$!; PIDS+=("$APP")
for _ in $(seq 1 300); do grep -q READY "$W/app.out" && curl -s "$U/processes" | grep -q pid && break; sleep 0.1; done
curl -s "$U/processes" | grep -q pid || die "the webapp did not attach: $(tail -3 "$W/app.out")"
wrk -t2 -c16 -d3s "http://127.0.0.1:$AP/pid" > /dev/null 2>&1 # JIT warm-up
echo "$(load)"
echo "commit $(git rev-parse --short HEAD 2> /dev/null), $(date -u '+%F %H:%M') UTC; $ROUNDS rounds of $SECS s"

# one ENGINE FORMAT: a profile under load; prints "samples bytes writeUs"
one() {
	local q=profile=Cpu n
	[ "$1" = perf ] && q="engine=perf&frequency=999"
	wrk -t2 -c16 -d"$((SECS + 3))s" "http://127.0.0.1:$AP/pid" > /dev/null 2>&1 &
	local wk=$!
	n=$(grep -c '"event":"profile-written"' "$W/agent.log")
	curl -s -o "$W/out" "$U/trace?$q&format=$2&durationSeconds=$SECS"
	wait "$wk"
	grep '"event":"profile-written"' "$W/agent.log" | sed -n "$((n + 1))p" | jq -r '"\(.samples) \(.bytes) \(.writeUs)"'
}
for engine in eventpipe perf; do
	for r in $(seq 1 "$ROUNDS"); do
		for f in speedscope pprof; do
			[ $((r % 2)) = 0 ] && f=$([ "$f" = pprof ] && echo speedscope || echo pprof)
			echo "$engine $f $(one "$engine" "$f")" | tee -a "$W/runs"
		done
	done
done
echo
printf '%-10s %-11s %22s %26s %24s\n' engine format "samples (median min max)" "bytes (median min max)" "write us (median min max)"
for engine in eventpipe perf; do
	for f in speedscope pprof; do
		printf '%-10s %-11s %22s %26s %24s\n' "$engine" "$f" \
			"$(awk -v e="$engine" -v f="$f" '$1 == e && $2 == f {print $3}' "$W/runs" | stat3)" \
			"$(awk -v e="$engine" -v f="$f" '$1 == e && $2 == f {print $4}' "$W/runs" | stat3)" \
			"$(awk -v e="$engine" -v f="$f" '$1 == e && $2 == f {print $5}' "$W/runs" | stat3)"
	done
done
