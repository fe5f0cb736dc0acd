#!/usr/bin/env bash
# agent_ops.sh - the agent's settings file and environment, /operations and
# filesystem egress (202 + Location, atomic publish, DELETE cancels), the
# staging cap (--dumps-limit) and full disks, against a real .NET runtime
# and real curl. The small disks are real tmpfs mounts (this runs as root).
# (Agents here run with --no-metrics: a counters session makes the app's thread pool start and retire
# threads, and the dumps' thread counts are compared with /proc. metrics.sh covers /metrics.)
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-ops
. tests/lib.sh # every script runs from the repository root
agent_setup ops
MOUNTS=()
cleanup_more() { for m in "${MOUNTS[@]+"${MOUNTS[@]}"}"; do umount "$m" 2>/dev/null; done; }
small_disk() { # small_disk DIR MiB: a real filesystem that fills up
  mkdir -p "$1" && mount -t tmpfs -o "size=${2}m,mode=0777" tmpfs "$1" && MOUNTS+=("$1")
}
is_core() { file -b "$1" | grep -q 'ELF 64-bit LSB core'; }

build_apps
APP="$B/apps/console/console.dll"

# --- a bad settings file: exit 2, the message names file:line:col and the setting; nothing is started
printf 'urls: http://127.0.0.1:1\ndumpsLimit: lots\n' > "$W/bad.yaml"
"$D" launch --no-metrics --config "$W/bad.yaml" --socket "$W/never.sock" 2> "$W/bad.err"; rc=$?
WHY="exit $rc: $(cat "$W/bad.err")"; check bad-config-exit-2 test "$rc" = 2
WHY="$(cat "$W/bad.err")"; check bad-config-says-where grep -q "bad.yaml:2:13: dumpsLimit takes a size" "$W/bad.err"
check bad-config-no-socket test ! -e "$W/never.sock"
DIAGPORT_DUMP_TRANSPORT=pigeon "$D" launch --no-metrics --socket "$W/never.sock" 2> "$W/bad2.err"; rc=$?
WHY="exit $rc: $(cat "$W/bad2.err")"; check bad-env-exit-2 bash -c "[ $rc = 2 ] && grep -q 'DIAGPORT_DUMP_TRANSPORT.*pigeon' '$W/bad2.err'"
"$D" launch --no-metrics --socket "$W/never.sock" --dumps-limit 10XB 2> "$W/bad3.err"; rc=$?
WHY="exit $rc: $(cat "$W/bad3.err")"; check bad-flag-exit-2 bash -c "[ $rc = 2 ] && grep -q -- '--dumps-limit' '$W/bad3.err'"
"$D" launch --no-metrics --socket "$W/never.sock" --config "$W/missing.yaml" 2> "$W/bad4.err"; rc=$?
WHY="exit $rc: $(cat "$W/bad4.err")"; check missing-config-exit-2 bash -c "[ $rc = 2 ] && grep -q 'missing.yaml' '$W/bad4.err'"
printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/nope\n' "$W" > "$W/noegress.yaml"
"$D" launch --no-metrics --config "$W/noegress.yaml" --socket "$W/never.sock" 2> "$W/bad5.err"; rc=$?
WHY="exit $rc: $(cat "$W/bad5.err")"; check egress-dir-missing-exit-2 bash -c "[ $rc = 2 ] && grep -q \"egress provider 'out'\" '$W/bad5.err'"

# --- settings from a file in dotnet-monitor's vocabulary, the environment over the file, flags over both
mkdir -m 0777 "$W/dumps" "$W/out" "$W/out/.partial"
cat > "$W/settings.yaml" <<EOF
Urls: http://127.0.0.1:1
DiagnosticPort:
  ConnectionMode: Listen
  EndpointName: $W/dumps/port
Storage:
  DumpTempFolder: $W/dumps
Egress:
  FileSystem:
    artifacts:
      DirectoryPath: $W/out
      IntermediateDirectoryPath: $W/out/.partial
EOF
DOTNETMONITOR_Urls=http://127.0.0.1:0 DOTNETMONITOR_Metrics__MetricCount=3 "$D" launch --no-metrics --config "$W/settings.yaml" 2> "$W/agent.log" & AG=$!; PIDS+=($AG)
U=http://127.0.0.1:$(listening_port "$W/agent.log" urls 10 "$AG")
DOTNET_DiagnosticPorts=$W/dumps/port,connect,suspend dotnet "$APP" sleep 120 > "$W/app.out" 2>&1 & PIDS+=($!)
check config-socket-used wait_for "$W/app.out" READY 15
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
wait_for "$W/agent.log" '"event":"attached"' 10
WHY="got $(code "$U/processes")"; check env-urls-over-file test "$(code "$U/processes")" = 200
WHY="$(cat "$W/agent.log")"; check unknown-monitor-setting-warned grep -q '"setting-ignored","variable":"DOTNETMONITOR_Metrics__MetricCount"' "$W/agent.log"

