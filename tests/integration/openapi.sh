#!/usr/bin/env bash
# openapi.sh - the agent's answers against dotnet-monitor's own OpenAPI document
# (tests/data/dotnet-monitor-openapi.json, from dotnet/dotnet-monitor's documentation/openapi.json), so
# that drift shows: a real agent (with a token, a collection rule and a filesystem egress provider) and a
# real .NET app, every JSON answer validated against the schema the document gives its route and status
# (tests/validate/openapi-validate.mjs: Ajv, OpenAPI 3.0's nullable understood).
#   routes/*     every route the document lists answers (not 404, not 405), asked with a pid that is no
#                number (a POST with an empty JSON body); a JSON answer validates against the document's
#                schema for that status, a problem the document gives no schema for against ProblemDetails
#   json/*       GET /processes, /process, /env, /info, /collectionrules, /collectionrules/{name},
#                /operations (a tag given twice listed once; ?tags= keeps those with every tag), /operations/{id}
#                (201 once Succeeded, 200 while Running or once Cancelled): status as documented, body valid
#   problem/*    400 (a pid that is no number, no such process, POST /parameters), 401 (no token), 404 (no
#                such route), 429 (a fourth trace beside three): a problem body, valid
#   bites/*      the validator refuses an answer that breaks the schema (a string pid, an unknown field)
# /exceptions answers newline-delimited JSON, not a JSON document: its routes are checked here like every
# other (their refusals validate), its records in tests/integration/exceptions.sh.
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
printf 'openapi-token-0123456789abcdef\n' > "$W/token"
H=(-H "Authorization: Bearer openapi-token-0123456789abcdef")
start_agent --auth-token-file "$W/token" --workload-config "$W/rules.yaml"
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" sleep 120 > "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/app.out" READY 30 || { fail app "the app did not start: $(tail -3 "$W/app.out")"; exit 0; }
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
listed() { [ "$(code "${H[@]}" "$U/processes")" = 200 ] && grep -q "\"pid\":$APID" "$W/body"; }
eventually 15 listed || { fail attach "the app never appeared in /processes: $(cat "$W/body")"; exit 0; }

# validates NAME METHOD TEMPLATE STATUS: $W/NAME.json against the document's schema for the route and status
validates() {
	"${NODE[@]}" "$2" "$3" "$4" "$W/$1.json" 2>&1
}
# valid NAME METHOD TEMPLATE STATUS URL [CURL ARGS]: the answer's status is STATUS and its body validates
valid() {
	local name=$1 method=$2 path=$3 status=$4 url=$5 got out
	shift 5
	got=$(curl -s -X "$method" -o "$W/$name.json" -w '%{http_code}' "$@" "$url")
	out=$(validates "$name" "$method" "$path" "$status")
	WHY="status $got (want $status); validator: $out; body: $(head -c 300 "$W/$name.json")"
	check "json/$name" test "$got" = "$status" -a "$out" = ok
}
# problem NAME SCHEMA-OR-ROUTE STATUS URL [CURL ARGS]: status STATUS, a problem+json body that validates against
# the route's schema for STATUS ("GET /process") or a named schema (ProblemDetails)
problem() {
	local name=$1 against=$2 status=$3 url=$4 got ctype out
	shift 4
	read -r got ctype < <(curl -s -o "$W/$name.json" -w '%{http_code} %{content_type}\n' "$@" "$url")
	if [ "${against% *}" = "$against" ]; then
		out=$("${NODE[@]}" schema "$against" "$W/$name.json" 2>&1)
	else
		out=$(validates "$name" "${against% *}" "${against#* }" "$status")
	fi
	WHY="status $got (want $status), $ctype; validator: $out; body: $(head -c 300 "$W/$name.json")"
	check "problem/$name" test "$got" = "$status" -a "${ctype%%;*}" = application/problem+json -a "$out" = ok
}

# ---- every route the document lists answers, and what it answers validates
# (a pid that is no number: no capture is taken, every route with selectors refuses it before anything else)
"${NODE[@]}" routes > "$W/routes"
WHY="the document lists $(wc -l < "$W/routes") routes"; check routes/listed test "$(wc -l < "$W/routes")" -ge 20
while read -r method path; do
	name=$(printf '%s-%s' "$method" "$path" | tr -c 'A-Za-z0-9-' '_')
	url=$U${path//\{operationId\}/00000000-0000-4000-8000-000000000000}
	url=${url//\{collectionRuleName\}/stacks-at-start}?pid=x
	args=("${H[@]}" -X "$method")
	[ "$method" = POST ] && args+=(-H 'Content-Type: application/json' --data-binary '{}')
	read -r got ctype < <(curl -s -o "$W/$name.json" -w '%{http_code} %{content_type}\n' "${args[@]}" "$url")
	case ${ctype%%;*} in
	application/json | application/problem+json)
		out=$(validates "$name" "$method" "$path" "$got")
		# a problem for a status the document gives no schema for (DELETE /operations/{id}'s 400): ProblemDetails
		if [ "$got" -ge 400 ] && [[ $out == "the document has no JSON schema"* ]]; then
			out=$("${NODE[@]}" schema ProblemDetails "$W/$name.json" 2>&1)
		fi ;;
	*) out=ok ;; # not JSON (/metrics' text): the status is what is checked
	esac
	WHY="$method $url: status $got ($ctype); validator: $out; body: $(head -c 300 "$W/$name.json")"
	check "routes/$name" test "$got" != 404 -a "$got" != 405 -a "$out" = ok
done < "$W/routes"

