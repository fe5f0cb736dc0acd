#!/usr/bin/env bash
# cdk_app.sh - the example Fargate app (cdk/examples/fargate-api), synthesized
# offline by the real AWS CDK CLI (cdk/node_modules/.bin/cdk; no credentials,
# no network; `make cdk` first, for the compiled example), and checked. The
# agents' path is HTTPS end to end unless `-c agentTls=off`; its inputs are
# stand-in ARNs here (a certificate cannot be made offline), in eu-west-1:
#   refuses          `cdk synth` without the TLS inputs fails, naming
#                    agentCertificateArn, agentTlsSecretArn and agentTls=off;
#                    with a certificate of another region and a secret's
#                    partial ARN it fails naming both; with agentTls=off and a
#                    certificate together it fails;
#   synth            `cdk synth` with the TLS inputs, DiagportAspect and cdk-nag
#                    exits 0 (a nag finding that is neither fixed nor
#                    acknowledged fails it);
#   synth-without    the same with `-c diagport=off` (the same app, no Aspect);
#   synth-clear      `cdk synth -c agentTls=off` exits 0, cdk-nag clean, with a
#                    warning that the token and captures cross the VPC in clear;
#   one-set-of-rules `diagport inject cfn --tls-secret ...` of the app without
#                    the Aspect equals the app with it: every task definition
#                    identical, and every other resource too but the execution
#                    role's policy, which differs by the grants to read the
#                    agent's token and its TLS secret only;
#   loads, loads-clear
#                    each synthesized template loads with CfnInclude;
#   agent            the task definition has the agent, with the token and the
#                    PEM (DIAGPORT_TLS_PEM), serving https://+:52323, logging
#                    where the API logs; agent-clear: http://, no PEM;
#   load-balancers   a public ALB on 80 in front of api:8080, an internal ALB
#                    on 52323 in front of diagport-agent:52323, health /healthz;
#                    the internal listener HTTPS with the certificate and a TLS
#                    1.2+ policy, its target group and health check HTTPS;
#                    load-balancers-clear: HTTP throughout, no certificate;
#   grant            the execution role may read the TLS secret (its ARN
#                    exactly) and decrypt with its KMS key through Secrets
#                    Manager only;
#   nag-template, nag-template-clear
#                    cdk-nag's AWS Solutions checks over each synthesized
#                    template (CfnInclude: there the Aspect's additions are
#                    visible, which they are not to the checks of the app): it
#                    sees diagport's addition (ECS2), no container without
#                    logs (ECS7), and each finding is acknowledged, with a
#                    reason, in the template's own Metadata.cdk_nag;
#   agent-starts     the agent container's command of the clear-text template
#                    (paths and port moved into a scratch directory), starts with
#                    the token from its secret's environment variable: /healthz
#                    answers without it, /processes 401 without it, 200 with;
#   agent-starts-tls the same from the HTTPS template, its PEM secret as ECS sets it: /processes over https
#                    verified with the certificate's CA, the PEM gone from the agent's environment;
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
C=$tmp/clear/DiagportFargateApi.template.json
CERT=arn:aws:acm:eu-west-1:111122223333:certificate/0b5e1c2d-3f4a-4b6c-8d9e-0f1a2b3c4d5e
PEM=arn:aws:secretsmanager:eu-west-1:111122223333:secret:diagport-agent-tls-MnOpQr
KEY=arn:aws:kms:eu-west-1:111122223333:key/1234abcd-12ab-34cd-56ef-1234567890ab
tls=(-c region=eu-west-1 -c "agentCertificateArn=$CERT" -c "agentTlsSecretArn=$PEM" -c "agentTlsSecretKeyArn=$KEY")
if [ ! -x "$cdk" ] || [ ! -f "$ex/build/app.js" ]; then
	fail synth "the CDK CLI or the compiled example is missing (make cdk)"
	exit 1
fi

# refused: synth fails (exit status), its output naming each of the words after the arguments
refused() { # NAME WORDS... -- CDK ARGS...
	local name=$1 words=() w
	shift
	while [ "$1" != -- ]; do
		words+=("$1")
		shift
	done
	shift
	if synth "$tmp/$name" "$tmp/$name.log" -c region=eu-west-1 "$@"; then
		echo "cdk synth $* succeeded"
		return 1
	fi
	for w in "${words[@]}"; do
		grep -qF -- "$w" "$tmp/$name.log" || { echo "no \"$w\" in: $(head -c 600 "$tmp/$name.log")"; return 1; }
	done
}
if ! why=$(refused none "agentCertificateArn=" "agentTlsSecretArn=" "agentTls=off" --); then
	fail refuses "without the TLS inputs: $why"
