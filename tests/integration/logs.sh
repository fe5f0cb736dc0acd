#!/usr/bin/env bash
# logs.sh - /logs against a real .NET runtime (the webapp's ILogger, read over EventPipe from the logging
# EventSource), with real curl:
#   ndjson/*     the default (the app's own filters): one JSON object a line, dotnet-monitor's LogEntry fields
#                (Timestamp, LogLevel, EventId, EventName, Category, Message, State with the arguments and
#                {OriginalFormat}, Scopes), as many entries as the app logged
#   level/*      level=Warning: Information left out, Warning and Error kept; level=Debug: Debug kept
#   seq/*        Accept: application/json-seq: every record RS + JSON + LF
#   text/*       Accept: text/plain: the simple console format (level, category[id][name], scopes, message)
#   filter/*     POST filterSpecs: only the categories asked for, each at its level
#   egress/*     egressProvider: 202, then the file
#   limit/*      a fourth stream at once: 429
#   bad/*        a bad level, a bad document: 400 naming it
#   scopes/*     24 concurrent /scoped requests, whose scopes start, log and stop on different threads (async
#                code resumes on other pool threads): for each of their 96 messages the Scopes /logs reports
#                equal those the app's own JSON console logger printed for the same message (the reference)
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-logs
. tests/lib.sh
agent_setup logs
build_apps
start_agent --no-metrics
start_webapp "$W/app.out" "$W/dumps/port" "$U" || { fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out")"; exit 0; }

# logs NAME SECONDS LOGCALLS [CURL ARGS]: /logs for SECONDS into $W/NAME.out while, once its session is on (the
# agent's 200: it answers once the runtime started the session), the app is asked to log (LOGCALLS: query
# strings for /log, space-separated); "CODE TOTAL" in $W/NAME.res
logs() {
  local name=$1 secs=$2 calls=$3 q
  shift 3
  rm -f "$W/$name.hdr"
  ( wait_for "$W/$name.hdr" '^HTTP/1.1 200' 15; for q in $calls; do curl -s "$AURL/log?$q" > /dev/null; done ) &
  local bg=$!
  curl -s -D "$W/$name.hdr" -o "$W/$name.out" -w '%{http_code} %{time_total}' "$@" > "$W/$name.res"
  wait "$bg"
}
# entries NAME: the ndjson file as one JSON array
entries() { jq -s . "$W/$1.out"; }

# --- ndjson, the app's own filters (Trace and up in the webapp)
logs def 4 "level=Information&count=3&message=one" "$U/logs?pid=$APID&durationSeconds=4"
read -r code total < "$W/def.res"
WHY="code $code"; check ndjson/200 test "$code" = 200
check ndjson/content-type grep -qi '^Content-Type: application/x-ndjson' "$W/def.hdr"
entries def > "$W/def.json"; rc=$?
WHY="$(head -c 300 "$W/def.out")"; check ndjson/every-line-json test "$rc" = 0
n=$(jq '[.[] | select(.Category == "Test.Logs")] | length' "$W/def.json")
WHY="$n Test.Logs entries (want 3)"; check ndjson/count test "$n" = 3
WHY="$(jq -c '[.[] | select(.Category == "Test.Logs")][0]' "$W/def.json")"
check ndjson/fields jq -e '[.[] | select(.Category == "Test.Logs")][0] | .LogLevel == "Information" and .EventId == 7
  and .EventName == "TestEvent" and .Message == "test message 0 one" and (.Timestamp | test("^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}Z$"))' "$W/def.json"
check ndjson/state jq -e '[.[] | select(.Category == "Test.Logs")][2].State | .Index == "2" and .Text == "one" and
  .["{OriginalFormat}"] == "test message {Index} {Text}" and .Message == "test message 2 one"' "$W/def.json"
check ndjson/scopes jq -e '[.[] | select(.Category == "Test.Logs")][0].Scopes | any(.RequestNumber == "42")' "$W/def.json"
WHY="took $total s"; check ndjson/duration awk -v t="$total" 'BEGIN {exit !(t >= 3.5 && t < 9)}'

