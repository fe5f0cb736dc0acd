#!/usr/bin/env bash
# metrics.sh - /metrics and /livemetrics against a real .NET runtime (the webapp), counters every second
# (GlobalCounter:IntervalSeconds=1), checked with promtool (Prometheus's own parser and linter) and against
# the kernel and the runtime:
#   prom/*       the exposition parses (promtool check metrics: no parse error; its only lint findings are the
#                two kinds dotnet-monitor's names carry: "_count" gauges and abbreviated units), dotnet-monitor's
#                names and units, the System.Runtime meter (.NET 9+) beside the EventCounters, no token needed
#                while the API wants one, the same text on the metrics-only listener
#   kernel/*     working set within 10% of VmRSS (/proc), CPU under a busy loop within 15 points of what
#                /proc/PID/stat says, GC counts rising after allocation
#   live/*       /livemetrics: json-seq records, the default counters and meters, a POST selection (only what was
#                asked), the GC counters summed over a window equal to the runtime's own GC.CollectionCount
#                delta, the duration kept, egress, 429, bad documents
#   two/*        a second runtime: every series gets a pid label, still valid; the first runtime's series go
#                when it exits
#   delay/*      the session starts metricsStartDelay (default 10 s) after the runtime attaches, not while the
#                app's startup code runs (a runtime deadlock, see METRICS_DEFAULT_DELAY_S): nothing at attach,
#                readings later
#   off/*        --no-metrics: /metrics 404; a delay out of range refused
#   settings/*   Metrics:IncludeDefaultProviders, Metrics:Meters and Metrics:Providers (dotnet-monitor's shape) from a
#                settings file, a key-per-file directory, DIAGPORT_SETTINGS, DotnetMonitor_ and DIAGPORT_ variables:
#                the selection the agent logs; bad values refused (exit 2) naming the source and the setting's path
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-metrics
. tests/lib.sh
agent_setup metrics
command -v promtool > /dev/null || { fail setup "promtool not found (scripts/prereqs.sh test installs Debian's prometheus)"; exit 0; }
build_apps

printf 'sekrit-token-0123456789' > "$W/token"
DOTNETMONITOR_GlobalCounter__IntervalSeconds=1 start_agent --metrics-urls http://127.0.0.1:0 --auth-token-file "$W/token"
MP=$(listening_port "$W/agent.log" metricsUrls 1); MU=http://127.0.0.1:$MP
AUTH=(-H "Authorization: Bearer sekrit-token-0123456789")
start_app() { start_webapp "$W/$1.out" "$W/dumps/port" "$U" "${AUTH[@]}"; }
if ! start_app app; then fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out") $(tail -3 "$W/agent.log")"; exit 0; fi
# scrape FILE: /metrics into FILE (no token)
scrape() { curl -s -o "$1" -w '%{http_code}' "$U/metrics"; }
# value FILE SERIES: the value of the first sample whose name and labels start with SERIES
value() { awk -v s="$2" 'index($0, s) == 1 && substr($0, length(s) + 1, 1) ~ /[ {]/ { print $(NF - 1); exit }' "$1"; }
# --- delay: no session while the app starts; the first readings come one interval after the session starts
T0=$(date +%s%N)
# the store's watcher looks at the port every 500 ms: until it has seen the app the scrape says no runtime is
# attached (on a loaded machine that can outlast the app's listing in /processes)
for _ in $(seq 1 40); do
  scrape "$W/m00.txt" > /dev/null
  grep -q '^# diagport: no .NET runtime is attached' "$W/m00.txt" || break
  sleep 0.1
done
WHY="$(grep -m3 '^systemruntime_' "$W/m00.txt")"
check delay/nothing-at-attach test -z "$WHY"
# an empty scrape says why and when the first readings are due (a comment: Prometheus ignores it)
due=$(sed -n 's/^# diagport: no readings yet; the first are due in \([0-9]*\) s .*/\1/p' "$W/m00.txt")
WHY="$(head -c 300 "$W/m00.txt")"; check delay/says-when-due test -n "$due" -a "${due:-99}" -le 15
promtool check metrics < "$W/m00.txt" > "$W/lint0.txt" 2>&1; rc=$?
WHY="promtool exit $rc: $(head -3 "$W/lint0.txt")"; check delay/empty-scrape-parses test "$rc" = 0 -o "$rc" = 3
for _ in $(seq 1 250); do
  scrape "$W/m0.txt" > /dev/null
  grep -q '^systemruntime_working_set_bytes ' "$W/m0.txt" && grep -q '^systemruntime_dotnet_gc_collections' "$W/m0.txt" && break
  sleep 0.1
