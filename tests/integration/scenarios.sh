#!/usr/bin/env bash
# scenarios.sh - the agent with the ASP.NET Core test app in the states people
# take dumps for: threads piled up on a lock, a thread burning CPU, a heap that
# keeps growing; the app started by the agent as its init; a second runtime on
# the same agent (the default process then needs a selector, and the 400 says
# which); and a dump the runtime itself cannot write (its error text reaches
# the client).
# (Agents here run with --no-metrics: a counters session makes the app's thread pool start and retire
# threads, and the dumps' thread counts are compared with /proc. metrics.sh covers /metrics.)
set -u
cd "$(dirname "$0")/../.."
T_NAME=scenarios
. tests/lib.sh # every script runs from the repository root
agent_setup scen
threads_of() { ls /proc/"$1"/task | wc -l; }
notes_of() { readelf -n "$1" 2>/dev/null | grep -c NT_PRSTATUS; }
is_core() { file -b "$1" | grep -q 'ELF 64-bit LSB core'; }

build_apps
mkdir -m 0777 "$W/diag"

# --- the webapp under the agent as its init (both on ports they bind themselves)
ASPNETCORE_URLS=http://127.0.0.1:0 "$D" launch --no-metrics --socket "$W/diag/port" --dumps "$W/diag" \
  --urls http://127.0.0.1:0 -- dotnet "$B/apps/webapp/webapp.dll" > "$W/web.out" 2> "$W/agent.log" & AG=$!; PIDS+=($AG)
AP=$(listening_port "$W/agent.log" urls 30 "$AG") || { fail agent-start "the agent did not start" "$W/agent.log"; exit 0; }
U=http://127.0.0.1:$AP
check webapp-ready wait_for "$W/web.out" READY 30
WPID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/web.out")
WEB=$(sed -n 's/^LISTENING \(http:.*\)$/\1/p' "$W/web.out" | head -1)
check webapp-attached wait_for "$W/agent.log" "\"event\":\"attached\",\"pid\":$WPID,.*\"assembly\":\"webapp\"" 10
code "$U/processes" > /dev/null
WHY="$(cat "$W/body")"; check webapp-is-default jq -e --argjson p "$WPID" 'length == 1 and .[0].pid == $p and .[0].name == "webapp" and .[0].isDefault' "$W/body"

# baseline
curl -s -o "$W/base" "$U/dump?type=WithHeap"
S0=$(stat -c %s "$W/base"); T0=$(notes_of "$W/base"); rm -f "$W/base"

# threads piled up on a lock: every one of them is in the dump
curl -sf "$WEB/blocking-threads?count=40&seconds=60" > /dev/null
eventually 10 asleep "$WPID" lock-waiter- 40
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?type=Mini")
n=$(notes_of "$W/core"); t=$(threads_of "$WPID")
WHY="http $c, core $n threads, /proc $t, before $T0"; check blocked-threads-in-dump bash -c "[ $c = 200 ] && [ $n -eq $t ] && [ $n -ge $((T0 + 40)) ]"

# a busy loop: the dump still comes (createdump stops the spinning thread too)
curl -sf "$WEB/high-cpu?seconds=10" > /dev/null
eventually 5 bash -c "grep -qx hot-loop /proc/$WPID/task/*/comm" # the spinning thread is there
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?type=Triage")
WHY="http $c, $(file -b "$W/core" | head -c 60)"; check dump-while-spinning bash -c "[ $c = 200 ] && file -b '$W/core' | grep -q 'ELF 64-bit LSB core'"

# a leak: 300 MB more retained, the WithHeap dump grows by at least that much
curl -sf "$WEB/memory-leak?mb=300" > /dev/null
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?type=WithHeap")
S1=$(stat -c %s "$W/core")
WHY="http $c, before $S0 bytes, after $S1"; check leak-grows-heap-dump bash -c "[ $c = 200 ] && [ $S1 -ge $((S0 + 300000000)) ]"
rm -f "$W/core"

# --- a second runtime on the same agent: no default process any more; the 400 names both
DOTNET_DiagnosticPorts=$W/diag/port,connect,nosuspend dotnet "$B/apps/console/console.dll" sleep 120 > "$W/con.out" 2>&1 & PIDS+=($!)
wait_for "$W/con.out" READY 15
CPID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/con.out")
wait_for "$W/agent.log" "\"event\":\"attached\",\"pid\":$CPID," 10
c=$(code "$U/process")
WHY="got $c: $(cat "$W/body")"; check two-runtimes-no-default bash -c "[ $c = 400 ] && jq -e '.detail | test(\"2 processes are attached\") and test(\"name webapp\") and test(\"name console\") and test(\"pid $WPID\") and test(\"pid $CPID\")' '$W/body' > /dev/null"
code "$U/processes" > /dev/null
WHY="$(cat "$W/body")"; check two-runtimes-listed jq -e 'length == 2 and all(.[]; .isDefault == false)' "$W/body"
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?name=console&type=Mini")
WHY="http $c"; check dump-by-name bash -c "[ $c = 200 ] && [ \$(readelf -n '$W/core' | grep -c NT_PRSTATUS) -eq \$(ls /proc/$CPID/task | wc -l) ]"

# --- init mode: SIGTERM reaches the app, which exits 0; the agent exits with its status
kill -TERM $AG; wait $AG; rc=$?
WHY="exit $rc"; check init-exit-with-app test "$rc" = 0
WHY="webapp pid $WPID still there"; check app-stopped bash -c "! kill -0 $WPID 2>/dev/null"

# --- the runtime cannot write the dump (the app's user cannot reach the dumps directory):
#     a 500 whose detail carries the runtime's and createdump's own words
mkdir -m 0700 "$W/private"
"$D" launch --no-metrics --socket "$W/diag/p2" --dumps "$W/private" --urls http://127.0.0.1:0 2> "$W/agent2.log" & PIDS+=($!)
AP2=$(listening_port "$W/agent2.log" urls 30 "$!") || { fail agent2-start "the agent did not start" "$W/agent2.log"; exit 0; }
U2=http://127.0.0.1:$AP2
DOTNET_DiagnosticPorts=$W/diag/p2,connect,nosuspend HOME=$W/diag setpriv --reuid 65534 --regid 65534 --clear-groups \
  dotnet "$B/apps/console/console.dll" sleep 60 > "$W/nobody.out" 2>&1 & PIDS+=($!)
wait_for "$W/nobody.out" READY 15
wait_for "$W/agent2.log" '"event":"attached"' 10
c=$(code "$U2/dump?type=Mini")
WHY="got $c: $(cat "$W/body")"; check runtime-error-text-reaches-client bash -c "[ $c = 500 ] && jq -e '.detail | test(\"could not write the dump\") and test(\"0x8\") and test(\"createdump\"; \"i\")' '$W/body' > /dev/null"
WHY="left: $(ls -A "$W/private")"; check failed-dump-leaves-nothing test -z "$(ls -A "$W/private")"
exit 0
