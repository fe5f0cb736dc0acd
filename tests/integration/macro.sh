#!/usr/bin/env bash
# macro.sh - the CloudFormation macro contract (`diagport macro`, injector/macro.c) on real macro
# event shapes (issue 16, first part): CloudFormation's request (region, accountId, fragment,
# transformId, params, requestId, templateParameterValues) in, its response (requestId, status,
# fragment or errorMessage) out.
#   template/*  a template-level Transform: the fragment is the template; the response's fragment
#               is, as data, what `diagport inject cfn` gives for it (with params.all: --all), and
#               CfnInclude loads it; a YAML-origin template (CloudFormation hands the macro its
#               JSON form, intrinsics spelled out) the same
#   snippet/*   Fn::Transform inside one task definition's Properties: the fragment is those
#               Properties; the agent container and the app's port variable are added (no SYS_PTRACE),
#               as inject cfn adds them to that resource
#   failure/*   a bad param, an unknown param, no requestId, a fragment that is neither, a task
#               definition the rules refuse, params.perf on a Fargate task definition: status
#               failure, an errorMessage that names the problem, exit 1
#   lambda/*    `make lambda`: a static bootstrap (no dynamic section, no interpreter: nothing needed
#               from provided.al2023's glibc), zipped executable; run as Lambda runs it, it serves
#               three events through the Runtime API loop (lambda_runtime_fake.py, a stand-in that
#               follows the Runtime API's published contract), each answer what `macro --event` gives
set -u
cd "$(dirname "$0")/../.."
T_NAME=macro
. tests/lib.sh
D=$PWD/diagport
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
V=tests/validate

# event FRAGMENT_FILE PARAMS_JSON ID > event.json
event() {
	jq -c --slurpfile f "$1" --argjson p "$2" --arg id "$3" \
		'{region: "eu-west-1", accountId: "123456789012", fragment: $f[0], transformId: "123456789012::diagport",
		  params: $p, requestId: $id, templateParameterValues: {}}' -n
}

# --- template-level
for c in "all-json {\"all\":true} --all" "json-tags {} " "rules-egress-auth {} "; do
	read -r case params flags <<< "$c"
	in=tests/golden/cfn/$case/input.json
	event "$in" "$params" "t-$case" > "$W/$case.event"
	"$D" macro --event "$W/$case.event" > "$W/$case.out"; rc=$?
	# shellcheck disable=SC2086
	"$D" inject cfn $flags -o json "$in" > "$W/$case.cli"
	WHY="exit $rc: $(head -c 300 "$W/$case.out")"
	check "template/$case-success" jq -e --arg id "t-$case" '.requestId == $id and .status == "success" and (has("errorMessage") | not)' "$W/$case.out"
	jq -S .fragment "$W/$case.out" > "$W/$case.frag"
	WHY="$(diff <(jq -S . "$W/$case.cli") "$W/$case.frag" | head -5)"
	check "template/$case-as-inject-cfn" cmp -s <(jq -S . "$W/$case.cli") "$W/$case.frag"
	node "$V/cfn-load.mjs" "$W/$case.frag" > "$W/$case.load" 2>&1; rc=$?
	WHY="exit $rc: $(head -c 300 "$W/$case.load")"; check "template/$case-cfninclude" test "$rc" = 0
done
# YAML-origin: CloudFormation gives the macro the template's JSON form (short-form tags spelled out)
"$D" uninject cfn -o json tests/golden/cfn/yaml-short-tags/input.yaml > "$W/yaml.json"
event "$W/yaml.json" '{"all":true}' t-yaml > "$W/yaml.event"
"$D" macro --event "$W/yaml.event" > "$W/yaml.out"; rc=$?
"$D" inject cfn --all -o json tests/golden/cfn/yaml-short-tags/input.yaml > "$W/yaml.cli"
WHY="exit $rc: $(head -c 300 "$W/yaml.out")"
check template/yaml-origin bash -c "[ $rc = 0 ] && cmp -s <(jq -S . '$W/yaml.cli') <(jq -S .fragment '$W/yaml.out')"