done
WAITED_MS=$((($(date +%s%N) - T0) / 1000000))
WHY="first readings ${WAITED_MS} ms after the app was listed"
check delay/readings-after-the-delay test "$WAITED_MS" -ge 5000 -a "$WAITED_MS" -le 20000

# --- prom: the exposition format
code=$(scrape "$W/m1.txt")
WHY="code $code"; check prom/200-without-token test "$code" = 200
code=$(curl -s -o /dev/null -w '%{http_code}' "$U/processes")
WHY="code $code"; check prom/api-still-wants-the-token test "$code" = 401
promtool check metrics < "$W/m1.txt" > "$W/lint.txt" 2>&1; rc=$?
WHY="promtool exit $rc: $(head -3 "$W/lint.txt")"
check prom/promtool-parses test "$rc" = 0 -o "$rc" = 3
WHY="$(grep -v 'should not have "_count" suffix\|should not contain abbreviated units' "$W/lint.txt" | head -5)"
check prom/promtool-only-naming-findings test -z "$WHY"
WHY="$(grep -c '^# TYPE' "$W/m1.txt") families"
check prom/families test "$(grep -c '^# TYPE' "$W/m1.txt")" -gt 20
for n in systemruntime_cpu_usage_ratio systemruntime_working_set_bytes systemruntime_gc_heap_size_bytes \
  systemruntime_gen_0_gc_count systemruntime_alloc_rate_bytes systemruntime_threadpool_thread_count \
  microsoftaspnetcorehosting_total_requests microsoftaspnetcorehosting_current_requests; do
  WHY="no $n in: $(grep -c . "$W/m1.txt") lines"
  check "prom/name/$n" grep -Eq "^# TYPE $n gauge$" "$W/m1.txt"
done
WHY="$(grep dotnet_gc_collections "$W/m1.txt" | head -3)"
check prom/meter-with-labels grep -q '^systemruntime_dotnet_gc_collections__collection_{gc_heap_generation="gen0"} [0-9.e+-]* [0-9]*$' "$W/m1.txt"
WHY="$(grep -A1 'HELP systemruntime_cpu_usage_ratio' "$W/m1.txt")"
check prom/help-and-timestamp grep -Eq '^systemruntime_cpu_usage_ratio [0-9.e+-]+ [0-9]{13}$' "$W/m1.txt"
# MB counters are exported in bytes (x 1,000,000): the heap size is at least a megabyte, not a few units
v=$(value "$W/m1.txt" systemruntime_gc_heap_size_bytes)
WHY="gc heap size $v"; check prom/mb-in-bytes awk -v v="$v" 'BEGIN {exit !(v > 100000)}'
curl -s "$MU/metrics" > "$W/mu.txt"
WHY="$(grep -c '^# TYPE' "$W/mu.txt") families on the metrics listener, $(grep -c '^# TYPE' "$W/m1.txt") on the API"
check prom/metrics-listener test "$(grep -c '^# TYPE' "$W/mu.txt")" = "$(grep -c '^# TYPE' "$W/m1.txt")"
code=$(curl -s -o /dev/null -w '%{http_code}' "$MU/processes")
WHY="code $code"; check prom/metrics-listener-only-metrics test "$code" = 404
code=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$U/metrics")
WHY="code $code"; check prom/post-405 test "$code" = 405

