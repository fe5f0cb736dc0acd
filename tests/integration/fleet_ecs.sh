#!/usr/bin/env bash
# fleet_ecs.sh - ECS discovery (fleet/ecs.c, fleet/aws.c, cloud/aws_creds.c) through ecs_driver.c, against
# ecs_api_fake.py (ECS, Secrets Manager, STS, the container credentials endpoint and IMDSv2 as AWS
# publishes them; no AWS here), seeded by ecs_seed.py with task definitions `diagport inject ecs` wrote,
# and a real agent at the address the stand-in reports:
#   sigv4/*      our signatures and botocore's (Debian's awscli) byte for byte
#   cli/*        the AWS CLI against the stand-in (it is checked by the real client, bad signatures refused)
#   prod/*       150 tasks: pagination, DescribeTasks by 100, one DescribeTaskDefinition per definition
#   service/*    --service, an unknown service
#   mixed/*      the agent reached at the discovered address with the fetched token (plain and JSON-key
#                secrets), a wrong token refused, no agent, bridge mode, agent unhealthy, loopback-only
#                agent, a standalone task, --public-ip
#   ps/*         the same through `diagport ps --ecs-cluster -o json` and its exit codes; through an
#                http_proxy (tests/integration/webc_proxy.py), as the AWS CLI goes
#   token/*      GetSecretValue denied; no secret is ever printed
#   creds/*      each source of the chain (environment, profile files, credential_process, container
#                endpoint, IMDSv2), their order, and what is said when none has credentials
#   errors/*     a wrong secret key, access denied naming the action, an unknown cluster, no region
#   retry/*      throttled calls tried again
#   address/*    tampered DescribeTasks addresses (link-local, unspecified, a host name, a URL fragment,
#                multicast, broadcast, IPv4-mapped link-local) refused with a why_not, no token fetched
#                for them, and a listener on their port reached only by the accepted loopback task
#                (loopback refused without an endpoint override: tests/unit/test_taddr.c)
#   pages/*      ListTasks pages that never end: a repeated nextToken (DP_EREMOTE after 2 pages; the AWS CLI
#                sees the same loop), new tokens and no tasks (DP_EREMOTE after 1000 pages), new tokens and
#                100 tasks each (the 5,000-task cap: 50 pages, 5,000 described)
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=fleet_ecs
. tests/lib.sh
agent_setup fleet-ecs
PY=/usr/bin/python3
AWS=/usr/bin/aws
I=tests/integration
TOKEN=s3cr3t-agent-token

CFLAGS_PKG=$(pkg-config --cflags jansson libcurl)
LIBS_PKG="$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread"
# shellcheck disable=SC2086
cc -std=c11 -D_GNU_SOURCE -I. -Icommon $CFLAGS_PKG -o "$W/driver" $I/ecs_driver.c "$B/libdiagport.a" $LIBS_PKG \
	2> "$W/cc.log" || { fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }

DIAGPORT_AUTH_TOKEN=$TOKEN start_agent
# a listener on every local address at the hostile tasks' agent port HP (a port it binds itself and writes to
# listener.log.port; [::]:HP, dual-stack: 127.0.0.2, 0.0.0.0 and ::1 reach it; it logs the address each connection
# was made to); only the loopback task (accepted: the endpoint is a local stand-in) may
cat > "$W/listener.py" << 'EOF'
import socket, sys
s = socket.socket(socket.AF_INET6)
s.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 0)
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("::", 0))
s.listen(16)
open(sys.argv[1] + ".port", "w").write("%d\n" % s.getsockname()[1])
while True:
    c = s.accept()[0]
    c.settimeout(2)
    try:
        data = c.recv(4096)
    except OSError:
        data = b""
    with open(sys.argv[1], "a") as f:
        f.write(c.getsockname()[0] + " " + data.split(b"\r")[0].decode(errors="replace") + "\n")
    c.close()
EOF
"$PY" "$W/listener.py" "$W/listener.log" 2> "$W/listener.err" &
PIDS+=($!)
wait_for "$W/listener.log.port" '^[0-9]' 10 || { fail listener "$(head -c 300 "$W/listener.err")"; exit 0; }
HP=$(cat "$W/listener.log.port")
HOSTILE_PORT=$HP "$PY" $I/ecs_seed.py "$D" "$P" "$W/seed.json" 2> "$W/seed.err" || { fail seed "$(head -c 300 "$W/seed.err")"; exit 0; }

