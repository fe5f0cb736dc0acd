#!/usr/bin/env bash
# connect_dir.sh - `diagport launch --connect-dir DIR` against real .NET
# runtimes that were not configured for the agent: apps started with TMPDIR=DIR
# and no DOTNET_DiagnosticPorts, found by their default sockets
# (dotnet-diagnostic-PID-KEY-socket). The routes work on them; a killed or
# exited app is dropped, a live one kept; stale socket files are ignored; a
# runtime reachable both ways is listed once; and what different uids can and
# cannot do. The agent runs with its sandbox on (the default) throughout.
set -u
cd "$(dirname "$0")/../.."
T_NAME=connect-dir
. tests/lib.sh # every script runs from the repository root
agent_setup cdir
stop_all() { { for p in "${PIDS[@]}"; do kill -9 "$p"; done; wait; } 2>/dev/null; }
# until_ok SECS CMD...: run CMD every 0.1 s until it succeeds; 1 when SECS pass first.
until_ok() { local i n=$(($1 * 10)); shift; for ((i = 0; i < n; i++)); do "$@" > /dev/null 2>&1 && return 0; sleep 0.1; done; return 1; }
# stale_socket PATH: a Unix socket file whose owner is gone, as a runtime killed by SIGKILL leaves it.
stale_socket() { /usr/bin/python3 -c 'import socket,sys; s=socket.socket(socket.AF_UNIX); s.bind(sys.argv[1])' "$1"; }

build_apps
APP="$B/apps/console/console.dll"
unset DOTNET_DiagnosticPorts
T=$W/tmp; mkdir -m 1777 "$T"      # the shared temp directory: /tmp in both containers of a pod
mkdir -m 1777 "$W/dumps"
S=$W/a.sock

# start_app NAME [ENV=VALUE...]: a console app with TMPDIR=$T, sleeping; sets APID once it is READY.
start_app() {
  local name=$1; shift
  env TMPDIR="$T" "$@" dotnet "$APP" sleep 120 > "$W/$name.out" 2>&1 &
  PIDS+=($!); APID=$!
  wait_for "$W/$name.out" READY 15
}
listed() { curl -s "$U/processes" | jqe --argjson p "$1" 'map(select(.pid == $p)) | length == 1'; }
not_listed() { curl -s "$U/processes" | jqe --argjson p "$1" 'map(select(.pid == $p)) | length == 0'; }
count() { curl -s "$U/processes" | jq length; }

# Before anything runs: a stale socket from a runtime that died, a name too long for sun_path,
# and files that only look like sockets of ours.
stale_socket "$T/dotnet-diagnostic-999999-12345-socket"
LONG=dotnet-diagnostic-$(printf '1%.0s' $(seq 1 90))-1-socket
touch "$T/$LONG" "$T/dotnet-diagnostic-12-x-socket" "$T/dotnet-diagnostic-1-2-socket.bak"

