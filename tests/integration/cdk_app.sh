#!/usr/bin/env bash
# cdk_app.sh - the example Fargate app (cdk/examples/fargate-api), synthesized
# offline by the real AWS CDK CLI (cdk/node_modules/.bin/cdk; no credentials,
# no network), and checked:
#   synth            `cdk synth` with DiagportAspect and cdk-nag exits 0 (a nag
#                    finding that is neither fixed nor acknowledged fails it);
#   synth-without    `cdk synth -c diagport=off` (the same app, no Aspect);
#   one-set-of-rules `diagport inject cfn` of the app without the Aspect equals
#                    the app with it: every task definition identical, and
#                    every other resource too but the execution role's policy,
#                    which differs by the grant to read the agent's token only;
#   loads            the synthesized template loads with CfnInclude;
#   agent            the task definition has the agent, with the token, logging
#                    where the API logs;
#   load-balancers   a public ALB on 80 in front of api:8080, an internal ALB
#                    on 52323 in front of diagport-agent:52323, health /healthz;
#   nag-template     cdk-nag's AWS Solutions checks over the synthesized
#                    template (CfnInclude: there the Aspect's additions are
#                    visible, which they are not to the checks of the app): it
#                    sees diagport's addition (ECS2), no container without
#                    logs (ECS7), and each finding is acknowledged, with a
#                    reason, in the template's own Metadata.cdk_nag;
#   agent-starts     the agent container's command, as synthesized (paths and
#                    port moved into a scratch directory), starts with the
#                    token from its secret's environment variable: /healthz
#                    answers without it, /processes 401 without it, 200 with;
#   api-builds       the example's .NET API builds with the SDK, offline;
#   image-asset      the API's Docker context is staged as an image asset.
# Prints PASS/FAIL lines; a check that cannot run says why.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
diagport=${DIAGPORT:-$root/diagport}
ex=$root/cdk/examples/fargate-api
cdk=$root/cdk/node_modules/.bin/cdk
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

T_NAME=cdk_app
. "$root/tests/lib.sh"

# Offline and credential-free: the CLI finds no account and no region of its own.
synth() { # OUTDIR LOG [cdk args...]
	local out=$1 log=$2
	shift 2
	(cd "$ex" && env -u AWS_PROFILE -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_SESSION_TOKEN \
		-u AWS_REGION -u AWS_DEFAULT_REGION AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null \
		AWS_EC2_METADATA_DISABLED=true CDK_DISABLE_VERSION_CHECK=1 \
		timeout 300 "$cdk" synth --no-notices --no-version-reporting -q --output "$out" "$@" \
		>"$log" 2>&1 </dev/null)
}

A=$tmp/with/DiagportFargateApi.template.json
T=$tmp/without/DiagportFargateApi.template.json
if [ ! -x "$cdk" ] || [ ! -f "$ex/build/app.js" ]; then
	fail synth "the CDK CLI or the compiled example is missing (make cdk)"
	exit 1
fi
if synth "$tmp/with" "$tmp/with.log" && [ -s "$A" ]; then
	if grep -q "AwsSolutions" "$tmp/with.log"; then
		fail synth "cdk synth printed cdk-nag findings" "$tmp/with.log"
	else
		pass synth
	fi
else
	fail synth "cdk synth failed" "$tmp/with.log"
	exit 1
fi
if synth "$tmp/without" "$tmp/without.log" -c diagport=off && [ -s "$T" ]; then
	pass synth-without
else
	fail synth-without "cdk synth -c diagport=off failed" "$tmp/without.log"
	exit 1
fi

# The CLI has no token reference to give: a placeholder stands in for the secret's ARN, replaced
# by the Ref the CDK writes (Ref of an AWS::SecretsManager::Secret is its ARN).
placeholder=arn:aws:secretsmanager:placeholder
if timeout 60 "$diagport" inject cfn --all --port 52323 --auth-secret "$placeholder" -f "$T" \
	>"$tmp/cli.json" 2>"$tmp/cli.err" </dev/null; then
	if /usr/bin/python3 - "$A" "$tmp/cli.json" "$placeholder" >"$tmp/eq.log" 2>&1 <<'EOF'; then
import json, sys
a = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
ph = sys.argv[3]
secrets = [k for k, r in a["Resources"].items() if r["Type"] == "AWS::SecretsManager::Secret"]
if len(secrets) != 1:
    sys.exit("expected one secret, found %d" % len(secrets))
ref = {"Ref": secrets[0]}
def sub(v):
    if v == ph:
        return ref
    if isinstance(v, dict):
        return {k: sub(x) for k, x in v.items()}
    if isinstance(v, list):
        return [sub(x) for x in v]
    return v
c = sub(c)
ra, rc = a["Resources"], c["Resources"]
if sorted(ra) != sorted(rc):
    sys.exit("resources differ: only with the Aspect %s, only from the CLI %s"
             % (sorted(set(ra) - set(rc)), sorted(set(rc) - set(ra))))
