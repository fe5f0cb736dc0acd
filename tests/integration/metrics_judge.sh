#!/usr/bin/env bash
# metrics_judge.sh - /metrics and /livemetrics judged by Microsoft's dotnet-counters (10.0.750501,
# build/tools/dotnet-counters) on the same webapp processes, and the agent kept right while the tool shares the
# runtime's metrics session (the runtime's rules: docs/agent/metrics.md "Sharing the runtime with other tools"). The agent
# collects the Kestrel and routing meters too (Metrics:Meters, from DotnetMonitor_ variables), every 5 s.
#   meters/*     app A: `dotnet-counters collect --counters System.Runtime,<Kestrel>,<Routing> --format json` takes
#                the runtime's meter aggregation first (a private session); every instrument it reports is a
#                family of /metrics (docs/agent/metrics.md's name mapping), the routing and runtime ones read by the agent's own session afterwards;
#                the agent logs that it was refused (and reads the tool's readings meanwhile)
#   counters/*   app A: `collect --counters EventCounters\System.Runtime,EventCounters\Microsoft.AspNetCore.Hosting
#                --format csv` beside the agent (EventCounters have no one-session rule): every counter it reports is
#                in /metrics (by display name) and /livemetrics; gauges stamped the same second within 1 %; while its 1 s
#                interval runs, the agent's request rate per 5 s is 5x the tool's per second, both within 20 % of
#                the 20 requests/s driven
#   rules/*      app A: what the runtime refuses beside the agent's shared session, as the tool reports it: a private
#                meter session (collect with meters); monitor with other settings (the message lists the agent's
#                MaxHistograms 20 and IntervalSeconds 5); monitor with the agent's settings runs and shows routing
#   shared/*     app B: `dotnet-counters monitor` (1 s, MaxHistograms 10) holds the shared session before the agent's
#                starts; the agent joins on its terms (log metrics-rejoin), and its routing match attempts per 5 s
#                stay within 20 % of the 100 driven (20/s) during the 1 s session and after it ends
set -u
cd "$(dirname "$0")/../.."
T_NAME=metrics-judge
. tests/lib.sh
agent_setup metrics-judge
DC=$PWD/build/tools/dotnet-counters/dotnet-counters
[ -x "$DC" ] || { fail setup "no $DC (bash scripts/prereqs.sh test installs it)"; exit 0; }
build_apps
PY=/usr/bin/python3
KESTREL=Microsoft.AspNetCore.Server.Kestrel
ROUTING=Microsoft.AspNetCore.Routing
# the runtime's deadlock guard (metricsStartDelay) leaves each app 8 s in which a tool can take the session first
DotnetMonitor_Metrics__Meters__0__MeterName=$KESTREL DotnetMonitor_Metrics__Meters__1__MeterName=$ROUTING \
	start_agent --no-auth --metrics-start-delay 8
# drive URL RATE SECONDS: GET URL RATE times a second on a fixed schedule (background)
drive() {
	"$PY" -c 'import sys, time, urllib.request
u, r, n = sys.argv[1], float(sys.argv[2]), int(float(sys.argv[2]) * float(sys.argv[3]))
t0 = time.monotonic()
for i in range(n):
    d = t0 + i / r - time.monotonic()
    if d > 0: time.sleep(d)
    try: urllib.request.urlopen(u, timeout=2).read()
    except Exception: pass' "$@" > /dev/null 2>&1 &
	DRV=$!; PIDS+=($DRV)
}
# drove: wait for the last driver to finish (phases do not overlap their request rates)
drove() { wait "$DRV" 2> /dev/null; }
if ! start_webapp "$W/a.out" "$W/dumps/port" "$U"; then fail setup "app A did not start: $(tail -3 "$W/agent.log")"; exit 0; fi
A=$APID AURL_A=$AURL

# --- meters: the tool's private session first
drive "$AURL_A/" 20 14
T_END=$(($(date +%s) + 12))
timeout 60 "$DC" collect -p "$A" --counters "System.Runtime,$KESTREL,$ROUTING" --refresh-interval 1 \
	--duration 00:00:00:12 --format json -o "$W/meters.json" > "$W/meters.out" 2>&1 < /dev/null
