#!/usr/bin/env bash
# bench/trace_tools.sh - traces and stacks beside dotnet-trace and dotnet-stack (issue 22): measures and prints;
# never gates.
#   The webapp (attached to the agent) serves wrk (-t2 -c16 on /pid) the whole time. Rounds alternate, each:
#   - a SECS s CPU trace through the agent, /trace?profile=Cpu (the nettrace), and the same as a CPU profile
#     (format=speedscope, made in the agent), against `dotnet-trace collect --providers` with the Cpu profile's
#     providers (Microsoft-DotNETCore-SampleProfiler, Microsoft-Windows-DotNETRuntime:0x14C14FCCBD:4) and
#     --duration, written as a nettrace, and again with --format speedscope (the tool converts after);
#   - /stacks against `dotnet-stack report -p PID`, STACKS times each.
#   For each: the time from the request (the command's start) to the last byte (its exit), the bytes, and the
#   peak RSS of who did the work: the agent's VmHWM over the capture (reset before it through
#   /proc/PID/clear_refs, so it is the peak during this capture, the agent's idle memory included), the tool's
#   maximum RSS from /usr/bin/time (the whole dotnet process: runtime, TraceEvent, the tool); and the app's
#   requests/s under it.
# Runs alone after `make` and `scripts/prereqs.sh test` (the tools in build/tools) and `scripts/prereqs.sh bench`
# (wrk). Figures go to docs/BENCHMARKS.md by hand. Knobs: SECS (10), ROUNDS (3), STACKS (5), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
SECS=${SECS:-10}
ROUNDS=${ROUNDS:-3}
STACKS=${STACKS:-5}
DT=$PWD/build/tools/dotnet-trace/dotnet-trace
DS=$PWD/build/tools/dotnet-stack/dotnet-stack
W=$(mktemp -d /tmp/dp-bench-trace-tools.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
for t in "$DT" "$DS"; do [ -x "$t" ] || die "$t not found: scripts/prereqs.sh test installs it"; done
for t in wrk curl /usr/bin/time; do command -v "$t" > /dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"

P=$(free_port); U=http://127.0.0.1:$P
"$D" launch --socket "$W/port" --urls "$U" --dumps "$W" --no-auth --no-metrics 2> "$W/agent.log" & AG=$!; PIDS+=("$AG")
AP=$(free_port)
DOTNET_DiagnosticPorts=$W/port,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:$AP dotnet "$B/apps/webapp/webapp.dll" \
	> "$W/app.out" 2>&1 & APP=$!; PIDS+=("$APP")
for _ in $(seq 1 300); do grep -q READY "$W/app.out" && curl -s "$U/processes" | grep -q pid && break; sleep 0.1; done
curl -s "$U/processes" | grep -q pid || die "the webapp did not attach: $(tail -3 "$W/app.out")"
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
wrk -t2 -c16 -d3s "http://127.0.0.1:$AP/pid" > /dev/null 2>&1 # JIT warm-up
curl -s -o /dev/null "$U/stacks?pid=$APID"                      # the app's first session (EventSource manifests)

# agent NAME URL: the capture through the agent; "seconds bytes peak_kB" on stdout
agent() {
	local out
	echo 5 > "/proc/$AG/clear_refs"
	out=$(curl -s -o "$W/$1.out" -w '%{time_total} %{size_download} %{http_code}' "$2")
	read -r t n c <<< "$out"
	[ "$c" = 200 ] || die "$1: HTTP $c $(head -c 300 "$W/$1.out")"
	echo "$t $n $(awk '/^VmHWM/ {print $2}' "/proc/$AG/status")"
}
# tool NAME FILE CMD...: the tool's command; "seconds bytes peak_kB" (bytes of FILE; "-": its stdout)
tool() {
	local name=$1 file=$2
	shift 2
	/usr/bin/time -f '%e %M' -o "$W/$name.time" "$@" > "$W/$name.stdout" 2> "$W/$name.err" || die "$name: $(tail -3 "$W/$name.err")"
	[ "$file" = - ] && file=$W/$name.stdout
	read -r t m < "$W/$name.time"
	echo "$t $(stat -c %s "$file") $m"
}
rps() { awk '/^Requests\/sec/ {print $2}' "$1"; }
PROV='Microsoft-DotNETCore-SampleProfiler:0:4,Microsoft-Windows-DotNETRuntime:0x14C14FCCBD:4'

echo "== traces and stacks beside dotnet-trace and dotnet-stack (issue 22): $(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (work tree differs)')"
echo "diagport $(cat VERSION); .NET $(dotnet --list-runtimes | awk '/NETCore.App/ {v = $2} END {print v}'); dotnet-trace $("$DT" --version | head -1); dotnet-stack $("$DS" --version | head -1); wrk -t2 -c16 on the webapp's /pid throughout"
echo
printf '%-22s %-5s %9s %11s %12s %10s\n' capture round seconds bytes peak_rss_kB app_req/s
for r in $(seq 1 "$ROUNDS"); do
	for who in agent-nettrace tool-nettrace agent-speedscope tool-speedscope; do
		rm -f "$W"/tool.* "$W"/*.out
		wrk -t2 -c16 -d"$((SECS + 4))s" "http://127.0.0.1:$AP/pid" > "$W/wrk.txt" 2>&1 & WP=$!
		sleep 1
		case $who in
		agent-nettrace) res=$(agent "$who" "$U/trace?pid=$APID&profile=Cpu&durationSeconds=$SECS") ;;
		agent-speedscope) res=$(agent "$who" "$U/trace?pid=$APID&profile=Cpu&durationSeconds=$SECS&format=speedscope") ;;
		tool-nettrace) res=$(tool "$who" "$W/tool.nettrace" "$DT" collect -p "$APID" --providers "$PROV" \
			--duration "00:00:00:$SECS" -o "$W/tool.nettrace") ;;
		tool-speedscope) res=$(tool "$who" "$W/tool.speedscope.json" "$DT" collect -p "$APID" --providers "$PROV" \
			--duration "00:00:00:$SECS" --format speedscope -o "$W/tool.nettrace") ;;
		esac
		wait "$WP"
		read -r t n m <<< "$res"
		printf '%-22s %-5s %9s %11s %12s %10s\n' "$who" "$r" "$t" "$n" "$m" "$(rps "$W/wrk.txt")"
	done
done
echo
echo "/stacks beside dotnet-stack report ($STACKS each, alternating, under the same load)"
wrk -t2 -c16 -d"$((STACKS * 6 + 10))s" "http://127.0.0.1:$AP/pid" > "$W/wrk.txt" 2>&1 & WP=$!
sleep 1
for r in $(seq 1 "$STACKS"); do
	read -r t n m <<< "$(agent stacks "$U/stacks?pid=$APID")"
	printf '%-22s %-5s %9s %11s %12s\n' agent-stacks "$r" "$t" "$n" "$m"
	read -r t n m <<< "$(tool dotnet-stack - "$DS" report -p "$APID")"
	printf '%-22s %-5s %9s %11s %12s\n' dotnet-stack-report "$r" "$t" "$n" "$m"
done
kill "$WP" 2> /dev/null
wait "$WP" 2> /dev/null
echo
echo "threads: agent $(grep -c '^Thread: ' "$W/stacks.out"), dotnet-stack $(grep -c '^Thread (' "$W/dotnet-stack.stdout")"
exit 0
