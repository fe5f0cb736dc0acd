#!/usr/bin/env bash
# gcdump.sh - /gcdump against a real .NET runtime (the webapp holding LeakedBuffer objects), checked against
# an independent reader: ClrMD (tests/apps/heapstat, restored from NuGet) walking the GC heap of a real
# createdump core taken right after, and TraceEvent (tests/apps/tracecount) reading the raw heap events.
#   stats/*      format=stats: text and JSON; the leaked type tops the table by bytes; the LeakedBuffer count is
#                what the app says it holds; totals add up
#   clrmd/*      ClrMD on a WithHeap core: the same count of LeakedBuffer, System.Byte[] within 2%, the same
#                type on top
#   again/*      a second snapshot names every type again (the type-table flush session)
#   nettrace/*   format=nettrace: the heap snapshot's events whole, read the same by our reader and TraceEvent
#   egress/*     egressProvider: 202, Succeeded, the table in the provider's directory
#   bad/*        no format (the .gcdump file is not written: 501 naming the alternatives), a bad format or top
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-gcdump
. tests/lib.sh
agent_setup gcdump
TRACEEVENT_DIR=$(dirname "$(find "$PWD/build/tools/dotnet-trace/.store" -name Microsoft.Diagnostics.Tracing.TraceEvent.dll 2>/dev/null | head -1)")
export TRACEEVENT_DIR HEAPSTAT=1
build_apps
[ -f "$B/apps/heapstat/heapstat.dll" ] || { fail build-apps "heapstat was not built"; exit 0; }
[ -f "$B/apps/tracecount/tracecount.dll" ] || { fail build-apps "tracecount was not built (TRACEEVENT_DIR=$TRACEEVENT_DIR)"; exit 0; }
start_agent --no-metrics
start_webapp "$W/app.out" "$W/dumps/port" "$U" || { fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out")"; exit 0; }
mb=$(curl -s "$AURL/memory-leak?mb=100") # MB the app now holds in LeakedBuffer objects of 64 KiB each
held=$((mb * 16))

# --- stats
code=$(curl -s -o "$W/stats.txt" -w '%{http_code}' "$U/gcdump?pid=$APID&format=stats")
WHY="code $code $(head -3 "$W/stats.txt")"; check stats/200 test "$code" = 200
check stats/header grep -Eq "^GC heap of pid $APID after induced gen-2 GC #[0-9]+: [0-9]+ objects, [0-9]+ bytes, [0-9]+ types$" "$W/stats.txt"
WHY="$(sed -n 3p "$W/stats.txt")"; check stats/leaked-type-tops awk 'NR == 3 {exit !($3 == "System.Byte[]" && $2 > 100000000)}' "$W/stats.txt"
n=$(awk '$3 == "LeakedBuffer" {print $1}' "$W/stats.txt")
WHY="LeakedBuffer count $n, the app holds $held"; check stats/leaked-count test "${n:-0}" = "$held"
code=$(curl -s -H 'Accept: application/json' -o "$W/stats.json" -w '%{http_code}' "$U/gcdump?pid=$APID&format=stats")
WHY="code $code $(head -c 200 "$W/stats.json")"; check stats/json test "$code" = 200
check stats/json-totals jq -e '(.objects == ([.types[].count] | add)) and (.bytes == ([.types[].bytes] | add)) and .typeCount == (.types | length)' "$W/stats.json"
check stats/json-sorted jq -e '[.types[].bytes] as $b | $b == ($b | sort | reverse)' "$W/stats.json"
check stats/json-leaked jq -e --argjson h "$held" '.types[] | select(.type == "LeakedBuffer") | .count == $h and .bytes > 0' "$W/stats.json"
code=$(curl -s -o "$W/top.txt" -w '%{http_code}' "$U/gcdump?pid=$APID&format=stats&top=3")
WHY="$(cat "$W/top.txt")"; check stats/top test "$code" = 200 -a "$(wc -l < "$W/top.txt")" = 6

# --- ClrMD on a core taken right after a snapshot (which ran a full GC: little garbage left)
curl -s -H 'Accept: application/json' -o "$W/ours.json" "$U/gcdump?pid=$APID&format=stats"
code=$(curl -s -o "$W/core" -w '%{http_code}' "$U/dump?pid=$APID&type=WithHeap")
dotnet "$B/apps/heapstat/heapstat.dll" "$W/core" > "$W/clrmd.json" 2> "$W/clrmd.err"; rc=$?
WHY="dump $code, heapstat exit $rc: $(cat "$W/clrmd.err")"; check clrmd/reads test "$code" = 200 -a "$rc" = 0
WHY="ours $(jq -c '.types[] | select(.type == "LeakedBuffer")' "$W/ours.json"), ClrMD's $(jq -c '.types[] | select(.type == "LeakedBuffer")' "$W/clrmd.json")"
check clrmd/leaked-count jq -e --slurpfile c "$W/clrmd.json" \
  '(.types[] | select(.type == "LeakedBuffer") | .count) == ($c[0].types[] | select(.type == "LeakedBuffer") | .count)' "$W/ours.json"
