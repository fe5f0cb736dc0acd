#!/usr/bin/env bash
# trace.sh - /trace against a real .NET runtime (the webapp), with real curl,
# every trace read back by TraceEvent (dotnet-trace convert, an independent
# reader) and by diagport's own nettrace reader:
#   cpu/*        profile=Cpu while /high-cpu spins: 200, the file name, chunked and
#                streamed as it comes (first byte long before the end), complete
#                (the end marker), TraceEvent's CPU samples show HotLoop.Spin
#   cpuprofile/* format=folded|flamegraph|speedscope while a thread spins: the hot method dominates; to an
#                egress provider too (a flame graph until stopped through /operations);
#                the SVG renders to PNG (rsvg-convert), speedscope's own schema accepts the JSON, and the
#                speedscope viewer opens it in headless Chromium
#   default/*    no profile (Cpu,Http,Metrics): counters, samples, DiagnosticSource
#   post/*       a providers document: System.Runtime counters every second
#   gc/*         profile=GcCollect alone (CollectTracing4: rundown keywords 0x1) while
#                /memory-leak allocates: GC events, and only GC rundown
#   stop/*       durationSeconds=-1: Running and stoppable in /operations; DELETE
#                ?stop=true ends it complete, Succeeded
#   cancel/*     DELETE without stop: cut off (curl 18), Cancelled
#   gone/*       the client goes away: Failed, and the slot is free again
#   limit/*      a fourth trace at once: 429
#   egress/*     egressProvider: 202, Location, Succeeded, the file complete
#   truncated/*  the process killed mid-trace: curl sees an incomplete body (18),
#                the operation Failed "truncated"
#   bad/*        bad profiles, durations, documents, bodies: 400/411/413 with the field named
#   stacks/*     /stacks while 4 threads wait on a lock: text, JSON, speedscope and to egress, the waiters'
#                Monitor.Enter over LockContention.Wait and the holder named
#   perfmap/*    POST /perfmap: the runtime writes /tmp/perf-PID.map naming JIT-compiled methods
#                (HotLoop.Spin); DELETE turns it off
#   fds/*        the agent's descriptors flat after all of it
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-trace
. tests/lib.sh
agent_setup trace
DT=$PWD/build/tools/dotnet-trace/dotnet-trace # scripts/prereqs.sh test installs it
[ -x "$DT" ] || { fail setup "dotnet-trace not found at $DT (scripts/prereqs.sh test installs it)"; exit 0; }
# tests/apps/build.sh builds tracecount against the TraceEvent inside the dotnet-trace tool
TRACEEVENT_DIR=$(dirname "$(find "$PWD/build/tools/dotnet-trace/.store" -name Microsoft.Diagnostics.Tracing.TraceEvent.dll | head -1)")
export TRACEEVENT_DIR
build_apps
[ -f "$B/apps/tracecount/tracecount.dll" ] || { fail build-apps "tracecount was not built (TRACEEVENT_DIR=$TRACEEVENT_DIR)"; exit 0; }

start_agent
start_app() { : > "$W/app.out"; start_webapp "$W/app.out" "$W/dumps/port" "$U"; }
if ! start_app; then fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out") $(tail -3 "$W/agent.log")"; exit 0; fi
fds() { find "/proc/$AG/fd" -mindepth 1 2> /dev/null | wc -l; }
FD0=$(fds)