# 1. an app that knows nothing of the agent, started before it
start_app app1 DIAGPORT_TEST_MARK=connect-dir-42
A1=$APID
WHY="no default socket for $A1 in $T: $(ls "$T")"
check app-has-default-socket bash -c "ls '$T' | grep -q '^dotnet-diagnostic-$A1-[0-9]*-socket$'"
"$D" launch --socket "$S" --connect-dir "$T" --dumps "$W/dumps" --urls http://127.0.0.1:0 2> "$W/agent.log" & AG=$!; PIDS+=($AG)
U=http://127.0.0.1:$(listening_port "$W/agent.log" urls 10 "$AG")
check attached-on-first-scan wait_for "$W/agent.log" "\"event\":\"attached\",\"pid\":$A1,.*\"assembly\":\"console\"" 10
WHY="$(grep -E 'Seccomp|NoNewPrivs' /proc/$AG/status | tr '\n' ' ')"
check agent-sandboxed bash -c "grep -q '^Seccomp:[[:space:]]*2' /proc/$AG/status && grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$AG/status"
curl -s "$U/processes" > "$W/body"
WHY="$(cat "$W/body")"
check processes-real-pid jq -e --argjson p "$A1" 'length == 1 and .[0].pid == $p and .[0].name == "console"' "$W/body"
curl -s "$U/process?pid=$A1" > "$W/body"
WHY="$(cat "$W/body")"; check process-command-line jq -e '.commandLine | test("console\\.dll sleep 120$")' "$W/body"
curl -s "$U/env?pid=$A1" > "$W/body"
WHY="$(head -c 300 "$W/body")"; check env-has-app-variable jq -e '.DIAGPORT_TEST_MARK == "connect-dir-42" and has("DOTNET_DiagnosticPorts") == false' "$W/body"
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?pid=$A1&type=Mini")
elf=$(/usr/bin/python3 -c 'import struct,sys; b=open(sys.argv[1],"rb").read(18); print(b[:4] == b"\x7fELF" and struct.unpack("<H", b[16:18])[0] == 4)' "$W/core" 2>&1)
WHY="http $c, ELF core: $elf, $(head -c 100 "$W/core" | od -c | head -2 | tr '\n' ' ')"
check dump-mini-is-elf-core test "$c" = 200 -a "$elf" = True
WHY="left in dumps: $(ls -A "$W/dumps")"; check dump-leaves-nothing test -z "$(ls -A "$W/dumps")"
check stale-socket-not-listed not_listed 999999
WHY="$(grep -c skipped "$W/agent.log") skipped lines: $(cat "$W/agent.log")"
# time passing (1 s: two more scans of the directory), then still one line
check long-name-skipped-once bash -c "sleep 1; [ \$(grep -c '\"event\":\"skipped\",\"socket\":\"$LONG\"' '$W/agent.log') = 1 ]"

# 2. a second app, started after the agent; then a stale file for the first app's pid with another key
start_app app2
A2=$APID
WHY="processes: $(curl -s "$U/processes")"; check second-app-listed until_ok 5 listed "$A2"
WHY="processes: $(curl -s "$U/processes")"; check two-entries test "$(count)" = 2
stale_socket "$T/dotnet-diagnostic-$A1-1-socket"
sleep 1.5 # time passing: the scan has seen the stale file (a negative: nothing to wait on)
WHY="processes: $(curl -s "$U/processes")"; check stale-same-pid-not-confusing bash -c "[ \$(curl -s '$U/processes' | jq length) = 2 ] && curl -s '$U/processes' | jqe --argjson p $A1 'map(select(.pid == \$p)) | length == 1'"
curl -s "$U/process?pid=$A1" > "$W/body"
WHY="$(cat "$W/body")"; check stale-same-pid-still-served jq -e --argjson p "$A1" '.pid == $p' "$W/body"

# 3. kill -9 leaves the socket file behind (it refuses): dropped within seconds, the other one stays
kill -9 "$A2"; wait "$A2" 2>/dev/null
WHY="still listed: $(curl -s "$U/processes")"; check killed-app-dropped until_ok 5 not_listed "$A2"
WHY="socket file of $A2 gone: $(ls "$T")"; check killed-app-left-its-socket bash -c "ls '$T' | grep -q '^dotnet-diagnostic-$A2-'"
check killed-app-detached-event grep -q "\"event\":\"detached\",\"pid\":$A2," "$W/agent.log"
WHY="processes: $(curl -s "$U/processes")"; check live-app-kept listed "$A1"
WHY="app1 was detached"; check live-app-never-detached bash -c "! grep -q '\"detached\",\"pid\":$A1,' '$W/agent.log'"

# 4. an app that exits removes its socket: dropped
env TMPDIR="$T" dotnet "$APP" sleep 3 > "$W/app3.out" 2>&1 & A3=$!; PIDS+=($A3)
wait_for "$W/app3.out" READY 15
WHY="processes: $(curl -s "$U/processes")"; check exiting-app-listed until_ok 5 listed "$A3"
wait "$A3"
WHY="still listed: $(curl -s "$U/processes")"; check exited-app-dropped until_ok 5 not_listed "$A3"

