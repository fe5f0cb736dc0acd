#!/usr/bin/env bash
# trace_judge.sh - the agent's traces, CPU profiles and stacks judged by Microsoft's own tools (issue 22):
# dotnet-trace and dotnet-stack 10.0 (scripts/prereqs.sh test installs them in build/tools) on the same
# processes: the console app spinning two threads in DiagportTestConsole.Program.Spin, and the webapp with
# four threads waiting on a lock another holds. tests/integration/trace_judge.py reads both sides in one
# spelling ("Module!Namespace.Type.Method": the agent's ".dll" and TraceEvent's argument list dropped).
#   convert/*  a 4 s /trace?profile=Cpu nettrace: `dotnet-trace convert` makes speedscope (valid by
#              speedscope's own schema, tests/validate) and Chromium (every B closed by its E), both with
#              Program.Spin the leaf holding over 90 % of the CPU time and its time within 10 % of 2 threads
#              x 4 s; the two formats tell the same times (within 1 %)
#   post/*     a providers document (the Cpu profile's providers) through POST: the same
#   side/*     the agent's own speedscope (format=speedscope, 10 s) and `dotnet-trace collect --profile
#              dotnet-sampled-thread-time --duration 10 s --format speedscope` at the same time: the same top
#              leaf, its share of the CPU within 5 points, its time and each busy thread's within 10 %, the
#              same threads busy over 5 % of the time (the two spinners)
#   stacks/*   /stacks then `dotnet-stack report` on the webapp just started: the same managed threads, the
#              same frames for the lock's holder and its four waiters (LockContention.Hold, .Wait), and for at
#              least 90 % of all threads (a thread-pool thread may move between the two)
set -u
cd "$(dirname "$0")/../.."
T_NAME=trace-judge
. tests/lib.sh
agent_setup trace-judge
TOOLS=$PWD/build/tools
DT=$TOOLS/dotnet-trace/dotnet-trace
DS=$TOOLS/dotnet-stack/dotnet-stack
J=tests/integration/trace_judge.py
V=$PWD/tests/validate
for t in "$DT" "$DS"; do
	[ -x "$t" ] || { fail setup "$t not found (scripts/prereqs.sh test installs it)"; exit 0; }
done
build_apps
start_agent --no-metrics
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" spin 2 > "$W/con.out" 2>&1 &
PIDS+=($!)
wait_for "$W/con.out" READY 30 || { fail setup "the console app did not start: $(tail -3 "$W/con.out")"; exit 0; }
CPID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/con.out")
for _ in $(seq 1 100); do curl -s "$U/processes" | grep -q "\"pid\":$CPID" && break; sleep 0.1; done
HOT='console!DiagportTestConsole.Program.Spin'

# cpu NAME FILE: trace_judge.py's reading of FILE into $W/NAME.cpu.json; 0 when it read it
cpu() { /usr/bin/python3 "$J" cpu "$2" > "$W/$1.cpu.json" 2> "$W/$1.cpu.err"; }
# valid FILE: speedscope's schema accepts FILE (its errors in FILE.schema)
valid() { node "$V/speedscope-validate.mjs" "$1" > "$1.schema" 2>&1; }
# hot_on_top NAME MS: in $W/NAME.cpu.json the hot method is the leaf with the most time and over 90 % of all,
# and its time is within 10 % of MS
hot_on_top() {
	jq -e --arg h "$HOT" --argjson want "$2" '(.leaves | to_entries | max_by(.value) | .key) == $h and
		.leaves[$h] > 0.9 * .totalMs and .leaves[$h] >= 0.9 * $want and .leaves[$h] <= 1.1 * $want' "$W/$1.cpu.json"
}
summary() { jq -c --arg h "$HOT" '{hotMs: .leaves[$h], totalMs, threads}' "$W/$1.cpu.json" 2>/dev/null | head -c 600; }
# convert NAME: dotnet-trace convert of $W/NAME.nettrace to speedscope and Chromium, each read by trace_judge.py
convert() {
	local n=$1 f rc
	for f in Speedscope Chromium; do
		timeout 120 "$DT" convert --format "$f" -o "$W/$n" "$W/$n.nettrace" > "$W/$n.$f.log" 2>&1; rc=$?
		WHY="exit $rc: $(tail -3 "$W/$n.$f.log")"; check "$n/convert-${f,,}" test "$rc" = 0
	done
	valid "$W/$n.speedscope.json"; rc=$?
	WHY="speedscope's schema: exit $rc $(head -c 400 "$W/$n.speedscope.json.schema")"; check "$n/speedscope-valid" test "$rc" = 0
	cpu "$n-ss" "$W/$n.speedscope.json"; rc=$?
	cpu "$n-cr" "$W/$n.chromium.json" || rc=$?
	WHY="$(cat "$W/$n-ss.cpu.err" "$W/$n-cr.cpu.err" | head -c 400)"; check "$n/both-read" test "$rc" = 0
}

