#!/usr/bin/env bash
# launch.sh - `diagport launch` against real .NET runtimes (the SDK's runtime on
# this machine, apps from tests/apps built offline): attach, resume, identity by
# cookie, re-attach after an agent restart, different uids, init mode, and
# connections that do not speak the protocol.
set -u
cd "$(dirname "$0")/../.."
T_NAME=launch
. tests/lib.sh # every script runs from the repository root
agent_setup launch

build_apps
APP="$B/apps/console/console.dll"

# wait_for FILE PATTERN SECONDS
start_agent() { # start_agent NAME SOCKET [as-user]
  if [ $# -ge 3 ]; then
    setpriv --reuid "$3" --regid "$3" --clear-groups "$D" launch --socket "$2" 2> "$W/$1.log" &
  else
    "$D" launch --socket "$2" 2> "$W/$1.log" &
  fi
  PIDS+=($!); AGENT=$!
  local i; for ((i = 0; i < 100; i++)); do [ -S "$2" ] && return 0; sleep 0.02; done; return 1
}

# 1. suspend: the app waits for a monitor; the agent resumes it at once and learns who it is.
S=$W/a.sock
start_agent a "$S"
DOTNET_DiagnosticPorts=$S,connect,suspend dotnet "$APP" sleep 30 > "$W/app1.out" 2>&1 & APP1=$!; PIDS+=($APP1)
check suspend-resumed wait_for "$W/app1.out" READY 10
check attached-with-info wait_for "$W/a.log" "\"event\":\"attached\",\"pid\":$APP1,.*\"assembly\":\"console\",\"runtime\":\"10\." 10

# 2. two runtimes on one agent: each attached under its own uid (cookie)
DOTNET_DiagnosticPorts=$S,connect,nosuspend dotnet "$APP" sleep 30 > "$W/app2.out" 2>&1 & APP2=$!; PIDS+=($APP2)
check second-runtime wait_for "$W/a.log" "\"pid\":$APP2," 10
u1=$(grep "\"pid\":$APP1," "$W/a.log" | head -1 | sed 's/.*"uid":"\([^"]*\)".*/\1/')
u2=$(grep "\"pid\":$APP2," "$W/a.log" | head -1 | sed 's/.*"uid":"\([^"]*\)".*/\1/')
WHY="uids '$u1' and '$u2'"; check distinct-uids test -n "$u1" -a -n "$u2" -a "$u1" != "$u2"

# 3. agent restart while the apps run: both re-attach, same uids, apps never stopped
kill -TERM $AGENT; wait $AGENT 2>/dev/null
WHY="socket left behind"; check socket-removed-on-exit test ! -e "$S"
start_agent b "$S"
check reattach-app1 wait_for "$W/b.log" "\"uid\":\"$u1\"" 10
check reattach-app2 wait_for "$W/b.log" "\"uid\":\"$u2\"" 10
check apps-kept-running kill -0 $APP1 $APP2

# 4. a runtime that goes away is detached after the grace period
kill -9 $APP2; wait $APP2 2>/dev/null
check detached-after-exit wait_for "$W/b.log" "\"event\":\"detached\",\"pid\":$APP2," 10
WHY="app1 was detached"; check live-runtime-kept bash -c "! grep -q '\"detached\",\"pid\":$APP1,' '$W/b.log'"

# 5. hostile or broken connections do not stop the port: wrong magic, short advertise, silence
/usr/bin/python3 - "$S" <<'PY'
import socket, sys, time
p = sys.argv[1]
def conn(data, hold=0.0):
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM); s.connect(p)
    if data: s.sendall(data)
    time.sleep(hold); s.close()
conn(b"GET / HTTP/1.1\r\n\r\n" + b"x" * 100)
conn(b"ADVR_V1\x00" + b"\x01" * 10)
conn(b"", hold=0.6)                      # says nothing past the advertise deadline
conn(b"\x00" * 100000)
PY
DOTNET_DiagnosticPorts=$S,connect,suspend timeout 20 dotnet "$APP" exit 0 > "$W/app3.out" 2>&1 & APP3=$!
check port-survives-garbage wait_for "$W/app3.out" READY 10
wait $APP3 2>/dev/null
kill -TERM $AGENT; wait $AGENT 2>/dev/null