# start_fake NAME SEED: the stand-in; its port in FP_NAME's file $W/NAME.port
FAKES=()
start_fake() {
	"$PY" $I/ecs_api_fake.py "$2" "$W/$1.port" "$W/$1.log" 2> "$W/$1.err" &
	FAKES+=($!)
	for _ in $(seq 1 100); do [ -s "$W/$1.port" ] && return 0; sleep 0.05; done
	fail "start-$1" "the stand-in did not start: $(head -c 300 "$W/$1.err")"
	exit 0
}
start_fake fake "$W/seed.json"
FP=$(cat "$W/fake.port")
EP=http://127.0.0.1:$FP
mkdir -p "$W/home/.aws" "$W/empty"

# ---- SigV4 against botocore ----
sig_case() {
	local name=$1
	shift
	"$PY" $I/sigv4_botocore.py "$@" > "$W/sig-boto.$name" 2> "$W/sig-boto.err" || { fail "sigv4/$name" "botocore: $(tail -1 "$W/sig-boto.err")"; return; }
	"$W/driver" sign "$@" > "$W/sig-ours.$name" 2>&1
	WHY="$(diff "$W/sig-boto.$name" "$W/sig-ours.$name" | head -c 600)"
	check "sigv4/$name" cmp -s "$W/sig-boto.$name" "$W/sig-ours.$name"
}
export AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY
sig_case ecs-list-tasks POST https://ecs.eu-west-1.amazonaws.com/ ecs eu-west-1 20240229T235959Z \
	'{"cluster":"prod","desiredStatus":"RUNNING","maxResults":100}' \
	'Content-Type: application/x-amz-json-1.1' 'X-Amz-Target: AmazonEC2ContainerServiceV20141113.ListTasks'
sig_case sts-default-port POST https://sts.us-east-1.amazonaws.com:443/ sts us-east-1 20231231T000000Z \
	'Action=GetCallerIdentity&Version=2011-06-15' 'Content-Type: application/x-www-form-urlencoded; charset=utf-8'
sig_case query-path-spaces GET 'http://Example.COM:8080/a%20b/c~d?b=2&a=1&a=0&c=%2F%2Bx&empty=&z' svc ap-south-1 \
	20240101T000000Z '' 'X-Custom:   spaced    value  ' 'x-custom: second'
sig_case secrets-unicode-body POST http://127.0.0.1:4566/ secretsmanager eu-west-1 20240615T101010Z \
	'{"SecretId":"arn:aws:secretsmanager:eu-west-1:1:secret:t\u00e9-AbCdEf"}' \
	'Content-Type: application/x-amz-json-1.1' 'X-Amz-Target: secretsmanager.GetSecretValue'
AWS_SESSION_TOKEN='FwoGZXIvYXdzEJr//////////wEaDPa+session/token==' sig_case session-token POST https://ecs.eu-west-1.amazonaws.com/ \
	ecs eu-west-1 20240229T235959Z '{}' 'Content-Type: application/x-amz-json-1.1' \
	'X-Amz-Target: AmazonEC2ContainerServiceV20141113.DescribeTasks'
unset AWS_ACCESS_KEY_ID AWS_SECRET_ACCESS_KEY

