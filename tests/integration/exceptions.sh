#!/usr/bin/env bash
# exceptions.sh - /exceptions against a real .NET app (tests/apps/console `throw`: each round a handled
# InvalidOperationException("inner k") from Program.Thrower, wrapped by Program.Wrap into an
# ApplicationException("outer k")): the agent's history agrees with what the app threw (type, message, inner
# exception, throwing method, parameter types), in dotnet-monitor's three formats; the POST form's filters;
# egress; the history's caps; the setting that turns it off and the permission that forbids it; the
# CollectExceptions action of a collection rule fired by the app's own exception-count counter.
set -u
cd "$(dirname "$0")/../.."
T_NAME=exceptions
. tests/lib.sh
agent_setup exceptions
build_apps
APP="$B/apps/console/console.dll"

# start_app: the throwing app attached through the agent's socket (its history begins when the agent's
# session does, within a second of the attach: the first rounds may be before it)
start_app() {
	: > "$W/app.out" # emptied here, not by the background job: an earlier run's READY is not this one's
	DOTNET_DiagnosticPorts=$W/dumps/port,connect,suspend dotnet "$APP" throw > "$W/app.out" 2>&1 &
	PIDS+=($!)
	wait_for "$W/app.out" READY 30 || { fail app-start "the app did not start" "$W/app.out"; exit 0; }
	APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
}
have_round() { curl -s "$U/exceptions?pid=$APID" | grep -q "\"outer $1\""; }
# rounds_in: K, a round whose inner and outer exceptions are both in the history, and a round after it
first_round() { curl -s "$U/exceptions?pid=$APID" | jq -r -s '[.[].message | select(startswith("inner ")) | ltrimstr("inner ") | tonumber] | min // empty'; }

start_agent --metrics-interval 1
start_app
eventually 30 have_round 1 || eventually 30 first_round > /dev/null || { fail history "no exceptions in /exceptions after 30 s" "$W/agent.log"; exit 0; }
K=$(first_round)
eventually 30 have_round $((K + 3)) || { fail history "no round $((K + 3)) in /exceptions" "$W/agent.log"; exit 0; }

# --- newline-delimited JSON (the default): what the app threw
code "$U/exceptions?pid=$APID" > "$W/code"
cp "$W/body" "$W/ex.ndjson"
WHY="$(cat "$W/code"): $(head -c 600 "$W/ex.ndjson")"
check ndjson-200 test "$(cat "$W/code")" = 200
check ndjson-lines jq -e -s 'length >= 6 and all(.[]; .id > 0)' "$W/ex.ndjson"
IN=$(jq -c -s --arg k "$K" '[.[] | select(.message == "inner \($k)")][0]' "$W/ex.ndjson")
OUT=$(jq -c -s --arg k "$K" '[.[] | select(.message == "outer \($k)")][0]' "$W/ex.ndjson")
WHY="inner: $IN"
check inner-type jqe '.typeName == "System.InvalidOperationException" and .moduleName == "System.Private.CoreLib.dll"' <<< "$IN"
check inner-thrower jqe '.stack.frames[0] | .methodName == "Thrower" and .typeName == "DiagportTestConsole.Program" and .moduleName == "console.dll" and .parameterTypes == ["System.Int64"]' <<< "$IN"
check inner-callers jqe '[.stack.frames[].methodName] | .[0:4] == ["Thrower", "Wrap", "Throw", "Main"]' <<< "$IN"
check inner-none jqe '.innerExceptions == []' <<< "$IN"
WHY="outer: $OUT / inner: $IN"
check outer-type jqe '.typeName == "System.ApplicationException" and .stack.frames[0].methodName == "Wrap"' <<< "$OUT"
check outer-inner-id jqe --argjson i "$(jq .id <<< "$IN")" '.innerExceptions == [{"id": $i}]' <<< "$OUT"
check same-thread jqe --argjson t "$(jq .stack.threadId <<< "$IN")" '.stack.threadId == $t and (.timestamp | test("^20[0-9-]{8}T[0-9:.]+Z$"))' <<< "$OUT"
check ids-ascend jq -e -s '[.[].id] | . == (sort | unique)' "$W/ex.ndjson"
WHY="$(head -c 400 "$W/ex.ndjson")"
check frame-fields jq -e -s 'all(.[]; .stack.frames | all(.[]; has("methodToken") and .moduleVersionId == "00000000-0000-0000-0000-000000000000" and .hidden == false))' "$W/ex.ndjson"
check ndjson-ctype bash -c "curl -s -D - -o /dev/null '$U/exceptions?pid=$APID' | grep -qi '^content-type: application/x-ndjson'"

# --- JSON sequences: each record after an RS (0x1E)
curl -s -H 'Accept: application/json-seq' "$U/exceptions?pid=$APID" > "$W/ex.seq"
WHY="$(head -c 200 "$W/ex.seq" | od -c | head -3)"
check json-seq bash -c "head -c 1 '$W/ex.seq' | od -An -tx1 | grep -q 1e && tr -d '\036' < '$W/ex.seq' | jq -e -s 'length >= 6' > /dev/null"

# --- text: dotnet-monitor's layout
curl -s -H 'Accept: text/plain' "$U/exceptions?pid=$APID" > "$W/ex.txt"
WHY="$(head -20 "$W/ex.txt")"
check text-header grep -q '^First chance exception at 20[0-9-]*T[0-9:.]*Z$' "$W/ex.txt"
check text-outer grep -qx "System.ApplicationException: outer $K" "$W/ex.txt"
check text-inner grep -qx " ---> System.InvalidOperationException: inner $K" "$W/ex.txt"
check text-frame grep -qx '   at DiagportTestConsole.Program.Thrower(System.Int64)' "$W/ex.txt"
check text-end-inner grep -qx '   --- End of inner exception stack trace ---' "$W/ex.txt"