# 5. known both ways (our port and its default socket): one entry, every route works
start_app app4 DOTNET_DiagnosticPorts="$S,connect,nosuspend"
A4=$APID
check both-ways-attached wait_for "$W/agent.log" "\"event\":\"attached\",\"pid\":$A4," 10
sleep 1.5 # both the advertise and the scan have had their turn
WHY="processes: $(curl -s "$U/processes")"; check both-ways-listed-once listed "$A4"
WHY="$(grep -c "\"pid\":$A4," "$W/agent.log") lines"; check both-ways-one-attach-event test "$(grep -c "\"event\":\"attached\",\"pid\":$A4," "$W/agent.log")" = 1
curl -s "$U/env?pid=$A4" > "$W/body"
WHY="$(head -c 300 "$W/body")"; check both-ways-env jq -e --arg s "$S,connect,nosuspend" '.DOTNET_DiagnosticPorts == $s' "$W/body"
# a suspended app: whichever way finds it first, it is still resumed
env TMPDIR="$T" DOTNET_DiagnosticPorts="$S,connect,suspend" dotnet "$APP" sleep 120 > "$W/app5.out" 2>&1 & A5=$!; PIDS+=($A5)
check both-ways-suspended-resumed wait_for "$W/app5.out" READY 10
WHY="processes: $(curl -s "$U/processes")"; check both-ways-suspended-listed-once until_ok 5 listed "$A5"
WHY="processes: $(curl -s "$U/processes")"; check three-entries test "$(count)" = 3
kill -9 "$A4" "$A5"; wait "$A4" "$A5" 2>/dev/null
WHY="still listed: $(curl -s "$U/processes")"; check both-ways-killed-dropped until_ok 6 bash -c "curl -s '$U/processes' | jqe --argjson a $A4 --argjson b $A5 'map(select(.pid == \$a or .pid == \$b)) | length == 0'"

# 5b. a suspended app that waited for the agent: the first scan usually finds it before its next
# connect to our port does; it must still be resumed, and listed once
T3=$W/tmp3; mkdir -m 1777 "$T3"; S3=$W/s3.sock
env TMPDIR="$T3" DOTNET_DiagnosticPorts="$S3,connect,suspend" dotnet "$APP" sleep 120 > "$W/app8.out" 2>&1 & A8=$!; PIDS+=($A8)
until_ok 10 bash -c "ls '$T3' | grep -q '^dotnet-diagnostic-$A8-'"
sleep 1 # its connect retries are 500 ms apart by now
WHY="$(cat "$W/app8.out")"; check suspended-waits-for-agent bash -c "! grep -q READY '$W/app8.out'"
"$D" launch --socket "$S3" --connect-dir "$T3" --urls http://127.0.0.1:0 2> "$W/agent4.log" & AG4=$!; PIDS+=($AG4)
U4=http://127.0.0.1:$(listening_port "$W/agent4.log" urls 10 "$AG4")
WHY="log: $(cat "$W/agent4.log")"; check suspended-found-first-resumed wait_for "$W/app8.out" READY 10
WHY="processes: $(curl -s "$U4/processes")"
check suspended-found-first-listed-once until_ok 5 bash -c "curl -s '$U4/processes' | jqe --argjson p $A8 'length == 1 and .[0].pid == \$p'"
WHY="$(cat "$W/agent4.log")"; check suspended-found-first-one-event test "$(grep -c '"event":"attached"' "$W/agent4.log")" = 1
kill -TERM $AG4; wait $AG4; kill -9 $A8; wait $A8 2>/dev/null

# 6. the probes cost the app nothing visible: still alive, printed nothing but its own lines and createdump's
check probed-app-alive kill -0 "$A1"
WHY="$(cat "$W/app1.out")"; check probed-app-output-clean bash -c "! grep -vE '^(MAIN|READY) |^\[createdump\] ' '$W/app1.out'"
kill -TERM $AG; wait $AG; rc=$?
WHY="exit $rc"; check agent-stops-cleanly test $rc -eq 0

# 7. uids. The runtime makes its default socket 0600, owned by the app's user: an agent of
# another (non-root) uid cannot connect, and says so; the same uid can; root can.
T2=$W/tmp2; mkdir -m 1777 "$T2"
env TMPDIR="$T2" dotnet "$APP" sleep 120 > "$W/app6.out" 2>&1 & A6=$!; PIDS+=($A6)
wait_for "$W/app6.out" READY 15
WHY="$(ls -l "$T2" | grep dotnet-diagnostic)"
check default-socket-mode-0600 bash -c "stat -c '%a %U' '$T2'/dotnet-diagnostic-$A6-*-socket | grep -qx '600 root'"
DIAGPORT_CONNECT_DIR=$T2 setpriv --reuid 65534 --regid 65534 --clear-groups "$D" launch --socket "$T2/agent.sock" \
  --urls http://127.0.0.1:0 2> "$W/agent2.log" & AG2=$!; PIDS+=($AG2)