# ---- the AWS CLI against the stand-in ----
# awscli ENV... -- ARGS: Debian's AWS CLI with a clean environment; output in $W/cli.out, status in RC
awscli() {
	local envs=()
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env -i PATH=/usr/bin:/bin HOME="$W/empty" AWS_PAGER= AWS_REGION=eu-west-1 AWS_EC2_METADATA_DISABLED=true \
		"${envs[@]}" "$AWS" --endpoint-url "$EP" --output json "$@" > "$W/cli.out" 2> "$W/cli.err"
	RC=$?
}
ENVKEYS=(AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=env-secret-key)
SM=arn:aws:secretsmanager:eu-west-1:123456789012:secret
awscli "${ENVKEYS[@]}" -- ecs list-tasks --cluster prod
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/list-tasks-paginated test "$(jq '.taskArns | length' "$W/cli.out" 2> /dev/null)" = 150
first2=$(jq -r '.taskArns[0:2] | join(" ")' "$W/cli.out" 2> /dev/null)
# shellcheck disable=SC2086
awscli "${ENVKEYS[@]}" -- ecs describe-tasks --cluster prod --tasks $first2
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/describe-tasks test "$(jq '[.tasks[].attachments[0].details[] | select(.name=="privateIPv4Address")] | length' "$W/cli.out" 2> /dev/null)" = 2
awscli "${ENVKEYS[@]}" -- ecs describe-task-definition --task-definition arn:aws:ecs:eu-west-1:123456789012:task-definition/orders:3
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/describe-task-definition test "$(jq -r '.taskDefinition.containerDefinitions[] | select(.name=="diagport-agent") | .secrets[0].name' "$W/cli.out" 2> /dev/null)" = DIAGPORT_AUTH_TOKEN
awscli "${ENVKEYS[@]}" -- secretsmanager get-secret-value --secret-id "$SM:live-token-AbCdEf"
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/get-secret-value test "$(jq -r .SecretString "$W/cli.out" 2> /dev/null)" = "$TOKEN"
awscli "${ENVKEYS[@]}" -- sts get-caller-identity
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/sts-caller test "$(jq -r .Arn "$W/cli.out" 2> /dev/null)" = arn:aws:iam::123456789012:user/alice
awscli AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=not-the-key -- ecs list-tasks --cluster prod
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/bad-signature-refused grep -q InvalidSignatureException "$W/cli.err"
awscli "${ENVKEYS[@]}" -- ecs list-tasks --cluster nope
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/cluster-not-found grep -q ClusterNotFoundException "$W/cli.err"
printf 's3cr3t-container-auth' > "$W/authtok" # as EKS Pod Identity writes it: no newline
# (this awscli's botocore predates AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE; the driver reads both)
awscli AWS_CONTAINER_CREDENTIALS_FULL_URI="$EP/v2/credentials/task-creds" AWS_CONTAINER_AUTHORIZATION_TOKEN=s3cr3t-container-auth -- sts get-caller-identity
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/container-credentials test "$(jq -r .Arn "$W/cli.out" 2> /dev/null)" = arn:aws:sts::123456789012:assumed-role/task-role/0123
awscli AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT="$EP/" -- sts get-caller-identity
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check cli/imds-credentials test "$(jq -r .Arn "$W/cli.out" 2> /dev/null)" = arn:aws:sts::123456789012:assumed-role/ec2-role/i-0123

# ---- discovery ----
# disc NAME ENV... -- DRIVER-ARGS: the driver in a clean environment (HOME without ~/.aws unless given,
# IMDS off unless given); output $W/NAME.out (line 1: the caller), the stand-in's log lines of the run in
# $W/NAME.calls, status RC
disc() {
	local name=$1 envs=() before
	shift
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	before=$(wc -l < "$W/fake.log")
	env -i PATH=/usr/bin:/bin HOME="$W/empty" AWS_ENDPOINT_URL="$EP" AWS_EC2_METADATA_DISABLED=true "${envs[@]}" \
		"$W/driver" discover "$@" > "$W/$name.out" 2> "$W/$name.err"
	RC=$?
	tail -n +$((before + 1)) "$W/fake.log" > "$W/$name.calls"
}
REG=AWS_REGION=eu-west-1
agent() { jq -c --arg t "$2" 'select(.task != null and (.task | endswith($t)))' "$W/$1.out"; }
field() { agent "$1" "$2" | jq -r ".$3"; }
has() { grep -q -- "$1" <<< "$2"; }
calls() { jq -c --arg op "$2" 'select(.op == $op)' "$W/$1.calls" | wc -l; }