# --- kernel: working set against /proc, CPU against /proc/PID/stat, GC counts after allocation
rss=$(awk '/^VmRSS:/ {print $2 * 1024}' "/proc/$APID/status")
ws=$(value "$W/m1.txt" systemruntime_working_set_bytes)
wsm=$(value "$W/m1.txt" systemruntime_dotnet_process_memory_working_set_By)
WHY="working set $ws, VmRSS $rss"
check kernel/working-set awk -v a="$ws" -v b="$rss" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.1 * b)}'
WHY="meter working set $wsm, VmRSS $rss"
check kernel/working-set-meter awk -v a="$wsm" -v b="$rss" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.1 * b)}'
ticks() { awk '{print $14 + $15}' "/proc/$APID/stat"; }
HZ=$(getconf CLK_TCK); NCPU=$(nproc)
curl -s "$AURL/high-cpu?seconds=8" > /dev/null
sleep 2 # time passing: the counters' 1 s intervals from here on are all busy
t0=$(ticks); s0=$(date +%s.%N)
sleep 3 # time passing: the window /proc's CPU time is measured over
t1=$(ticks); s1=$(date +%s.%N)
scrape "$W/cpu.txt" > /dev/null
proc=$(awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v hz="$HZ" -v n="$NCPU" 'BEGIN {printf "%.1f", (b - a) / hz / (e - s) / n * 100}')
cpu=$(value "$W/cpu.txt" systemruntime_cpu_usage_ratio)
WHY="cpu-usage $cpu %, /proc says $proc % of $NCPU CPUs over 3 s"
# the two agree within 30 % of the kernel's figure (at least 5 points): on a busy machine the loop may get far
# less than a core, and a fixed "over 30 %" failed there although the two agreed (16.6 against 14.3)
check kernel/cpu-busy-loop awk -v a="$cpu" -v b="$proc" 'BEGIN {d = a - b; if (d < 0) d = -d; t = b * 0.3; if (t < 5) t = 5; exit !(b > 5 && d <= t)}'
ut=$(value "$W/cpu.txt" 'systemruntime_dotnet_process_cpu_time_s{cpu_mode="user"}')
st=$(value "$W/cpu.txt" 'systemruntime_dotnet_process_cpu_time_s{cpu_mode="system"}')
persec=$(awk -v a="$t0" -v b="$t1" -v s="$s0" -v e="$s1" -v hz="$HZ" 'BEGIN {printf "%.2f", (b - a) / hz / (e - s)}')
WHY="dotnet.process.cpu.time per 1 s interval: user $ut + system $st; /proc: $persec CPU-seconds a second"
check kernel/cpu-time-meter awk -v u="$ut" -v s="$st" -v p="$persec" 'BEGIN {d = u + s - p; if (d < 0) d = -d; t = p * 0.3; if (t < 0.1) t = 0.1; exit !(p > 0.1 && d <= t)}'
eventually 10 bash -c "! grep -qx hot-loop /proc/$APID/task/*/comm" # the busy loop ends
g0=$(value "$W/m1.txt" systemruntime_gen_0_gc_count)
read -r gc0 _ < <(curl -s "$AURL/gc")
curl -s "$AURL/memory-leak?mb=200" > /dev/null
read -r gc1 _ < <(curl -s "$AURL/gc")
ok=1
for _ in $(seq 1 40); do
  scrape "$W/gc.txt" > /dev/null
  g=$(value "$W/gc.txt" systemruntime_gen_0_gc_count); gm=$(value "$W/gc.txt" 'systemruntime_dotnet_gc_collections__collection_{gc_heap_generation="gen0"}')
  awk -v a="$g" -v b="$gm" 'BEGIN {exit !(a > 0 && b > 0)}' && { ok=0; break; }
  sleep 0.1
done
WHY="gen-0 collections during the allocation: $gc0 -> $gc1 (runtime); the counters after it: gen-0-gc-count $g, dotnet.gc.collections{gen0} $gm (before: $g0)"
check kernel/gc-counts-rise test "$ok" = 0 -a "$gc1" -gt "$gc0"

