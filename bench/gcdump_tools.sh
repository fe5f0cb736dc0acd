#!/usr/bin/env bash
# bench/gcdump_tools.sh - a GC heap snapshot to a .gcdump file on disk: the agent (GET /gcdump) beside
# Microsoft's `dotnet-gcdump collect` on the same process, RUNS (5) runs each, alternating (ours, then the
# tool's, then ours...), so every pair is side by side on the same heap. Two heaps:
#   1. the webapp holding MB (170) MB of LeakedBuffer objects (64 KiB arrays: few, large objects)
#   2. tests/apps/heapobjects holding OBJECTS (2,000,000) small objects in a linked list (many objects)
# Measures and prints; never gates.
#   time      ours: curl's time_total for the whole answer; the tool's: /usr/bin/time's elapsed (its own
#             .NET startup included: that is what running it costs)
#   memory    ours: the agent's peak resident set (VmHWM, reset before each run through
#             /proc/PID/clear_refs) against its resident set just before; the tool's: /usr/bin/time's
#             maximum resident set
#   agreement `dotnet-gcdump report` of the last pair: total bytes and objects side by side
# Figures go to docs/BENCHMARKS.md by hand ("GC heap snapshots beside dotnet-gcdump").
# Knobs: RUNS (5), MB (170), OBJECTS (2000000), DIAGPORT (./diagport), BUILD (build).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
RUNS=${RUNS:-5}
MB=${MB:-170}
OBJECTS=${OBJECTS:-2000000}
W=$(mktemp -d /tmp/dp-bench.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
GCD=$PWD/$B/tools/dotnet-gcdump/dotnet-gcdump
[ -x "$GCD" ] || die "dotnet-gcdump is not installed (bash scripts/prereqs.sh test)"
[ -x /usr/bin/time ] || die "/usr/bin/time is not installed"
bash tests/apps/build.sh "$B/apps" > /dev/null || die "cannot build the test apps"
( . tests/apps/env.sh "$B/apps" && dotnet build tests/apps/heapobjects/heapobjects.csproj -c Release --nologo \
	-o "$B/apps/heapobjects" --artifacts-path "$B/apps/.artifacts" -nodeReuse:false -p:UseSharedCompilation=false \
	-p:UseAppHost=false > "$W/heapobjects.log" 2>&1 ) || die "cannot build tests/apps/heapobjects: $(tail -5 "$W/heapobjects.log")"

mkdir -p -m 0777 "$W/dumps"
P=$(free_port)
U=http://127.0.0.1:$P
"$D" launch --socket "$W/dumps/port" --urls "$U" --dumps "$W/dumps" --no-metrics 2> "$W/agent.log" &
AG=$!
PIDS+=("$AG")
start_webapp "$W/app.out" "$W/dumps/port" "$U" || die "the webapp did not start or attach: $(tail -3 "$W/app.out")"
held=$(curl -s "$AURL/memory-leak?mb=$MB")
kb() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }

# pairs: RUNS alternating snapshots of process APID, ours then the tool's
pairs() {
	local ours_t=() ours_m=() tool_t=() tool_m=() i t peak before e m f
	curl -s -o /dev/null "$U/gcdump?pid=$APID&format=stats" # a first snapshot: the heap settles (one induced GC)
	for i in $(seq 1 "$RUNS"); do
		echo 5 > "/proc/$AG/clear_refs"
		before=$(kb "$AG" VmRSS)
		t=$(curl -s -o "$W/ours.gcdump" -w '%{time_total}' "$U/gcdump?pid=$APID")
		peak=$(kb "$AG" VmHWM)
		ours_t+=("$t") ours_m+=("$peak")
		printf 'run %d  agent:          %6.2f s  peak RSS %7d kB (%d kB before)  %10d bytes\n' "$i" "$t" "$peak" "$before" \
			"$(stat -c %s "$W/ours.gcdump")"
		/usr/bin/time -f '%e %M' -o "$W/time" "$GCD" collect -p "$APID" -o "$W/tool.gcdump" > "$W/collect.out" 2>&1 ||
			die "dotnet-gcdump collect failed: $(tail -3 "$W/collect.out")"
		read -r e m < "$W/time"
		tool_t+=("$e") tool_m+=("$m")
		printf 'run %d  dotnet-gcdump:  %6.2f s  peak RSS %7d kB                     %10d bytes\n' "$i" "$e" "$m" \
			"$(stat -c %s "$W/tool.gcdump")"
	done
	echo "median  agent:         $(med "${ours_t[@]}") s, peak RSS $(med "${ours_m[@]}") kB"
	echo "median  dotnet-gcdump: $(med "${tool_t[@]}") s, peak RSS $(med "${tool_m[@]}") kB"
	echo "the last pair through dotnet-gcdump report:"
	for f in ours tool; do
		printf '  %-5s %s\n' "$f" "$("$GCD" report "$W/$f.gcdump" | head -2 | tr -s ' ' | tr '\n' ' ')"
	done
}
med() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }

echo "== 1. webapp pid $APID holding $held MB in LeakedBuffer objects; agent pid $AG; $RUNS runs each, alternating"
pairs
kill "$APP" 2>/dev/null
echo "== 2. heapobjects holding $OBJECTS small objects; $RUNS runs each, alternating"
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/heapobjects/heapobjects.dll" "$OBJECTS" > "$W/hob.out" 2>&1 &
PIDS+=($!)
wait_for "$W/hob.out" READY 60 || die "heapobjects did not start: $(tail -3 "$W/hob.out")"
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/hob.out")
for _ in $(seq 1 100); do curl -s "$U/processes" | grep -q "\"pid\":$APID" && break; sleep 0.1; done
pairs