disc prod "$REG" "${ENVKEYS[@]}" -- prod
WHY="rc $RC: $(head -c 300 "$W/prod.out")"; check prod/150-agents test "$(jq -s '[.[] | select(.url != null and .token and .why_not == null)] | length' "$W/prod.out")" = 150
check prod/distinct-names test "$(jq -r 'select(.name) | .name' "$W/prod.out" | sort -u | wc -l)" = 150
WHY="$(cat "$W/prod.calls")"; check prod/list-tasks-paginated test "$(calls prod ListTasks)" = 2
WHY="$(grep DescribeTasks "$W/prod.calls")"; check prod/describe-by-100 test "$(jq -r 'select(.op=="DescribeTasks") | .asked' "$W/prod.calls" | sort -n | tr '\n' ' ')" = "50 100 "
WHY="$(grep DescribeTaskDefinition "$W/prod.calls")"; check prod/one-describe-per-definition test "$(calls prod DescribeTaskDefinition)" = 2
WHY="$(grep GetSecretValue "$W/prod.calls")"; check prod/one-secret-call-per-secret test "$(calls prod GetSecretValue)" = 2
WHY="$(agent prod 00000000000000000000000000000000)"; check prod/address-and-name test "$(field prod 00000000000000000000000000000000 url) $(field prod 00000000000000000000000000000000 name)" = "http://10.0.0.1:52323 prod/00000000000000000000000000000000"
WHY="$(head -1 "$W/prod.out")"; check prod/caller test "$(head -1 "$W/prod.out" | jq -r .caller)" = arn:aws:iam::123456789012:user/alice

disc svc "$REG" "${ENVKEYS[@]}" -- prod --service orders
WHY="rc $RC: $(head -c 300 "$W/svc.out")"; check service/orders-only test "$(jq -s '[.[] | select(.service == "orders" and .workload == "prod/service:orders" and .mode == "suspend")] | length' "$W/svc.out")" = 100
check service/nothing-else test "$(jq -s '[.[] | select(.task != null)] | length' "$W/svc.out")" = 100
WHY="$(grep ListTasks "$W/svc.calls")"; check service/asked-by-service test "$(calls svc ListTasks)" = 1
disc billing "$REG" "${ENVKEYS[@]}" -- prod --service billing
check service/billing-nosuspend test "$(jq -s '[.[] | select(.service == "billing" and .mode == "nosuspend")] | length' "$W/billing.out")" = 50
disc nosvc "$REG" "${ENVKEYS[@]}" -- prod --service nope
WHY="rc $RC: $(cat "$W/nosvc.out")"; check service/unknown bash -c "[ $RC = 1 ] && grep -q 'ECS service nope not found in cluster prod' '$W/nosvc.out'"

disc mixed "$REG" "${ENVKEYS[@]}" -- mixed --probe
T1=00000000000000000000000000000001
WHY="$(agent mixed 1)"; check mixed/live-address test "$(field mixed 1 url)" = "$U"
WHY="$(agent mixed 1)"; check mixed/live-agent-answers test "$(field mixed 1 probe)" = 200
WHY="$(agent mixed 2)"; check mixed/json-key-token test "$(field mixed 2 probe)" = 200
WHY="$(agent mixed 3)"; check mixed/wrong-token-refused test "$(field mixed 3 probe)" = 401
WHY="$(agent mixed 4)"; check mixed/not-injected test "$(field mixed 4 why_not)" = "not injected"
WHY="$(agent mixed 5)"; check mixed/bridge test "$(field mixed 5 why_not)" = "bridge network mode: the task has no address of its own (use --target with the instance's address)"
WHY="$(agent mixed 6)"; check mixed/unhealthy test "$(field mixed 6 why_not)" = "agent not ready"
WHY="$(agent mixed 7)"; check mixed/loopback-only has 'loopback only' "$(field mixed 7 why_not)"
WHY="$(agent mixed 8)"; check mixed/standalone-own-workload test "$(field mixed 8 workload)/$(field mixed 8 service)/$(field mixed 8 probe)" = "null/null/200"
WHY="$(agent mixed 9)"; check mixed/tls-https-url test "$(field mixed 9 url)" = "https://127.0.0.1:${U##*:}"
WHY="$(agent mixed a)"; check mixed/tls-loopback-only has 'loopback only' "$(field mixed a why_not)"
WHY="$(agent mixed b)"; check mixed/token-arn-bad-region has "the token secret's ARN names no region" "$(field mixed b why_not)"
WHY="$(agent mixed 1)"; check mixed/service-workload test "$(field mixed 1 workload)/$(field mixed 1 service)/$(field mixed 1 mode)/$(field mixed 1 name)" = "mixed/service:web/web/nosuspend/mixed/$T1"
disc public "$REG" "${ENVKEYS[@]}" -- mixed --public-ip
WHY="$(agent public 1)"; check mixed/public-ip test "$(field public 1 url)" = "$U"
WHY="$(agent public 2)"; check mixed/no-public-ip has 'no public address' "$(field public 2 why_not)"