# --- egress: 202 + Location, the operation runs, the artifact appears complete under its final name only
c=$(curl -s -D "$W/hdr" -o "$W/body" -w '%{http_code}' "$U/dump?type=WithHeap&egressProvider=artifacts&tags=incident-7,api")
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/hdr")
WHY="got $c, Location '$LOC'"; check egress-202-location bash -c "[ $c = 202 ] && [[ '$LOC' =~ ^/operations/[0-9a-f-]{36}$ ]]"
# watch the directory while the dump is written: no name other than the partial one may appear before it is
# whole. The final name appears by a rename once the bytes are all written, a moment before the operation
# says Succeeded: a file seen under it must already have its final size (and the operation must succeed)
seen_partial=0 bad="" first_size=""
for i in $(seq 1 400); do
  st=$(curl -s "$U$LOC" | jq -r .status)
  for f in "$W"/out/core_*; do
    [ -e "$f" ] || continue
    [ -n "$first_size" ] || { first_size=$(stat -c %s "$f"); first_file=$f; first_st=$st; }
  done
  ls -A "$W/out/.partial" | grep -q . && seen_partial=1
  [ "$st" = Running ] || break
  sleep 0.01
done
curl -s "$U$LOC" > "$W/op.json"
if [ -n "$first_size" ] && [ "$first_size" != "$(stat -c %s "$first_file")" ]; then
  bad="$first_file seen at $first_size bytes while $first_st, $(stat -c %s "$first_file") when done"
fi
WHY="$(cat "$W/op.json")"; check egress-succeeded jq -e --argjson p "$APID" '.status == "Succeeded" and .egressProviderName == "artifacts" and .process.pid == $p and .process.name == "console" and .tags == ["incident-7","api"] and .error == null and (.resourceLocation | test("/out/core_[0-9]{8}_[0-9]{6}$"))' "$W/op.json"
WHY="$bad"; check egress-never-partial-under-final-name test -z "$bad"
WHY="the partial file was never seen in the intermediate directory"; check egress-wrote-partial-first test "$seen_partial" = 1
ART=$(jq -r .resourceLocation "$W/op.json")
notes=$(readelf -n "$ART" 2>/dev/null | grep -c NT_PRSTATUS); threads=$(ls /proc/"$APID"/task | wc -l)
WHY="$(file -b "$ART" | head -c 80)"; check egress-artifact-is-core is_core "$ART"
WHY="core has $notes threads, /proc has $threads"; check egress-artifact-threads test "$notes" -eq "$threads"
WHY="mode $(stat -c %a "$ART")"; check egress-artifact-0600 test "$(stat -c %a "$ART")" = 600
WHY="left: $(ls -A "$W/out/.partial") / $(ls -A "$W/dumps")"; check egress-nothing-else-left bash -c "[ -z \"\$(ls -A '$W/out/.partial')\" ] && [ \"\$(ls -A '$W/dumps')\" = port ]"

# --- the operations list, filters, unknown ids, methods
code "$U/operations" > /dev/null
WHY="$(cat "$W/body")"; check operations-list jq -e --arg id "${LOC#/operations/}" 'length == 1 and .[0].operationId == $id and .[0].status == "Succeeded" and .[0].isStoppable == false and (.[0] | has("resourceLocation") | not)' "$W/body"
code "$U/operations?pid=$APID" > /dev/null; WHY="$(cat "$W/body")"; check operations-filter-pid jq -e 'length == 1' "$W/body"
code "$U/operations?pid=1" > /dev/null; WHY="$(cat "$W/body")"; check operations-filter-other-pid jq -e 'length == 0' "$W/body"
WHY="got $(code "$U/operations/00000000-0000-4000-8000-000000000000")"; check operation-unknown-400 bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' '$U/operations/00000000-0000-4000-8000-000000000000') = 400 ]"
WHY="got $(code -X DELETE "$U$LOC")"; check delete-finished-400 test "$(code -X DELETE "$U$LOC")" = 400
WHY="got $(code -X POST "$U/operations")"; check operations-post-405 test "$(code -X POST "$U/operations")" = 405
WHY="got $(code "$U/dump?egressProvider=nope")"; check unknown-egress-400 bash -c "[ \$(curl -s -o '$W/body' -w '%{http_code}' '$U/dump?egressProvider=nope') = 400 ] && grep -q 'configured: artifacts' '$W/body'"

