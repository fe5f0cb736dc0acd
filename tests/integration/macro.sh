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
#   policy/*    the platform's settings in DIAGPORT_POLICY (the webhook's configuration format) or a file
#               named by DIAGPORT_POLICY_FILE: enforce: lowers captures, forces auth required and ptrace
#               false over params and over a task definition's Metadata.diagport, as `inject cfn
#               --policy` does (the same fragment); its defaults lie under params; each override is a
#               WARN line on stderr (the function's log); a bad, empty or doubly given policy fails
#               every event naming the variable, line and column; in the Runtime API loop too
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

# --- policy: the platform's settings (DIAGPORT_POLICY) win over params and Metadata.diagport
cat > "$W/policy.yaml" <<'YAML'
# the platform's settings, as the webhook's ConfigMap holds them
mode: suspend
excludedNamespaces: [kube-system]
enforce:
  auth: required
  ptrace: false
  captures: stacks,metrics,cpuprofile
YAML
POLICY=$(cat "$W/policy.yaml")
# a snippet whose params ask for more than the policy allows
event "$W/props.json" '{"auth":"none","ptrace":true,"captures":"all"}' p-1 > "$W/p1.event"
DIAGPORT_POLICY=$POLICY "$D" macro --event "$W/p1.event" > "$W/p1.out" 2> "$W/p1.err"; rc=$?
WHY="exit $rc: $(head -c 400 "$W/p1.out")"
check policy/snippet-success bash -c "[ $rc = 0 ] && jq -e '.status == \"success\"' '$W/p1.out' > /dev/null"
WHY="$(jq -c '.fragment.ContainerDefinitions | map({Name, Command, LinuxParameters, Environment})' "$W/p1.out" | head -c 600)"
check policy/snippet-enforced jq -e '.fragment.ContainerDefinitions as $c | ($c | map(select(.Name == "diagport-agent"))[0].Command) as $a |
	($a | index("--no-auth")) == null and ($a | index("http://+:52323")) == null and
	($a | index("--captures")) != null and $a[($a | index("--captures")) + 1] == "cpuprofile,metrics,stacks" and
	([$c[] | select(.Name != "diagport-agent") | (.LinuxParameters.Capabilities.Add // [])[] | select(. == "SYS_PTRACE")] | length) == 0 and
	($c[0].Environment | map(select(.Name == "DOTNET_DiagnosticPorts"))[0].Value | endswith("/diag/port,suspend,connect"))' "$W/p1.out"
# without the policy the same params get what they ask for (the check above bites)
"$D" macro --event "$W/p1.event" > "$W/p1-open.out" 2> /dev/null
WHY="$(jq -c '.fragment.ContainerDefinitions | map(select(.Name == "diagport-agent"))[0].Command' "$W/p1-open.out")"
check policy/without-it-params-win jq -e '(.fragment.ContainerDefinitions | map(select(.Name == "diagport-agent"))[0].Command | index("--no-auth")) != null' "$W/p1-open.out"
# the same fragment as inject cfn --policy with the same options as flags (inject --policy takes only the
# file's enforce:, its defaults being the command line's: --mode suspend stands for the file's mode)
"$D" inject cfn --all --policy "$W/policy.yaml" --mode suspend --no-auth --ptrace true --captures all -o json "$W/one.json" 2> /dev/null | jq -S .Resources.T.Properties > "$W/p1.cli"
WHY="$(diff "$W/p1.cli" <(jq -S .fragment "$W/p1.out") | head -5)"
check policy/as-inject-cfn-policy cmp -s "$W/p1.cli" <(jq -S .fragment "$W/p1.out")
# each override is a WARN line of the function's log naming the option and both values
WHY="$(head -c 600 "$W/p1.err")"
check policy/warnings-logged bash -c "[ \"\$(jq -s '[.[] | select(.level == \"WARN\" and .msg == \"macro warning\") | .warning] |
	(map(select(test(\"enforces auth=required, the workload asked for auth=none\"))) | length) == 1 and
	(map(select(test(\"enforces ptrace=false, the workload asked for ptrace=true\"))) | length) == 1 and
	(map(select(test(\"allows captures=cpuprofile,metrics,stacks, the workload asked for captures=all\"))) | length) == 1' '$W/p1.err')\" = true ]"
WHY="$(head -c 300 "$W/p1.err")"
check policy/loaded-logged bash -c "[ \"\$(jq -s 'map(select(.msg == \"macro policy loaded\" and .enforced == 3)) | length' '$W/p1.err')\" = 1 ]"
# a template whose task definitions ask in Metadata.diagport (auth none, ptrace, captures all)
jq '.Resources |= with_entries(if .value.Type == "AWS::ECS::TaskDefinition" then .value.Metadata.diagport += {auth: "none", ptrace: true, captures: "all"} else . end)' \
	tests/golden/cfn/all-json/input.json > "$W/asks.json"
event "$W/asks.json" '{"all":true}' p-2 > "$W/p2.event"
DIAGPORT_POLICY=$POLICY "$D" macro --event "$W/p2.event" > "$W/p2.out" 2> "$W/p2.err"; rc=$?
"$D" inject cfn --all --policy "$W/policy.yaml" --mode suspend -o json "$W/asks.json" 2> /dev/null | jq -S . > "$W/p2.cli"
WHY="exit $rc: $(head -c 300 "$W/p2.out") $(diff "$W/p2.cli" <(jq -S .fragment "$W/p2.out") | head -5)"
check policy/metadata-overridden-as-inject-cfn bash -c "[ $rc = 0 ] && cmp -s '$W/p2.cli' <(jq -S .fragment '$W/p2.out')"
WHY="$(jq -c '[.fragment.Resources[] | select(.Type == "AWS::ECS::TaskDefinition") | .Properties.ContainerDefinitions[] | select(.Name == "diagport-agent") | .Command]' "$W/p2.out" | head -c 500)"
check policy/metadata-overridden jq -e '[.fragment.Resources[] | select(.Type == "AWS::ECS::TaskDefinition") | .Properties.ContainerDefinitions[]] as $c |
	($c | map(select(.Name == "diagport-agent")) | length) > 0 and
	($c | map(select(.Name == "diagport-agent") | .Command | (index("--no-auth") == null and index("cpuprofile,metrics,stacks") != null)) | all) and
	([$c[] | (.LinuxParameters.Capabilities.Add // [])[] | select(. == "SYS_PTRACE")] | length) == 0' "$W/p2.out"
WHY="$(head -c 400 "$W/p2.err")"
check policy/metadata-warnings bash -c "[ \"\$(jq -s '[.[] | select(.level == \"WARN\") | .warning | select(test(\"auth=required, the workload asked for auth=none\"))] | length > 0' '$W/p2.err')\" = true ]"
# the policy's defaults lie under params: params.mode wins over the policy's mode: suspend
event "$W/props.json" '{"mode":"nosuspend"}' p-3 > "$W/p3.event"
DIAGPORT_POLICY=$POLICY "$D" macro --event "$W/p3.event" > "$W/p3.out" 2> /dev/null
WHY="$(jq -c '.fragment.ContainerDefinitions[0].Environment' "$W/p3.out")"
check policy/params-over-defaults jq -e '.fragment.ContainerDefinitions[0].Environment | map(select(.Name == "DOTNET_DiagnosticPorts"))[0].Value | endswith("/diag/port,nosuspend,connect")' "$W/p3.out"
# JSON in the variable, and a file shipped with the function (DIAGPORT_POLICY_FILE)
DIAGPORT_POLICY='{"enforce": {"auth": "required", "ptrace": false, "captures": "stacks,metrics,cpuprofile"}, "mode": "suspend"}' \
	"$D" macro --event "$W/p1.event" 2> /dev/null | jq -S .fragment > "$W/p1-json.frag"
WHY="$(diff <(jq -S .fragment "$W/p1.out") "$W/p1-json.frag" | head -5)"
check policy/json-document cmp -s <(jq -S .fragment "$W/p1.out") "$W/p1-json.frag"
DIAGPORT_POLICY_FILE=$W/policy.yaml "$D" macro --event "$W/p1.event" 2> /dev/null | jq -S .fragment > "$W/p1-file.frag"
WHY="$(diff <(jq -S .fragment "$W/p1.out") "$W/p1-file.frag" | head -5)"
check policy/file cmp -s <(jq -S .fragment "$W/p1.out") "$W/p1-file.frag"
# a bad policy fails every event, naming the variable, the line and the column; never unenforced
policy_fail() {
	local name=$1 want=$2 rc
	shift 2
	env "$@" "$D" macro --event "$W/p3.event" > "$W/pf.out" 2> "$W/pf.err"; rc=$?
	WHY="exit $rc: $(head -c 400 "$W/pf.out") $(head -c 200 "$W/pf.err")"
	WANT=$want check "policy/$name" bash -c "[ $rc = 1 ] && jq -e '.requestId == \"p-3\" and .status == \"failure\" and (.errorMessage | contains(\"platform policy (DIAGPORT_POLICY)\") and contains(env.WANT)) and (has(\"fragment\") | not)' '$W/pf.out' > /dev/null && grep -q '\"level\":\"ERROR\"' '$W/pf.err'"
}
policy_fail bad-value "DIAGPORT_POLICY:3:9: option auth: 'maybe' is not required or none" DIAGPORT_POLICY=$'mode: suspend\nenforce:\n  auth: maybe\n'
policy_fail unknown-setting "DIAGPORT_POLICY:2:3: unknown setting 'enforce.colour'" DIAGPORT_POLICY=$'enforce:\n  colour: red\n'
policy_fail not-enforceable "option containers cannot be enforced" DIAGPORT_POLICY=$'enforce:\n  containers: app\n'
policy_fail yaml-syntax "DIAGPORT_POLICY" DIAGPORT_POLICY=$'enforce: [auth\n'
policy_fail empty "DIAGPORT_POLICY is set but empty" DIAGPORT_POLICY=' '
policy_fail both "DIAGPORT_POLICY and DIAGPORT_POLICY_FILE are both set" DIAGPORT_POLICY="$POLICY" DIAGPORT_POLICY_FILE="$W/policy.yaml"
policy_fail missing-file "DIAGPORT_POLICY_FILE: cannot open $W/nope.yaml" DIAGPORT_POLICY_FILE="$W/nope.yaml"

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
python3 tests/integration/lambda_runtime_fake.py 0 "$W/events" "$W/posts" > "$W/fake.out" & FAKE=$!
LP=$(logged_port "$W/fake.out" "LISTENING 127.0.0.1:" 10 "$FAKE") || { fail lambda/start "the Runtime API stand-in did not start"; exit 0; }
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

# --- the policy in the Runtime API loop: read once at cold start; a good one enforced with its warnings in
# the function's log, a bad one the failure of every event (one ERROR line, at cold start)
# serve NAME N EVENT... (env DIAGPORT_POLICY as given): the bootstrap answers N events; posts in $W/NAME.posts
serve() {
	local name=$1 n=$2 lp fake boot k=0
	shift 2
	mkdir -p "$W/$name.events"
	for ev in "$@"; do k=$((k + 1)); cp "$ev" "$W/$name.events/$k.json"; done
	python3 tests/integration/lambda_runtime_fake.py 0 "$W/$name.events" "$W/$name.posts" > "$W/$name.fake" & fake=$!
	lp=$(logged_port "$W/$name.fake" "LISTENING 127.0.0.1:" 10 "$fake") || { fail "$name/start" "the Runtime API stand-in did not start"; exit 0; }
	(cd "$W/task" && AWS_LAMBDA_RUNTIME_API=127.0.0.1:$lp exec ./bootstrap) 2> "$W/$name.err" & boot=$!
	for _ in $(seq 1 100); do [ "$(wc -l < "$W/$name.posts" 2> /dev/null || echo 0)" -ge "$n" ] && break; sleep 0.1; done
	kill "$boot" "$fake" 2> /dev/null; wait "$boot" "$fake" 2> /dev/null
}
DIAGPORT_POLICY=$POLICY serve good 1 "$W/p1.event"
WHY="$(head -c 400 "$W/good.posts" 2> /dev/null) $(diff <(jq -S .fragment "$W/p1.out") <(jq -S '.body.fragment' "$W/good.posts" 2> /dev/null) | head -5)"
check lambda/policy-enforced bash -c "jq -e '.kind == \"response\" and .body.status == \"success\"' '$W/good.posts' > /dev/null && cmp -s <(jq -S .fragment '$W/p1.out') <(jq -S .body.fragment '$W/good.posts')"
WHY="$(head -c 600 "$W/good.err")"
check lambda/policy-warnings-logged bash -c "[ \"\$(jq -s '[.[] | select(.level == \"WARN\" and (.warning | test(\"enforces auth=required\")))] | length' '$W/good.err')\" = 1 ]"
DIAGPORT_POLICY=$'enforce:\n  auth: maybe\n' serve bad 2 "$W/p1.event" "$W/snip.event"
WHY="$(head -c 600 "$W/bad.posts" 2> /dev/null)"
check lambda/bad-policy-fails-every-event bash -c "[ \"\$(jq -s 'length == 2 and map(.kind == \"response\" and .body.status == \"failure\" and (.body.errorMessage | test(\"DIAGPORT_POLICY:2:9: option auth\")) and (.body | has(\"fragment\") | not)) == [true, true]' '$W/bad.posts')\" = true ]"
WHY="$(head -c 600 "$W/bad.err")"
check lambda/bad-policy-logged-once bash -c "[ \"\$(jq -s 'map(select(.level == \"ERROR\" and .msg == \"macro policy refused: every template fails until it is fixed\")) | length' '$W/bad.err')\" = 1 ]"