# --- convert: the agent's nettrace, Cpu profile, 4 s, while 2 threads spin
c=$(curl -s -o "$W/convert.nettrace" -w '%{http_code}' "$U/trace?pid=$CPID&profile=Cpu&durationSeconds=4")
WHY="$c $(head -c 200 "$W/convert.nettrace" | tr -cd '[:print:]')"; check convert/200 test "$c" = 200
convert convert
WHY="speedscope: $(summary convert-ss)"; check convert/speedscope-hot-on-top hot_on_top convert-ss 8000
WHY="chromium: $(summary convert-cr)"; check convert/chromium-hot-on-top hot_on_top convert-cr 8000
WHY="speedscope $(summary convert-ss); chromium $(summary convert-cr)"
check convert/formats-agree jq -e -n --slurpfile a "$W/convert-ss.cpu.json" --slurpfile b "$W/convert-cr.cpu.json" --arg h "$HOT" \
	'($a[0].leaves[$h] - $b[0].leaves[$h]) | fabs <= 0.01 * $b[0].leaves[$h]'

# --- post: a providers document, the Cpu profile's providers, 3 s
cat > "$W/cpu.json" << 'EOF'
{"providers":[{"name":"Microsoft-DotNETCore-SampleProfiler","eventLevel":"Informational"},
  {"name":"Microsoft-Windows-DotNETRuntime","eventLevel":"Informational","keywords":"0x14C14FCCBD"}],
 "requestRundown":true,"bufferSizeInMB":64}