elif ! why=$(refused bad "a certificate of us-east-1" "not the complete ARN of a secret" -- \
	-c agentCertificateArn=arn:aws:acm:us-east-1:111122223333:certificate/0b5e1c2d \
	-c agentTlsSecretArn=arn:aws:secretsmanager:eu-west-1:111122223333:secret:diagport-agent-tls); then
	fail refuses "with a certificate of another region and a partial secret ARN: $why"
elif ! why=$(refused both "agentTls=off (clear text) and agentCertificateArn" -- -c agentTls=off -c "agentCertificateArn=$CERT"); then
	fail refuses "with agentTls=off and a certificate: $why"
else
	pass refuses
fi

if synth "$tmp/with" "$tmp/with.log" "${tls[@]}" && [ -s "$A" ]; then
	if grep -q "AwsSolutions" "$tmp/with.log"; then
		fail synth "cdk synth printed cdk-nag findings" "$tmp/with.log"
	else
		pass synth
	fi
else
	fail synth "cdk synth with the TLS inputs failed" "$tmp/with.log"
	exit 1
fi
if synth "$tmp/without" "$tmp/without.log" "${tls[@]}" -c diagport=off && [ -s "$T" ]; then
	pass synth-without
else
	fail synth-without "cdk synth -c diagport=off failed" "$tmp/without.log"
	exit 1
fi
if synth "$tmp/clear" "$tmp/clear.log" -c region=eu-west-1 -c agentTls=off && [ -s "$C" ]; then
	if grep -q "AwsSolutions" "$tmp/clear.log"; then
		fail synth-clear "cdk synth -c agentTls=off printed cdk-nag findings" "$tmp/clear.log"
	elif ! grep -q "WARNING.*agentTls=off.*clear text" "$tmp/clear.log"; then
		fail synth-clear "cdk synth -c agentTls=off gave no warning of clear text" "$tmp/clear.log"
	else
		pass synth-clear
	fi
else
	fail synth-clear "cdk synth -c agentTls=off failed" "$tmp/clear.log"
	exit 1
fi

# The CLI has no token reference to give: a placeholder stands in for the secret's ARN, replaced
# by the Ref the CDK writes (Ref of an AWS::SecretsManager::Secret is its ARN). The TLS secret is
# an ARN already, the same on both sides.
placeholder=arn:aws:secretsmanager:placeholder
if timeout 60 "$diagport" inject cfn --all --port 52323 --auth-secret "$placeholder" --tls-secret "$PEM" -f "$T" \
	>"$tmp/cli.json" 2>"$tmp/cli.err" </dev/null; then
	if /usr/bin/python3 - "$A" "$tmp/cli.json" "$placeholder" "$PEM" >"$tmp/eq.log" 2>&1 <<'EOF'; then
import json, sys
a = json.load(open(sys.argv[1]))
c = json.load(open(sys.argv[2]))
ph, pem = sys.argv[3], sys.argv[4]
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
if [s for s in sc if s not in sa] or sorted(json.dumps(s.get("Resource")) for s in extra) != sorted(map(json.dumps, [ref, pem])) \
        or any("secretsmanager:GetSecretValue" not in s.get("Action", []) for s in extra):
    sys.exit("policy %s differs by more than the grants on the token and the TLS secret: %s" % (others[0], extra))
print("%d task definition(s) equal; %d resources" % (len(tds), len(ra)))
EOF
		pass one-set-of-rules
	else
		fail one-set-of-rules "$(tail -n 3 "$tmp/eq.log" | tr '\n' ' ' | head -c 1500)"
	fi
else
	fail one-set-of-rules "diagport inject cfn failed: $(head -c 300 "$tmp/cli.err")"
fi

for v in "loads $A" "loads-clear $C"; do
	set -- $v
	if (cd "$root/tests/validate" && timeout 300 node cfn-load.mjs "$2") >"$tmp/$1.log" 2>&1 </dev/null; then
		pass "$1"
	else
		fail "$1" "CfnInclude rejected the synthesized template $(basename "$(dirname "$2")")" "$tmp/$1.log"
	fi
done