# the same through `diagport ps` (the lead's CLI): its JSON items, its exit codes
# dps NAME ENV... -- PS-ARGS: like disc, with diagport ps; stdout $W/NAME.out, stderr $W/NAME.err
dps() {
	local name=$1 envs=()
	shift
	while [ "$1" != -- ]; do envs+=("$1"); shift; done
	shift
	env -i PATH=/usr/bin:/bin HOME="$W/empty" AWS_ENDPOINT_URL="$EP" AWS_EC2_METADATA_DISABLED=true "${envs[@]}" \
		"$D" ps "$@" > "$W/$name.out" 2> "$W/$name.err"
	RC=$?
}
item() { jq -c --arg t "$2" '.items[] | select(.task | endswith($t))' "$W/$1.out"; }
dps ps "$REG" "${ENVKEYS[@]}" -- --ecs-cluster mixed -o json
WHY="rc $RC: $(head -c 300 "$W/ps.err")"; check ps/lists-every-task test "$RC/$(jq '.items | length' "$W/ps.out")" = 0/11
WHY="$(item ps 1)"; check ps/live-ready test "$(item ps 1 | jq -r '[.state, .url, .workload, .service, .cluster] | join(" ")')" = "ready $U mixed/service:web web mixed"
WHY="$(item ps 3)"; check ps/wrong-token-unavailable has 'refused the token' "$(item ps 3 | jq -r .reason)"
WHY="$(item ps 5)"; check ps/bridge-reason has '^bridge network mode' "$(item ps 5 | jq -r '.state + " " + .reason' | sed 's/^unavailable //')"
WHY="$(head -c 300 "$W/ps.out")"; check ps/caller test "$(jq -r .caller "$W/ps.out")" = arn:aws:iam::123456789012:user/alice
# through a proxy, as the AWS CLI would go: the AWS calls (webc) by http_proxy, the agents (libcurl) not (no_proxy)
"$PY" $I/webc_proxy.py --ready "$W/proxy.port" --log "$W/proxy.log" > "$W/proxy.out" 2>&1 &
FAKES+=($!)
for _ in $(seq 1 100); do [ -s "$W/proxy.port" ] && break; sleep 0.05; done
touch "$W/proxy.log"
dps ps-proxy "$REG" "${ENVKEYS[@]}" AWS_ENDPOINT_URL="http://localhost:$FP" http_proxy="http://127.0.0.1:$(cat "$W/proxy.port")" \
	no_proxy=127.0.0.1 -- --ecs-cluster mixed -o json
WHY="rc $RC: $(head -c 300 "$W/ps-proxy.err") proxy: $(head -c 300 "$W/proxy.log")"
check ps/through-proxy test "$RC/$(jq '.items | length' "$W/ps-proxy.out")/$(jq -r .caller "$W/ps-proxy.out")" = \
	0/11/arn:aws:iam::123456789012:user/alice
check ps/proxy-carried-the-calls test "$(grep -c "^FORWARD POST http://localhost:$FP/ " "$W/proxy.log")" -ge 4
dps ps-deny "$REG" AWS_ACCESS_KEY_ID=AKIDNOLIST AWS_SECRET_ACCESS_KEY=nolist-secret-key -- --ecs-cluster mixed -o json
WHY="rc $RC: $(cat "$W/ps-deny.err")"; check ps/denied-exit-4 bash -c "[ $RC = 4 ] && grep -q 'not authorized to perform ecs:ListTasks on cluster mixed' '$W/ps-deny.err'"
dps ps-nocl "$REG" "${ENVKEYS[@]}" -- --ecs-cluster nope -o json
WHY="rc $RC: $(cat "$W/ps-nocl.err")"; check ps/unknown-cluster-exit-3 bash -c "[ $RC = 3 ] && grep -q 'ECS cluster nope not found' '$W/ps-nocl.err'"

disc nosm "$REG" AWS_ACCESS_KEY_ID=AKIDNOSM AWS_SECRET_ACCESS_KEY=nosm-secret-key -- mixed
WHY="$(agent nosm 1)"; check token/denied test "$(field nosm 1 why_not)" = "the agent needs a token: give --token-file, or secretsmanager:GetSecretValue on $SM:live-token-AbCdEf"
WHY="$(agent nosm 1)"; check token/denied-no-token test "$(field nosm 1 url)/$(field nosm 1 token)" = "$U/false"

