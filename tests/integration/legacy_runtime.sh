#!/usr/bin/env bash
# legacy_runtime.sh - the agent against a real .NET Core 3.1 runtime (published
# self-contained from nuget.org's 3.1 runtime pack: tests/apps/build-legacy.sh).
# 3.1 has a diagnostic socket but no diagnostic ports, no ProcessInfo, no
# ProcessEnvironment and only the first GenerateCoreDump: so this is where the
# agent's fallbacks meet a runtime that needs them (--connect-dir, identity
# from the socket's name, GenerateCoreDump3 -> 2 -> 1).
set -u
cd "$(dirname "$0")/../.."
T_NAME=legacy-runtime
. tests/lib.sh # every script runs from the repository root
agent_setup legacy

if ! bash tests/apps/build-legacy.sh "$B/apps" > "$W/build.log" 2>&1; then
  fail build-legacy-app "$(tail -5 "$W/build.log")"; exit 0
fi
APP="$B/apps/legacy31/legacy31"
mkdir -m 0777 "$W/tmp" "$W/dumps" "$W/out"

TMPDIR=$W/tmp "$APP" 120 > "$W/app.out" 2>&1 & PIDS+=($!)
check app-ready wait_for "$W/app.out" READY 15
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
WHY="$(ls -A "$W/tmp")"; check app-default-socket bash -c "ls '$W/tmp' | grep -q '^dotnet-diagnostic-$APID-[0-9]*-socket$'"

cat > "$W/agent.yaml" <<EOF
Egress:
  FileSystem:
    out:
      DirectoryPath: $W/out
EOF
# --no-metrics: a counters session makes the app's thread pool start and retire threads, and the thread
# counts of the dumps below are compared with /proc; /metrics from this runtime is checked at the end
"$D" launch --config "$W/agent.yaml" --socket "$W/dumps/port" --dumps "$W/dumps" --connect-dir "$W/tmp" \
  --urls http://127.0.0.1:0 --no-metrics 2> "$W/agent.log" & AG=$!; PIDS+=($AG)
P=$(listening_port "$W/agent.log" urls 30 "$AG") || { fail agent-start "the agent did not start" "$W/agent.log"; exit 0; }
U=http://127.0.0.1:$P
check attached wait_for "$W/agent.log" "\"event\":\"attached\",\"pid\":$APID," 10

# identity without ProcessInfo: the pid and start key of the socket's name
code "$U/processes" > /dev/null
WHY="$(cat "$W/body")"; check listed-by-pid jq -e --argjson p "$APID" 'length == 1 and .[0].pid == $p and (.[0].uid | test("^[0-9a-f-]{36}$"))' "$W/body"
UID_=$(jq -r '.[0].uid' "$W/body")
code "$U/process?pid=$APID" > /dev/null
WHY="$(cat "$W/body")"; check process-by-pid jq -e --argjson p "$APID" '.pid == $p' "$W/body"
WHY="got $(code "$U/process?uid=$UID_")"; check process-by-uid test "$(code "$U/process?uid=$UID_")" = 200
# /runtimes: no version before .NET 6 (no ProcessInfo2), null; the attach time all the same
code "$U/runtimes" > /dev/null
WHY="$(cat "$W/body")"; check runtimes-version-null jq -e --argjson p "$APID" '.[0].pid == $p and .[0].runtimeVersion == null and (.[0].attachedDateTime | test("Z$"))' "$W/body"

# no ProcessEnvironment before .NET 5: a 400 that says so
c=$(code "$U/env")
WHY="got $c: $(cat "$W/body")"; check env-400-older-than-5 bash -c "[ $c = 400 ] && grep -q 'older than 5.0' '$W/body'"

# dumps: GenerateCoreDump3 and 2 are unknown to 3.1, so the agent falls back to the first; every type, both transports
for t in Mini Triage WithHeap Full; do
  for tr in file fifo; do
    t0=$(ls /proc/"$APID"/task | wc -l) # a thread may start or end while the dump runs: either count is right
    c=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?type=$t&transport=$tr")
    notes=$(readelf -n "$W/core" 2>/dev/null | grep -c NT_PRSTATUS); threads=$(ls /proc/"$APID"/task | wc -l)
    WHY="http $c, $(file -b "$W/core" | head -c 80)"; check "dump-$t-$tr-is-core" bash -c "[ $c = 200 ] && file -b '$W/core' | grep -q 'ELF 64-bit LSB core'"
    WHY="core has $notes threads, /proc has $threads ($t0 before)"; check "dump-$t-$tr-threads" test "$notes" -eq "$threads" -o "$notes" -eq "$t0"
  done
done
WHY="left: $(ls -A "$W/dumps")"; check nothing-left test "$(ls -A "$W/dumps")" = port

# egress through the same fallback
curl -s -D "$W/hdr" -o /dev/null "$U/dump?type=Mini&egressProvider=out"
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/hdr")
op_ended 5 "$U$LOC"
curl -s "$U$LOC" > "$W/op.json"
WHY="$(cat "$W/op.json")"; check egress-succeeded jq -e '.status == "Succeeded"' "$W/op.json"
ART=$(jq -r .resourceLocation "$W/op.json")
WHY="$(file -b "$ART" 2>&1 | head -c 80)"; check egress-artifact-is-core bash -c "file -b '$ART' | grep -q 'ELF 64-bit LSB core'"

# /metrics from .NET Core 3.1 (EventCounters; it has no Meter API): a second agent with metrics on
# (the app is long past its startup, so its session may start at once: --metrics-start-delay 0)
"$D" launch --socket "$W/dumps/port2" --dumps "$W/dumps" --connect-dir "$W/tmp" --urls http://127.0.0.1:0 \
  --no-auth --metrics-interval 1 --metrics-start-delay 0 2> "$W/agent2.log" & PIDS+=($!)
P2=$(listening_port "$W/agent2.log" urls 30 "$!")
for _ in $(seq 1 100); do curl -s "http://127.0.0.1:$P2/metrics" | grep -q '^systemruntime_cpu_usage_ratio ' && break; sleep 0.1; done
curl -s "http://127.0.0.1:$P2/metrics" > "$W/metrics.txt"
WHY="$(head -3 "$W/metrics.txt") $(tail -2 "$W/agent2.log")"
check metrics-from-3.1 grep -q '^systemruntime_working_set_bytes [0-9]' "$W/metrics.txt"

# the app exits: the agent drops it
kill "$APID"
check detached wait_for "$W/agent.log" "\"event\":\"detached\",\"pid\":$APID," 10
code "$U/processes" > /dev/null
WHY="$(cat "$W/body")"; check not-listed-after-exit jq -e 'length == 0' "$W/body"
exit 0