a=$(jq '.types[] | select(.type == "System.Byte[]") | .bytes' "$W/ours.json"); b=$(jq '.types[] | select(.type == "System.Byte[]") | .bytes' "$W/clrmd.json")
WHY="System.Byte[]: ours $a bytes, ClrMD's $b"
check clrmd/bytes awk -v a="$a" -v b="$b" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(b > 0 && d <= 0.02 * b)}'
t1=$(jq -r '.types[0].type' "$W/ours.json"); t2=$(jq -r '[.types[] | select(.type != "Free")][0].type' "$W/clrmd.json")
WHY="ours $t1, ClrMD's $t2"; check clrmd/same-top test "$t1" = "$t2"
rm -f "$W/core"

# --- again: every type named in a later snapshot too
curl -s -H 'Accept: application/json' -o "$W/again.json" "$U/gcdump?pid=$APID&format=stats"
WHY="$(jq -c '{unnamed: [.types[] | select(.type | startswith("(type "))] | length, top: .types[0:2]}' "$W/again.json")"
check again/named jq -e '([.types[] | select(.type | startswith("(type "))] | length) == 0 and any(.types[]; .type == "LeakedBuffer")' "$W/again.json"

# --- nettrace: the heap snapshot's events, whole, and TraceEvent reads what we read
code=$(curl -s -D "$W/nt.hdr" -o "$W/heap.nettrace" -w '%{http_code}' "$U/gcdump?pid=$APID&format=nettrace")
WHY="code $code"; check nettrace/200 test "$code" = 200
check nettrace/filename grep -Eq "filename=\"[0-9]{8}_[0-9]{6}_$APID\\.gcdump\\.nettrace\"" "$W/nt.hdr"
"$D" nettrace stats "$W/heap.nettrace" > "$W/heap.stats" 2> "$W/heap.err"; rc=$?
WHY="$(cat "$W/heap.err")"; check nettrace/complete test "$rc" = 0
WHY="$(jq -c '[.events[] | select(.provider == "Microsoft-Windows-DotNETRuntime")] | map({id, count})' "$W/heap.stats" 2>/dev/null)"
check nettrace/heap-events jq -e '[.events[] | select(.provider == "Microsoft-Windows-DotNETRuntime" and (.id == 15 or .id == 18 or .id == 19))] | length == 3' "$W/heap.stats"
dotnet "$B/apps/tracecount/tracecount.dll" "$W/heap.nettrace" $(jq -r '[.events[].provider] | unique | .[]' "$W/heap.stats") \
  > "$W/heap.te.json" 2> "$W/heap.te.err"; rc=$?
jq -S '.events' "$W/heap.te.json" > "$W/te.ev" 2>/dev/null; jq -S '[.events[] | del(.name)]' "$W/heap.stats" > "$W/our.ev"
WHY="exit $rc $(tail -2 "$W/heap.te.err"); $(diff "$W/our.ev" "$W/te.ev" 2>&1 | head -5)"
check nettrace/same-as-traceevent cmp -s "$W/te.ev" "$W/our.ev"

# --- egress
egressed eg "$U/gcdump?pid=$APID&format=stats&egressProvider=out"
st=$(jq -r .status "$W/eg-op.json")
f=$(ls "$W/out"/*.gcdump.txt 2>/dev/null | head -1)
WHY="code $CODE, $(cat "$W/eg-op.json"), '$f'"; check egress/succeeded test "$CODE" = 202 -a "$st" = Succeeded -a -n "$f"
WHY="$(head -4 "${f:-/dev/null}")"; check egress/table grep -q ' LeakedBuffer$' "${f:-/dev/null}"

# --- bad
code=$(curl -s -o "$W/b1.json" -w '%{http_code}' "$U/gcdump?pid=$APID")
WHY="code $code $(cat "$W/b1.json")"; check bad/no-gcdump-file-501 test "$code" = 501 -a -n "$(grep -F 'format=stats' "$W/b1.json")"
code=$(curl -s -o "$W/b2.json" -w '%{http_code}' "$U/gcdump?pid=$APID&format=pdf")
WHY="code $code $(cat "$W/b2.json")"; check bad/format test "$code" = 400
code=$(curl -s -o "$W/b3.json" -w '%{http_code}' "$U/gcdump?pid=$APID&format=stats&top=many")
WHY="code $code $(cat "$W/b3.json")"; check bad/top test "$code" = 400