# agent TEMPLATE PEM: the agent as injected, with the TLS secret PEM (https) or none ("": http)
agent_shape() {
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
pem = sys.argv[2]
def one(t):
    ks = [k for k, r in R.items() if r["Type"] == t]
    return ks
td = R[one("AWS::ECS::TaskDefinition")[0]]["Properties"]
ctrs = {c["Name"]: c for c in td["ContainerDefinitions"]}
api, agent = ctrs["api"], ctrs["diagport-agent"]
assert {"Name": "DOTNET_DiagnosticPorts", "Value": "/diag/port,nosuspend,connect"} in api["Environment"], api
assert "SYS_PTRACE" not in json.dumps(api), api  # ptrace is off by default
want = [{"Name": "DIAGPORT_AUTH_TOKEN", "ValueFrom": {"Ref": one("AWS::SecretsManager::Secret")[0]}}]
if pem:
    want.append({"Name": "DIAGPORT_TLS_PEM", "ValueFrom": pem})
assert agent["Secrets"] == want, agent["Secrets"]
urls = agent["Command"][agent["Command"].index("--urls") + 1]
assert urls == ("https" if pem else "http") + "://+:52323", agent["Command"]
assert agent["LogConfiguration"] == api["LogConfiguration"], (agent.get("LogConfiguration"), api["LogConfiguration"])
assert agent["User"] == api["User"] == "1654:1654", (agent["User"], api["User"])
print("ok")
EOF
}
if agent_shape "$A" "$PEM" >"$tmp/shape.log" 2>&1; then
	pass agent
else
	fail agent "the task definition is not as expected" "$tmp/shape.log"
fi
if agent_shape "$C" "" >"$tmp/shape-clear.log" 2>&1; then
	pass agent-clear
else
	fail agent-clear "the task definition (agentTls=off) is not as expected" "$tmp/shape-clear.log"
fi

# load_balancers TEMPLATE CERT: the internal listener HTTPS with CERT, or HTTP ("")
load_balancers() {
	/usr/bin/python3 - "$1" "$2" <<'EOF'
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
cert = sys.argv[2]
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
    if ctr == "api":
        assert l["Protocol"] == "HTTP" and t["Protocol"] == "HTTP", (ctr, l, t)
    elif cert:
        assert l["Protocol"] == "HTTPS" and l["Certificates"] == [{"CertificateArn": cert}], (ctr, l)
        assert l["SslPolicy"].startswith("ELBSecurityPolicy-TLS13-1-2"), (ctr, l["SslPolicy"])
        assert t["Protocol"] == "HTTPS" and t["HealthCheckProtocol"] == "HTTPS", (ctr, t)
    else:
        assert l["Protocol"] == "HTTP" and "Certificates" not in l, (ctr, l)
        assert t["Protocol"] == "HTTP" and t.get("HealthCheckProtocol", "HTTP") == "HTTP", (ctr, t)
print("ok")
EOF
}
if load_balancers "$A" "$CERT" >"$tmp/lb.log" 2>&1; then
	pass load-balancers
else
	fail load-balancers "the load balancers are not as expected" "$tmp/lb.log"
fi
if load_balancers "$C" "" >"$tmp/lb-clear.log" 2>&1; then
	pass load-balancers-clear
else
	fail load-balancers-clear "the load balancers (agentTls=off) are not as expected" "$tmp/lb-clear.log"
fi

if /usr/bin/python3 - "$A" "$PEM" "$KEY" >"$tmp/grant.log" 2>&1 <<'EOF'; then
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
pem, key = sys.argv[2], sys.argv[3]
td = [r for r in R.values() if r["Type"] == "AWS::ECS::TaskDefinition"][0]["Properties"]
role = td["ExecutionRoleArn"]["Fn::GetAtt"][0]
st = [s for r in R.values() if r["Type"] == "AWS::IAM::Policy" and {"Ref": role} in r["Properties"]["Roles"]
      for s in r["Properties"]["PolicyDocument"]["Statement"]]
acts = lambda s: [s["Action"]] if isinstance(s["Action"], str) else s["Action"]
assert [s for s in st if s["Effect"] == "Allow" and "secretsmanager:GetSecretValue" in acts(s) and s["Resource"] == pem], \
    "no GetSecretValue on the TLS secret: %s" % st
kms = [s for s in st if "kms:Decrypt" in acts(s)]
assert kms == [{"Action": "kms:Decrypt", "Effect": "Allow", "Resource": key,
                "Condition": {"StringEquals": {"kms:ViaService": "secretsmanager.eu-west-1.amazonaws.com"}}}], kms