# trace NAME URL [CURL ARGS]: GET (or as the args say) into $W/NAME.nettrace, headers in $W/NAME.hdr, and
# "CODE RC TTFB TOTAL" in $W/NAME.res (so it can run in the background); result NAME reads them back
trace() {
  local name=$1 url=$2 out rc
  shift 2
  out=$(curl -s -D "$W/$name.hdr" -o "$W/$name.nettrace" -w '%{http_code} %{time_starttransfer} %{time_total}' "$@" "$url" 2> "$W/$name.err")
  rc=$?
  read -r c f t <<< "$out"
  echo "$c $rc $f $t" > "$W/$name.res"
  result "$name"
}
result() { read -r CODE RC TTFB TOTAL < "$W/$1.res"; }
# speedscope NAME: TraceEvent's reading of the trace (dotnet-trace convert); 0 when it reads it
speedscope() {
  timeout 120 "$DT" convert --format Speedscope -o "$W/$1" "$W/$1.nettrace" > "$W/$1.convert" 2>&1 &&
    [ -s "$W/$1.speedscope.json" ]
}
# complete NAME: the file starts with the nettrace magic and ends with the end-of-stream tag, and our reader agrees
complete() {
  [ "$(head -c 8 "$W/$1.nettrace")" = Nettrace ] && [ "$(tail -c 2 "$W/$1.nettrace" | od -An -tx1 | tr -d ' ')" = 0601 ] &&
    "$D" nettrace stats "$W/$1.nettrace" > "$W/$1.stats" 2> "$W/$1.stats.err"
}
# same_counts NAME: TraceEvent (tests/apps/tracecount) counts the same events per provider and event id as
# our reader, and the same total
same_counts() {
  dotnet "$B/apps/tracecount/tracecount.dll" "$W/$1.nettrace" $(jq -r '[.events[].provider] | unique | .[]' "$W/$1.stats") \
    > "$W/$1.te.json" 2> "$W/$1.te.err" || return 1
  jq -S '.events' "$W/$1.te.json" > "$W/$1.te.ev" && jq -S '[.events[] | del(.name)]' "$W/$1.stats" > "$W/$1.our.ev" &&
    cmp -s "$W/$1.te.ev" "$W/$1.our.ev" && [ "$(jq .totalEvents "$W/$1.te.json")" = "$(jq .totalEvents "$W/$1.stats")" ]
}
# whole_trace NAME: the trace NAME was answered 200 and read to its end (curl exit 0), is complete, and
# TraceEvent counts what our reader counts
whole_trace() {
  local n=$1 rc
  WHY="code $CODE rc $RC $(cat "$W/$n.err")"; check "$n/200" test "$CODE:$RC" = 200:0
  complete "$n"; rc=$?
  WHY="$(cat "$W/$n.stats.err" 2>/dev/null)"; check "$n/complete" test "$rc" = 0
  same_counts "$n"; rc=$?
  WHY="ours $(jq -c '{totalEvents,kinds: (.events | length)}' "$W/$n.stats" 2>/dev/null), TraceEvent's $(jq -c '{totalEvents,kinds: (.events | length)}' "$W/$n.te.json" 2>/dev/null); $(diff "$W/$n.our.ev" "$W/$n.te.ev" 2>&1 | head -5) $(tail -2 "$W/$n.te.err" 2>/dev/null)"
  check "$n/same-as-traceevent" test "$rc" = 0
}
# count NAME PROVIDER [ID]: events of PROVIDER (and event id) in our reader's stats
count() {
  jq --arg p "$2" --arg id "${3:-}" '[.events[] | select(.provider == $p and ($id == "" or (.id | tostring) == $id)) | .count] | add // 0' "$W/$1.stats"
}
op_of() { curl -s "$U/operations" | jq -r "[.[] | select(.process.pid == $APID)] | .[-1].operationId"; }

# --- cpu: a 4 s CPU trace while a thread spins
curl -s "$AURL/high-cpu?seconds=30" > /dev/null
trace cpu "$U/trace?pid=$APID&profile=Cpu&durationSeconds=4"
whole_trace cpu
WHY="$(tr -d '\r' < "$W/cpu.hdr")"
check cpu/filename grep -Eq "^Content-Disposition: attachment; filename=\"[0-9]{8}_[0-9]{6}_$APID\\.nettrace\"" <(tr -d '\r' < "$W/cpu.hdr")
check cpu/chunked grep -q '^Transfer-Encoding: chunked' <(tr -d '\r' < "$W/cpu.hdr")
WHY="first byte after $TTFB s, last after $TOTAL s (want the first under 1.5 s: streamed as it comes, not held)"
check cpu/streamed awk -v f="$TTFB" -v t="$TOTAL" 'BEGIN {exit !(f < 1.5 && t >= 4)}'
WHY="$(head -c 8 "$W/cpu.nettrace" | od -c | head -1); tail $(tail -c 2 "$W/cpu.nettrace" | od -An -tx1); $(cat "$W/cpu.stats.err" 2>/dev/null)"
speedscope cpu; rc=$?
WHY="$(tail -3 "$W/cpu.convert" 2>&1)"; check cpu/traceevent-reads test "$rc" = 0
WHY="frames: $(jq -r '[.shared.frames[].name] | map(select(test("HotLoop"))) | .[0:3] | join(", ")' "$W/cpu.speedscope.json" 2>/dev/null)"
check cpu/hot-method-sampled jq -e '[.shared.frames[].name] | any(test("HotLoop.Spin"))' "$W/cpu.speedscope.json"
n=$(count cpu Microsoft-DotNETCore-SampleProfiler)
WHY="SampleProfiler events: $n (want > 100 in 4 s)"; check cpu/samples test "${n:-0}" -gt 100
n=$(count cpu Microsoft-Windows-DotNETRuntimeRundown)
WHY="rundown events: $n (want > 0: the session was stopped with StopTracing, not cut)"; check cpu/rundown test "${n:-0}" -gt 0

