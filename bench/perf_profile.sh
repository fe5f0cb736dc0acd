#!/usr/bin/env bash
# bench/perf_profile.sh - CPU profiles with the perf engine (issue 21): measures and prints; never gates.
#   A busy ASP.NET Core app (the test webapp, attached to the agent) serves wrk for SECONDS while nothing
#   samples it, then while the agent takes /trace?engine=perf at 99 Hz and at 999 Hz, then while Debian's
#   `perf record -g -p PID` samples it at the same frequencies (the reference), rounds alternating: the
#   app's requests/s for each; the sampler's CPU over the run (agent or perf record, from /proc) and its
#   peak RSS while sampling (VmRSS read every 100 ms); the agent's naming time (its log's namingMs: maps,
#   ELF tables, perf map, method rundown) against `perf script`'s time on perf's data. Then one 30 s
#   profile at 99 Hz and its naming time.
# Runs alone after `make` and `scripts/prereqs.sh bench`. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: SECONDS_EACH (10), ROUNDS (3), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
SECS=${SECONDS_EACH:-10}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/dp-bench-perf.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
for t in wrk perf curl /usr/bin/time; do command -v "$t" > /dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"

P=$(free_port); U=http://127.0.0.1:$P
"$D" launch --socket "$W/port" --urls "$U" --dumps "$W" --no-auth 2> "$W/agent.log" & AG=$!; PIDS+=("$AG")
AP=$(free_port)
DOTNET_DiagnosticPorts=$W/port,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:$AP dotnet "$B/apps/webapp/webapp.dll" \
	> "$W/app.out" 2>&1 & APP=$!; PIDS+=("$APP")
for _ in $(seq 1 300); do grep -q READY "$W/app.out" && curl -s "$U/processes" | grep -q pid && break; sleep 0.1; done
curl -s "$U/processes" | grep -q pid || die "the webapp did not attach: $(tail -3 "$W/app.out")"
wrk -t2 -c16 -d3s "http://127.0.0.1:$AP/pid" > /dev/null 2>&1 # JIT warm-up

HZ=$(getconf CLK_TCK)
ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2> /dev/null || echo 0; }
# peak VmRSS (kB) of pid $1 until file $2 exists
peak_rss() {
	local m=0 v
	while [ ! -e "$2" ]; do
		v=$(awk '/^VmRSS/ {print $2}' "/proc/$1/status" 2> /dev/null) && [ -n "$v" ] && [ "$v" -gt "$m" ] && m=$v
		sleep 0.1
	done
	echo "$m"
}
rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }

echo "diagport $(cat VERSION); $(perf --version); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2); $(nproc) CPUs"
echo "wrk -t2 -c16 -d${SECS}s on the webapp's /pid; $ROUNDS rounds, alternating"
printf '%-14s %-5s %9s %10s %12s %12s\n' sampler round req/s cpu_ms peak_rss_kB naming_ms
for r in $(seq 1 "$ROUNDS"); do
	for who in none agent-99 agent-999 perf-99 perf-999; do
		rm -f "$W/done"
		cpu=- rss=- naming=-
		case $who in
		none)
			wrk -t2 -c16 -d"${SECS}s" "http://127.0.0.1:$AP/pid" > "$W/wrk.txt" 2>&1
			;;
		agent-*)
			f=${who#agent-}
			peak_rss "$AG" "$W/done" > "$W/rss" & RP=$!
			t0=$(ticks "$AG")
			curl -s -o "$W/profile.txt" "$U/trace?engine=perf&frequency=$f&durationSeconds=$SECS" &
			CP=$!
			wrk -t2 -c16 -d"${SECS}s" "http://127.0.0.1:$AP/pid" > "$W/wrk.txt" 2>&1
			wait "$CP"
			t1=$(ticks "$AG")
			touch "$W/done"; wait "$RP"; rss=$(cat "$W/rss")
			cpu=$(( (t1 - t0) * 1000 / HZ ))
			naming=$(grep '"perf-profile"' "$W/agent.log" | tail -1 | sed 's/.*"namingMs":\([0-9]*\).*/\1/')
			[ -s "$W/profile.txt" ] || die "no profile from the agent: $(tail -3 "$W/agent.log")"
			;;
		perf-*)
			f=${who#perf-}
			/usr/bin/time -f '%U %S %M' -o "$W/time" perf record -q -F "$f" -g -p "$APP" -o "$W/perf.data" -- \
				sleep "$SECS" > /dev/null 2>&1 & PP=$!
			wrk -t2 -c16 -d"${SECS}s" "http://127.0.0.1:$AP/pid" > "$W/wrk.txt" 2>&1
			wait "$PP"
			cpu=$(awk '{printf "%d", ($1 + $2) * 1000}' "$W/time")
			rss=$(awk '{print $3}' "$W/time")
			s0=$(date +%s%N)
			perf script -i "$W/perf.data" > "$W/perf.txt" 2> /dev/null
			naming=$(( ($(date +%s%N) - s0) / 1000000 ))
			;;
		esac
		printf '%-14s %-5s %9s %10s %12s %12s\n' "$who" "$r" "$(rps "$W/wrk.txt")" "$cpu" "$rss" "$naming"
	done
done

echo "one 30 s profile at 99 Hz under the same load:"
curl -s -o "$W/p30.txt" "$U/trace?engine=perf&frequency=99&durationSeconds=30" & CP=$!
wrk -t2 -c16 -d30s "http://127.0.0.1:$AP/pid" > "$W/wrk.txt" 2>&1
wait "$CP"
grep '"perf-profile"' "$W/agent.log" | tail -1 | sed 's/.*"samples":\([0-9]*\).*"threads":\([0-9]*\).*"namingMs":\([0-9]*\),"perfMapEntries":\([0-9]*\).*/samples \1, threads \2, naming \3 ms, perf map entries \4/'
echo "distinct stacks: $(wc -l < "$W/p30.txt"); agent VmRSS after: $(awk '/^VmRSS/ {print $2, $3}' "/proc/$AG/status"), VmHWM: $(awk '/^VmHWM/ {print $2, $3}' "/proc/$AG/status")"