print("ok")
EOF
	pass grant
else
	fail grant "the execution role's policy is not as expected" "$tmp/grant.log"
fi

for v in "nag-template $A" "nag-template-clear $C"; do
	set -- $v
	if (cd "$root/cdk" && timeout 300 node tools/nag-template.js "$2") >"$tmp/$1.jsonl" 2>"$tmp/$1.err" </dev/null; then
		if /usr/bin/python3 - "$2" "$tmp/$1.jsonl" >"$tmp/$1.log" 2>&1 <<'EOF'; then
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
			pass "$1"
		else
			fail "$1" "$(tail -n 3 "$tmp/$1.log" | tr '\n' ' ' | head -c 1500)"
		fi
	else
		fail "$1" "nag-template.js failed" "$tmp/$1.err"
	fi
done

# The agent's command line from the clear-text template, its fixed paths and port moved to the scratch directory; the
# secret becomes the environment variable ECS sets from it. Port 0: the agent binds a port and logs it.
mkdir -p "$tmp/diag" "$tmp/dumps"
if /usr/bin/python3 - "$C" "$tmp" 0 >"$tmp/agent.argv" 2>"$tmp/argv.err" <<'EOF'; then
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
	port=$(listening_port "$tmp/agent.log" urls 10 "$agent")
	u=http://127.0.0.1:$port
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

# The same from the HTTPS template, now that the agent reads DIAGPORT_TLS_PEM: its two secrets become the variables
# ECS sets from them (the PEM text of a certificate and key made here, as the platform's secret holds them); a
# client that trusts the test CA gets /processes over https with the token, and the variable is gone from the
# agent's environment once read.
mkdir -p "$tmp/tdiag" "$tmp/tdumps"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$tmp/tls.key" -out "$tmp/tls.crt" \
	-days 2 -subj /CN=agent -addext subjectAltName=IP:127.0.0.1 >"$tmp/openssl.log" 2>&1
if [ -s "$tmp/tls.crt" ] && /usr/bin/python3 - "$A" "$tmp" 0 >"$tmp/tagent.argv" 2>"$tmp/targv.err" <<'EOF2'; then
import json, sys
R = json.load(open(sys.argv[1]))["Resources"]
td = [r for r in R.values() if r["Type"] == "AWS::ECS::TaskDefinition"][0]["Properties"]
a = [c for c in td["ContainerDefinitions"] if c["Name"] == "diagport-agent"][0]
assert sorted(s["Name"] for s in a["Secrets"]) == ["DIAGPORT_AUTH_TOKEN", "DIAGPORT_TLS_PEM"], a["Secrets"]
moved = {"/diag/port": sys.argv[2] + "/tdiag/port", "/dumps": sys.argv[2] + "/tdumps",
         "https://+:52323": "https://127.0.0.1:" + sys.argv[3]}
assert "https://+:52323" in a["Command"], a["Command"]
for w in a["Command"]:
    print(moved.get(w, w))
EOF2
	mapfile -t argv <"$tmp/tagent.argv"
	DIAGPORT_AUTH_TOKEN=s3cret-token-0123456789 DIAGPORT_TLS_PEM="$(cat "$tmp/tls.crt" "$tmp/tls.key")" \
		"$diagport" "${argv[@]}" >"$tmp/tagent.out" 2>"$tmp/tagent.log" </dev/null &
	agent=$!
	port=$(listening_port "$tmp/tagent.log" urls 10 "$agent")
	u=https://127.0.0.1:$port
	y=$(curl -s -o /dev/null -w '%{http_code}' --cacert "$tmp/tls.crt" -H 'Authorization: Bearer s3cret-token-0123456789' "$u/processes")
	env_left=$(tr '\0' '\n' <"/proc/$agent/environ" 2>/dev/null | grep -c 'BEGIN' || true)
	kill "$agent" 2>/dev/null
	wait "$agent" 2>/dev/null
	if [ "$y" = 200 ] && [ "$env_left" = 0 ]; then
		pass agent-starts-tls
	else
		fail agent-starts-tls "processes over https with the token: $y (want 200); PEM lines left in the environment: $env_left; argv: $(tr '\n' ' ' <"$tmp/tagent.argv")" "$tmp/tagent.log"
	fi
else
	fail agent-starts-tls "no agent command in the HTTPS template, or no certificate" "$tmp/targv.err"
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
