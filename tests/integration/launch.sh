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
# start_agent NAME SOCKET [as-user]: an agent on SOCKET, its HTTP API on a port it picks (every agent here would
# otherwise bind the default 127.0.0.1:52323, which any other agent on the machine may hold); returns once it
# says it is listening (socket and HTTP ready), 1 if it does not within 10 s or exits
start_agent() {
  if [ $# -ge 3 ]; then
    setpriv --reuid "$3" --regid "$3" --clear-groups "$D" launch --socket "$2" --urls http://127.0.0.1:0 2> "$W/$1.log" &
  else
    "$D" launch --socket "$2" --urls http://127.0.0.1:0 2> "$W/$1.log" &
  fi
  PIDS+=($!); AGENT=$!
  listening_port "$W/$1.log" urls 10 "$AGENT" > /dev/null
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

# 5b. more runtimes come and go than the table holds (64). The defect this guards against is a wait: a full table
# that refused a new runtime's advertise (while every entry was a runtime gone within its 3 s grace period) left
# that runtime suspended, retrying, until one of them expired. It is counted, not timed: stand-in runtimes
# (fake_runtimes) advertise, take the ResumeRuntime (answering any command before it as a runtime that does not
# know it, and coming back on a new connection, as runtimes do) and go without reconnecting, as a runtime that
# exits just after its resume does, so each stays in the table for the grace period; 64 fill it, and each of 16 more
# must be resumed on its first advertise (the agent drops the one gone longest), none refused.
# fake_runtimes SOCKET N [M]: N stand-ins, then M more, one after another: "R F R2 F2 S", how many of the N were
# resumed and refused, the same of the M, and the seconds it all took
fake_runtimes() {
  /usr/bin/python3 - "$1" "$2" "${3:-0}" <<'PY'
import os, socket, struct, sys, time
path, n, m = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
def one(i):
    cookie = os.urandom(16)
    for _ in range(3):  # as a runtime does: a new connection after each command that is not ResumeRuntime
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(10)
        s.connect(path)
        s.sendall(b"ADVR_V1\0" + cookie + struct.pack("<QH", 4000000 + i, 0))
        head = b""
        while len(head) < 20:
            b = s.recv(20 - len(head))
            if not b:
                break
            head += b
        if len(head) < 20:  # closed without a command: refused
            s.close()
            return False
        size, cset, cid = struct.unpack("<HBB", head[14:18])
        rest = size - 20
        while rest > 0:
            rest -= len(s.recv(rest))
        if (cset, cid) == (0x04, 0x01):  # ResumeRuntime: answered OK, then gone
            s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 24, 0xFF, 0x00, 0) + struct.pack("<I", 0))
            s.close()
            return True
        # another command first (the agent's exceptions session, on the first connection): refused as a runtime
        # that does not know it refuses it (0x80131384 unknown command), and the next connection comes
        s.sendall(b"DOTNET_IPC_V1\0" + struct.pack("<HBBH", 24, 0xFF, 0xFF, 0) + struct.pack("<I", 0x80131384))
        s.close()
    return False
t0 = time.monotonic()
a = [one(i) for i in range(n)]
b = [one(n + i) for i in range(m)]
print("%d %d %d %d %.2f" % (sum(a), n - sum(a), sum(b), m - sum(b), time.monotonic() - t0))
PY
}
start_agent f "$W/f.sock"
read -r r1 f1 r2 f2 secs <<< "$(fake_runtimes "$W/f.sock" 64 16)"
# the 80 took far less than the grace period (3 s), or the table was not full of runtimes within it
WHY="64 to fill the table: $r1 resumed, $f1 refused; 16 more: $r2 resumed, $f2 refused; in $secs s (under 2 s?)"
check full-table-resumes-new test "$r1:$f1:$r2:$f2" = 64:0:16:0 -a "${secs%.*}" -lt 2
# a real suspended runtime while the table is full of runtimes gone within their grace period: resumed
fake_runtimes "$W/f.sock" 64 > "$W/fill2.out" # R F R2 F2 S
DOTNET_DiagnosticPorts=$W/f.sock,connect,suspend timeout 10 dotnet "$APP" exit 0 > "$W/full.out" 2>&1; rc=$?
WHY="exit $rc: $(tail -2 "$W/full.out"); fill: $(cat "$W/fill2.out")"; check full-table-real-runtime-resumed grep -q READY "$W/full.out"
# Churn: 80 real suspended starts, each through the agent, and between every other two the same app with no
# diagnostic port. Each must start (a runtime left suspended is killed at 10 s) and be attached; none may be
# held by the agent: the median start through the agent may not exceed the median without it by 150 ms (a
# timer-held resume adds its period to every start; on a loaded 2-core machine single starts of either kind
# take 0.1 to 0.8 s, and the two medians of 40 paired starts were within 15 ms of each other).
: > "$W/churn.ms"; : > "$W/plain.ms"; failed=0
ms_since() { echo $(( ($(date +%s%N) - $1) / 1000000 )); }
for i in $(seq 1 80); do
  t0=$(date +%s%N)
  DOTNET_DiagnosticPorts=$W/f.sock,connect,suspend timeout 10 dotnet "$APP" exit 0 > /dev/null 2>&1 || failed=$((failed + 1))
  ms_since "$t0" >> "$W/churn.ms"
  if [ $((i % 2)) = 1 ]; then
    t0=$(date +%s%N)
    timeout 10 dotnet "$APP" exit 0 > /dev/null 2>&1
    ms_since "$t0" >> "$W/plain.ms"
  fi
