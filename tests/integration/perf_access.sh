#!/usr/bin/env bash
# tests/integration/perf_access.sh - what /trace?engine=perf needs, checked first and refused by name (403,
# the setting and the fix in the detail), with the real kernel's rules, the agent sandboxed:
#   - the agent as nobody, the app as root: the agent may not read the app's memory map (ptrace rights);
#   - both as nobody: user frames are sampled; kernel frames only if kernel.perf_event_paranoid allows an
#     unprivileged process (<= 1): at 2 (this machine's) kernel=auto samples user space and the profile says
#     why, kernel=true is refused naming the sysctl;
#   - event=cycles where the machine has no cycles counter (as Debian's `perf stat -e cycles` says):
#     refused naming event=cpu-clock;
#   - a seccomp filter refusing perf_event_open with EPERM, installed before the agent starts (what a
#     container runtime's default profile does to a container without CAP_PERFMON): refused naming
#     CAP_PERFMON and `diagport inject --perf`;

set -u
cd "$(dirname "$0")/../.."
T_NAME=perf-access
. tests/lib.sh
agent_setup perfaccess
build_apps
PARANOID=$(cat /proc/sys/kernel/perf_event_paranoid)
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -o "$W/seccomp_deny" tests/integration/seccomp_deny.c -lseccomp \
	2> "$W/cc.log" || { fail build-seccomp-deny "$(cat "$W/cc.log")"; exit 0; }
chmod 0777 "$W"

# agent_with DIR CMD...: an agent (no token, sandboxed) started through CMD (a uid change, a seccomp filter)
# with DIR its socket and dumps directory, and the webapp attached to it; sets U
agent_with() {
	local dir=$1
	shift
	mkdir -m 0777 "$W/$dir"
	"$@" "$D" launch --socket "$W/$dir/port" --urls http://127.0.0.1:0 --no-auth --dumps "$W/$dir" 2> "$W/$dir/agent.log" &
	PIDS+=($!)
	U=http://127.0.0.1:$(listening_port "$W/$dir/agent.log" urls 10 "$!")
	start_webapp "$W/$dir/app.out" "$W/$dir/port" "$U" || fail "$dir-app-attached" "$(tail -3 "$W/$dir/app.out")"
}
# perf_get FILE [QUERY]: a 1 s perf profile from the agent at U into $W/FILE; sets CODE and WHY (the answer)
perf_get() {
	CODE=$(curl -s -o "$W/$1" -w '%{http_code}' "$U/trace?engine=perf&durationSeconds=1${2:+&$2}")
	WHY="$CODE $(head -c 1000 "$W/$1")"
}

# 1. agent nobody, app root (the agent's socket is world-connectable)
agent_with a1 setpriv --reuid 65534 --regid 65534 --clear-groups
perf_get r1.json
check ptrace-refused-403 test "$CODE" = 403
check ptrace-refused-names-uids grep -q 'the agent (uid 65534) may not read the memory map of pid [0-9]* (uid 0)' "$W/r1.json"
check ptrace-refused-names-fix grep -q "CAP_SYS_PTRACE" "$W/r1.json"
kill "$APP" 2> /dev/null

# 2. both nobody: init mode, the app started by the agent
mkdir -m 0777 "$W/a2"
DLL=$PWD/$B/apps/webapp/webapp.dll
( cd "$W/a2" && exec env HOME="$W/a2" ASPNETCORE_URLS=http://127.0.0.1:0 setpriv --reuid 65534 --regid 65534 --clear-groups \
	"$D" launch --socket "$W/a2/port" --urls http://127.0.0.1:0 --no-auth --dumps "$W/a2" -- dotnet "$DLL" \
	> "$W/a2/app.out" 2> "$W/a2/agent.log" ) & A2=$!; PIDS+=($A2)
P=$(listening_port "$W/a2/agent.log" urls 10 "$A2"); U=http://127.0.0.1:$P
wait_for "$W/a2/app.out" READY 30
A2PID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/a2/app.out")
AURL2=$(sed -n 's/^LISTENING \(http:.*\)$/\1/p' "$W/a2/app.out" | head -1)
for _ in $(seq 1 100); do curl -s "$U/processes" | grep -q pid && break; sleep 0.1; done
(curl -s "$AURL2/high-cpu?seconds=6" > /dev/null &)
eventually 5 bash -c "grep -qx hot-loop /proc/$A2PID/task/*/comm" # the spinning thread is there
CODE=$(curl -s -o "$W/r2.svg" -w '%{http_code}' "$U/trace?engine=perf&durationSeconds=2&format=flamegraph")
curl -s -o "$W/r2.folded" "$U/trace?engine=perf&durationSeconds=2"
WHY="$CODE $(head -c 600 "$W/r2.svg"); folded: $(head -c 400 "$W/r2.folded")"
check same-uid-200 test "$CODE" = 200
check same-uid-managed-frames grep -q 'webapp.dll!HotLoop.Spin' "$W/r2.folded"
if [ "$PARANOID" -ge 2 ]; then
	check paranoid-user-only bash -c "test -s '$W/r2.folded' && ! grep -q '\[kernel\]!' '$W/r2.folded'"
	check paranoid-note-in-graph grep -q "kernel frames not sampled: kernel.perf_event_paranoid is $PARANOID and the agent has no CAP_PERFMON" "$W/r2.svg"
	perf_get r3.json kernel=true
	check kernel-true-refused-403 test "$CODE" = 403
	check kernel-true-names-sysctl grep -q "kernel.perf_event_paranoid is $PARANOID" "$W/r3.json"
else
	check paranoid-kernel-frames grep -q '\[kernel\]!' "$W/r2.folded"
fi

# event=cycles: the machine's own answer, judged by Debian's perf (a virtual machine often has no counter)
perf_get r6.txt event=cycles
if perf stat -e cycles true 2>&1 | grep -q 'not supported'; then
	check cycles-absent-403 test "$CODE" = 403
	check cycles-absent-names-fix grep -q 'no CPU cycles counter.*use event=cpu-clock' "$W/r6.txt"
else
	check cycles-present-200 test "$CODE" = 200
fi
kill -TERM "$A2" 2> /dev/null # init mode: the agent ends the app and exits with it
wait "$A2" 2> /dev/null

# 3. perf_event_open refused by a seccomp filter (EPERM), as a container runtime's default profile does
agent_with a3 "$W/seccomp_deny" perf_event_open
perf_get r4.json
check seccomp-refused-403 test "$CODE" = 403
check seccomp-refused-names-fix grep -q 'CAP_PERFMON.*diagport inject --perf' "$W/r4.json"
# the agent is whole after the refusals: an EventPipe profile still works
CODE=$(curl -s -o "$W/r5.txt" -w '%{http_code}' "$U/trace?durationSeconds=1&format=folded")
WHY="$CODE $(head -c 300 "$W/r5.txt")"
check eventpipe-still-works test "$CODE" = 200