tds = [k for k in ra if ra[k]["Type"] == "AWS::ECS::TaskDefinition"]
if not tds:
    sys.exit("no task definition")
for k in tds:
    if ra[k] != rc[k]:
        sys.exit("task definition %s differs:\n aspect %s\n cli    %s"
                 % (k, json.dumps(ra[k], sort_keys=True), json.dumps(rc[k], sort_keys=True)))
others = [k for k in ra if k not in tds and ra[k] != rc[k]]
if len(others) != 1 or ra[others[0]]["Type"] != "AWS::IAM::Policy":
    sys.exit("other resources differ: %s" % others)
sa = ra[others[0]]["Properties"]["PolicyDocument"]["Statement"]
sc = rc[others[0]]["Properties"]["PolicyDocument"]["Statement"]
extra = [s for s in sa if s not in sc]
if [s for s in sc if s not in sa] or len(extra) != 1 or extra[0].get("Resource") != ref \
        or "secretsmanager:GetSecretValue" not in extra[0].get("Action", []):
    sys.exit("policy %s differs by more than the grant: %s" % (others[0], extra))
print("%d task definition(s) equal; %d resources" % (len(tds), len(ra)))
EOF
		pass one-set-of-rules
	else
		fail one-set-of-rules "$(tail -n 3 "$tmp/eq.log" | tr '\n' ' ' | head -c 1500)"
	fi
else
	fail one-set-of-rules "diagport inject cfn failed: $(head -c 300 "$tmp/cli.err")"
fi

if (cd "$root/tests/validate" && timeout 300 node cfn-load.mjs "$A") >"$tmp/load.log" 2>&1 </dev/null; then
	pass loads
else
	fail loads "CfnInclude rejected the synthesized template" "$tmp/load.log"
fi

if /usr/bin/python3 - "$A" >"$tmp/shape.log" 2>&1 <<'EOF'; then
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
def one(t):
    ks = [k for k, r in R.items() if r["Type"] == t]
    return ks
td = R[one("AWS::ECS::TaskDefinition")[0]]["Properties"]
ctrs = {c["Name"]: c for c in td["ContainerDefinitions"]}
api, agent = ctrs["api"], ctrs["diagport-agent"]
assert {"Name": "DOTNET_DiagnosticPorts", "Value": "/diag/port,nosuspend,connect"} in api["Environment"], api
assert "SYS_PTRACE" not in json.dumps(api), api  # ptrace is off by default
assert agent["Secrets"][0]["Name"] == "DIAGPORT_AUTH_TOKEN" and agent["Secrets"][0]["ValueFrom"] == {"Ref": one("AWS::SecretsManager::Secret")[0]}, agent
assert "http://+:52323" in agent["Command"], agent["Command"]
assert agent["LogConfiguration"] == api["LogConfiguration"], (agent.get("LogConfiguration"), api["LogConfiguration"])
assert agent["User"] == api["User"] == "1654:1654", (agent["User"], api["User"])
print("ok")
EOF
	pass agent
else
	fail agent "the task definition is not as expected" "$tmp/shape.log"
fi

if /usr/bin/python3 - "$A" >"$tmp/lb.log" 2>&1 <<'EOF'; then
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
svc = [r for r in R.values() if r["Type"] == "AWS::ECS::Service"]
assert len(svc) == 1, "one service"
lbs = {(l["ContainerName"], l["ContainerPort"]): l["TargetGroupArn"]["Ref"] for l in svc[0]["Properties"]["LoadBalancers"]}
assert set(lbs) == {("api", 8080), ("diagport-agent", 52323)}, lbs
def listener_of(tg):
    for k, r in R.items():
        if r["Type"] == "AWS::ElasticLoadBalancingV2::Listener" and \
                r["Properties"]["DefaultActions"][0].get("TargetGroupArn") == {"Ref": tg}:
            return r["Properties"]
    raise AssertionError("no listener for " + tg)
for (ctr, port), tg, lport, scheme in [(("api", 8080), lbs[("api", 8080)], 80, "internet-facing"),
                                        (("diagport-agent", 52323), lbs[("diagport-agent", 52323)], 52323, "internal")]:
    l = listener_of(tg)
    assert l["Port"] == lport, (ctr, l["Port"])
    alb = R[l["LoadBalancerArn"]["Ref"]]["Properties"]
    assert alb["Scheme"] == scheme, (ctr, alb["Scheme"])
    t = R[tg]["Properties"]
    assert t["Port"] == port and t["TargetType"] == "ip" and t["HealthCheckPath"] == "/healthz", (ctr, t)
print("ok")
EOF
	pass load-balancers
else
	fail load-balancers "the load balancers are not as expected" "$tmp/lb.log"
fi