# --- DELETE cancels a running egress dump: Cancelled, nothing published, nothing partial, the app runs on
c=$(curl -s -D "$W/hdr" -o /dev/null -w '%{http_code}' "$U/dump?type=Full&egressProvider=artifacts")
LOC2=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/hdr")
dc=$(code -X DELETE "$U$LOC2")
curl -s "$U$LOC2" > "$W/op2.json"
WHY="202 $c, DELETE $dc: $(cat "$W/op2.json")"; check delete-cancels bash -c "[ $c = 202 ] && [ $dc = 200 ] && jq -e '.status == \"Cancelled\" and .resourceLocation == null and .error.code == \"Cancelled\"' '$W/op2.json' > /dev/null"
cancel_cleaned() { [ -z "$(ls -A "$W/out/.partial")" ] && [ "$(ls -A "$W/dumps")" = port ]; }
eventually 5 cancel_cleaned # the cancelled capture's clean-up done (checked below)
WHY="out: $(ls -A "$W/out")"; check cancel-publishes-nothing test "$(ls "$W/out" | wc -l)" = 1
WHY="left: $(ls -A "$W/out/.partial") / $(ls -A "$W/dumps")"; check cancel-leaves-nothing bash -c "[ -z \"\$(ls -A '$W/out/.partial')\" ] && [ \"\$(ls -A '$W/dumps')\" = port ]"
check cancel-app-alive kill -0 "$APID"
WHY="got $(code "$U/dump?type=Mini")"; check dump-after-cancel bash -c "[ \$(curl -s -o '$W/core' -w '%{http_code}' '$U/dump?type=Mini') = 200 ] && file -b '$W/core' | grep -q 'ELF 64-bit LSB core'"

# --- a second dump while an egress dump runs gets 429
curl -s -D "$W/hdr" -o /dev/null "$U/dump?type=Full&egressProvider=artifacts"
LOC3=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/hdr")
c=$(code "$U/dump?type=Mini")
WHY="got $c: $(cat "$W/body")"; check egress-then-dump-429 test "$c" = 429
op_ended 10 "$U$LOC3"
WHY="$(curl -s "$U$LOC3")"; check egress-full-succeeded test "$(curl -s "$U$LOC3" | jq -r .status)" = Succeeded

# --- the egress volume fills up: Failed with the reason, no partial file, the app runs on
small_disk "$W/tiny" 8
mkdir -m 0777 "$W/tiny/out"
kill $AG; wait $AG 2>/dev/null
DOTNETMONITOR_Egress__FileSystem__tiny__DirectoryPath=$W/tiny/out "$D" launch --no-metrics --config "$W/settings.yaml" \
  --urls http://127.0.0.1:0 --dumps-limit 16Mi 2> "$W/agent2.log" & AG=$!; PIDS+=($AG)
U2=http://127.0.0.1:$(listening_port "$W/agent2.log" urls 10 "$AG")
check reattached wait_for "$W/agent2.log" "\"event\":\"attached\",\"pid\":$APID" 10
curl -s -D "$W/hdr" -o /dev/null "$U2/dump?type=Full&egressProvider=tiny"
LOC4=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/hdr")
op_ended 10 "$U2$LOC4"
curl -s "$U2$LOC4" > "$W/op4.json"
WHY="$(cat "$W/op4.json")"; check egress-disk-full-failed jq -e '.status == "Failed" and .error.code == "Failed" and (.error.message | test("disk is full"))' "$W/op4.json"
WHY="left: $(ls -A "$W/tiny/out")"; check egress-disk-full-nothing-left test -z "$(ls -A "$W/tiny/out")"
check egress-disk-full-app-alive kill -0 "$APID"

# --- the staging cap: a dump larger than --dumps-limit is refused with 507, the app runs on, nothing stays
c=$(code "$U2/dump?type=Full")
WHY="got $c: $(head -c 300 "$W/body")"; check staging-cap-507 bash -c "[ $c = 507 ] && grep -q 'staging cap of 16777216 bytes' '$W/body'"
WHY="left: $(ls -A "$W/dumps")"; check staging-cap-nothing-left test "$(ls -A "$W/dumps")" = port
check staging-cap-app-alive kill -0 "$APID"
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U2/dump?type=Mini")
WHY="got $c, $(stat -c %s "$W/core") bytes"; check under-cap-dump-works bash -c "[ $c = 200 ] && file -b '$W/core' | grep -q 'ELF 64-bit LSB core'"

