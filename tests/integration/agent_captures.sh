#!/usr/bin/env bash
# agent_captures.sh - each capture kind its own permission (--captures, issue 33), against the real agent and the
# real webapp:
#   start/*     an unknown kind (flag, DIAGPORT_CAPTURES, settings file, key-per-file) stops the agent at start: exit 2,
#               the message names the kind and where it was given; so does a workload's own source (--workload-config,
#               DIAGPORT_RULES, DIAGPORT_EGRESS_SETTINGS) that sets anything but Egress and the collection rules
#   only/*      an agent that serves stacks alone: stacks served; every other kind's routes 403 with a
#               problem+json whose detail names the kind and `captures`, decided before the process lookup and
#               before the query is read (an unknown pid, a bad type: still 403), after the token (none: 401);
#               /info's capabilities enable stacks (and call_stacks) only; /process without commandLine;
#               /processes served; /metrics on the metrics-only listener 403 too; the rules read from --workload-config; a collection rule that would dump is not started (rule-refused,
#               not listed, no dump operation) while its neighbour that takes stacks runs
#   but/*       an agent that serves every kind but stacks: each of them served (dump, gcdump, trace, cpuprofile,
#               metrics, logs, env), stacks 403
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-captures
. tests/lib.sh
agent_setup caps
build_apps
printf 'captures-token-%s\n' "$RANDOM$RANDOM-0123456789" > "$W/token"
AUTH=(-H "Authorization: Bearer $(cat "$W/token")")

# ---- start/*: an unknown kind stops the agent
refused_start() { # NAME WANT-REGEX [ENV=V...] -- LAUNCH ARGS
	local name=$1 want=$2 rc
	shift 2
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env "${envs[@]+"${envs[@]}"}" "$D" launch --socket "$W/s-$name" --dumps "$W" --urls http://127.0.0.1:0 \
		--auth-token-file "$W/token" "$@" > /dev/null 2> "$W/start-$name.err"
	rc=$?
	WHY="exit $rc: $(cat "$W/start-$name.err")"
	check "start/$name" bash -c "test $rc = 2 && grep -qE -- \"$want\" '$W/start-$name.err' && test ! -e '$W/s-$name'"
}
refused_start flag "--captures: 'heapdump' is not a capture kind; captures takes dump, gcdump, trace" -- --captures stacks,heapdump
refused_start env "environment variable DIAGPORT_CAPTURES: 'Dumps' is not a capture kind" DIAGPORT_CAPTURES=Dumps -- 
printf 'captures: "stacks, everything"\n' > "$W/caps.yaml"
refused_start file "caps\\.yaml:1:[0-9]+: 'everything' is not a capture kind" -- --config "$W/caps.yaml"
mkdir -p "$W/kpf" && printf 'stacks,\n' > "$W/kpf/captures"
refused_start key-per-file "kpf/captures: an empty name is not a capture kind" -- --config-dir "$W/kpf"
# a workload's own sources (its rules ConfigMap, its egress Secret) hold Egress and the rules only: an app team that
# writes them cannot lift the platform's --captures, turn the sandbox off or move the agent's URLs
SCOPE="a workload's own source holds Egress:, CollectionRules:, CollectionRuleDefaults: and Templates: settings only"
mkdir -p "$W/wl-rules" && printf 'all\n' > "$W/wl-rules/captures"
refused_start workload-rules-dir "wl-rules/captures: captures: $SCOPE" -- --captures stacks --workload-config "$W/wl-rules"
printf 'noSandbox: true\n' > "$W/wl-egress.yaml"
refused_start workload-egress-file "wl-egress\\.yaml:1:[0-9]+: noSandbox: $SCOPE" -- --workload-config "$W/wl-egress.yaml"
mkdir -p "$W/wl-metrics" && printf 'http://0.0.0.0:0\n' > "$W/wl-metrics/Metrics__Endpoints"
refused_start workload-metrics-listener "wl-metrics/Metrics__Endpoints: Metrics:Endpoints: $SCOPE" -- --workload-config "$W/wl-metrics"
refused_start workload-rules-env "environment variable DIAGPORT_RULES:1:[0-9]+: urls: $SCOPE" \
	'DIAGPORT_RULES={"urls": "http://0.0.0.0:1"}' --
refused_start workload-egress-env "environment variable DIAGPORT_EGRESS_SETTINGS:1:[0-9]+: captures: $SCOPE" \
	'DIAGPORT_EGRESS_SETTINGS={"captures": "all"}' --