# --- CPU profiles people can look at: folded stacks, a flame graph, speedscope, while a thread spins
curl -s "$AURL/high-cpu?seconds=30" > /dev/null
V=$PWD/tests/validate
c=$(curl -s -D "$W/fold.hdr" -o "$W/cpu.folded" -w '%{http_code}' "$U/trace?pid=$APID&profile=Cpu&durationSeconds=3&format=folded")
read -r hot all < <(awk '{n = $NF; t += n; if ($0 ~ /HotLoop\.Spin/) h += n} END {print h + 0, t + 0}' "$W/cpu.folded")
WHY="$c; HotLoop.Spin in $hot of $all samples; $(sort -k2 -nr -t' ' "$W/cpu.folded" | head -2 | cut -c1-300)"
check cpuprofile/folded-hot-method-dominates bash -c "[ '$c' = 200 ] && grep -qi '^content-disposition: attachment; filename=\"[0-9_]*_$APID.folded.txt\"' '$W/fold.hdr' && [ $all -gt 100 ] && [ \$(($hot * 2)) -gt $all ]"
c=$(curl -s -D "$W/svg.hdr" -o "$W/cpu.svg" -w '%{http_code}' "$U/trace?pid=$APID&durationSeconds=2&format=flamegraph")
rsvg-convert -o "$W/cpu.png" "$W/cpu.svg" 2> "$W/svg.err"; rc=$?
WHY="$c, rsvg-convert exit $rc $(cat "$W/svg.err"); $(file -b "$W/cpu.png" 2>&1)"
check cpuprofile/flamegraph-renders bash -c "[ '$c' = 200 ] && [ $rc = 0 ] && grep -qi '^content-type: image/svg+xml' '$W/svg.hdr' && grep -qi '^content-disposition: inline; filename=\"[0-9_]*_$APID.svg\"' '$W/svg.hdr' && file -b '$W/cpu.png' | grep -q 'PNG image data, 1200 x'"
WHY="$(grep -o 'HotLoop[^<]*' "$W/cpu.svg" | head -3)"; check cpuprofile/flamegraph-names-hot-method grep -q '<title>webapp.dll!HotLoop.Spin (' "$W/cpu.svg"
# to an egress provider: a speedscope file of a fixed length; a flame graph until stopped through /operations
egressed sseg "$U/trace?pid=$APID&durationSeconds=2&format=speedscope&egressProvider=out"
F=$(jq -r '.resourceLocation // empty' "$W/sseg-op.json")
node "$V/speedscope-validate.mjs" "$F" > "$W/sseg.err" 2>&1; rc=$?
WHY="$CODE $(cat "$W/sseg-op.json"); schema exit $rc $(head -c 300 "$W/sseg.err")"
check cpuprofile/egress-speedscope bash -c "[ $CODE = 202 ] && [ $rc = 0 ] && jq -e --argjson p $APID '.status == \"Succeeded\" and (.resourceLocation | endswith(\"_\(\$p).speedscope.json\"))' '$W/sseg-op.json' > /dev/null && grep -q 'HotLoop.Spin' '$F'"
c=$(curl -s -D "$W/fgeg.hdr" -o /dev/null -w '%{http_code}' "$U/trace?pid=$APID&durationSeconds=-1&format=flamegraph&egressProvider=out")
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/fgeg.hdr")
sleep 2 # time passing: the endless trace has run 2 s when it is stopped
curl -s "$U$LOC" > "$W/fgeg-run.json"
curl -s -X DELETE -o /dev/null "$U$LOC?stop=true"
op_ended 10 "$U$LOC"
curl -s "$U$LOC" > "$W/fgeg-op.json"
F=$(jq -r '.resourceLocation // empty' "$W/fgeg-op.json")
rsvg-convert -o "$W/fgeg.png" "$F" 2> "$W/fgeg.err"; rc=$?
WHY="$c; running: $(cat "$W/fgeg-run.json"); then: $(cat "$W/fgeg-op.json"); rsvg-convert exit $rc $(head -c 200 "$W/fgeg.err")"
check cpuprofile/egress-flamegraph-stopped bash -c "[ $c = 202 ] && [ $rc = 0 ] && jq -e '.status == \"Running\" and .isStoppable == true and .egressProviderName == \"out\"' '$W/fgeg-run.json' > /dev/null && jq -e '.status == \"Succeeded\" and (.resourceLocation | endswith(\".svg\"))' '$W/fgeg-op.json' > /dev/null && grep -q 'HotLoop.Spin' '$F'"
c=$(curl -s -o "$W/cpu.speedscope.json" -w '%{http_code}' "$U/trace?pid=$APID&durationSeconds=2&format=speedscope")
node "$V/speedscope-validate.mjs" "$W/cpu.speedscope.json" > "$W/ss.err" 2>&1; rc=$?
WHY="$c, speedscope's schema: exit $rc $(head -c 600 "$W/ss.err")"; check cpuprofile/speedscope-valid test "$c:$rc" = 200:0
share=$(jq '[.shared.frames | to_entries[] | select(.value.name | test("HotLoop\\.Spin")) | .key] as $hot |
  [.profiles[] | [.samples, .weights] | transpose[] | {hot: (.[0] | any(. as $i | $hot | index($i))), w: .[1]}] |
  ((map(select(.hot) | .w) | add // 0) / (map(.w) | add // 1) * 100 | floor)' "$W/cpu.speedscope.json" 2>&1)
WHY="HotLoop.Spin in $share % of the weight"; check cpuprofile/speedscope-hot-method-dominates test "${share:-0}" -gt 50 2>/dev/null
# the speedscope viewer itself (its npm package's release build, served on loopback) opens the file in
# headless Chromium: the page then names the profile and its thread; a file it cannot read names neither
opens_in_speedscope() {
  local f=$1 port pid rc
  rm -rf "$W/ssv" && cp -r "$V/node_modules/speedscope/dist/release" "$W/ssv" && cp "$f" "$W/ssv/profile.json" || return 1
  (cd "$W/ssv" && exec /usr/bin/python3 -u -m http.server 0 --bind 127.0.0.1 > "$W/ssv.http" 2>&1) &
  pid=$!
  port=$(logged_port "$W/ssv.http" "Serving HTTP on 127.0.0.1 port " 10 "$pid") || return 1 # printed once it listens
  timeout 90 chromium --headless=new --no-sandbox --disable-gpu --virtual-time-budget=8000 --dump-dom \
    "http://127.0.0.1:$port/index.html#profileURL=http%3A%2F%2F127.0.0.1%3A$port%2Fprofile.json" > "$W/ssv.dom" 2> "$W/ssv.err"
  rc=$?
  kill "$pid" 2> /dev/null
  wait "$pid" 2> /dev/null
  [ $rc = 0 ] && grep -q "CPU, pid $APID" "$W/ssv.dom" && grep -q 'Thread (0x[0-9A-F]*)' "$W/ssv.dom"
}
opens_in_speedscope "$W/cpu.speedscope.json"; rc=$?
WHY="chromium: $(grep -o 'Thread (0x[0-9A-F]*)\|CPU, pid [0-9]*' "$W/ssv.dom" 2> /dev/null | head -3 | tr '\n' ' ') $(grep -v 'GL Driver\|gpu/' "$W/ssv.err" 2> /dev/null | tail -2)"
check cpuprofile/speedscope-viewer-opens test "$rc" = 0

# --- the default profiles: Cpu, Http, Metrics
trace default "$U/trace?pid=$APID&durationSeconds=6"
whole_trace default
n=$(count default System.Runtime)
WHY="System.Runtime events: $n (counters every 5 s: want >= 1)"; check default/counters test "${n:-0}" -ge 1
n=$(count default Microsoft-DotNETCore-SampleProfiler)
WHY="SampleProfiler events: $n"; check default/samples test "${n:-0}" -gt 0

# --- a providers document
cat > "$W/doc.json" << 'EOF'
{"Providers":[{"Name":"System.Runtime","EventLevel":"Informational","Keywords":"0xffffffff",
  "Arguments":{"EventCounterIntervalSec":"1"}}],"RequestRundown":false,"BufferSizeInMB":32}
EOF
trace post "$U/trace?pid=$APID&durationSeconds=4" -H 'Content-Type: application/json' --data-binary "@$W/doc.json"
whole_trace post
n=$(count post System.Runtime)
WHY="System.Runtime events: $n (every second for 4 s: want >= 3)"; check post/counters-every-second test "${n:-0}" -ge 3
n=$(count post Microsoft-Windows-DotNETRuntimeRundown)
WHY="rundown events: $n (requestRundown false: want 0)"; check post/no-rundown test "${n:-1}" = 0

# --- GcCollect alone: CollectTracing4 with rundown keywords 0x1
trace gc "$U/trace?pid=$APID&profile=gccollect&durationSeconds=3" & TP=$!
wait_for "$W/gc.hdr" '^HTTP/1.1 200' 15 # the session is on (the agent answers once the runtime started it)
curl -s "$AURL/memory-leak?mb=64" > /dev/null
wait $TP
result gc
whole_trace gc
n=$(count gc Microsoft-Windows-DotNETRuntime 1)
WHY="GCStart events: $n (64 MiB allocated during the trace: want >= 1)"; check gc/gc-events test "${n:-0}" -ge 1
n=$(count gc Microsoft-Windows-DotNETRuntimeRundown 144)
WHY="MethodDCEndVerbose events: $n (rundown keywords GC only: want 0)"; check gc/gc-rundown-only test "${n:-1}" = 0

# --- durationSeconds=-1, stopped through /operations
trace stop "$U/trace?pid=$APID&profile=Cpu&durationSeconds=-1" & TP=$!
wait_for "$W/stop.hdr" '^HTTP/1.1 200' 15
OP=$(op_of)
curl -s "$U/operations/$OP" > "$W/stop-op.json"
WHY="$(cat "$W/stop-op.json")"; check stop/running-stoppable jq -e '.status == "Running" and .isStoppable == true and .egressProviderName == null' "$W/stop-op.json"
c=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$U/operations/$OP?stop=true")
wait $TP
result stop
WHY="DELETE ?stop=true: $c; the trace: code $CODE rc $RC"; check stop/ended test "$c:$CODE:$RC" = 200:200:0
complete stop; rc=$?
WHY="$(cat "$W/stop.stats.err" 2>/dev/null)"; check stop/complete test "$rc" = 0
curl -s "$U/operations/$OP" > "$W/stop-op.json"
WHY="$(cat "$W/stop-op.json")"; check stop/succeeded jq -e '.status == "Succeeded" and .error == null' "$W/stop-op.json"

# --- cancelled: cut off
trace cancel "$U/trace?pid=$APID&profile=Cpu&durationSeconds=-1" & TP=$!
wait_for "$W/cancel.hdr" '^HTTP/1.1 200' 15
OP=$(op_of)
c=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$U/operations/$OP")
wait $TP
result cancel
WHY="DELETE: $c; the trace: code $CODE curl rc $RC (want 18: the body cut off)"; check cancel/cut-off test "$c:$RC" = 200:18
curl -s "$U/operations/$OP" > "$W/cancel-op.json"
WHY="$(cat "$W/cancel-op.json")"; check cancel/cancelled jq -e '.status == "Cancelled"' "$W/cancel-op.json"

# --- the client goes away
curl -s -o /dev/null --max-time 2 "$U/trace?pid=$APID&durationSeconds=30"
OP=$(op_of)
op_done() { [ "$(curl -s "$U/operations/$1" | jq -r .status)" != Running ]; }
eventually 15 op_done "$OP" # the agent has seen the client go
curl -s "$U/operations/$OP" > "$W/gone-op.json"
WHY="$(cat "$W/gone-op.json")"; check gone/failed jq -e '.status == "Failed" and (.error.message | test("client went away"))' "$W/gone-op.json"

# --- at most 3 at once
for i in 1 2 3; do curl -s -o /dev/null "$U/trace?pid=$APID&profile=Metrics&durationSeconds=-1" & done
running() { [ "$(curl -s "$U/operations" | jq '[.[] | select(.status == "Running")] | length')" = "$1" ]; }
eventually 15 running 3
c=$(curl -s -o "$W/limit.json" -w '%{http_code}' "$U/trace?pid=$APID&durationSeconds=1")
WHY="fourth trace: $c $(cat "$W/limit.json")"; check limit/429 test "$c" = 429
for op in $(curl -s "$U/operations" | jq -r '.[] | select(.status == "Running") | .operationId'); do
  curl -s -o /dev/null -X DELETE "$U/operations/$op?stop=true"
done
eventually 15 running 0
trace after-limit "$U/trace?pid=$APID&profile=Metrics&durationSeconds=1"
WHY="code $CODE rc $RC"; check limit/free-again test "$CODE:$RC" = 200:0

# --- egress
egressed eg "$U/trace?pid=$APID&profile=Cpu&durationSeconds=2&egressProvider=out&tags=t1"
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/eg.hdr")
WHY="$CODE Location '$LOC'"; check egress/202 bash -c "[ $CODE = 202 ] && [[ '$LOC' =~ ^/operations/[0-9a-f-]{36}$ ]]"
F=$(jq -r .resourceLocation "$W/eg-op.json")
WHY="$(cat "$W/eg-op.json")"; check egress/succeeded jq -e --arg d "$W/out/" --argjson p "$APID" '.status == "Succeeded" and (.resourceLocation | startswith($d) and endswith("_\($p).nettrace")) and .tags == ["t1"]' "$W/eg-op.json"
cp "$F" "$W/eg.nettrace" 2> /dev/null
complete eg; rc=$?
WHY="$(cat "$W/eg.stats.err" 2>/dev/null)"; check egress/complete test "$rc" = 0
# two at once to the same provider: each its own partial file, both published whole
egressed eg2a "$U/trace?pid=$APID&profile=Metrics&durationSeconds=2&egressProvider=out" &
egressed eg2b "$U/trace?pid=$APID&profile=Metrics&durationSeconds=2&egressProvider=out"
wait $!
WHY="$(cat "$W/eg2a-op.json" "$W/eg2b-op.json")"
check egress/two-at-once bash -c "jq -e '.status == \"Succeeded\"' '$W/eg2a-op.json' > /dev/null && jq -e '.status == \"Succeeded\"' '$W/eg2b-op.json' > /dev/null && [ \"\$(jq -r .resourceLocation '$W/eg2a-op.json')\" != \"\$(jq -r .resourceLocation '$W/eg2b-op.json')\" ]"

# --- bad requests
answered() { [ "$1" = "$2" ] && grep -q -- "$3" "$4"; } # answered GOT WANT PATTERN FILE
bad() { # bad NAME WANT-CODE PATTERN CURL-ARGS...
  local name=$1 want=$2 pat=$3 c
  shift 3
  c=$(curl -s -o "$W/bad-$name.json" -w '%{http_code}' "$@")
  WHY="got $c $(cat "$W/bad-$name.json") (want $want and: $pat)"
  check "bad/$name" answered "$c" "$want" "$pat" "$W/bad-$name.json"
}
bad profile 400 "profile 'Bogus'" "$U/trace?pid=$APID&profile=Cpu,Bogus"
bad duration 400 "durationSeconds 'soon'" "$U/trace?pid=$APID&durationSeconds=soon"
bad duration-negative 400 "durationSeconds '-2'" "$U/trace?pid=$APID&durationSeconds=-2"
bad egress 400 "no egress provider 'nope'" "$U/trace?pid=$APID&egressProvider=nope"
bad json 400 'not JSON.*line 1' -H 'Content-Type: application/json' --data-binary '{"providers": [' "$U/trace?pid=$APID"
bad no-providers 400 'providers' -H 'Content-Type: application/json' --data-binary '{"providers": []}' "$U/trace?pid=$APID"
bad keywords 400 'providers\[0\].keywords' -H 'Content-Type: application/json' --data-binary '{"providers":[{"name":"X","keywords":"0xZZ"}]}' "$U/trace?pid=$APID"
bad level 400 'providers\[0\].eventLevel' -H 'Content-Type: application/json' --data-binary '{"providers":[{"name":"X","eventLevel":"Loud"}]}' "$U/trace?pid=$APID"
bad buffer 400 'bufferSizeInMB' -H 'Content-Type: application/json' --data-binary '{"providers":[{"name":"X"}],"bufferSizeInMB":4096}' "$U/trace?pid=$APID"
head -c 70000 /dev/zero | tr '\0' ' ' > "$W/big.json"
bad body-too-big 413 'cap is 65536' -H 'Content-Type: application/json' --data-binary "@$W/big.json" "$U/trace?pid=$APID"
bad chunked 411 'Content-Length' -H 'Transfer-Encoding: chunked' --data-binary '{}' "$U/trace?pid=$APID"
bad body-on-get-route 413 'no request body' -X POST --data-binary 'x' "$U/processes"

# --- /stacks: 4 threads wait for a lock another holds; their stacks show the wait, named
curl -s "$AURL/blocking-threads?count=4&seconds=120" > /dev/null
eventually 10 asleep "$APID" lock-waiter- 4 # the waiters waiting
c=$(curl -s -D "$W/st.hdr" -o "$W/st.txt" -w '%{http_code} %{time_total}' "$U/stacks?pid=$APID")
WHY="$c; $(grep -c '^Thread: (0x' "$W/st.txt") threads: $(head -c 600 "$W/st.txt")"
check stacks/text-200 bash -c "[ '${c%% *}' = 200 ] && grep -qi '^content-type: text/plain' '$W/st.hdr' && grep -q '^Thread: (0x[0-9A-F]*)$' '$W/st.txt'"
# a waiter: Monitor.Enter, then LockContention.Wait right below it (innermost frames first)
waiters=$(awk '/^Thread:/ {prev = ""} /Monitor.Enter$/ {prev = "enter"; next} prev == "enter" && /webapp.dll!LockContention.Wait$/ {n++} {prev = ""} END {print n + 0}' "$W/st.txt")
WHY="threads with Monitor.Enter over LockContention.Wait: $waiters (want 4); $(grep -B1 -A1 'LockContention' "$W/st.txt" | head -12)"
check stacks/lock-waiters-named test "$waiters" = 4
WHY="$(grep -B2 -A2 'LockContention.Hold' "$W/st.txt" | head -6)"
check stacks/holder-named grep -q 'webapp.dll!LockContention.Hold$' "$W/st.txt"
WHY="captured in ${c#* } s (want under 5 s)"; check stacks/quick awk -v t="${c#* }" 'BEGIN {exit !(t < 5)}'
curl -s -H 'Accept: application/json' "$U/stacks?pid=$APID" > "$W/st.json"
WHY="$(head -c 400 "$W/st.json")"
check stacks/json jq -e '(map(select(any(.frames[]; .typeName == "LockContention" and .methodName == "Wait"))) | length) == 4 and all(.[]; (.threadId | type) == "number" and all(.frames[]; has("methodName") and has("typeName") and has("moduleName")))' "$W/st.json"
# thread names: the kernel's (/proc/PID/task/TID/comm), which the runtime sets (".NET TP Worker"); the agent
# shares this PID namespace here, so every thread it lists has its name
names=$(jq -r '.[] | "\(.threadId)\t\(.threadName)"' "$W/st.json")
bad=$(while IFS=$'\t' read -r tid name; do
	want=$(cat "/proc/$APID/task/$tid/comm" 2> /dev/null) || continue
	[ "$name" = "$want" ] || echo "$tid '$name' (kernel: '$want')"
done <<< "$names")
WHY="threads named unlike the kernel: ${bad:-none}; $(head -c 300 <<< "$names")"
check stacks/thread-names bash -c "[ -z '$bad' ] && grep -q '	.NET' <<< '$names'"
curl -s -D "$W/ss.hdr" -o "$W/st.speedscope.json" "$U/stacks?pid=$APID&format=speedscope"
WHY="$(head -c 400 "$W/st.speedscope.json")"
check stacks/speedscope jq -e '(.shared.frames | length) as $n | .["$schema"] == "https://www.speedscope.app/file-format-schema.json" and (.profiles | length) > 4 and all(.profiles[]; .type == "sampled" and (.samples | length) == 1 and all(.samples[0][]; . < $n)) and any(.shared.frames[]; .name == "LockContention.Wait")' "$W/st.speedscope.json"
node "$V/speedscope-validate.mjs" "$W/st.speedscope.json" > "$W/stss.err" 2>&1; rc=$?
WHY="speedscope's schema: exit $rc $(head -c 600 "$W/stss.err")"; check stacks/speedscope-schema test "$rc" = 0
egressed steg "$U/stacks?pid=$APID&egressProvider=out"
F=$(jq -r '.resourceLocation // empty' "$W/steg-op.json")
waiters=$(awk '/^Thread:/ {prev = ""} /Monitor.Enter$/ {prev = "enter"; next} prev == "enter" && /webapp.dll!LockContention.Wait$/ {n++} {prev = ""} END {print n + 0}' "$F" 2> /dev/null)
WHY="$CODE $(cat "$W/steg-op.json"); waiters in the file: $waiters"
check stacks/egress bash -c "[ $CODE = 202 ] && jq -e --arg d '$W/out/' --argjson p $APID '.status == \"Succeeded\" and (.resourceLocation | startswith(\$d) and endswith(\"_\(\$p).stacks.txt\"))' '$W/steg-op.json' > /dev/null && [ '$waiters' = 4 ]"
bad stacks-format 400 "format 'svg'" "$U/stacks?pid=$APID&format=svg"
bad cpuprofile-not-cpu 400 "a CPU profile is folded" "$U/trace?pid=$APID&profile=Http&format=folded"
bad cpuprofile-format 400 "format 'pdf'" "$U/trace?pid=$APID&format=pdf"

# --- perf maps on request (EnablePerfMap / DisablePerfMap)
rm -f "/tmp/perf-$APID.map"
c=$(curl -s -X POST -o "$W/pm.json" -w '%{http_code}' "$U/perfmap?pid=$APID")
WHY="$c $(cat "$W/pm.json")"; check perfmap/enabled jq -e --argjson p "$APID" '.pid == $p and .perfMap == "PerfMap" and .files == ["/tmp/perf-\($p).map"]' "$W/pm.json"
curl -s "$AURL/high-cpu?seconds=1" > /dev/null
eventually 10 grep -q HotLoop "/tmp/perf-$APID.map" # the method is written to the map once it is jitted
WHY="$(wc -l < "/tmp/perf-$APID.map" 2>&1) lines; HotLoop: $(grep -c HotLoop "/tmp/perf-$APID.map" 2>&1)"
check perfmap/jitted-methods-named grep -q 'HotLoop' "/tmp/perf-$APID.map"
c=$(curl -s -X DELETE -o "$W/pm.json" -w '%{http_code}' "$U/perfmap?pid=$APID")
WHY="$c $(cat "$W/pm.json")"; check perfmap/disabled jq -e '.perfMap == "Disabled"' "$W/pm.json"
bad perfmap-type 400 "type 'Bogus'" -X POST "$U/perfmap?pid=$APID&type=Bogus"
rm -f "/tmp/perf-$APID.map"

# --- the process killed mid-trace: truncated
trace trunc "$U/trace?pid=$APID&profile=Cpu&durationSeconds=30" & TP=$!
sleep 2 # time passing: the process is killed 2 s into its trace
OP=$(op_of)
{ kill -9 "$APP" && wait "$APP"; } 2> /dev/null
wait $TP
result trunc
WHY="code $CODE curl rc $RC (want 200 then 18: the body incomplete)"; check truncated/cut-off test "$CODE:$RC" = 200:18
curl -s "$U/operations/$OP" > "$W/trunc-op.json"
WHY="$(cat "$W/trunc-op.json")"; check truncated/failed jq -e '.status == "Failed" and (.error.message | test("truncated"))' "$W/trunc-op.json"
"$D" nettrace stats "$W/trunc.nettrace" > /dev/null 2> "$W/trunc.err"; rc=$?
WHY="exit $rc: $(cat "$W/trunc.err")"; check truncated/reader-says-so bash -c "[ $rc != 0 ] && grep -qi truncated '$W/trunc.err'"

fds_back() { [ "$(fds)" -le $((FD0 + 2)) ]; }
eventually 5 fds_back # the agent's clean-up after the killed process
FD1=$(fds)
WHY="agent fds before $FD0, after $FD1 (want at most +2)"; check fds/flat test "$FD1" -le $((FD0 + 2))
WHY="$(tail -3 "$W/agent.log")"; check agent/alive kill -0 "$AG"