# --- live: /livemetrics
live() { # live NAME URL [CURL ARGS]: into $W/NAME.seq, "CODE TOTAL" in $W/NAME.res
  local name=$1 url=$2; shift 2
  curl -s "${AUTH[@]}" -D "$W/$name.hdr" -o "$W/$name.seq" -w '%{http_code} %{time_total}' "$@" "$url" > "$W/$name.res"
}
# records NAME: the json-seq file as one JSON array (fails unless every record is RS + JSON + LF)
records() {
  python3 - "$W/$1.seq" <<'EOF'
import json, sys
data = open(sys.argv[1], 'rb').read()
if not data.startswith(b'\x1e'):
    sys.exit('does not start with RS')
out = []
for rec in data.split(b'\x1e')[1:]:
    if not rec.endswith(b'\n'):
        sys.exit('a record without its LF')
    out.append(json.loads(rec))
print(json.dumps(out))
EOF
}
live default "$U/livemetrics?pid=$APID&durationSeconds=3"
read -r code total < "$W/default.res"
WHY="code $code in $total s"; check live/200 test "$code" = 200
check live/content-type grep -qi '^Content-Type: application/json-seq' "$W/default.hdr"
records default > "$W/default.json"; rc=$?
WHY="$(head -c 300 "$W/default.seq" | tr '\036' '^')"; check live/json-seq test "$rc" = 0
WHY="names: $(jq -r '[.[].name] | unique | join(",")' "$W/default.json" 2>/dev/null | head -c 400)"
check live/eventcounter jq -e 'any(.[]; .provider == "System.Runtime" and .name == "cpu-usage" and .counterType == "Metric" and .unit == "%")' "$W/default.json"
check live/eventcounter-rate jq -e 'any(.[]; .name == "gen-0-gc-count" and .counterType == "Rate")' "$W/default.json"
check live/meter jq -e 'any(.[]; .provider == "System.Runtime" and .name == "dotnet.gc.collections" and (.tags | test("gc.heap.generation=gen0")))' "$W/default.json"
check live/fields jq -e 'all(.[]; has("timestamp") and has("provider") and has("name") and has("displayName") and has("unit") and has("counterType") and has("value"))' "$W/default.json"
WHY="took $total s for durationSeconds=3"; check live/duration awk -v t="$total" 'BEGIN {exit !(t >= 2.5 && t < 8)}'
# a selection: two EventCounters and one meter instrument, nothing else
cat > "$W/sel.json" <<'EOF'
{"includeDefaultProviders": false,
 "providers": [{"providerName": "System.Runtime", "counterNames": ["gen-0-gc-count", "working-set"]}],
 "meters": [{"meterName": "System.Runtime", "instrumentNames": ["dotnet.gc.collections"]}]}
EOF
read -r gb _ < <(curl -s "$AURL/gc")
# time passing: the allocation in the middle of the 5 s session, which sees the collections rise
( sleep 1.5; curl -s "$AURL/memory-leak?mb=150" > /dev/null; curl -s "$AURL/gc" > "$W/gc.after" ) &
live sel "$U/livemetrics?pid=$APID&durationSeconds=5" -X POST -H 'Content-Type: application/json' --data-binary @"$W/sel.json"
wait $!
read -r ga _ < "$W/gc.after"
records sel > "$W/sel.json.out"
WHY="names: $(jq -r '[.[].name] | unique | join(",")' "$W/sel.json.out" 2>/dev/null)"
check live/selection-only jq -e '([.[].name] | unique) == ["dotnet.gc.collections", "gen-0-gc-count", "working-set"]' "$W/sel.json.out"
sum=$(jq '[.[] | select(.name == "gen-0-gc-count") | .value] | add // 0' "$W/sel.json.out")
msum=$(jq '[.[] | select(.name == "dotnet.gc.collections" and (.tags | test("=gen0"))) | .value] | add // 0' "$W/sel.json.out")
WHY="GC.CollectionCount(0) went $gb -> $ga ($((ga - gb))); gen-0-gc-count increments sum to $sum, dotnet.gc.collections{gen0} rates to $msum"
check live/gc-counts-match-runtime awk -v d="$((ga - gb))" -v s="$sum" -v m="$msum" \
  'BEGIN {a = s - d; b = m - d; if (a < 0) a = -a; if (b < 0) b = -b; exit !(d > 0 && a <= 1 && b <= 1)}'