# --- the staging volume fills up (no cap set): 507 that says so, nothing stays, the next dump that fits works
small_disk "$W/small" 24
kill $AG; wait $AG 2>/dev/null
"$D" launch --no-metrics --socket "$W/dumps/port" --dumps "$W/small" --urls http://127.0.0.1:0 2> "$W/agent3.log" & AG=$!; PIDS+=($AG)
U3=http://127.0.0.1:$(listening_port "$W/agent3.log" urls 10 "$AG")
check reattached-again wait_for "$W/agent3.log" "\"event\":\"attached\",\"pid\":$APID" 10
c=$(code "$U3/dump?type=Full")
WHY="got $c: $(head -c 300 "$W/body")"; check disk-full-507 bash -c "[ $c = 507 ] && grep -q 'disk is full' '$W/body'"
WHY="df: $(df --output=used "$W/small" | tail -1) KiB used, left: $(ls -A "$W/small")"
check disk-full-space-returned bash -c "[ -z \"\$(ls -A '$W/small')\" ] && [ \$(df --output=used '$W/small' | tail -1) -lt 1024 ]"
check disk-full-app-alive kill -0 "$APID"
c=$(curl -s -o "$W/core" -w '%{http_code}' "$U3/dump?type=Mini")
WHY="got $c"; check disk-full-then-small-dump-works bash -c "[ $c = 200 ] && file -b '$W/core' | grep -q 'ELF 64-bit LSB core'"

# --- the volume fills up after the download began (the head goes out at once with 64 MiB free; a client held to
#     20 MB/s cannot take the dump straight, so the rest is staged): the transfer is cut (200, then curl fails: no
#     last chunk, exit 18), the log says why, nothing stays, the space is returned, the app runs on
small_disk "$W/mid" 64
kill $AG; wait $AG 2>/dev/null
"$D" launch --no-metrics --socket "$W/dumps/port" --dumps "$W/mid" --urls http://127.0.0.1:0 2> "$W/agent5.log" & AG=$!; PIDS+=($AG)
U5=http://127.0.0.1:$(listening_port "$W/agent5.log" urls 10 "$AG")
check reattached-mid wait_for "$W/agent5.log" "\"event\":\"attached\",\"pid\":$APID" 10
c=$(curl -s --limit-rate 20M -o "$W/cut" -w '%{http_code}' "$U5/dump?type=Full"); crc=$?
WHY="http $c, curl exit $crc, $(stat -c %s "$W/cut") bytes"; check disk-full-mid-stream-cut bash -c "[ $c = 200 ] && [ $crc = 18 ]"
rm -f "$W/cut"
wait_for "$W/agent5.log" '"outcome":"Failed"' 5
WHY="$(grep capture-ended "$W/agent5.log" | tail -1)"; check disk-full-mid-stream-logged grep -q '"outcome":"Failed".*disk is full' "$W/agent5.log"
WHY="df: $(df --output=used "$W/mid" | tail -1) KiB used, left: $(ls -A "$W/mid")"
check disk-full-mid-stream-nothing-left bash -c "[ -z \"\$(ls -A '$W/mid')\" ] && [ \$(df --output=used '$W/mid' | tail -1) -lt 1024 ]"
check disk-full-mid-stream-app-alive kill -0 "$APID"

# --- SIGTERM with an egress dump running: the agent cancels it, removes the partial file, exits 0
kill $AG; wait $AG 2>/dev/null
"$D" launch --no-metrics --config "$W/settings.yaml" --urls http://127.0.0.1:0 2> "$W/agent4.log" & AG=$!; PIDS+=($AG)
U4=http://127.0.0.1:$(listening_port "$W/agent4.log" urls 10 "$AG")
wait_for "$W/agent4.log" "\"event\":\"attached\",\"pid\":$APID" 10
before=$(ls "$W/out" | wc -l)
curl -s -o /dev/null "$U4/dump?type=Full&egressProvider=artifacts"
running=0
for i in $(seq 1 100); do ls -A "$W/out/.partial" | grep -q . && running=1 && break; sleep 0.01; done
kill -TERM $AG; wait $AG; rc=$?
WHY="the egress dump had not started writing when SIGTERM was sent"; check sigterm-while-egress-running test "$running" = 1
WHY="exit $rc"; check sigterm-mid-egress-exit-0 test "$rc" = 0
WHY="partial: $(ls -A "$W/out/.partial"), out: $(ls "$W/out" | wc -l) vs $before"
check sigterm-mid-egress-nothing-left bash -c "[ -z \"\$(ls -A '$W/out/.partial')\" ] && [ \$(ls '$W/out' | wc -l) = $before ]"
check sigterm-mid-egress-app-alive kill -0 "$APID"
exit 0