done
median() { sort -n "$1" | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }
attached=$(grep -c '"event":"attached"' "$W/f.log")
WHY="$failed of 80 suspended starts failed or were never resumed; the agent attached $attached runtimes"
check churn-every-start-resumed test "$failed" = 0 -a "$attached" -ge 81
mc=$(median "$W/churn.ms"); mp=$(median "$W/plain.ms")
WHY="median start through the agent $mc ms, without a port $mp ms (slowest $(sort -n "$W/churn.ms" | tail -3 | tr '\n' ' ')ms)"
check churn-not-held test "$mc" -le $((mp + 150))
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
timeout 20 "$D" launch --socket "$W/i.sock" --urls http://127.0.0.1:0 -- dotnet "$APP" exit 7 > /dev/null 2> "$W/i.log"; rc=$?
WHY="exit status $rc"; check init-exit-status test $rc -eq 7
check init-attached grep -q '"event":"attached"' "$W/i.log"
timeout 20 "$D" launch --socket "$W/k.sock" --urls http://127.0.0.1:0 -- sh -c 'kill -KILL $$' 2>/dev/null; rc=$?
WHY="exit status $rc"; check init-killed-by-signal test $rc -eq 137
"$D" launch --socket "$W/t.sock" --urls http://127.0.0.1:0 -- dotnet "$APP" signal > "$W/t.out" 2>/dev/null & L=$!
PIDS+=($L)
wait_for "$W/t.out" READY 10
kill -TERM $L; wait $L; rc=$?
WHY="exit status $rc"; check init-forwards-sigterm test $rc -eq 0
# init mode: the agent enters its sandbox after starting the app, which must not inherit it
"$D" launch --socket "$W/s.sock" --urls http://127.0.0.1:0 -- sh -c 'grep -E "^(Seccomp|NoNewPrivs):" /proc/self/status; exec sleep 30' > "$W/s.out" 2>/dev/null & L=$!
PIDS+=($L)
wait_for "$W/s.out" NoNewPrivs 10
for _ in $(seq 1 100); do # until the agent has entered its sandbox (or 10 s), instead of a fixed half second
  agent_sc=$(awk '/^Seccomp:/ {print $2}' /proc/$L/status 2>/dev/null)
  [ "$agent_sc" = 2 ] && break
  sleep 0.1
done
kill -TERM $L; wait $L
WHY="app: $(tr '\n' ' ' < "$W/s.out"), agent Seccomp $agent_sc"
check init-app-not-sandboxed bash -c "grep -q '^Seccomp:[[:space:]]*0' '$W/s.out' && grep -q '^NoNewPrivs:[[:space:]]*0' '$W/s.out' && [ '$agent_sc' = 2 ]"
check init-app-saw-sigterm grep -q SIGTERM "$W/t.out"
DOTNET_DiagnosticPorts=/somewhere/else.sock,nosuspend timeout 20 "$D" launch --socket "$W/e.sock" --urls http://127.0.0.1:0 -- sh -c 'echo "$DOTNET_DiagnosticPorts"' > "$W/e.out" 2>/dev/null
WHY="got '$(cat "$W/e.out")'"; check init-appends-to-existing-ports grep -qx "/somewhere/else.sock,nosuspend;$W/e.sock,nosuspend,connect" "$W/e.out"

# 8. a socket path the runtime cannot use (>= 108 bytes) is refused
long=$W/$(printf 'x%.0s' $(seq 1 120)).sock
timeout 20 "$D" launch --socket "$long" 2> "$W/long.err"; rc=$?
WHY="exit $rc: $(cat "$W/long.err")"; check long-socket-path-refused grep -q "the limit is 107" "$W/long.err"

kill -9 $APP1 2>/dev/null
exit 0