# ---- only/*: stacks alone, with a rule that would dump and one that takes stacks
cat > "$W/rules.yaml" << 'EOF'
CollectionRules:
  DumpAtStart:
    Trigger: {Type: Startup}
    Actions:
      - Type: CollectDump
        Settings: {Egress: out, Type: Mini}
  StacksAtStart:
    Trigger: {Type: Startup}
    Actions:
      - Type: CollectStacks
        Settings: {Egress: out}
EOF
start_agent --auth-token-file "$W/token" --captures stacks --workload-config "$W/rules.yaml" --metrics-urls http://127.0.0.1:0
MP=$(listening_port "$W/agent.log" metricsUrls 5)
if ! start_webapp "$W/app1.out" "$W/dumps/port" "$U" "${AUTH[@]}"; then
	fail only/setup "the webapp did not start or was not listed: $(tail -3 "$W/app1.out") / $(tail -3 "$W/agent.log")"
	exit 0
fi
check only/listening-says grep -q '"event":"listening".*"captures":"stacks"' "$W/agent.log"
c=$(code "${AUTH[@]}" "$U/stacks?pid=$APID")
WHY="got $c: $(head -c 300 "$W/body")"; check only/stacks-served test "$c" = 200 -a -s "$W/body"
forbidden() { # NAME KIND URL [CURL ARGS]: 403, problem+json, the detail names the kind and captures
	local name=$1 kind=$2 url=$3 c ct
	shift 3
	c=$(curl -s -D "$W/h" -o "$W/body" -w '%{http_code}' "${AUTH[@]}" "$@" "$url")
	ct=$(tr -d '\r' < "$W/h" | awk -F': ' 'tolower($1) == "content-type" { print $2 }')
	WHY="got $c ($ct): $(head -c 300 "$W/body")"
	check "only/$name-403" bash -c "test $c = 403 && [[ '$ct' == application/problem+json* ]] && jq -e --arg k '$kind' \
		'.status == 403 and .detail == \"this agent does not serve \(\$k) captures (captures: stacks)\"' '$W/body'"
}
forbidden dump dump "$U/dump?pid=$APID&type=Mini"
forbidden gcdump gcdump "$U/gcdump?pid=$APID"
forbidden trace trace "$U/trace?pid=$APID&durationSeconds=1"
forbidden trace-post trace "$U/trace?pid=$APID&durationSeconds=1" -H 'Content-Type: application/json' -d '{"Providers":[]}'
forbidden cpuprofile cpuprofile "$U/trace?pid=$APID&durationSeconds=1&format=folded"
forbidden cpuprofile-perf cpuprofile "$U/trace?pid=$APID&durationSeconds=1&engine=perf"
forbidden perfmap cpuprofile "$U/perfmap?pid=$APID&type=PerfMap" -X POST
forbidden livemetrics metrics "$U/livemetrics?pid=$APID&durationSeconds=1"
forbidden metrics metrics "$U/metrics"
# where no token is asked (the metrics-only listener, /metrics without one) the 403 does not list what is served
for w in "listener http://127.0.0.1:$MP/metrics" "main $U/metrics"; do
	u=${w#* }
	c=$(curl -s -o "$W/body" -w '%{http_code}' "$u")
	WHY="$u: got $c: $(head -c 300 "$W/body")"
	check "only/metrics-no-token-403-unlisted-${w%% *}" bash -c "test $c = 403 && jq -e \
		'.detail == \"this agent does not serve metrics captures (captures)\"' '$W/body' > /dev/null"
done
forbidden logs logs "$U/logs?pid=$APID&durationSeconds=1"
forbidden env env "$U/env?pid=$APID"
# before anything else about the request: an unknown process, a bad parameter are still 403 (not 400)
forbidden dump-unknown-pid dump "$U/dump?pid=1"
forbidden dump-bad-type dump "$U/dump?type=Huge"
# ... but after the token: a stranger learns nothing of what is served
c=$(code "$U/dump?pid=$APID")
WHY="got $c: $(cat "$W/body")"; check only/401-before-403 test "$c" = 401
code "${AUTH[@]}" "$U/info" > /dev/null
WHY="$(cat "$W/body")"; check only/info-lists jq -e '[.capabilities[] | select(.enabled) | .name] == ["call_stacks","http_egress","stacks"]' "$W/body"
code "${AUTH[@]}" "$U/process?pid=$APID" > /dev/null
WHY="$(cat "$W/body")"; check only/process-no-command-line jq -e --argjson p "$APID" '.pid == $p and (has("commandLine") | not)' "$W/body"
c=$(code "${AUTH[@]}" "$U/processes")
WHY="got $c: $(cat "$W/body")"; check only/processes-served jq -e --argjson p "$APID" '.[0].pid == $p' "$W/body"
# the rules: the dump rule not started, the stacks rule ran
WHY="$(grep -i rule "$W/agent.log" | tail -3)"
check only/rule-refused-logged grep -q '"event":"rule-refused","rule":"DumpAtStart","action":"CollectDump","reason":"this agent does not serve dump captures (captures: stacks)"' "$W/agent.log"
stacks_done() { ls "$W/out" | grep -q . && curl -s "${AUTH[@]}" "$U/operations" | jq -e 'length > 0 and all(.status != "Running")' > /dev/null; }
eventually 60 stacks_done
curl -s "${AUTH[@]}" "$U/operations" > "$W/ops.json"
WHY="$(cat "$W/ops.json"; ls -la "$W/out")"
check only/rule-stacks-ran jq -e 'length == 1 and .[0].status == "Succeeded" and (.[0].tags | index("StacksAtStart"))' "$W/ops.json"
# the stacks artifact alone in out, and no core anywhere (dumps are core_DATE_TIME)
WHY="$(find "$W/out" "$W/dumps")"
check only/rule-no-dump bash -c "test \"\$(find '$W/out' -type f | wc -l)\" = 1 && test -z \"\$(find '$W/out' '$W/dumps' -name 'core_*')\""
code "${AUTH[@]}" "$U/collectionrules" > /dev/null
WHY="$(cat "$W/body")"; check only/rule-not-listed jq -e 'has("StacksAtStart") and (has("DumpAtStart") | not)' "$W/body"
kill "$APP" "$AG" 2> /dev/null
wait "$APP" "$AG" 2> /dev/null
cp "$W/agent.log" "$W/agent-only.log"

# ---- but/*: every kind but stacks, each served
rm -rf "$W/dumps" "$W/out"
start_agent --auth-token-file "$W/token" --captures dump,gcdump,trace,cpuprofile,metrics,logs,env --metrics-interval 1
if ! start_webapp "$W/app2.out" "$W/dumps/port" "$U" "${AUTH[@]}"; then
	fail but/setup "the webapp did not start or was not listed: $(tail -3 "$W/app2.out") / $(tail -3 "$W/agent.log")"
	exit 0
fi
served() { # NAME URL [CURL ARGS]: 200 and a body (an idle app's logs can be empty: 200 alone)
	local name=$1 url=$2 c
	shift 2
	c=$(curl -s -o "$W/body-$name" -w '%{http_code}' "${AUTH[@]}" "$@" "$url")
	WHY="got $c: $(head -c 300 "$W/body-$name" | tr -cd '[:print:]')"
	if [ "$name" = logs ]; then check "but/$name-served" test "$c" = 200; else check "but/$name-served" test "$c" = 200 -a -s "$W/body-$name"; fi
}
served dump "$U/dump?pid=$APID&type=Mini"
check but/dump-is-core bash -c "head -c 4 '$W/body-dump' | grep -q ELF"
served gcdump "$U/gcdump?pid=$APID"
served trace "$U/trace?pid=$APID&durationSeconds=1&profile=Metrics"
served cpuprofile "$U/trace?pid=$APID&durationSeconds=1&format=speedscope"
served livemetrics "$U/livemetrics?pid=$APID&durationSeconds=1"
served metrics "$U/metrics"
served logs "$U/logs?pid=$APID&durationSeconds=1"
served env "$U/env?pid=$APID"
code "${AUTH[@]}" "$U/process?pid=$APID" > /dev/null
WHY="$(cat "$W/body")"; check but/process-command-line jq -e '.commandLine | length > 0' "$W/body"
code "${AUTH[@]}" "$U/info" > /dev/null
WHY="$(cat "$W/body")"; check but/info-lists jq -e '[.capabilities[] | select(.enabled) | .name] == ["metrics","http_egress","dump","gcdump","trace","cpuprofile","logs","env"]' "$W/body"
c=$(code "${AUTH[@]}" "$U/stacks?pid=$APID")
WHY="got $c: $(cat "$W/body")"
check but/stacks-403 jq -e '.status == 403 and .detail == "this agent does not serve stacks captures (captures: dump,gcdump,trace,cpuprofile,metrics,logs,env)"' "$W/body"