# to an egress provider: 202, then a json-seq file
code=$(curl -s "${AUTH[@]}" -D "$W/eg.hdr" -o /dev/null -w '%{http_code}' "$U/livemetrics?pid=$APID&durationSeconds=2&egressProvider=out")
loc=$(tr -d '\r' < "$W/eg.hdr" | sed -n 's/^Location: //p')
st=
for _ in $(seq 1 100); do
  st=$(curl -s "${AUTH[@]}" "$U$loc" | jq -r .status); [ "$st" = Succeeded ] || [ "$st" = Failed ] && break; sleep 0.1
done
f=$(ls "$W/out"/*.metrics.json 2>/dev/null | head -1)
WHY="code $code, $loc: $st, file '$f'"; check live/egress test "$code" = 202 -a "$st" = Succeeded -a -s "${f:-/nonexistent}"
if [ -n "$f" ]; then cp "$f" "$W/egressed.seq"; fi
records egressed > /dev/null; rc=$?
WHY="$(head -c 200 "$W/egressed.seq" 2>/dev/null | tr '\036' '^')"; check live/egress-json-seq test "$rc" = 0
# four at once: the fourth gets 429
MANY=()
for i in 1 2 3; do live "many$i" "$U/livemetrics?pid=$APID&durationSeconds=4" & MANY+=($!); done
three_live() { grep -qs '^HTTP/1.1 200' "$W/many1.hdr" && grep -qs '^HTTP/1.1 200' "$W/many2.hdr" && grep -qs '^HTTP/1.1 200' "$W/many3.hdr"; }
eventually 10 three_live # the three sessions are admitted (their answers begun)
code=$(curl -s "${AUTH[@]}" -o "$W/429.json" -w '%{http_code}' "$U/livemetrics?pid=$APID&durationSeconds=1")
WHY="code $code $(cat "$W/429.json")"; check live/fourth-429 test "$code" = 429
wait "${MANY[@]}"
bad() { # bad NAME BODY WANT-IN-DETAIL
  local code
  code=$(curl -s "${AUTH[@]}" -o "$W/bad.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary "$2" "$U/livemetrics?pid=$APID&durationSeconds=1")
  WHY="code $code $(cat "$W/bad.json")"; check "live/bad/$1" test "$code" = 400 -a -n "$(grep -F -- "$3" "$W/bad.json")"
}
bad not-json '{"providers":' 'not JSON'
bad providers-not-array '{"providers":{}}' "'providers' must be an array"
bad no-name '{"providers":[{"counterNames":["x"]}]}' 'providers[0].providerName'
bad bad-name '{"meters":[{"meterName":"a;b"}]}' 'meters[0].meterName'
bad names-not-array '{"meters":[{"meterName":"M","instrumentNames":"x"}]}' 'meters[0].instrumentNames'
bad nothing '{"includeDefaultProviders":false}' 'nothing to collect'
bad include-not-bool '{"includeDefaultProviders":"yes"}' 'includeDefaultProviders'

# --- two runtimes: a pid label on every sample; the first one's series go when it exits
FIRST=$APID; FIRST_APP=$APP
if start_app app2; then
  for _ in $(seq 1 250); do
    scrape "$W/two.txt" > /dev/null
    grep -q "pid=\"$APID\"" "$W/two.txt" && grep -q "pid=\"$FIRST\"" "$W/two.txt" && break
    sleep 0.1
  done
  WHY="$(grep -m2 working_set_bytes "$W/two.txt")"
  check two/pid-labels grep -q "^systemruntime_working_set_bytes{pid=\"$APID\"} " "$W/two.txt"
  WHY="$(grep -v '^#' "$W/two.txt" | grep -v 'pid="' | head -3)"
  check two/every-sample-labelled test -z "$WHY"
  promtool check metrics < "$W/two.txt" > "$W/lint2.txt" 2>&1; rc=$?
  WHY="promtool exit $rc: $(grep -v 'should not' "$W/lint2.txt" | head -3)"
  check two/promtool test "$rc" -le 3 -a "$rc" != 1 -a -z "$(grep -v 'should not have "_count" suffix\|should not contain abbreviated units' "$W/lint2.txt")"
  kill -9 "$FIRST_APP"
  for _ in $(seq 1 100); do
    scrape "$W/gone.txt" > /dev/null
    grep -q "pid=\"$FIRST\"" "$W/gone.txt" || break
    sleep 0.1
  done
  WHY="$(grep -c "pid=\"$FIRST\"" "$W/gone.txt") samples of the exited runtime remain"
  check two/exited-runtime-dropped test "$(grep -c "pid=\"$FIRST\"" "$W/gone.txt")" = 0
else
  fail two/start "the second webapp did not start: $(tail -3 "$W/app2.out")"
fi

# --- off: --no-metrics
"$D" launch --socket "$W/dumps/port2" --urls http://127.0.0.1:0 --dumps "$W/dumps" --no-auth --no-metrics 2> "$W/agent2.log" & PIDS+=($!)
P2=$(listening_port "$W/agent2.log" urls 10 "$!") # listening: it answers
code=$(curl -s -o "$W/off.json" -w '%{http_code}' "http://127.0.0.1:$P2/metrics")
WHY="code $code $(cat "$W/off.json")"; check off/404 test "$code" = 404
code=$(timeout 5 "$D" launch --socket "$W/dumps/port3" --no-auth --metrics-interval 0 > /dev/null 2>&1; echo $?)
check off/bad-interval-refused test "$code" = 2
timeout 5 "$D" launch --socket "$W/dumps/port3" --no-auth --metrics-start-delay 3601 > /dev/null 2> "$W/delay.err"; code=$?
WHY="exit $code: $(cat "$W/delay.err")"
check off/bad-delay-refused test "$code" = 2 -a -n "$(grep -F -- '--metrics-start-delay: metricsStartDelay takes a whole number of seconds from 0 to 3600' "$W/delay.err")"

# --- settings: Metrics:Meters / Metrics:Providers / Metrics:IncludeDefaultProviders from every settings source,
# the selection the agent says it collects (its log's metrics-selection line); bad values name the path and source
# selection NAME [VAR=VALUE...] -- [ARGS...]: an agent with these settings; its log in $W/sel-NAME.log, exit in $W/sel-NAME.rc
selection() {
  local name=$1 pid vars=()
  shift
  while [ $# -gt 0 ] && [ "$1" != -- ]; do vars+=("$1"); shift; done
  shift
  env "${vars[@]+"${vars[@]}"}" "$D" launch --socket "$W/dumps/sel-$name" --urls http://127.0.0.1:0 \
    --dumps "$W/dumps" --no-auth "$@" 2> "$W/sel-$name.log" &
  pid=$!; PIDS+=($pid)
  for _ in $(seq 1 50); do grep -q 'metrics-selection' "$W/sel-$name.log" && break; kill -0 "$pid" 2> /dev/null || break; sleep 0.1; done
  kill "$pid" 2> /dev/null; wait "$pid" 2> /dev/null; echo $? > "$W/sel-$name.rc"
}
ROUTE='"meters":"Microsoft.AspNetCore.Routing[aspnetcore.routing.match_attempts], Microsoft.AspNetCore.Server.Kestrel"'
printf 'Metrics:\n  IncludeDefaultProviders: false\n  Meters:\n    - MeterName: Microsoft.AspNetCore.Routing\n      InstrumentNames: [aspnetcore.routing.match_attempts]\n    - MeterName: Microsoft.AspNetCore.Server.Kestrel\n' > "$W/sel.yaml"
selection file -- --config "$W/sel.yaml"
mkdir -p "$W/seldir"
printf 'false\n' > "$W/seldir/Metrics__IncludeDefaultProviders"
printf 'Microsoft.AspNetCore.Routing\n' > "$W/seldir/Metrics__Meters__0__MeterName"
printf 'aspnetcore.routing.match_attempts' > "$W/seldir/Metrics__Meters__0__InstrumentNames__0"
printf 'Microsoft.AspNetCore.Server.Kestrel\n' > "$W/seldir/Metrics__Meters__1__MeterName"
selection dir -- --config-dir "$W/seldir"
selection settings-doc 'DIAGPORT_SETTINGS={"Metrics":{"IncludeDefaultProviders":false,"Meters":[{"MeterName":"Microsoft.AspNetCore.Routing","InstrumentNames":["aspnetcore.routing.match_attempts"]},{"MeterName":"Microsoft.AspNetCore.Server.Kestrel"}]}}' --
selection dotnetmonitor-env DotnetMonitor_Metrics__IncludeDefaultProviders=false \
  DotnetMonitor_Metrics__Meters__0__MeterName=Microsoft.AspNetCore.Routing \
  DotnetMonitor_Metrics__Meters__0__InstrumentNames__0=aspnetcore.routing.match_attempts \
  DotnetMonitor_Metrics__Meters__1__MeterName=Microsoft.AspNetCore.Server.Kestrel --
selection diagport-env DIAGPORT_Metrics__IncludeDefaultProviders=false \
  DIAGPORT_Metrics__Meters__0__MeterName=Microsoft.AspNetCore.Routing \
  DIAGPORT_Metrics__Meters__0__InstrumentNames__0=aspnetcore.routing.match_attempts \
  DIAGPORT_Metrics__Meters__1__MeterName=Microsoft.AspNetCore.Server.Kestrel --
for s in file dir settings-doc dotnetmonitor-env diagport-env; do
  WHY="$(grep -m1 metrics-selection "$W/sel-$s.log" || tail -2 "$W/sel-$s.log")"
  check "settings/$s" grep -qF "\"providers\":\"\",$ROUTE" "$W/sel-$s.log"
done
selection defaults DotnetMonitor_Metrics__Providers__0__ProviderName=Grpc.Net.Client \
  DotnetMonitor_Metrics__Providers__0__CounterNames__0=current-calls --
WHY="$(grep -m1 metrics-selection "$W/sel-defaults.log")"
check settings/defaults-kept grep -qF '"providers":"System.Runtime, Microsoft.AspNetCore.Hosting, Grpc.AspNetCore.Server, Grpc.Net.Client[current-calls]","meters":"System.Runtime, Microsoft.AspNetCore.Hosting"' "$W/sel-defaults.log"
# bad: exit 2, the message names the source (file:line:col, variable, file in the directory) and the setting's path
printf 'Metrics:\n  Meters:\n    - MeterName: "a;b"\n' > "$W/bad.yaml"
selection bad-file -- --config "$W/bad.yaml"
printf 'red' > "$W/seldir/Metrics__Meters__0__Colour"
selection bad-dir -- --config-dir "$W/seldir"
rm "$W/seldir/Metrics__Meters__0__Colour"
selection bad-env DotnetMonitor_Metrics__Meters__0__InstrumentNames__0=x --
selection bad-limit DotnetMonitor_GlobalCounter__MaxHistograms=0 --
selection bad-include 'DIAGPORT_SETTINGS={"Metrics":{"IncludeDefaultProviders":"sometimes"}}' --
bad_setting() {
  WHY="exit $(cat "$W/sel-$1.rc"): $(tail -2 "$W/sel-$1.log")"
  check "settings/bad/$1" test "$(cat "$W/sel-$1.rc")" = 2 -a -n "$(grep -F -- "$2" "$W/sel-$1.log")"
}
bad_setting bad-file "$W/bad.yaml:3:18: Metrics:Meters:0:MeterName: must be a name"
bad_setting bad-dir "$W/seldir/Metrics__Meters__0__Colour: Metrics:Meters:0:Colour: not a setting diagport knows here"
bad_setting bad-env "environment variable DotnetMonitor_Metrics__Meters__0__InstrumentNames__0: Metrics:Meters:0: has no MeterName"
bad_setting bad-limit "environment variable DotnetMonitor_GlobalCounter__MaxHistograms: GlobalCounter:MaxHistograms takes a whole number from 1 to 100000, not '0'"
bad_setting bad-include "environment variable DIAGPORT_SETTINGS:1:39: Metrics:IncludeDefaultProviders takes true or false, not 'sometimes'"