# ---- the credential chain (cluster tiny; the caller says whose keys were used) ----
cat > "$W/home/.aws/credentials" << 'EOF'
# the default profile is bob's, dev is prof's
[default]
aws_access_key_id = AKIDNOSM
aws_secret_access_key = nosm-secret-key

[dev]
aws_access_key_id=AKIDPROF
aws_secret_access_key =   prof-secret-key
EOF
printf '{"Version": 1, "AccessKeyId": "AKIDPROC", "SecretAccessKey": "proc-secret-key", "SessionToken": "proc-session-token"}\n' > "$W/proc.json"
cat > "$W/home/.aws/config" << EOF
[default]
region = eu-west-1
[profile dev]
s3 =
  region = us-east-1
region = eu-west-1
[profile proc]
region = eu-west-1
credential_process = /bin/cat $W/proc.json
[profile role]
role_arn = arn:aws:iam::123456789012:role/x
source_profile = dev
EOF
H=HOME=$W/home
caller() { head -1 "$W/$1.out" | jq -r '.caller // .message'; }
IAM=arn:aws:iam::123456789012
STSR=arn:aws:sts::123456789012:assumed-role
CONT=(AWS_CONTAINER_CREDENTIALS_FULL_URI="$EP/v2/credentials/task-creds" AWS_CONTAINER_AUTHORIZATION_TOKEN_FILE="$W/authtok")
IMDS=(AWS_EC2_METADATA_DISABLED=false AWS_EC2_METADATA_SERVICE_ENDPOINT="$EP")

disc c-env "$REG" "${ENVKEYS[@]}" -- tiny
WHY="$(caller c-env)"; check creds/environment test "$(caller c-env)" = $IAM:user/alice
disc c-prof "$H" AWS_PROFILE=dev -- tiny
WHY="$(caller c-prof)"; check creds/profile-and-its-region test "$(caller c-prof)" = $IAM:user/prof
disc c-default "$H" -- tiny
WHY="$(caller c-default)"; check creds/default-profile test "$(caller c-default)" = $IAM:user/bob
disc c-envfirst "$H" AWS_PROFILE=dev "${ENVKEYS[@]}" -- tiny
WHY="$(caller c-envfirst)"; check creds/order-environment-before-AWS_PROFILE test "$(caller c-envfirst)" = $IAM:user/alice
disc c-named "$H" "${ENVKEYS[@]}" -- tiny --profile dev
WHY="$(caller c-named)"; check creds/named-profile-skips-environment test "$(caller c-named)" = $IAM:user/prof
disc c-proc "$H" -- tiny --profile proc
WHY="$(caller c-proc)"; check creds/credential-process test "$(caller c-proc)" = $IAM:user/process
disc c-role "$H" -- tiny --profile role
WHY="$(caller c-role)"; check creds/unsupported-said bash -c "grep -q 'profile role uses role_arn' '$W/c-role.out'"
disc c-noprof "$H" -- tiny --profile missing
WHY="$(caller c-noprof)"; check creds/missing-profile bash -c "grep -q 'AWS profile missing is not in $W/home/.aws/credentials' '$W/c-noprof.out'"
disc c-cont "$REG" "${CONT[@]}" -- tiny
WHY="$(caller c-cont)"; check creds/container-endpoint test "$(caller c-cont)" = $STSR/task-role/0123
disc c-contenv "$REG" AWS_CONTAINER_CREDENTIALS_FULL_URI="$EP/v2/credentials/task-creds" AWS_CONTAINER_AUTHORIZATION_TOKEN=s3cr3t-container-auth -- tiny
WHY="$(caller c-contenv)"; check creds/container-endpoint-token-env test "$(caller c-contenv)" = $STSR/task-role/0123
disc c-contbad "$REG" AWS_CONTAINER_CREDENTIALS_FULL_URI="$EP/v2/credentials/task-creds" AWS_CONTAINER_AUTHORIZATION_TOKEN=wrong -- tiny
WHY="$(caller c-contbad)"; check creds/container-endpoint-refused bash -c "grep -q 'the container credentials endpoint $EP/v2/credentials/task-creds: HTTP 401' '$W/c-contbad.out'"
disc c-contfar "$REG" AWS_CONTAINER_CREDENTIALS_FULL_URI="http://192.0.2.1/creds" -- tiny
WHY="$(caller c-contfar)"; check creds/container-endpoint-not-loopback bash -c "grep -q 'plain http is allowed only to loopback' '$W/c-contfar.out'"
disc c-rel "$REG" AWS_CONTAINER_CREDENTIALS_RELATIVE_URI=/v2/credentials/abc -- tiny
WHY="$(caller c-rel)"; check creds/container-relative-uri-at-ecs-address grep -q '"message":"the container credentials endpoint http://169.254.170.2/v2/credentials/abc: ' "$W/c-rel.out"
disc c-imds "$REG" "${IMDS[@]}" -- tiny
WHY="$(caller c-imds)"; check creds/imdsv2 test "$(caller c-imds)" = $STSR/ec2-role/i-0123
WHY="$(cat "$W/c-imds.calls")"; check creds/imdsv2-token-first test "$(jq -r .op "$W/c-imds.calls" | head -1)" = imds-token
disc c-order1 "$REG" "${CONT[@]}" "${IMDS[@]}" -- tiny
WHY="$(caller c-order1)"; check creds/order-container-before-imds test "$(caller c-order1)" = $STSR/task-role/0123
disc c-order2 "$H" "${CONT[@]}" "${IMDS[@]}" -- tiny
WHY="$(caller c-order2)"; check creds/order-files-before-container test "$(caller c-order2)" = $IAM:user/bob
disc c-none "$REG" -- tiny
WHY="$(caller c-none)"; check creds/none-names-each-source bash -c "grep -q 'no AWS credentials found: environment: AWS_ACCESS_KEY_ID is not set; profile default: not in .*; container endpoint: .* are not set; IMDS: AWS_EC2_METADATA_DISABLED is true' '$W/c-none.out'"
WHY="$(cat "$W/c-none.out")"; check creds/none-is-auth grep -q '"error":"not authenticated' "$W/c-none.out"

