#!/usr/bin/env bash
# bench/nettrace.sh - traces (issue 5): measures and prints; never gates.
#   1. a heavy trace streamed through the agent: the webapp spinning and allocating under
#      /trace with the sample profiler and the runtime's GC, exception, contention and JIT events
#      at Verbose (plus rundown), DURATION seconds; the agent's CPU time and memory while it
#      streams (from /proc), the bytes the client got, and that none were lost: the stream is
#      whole (its end tag) and the runtime dropped no events (sequence numbers)
#   2. reading that trace: diagport's reader in-process (bench/bench_nettrace.c, 64 KiB pieces,
#      RUNS runs) side by side with TraceEvent (tests/apps/tracecount, its own Stopwatch around
#      opening the file and Process(), RUNS runs), and the whole commands with hyperfine
# Runs alone after `make` and `scripts/prereqs.sh bench`. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: DURATION (10), RUNS (10), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
DURATION=${DURATION:-10}
RUNS=${RUNS:-10}
W=$(mktemp -d /tmp/dp-bench-nettrace.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
TRACEEVENT_DIR=$(dirname "$(find "$PWD/build/tools/dotnet-trace/.store" -name Microsoft.Diagnostics.Tracing.TraceEvent.dll 2>/dev/null | head -1)")
[ -f "$TRACEEVENT_DIR/Microsoft.Diagnostics.Tracing.TraceEvent.dll" ] || die "no TraceEvent: scripts/prereqs.sh bench installs dotnet-trace"
export TRACEEVENT_DIR
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"
mkdir -p "$B/bench"
cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -Ibench -o "$B/bench/bench_nettrace" bench/bench_nettrace.c "$B/libdiagport.a" \
	$(pkg-config --libs jansson yaml-0.1 zlib) -lpthread || die "cannot build bench/bench_nettrace.c"

P=$(free_port); U=http://127.0.0.1:$P
"$D" launch --socket "$W/port" --urls "$U" --dumps "$W" 2> "$W/agent.log" & AG=$!; PIDS+=("$AG")
AP=$(free_port)
DOTNET_DiagnosticPorts=$W/port,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:$AP dotnet "$B/apps/webapp/webapp.dll" \
	> "$W/app.out" 2>&1 & PIDS+=($!)
for _ in $(seq 1 300); do grep -q READY "$W/app.out" && curl -s "$U/processes" | grep -q pid && break; sleep 0.1; done
curl -s "$U/processes" | grep -q pid || die "the webapp did not attach: $(tail -3 "$W/app.out")"

echo "== nettrace benchmarks (issue 5): $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (work tree differs)')"
echo "diagport $(cat VERSION); .NET $(dotnet --list-runtimes | awk '/NETCore.App/ {v = $2} END {print v}'); TraceEvent as shipped in dotnet-trace $(basename "$(dirname "$(dirname "$(dirname "$TRACEEVENT_DIR")")")")"

cat > "$W/heavy.json" << 'EOF'
{"providers":[{"name":"Microsoft-DotNETCore-SampleProfiler","eventLevel":"Informational","keywords":"0"},
 {"name":"Microsoft-Windows-DotNETRuntime","eventLevel":"Verbose","keywords":"0x14C14FCCBD"}],
 "requestRundown":true,"bufferSizeInMB":256}
EOF
echo; echo "== 1. a heavy trace through the agent: ${DURATION}s, the webapp spinning (2 threads) and allocating"
curl -s "http://127.0.0.1:$AP/high-cpu?seconds=$((DURATION + 5))" > /dev/null
curl -s "http://127.0.0.1:$AP/high-cpu?seconds=$((DURATION + 5))" > /dev/null
( for i in $(seq 1 $((DURATION * 4))); do curl -s "http://127.0.0.1:$AP/memory-leak?mb=8" > /dev/null; sleep 0.25; done ) &
ALLOC=$!; PIDS+=("$ALLOC")
cpu0=$(awk '{print $14 + $15}' "/proc/$AG/stat"); hwm0=$(awk '/^VmHWM/ {print $2}' "/proc/$AG/status")
( peak=0; while kill -0 "$AG" 2> /dev/null && [ ! -e "$W/done" ]; do
	r=$(awk '/^VmRSS/ {print $2}' "/proc/$AG/status"); [ "${r:-0}" -gt "$peak" ] && peak=$r; echo "$peak" > "$W/rss-peak"; sleep 0.05
  done ) & PIDS+=($!)
t0=$(date +%s.%N)
out=$(curl -s -o "$W/heavy.nettrace" -w '%{http_code} %{size_download} %{time_total}' -H 'Content-Type: application/json' \
	--data-binary "@$W/heavy.json" "$U/trace?durationSeconds=$DURATION")
rc=$?
touch "$W/done"
cpu1=$(awk '{print $14 + $15}' "/proc/$AG/stat"); hwm1=$(awk '/^VmHWM/ {print $2}' "/proc/$AG/status")
read -r code size secs <<< "$out"
"$D" nettrace stats "$W/heavy.nettrace" > "$W/heavy.stats" 2> "$W/heavy.err"; src=$?
echo "   HTTP $code, curl exit $rc, $size bytes in $secs s ($(awk -v b="$size" -v s="$secs" 'BEGIN {printf "%.2f", b / s / 1e6}') MB/s)"
echo "   whole: $([ $src = 0 ] && echo "yes (end tag read)" || echo "NO: $(cat "$W/heavy.err")"); events $(jq .totalEvents "$W/heavy.stats" 2> /dev/null), dropped by the runtime $(jq .dropped "$W/heavy.stats" 2> /dev/null), stacks $(jq .stacks "$W/heavy.stats" 2> /dev/null)"
echo "   agent: CPU $(( (cpu1 - cpu0) * 10 )) ms over the trace ($(awk -v c=$((cpu1 - cpu0)) -v s="$secs" 'BEGIN {printf "%.1f", c / 100 / s * 100}') % of one core); VmRSS peak $(cat "$W/rss-peak") KiB, VmHWM $hwm0 -> $hwm1 KiB"
kill "$ALLOC" 2> /dev/null

echo; echo "== 2. reading the trace ($(stat -c %s "$W/heavy.nettrace") bytes), $RUNS runs each"
"$B/bench/bench_nettrace" "$W/heavy.nettrace" "$RUNS"
for i in $(seq 1 "$RUNS"); do dotnet "$B/apps/tracecount/tracecount.dll" "$W/heavy.nettrace" | jq .seconds; done | sort -g > "$W/te.times"
awk -v b="$(stat -c %s "$W/heavy.nettrace")" '{v[NR] = $1} END {m = v[int((NR + 1) / 2)]; printf "TraceEvent (EventPipeEventSource, in its process): median %.1f ms (%.0f MB/s), best %.1f ms (%.0f MB/s)\n", m * 1e3, b / m / 1e6, v[1] * 1e3, b / v[1] / 1e6}' "$W/te.times"
if command -v hyperfine > /dev/null; then
	hyperfine -N --warmup 2 --runs "$RUNS" --export-json "$W/hf.json" \
		-n "diagport nettrace stats" "$D nettrace stats $W/heavy.nettrace" \
		-n "TraceEvent (dotnet tracecount.dll)" "dotnet $B/apps/tracecount/tracecount.dll $W/heavy.nettrace" 2>&1 | grep -E "Time|±|faster|diagport|TraceEvent" | head -8
fi
exit 0
