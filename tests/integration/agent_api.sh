#!/usr/bin/env bash
# agent_api.sh - the agent's HTTP API against a real .NET runtime, spoken to
# with real curl: dotnet-monitor's routes and status codes, authentication,
# every dump type checked to be an ELF core with the process's thread count,
# and the promise that dumps leave nothing behind, even when they fail.
# (Agents here run with --no-metrics: a counters session makes the app's thread pool start and retire
# threads, and the dumps' thread counts are compared with /proc. metrics.sh covers /metrics.)
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-api
. tests/lib.sh # every script runs from the repository root
agent_setup api
mkdir -m 1777 "$W/shared"

build_apps
APP="$B/apps/console/console.dll"
S=$W/shared/port

# --- security defaults, before anything runs
"$D" launch --no-metrics --socket "$W/x.sock" --urls "http://+:0" 2> "$W/refuse.err"; rc=$?
WHY="exit $rc: $(cat "$W/refuse.err")"; check refuses-network-without-token grep -q "no token is configured" "$W/refuse.err"

printf 's3cret-token-0123456789\n' > "$W/token"
"$D" launch --no-metrics --socket "$S" --dumps "$W/shared" --urls "http://0.0.0.0:0" --auth-token-file "$W/token" 2> "$W/agent.log" &
AG=$!; PIDS+=($AG)
P=$(listening_port "$W/agent.log" urls 30 "$AG") || { fail agent-start "the agent did not start" "$W/agent.log"; exit 0; }
U=http://127.0.0.1:$P
DOTNET_DiagnosticPorts=$S,connect,suspend dotnet "$APP" > "$W/app.out" 2>&1 & PIDS+=($!)
wait_for "$W/app.out" READY 15
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
wait_for "$W/agent.log" '"event":"attached"' 10
H=(-H "Authorization: Bearer s3cret-token-0123456789")

