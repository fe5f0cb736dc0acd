#!/usr/bin/env bash
# cdk.sh - diagport on what a real AWS CDK app synthesizes. Synthesizes
# tests/validate/cdk-synth-app.mjs (a Fargate and an EC2 task definition, with
# the roles, policy and log group the CDK adds) to T.json, then checks that
# `diagport inject cfn --all -f T.json`:
#   inject      exits 0;
#   loads       gives a template the CDK's CfnInclude loads and synthesizes;
#   agent       puts a container named diagport-agent in every task definition;
#   idempotent  gives itself again when injected again;
#   uninject    uninjects to what uninject of T.json gives;
#   preserve    keeps every value of T.json (DOTNET_DiagnosticPorts aside).
# Prints PASS/FAIL lines; a check that cannot run says why.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
v=$root/tests/validate
diagport=${DIAGPORT:-$root/diagport}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

T_NAME=cdk
. "$root/tests/lib.sh"
first_lines() { head -c 300 "$1" | tr '\n' ' '; }
dp() { timeout 60 "$diagport" "$@" </dev/null; }

# Synthesis: without it nothing else can run.
if timeout 300 node "$v/cdk-synth-app.mjs" "$tmp/T.json" >"$tmp/synth.log" 2>&1 </dev/null &&
	[ -s "$tmp/T.json" ]; then
	pass synth
else
	fail synth "cdk-synth-app.mjs failed" "$tmp/synth.log"
	for c in inject loads agent idempotent uninject preserve; do
		fail "$c" "no synthesized template to inject (synth failed)"
	done
	exit 1
fi

if [ ! -x "$diagport" ]; then
	why="$diagport is not built"
elif dp inject cfn --all -f "$tmp/T.json" >"$tmp/out" 2>"$tmp/err"; then
	why=
	pass inject
else
	rc=$?
	why="inject failed (exit $rc)"
	fail inject "exit $rc: $(first_lines "$tmp/err")"
fi
if [ -n "$why" ]; then
	[ ! -x "$diagport" ] && fail inject "$why"
	for c in loads agent idempotent uninject preserve; do
		fail "$c" "no injected template to check ($why)"
	done
	exit 1
fi

if timeout 300 node "$v/cfn-load.mjs" "$tmp/out" >"$tmp/load.log" 2>&1 </dev/null; then
	pass loads
else
	fail loads "cfn-load.mjs rejected the injected template" "$tmp/load.log"
fi

# Every AWS::ECS::TaskDefinition must have a diagport-agent container.
if /usr/bin/python3 - "$v" "$tmp/out" >"$tmp/agent.log" 2>&1 <<'EOF'; then
import sys
sys.path.insert(0, sys.argv[1])
import preserve
docs, _ = preserve.load(sys.argv[2])
if len(docs) != 1 or not isinstance(docs[0], dict):
    sys.exit("not one template")
tds = {k: r for k, r in (docs[0].get("Resources") or {}).items()
       if isinstance(r, dict) and r.get("Type") == "AWS::ECS::TaskDefinition"}
if len(tds) < 2:
    sys.exit("expected 2 task definitions, found %d" % len(tds))
bad = []
for k, r in tds.items():
    cds = (r.get("Properties") or {}).get("ContainerDefinitions")
    if not isinstance(cds, list) or not any(
            isinstance(c, dict) and c.get("Name") == "diagport-agent" for c in cds):
        bad.append(k)
if bad:
    sys.exit("no diagport-agent container in " + ", ".join(bad))
EOF
	pass agent
else
	fail agent "$(first_lines "$tmp/agent.log")"
fi

if ! dp inject cfn --all -f "$tmp/out" >"$tmp/out2" 2>"$tmp/err2"; then
	fail idempotent "inject of the output failed: $(first_lines "$tmp/err2")"
elif cmp -s "$tmp/out" "$tmp/out2"; then
	pass idempotent
else
	diff -u --label output --label "inject of output" "$tmp/out" "$tmp/out2" >"$tmp/diff"
	fail idempotent "inject of the output changed it" "$tmp/diff"
fi

if ! dp uninject cfn -f "$tmp/out" >"$tmp/un-out" 2>"$tmp/err3"; then
	fail uninject "uninject of the output failed: $(first_lines "$tmp/err3")"
elif ! dp uninject cfn -f "$tmp/T.json" >"$tmp/un-T" 2>"$tmp/err4"; then
	fail uninject "uninject of T.json failed: $(first_lines "$tmp/err4")"
elif cmp -s "$tmp/un-T" "$tmp/un-out"; then
	pass uninject
else
	diff -u --label "uninject of T.json" --label "uninject of output" "$tmp/un-T" "$tmp/un-out" >"$tmp/diff2"
	fail uninject "uninject of the output differs from uninject of T.json" "$tmp/diff2"
fi

if /usr/bin/python3 "$v/preserve.py" "$tmp/T.json" "$tmp/out" \
	--allow-change DOTNET_DiagnosticPorts >"$tmp/pres.log" 2>&1; then
	pass preserve
else
	fail preserve "$(first_lines "$tmp/pres.log")"
fi

