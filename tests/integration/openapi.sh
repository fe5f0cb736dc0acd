#!/usr/bin/env bash
# openapi.sh - the agent's JSON answers against dotnet-monitor's own OpenAPI document
# (tests/data/dotnet-monitor-openapi.json, from dotnet/dotnet-monitor's documentation/openapi.json), so
# that drift shows: each route that answers JSON is asked of a real agent with a real .NET app attached
# (and a collection rule, and an operation egressed to a filesystem provider), and its answer validated
# against the schema the document gives that route and status (tests/validate/openapi-validate.mjs: Ajv,
# OpenAPI 3.0's nullable understood). A route the document no longer has, or one whose answer no longer
# validates, fails here.
#   json/*       GET /processes, /process, /env, /collectionrules, /collectionrules/{name}, /operations,
#                /operations/{operationId}: status as documented, body valid
#   bites/*      the validator refuses an answer that breaks the schema (a string pid, an unknown field)
# Not here (the issue that builds them says): /info (its schema requires capabilities) and /exceptions.
set -u
cd "$(dirname "$0")/../.."
T_NAME=openapi
. tests/lib.sh
agent_setup openapi
SPEC=tests/data/dotnet-monitor-openapi.json
NODE=(node tests/validate/openapi-validate.mjs "$SPEC")
[ -d tests/validate/node_modules/ajv ] || { fail setup "tests/validate/node_modules is missing: run scripts/prereqs.sh test"; exit 0; }
build_apps

cat > "$W/rules.yaml" <<'EOF2'
CollectionRules:
  stacks-at-start:
    Trigger:
      Type: Startup
    Actions:
      - Type: CollectStacks
        Settings:
          Egress: out
EOF2
start_agent --no-auth --no-metrics --workload-config "$W/rules.yaml"
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" sleep 120 > "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/app.out" READY 30 || { fail app "the app did not start: $(tail -3 "$W/app.out")"; exit 0; }
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
listed() { [ "$(code "$U/processes")" = 200 ] && grep -q "\"pid\":$APID" "$W/body"; }
eventually 15 listed || { fail attach "the app never appeared in /processes: $(cat "$W/body")"; exit 0; }

# valid NAME METHOD TEMPLATE STATUS URL...: the answer's status is STATUS and its body validates
valid() {
	local name=$1 method=$2 path=$3 status=$4 got out
	shift 4
	got=$(curl -s -X "$method" -o "$W/$name.json" -w '%{http_code}' "$@")
	out=$("${NODE[@]}" "$method" "$path" "$status" "$W/$name.json" 2>&1)
	WHY="status $got (want $status); validator: $out; body: $(head -c 300 "$W/$name.json")"
	check "json/$name" test "$got" = "$status" -a "$out" = ok
}
valid processes GET /processes 200 "$U/processes"
valid process GET /process 200 "$U/process?pid=$APID"
valid env GET /env 200 "$U/env?pid=$APID"
valid collectionrules GET /collectionrules 200 "$U/collectionrules?pid=$APID"
valid collectionrule GET '/collectionrules/{collectionRuleName}' 200 "$U/collectionrules/stacks-at-start?pid=$APID"
# an operation: a stacks capture egressed to the filesystem provider (202 and a Location)
egressed stacks "$U/stacks?pid=$APID&egressProvider=out"
check operation-accepted test "$CODE" = 202
OP=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/stacks.hdr") # egressed waited for it to end
valid operations GET /operations 200 "$U/operations"
valid operation GET '/operations/{operationId}' 201 "$U$OP"

# the validator bites
printf '[{"pid":"1","uid":"8bbc006a-90c5-4324-809c-428fe20bff26","isDefault":true}]' > "$W/bad1.json"
out=$("${NODE[@]}" GET /processes 200 "$W/bad1.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/string-pid test "$rc" = 1
printf '{"pid":1,"uid":"8bbc006a-90c5-4324-809c-428fe20bff26","surprise":1}' > "$W/bad2.json"
out=$("${NODE[@]}" GET /process 200 "$W/bad2.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/unknown-field test "$rc" = 1
out=$("${NODE[@]}" GET /nonexistent 200 "$W/bad2.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/unknown-route test "$rc" = 2
