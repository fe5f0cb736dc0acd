#!/usr/bin/env bash
# gcdump.sh - /gcdump against a real .NET runtime (the webapp holding LeakedBuffer objects), checked against
# Microsoft's dotnet-gcdump (build/tools, prereqs.sh test) reading our .gcdump and collecting its own on the
# same process right after, and against independent readers: ClrMD (tests/apps/heapstat, restored from NuGet)
# walking the GC heap of a real createdump core taken right after, and TraceEvent (tests/apps/tracecount)
# reading the raw heap events.
#   rule/*       a collection rule (Startup -> CollectGCDump) egresses a .gcdump that dotnet-gcdump reads
#   file/*       the default format: the .gcdump file (dotnet-monitor's name and type); `dotnet-gcdump report`
#                reads it, and beside `dotnet-gcdump collect` + `report` on the same process right after:
#                LeakedBuffer and 64 KiB System.Byte[] counts exactly (what the app holds), total bytes within
#                1% and objects within 2% (the app runs on between the two snapshots: a few hundred objects
#                of the tool's own session and our requests), type sets (name and module) 97% the same and
#                95% of the shared types with the same count; module names (no "Module(0x...)"); generic
#                names spelled as the tool spells them (List<LeakedBuffer>, no arity marks), in stats too
#   stats/*      format=stats: text and JSON; the leaked type tops the table by bytes; the LeakedBuffer count is
#                what the app says it holds; totals add up
#   clrmd/*      ClrMD on a WithHeap core: the same count of LeakedBuffer, System.Byte[] within 2%, the same
#                type on top
#   again/*      a second snapshot names every type again (the type-table flush session)
#   nettrace/*   format=nettrace: the heap snapshot's events whole, read the same by our reader and TraceEvent;
#                `dotnet-gcdump convert` of it names the modules (the session's Loader rundown); our writer
#                on the same file (gcdump_convert.c) gives the very report `convert`'s .gcdump gives
#   egress/*     egressProvider: 202, Succeeded, the table, and the .gcdump file, in the provider's directory
#   bad/*        a bad format or top
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
GCD=$PWD/build/tools/dotnet-gcdump/dotnet-gcdump
[ -x "$GCD" ] || { fail tools "dotnet-gcdump is not installed (bash scripts/prereqs.sh test)"; exit 0; }
# start_agent, with a collection rule: a .gcdump at the app's start
mkdir -p -m 0777 "$W/dumps" "$W/out" "$W/rule"
printf 'Egress:\n  FileSystem:\n    out: {DirectoryPath: %s/out}\n    rule: {DirectoryPath: %s/rule}\n%s\n' "$W" "$W" \
  'CollectionRules: {Boot: {Trigger: {Type: Startup}, Actions: [{Type: CollectGCDump, Settings: {Egress: rule}}]}}' \
  > "$W/agent.yaml"
"$D" launch --config "$W/agent.yaml" --socket "$W/dumps/port" --urls http://127.0.0.1:0 --dumps "$W/dumps" --no-metrics \
  2> "$W/agent.log" &
AG=$!
PIDS+=("$AG")
P=$(listening_port "$W/agent.log" urls 10 "$AG"); U=http://127.0.0.1:$P
start_webapp "$W/app.out" "$W/dumps/port" "$U" || { fail setup "the webapp did not start or attach: $(tail -3 "$W/app.out")"; exit 0; }
# report FILE OUT: dotnet-gcdump report's table of FILE as JSON in OUT: {bytes, objects, types: {"NAME  [DLL]": count}}
report() {
  "$GCD" report "$1" > "$2.txt" 2> "$2.err" || { echo '{}' > "$2"; return 1; }
  python3 -c '
import json, re, sys
r = {"bytes": None, "objects": None, "types": {}}
for line in open(sys.argv[1], encoding="utf-8"):
    line = line.rstrip("\n")
    m = re.match(r"^\s*([\d,]+)\s\s(GC Heap bytes|GC Heap objects)$", line)
    if m:
        r["bytes" if m.group(2).endswith("bytes") else "objects"] = int(m.group(1).replace(",", ""))
        continue
    m = re.match(r"^\s*([\d,]+)\s+([\d,]+)\s\s(.*?)(?:\s\s\[([^\]]*)\])?$", line)
    if m:
        r["types"][m.group(3) + ("  [" + m.group(4) + "]" if m.group(4) else "")] = int(m.group(2).replace(",", ""))
print(json.dumps(r))' "$2.txt" > "$2"
}
modules='[.types | keys[] | select(test("Module\\(0x"))]'