# 5b. more runtimes come and go than the table holds (64): every suspended start is still resumed at once
start_agent f "$W/f.sock"
slow=0
for i in $(seq 1 80); do
  t0=$(date +%s%N)
  DOTNET_DiagnosticPorts=$W/f.sock,connect,suspend timeout 10 dotnet "$APP" exit 0 > /dev/null 2>&1 || slow=$((slow + 100))
  [ $(( ($(date +%s%N) - t0) / 1000000 )) -gt 300 ] && slow=$((slow + 1))
done
WHY="$slow of 80 starts waited over 300 ms or failed (one over 300 ms is what the old refusal did)"; check churn-beyond-table-size test "$slow" -eq 0
kill -TERM $AGENT; wait $AGENT 2>/dev/null

# 6. different users: the agent as nobody, the app as root; then the other way round
mkdir -m 1777 "$W/shared"   # a volume both users can write, as an emptyDir is
S2=$W/shared/u.sock
WHY="agent as nobody did not create its socket: $(cat "$W/c.log" 2>/dev/null)"
check agent-as-nobody-listens start_agent c "$S2" 65534
DOTNET_DiagnosticPorts=$S2,connect,suspend timeout 20 dotnet "$APP" exit 0 > "$W/app4.out" 2>&1
check app-root-agent-nobody grep -q READY "$W/app4.out"
kill -TERM $AGENT; wait $AGENT 2>/dev/null
start_agent d "$S2"
DOTNET_DiagnosticPorts=$S2,connect,suspend HOME=$W/shared timeout 20 setpriv --reuid 65534 --regid 65534 --clear-groups dotnet "$APP" exit 0 > "$W/app5.out" 2>&1
check app-nobody-agent-root grep -q READY "$W/app5.out"
kill -TERM $AGENT; wait $AGENT 2>/dev/null

# 7. init mode: the app's exit status, 128+N for a signal, signals forwarded
timeout 20 "$D" launch --socket "$W/i.sock" -- dotnet "$APP" exit 7 > /dev/null 2> "$W/i.log"; rc=$?
WHY="exit status $rc"; check init-exit-status test $rc -eq 7
check init-attached grep -q '"event":"attached"' "$W/i.log"
timeout 20 "$D" launch --socket "$W/k.sock" -- sh -c 'kill -KILL $$' 2>/dev/null; rc=$?
WHY="exit status $rc"; check init-killed-by-signal test $rc -eq 137
"$D" launch --socket "$W/t.sock" -- dotnet "$APP" signal > "$W/t.out" 2>/dev/null & L=$!
PIDS+=($L)
wait_for "$W/t.out" READY 10
kill -TERM $L; wait $L; rc=$?
WHY="exit status $rc"; check init-forwards-sigterm test $rc -eq 0
# init mode: the agent enters its sandbox after starting the app, which must not inherit it
"$D" launch --socket "$W/s.sock" -- sh -c 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status; sleep 1' > "$W/s.out" 2>/dev/null & L=$!
sleep 0.5
agent_sc=$(grep '^Seccomp:' /proc/$L/status | awk '{print $2}')
wait $L
WHY="app: $(tr '\n' ' ' < "$W/s.out"), agent Seccomp $agent_sc"
check init-app-not-sandboxed bash -c "grep -q '^Seccomp:[[:space:]]*0' '$W/s.out' && grep -q '^NoNewPrivs:[[:space:]]*0' '$W/s.out' && [ '$agent_sc' = 2 ]"
check init-app-saw-sigterm grep -q SIGTERM "$W/t.out"
DOTNET_DiagnosticPorts=/somewhere/else.sock,nosuspend timeout 20 "$D" launch --socket "$W/e.sock" -- sh -c 'echo "$DOTNET_DiagnosticPorts"' > "$W/e.out" 2>/dev/null
WHY="got '$(cat "$W/e.out")'"; check init-appends-to-existing-ports grep -qx "/somewhere/else.sock,nosuspend;$W/e.sock,nosuspend,connect" "$W/e.out"

# 8. a socket path the runtime cannot use (>= 108 bytes) is refused
long=$W/$(printf 'x%.0s' $(seq 1 120)).sock
timeout 20 "$D" launch --socket "$long" 2> "$W/long.err"; rc=$?
WHY="exit $rc: $(cat "$W/long.err")"; check long-socket-path-refused grep -q "the limit is 107" "$W/long.err"

kill -9 $APP1 2>/dev/null
exit 0