# --- POST with dotnet-monitor's filters
post() { curl -s -o "$W/body" -w '%{http_code}' -H 'Content-Type: application/json' -d "$1" "$U/exceptions?pid=$APID"; }
c=$(post '{"Include":[{"exceptionType":"System.ApplicationException"}]}')
WHY="$c $(head -c 300 "$W/body")"
check post-include jq -e -s 'length >= 3 and all(.[]; .typeName == "System.ApplicationException")' "$W/body"
c=$(post '{"exclude":[{"methodName":"Thrower"}]}')
WHY="$c $(head -c 300 "$W/body")"
check post-exclude-method jq -e -s 'length >= 3 and all(.[]; .stack.frames[0].methodName != "Thrower")' "$W/body"
c=$(post '{"include":[{"typeName":"DiagportTestConsole.Program","methodName":"Thrower","moduleName":"console.dll"}]}')
WHY="$c $(head -c 300 "$W/body")"
check post-include-frame jq -e -s 'length >= 3 and all(.[]; .message | startswith("inner"))' "$W/body"
c=$(curl -s -o "$W/body" -w '%{http_code}' -H 'Content-Type: application/json' -H 'Accept: text/plain' \
	-d '{"include":[{"exceptionType":"System.ApplicationException"}]}' "$U/exceptions?pid=$APID")
WHY="$c $(head -8 "$W/body")"
check text-inner-filtered grep -qx '   --- The inner exception was not included in the filter ---' "$W/body"
c=$(post '{"include":[{"exceptionKind":"x"}]}')
WHY="$c $(cat "$W/body")"
check post-unknown-field-400 bash -c "[ $c = 400 ] && jq -e '.errors[\"\$\"][0] | contains(\"exceptionKind\")' '$W/body'"
c=$(post '{"include":')
WHY="$c $(cat "$W/body")"
check post-not-json-400 test "$c" = 400

# --- to an egress provider: 202, an operation, the file
egressed eg "$U/exceptions?pid=$APID&egressProvider=out"
WHY="$CODE $(cat "$W/eg-op.json")"
check egress-202 test "$CODE" = 202
check egress-op jq -e '.status == "Succeeded"' "$W/eg-op.json"
F=$(ls "$W"/out/*.exceptions.json 2>/dev/null | head -1)
WHY="files: $(ls "$W/out")"
check egress-file bash -c "[ -n '$F' ] && jq -e -s 'length >= 6' '$F' > /dev/null"

# --- a CollectExceptions action, fired by the app's own exception-count counter (System.Runtime)
cat > "$W/rules.yaml" <<YAML
CollectionRules:
  Throwing:
    Trigger:
      Type: EventCounter
      Settings: { ProviderName: System.Runtime, CounterName: exception-count, GreaterThan: 5, SlidingWindowDuration: "00:00:02" }
    Actions:
      - Type: CollectExceptions
        Settings: { Egress: out, Filters: { Include: [ { ExceptionType: System.ApplicationException } ] } }
    Limits: { ActionCount: 1 }
YAML
kill "$AG" 2>/dev/null; wait "$AG" 2>/dev/null
rm -f "$W"/out/*
start_agent --metrics-interval 1 --config "$W/rules.yaml"
eventually 30 first_round > /dev/null || fail rule-history "no rounds after the agent's restart" "$W/agent.log"
ruled() { ls "$W"/out/*.exceptions.txt > /dev/null 2>&1; }
eventually 60 ruled
F=$(ls "$W"/out/*.exceptions.txt 2>/dev/null | head -1)
WHY="files: $(ls "$W/out"); $(grep -E 'collection-rule|action' "$W/agent.log" | tail -5)"
check rule-collect-exceptions bash -c "[ -n '$F' ] && grep -q '^System.ApplicationException: outer' '$F' && ! grep -q '^System.InvalidOperationException' '$F'"

# --- the history's count cap; restarting the agent restarts the history
printf 'exceptionsMaxCount: 10\n' > "$W/cap.yaml"
kill "$AG" 2>/dev/null; wait "$AG" 2>/dev/null
start_agent --config "$W/cap.yaml"
evicted() { curl -s "$U/exceptions?pid=$APID" | jq -e -s '.[0].id > 10' > /dev/null; }
eventually 30 evicted || fail cap-rounds "the history's first id never passed 10" "$W/agent.log"
curl -s "$U/exceptions?pid=$APID" > "$W/cap.ndjson"
WHY="$(jq -c -s '[.[].id]' "$W/cap.ndjson")"
check count-cap jq -e -s 'length == 10 and .[0].id > 1' "$W/cap.ndjson"

# --- turned off; not permitted
kill "$AG" 2>/dev/null; wait "$AG" 2>/dev/null
start_agent --no-exceptions
WHY="$(code "$U/exceptions?pid=$APID") $(cat "$W/body")"
check off-400 bash -c "[ \"\$(curl -s -o '$W/off' -w '%{http_code}' '$U/exceptions?pid=$APID')\" = 400 ] && grep -q 'turned off' '$W/off'"
check off-no-session bash -c "! grep -q 'exceptions-session' '$W/agent.log'"
kill "$AG" 2>/dev/null; wait "$AG" 2>/dev/null
start_agent --captures stacks,metrics
WHY="$(code "$U/exceptions") $(cat "$W/body")"
check not-served-403 test "$(code "$U/exceptions")" = 403
check crashes-not-served-403 test "$(code "$U/crashes")" = 403