# --- snippet-level: Fn::Transform inside the Properties of one task definition
jq '[.Resources[] | select(.Type == "AWS::ECS::TaskDefinition")][0].Properties' tests/golden/cfn/all-json/input.json > "$W/props.json"
event "$W/props.json" '{"mode":"suspend","port":9090}' s-1 > "$W/snip.event"
"$D" macro --event "$W/snip.event" > "$W/snip.out"; rc=$?
WHY="exit $rc: $(head -c 400 "$W/snip.out")"
check snippet/success jq -e '.requestId == "s-1" and .status == "success"' "$W/snip.out"
WHY="$(jq -c '.fragment.ContainerDefinitions | map({Name, Environment, LinuxParameters})' "$W/snip.out" | head -c 600)"
check snippet/injected jq -e '.fragment.ContainerDefinitions as $c | ($c | map(.Name) | index("diagport-agent")) != null and
	($c[0].Environment | map(select(.Name == "DOTNET_DiagnosticPorts" and (.Value | test("suspend")))) | length) == 1 and
	(($c[0].LinuxParameters.Capabilities.Add // []) | index("SYS_PTRACE")) == null and
	($c | map(select(.Name == "diagport-agent"))[0].PortMappings[0].ContainerPort) == 9090' "$W/snip.out"
# the same as inject cfn gives that resource (its Metadata aside: a snippet has none to keep the record in)
jq '{Resources: {T: {Type: "AWS::ECS::TaskDefinition", Properties: .}}}' "$W/props.json" > "$W/one.json"
"$D" inject cfn --all --mode suspend --port 9090 -o json "$W/one.json" | jq -S .Resources.T.Properties > "$W/one.props"
WHY="$(diff "$W/one.props" <(jq -S .fragment "$W/snip.out") | head -5)"
check snippet/as-inject-cfn cmp -s "$W/one.props" <(jq -S .fragment "$W/snip.out")
# params.rules: an SSM parameter, the agent's secret DIAGPORT_RULES, as inject cfn --rules gives it
event "$W/props.json" '{"rules":"/orders/diagport-rules"}' s-rules > "$W/rules.event"
"$D" macro --event "$W/rules.event" > "$W/rules.out"; rc=$?
"$D" inject cfn --all --rules /orders/diagport-rules -o json "$W/one.json" 2> /dev/null | jq -S .Resources.T.Properties > "$W/rules.props"
WHY="exit $rc: $(head -c 400 "$W/rules.out")"
check snippet/rules-param jq -e '.status == "success" and ([.fragment.ContainerDefinitions[] | select(.Name == "diagport-agent")][0].Secrets == [{Name: "DIAGPORT_RULES", ValueFrom: "/orders/diagport-rules"}])' "$W/rules.out"
WHY="$(diff "$W/rules.props" <(jq -S .fragment "$W/rules.out") | head -5)"
check snippet/rules-as-inject-cfn cmp -s "$W/rules.props" <(jq -S .fragment "$W/rules.out")

# --- failures: status failure, a message that names the problem, exit 1
fail_case() {
	local name=$1 ev=$2 want=$3 rc
	"$D" macro --event "$ev" > "$W/f.out"; rc=$?
	WHY="exit $rc: $(head -c 400 "$W/f.out")"
	WANT=$want check "failure/$name" bash -c "[ $rc = 1 ] && jq -e '.status == \"failure\" and (.errorMessage | contains(env.WANT)) and (has(\"fragment\") | not)' '$W/f.out' > /dev/null"
}
event tests/golden/cfn/all-json/input.json '{"mode":"sometimes"}' f-1 > "$W/f1.event"
fail_case bad-param "$W/f1.event" "params.mode: 'sometimes' is not nosuspend or suspend"
event tests/golden/cfn/all-json/input.json '{"colour":"red"}' f-2 > "$W/f2.event"
fail_case unknown-param "$W/f2.event" "params.colour: not an option"
jq 'del(.requestId)' "$W/f1.event" > "$W/f3.event"
fail_case no-request-id "$W/f3.event" "no requestId"
echo '{"Foo": 1}' > "$W/neither.json"
event "$W/neither.json" '{}' f-4 > "$W/f4.event"
fail_case neither "$W/f4.event" "neither a template"
event tests/golden/cfn/err-intrinsic-env/input.json '{"all":true}' f-5 > "$W/f5.event"
want=$(grep -v '^$' tests/golden/cfn/err-intrinsic-env/expected-stderr | head -1)
fail_case refused-by-rules "$W/f5.event" "${want#diagport: }"
# params.perf: refused for a task definition, a Fargate one (the CDK's FargateTaskDefinition, its JSON form)
# naming RequiresCompatibilities, as inject cfn --perf refuses it
"$D" uninject cfn -o json tests/golden/cfn/err-perf-fargate/input.yaml > "$W/fargate.json"
event "$W/fargate.json" '{"all":true,"perf":true}' f-7 > "$W/f7.event"
fail_case perf-fargate "$W/f7.event" "perf: RequiresCompatibilities holds FARGATE"
jq '.Resources.ApiTask.Properties' "$W/fargate.json" > "$W/fargate-props.json"
event "$W/fargate-props.json" '{"perf":"true"}' f-8 > "$W/f8.event"
fail_case perf-fargate-snippet "$W/f8.event" "perf: RequiresCompatibilities holds FARGATE"
# CloudFormation takes a processed template of at most 1 MB: a result over it is refused, with its size
jq '.Description = ("x" * 1048000)' tests/golden/cfn/all-json/input.json > "$W/huge.json"
event "$W/huge.json" '{"all":true}' f-6 > "$W/f6.event"
fail_case over-1mb "$W/f6.event" "over the 1048576 CloudFormation takes"
"$D" macro --event "$W/nope.json" > /dev/null 2> "$W/nope.err"; rc=$?
WHY="exit $rc: $(cat "$W/nope.err")"; check failure/no-event-file test "$rc" = 3

# --- the Lambda artefact: static (it needs nothing from provided.al2023's glibc 2.34), and its
# bootstrap serving events through the Runtime API loop (lambda_runtime_fake.py: a stand-in following
# the Runtime API's published contract; no Lambda service runs here)
# (the plain build's objects: a sanitizer build cannot be linked statically)
env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SANITIZER make -s BUILD=build lambda > "$W/lambda.log" 2>&1; rc=$?
BOOT=build/lambda/bootstrap
WHY="make lambda exit $rc: $(tail -c 300 "$W/lambda.log")"; check lambda/built test "$rc" = 0 -a -x "$BOOT"
WHY="$(readelf -d "$BOOT" 2>&1 | head -3; readelf -l "$BOOT" 2>&1 | grep -i interpreter)"
check lambda/static bash -c "readelf -d '$BOOT' 2>&1 | grep -q 'no dynamic section' && ! readelf -l '$BOOT' | grep -qi 'program interpreter'"
WHY="$(unzip -Z build/lambda/diagport-macro.zip 2>&1 | head -5)"
check lambda/zip-has-executable-bootstrap python3 -c "import sys, zipfile; z = zipfile.ZipFile(sys.argv[1]); i = z.getinfo('bootstrap'); sys.exit(not (i.external_attr >> 16) & 0o100)" build/lambda/diagport-macro.zip
mkdir -p "$W/events" "$W/task"
cp "$W/all-json.event" "$W/events/1.json"
cp "$W/snip.event" "$W/events/2.json"
cp "$W/f1.event" "$W/events/3.json"
# 4: an event over Lambda's 6 MiB payload limit: answered through /error, not read as half an event
python3 -c 'import json, sys; json.dump({"requestId": "big", "fragment": {"Resources": {}}, "pad": "x" * (6 * 1024 * 1024 + 1000)}, open(sys.argv[1], "w"))' "$W/events/4.json"
cp "$BOOT" "$W/task/bootstrap"
LP=$(free_port)
python3 tests/integration/lambda_runtime_fake.py "$LP" "$W/events" "$W/posts" & FAKE=$!
for _ in $(seq 1 50); do curl -s -o /dev/null "http://127.0.0.1:$LP/" && break; sleep 0.1; done
(cd "$W/task" && AWS_LAMBDA_RUNTIME_API=127.0.0.1:$LP exec ./bootstrap) 2> "$W/boot.err" & BPID=$!
for _ in $(seq 1 100); do [ "$(wc -l < "$W/posts" 2> /dev/null || echo 0)" -ge 4 ] && break; sleep 0.1; done
kill "$BPID" "$FAKE" 2> /dev/null; wait "$BPID" "$FAKE" 2> /dev/null
WHY="$(head -c 600 "$W/posts" 2> /dev/null) $(head -c 300 "$W/boot.err")"
check lambda/three-answers bash -c "[ \"\$(jq -s '.[0:3] | map(.kind) == [\"response\", \"response\", \"response\"] and map(.id) == [\"req-1\", \"req-2\", \"req-3\"]' '$W/posts')\" = true ]"
check lambda/over-6mib-is-an-error bash -c "[ \"\$(jq -s '.[3].kind == \"error\" and .[3].id == \"req-4\" and (.[3].body.errorMessage | test(\"6 MiB\"))' '$W/posts')\" = true ]"
for k in 1 2 3; do
	ev=$W/events/$k.json
	"$D" macro --event "$ev" > "$W/direct.$k" 2> /dev/null
	jq -c --argjson k "$k" 'select(.id == "req-\($k)") | .body' "$W/posts" > "$W/loop.$k"
	WHY="$(diff <(jq -S . "$W/direct.$k") <(jq -S . "$W/loop.$k") | head -5)"
	check "lambda/answer-$k-as-macro-event" cmp -s <(jq -S . "$W/direct.$k") <(jq -S . "$W/loop.$k")
done
AWS_LAMBDA_RUNTIME_API=not-an-address "$BOOT" > /dev/null 2> "$W/bad.err"; rc=$?
WHY="exit $rc: $(cat "$W/bad.err")"; check lambda/bad-api-address bash -c "[ $rc = 2 ] && grep -q 'not a numeric HOST:PORT' '$W/bad.err'"