WHY="$(tail -3 "$W/meters.out")"; check meters/collect-ran test -s "$W/meters.json"
WHY="$(grep -c metrics-refused "$W/agent.log") refusals logged"
check meters/agent-told-refused grep -q '"event":"metrics-refused".*"pid":'"$A" "$W/agent.log"
# the agent's own session: retried every 10 s while refused, then 5 s to its first readings
sleep 1
drive "$AURL_A/" 20 20
for _ in $(seq 1 300); do
	curl -s "$U/metrics" > "$W/m-after.txt"
	"$PY" tests/integration/metrics_judge.py fresh "$W/m-after.txt" "$A" "$T_END" systemruntime_dotnet_process_memory_working_set_By \
		microsoftaspnetcorerouting_aspnetcore_routing_match_attempts__match_attempt_ > /dev/null 2>&1 && break
	sleep 0.2
done
"$PY" tests/integration/metrics_judge.py names-json "$W/meters.json" "$W/m-after.txt" "$A" "$T_END" > "$W/names.txt" 2>&1
while read -r verdict name detail; do
	WHY="$detail"; check "meters/name/$name" test "$verdict" = ok
done < "$W/names.txt"
WHY="$(head -3 "$W/names.txt")"
check meters/kestrel-instruments grep -q '^ok kestrel\.' "$W/names.txt"
check meters/routing-instruments grep -q '^ok aspnetcore\.routing\.' "$W/names.txt"
check meters/runtime-instruments test "$(grep -c '^ok dotnet\.' "$W/names.txt")" -ge 15

# --- counters: EventCounters beside the agent, csv
drove
drive "$AURL_A/" 20 12
timeout 60 "$DC" collect -p "$A" --counters 'EventCounters\System.Runtime,EventCounters\Microsoft.AspNetCore.Hosting' \
	--refresh-interval 1 --duration 00:00:00:10 --format csv -o "$W/ec.csv" > "$W/ec.out" 2>&1 < /dev/null &
EC=$!; PIDS+=($EC)
rm -f "$W/rates.txt"
for _ in $(seq 1 40); do
	curl -s "$U/metrics" >> "$W/rates.txt"
	sleep 0.25
done
wait "$EC"
curl -s "$U/metrics" > "$W/m-ec.txt"
WHY="$(tail -3 "$W/ec.out")"; check counters/collect-ran test -s "$W/ec.csv"
"$PY" tests/integration/metrics_judge.py names-csv "$W/ec.csv" "$W/m-ec.txt" "$A" > "$W/ecnames.txt" 2>&1
while read -r verdict name detail; do
	WHY="$detail"; check "counters/name/$name" test "$verdict" = ok
done < "$W/ecnames.txt"
WHY="$(wc -l < "$W/ecnames.txt") counters"; check counters/all-27-runtime-and-hosting test "$(grep -c '^ok' "$W/ecnames.txt")" -ge 30
"$PY" tests/integration/metrics_judge.py gauges-csv "$W/ec.csv" "$W/rates.txt" "$A" > "$W/gauges.txt" 2>&1
WHY="$(grep -v '^ok' "$W/gauges.txt" | head -3) ($(grep -c '^ok' "$W/gauges.txt") agree)"
check counters/gauges-agree-1pct test "$(grep -c '^ok' "$W/gauges.txt")" -ge 5 -a -z "$(grep -v '^ok' "$W/gauges.txt")"
"$PY" tests/integration/metrics_judge.py rates-csv "$W/ec.csv" "$W/rates.txt" "$A" > "$W/rr.txt" 2>&1
WHY="$(cat "$W/rr.txt")"; check counters/request-rate-tool-per-second grep -q '^ok tool' "$W/rr.txt"
WHY="$(cat "$W/rr.txt")"; check counters/request-rate-agent-per-5s grep -q '^ok agent' "$W/rr.txt"