# --- level
logs lw 3 "level=Information&count=2&message=info level=Warning&count=2&message=warn level=Error&count=1&message=err" \
  "$U/logs?pid=$APID&durationSeconds=3&level=Warning"
entries lw > "$W/lw.json"
WHY="$(jq -c '[.[] | select(.Category == "Test.Logs") | .LogLevel]' "$W/lw.json")"
check level/warning-and-up jq -e '[.[] | select(.Category == "Test.Logs") | .LogLevel] | sort == ["Error", "Warning", "Warning"]' "$W/lw.json"
check level/nothing-below jq -e 'all(.[]; .LogLevel != "Information" and .LogLevel != "Debug" and .LogLevel != "Trace")' "$W/lw.json"
logs ld 3 "level=Debug&count=1&message=dbg level=Trace&count=1&message=trc" "$U/logs?pid=$APID&durationSeconds=3&level=Debug"
entries ld > "$W/ld.json"
WHY="$(jq -c '[.[] | select(.Category == "Test.Logs") | .LogLevel]' "$W/ld.json")"
check level/debug jq -e '[.[] | select(.Category == "Test.Logs") | .LogLevel] == ["Debug"]' "$W/ld.json"

# --- json-seq
logs seq 3 "level=Warning&count=2" "$U/logs?pid=$APID&durationSeconds=3" -H 'Accept: application/json-seq'
check seq/content-type grep -qi '^Content-Type: application/json-seq' "$W/seq.hdr"
python3 - "$W/seq.out" > "$W/seq.json" <<'EOF'
import json, sys
data = open(sys.argv[1], 'rb').read()
assert data.startswith(b'\x1e'), 'no RS first'
recs = []
for r in data.split(b'\x1e')[1:]:
    assert r.endswith(b'\n'), 'record without LF'
    recs.append(json.loads(r))
print(json.dumps(recs))
EOF
rc=$?
WHY="$(head -c 200 "$W/seq.out" | tr '\036' '^')"; check seq/records test "$rc" = 0
check seq/count jq -e '[.[] | select(.Category == "Test.Logs")] | length == 2' "$W/seq.json"

# --- text
logs txt 3 "level=Warning&count=1&category=Text.Cat&message=plain" "$U/logs?pid=$APID&durationSeconds=3" -H 'Accept: text/plain'
check text/content-type grep -qi '^Content-Type: text/plain' "$W/txt.hdr"
WHY="$(cat "$W/txt.out" | head -5)"
check text/header grep -Eq '^[0-9]{4}-[0-9]{2}-[0-9]{2} [0-9:]{8}Z warn: Text\.Cat\[7\]\[TestEvent\]$' "$W/txt.out"
check text/scope grep -q '^      => .*RequestNumber:42' "$W/txt.out"
check text/message grep -qx '      test message 0 plain' "$W/txt.out"

# --- filterSpecs: only Keep.Me at Debug, nothing else
logs flt 3 "level=Debug&count=1&category=Keep.Me&message=k level=Error&count=1&category=Drop.Me&message=d" \
  "$U/logs?pid=$APID&durationSeconds=3" -X POST -H 'Content-Type: application/json' \
  --data-binary '{"filterSpecs":{"Keep.Me":"Debug"},"useAppFilters":false}'
entries flt > "$W/flt.json"
WHY="$(jq -c '[.[] | .Category] | unique' "$W/flt.json")"
check filter/only-asked jq -e '([.[] | .Category] | unique) == ["Keep.Me"] and (.[0].LogLevel == "Debug")' "$W/flt.json"