# --- rule: the Startup rule's CollectGCDump, egressed as a .gcdump
eventually 30 bash -c "ls '$W/rule'/*.gcdump > /dev/null 2>&1" # published whole (written aside, then renamed)
f=$(ls "$W/rule"/*.gcdump 2>/dev/null | head -1)
WHY="rule egress: '$(ls "$W/rule")'; $(grep -i rule "$W/agent.log" | tail -3)"
check rule/egressed test -n "$f"
report "${f:-/dev/null}" "$W/rule.json"; rc=$?
WHY="report exit $rc: $(head -c 300 "$W/rule.json.err") $(head -3 "$W/rule.json.txt")"
check rule/tool-reads jq -e '.objects > 100 and .bytes > 10000 and (.types | length) > 20' "$W/rule.json"
WHY="$(jq -c "$modules[0:3]" "$W/rule.json")"
check rule/module-names jq -e "($modules | length) == 0 and
  ([.types | keys[] | select(endswith(\"[System.Private.CoreLib.dll]\"))] | length) > 20" "$W/rule.json"

mb=$(curl -s "$AURL/memory-leak?mb=100") # MB the app now holds in LeakedBuffer objects of 64 KiB each
held=$((mb * 16))

# --- file: the .gcdump, judged by dotnet-gcdump, and beside dotnet-gcdump's own of the same process
code=$(curl -s -D "$W/file.hdr" -o "$W/ours.gcdump" -w '%{http_code}' "$U/gcdump?pid=$APID")
"$GCD" collect -p "$APID" -o "$W/tool.gcdump" > "$W/collect.out" 2>&1; trc=$?
WHY="code $code $(head -c 200 "$W/ours.gcdump" | tr -c '[:print:]' .)"; check file/200 test "$code" = 200
WHY="$(cat "$W/file.hdr")"
check file/name grep -Eq "filename=\"[0-9]{8}_[0-9]{6}_$APID\\.gcdump\"" "$W/file.hdr"
check file/content-type grep -iq '^content-type: application/octet-stream' "$W/file.hdr"
report "$W/ours.gcdump" "$W/ours.rep"; rc=$?
WHY="report exit $rc: $(head -c 400 "$W/ours.rep.err")"; check file/tool-reads test "$rc" = 0
report "$W/tool.gcdump" "$W/tool.rep"; rc2=$?
WHY="collect exit $trc: $(tail -3 "$W/collect.out"); report exit $rc2"; check file/tool-collects test "$trc" = 0 -a "$rc2" = 0
lb="LeakedBuffer  [webapp.dll]"; by="System.Byte[] (Bytes > 10K)  [System.Private.CoreLib.dll]"
WHY="held $held; ours $(jq -c --arg l "$lb" --arg b "$by" '[.types[$l], .types[$b]]' "$W/ours.rep"), the tool's $(jq -c --arg l "$lb" --arg b "$by" '[.types[$l], .types[$b]]' "$W/tool.rep")"
check file/leaked-count jq -e --slurpfile t "$W/tool.rep" --arg l "$lb" --arg b "$by" --argjson h "$held" \
  '.types[$l] == $h and $t[0].types[$l] == $h and .types[$b] == $h and $t[0].types[$b] == $h' "$W/ours.rep"
WHY="ours $(jq -c '{bytes, objects}' "$W/ours.rep"), the tool's $(jq -c '{bytes, objects}' "$W/tool.rep")"
check file/total-bytes jq -e --slurpfile t "$W/tool.rep" '(.bytes - $t[0].bytes | fabs) <= 0.01 * $t[0].bytes' "$W/ours.rep"
check file/objects jq -e --slurpfile t "$W/tool.rep" '(.objects - $t[0].objects | fabs) <= 0.02 * $t[0].objects' "$W/ours.rep"
jq --slurpfile t "$W/tool.rep" '. as $o | (.types | keys) as $a | ($t[0].types | keys) as $b | ($a - ($a - $b)) as $c |
  {ours: ($a | length), tool: ($b | length), both: ($c | length), same_count: ([$c[] | select($o.types[.] == $t[0].types[.])] | length),
   only_ours: ($a - $b)[0:5], only_tool: ($b - $a)[0:5]}' "$W/ours.rep" > "$W/cmp.json" 2>&1
WHY="$(cat "$W/cmp.json")"
check file/type-set jq -e '.both >= 0.97 * ([.ours, .tool] | max)' "$W/cmp.json"
check file/type-counts jq -e '.same_count >= 0.95 * .both' "$W/cmp.json"
WHY="$(jq -c "$modules[0:3]" "$W/ours.rep") $(jq -c --arg l "$lb" '.types[$l]' "$W/ours.rep")"
check file/module-names jq -e --arg l "$lb" "($modules | length) == 0 and .types[\$l] > 0" "$W/ours.rep"
gl="System.Collections.Generic.List<LeakedBuffer>  [System.Private.CoreLib.dll]"
WHY="$(jq -c --arg g "$gl" '{list: .types[$g], arity: [.types | keys[] | select(contains("`"))][0:3]}' "$W/ours.rep")"
check file/generic-spelling jq -e --slurpfile t "$W/tool.rep" --arg g "$gl" \
  '.types[$g] == 1 and $t[0].types[$g] == 1 and ([.types | keys[] | select(contains("`"))] | length) == 0' "$W/ours.rep"
code=$(curl -s -o "$W/ours2.gcdump" -w '%{http_code}' "$U/gcdump?pid=$APID&format=gcdump")
report "$W/ours2.gcdump" "$W/ours2.rep"; rc=$?
WHY="code $code, report exit $rc"; check file/format-gcdump test "$code" = 200 -a "$rc" = 0
rm -f "$W/tool.gcdump" "$W/ours2.gcdump"

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
WHY="$(jq -c '{list: [.types[] | select(.type | startswith("System.Collections.Generic.List<Leaked"))], arity: [.types[] | select(.type | contains("`")) | .type][0:3]}' "$W/stats.json")"
check stats/spelled-as-dotnet-gcdump jq -e 'any(.types[]; .type == "System.Collections.Generic.List<LeakedBuffer>") and
  ([.types[] | select(.type | contains("`"))] | length) == 0' "$W/stats.json"
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
"$GCD" convert "$W/heap.nettrace" -o "$W/conv.gcdump" > "$W/conv.out" 2>&1
report "$W/conv.gcdump" "$W/conv.rep"; rc=$?
WHY="report exit $rc $(tail -2 "$W/conv.out"): $(jq -c "$modules[0:3]" "$W/conv.rep") $(jq -c '.types["LeakedBuffer  [webapp.dll]"]' "$W/conv.rep")"
check nettrace/module-names jq -e --argjson h "$held" "($modules | length) == 0 and .types[\"LeakedBuffer  [webapp.dll]\"] == \$h" "$W/conv.rep"
rm -f "$W/conv.gcdump"
# the very same events through our writer (tests/integration/gcdump_convert.c): the same table, to the byte
cc -std=c11 -D_GNU_SOURCE -I. -Icommon -o "$W/gcdump_convert" tests/integration/gcdump_convert.c build/libdiagport.a \
  $(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread 2> "$W/cc.err" &&
  "$W/gcdump_convert" "$W/heap.nettrace" "$W/mine.gcdump" 2>> "$W/cc.err"
report "$W/mine.gcdump" "$W/mine.rep"; rc=$?
WHY="exit $rc $(head -c 300 "$W/cc.err"); $(diff "$W/mine.rep.txt" "$W/conv.rep.txt" 2>&1 | head -6)"
check nettrace/same-report-as-convert cmp -s "$W/mine.rep.txt" "$W/conv.rep.txt"
rm -f "$W/mine.gcdump"

# --- egress
egressed eg "$U/gcdump?pid=$APID&format=stats&egressProvider=out"
st=$(jq -r .status "$W/eg-op.json")
f=$(ls "$W/out"/*.gcdump.txt 2>/dev/null | head -1)
WHY="code $CODE, $(cat "$W/eg-op.json"), '$f'"; check egress/succeeded test "$CODE" = 202 -a "$st" = Succeeded -a -n "$f"
WHY="$(head -4 "${f:-/dev/null}")"; check egress/table grep -q ' LeakedBuffer$' "${f:-/dev/null}"
egressed eg2 "$U/gcdump?pid=$APID&egressProvider=out"
st=$(jq -r .status "$W/eg2-op.json")
f=$(ls "$W/out"/*.gcdump 2>/dev/null | head -1)
WHY="code $CODE, $(cat "$W/eg2-op.json"), '$f'"; check egress/gcdump-succeeded test "$CODE" = 202 -a "$st" = Succeeded -a -n "$f"
report "${f:-/dev/null}" "$W/eg2.rep"
WHY="$(head -c 300 "$W/eg2.rep.err") $(jq -c '.types["LeakedBuffer  [webapp.dll]"]' "$W/eg2.rep")"
check egress/gcdump-read jq -e --argjson h "$held" '.types["LeakedBuffer  [webapp.dll]"] == $h' "$W/eg2.rep"

# --- bad
code=$(curl -s -o "$W/b2.json" -w '%{http_code}' "$U/gcdump?pid=$APID&format=pdf")
WHY="code $code $(cat "$W/b2.json")"; check bad/format test "$code" = 400 -a -n "$(grep -F 'not gcdump, stats, pprof or nettrace' "$W/b2.json")"
code=$(curl -s -o "$W/b3.json" -w '%{http_code}' "$U/gcdump?pid=$APID&format=stats&top=many")
WHY="code $code $(cat "$W/b3.json")"; check bad/top test "$code" = 400