# ---- errors ----
disc e-sig "$REG" AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=w-r-o-n-g -- prod
WHY="$(cat "$W/e-sig.out")"; check errors/wrong-secret-key bash -c "[ $RC = 1 ] && grep -q 'AWS refused the credentials from the environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY (access key AKIDENV) for ecs:ListTasks: InvalidSignatureException' '$W/e-sig.out'"
WHY="$(cat "$W/e-sig.out")"; check errors/wrong-secret-not-printed bash -c "! grep -q w-r-o-n-g '$W/e-sig.out'"
disc e-deny "$REG" AWS_ACCESS_KEY_ID=AKIDNOLIST AWS_SECRET_ACCESS_KEY=nolist-secret-key -- prod
WHY="$(cat "$W/e-deny.out")"; check errors/access-denied-names-action bash -c "[ $RC = 1 ] && grep -q '\"error\":\"not authenticated.*not authorized to perform ecs:ListTasks on cluster prod' '$W/e-deny.out'"
disc e-nocl "$REG" "${ENVKEYS[@]}" -- nope
WHY="$(cat "$W/e-nocl.out")"; check errors/unknown-cluster bash -c "[ $RC = 1 ] && grep -q '\"error\":\"not found\",\"message\":\"ECS cluster nope not found in region eu-west-1' '$W/e-nocl.out'"
disc e-noreg "${ENVKEYS[@]}" -- prod
WHY="$(cat "$W/e-noreg.out")"; check errors/no-region grep -q 'no AWS region' "$W/e-noreg.out"
disc e-unknownkey "$REG" AWS_ACCESS_KEY_ID=AKIDNOBODY AWS_SECRET_ACCESS_KEY=x -- prod
WHY="$(cat "$W/e-unknownkey.out")"; check errors/unknown-key grep -q 'UnrecognizedClientException' "$W/e-unknownkey.out"

# ---- throttling ----
jq '. + {throttle: 3}' "$W/seed.json" > "$W/seed-throttle.json"
start_fake slow "$W/seed-throttle.json"
env -i PATH=/usr/bin:/bin HOME="$W/empty" AWS_ENDPOINT_URL="http://127.0.0.1:$(cat "$W/slow.port")" AWS_EC2_METADATA_DISABLED=true \
	"$REG" "${ENVKEYS[@]}" "$W/driver" discover prod > "$W/slow.out" 2>&1