U2=http://127.0.0.1:$(listening_port "$W/agent2.log" urls 10 "$AG2")
check other-uid-says-permission-denied wait_for "$W/agent2.log" "\"event\":\"unreachable\",\"socket\":\"dotnet-diagnostic-$A6-[0-9]*-socket\",\"reason\":\"Permission denied\"" 10
WHY="processes: $(curl -s "$U2/processes")"; check other-uid-not-listed bash -c "curl -s '$U2/processes' | jqe 'length == 0'"
sleep 2.5 # retries stay quiet
WHY="$(cat "$W/agent2.log")"; check other-uid-logged-once test "$(grep -c unreachable "$W/agent2.log")" = 1
env TMPDIR="$T2" HOME="$T2" setpriv --reuid 65534 --regid 65534 --clear-groups dotnet "$APP" sleep 120 > "$W/app7.out" 2>&1 & A7=$!; PIDS+=($A7)
wait_for "$W/app7.out" READY 15
WHY="processes: $(curl -s "$U2/processes"); log: $(cat "$W/agent2.log")"
check same-uid-listed until_ok 5 bash -c "curl -s '$U2/processes' | jqe --argjson p $A7 'length == 1 and .[0].pid == \$p'"
kill -TERM $AG2; wait $AG2
"$D" launch --socket "$W/c.sock" --connect-dir "$T2" --urls http://127.0.0.1:0 2> "$W/agent3.log" & AG3=$!; PIDS+=($AG3)
U3=http://127.0.0.1:$(listening_port "$W/agent3.log" urls 10 "$AG3")
WHY="processes: $(curl -s "$U3/processes")"
check root-agent-lists-both until_ok 5 bash -c "curl -s '$U3/processes' | jqe --argjson a $A6 --argjson b $A7 'length == 2 and (map(.pid) | sort) == ([\$a, \$b] | sort)'"
kill -TERM $AG3; wait $AG3

# 8. a directory that is not there yet: said once, and watched until it is
T5=$W/later
"$D" launch --socket "$W/e.sock" --connect-dir "$T5" --urls http://127.0.0.1:0 2> "$W/agent5.log" & AG5=$!; PIDS+=($AG5)
U5=http://127.0.0.1:$(listening_port "$W/agent5.log" urls 10 "$AG5")
check missing-dir-said wait_for "$W/agent5.log" "\"event\":\"unreachable\",\"connectDir\":\"$T5\",\"reason\":\"No such file or directory\"" 5
sleep 1 # time passing: more looks at the directory, still said once
WHY="$(cat "$W/agent5.log")"; check missing-dir-said-once test "$(grep -c unreachable "$W/agent5.log")" = 1
mkdir -m 1777 "$T5"
env TMPDIR="$T5" dotnet "$APP" sleep 120 > "$W/app9.out" 2>&1 & A9=$!; PIDS+=($A9)
WHY="processes: $(curl -s "$U5/processes")"
check missing-dir-watched until_ok 15 bash -c "curl -s '$U5/processes' | jqe --argjson p $A9 'length == 1 and .[0].pid == \$p'"
kill -TERM $AG5; wait $AG5

# 9. a directory no socket path in it could fit is refused at start
LONGDIR=$W/$(printf 'd%.0s' $(seq 1 90))
"$D" launch --socket "$W/l.sock" --connect-dir "$LONGDIR" --urls http://127.0.0.1:0 2> "$W/long.err"; rc=$?
WHY="exit $rc: $(cat "$W/long.err")"; check long-connect-dir-refused bash -c "[ $rc = 1 ] && grep -q 'connect-dir.*too long' '$W/long.err'"
stop_all # here, not only in the trap: bash would report the killed apps on stderr
exit 0