if (cd "$root/cdk" && timeout 300 node tools/nag-template.js "$A") >"$tmp/nag.jsonl" 2>"$tmp/nag.err" </dev/null; then
	if /usr/bin/python3 - "$A" "$tmp/nag.jsonl" >"$tmp/nag.log" 2>&1 <<'EOF'; then
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
findings = [json.loads(l) for l in open(sys.argv[2]) if l.strip()]
bad = []
for f in findings:
    acks = ((R.get(f["resource"]) or {}).get("Metadata") or {}).get("cdk_nag", {}).get("rules_to_suppress", [])
    if not any(a.get("id") == f["rule"] and a.get("reason", "").strip() for a in acks):
        bad.append(f)
tds = {k for k, r in R.items() if r["Type"] == "AWS::ECS::TaskDefinition"}
rules_on_td = {f["rule"] for f in findings if f["resource"] in tds}
if "AwsSolutions-ECS2" not in rules_on_td:
    sys.exit("cdk-nag did not see diagport's environment variable (ECS2): does it see the template at all? %s" % findings)
if "AwsSolutions-ECS7" in rules_on_td:
    sys.exit("a container without logging (ECS7)")
if bad:
    sys.exit("findings without a reason in Metadata.cdk_nag: %s" % bad)
print("%d findings, each acknowledged with a reason" % len(findings))
EOF
		pass nag-template
	else
		fail nag-template "$(tail -n 3 "$tmp/nag.log" | tr '\n' ' ' | head -c 1500)"
	fi
else
	fail nag-template "nag-template.js failed" "$tmp/nag.err"
fi

# The agent's command line from the template, its fixed paths and port moved to the scratch
# directory; the secret becomes the environment variable ECS sets from it.
port=$(free_port)
mkdir -p "$tmp/diag" "$tmp/dumps"
if /usr/bin/python3 - "$A" "$tmp" "$port" >"$tmp/agent.argv" 2>"$tmp/argv.err" <<'EOF'; then
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
td = [r for r in R.values() if r["Type"] == "AWS::ECS::TaskDefinition"][0]["Properties"]
a = [c for c in td["ContainerDefinitions"] if c["Name"] == "diagport-agent"][0]
assert a["EntryPoint"] == ["/diagport"], a["EntryPoint"]
assert [s["Name"] for s in a["Secrets"]] == ["DIAGPORT_AUTH_TOKEN"], a["Secrets"]
moved = {"/diag/port": sys.argv[2] + "/diag/port", "/dumps": sys.argv[2] + "/dumps",
         "http://+:52323": "http://127.0.0.1:" + sys.argv[3]}
for w in a["Command"]:
    print(moved.get(w, w))
EOF
	mapfile -t argv <"$tmp/agent.argv"
	DIAGPORT_AUTH_TOKEN=s3cret-token-0123456789 "$diagport" "${argv[@]}" >"$tmp/agent.out" 2>"$tmp/agent.log" </dev/null &
	agent=$!
	u=http://127.0.0.1:$port
	for _ in $(seq 1 100); do
		curl -s -o /dev/null "$u/healthz" && break
		sleep 0.1
	done
	h=$(curl -s -o /dev/null -w '%{http_code}' "$u/healthz")
	n=$(curl -s -o /dev/null -w '%{http_code}' "$u/processes")
	y=$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer s3cret-token-0123456789' "$u/processes")
	kill "$agent" 2>/dev/null
	wait "$agent" 2>/dev/null
	if [ "$h" = 200 ] && [ "$n" = 401 ] && [ "$y" = 200 ]; then
		pass agent-starts
	else
		fail agent-starts "healthz $h, processes without the token $n, with it $y (want 200 401 200); argv: $(tr '\n' ' ' <"$tmp/agent.argv")" "$tmp/agent.log"
	fi
else
	fail agent-starts "no agent command in the template" "$tmp/argv.err"
fi

cp -r "$ex/api" "$tmp/api"
rm -rf "$tmp/api/bin" "$tmp/api/obj"
if (cd "$tmp/api" && DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 timeout 300 dotnet build -nologo -v q) \
	>"$tmp/api.log" 2>&1 </dev/null && [ -f "$tmp/api/bin/Debug/net10.0/Api.dll" ]; then
	pass api-builds
else
	fail api-builds "dotnet build of the example API failed" "$tmp/api.log"
fi

if /usr/bin/python3 - "$tmp/with" >"$tmp/asset.log" 2>&1 <<'EOF'; then
import json, os, sys
d = sys.argv[1]
assets = json.load(open(os.path.join(d, "DiagportFargateApi.assets.json")))
imgs = assets.get("dockerImages", {})
assert len(imgs) == 1, imgs
src = list(imgs.values())[0]["source"]["directory"]
for f in ("Dockerfile", "Program.cs", "Api.csproj"):
    assert os.path.isfile(os.path.join(d, src, f)), f
print("ok")
EOF
	pass image-asset
else
	fail image-asset "the API's image asset is not staged" "$tmp/asset.log"
fi