EOF
c=$(curl -s -o "$W/post.nettrace" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$W/cpu.json" \
	"$U/trace?pid=$CPID&durationSeconds=3")
WHY="$c $(head -c 200 "$W/post.nettrace" | tr -cd '[:print:]')"; check post/200 test "$c" = 200
convert post
WHY="speedscope: $(summary post-ss)"; check post/speedscope-hot-on-top hot_on_top post-ss 6000
WHY="chromium: $(summary post-cr)"; check post/chromium-hot-on-top hot_on_top post-cr 6000

# --- side by side: the agent's speedscope and dotnet-trace's, 10 s each, at the same time
curl -s -o "$W/agent.speedscope.json" -w '%{http_code}' "$U/trace?pid=$CPID&profile=Cpu&durationSeconds=10&format=speedscope" \
	> "$W/agent.code" &
AP=$!
timeout 120 "$DT" collect -p "$CPID" --profile dotnet-sampled-thread-time --duration 00:00:00:10 --format speedscope \
	-o "$W/tool.nettrace" > "$W/tool.log" 2>&1; rc=$?
wait $AP
WHY="agent $(cat "$W/agent.code"); dotnet-trace exit $rc: $(tail -3 "$W/tool.log")"
check side/both-ran test "$(cat "$W/agent.code"):$rc" = 200:0
valid "$W/agent.speedscope.json"; rc=$?
WHY="exit $rc $(head -c 400 "$W/agent.speedscope.json.schema")"; check side/agent-speedscope-valid test "$rc" = 0
valid "$W/tool.speedscope.json"; rc=$?
WHY="exit $rc $(head -c 400 "$W/tool.speedscope.json.schema")"; check side/tool-speedscope-valid test "$rc" = 0
cpu agent "$W/agent.speedscope.json"; rc=$?
cpu tool "$W/tool.speedscope.json" || rc=$?
WHY="$(cat "$W/agent.cpu.err" "$W/tool.cpu.err" | head -c 400)"; check side/both-read test "$rc" = 0
# cmp_side NAME JQ: check NAME with JQ on the agent's reading ($a[0]) and the tool's ($t[0]), both shown when it fails
cmp_side() {
	WHY="agent $(summary agent); dotnet-trace $(summary tool); .NET EventPipe: ${EPT:-}"
	check "side/$1" jq -e -n --slurpfile a "$W/agent.cpu.json" --slurpfile t "$W/tool.cpu.json" --arg h "$HOT" "$2"
}
cmp_side same-top-leaf '[$a[0], $t[0]] | map(.leaves | to_entries | max_by(.value) | .key) | .[0] == $h and .[1] == $h'
cmp_side hot-share-within-5-points \
	'[$a[0], $t[0]] | map(.leaves[$h] / .totalMs * 100) | (.[0] - .[1]) | fabs <= 5'
cmp_side hot-time-within-10-percent '($a[0].leaves[$h] - $t[0].leaves[$h]) | fabs <= 0.1 * $t[0].leaves[$h]'
# The runtime's ".NET EventPipe" thread is left out: it runs managed code only in EventSource callbacks (a
# session starting or stopping: here the agent's, during dotnet-trace's) and is not sampled between them, and
# TraceEvent carries a thread's last stack over until its next sample: seconds of CPU_TIME for a thread asleep
# in native code (docs/agent/cpuprofile.md); the agent gives it the sampler's tick alone
EPT=$(for f in /proc/"$CPID"/task/*/comm; do [ "$(cat "$f" 2>/dev/null)" = '.NET EventPipe' ] && basename "$(dirname "$f")"; done | jq -R . | jq -sc .)
busy="[.threads | to_entries[] | select(.value.cpuMs > 500 and (.key as \$k | $EPT | index(\$k) | not))]"
cmp_side same-busy-threads "[\$a[0], \$t[0]] | map($busy | map(.key) | sort) | .[0] == .[1] and (.[0] | length) == 2"
cmp_side busy-thread-times-within-10-percent \
	"(\$a[0] | $busy) as \$x | (\$x | length) == 2 and all(\$x[]; . as \$e | \$t[0].threads[\$e.key].cpuMs as \$m | \$m != null and ((\$e.value.cpuMs - \$m) | fabs) <= 0.1 * \$m and \$e.value.top == \$h and \$t[0].threads[\$e.key].top == \$h)"

# --- stacks: /stacks first (the webapp's first session), then dotnet-stack report
start_webapp "$W/app.out" "$W/dumps/port" "$U" || { fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out")"; exit 0; }
curl -s "$AURL/blocking-threads?count=4&seconds=120" > /dev/null
# the waiters waiting, and no thread running (the thread pool's workers done spinning, so that the two
# tools, one after the other, see the same frames)
eventually 10 asleep "$APID" lock-waiter- 4 && eventually 10 asleep "$APID" "" 0
c=$(curl -s -o "$W/agent.stacks.txt" -w '%{http_code}' "$U/stacks?pid=$APID")
timeout 60 "$DS" report -p "$APID" > "$W/tool.stacks.txt" 2> "$W/tool.stacks.err"; rc=$?
WHY="agent $c; dotnet-stack exit $rc $(head -c 300 "$W/tool.stacks.err")"; check stacks/both-ran test "$c:$rc" = 200:0
/usr/bin/python3 "$J" stacks "$W/tool.stacks.txt" "$W/agent.stacks.txt" > "$W/stacks.json" 2> "$W/stacks.err"
WHY="$(cat "$W/stacks.err") $(jq -c '{tool, agent}' "$W/stacks.json" 2>/dev/null)"
check stacks/same-threads jq -e '.tool == .agent and (.tool | length) > 8' "$W/stacks.json"
# the holder and the waiters: their thread ids from the agent's text, their frames the same in both
parked=$(awk '/^Thread: \(0x/ {t = substr($2, 2, length($2) - 2)} /webapp.dll!LockContention\.(Hold|Wait)$/ {print t}' \
	"$W/agent.stacks.txt" | sort -u | tr '\n' ' ')
WHY="parked threads $parked; differing: $(jq -c '.differ' "$W/stacks.json" | head -c 1200)"
check stacks/parked-same-frames bash -c "n=0; for t in $parked; do d=\$((t)); jq -e --arg d \$d '.differ[\$d] == null' '$W/stacks.json' > /dev/null || exit 1; n=\$((n + 1)); done; [ \$n = 5 ]"
WHY="$(jq -c '{threads: (.tool | length), differ: (.differ | keys)}' "$W/stacks.json") $(jq -c '.differ' "$W/stacks.json" | head -c 800)"
check stacks/all-same-frames-90-percent jq -e '(.differ | length) * 10 <= (.tool | length)' "$W/stacks.json"
WHY="$(tail -3 "$W/agent.log")"; check agent/alive kill -0 "$AG"