WHY="$(head -c 300 "$W/slow.out")"; check retry/throttled-then-answered test "$(head -1 "$W/slow.out" | jq .n)" = 150
WHY="$(cat "$W/slow.log" | head -5)"; check retry/three-throttled test "$(grep -c '"throttled": true' "$W/slow.log")" = 3

# ---- tampered task addresses: no token sent anywhere but a task's address (the listener: see the seed) ----
disc hostile "$REG" "${ENVKEYS[@]}" -- hostile --probe
HOSTILE=("169.254.169.254|link-local" "0.0.0.0|unspecified" "evil.example|not an IP address"
	"127.0.0.2:$HP/x?|not an IP address" "fe80::1|link-local" "224.0.0.1|multicast" "255.255.255.255|broadcast"
	"::|unspecified" "::ffff:169.254.169.254|link-local")
for i in "${!HOSTILE[@]}"; do
	ip=${HOSTILE[$i]%|*} why=${HOSTILE[$i]#*|} t=$(printf '%x' $((0x4000 + i)))
	WHY="$(agent hostile "$t")"
	check "address/refused-${why// /-}-$t" test "$(field hostile "$t" why_not)|$(field hostile "$t" url)|$(field hostile "$t" token)" = \
		"the ECS API gave the address $ip, which is not a task's ($why)|null|false"
done
WHY="$(agent hostile 4009)"; check address/loopback-with-local-endpoint test "$(field hostile 4009 url)" = "http://127.0.0.2:$HP"
WHY="$(cat "$W/listener.log" 2> /dev/null)"; check address/only-the-accepted-one-reached bash -c \
	"[ \"\$(cat '$W/listener.log')\" = '::ffff:127.0.0.2 GET /processes HTTP/1.1' ]"

# ---- ListTasks pages that never end (the stand-in's "pages" clusters) ----
awscli "${ENVKEYS[@]}" -- ecs list-tasks --cluster loop
WHY="rc $RC: $(head -c 300 "$W/cli.err")"; check pages/cli-sees-the-loop grep -q 'The same next token was received twice' "$W/cli.err"
disc loop "$REG" "${ENVKEYS[@]}" -- loop
WHY="rc $RC: $(head -c 300 "$W/loop.out")"
check pages/repeated-token grep -qF '"message":"ecs:ListTasks on cluster loop: the same nextToken came again after 2 pages (2 tasks): its pages would never end"' "$W/loop.out"
WHY="$(head -c 300 "$W/loop.calls")"; check pages/repeated-token-calls test "$(calls loop ListTasks)/$(calls loop DescribeTasks)" = 2/0
disc endless "$REG" "${ENVKEYS[@]}" -- endless
WHY="rc $RC: $(head -c 300 "$W/endless.out")"
check pages/page-cap grep -qF '"message":"ecs:ListTasks on cluster endless: the pages did not end after 1000 pages (0 tasks)"' "$W/endless.out"
WHY="$(calls endless ListTasks) ListTasks"; check pages/page-cap-calls test "$(calls endless ListTasks)" = 1000
disc flood "$REG" "${ENVKEYS[@]}" -- flood
WHY="rc $RC: $(head -c 300 "$W/flood.out")"; check pages/task-cap test "$RC/$(head -1 "$W/flood.out" | jq .n)" = 0/0
WHY="$(calls flood ListTasks) ListTasks, $(jq -s 'map(select(.op == "DescribeTasks") | .asked) | add' "$W/flood.calls") asked"
check pages/task-cap-5000 test "$(calls flood ListTasks)/$(jq -s 'map(select(.op == "DescribeTasks") | .asked) | add' "$W/flood.calls")" = 50/5000

# ---- no secret printed anywhere ----
WHY="$(grep -l -e s3cr3t -e secret-key "$W"/*.out "$W"/*.err 2> /dev/null | head -3)"
check token/never-printed bash -c "! grep -q -e s3cr3t -e '-secret-key' $W/*.out $W/*.err"

for f in "${FAKES[@]}"; do kill "$f" 2> /dev/null; wait "$f" 2> /dev/null; done
exit 0