# ---- the JSON answers, each as documented
valid processes GET /processes 200 "$U/processes" "${H[@]}"
valid process GET /process 200 "$U/process?pid=$APID" "${H[@]}"
valid env GET /env 200 "$U/env?pid=$APID" "${H[@]}"
valid info GET /info 200 "$U/info" "${H[@]}"
valid collectionrules GET /collectionrules 200 "$U/collectionrules?pid=$APID" "${H[@]}"
valid collectionrule GET '/collectionrules/{collectionRuleName}' 200 "$U/collectionrules/stacks-at-start?pid=$APID" "${H[@]}"
# the collection rule's stacks (one at a time) done first: the capture below would be refused beside it
idle() { curl -s "${H[@]}" "$U/operations" | jq -e 'length > 0 and all(.status != "Running")' > /dev/null; }
eventually 30 idle || fail rule-ended "the collection rule's operation did not end: $(curl -s "${H[@]}" "$U/operations")"
# an operation: a stacks capture egressed to the filesystem provider (202 and a Location), a tag given twice
# (the tags are a set: uniqueItems)
egressed stacks "$U/stacks?pid=$APID&egressProvider=out&tags=incident,api,incident" "${H[@]}"
check operation-accepted test "$CODE" = 202
OP=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/stacks.hdr") # egressed waited for it to end
valid operations GET /operations 200 "$U/operations" "${H[@]}"
valid operations-tagged GET /operations 200 "$U/operations?tags=api,incident" "${H[@]}"
WHY="$(cat "$W/operations-tagged.json")"
check operations-tags-filter jq -e --arg id "${OP#/operations/}" 'length == 1 and .[0].operationId == $id and .[0].tags == ["incident","api"]' "$W/operations-tagged.json"
code "${H[@]}" "$U/operations?tags=api,other" > /dev/null
WHY="$(cat "$W/body")"; check operations-tags-all-needed jq -e 'length == 0' "$W/body"
valid operation-succeeded GET '/operations/{operationId}' 201 "$U$OP" "${H[@]}"

# ---- problems
problem bad-pid "GET /process" 400 "$U/process?pid=x" "${H[@]}"
problem no-such-process "GET /process" 400 "$U/process?pid=1" "${H[@]}"
problem parameters "POST /parameters" 400 "$U/parameters?pid=$APID" "${H[@]}" -H 'Content-Type: application/json' \
	--data-binary '{"methods":[{"moduleName":"console.dll","typeName":"Program","methodName":"Main"}]}'
WHY="$(cat "$W/parameters.json")"; check problem/parameters-says-why grep -q "'Parameter Capturing' feature is not enabled" "$W/parameters.json"
problem no-token ProblemDetails 401 "$U/processes"
problem no-operation ProblemDetails 400 "$U/operations/00000000-0000-4000-8000-000000000000" "${H[@]}"
problem no-route ProblemDetails 404 "$U/nonexistent" "${H[@]}"

# ---- 429: three traces (the limit) running, a fourth refused; the running ones' status (200), one cancelled
# (200), the others stopped (201)
TPIDS=()
for i in 1 2 3; do
	curl -s -o "$W/t$i.nettrace" "${H[@]}" "$U/trace?pid=$APID&profile=Metrics&durationSeconds=60" & TPIDS+=($!)
done
PIDS+=("${TPIDS[@]}")
running() { curl -s "${H[@]}" "$U/operations" | jq -e '[.[] | select(.status == "Running" and .isStoppable)] | length == 3' > /dev/null; }
if eventually 15 running; then
	problem too-many "GET /trace" 429 "$U/trace?pid=$APID&profile=Metrics&durationSeconds=60" "${H[@]}"
	mapfile -t IDS < <(curl -s "${H[@]}" "$U/operations" | jq -r '.[] | select(.status == "Running" and .isStoppable) | .operationId')
	valid operation-running GET '/operations/{operationId}' 200 "$U/operations/${IDS[0]}" "${H[@]}"
	c=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "${H[@]}" "$U/operations/${IDS[0]}")
	WHY="DELETE: $c"; check operation-cancel-200 test "$c" = 200
	valid operation-cancelled GET '/operations/{operationId}' 200 "$U/operations/${IDS[0]}" "${H[@]}"
	for id in "${IDS[@]:1}"; do curl -s -o /dev/null -X DELETE "${H[@]}" "$U/operations/$id?stop=true"; done
	op_ended 15 "$U/operations/${IDS[1]}" "${H[@]}"
	valid operation-stopped GET '/operations/{operationId}' 201 "$U/operations/${IDS[1]}" "${H[@]}"
else
	fail three-traces "three traces were not running within 15 s: $(curl -s "${H[@]}" "$U/operations" | head -c 600)"
fi
wait "${TPIDS[@]}" 2>/dev/null

# ---- the validator bites
printf '[{"pid":"1","uid":"8bbc006a-90c5-4324-809c-428fe20bff26","isDefault":true}]' > "$W/bad1.json"
out=$("${NODE[@]}" GET /processes 200 "$W/bad1.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/string-pid test "$rc" = 1
printf '{"pid":1,"uid":"8bbc006a-90c5-4324-809c-428fe20bff26","surprise":1}' > "$W/bad2.json"
out=$("${NODE[@]}" GET /process 200 "$W/bad2.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/unknown-field test "$rc" = 1
printf '{"operationId":"8bbc006a-90c5-4324-809c-428fe20bff26","status":"Failed","error":{"code":7}}' > "$W/bad3.json"
out=$("${NODE[@]}" GET '/operations/{operationId}' 200 "$W/bad3.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/nullable-ref-checked test "$rc" = 1
out=$("${NODE[@]}" GET /nonexistent 200 "$W/bad2.json" 2>&1); rc=$?
WHY="exit $rc: $out"; check bites/unknown-route test "$rc" = 2
