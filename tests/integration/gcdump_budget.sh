#!/usr/bin/env bash
# gcdump_budget.sh - /gcdump under a memory limit: tests/apps/heapobjects holds 2 million small objects (a
# .gcdump graph of ~130 MB at 64 bytes an object), the agent runs in its own mount namespace with a stand-in
# cgroup v2 directory bind-mounted over /sys/fs/cgroup (memory.max 120 MB, memory.current 20 MB of which 10 MB
# page cache: 82 MB of headroom, 3/4 of it for the graph). Before, the agent grew past its limit (98 MB for
# this heap) and a real cgroup killed it (under ulimit -v: "fatal: out of memory").
#   refused      the .gcdump is refused with 500, the detail naming the memory limit and the headroom (78 MB)
#   stats        format=stats still counts the heap (2,000,000 Node objects)
#   alive        the agent is still up, /healthz answers, and it stayed well under the limit (VmHWM < 80 MB)
#   unlimited    without the stand-in (no limit) the same heap gives a .gcdump that dotnet-gcdump reads
set -u
cd "$(dirname "$0")/../.."
T_NAME=gcdump-budget
. tests/lib.sh
agent_setup gcdump-budget
build_apps
( . tests/apps/env.sh "$B/apps" && dotnet build tests/apps/heapobjects/heapobjects.csproj -c Release --nologo \
	-o "$B/apps/heapobjects" --artifacts-path "$B/apps/.artifacts" -nodeReuse:false -p:UseSharedCompilation=false \
	-p:UseAppHost=false > "$W/heapobjects.log" 2>&1 ) || { fail build-heapobjects "$(tail -5 "$W/heapobjects.log")"; exit 0; }
GCD=$PWD/build/tools/dotnet-gcdump/dotnet-gcdump
[ -x "$GCD" ] || { fail tools "dotnet-gcdump is not installed (bash scripts/prereqs.sh test)"; exit 0; }
mkdir -p -m 0777 "$W/dumps" "$W/cg"
echo 120000000 > "$W/cg/memory.max"
echo 20000000 > "$W/cg/memory.current"
printf 'anon 10000000\nfile 10000000\n' > "$W/cg/memory.stat"
# start ARGS: the agent (in a private mount namespace, the stand-in cgroup over /sys/fs/cgroup with ARGS "cg")
start() {
	local cg=$1
	: > "$W/agent.log" # now, not in the background job: the last agent's listening line is not this one's
	unshare -m --propagation private bash -c '[ "$1" = cg ] && { mount --bind "$2/cg" /sys/fs/cgroup || exit 9; }
		exec "$3" launch --socket "$2/dumps/port" --urls http://127.0.0.1:0 --dumps "$2/dumps" --no-metrics' _ "$cg" "$W" \
		"$D" 2> "$W/agent.log" &
	AG=$!
	PIDS+=("$AG")
	U=http://127.0.0.1:$(listening_port "$W/agent.log" urls 10 "$AG") || return 1
}
start cg || { fail setup "the agent did not start: $(tail -3 "$W/agent.log")"; exit 0; }
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/heapobjects/heapobjects.dll" > "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/app.out" READY 60 || { fail setup "heapobjects did not start: $(tail -3 "$W/app.out")"; exit 0; }
for _ in $(seq 1 100); do curl -s "$U/processes" | grep -q heapobjects && break; sleep 0.1; done

c=$(code --max-time 120 "$U/gcdump")
WHY="HTTP $c: $(head -c 400 "$W/body")"
check refused jq -e '.status == 500 and (.detail | test("memory limit: the limit left 78 MB for the graph"))' "$W/body"
c=$(code --max-time 120 "$U/gcdump?format=stats&top=1")
WHY="HTTP $c: $(head -c 300 "$W/body")"
check stats grep -Eq '^ +2000000 +[0-9]+ +Node$' "$W/body"
hwm=$(awk '/VmHWM/ {print $2}' "/proc/$(pgrep -P "$AG" diagport || echo "$AG")/status" 2>/dev/null)
WHY="healthz $(curl -s -o /dev/null -w '%{http_code}' "$U/healthz"), VmHWM ${hwm:-?} kB"
check alive bash -c "[ \"\$(curl -s -o /dev/null -w '%{http_code}' $U/healthz)\" = 200 ] && [ -n '$hwm' ] && [ '${hwm:-0}' -lt 80000 ]"

kill "$AG"; wait "$AG" 2>/dev/null
start nocg || { fail setup "the agent did not restart: $(tail -3 "$W/agent.log")"; exit 0; }
for _ in $(seq 1 200); do curl -s "$U/processes" | grep -q heapobjects && break; sleep 0.1; done
c=$(code --max-time 120 "$U/gcdump")
cp "$W/body" "$W/h.gcdump"
"$GCD" report "$W/h.gcdump" > "$W/report.txt" 2>&1
WHY="HTTP $c; report: $(head -5 "$W/report.txt")"
check unlimited grep -Eq '^ +2,[0-9]{3},[0-9]{3}  GC Heap objects$' "$W/report.txt"