# --- the agent runs under its seccomp allowlist (every thread), with no_new_privs
WHY="$(grep -E 'NoNewPrivs|Seccomp' /proc/$AG/status | tr '\n' ' ')"
check sandboxed bash -c "grep -q '^Seccomp:[[:space:]]*2' /proc/$AG/status && grep -q '^NoNewPrivs:[[:space:]]*1' /proc/$AG/status"
bad=$(for t in /proc/$AG/task/*; do grep -q '^Seccomp:[[:space:]]*2' "$t/status" || echo "$t"; done)
WHY="threads without the filter: $bad"; check sandboxed-all-threads test -z "$bad"

# --- probes open, everything else needs the token
WHY="got $(code "$U/healthz")"; check healthz-open test "$(code "$U/healthz")" = 200
check health-command "$D" health --port "$P"
WHY="got $(code "$U/processes")"; check no-token-401 test "$(code "$U/processes")" = 401
WHY="got $(code -H 'Authorization: Bearer wrong' "$U/processes")"; check wrong-token-401 test "$(code -H 'Authorization: Bearer wrong' "$U/processes")" = 401
check 401-is-problem-json bash -c "curl -s -D - -o /dev/null '$U/processes' | grep -qi 'content-type: application/problem+json'"

# --- dotnet-monitor's routes
code "${H[@]}" "$U/processes" > /dev/null
WHY="$(cat "$W/body")"; check processes jq -e --argjson p "$APID" 'length == 1 and .[0].pid == $p and .[0].name == "console" and .[0].isDefault == true and (.[0].uid | test("^[0-9a-f-]{36}$"))' "$W/body"
UID_=$(jq -r '.[0].uid' "$W/body")
for sel in "pid=$APID" "uid=$UID_" "name=console" ""; do
  code "${H[@]}" "$U/process?$sel" > /dev/null
  WHY="$(cat "$W/body")"; check "process-by-${sel%%=*}" jq -e --argjson p "$APID" '.pid == $p and .operatingSystem == "Linux" and .processArchitecture == "x64" and (keys - ["pid","uid","name","commandLine","operatingSystem","processArchitecture","managedEntryPointAssemblyName"] == [])' "$W/body"
done
# diagport's per-runtime extras, beside dotnet-monitor's /process (whose schema allows no other field)
code "${H[@]}" "$U/runtimes" > /dev/null
WHY="$(cat "$W/body")"; check runtimes jq -e --argjson p "$APID" --arg u "$UID_" 'length == 1 and .[0].pid == $p and .[0].uid == $u and .[0].name == "console" and (.[0].runtimeVersion | startswith("10.")) and (.[0].attachedDateTime | test("^20[0-9-]{8}T[0-9:.]+Z$"))' "$W/body"
WHY="got $(code "$U/runtimes")"; check runtimes-needs-token test "$(code "$U/runtimes")" = 401
WHY="got $(code "${H[@]}" "$U/process?pid=1")"; check unknown-pid-400 test "$(code "${H[@]}" "$U/process?pid=1")" = 400
code "${H[@]}" "$U/env" > /dev/null
WHY="$(head -c 300 "$W/body")"; check env jq -e --arg s "$S,connect,suspend" '.DOTNET_DiagnosticPorts == $s and (.PATH | length > 0)' "$W/body"
code "${H[@]}" "$U/info" > /dev/null
WHY="$(cat "$W/body")"; check info jq -e --arg s "$S" '.diagnosticPortMode == "Listen" and .diagnosticPortName == $s' "$W/body"
# dotnet-monitor 9.1's capabilities, as served here (--no-metrics: /metrics does not answer), then the kinds
WHY="$(cat "$W/body")"; check info-capabilities jq -e '(.capabilities | map(.name)) == ["exceptions","parameters","call_stacks","metrics","http_egress","dump","gcdump","trace","cpuprofile","stacks","logs","env"] and ([.capabilities[] | select(.enabled | not) | .name] - ["exceptions"]) == ["parameters","metrics"]' "$W/body"
WHY="got $(code "${H[@]}" "$U/nope")"; check unknown-route-404 test "$(code "${H[@]}" "$U/nope")" = 404
WHY="got $(code "${H[@]}" -d hello "$U/processes")"; check body-413 test "$(code "${H[@]}" -d hello "$U/processes")" = 413
check 401-www-authenticate bash -c "curl -s -D - -o /dev/null '$U/processes' | grep -qi '^www-authenticate: Bearer'"
WHY="got $(code "${H[@]}" -X POST "$U/processes")"; check post-405 test "$(code "${H[@]}" -X POST "$U/processes")" = 405
WHY="$(curl -s -D - -o /dev/null -X POST "${H[@]}" "$U/processes")"
check post-405-allow bash -c "curl -s -D - -o /dev/null -X POST ${H[*]@Q} '$U/processes' | grep -qi '^allow: GET'"
# every 405 says what the path takes, HEAD with the GET of a route that only reads; HEAD answers there
allow() { curl -s -D - -o /dev/null -X "$1" "${H[@]}" "$U$2" | tr -d '\r' | awk -F': ' 'tolower($1) == "allow" { print $2 }'; }
for c in "POST /processes GET, HEAD" "POST /healthz GET, HEAD" "POST /metrics GET, HEAD" "POST /operations GET, HEAD" \
	"POST /dump GET" "PUT /trace GET, POST" "GET /perfmap POST, DELETE"; do
	read -r m p want <<< "$c"
	got=$(allow "$m" "$p")
	WHY="$m $p: Allow '$got', want '$want'"; check "allow${p//\//-}" test "$got" = "$want"
done
for p in /processes /operations /metrics /healthz; do # /metrics: 404 here (turned off), as its GET
	g=$(code "${H[@]}" "$U$p") h=$(curl -s -o /dev/null -w '%{http_code}' -I "${H[@]}" "$U$p")
	WHY="HEAD $p: $h, GET: $g"; check "head${p//\//-}" test "$h" = "$g" -a "$h" != 405
done
# a refused parameter names its field, in ASP.NET's (dotnet-monitor's) validation shape
c=$(code "${H[@]}" "$U/dump?type=Huge")
WHY="got $c: $(cat "$W/body")"; check validation-errors-shape jq -e '.status == 400 and .title == "One or more validation errors occurred." and (.errors.type[0] | test("Huge")) and (.detail | test("Huge"))' "$W/body"
c=$(code "${H[@]}" "$U/dump?transport=pigeon")
WHY="got $c: $(cat "$W/body")"; check validation-errors-transport jq -e '.status == 400 and (.errors.transport[0] | test("pigeon.*file, staged or fifo"))' "$W/body"
c=$(code "${H[@]}" "$U/trace?durationSeconds=soon")
WHY="got $c: $(cat "$W/body")"; check validation-errors-duration jq -e '(.errors.durationSeconds[0] | test("soon"))' "$W/body"
# numbers are digits: no sign, space or overflow that strtol would take; a parameter's 400 comes before a 501
for c in "trace?durationSeconds=%2B5 durationSeconds" "trace?durationSeconds=%205 durationSeconds" \
	"stacks?pid=%2B1 pid" "stacks?pid=99999999999999999999 pid" "gcdump?top=abc top"; do
	read -r q f <<< "$c"
	got=$(code "${H[@]}" "$U/$q")
	WHY="$q: $got $(head -c 200 "$W/body")"; check "number-${f}-${q##*=}" jq -e --arg f "$f" '.status == 400 and (.errors[$f] | length) == 1' "$W/body"
done
c=$(code "${H[@]}" "$U/process?pid=%ff%fe")
WHY="got $c: $(cat "$W/body")"; check invalid-utf8-echoed-as-json bash -c "[ $c = 400 ] && jq -e '.errors.pid[0] | test(\"\ufffd\")' '$W/body' > /dev/null"
WHY="the agent died on a parameter that is not UTF-8"; check alive-after-invalid-utf8 test "$(code "${H[@]}" "$U/processes")" = 200

# --- every dump type: an ELF core of this process whose thread count matches /proc
for t in Mini Triage WithHeap Full; do
  t0=$(ls /proc/"$APID"/task | wc -l) # a thread may start or end while a dump runs: either count is right
  c=$(curl -s "${H[@]}" -o "$W/core.$t" -w '%{http_code}' "$U/dump?pid=$APID&type=$t")
  threads=$(ls /proc/"$APID"/task | wc -l)
  notes=$(readelf -n "$W/core.$t" 2>/dev/null | grep -c NT_PRSTATUS)
  WHY="http $c, $(file -b "$W/core.$t" | head -c 80)"; check "dump-$t-is-core" bash -c "[ $c = 200 ] && file -b '$W/core.$t' | grep -q 'ELF 64-bit LSB core'"
  WHY="core has $notes threads, /proc has $threads ($t0 before)"; check "dump-$t-threads" test "$notes" -eq "$threads" -o "$notes" -eq "$t0"
  rm -f "$W/core.$t"
done
WHY="left: $(ls -A "$W/shared")"; check no-staging-left test "$(ls -A "$W/shared")" = port
WHY="got $(code "${H[@]}" "$U/dump?type=Huge")"; check bad-dump-type-400 test "$(code "${H[@]}" "$U/dump?type=Huge")" = 400

# --- a second dump while one runs gets 429; a client that walks away leaves nothing
# (the first download is held to 50 MB/s: the slot is held until its last byte, so the second comes while it runs)
curl -s "${H[@]}" -o /dev/null --limit-rate 50M "$U/dump?type=Full" & D1=$!
for i in $(seq 1 40); do ls -A "$W/shared" | grep -q diagport-dump && break; sleep 0.025; done
c=$(curl -s "${H[@]}" -o "$W/body" -w '%{http_code}' "$U/dump?type=Mini")
wait $D1
WHY="got $c: $(cat "$W/body")"; check concurrent-dump-429 test "$c" = 429
# back to back, every transport: the next dump is never refused because the last one's thread has not let go yet
codes=""
for i in 1 2 3 4 5; do
  codes+="$(curl -s "${H[@]}" -o /dev/null -w '%{http_code}' "$U/dump?type=Mini") "
  codes+="$(curl -s "${H[@]}" -o /dev/null -w '%{http_code}' "$U/dump?type=Mini&transport=fifo") "
  codes+="$(curl -s "${H[@]}" -o /dev/null -w '%{http_code}' "$U/dump?type=Full&transport=staged") "
done
WHY="got $codes"; check back-to-back-dumps-200 test "$codes" = "$(printf '200 %.0s' $(seq 1 15))"
# the default sends a heap dump as it is staged (chunked); staged waits and gives its length
curl -s "${H[@]}" -D "$W/hdr.file" -o /dev/null "$U/dump?type=Full"
curl -s "${H[@]}" -D "$W/hdr.staged" -o /dev/null "$U/dump?type=Full&transport=staged"
WHY="$(tr -d '\r' < "$W/hdr.file" | grep -i 'transfer-encoding\|content-length') / $(tr -d '\r' < "$W/hdr.staged" | grep -i 'transfer-encoding\|content-length')"
check file-chunked-staged-length bash -c "grep -qi '^transfer-encoding: chunked' '$W/hdr.file' && grep -qi '^content-length: [0-9]' '$W/hdr.staged'"
curl -s "${H[@]}" --max-time 0.3 -o /dev/null --limit-rate 100k "$U/dump?type=Full"
only_port() { [ "$(ls -A "$1")" = port ]; }
eventually 15 only_port "$W/shared" # the agent has seen the client go and cleaned up
WHY="left: $(ls -A "$W/shared")"; check abandoned-download-leaves-nothing test "$(ls -A "$W/shared")" = port
# walking away in the middle of the body itself (createdump done, sendfile under way): the agent lives on
curl -s "${H[@]}" --max-time 1.5 -o "$W/part" --limit-rate 2M "$U/dump?type=Full"
sz=$(stat -c %s "$W/part"); rm -f "$W/part"
WHY="only $sz bytes arrived before the client left: not mid-body"; check abandoned-mid-body test "$sz" -gt 100000
WHY="the agent died when its client went away mid-sendfile"; check agent-survives-abandon kill -0 "$AG"

# --- malformed HTTP: an oversized header is refused, the agent keeps serving
big=$(head -c 100000 /dev/zero | tr '\0' a)
c=$(curl -s -o /dev/null -w '%{http_code}' -H "X-Big: $big" "${H[@]}" "$U/processes")
WHY="got $c"; check oversized-header-refused test "$c" -ge 400
WHY="agent stopped answering"; check still-serving test "$(code "${H[@]}" "$U/processes")" = 200
# the HTTP server itself (http/httpd.c), spoken to byte by byte
raw() { /usr/bin/python3 tests/integration/http_raw.py "$P" "$@"; }
r=$(raw garbage); WHY="got '$r'"; check malformed-request-400-problem test "$r" = "400 application/problem+json"
r=$(raw http2); WHY="got '$r'"; check http2-request-line-505 test "$r" = 505
r=$(raw bighead); WHY="got '$r'"; check big-head-431-problem test "$r" = "431 application/problem+json"
# each refusal of the parser says what it was
for c in "longtarget 414 8 KiB" "manyheaders 431 64 header" "manyparams 431 32 query" "badescape 400 percent-escape" \
	"twolengths 400 more than one Content-Length" "lengthandchunked 400 both Content-Length and Transfer-Encoding"; do
	read -r k st words <<< "$c"
	r=$(raw detail "$k"); WHY="got '$r'"; check "detail-$k" bash -c "[[ '${r//\'/}' == '$st '*'$words'* ]]"
done
r=$(raw status411); WHY="got '$r'"; check chunked-post-411-reason test "$r" = "HTTP/1.1 411 Length Required"
r=$(raw head); WHY="got '$r'"; check head-no-body test "$r" = "200 7 0"
r=$(raw http10); WHY="got '$r'"; check http10-answered test "$r" = "200 Healthy"
r=$(raw flood 40); WHY="got '$r' with 40 idle connections open"; check idle-connections-hold-no-slot test "$r" = served
flood_closed() { [ "$(ss -Htn "( sport = :$P )" | awk '$1 != "TIME-WAIT"' | wc -l)" = 0 ]; }
eventually 5 flood_closed # the agent has closed its side of the idle connections
WHY="agent stopped answering after the idle connections closed"; check serves-after-flood test "$(code "${H[@]}" "$U/processes")" = 200

# --- the app dies in the middle of a dump: a clear error (a 5xx before the body began, else the transfer cut:
#     curl fails), nothing left behind
(curl -s "${H[@]}" -o "$W/body" -w '%{http_code}' "$U/dump?type=Full" > "$W/code"; echo $? > "$W/curlrc") & D2=$!
for i in $(seq 1 40); do ls -A "$W/shared" | grep -q diagport-dump && break; sleep 0.025; done
kill -9 "$APID"; wait $D2
c=$(cat "$W/code"); crc=$(cat "$W/curlrc")
WHY="got $c, curl exit $crc: $(head -c 200 "$W/body" | tr -c '[:print:]' .)"
check app-killed-mid-dump-error bash -c "[ $c -ge 500 ] || { [ $c = 200 ] && [ $crc != 0 ]; }"
eventually 5 bash -c "[ \"\$(ls -A '$W/shared')\" = port ]" # the agent's clean-up after the failed dump
WHY="left: $(ls -A "$W/shared")"; check app-killed-mid-dump-nothing-left test "$(ls -A "$W/shared")" = port

# --- the agent as nobody, the app as root: both transports; FIFO: no file, nothing left, abandon is safe
mkdir -m 0777 "$W/fx"   # like an emptyDir: writable by both users, no sticky bit
setpriv --reuid 65534 --regid 65534 --clear-groups "$D" launch --no-metrics --socket "$W/fx/port" --dumps "$W/fx" \
  --urls http://127.0.0.1:0 --dump-transport fifo 2> "$W/agent3.log" & PIDS+=($!)
U2=http://127.0.0.1:$(listening_port "$W/agent3.log" urls 10 "$!")
DOTNET_DiagnosticPorts=$W/fx/port,connect,suspend dotnet "$APP" > "$W/app3.out" 2>&1 & PIDS+=($!)
wait_for "$W/app3.out" READY 15
A3=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app3.out")
wait_for "$W/agent3.log" '"event":"attached"' 10
t0=$(ls /proc/"$A3"/task | wc -l) # a thread may start or end while a dump runs: either count is right
c=$(curl -s -o "$W/core.fifo" -w '%{http_code}' "$U2/dump?type=WithHeap")
notes=$(readelf -n "$W/core.fifo" 2>/dev/null | grep -c NT_PRSTATUS); threads=$(ls /proc/"$A3"/task | wc -l)
WHY="http $c, $(file -b "$W/core.fifo" | head -c 60)"; check fifo-cross-uid-dump bash -c "[ $c = 200 ] && file -b '$W/core.fifo' | grep -q 'ELF 64-bit LSB core'"
WHY="core has $notes threads, /proc has $threads ($t0 before)"; check fifo-dump-threads test "$notes" -eq "$threads" -o "$notes" -eq "$t0"
# the file transport works across users too: createdump writes into the agent's pipe, the agent owns the staging file
t0=$(ls /proc/"$A3"/task | wc -l)
c=$(curl -s -o "$W/core.file" -w '%{http_code}' "$U2/dump?type=WithHeap&transport=file")
notes=$(readelf -n "$W/core.file" 2>/dev/null | grep -c NT_PRSTATUS); threads=$(ls /proc/"$A3"/task | wc -l)
WHY="http $c, $(file -b "$W/core.file" | head -c 60)"; check file-cross-uid-dump bash -c "[ $c = 200 ] && file -b '$W/core.file' | grep -q 'ELF 64-bit LSB core'"
WHY="core has $notes threads, /proc has $threads ($t0 before)"; check file-cross-uid-threads test "$notes" -eq "$threads" -o "$notes" -eq "$t0"
rm -f "$W/core.file"
curl -s --max-time 0.3 --limit-rate 100k -o /dev/null "$U2/dump?type=Full"
eventually 15 only_port "$W/fx"
WHY="left: $(ls -A "$W/fx")"; check fifo-abandon-leaves-nothing test "$(ls -A "$W/fx")" = port
check fifo-abandon-app-alive kill -0 "$A3"
c=$(curl -s -o "$W/core.fifo" -w '%{http_code}' "$U2/dump?type=Mini")
WHY="got $c"; check fifo-dump-after-abandon test "$c" = 200

# --- the other way round, both non-root: the app as nobody (65534), the agent as 1654; every transport
mkdir -m 0777 "$W/fy"
setpriv --reuid 1654 --regid 1654 --clear-groups "$D" launch --no-metrics --socket "$W/fy/port" --dumps "$W/fy" \
  --urls http://127.0.0.1:0 2> "$W/agent5.log" & PIDS+=($!)
AG5=$!
U5=http://127.0.0.1:$(listening_port "$W/agent5.log" urls 10 "$AG5")
# the agent is not dumpable: another process of its own uid (as the app's is in perf mode, or under launch -- APP)
# cannot read its environment, memory or files through /proc/PID
setpriv --reuid 1654 --regid 1654 --clear-groups /usr/bin/python3 -c '
import os, sys
for what in ("environ", "mem", "root/"):
    try:
        (os.listdir if what.endswith("/") else lambda p: os.open(p, os.O_RDONLY))("/proc/%s/%s" % (sys.argv[1], what))
        print(what, "readable")
    except PermissionError:
        print(what, "refused")
' "$AG5" > "$W/proc-read.out" 2>&1
WHY="$(tr '\n' ';' < "$W/proc-read.out")"
check agent-not-dumpable test "$(grep -c refused "$W/proc-read.out")" = 3
DOTNET_DiagnosticPorts=$W/fy/port,connect,suspend HOME=$W/fy setpriv --reuid 65534 --regid 65534 --clear-groups \
  dotnet "$APP" > "$W/app5.out" 2>&1 & PIDS+=($!)
wait_for "$W/app5.out" READY 15
A5=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app5.out")
wait_for "$W/agent5.log" '"event":"attached"' 10
for tr in file staged fifo; do
  t0=$(ls /proc/"$A5"/task | wc -l)
  c=$(curl -s -o "$W/core.$tr" -w '%{http_code}' "$U5/dump?type=WithHeap&transport=$tr")
  notes=$(readelf -n "$W/core.$tr" 2>/dev/null | grep -c NT_PRSTATUS); threads=$(ls /proc/"$A5"/task | wc -l)
  WHY="http $c, $(file -b "$W/core.$tr" | head -c 60)"; check "app-nobody-agent-1654-$tr-dump" bash -c "[ $c = 200 ] && file -b '$W/core.$tr' | grep -q 'ELF 64-bit LSB core'"
  WHY="core has $notes threads, /proc has $threads ($t0 before)"; check "app-nobody-agent-1654-$tr-threads" test "$notes" -eq "$threads" -o "$notes" -eq "$t0"
  rm -f "$W/core.$tr"
done
# the dump's pipe: only the agent's uid may read it (0622), not the app's (65534). The app is stopped first, so the
# runtime cannot start createdump and the pipe stays there to be looked at; then it runs on and the dump completes.
has_pipe() { ls -A "$W/fy" | grep -q '^\.diagport-dump'; }
kill -STOP "$A5"
curl -s -o "$W/core.stopped" -w '%{http_code}' "$U5/dump?type=Mini" > "$W/code.stopped" & CP=$!
eventually 10 has_pipe
fifo=$W/fy/$(ls -A "$W/fy" | grep '^\.diagport-dump' | head -1)
mode=$(stat -c '%a %F' "$fifo" 2>&1)
setpriv --reuid 65534 --regid 65534 --clear-groups /usr/bin/python3 -c 'import os, sys; os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK)' \
  "$fifo" 2> "$W/fifo-read.err"; rrc=$?
kill -CONT "$A5"; wait $CP
WHY="mode $mode; the app's uid opening it to read: exit $rrc $(tail -1 "$W/fifo-read.err"); the dump: $(cat "$W/code.stopped")"
check dump-pipe-agent-reads-alone bash -c "[ '$mode' = '622 fifo' ] && [ $rrc != 0 ] && grep -q PermissionError '$W/fifo-read.err' &&
  [ \"\$(cat '$W/code.stopped')\" = 200 ]"
WHY="left: $(ls -A "$W/fy")"; check app-nobody-agent-1654-nothing-left test "$(ls -A "$W/fy" | grep -v '^port$' | grep -v '^\.dotnet$' | wc -l)" = 0

# --- an agent killed mid-dump: the next agent removes the staging file it left
touch "$W/shared/.diagport-dump-123-1-99"
kill -9 $AG; wait $AG 2>/dev/null
"$D" launch --no-metrics --socket "$S" --dumps "$W/shared" --urls http://127.0.0.1:0 2> "$W/agent2.log" & PIDS+=($!)
P=$(listening_port "$W/agent2.log" urls 30 "$!")
for i in $(seq 1 100); do "$D" health --port "$P" 2>/dev/null && break; sleep 0.05; done
WHY="left: $(ls -A "$W/shared")"; check restart-cleans-staging bash -c "! ls -A '$W/shared' | grep -q diagport-dump"
exit 0