curl -s -N --max-time 20 "$U/livemetrics?pid=$A&durationSeconds=6" > "$W/live.seq"
"$PY" tests/integration/metrics_judge.py live-csv "$W/ec.csv" "$W/live.seq" > "$W/live.txt" 2>&1
WHY="$(grep -v '^ok' "$W/live.txt" | head -3)"; check counters/livemetrics-has-every-counter test -z "$(grep -v '^ok' "$W/live.txt")" -a -s "$W/live.txt"

# --- rules: what the runtime refuses beside the agent's shared session
timeout 60 "$DC" collect -p "$A" --counters System.Runtime --duration 00:00:00:04 --format json -o "$W/refused.json" \
	> "$W/refused.out" 2>&1 < /dev/null
WHY="$(tail -3 "$W/refused.out")"
check rules/private-meter-session-refused grep -q "Another metrics collection session is already in progress" "$W/refused.out"
timeout 60 "$DC" monitor -p "$A" --counters System.Runtime --duration 00:00:00:04 > "$W/mon1.out" 2>&1 < /dev/null
WHY="$(grep -a -A3 Error "$W/mon1.out" | head -4)"
check rules/monitor-other-settings-told-ours grep -qa "MaxHistograms: 20" "$W/mon1.out"
check rules/monitor-other-settings-told-interval grep -qa "IntervalSeconds: 5" "$W/mon1.out"
drove
drive "$AURL_A/" 20 12
timeout 60 "$DC" monitor -p "$A" --counters "$ROUTING" --refresh-interval 5 --maxHistograms 20 --duration 00:00:00:11 \
	> "$W/mon2.out" 2>&1 < /dev/null
WHY="$(tr -d '\033' < "$W/mon2.out" | tail -c 300)"
check rules/monitor-with-our-settings-runs grep -qa "aspnetcore.routing.match_attempts" "$W/mon2.out"
check rules/monitor-with-our-settings-no-error test -z "$(grep -a Error "$W/mon2.out")"

# --- shared: the tool's 1 s shared session first, the agent joins it
if ! start_webapp "$W/b.out" "$W/dumps/port" "$U"; then fail setup "app B did not start"; exit 0; fi
B=$APID AURL_B=$AURL
timeout 60 "$DC" monitor -p "$B" --counters "$ROUTING" --duration 00:00:00:22 > "$W/mon3.out" 2>&1 < /dev/null &
MON=$!; PIDS+=($MON)
drove
drive "$AURL_B/" 20 50
rm -f "$W/during.txt" "$W/after.txt"
T_MON_END=$(($(date +%s) + 23))
for _ in $(seq 1 150); do
	curl -s "$U/metrics" >> "$W/during.txt"
	sleep 0.2
	[ "$(date +%s)" -ge "$T_MON_END" ] && break
done
wait "$MON"
for _ in $(seq 1 100); do
	curl -s "$U/metrics" >> "$W/after.txt"
	sleep 0.2
done
WHY="$(grep -a Error "$W/mon3.out" | head -2)"; check shared/monitor-1s-ran grep -qa "aspnetcore.routing.match_attempts" "$W/mon3.out"
WHY="$(grep -c metrics-rejoin "$W/agent.log") rejoin lines"
check shared/agent-joined-on-its-terms grep -q '"event":"metrics-rejoin".*"pid":'"$B"'.*"refreshInterval":"1"' "$W/agent.log"
"$PY" tests/integration/metrics_judge.py per5s "$W/during.txt" "$B" 100 > "$W/p-during.txt" 2>&1
WHY="$(cat "$W/p-during.txt")"; check shared/increments-during-1s-session grep -q '^ok' "$W/p-during.txt"
"$PY" tests/integration/metrics_judge.py per5s "$W/after.txt" "$B" 100 > "$W/p-after.txt" 2>&1
WHY="$(cat "$W/p-after.txt")"; check shared/increments-after-1s-session grep -q '^ok' "$W/p-after.txt"
exit 0