# --- egress
# time passing: the lines logged in the middle of the 3 s session
( sleep 1; curl -s "$AURL/log?level=Warning&count=2&message=egressed" > /dev/null ) &
egressed eg "$U/logs?pid=$APID&durationSeconds=3&egressProvider=out"
st=$(jq -r .status "$W/eg-op.json")
f=$(ls "$W/out"/*.log.json 2>/dev/null | head -1)
WHY="code $CODE, $(cat "$W/eg-op.json"), file '$f'"; check egress/202-succeeded test "$CODE" = 202 -a "$st" = Succeeded -a -n "$f"
WHY="$(head -c 300 "${f:-/dev/null}")"
check egress/entries test "$(jq -s '[.[] | select(.Message == "test message 1 egressed")] | length' "${f:-/dev/null}" 2>/dev/null)" = 1

# --- limit
L=()
for i in 1 2 3; do curl -s -o /dev/null "$U/logs?pid=$APID&durationSeconds=4" & L+=($!); done
running3() { [ "$(curl -s "$U/operations" | jq '[.[] | select(.status == "Running")] | length')" = 3 ]; }
eventually 10 running3
code=$(curl -s -o "$W/429.json" -w '%{http_code}' "$U/logs?pid=$APID&durationSeconds=1")
WHY="code $code $(cat "$W/429.json")"; check limit/fourth-429 test "$code" = 429
wait "${L[@]}"

# --- bad
code=$(curl -s -o "$W/bad1.json" -w '%{http_code}' "$U/logs?pid=$APID&level=Loud")
WHY="code $code $(cat "$W/bad1.json")"; check bad/level test "$code" = 400 -a -n "$(grep -F "level 'Loud'" "$W/bad1.json")"
code=$(curl -s -o "$W/bad2.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' --data-binary '{"filterSpecs":[1]}' "$U/logs?pid=$APID")
WHY="code $code $(cat "$W/bad2.json")"; check bad/document test "$code" = 400 -a -n "$(grep -F 'filterSpecs' "$W/bad2.json")"
code=$(curl -s -o "$W/bad3.json" -w '%{http_code}' "$U/logs?pid=$APID&durationSeconds=x")
WHY="code $code $(cat "$W/bad3.json")"; check bad/duration test "$code" = 400

# --- scopes: the app's console (JSON, IncludeScopes) prints each Test.Scopes line with its scopes; /logs must
# report the same scopes for the same message ("job ID step N"). A console scope's "Message" (its ToString)
# is not in the EventSource's arguments, and its numbers are strings there: both are left out of the compare.
( wait_for "$W/sc.hdr" '^HTTP/1.1 200' 15; for i in $(seq 1001 1024); do curl -s "$AURL/scoped?id=$i" > /dev/null & done; wait ) &
bg=$!
curl -s -D "$W/sc.hdr" -o "$W/sc.out" "$U/logs?pid=$APID&durationSeconds=5"
wait "$bg"
python3 - "$W/app.out" "$W/sc.out" > "$W/sc.res" <<'EOF'
import json, re, sys
def scoped(path):
    got = {}
    for line in open(path, encoding='utf-8', errors='replace'):
        try:
            o = json.loads(line)
        except ValueError:
            continue
        m = re.fullmatch(r'job (\d+) step (\d)', str(o.get('Message', '')))
        if isinstance(o, dict) and o.get('Category') == 'Test.Scopes' and m and 1001 <= int(m[1]) <= 1024:
            got[o['Message']] = [{k: str(v) for k, v in s.items() if k != 'Message'} if isinstance(s, dict) else s
                                 for s in o.get('Scopes') or []]
    return got
app, dp = scoped(sys.argv[1]), scoped(sys.argv[2])
bad = [m for m in sorted(app) if m in dp and dp[m] != app[m]]
print(len(app), len(dp), len(bad))
for m in bad[:2]:
    print(m, 'app:', json.dumps(app[m]), 'diagport:', json.dumps(dp[m]))
EOF
read -r n_app n_dp n_bad < "$W/sc.res"
WHY="$n_app messages on the app's console, $n_dp from /logs (want 96 each)"
check scopes/every-message test "$n_app" = 96 -a "$n_dp" = 96
WHY="$n_bad of $n_dp messages with other scopes than the app's: $(tail -n +2 "$W/sc.res" | head -c 1500)"
check scopes/as-the-app-printed test "$n_bad" = 0 -a "$n_dp" -gt 0
WHY="$(grep -m1 '"job 1001 step 2"' "$W/sc.out")"
check scopes/nested jq -s -e 'map(select(.Message == "job 1001 step 2")) | length == 1 and
  ([.[0].Scopes[] | .Job // .Stage // empty] == ["1001", "nested-1001"])' "$W/sc.out"
