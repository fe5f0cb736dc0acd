#!/usr/bin/env bash
# fleet_e2e.sh - `diagport ps` and `diagport capture` end to end, the CLI over the real paths: Kubernetes
# discovery and the WebSocket port-forward (kubeapi_fake.py, cluster mode, with RBAC from manifests/rbac/),
# and ECS discovery with Secrets Manager tokens (ecs_api_fake.py seeded by ecs_seed.py), each leading to
# REAL agents with the REAL .NET webapp attached. No kube-apiserver, kubelet or AWS can run here: the
# stand-ins are checked by the real clients in this script (kubectl, the AWS CLI).
#   kube/*   alice (group shop-team, the example RoleBinding): ps -n shop (json, table), ps deploy/orders,
#            capture stacks (files, manifest), capture dump --parallel 3 with --max-unavailable 1 (no
#            overlap), `kubectl diagport ps` through the plugin symlink; bob (may look, not port-forward):
#            exit 4 naming the permission; -A: namespace other "access denied"; a pod whose port is not
#            forwarded: the kubelet's reason; every agent logged caller alice
#   ecs/*    capture stacks --ecs-cluster --ecs-service (one agent needs its Secrets Manager token), ps
set -uo pipefail
cd "$(dirname "$0")/../.." || exit 1
T_NAME=fleet_e2e
source tests/lib.sh
agent_setup fleet-e2e
cleanup_more() { [ -z "${KEEP:-}" ] || { rm -rf /tmp/dp-fleet-e2e-kept; cp -r "$W" /tmp/dp-fleet-e2e-kept; echo "kept /tmp/dp-fleet-e2e-kept"; }; }
PY=/usr/bin/python3
KUBECTL=/usr/bin/kubectl
AWS=/usr/bin/aws
I=tests/integration
for tool in openssl "$PY" "$KUBECTL" "$AWS" jq curl; do
	command -v "$tool" > /dev/null || { fail prerequisites "$tool is not installed (scripts/prereqs.sh test)"; exit 0; }
done
build_apps
oneline() { head -c "${2:-400}" "$1" 2> /dev/null | tr '\n\t' '  '; }

# ---- four real agents, each with the real webapp: 1-3 the pods of deploy/orders, 4 (token) for ECS ----
declare -a URL PORT APPPID
start_one() {
	local i=$1
	shift
	mkdir -p -m 0777 "$W/a$i"
	"$D" launch --socket "$W/a$i/port" --urls http://127.0.0.1:0 --dumps "$W/a$i" "$@" 2> "$W/a$i/agent.log" &
	PIDS+=($!)
	PORT[$i]=$(listening_port "$W/a$i/agent.log" urls 30 "$!") || { fail setup "agent $i did not start" "$W/a$i/agent.log"; exit 0; }
	URL[$i]=http://127.0.0.1:${PORT[$i]}
}
printf 'e2e-token-1-0123456789abcdef\n' > "$W/agent4-token"
for i in 1 2 3; do start_one $i; done
start_one 4 --auth-token-file "$W/agent4-token"
for i in 1 2 3 4; do
	hdr=()
	[ "$i" = 4 ] && hdr=(-H "Authorization: Bearer e2e-token-1-0123456789abcdef")
	if ! start_webapp "$W/a$i/app.log" "$W/a$i/port" "${URL[$i]}" "${hdr[@]+"${hdr[@]}"}"; then
		fail setup "webapp $i did not attach" "$W/a$i/agent.log"
		exit 0
	fi
	APPPID[$i]=$APID
done

# ---- the API server stand-in: TLS, static tokens, RBAC ----------------------------------------------
{
	openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" -out "$W/ca.crt" -days 2 -subj /CN=fake-ca &&
		openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/api.key" -out "$W/api.csr" -subj /CN=kubernetes &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$W/api.ext" &&
		openssl x509 -req -in "$W/api.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 7 -days 2 -extfile "$W/api.ext" -out "$W/api.crt"
} > "$W/openssl.log" 2>&1 || { fail setup "openssl" "$W/openssl.log"; exit 0; }
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
TA=alice-$(rnd) TB=bob-$(rnd)
printf '%s,alice,u1,"shop-team"\n%s,bob,u2\n' "$TA" "$TB" > "$W/tokens.csv"

# the cluster: deploy/orders (3 replicas, pods made from the template `diagport inject` wrote, each owned by
# the ReplicaSet), legacy (not injected), lonely (injected, ready, its port not forwarded), other/web-0
cat > "$W/deploy.yaml" << 'EOF'
apiVersion: apps/v1
kind: Deployment
metadata: {name: orders, namespace: shop, labels: {app: orders}}
spec:
  replicas: 3
  selector: {matchLabels: {app: orders}}
  template:
    metadata: {labels: {app: orders}}
    spec: {containers: [{name: orders, image: shop/orders:1}]}
EOF
"$D" inject k8s -o json "$W/deploy.yaml" > "$W/deploy.json" 2> "$W/inject.err" || { fail setup "inject" "$W/inject.err"; exit 0; }
"$PY" - "$W/deploy.json" "$W/cluster.json" << 'EOF'
import copy, json, sys
dep = json.load(open(sys.argv[1]))
HASH = "5d8c7f9b4"
dep["metadata"]["uid"] = "d-orders"
dep["status"] = {"replicas": 3, "readyReplicas": 3}
rs = {"apiVersion": "apps/v1", "kind": "ReplicaSet",
      "metadata": {"name": f"orders-{HASH}", "namespace": "shop", "uid": "rs-orders",
                   "labels": {"app": "orders", "pod-template-hash": HASH},
                   "ownerReferences": [{"apiVersion": "apps/v1", "kind": "Deployment", "name": "orders",
                                        "uid": "d-orders", "controller": True}]},
      "spec": {"replicas": 3, "selector": {"matchLabels": {"app": "orders", "pod-template-hash": HASH}},
               "template": dep["spec"]["template"]}}

def pod(ns, name, tmpl, labels, owner=None):
    p = {"apiVersion": "v1", "kind": "Pod", "metadata": copy.deepcopy(tmpl["metadata"]),
         "spec": copy.deepcopy(tmpl["spec"])}
    p["metadata"].update(name=name, namespace=ns, uid="uid-" + name, labels=labels)
    if owner:
        p["metadata"]["ownerReferences"] = [owner]
    inits = [c["name"] for c in p["spec"].get("initContainers", [])]
    p["status"] = {"phase": "Running", "podIP": "10.0.0.9",
                   "initContainerStatuses": [{"name": n, "ready": True, "started": True} for n in inits],
                   "containerStatuses": [{"name": c["name"], "ready": True, "started": True} for c in p["spec"]["containers"]]}
    return p

owner = {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": f"orders-{HASH}", "uid": "rs-orders", "controller": True}
plain = {"metadata": {}, "spec": {"containers": [{"name": "legacy", "image": "shop/legacy:1"}]}}
items = [{"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": n}} for n in ("shop", "other")]
items += [dep, rs]
items += [pod("shop", f"orders-{HASH}-{s}", dep["spec"]["template"], {"app": "orders", "pod-template-hash": HASH}, owner)
          for s in ("aaaaa", "bbbbb", "ccccc")]
items += [pod("shop", "legacy", plain, {"app": "legacy"}), pod("shop", "lonely", dep["spec"]["template"], {"app": "lonely"}),
          pod("other", "web-0", dep["spec"]["template"], {"app": "web"})]
json.dump({"apiVersion": "v1", "kind": "List", "items": items}, open(sys.argv[2], "w"))
EOF
# beside manifests/rbac/ as they are: shop-team may list pods in every namespace (so -A lists), bob may look at
# shop (pods, deployments) but has no diagport-capture
cat > "$W/rbac.yaml" << 'EOF'
apiVersion: v1
kind: List
items:
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRole
    metadata: {name: pod-lister}
    rules: [{apiGroups: [""], resources: [pods], verbs: [get, list]}]
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: ClusterRoleBinding
    metadata: {name: shop-team-pod-lister}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: pod-lister}
    subjects: [{apiGroup: rbac.authorization.k8s.io, kind: Group, name: shop-team}]
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: Role
    metadata: {name: viewer, namespace: shop}
    rules:
      - {apiGroups: [""], resources: [pods], verbs: [get, list]}
      - {apiGroups: [apps], resources: ["*"], verbs: [get]}
  - apiVersion: rbac.authorization.k8s.io/v1
    kind: RoleBinding
    metadata: {name: bob-viewer, namespace: shop}
    roleRef: {apiGroup: rbac.authorization.k8s.io, kind: Role, name: viewer}
    subjects: [{apiGroup: rbac.authorization.k8s.io, kind: User, name: bob}]
EOF
mkdir -p "$W/api"
"$PY" $I/kubeapi_fake.py --cert "$W/api.crt" --key "$W/api.key" --token-auth-file "$W/tokens.csv" \
	--log "$W/api/req.log" --ready "$W/api/port" --seed "$W/cluster.json" --seed "$W/rbac.yaml" \
	--seed manifests/rbac/clusterrole.yaml --seed manifests/rbac/rolebinding-example.yaml > "$W/api/fake.out" 2>&1 &
PIDS+=($!)
wait_for "$W/api/port" . 10 || { fail setup "the fake API server did not start" "$W/api/fake.out"; exit 0; }
API=https://127.0.0.1:$(cat "$W/api/port")
PODS=(orders-5d8c7f9b4-aaaaa orders-5d8c7f9b4-bbbbb orders-5d8c7f9b4-ccccc)
for i in 1 2 3; do
	curl -sf --cacert "$W/ca.crt" -X POST "$API/__fake/forward" \
		-d "{\"namespace\":\"shop\",\"pod\":\"${PODS[$((i - 1))]}\",\"port\":52323,\"to\":\"127.0.0.1:${PORT[$i]}\"}" > /dev/null ||
		{ fail setup "POST /__fake/forward"; exit 0; }
done

mkdir -p "$W/kube" "$W/home"
K=$W/kube/config
cat > "$K" << EOF
apiVersion: v1
kind: Config
current-context: alice
clusters: [{name: fake, cluster: {server: $API, certificate-authority: $W/ca.crt}}]
users: [{name: alice, user: {token: $TA}}, {name: bob, user: {token: $TB}}]
contexts:
  - {name: alice, context: {cluster: fake, user: alice, namespace: shop}}
  - {name: bob, context: {cluster: fake, user: bob, namespace: shop}}
EOF
export HOME=$W/home KUBECONFIG=$K
unset DIAGPORT_TOKEN

# ---- kubectl checks the stand-in -----------------------------------------------------------------------
"$KUBECTL" get pods -n shop -l app=orders -o json > "$W/kc.json" 2> "$W/kc.err"
WHY="$(oneline "$W/kc.err")"
check kube/kubectl-get-pods test "$(jq -r '[.items[].metadata.name] | join(",")' "$W/kc.json" 2> /dev/null)" = "$(IFS=,; echo "${PODS[*]}")"
WHY="$(oneline "$W/kc.err")"
check kube/kubectl-can-i-alice test "$("$KUBECTL" auth can-i create pods --subresource=portforward -n shop 2> "$W/kc.err")" = yes
check kube/kubectl-can-i-bob test "$("$KUBECTL" --context bob auth can-i create pods --subresource=portforward -n shop 2> "$W/kc.err")" = no
check kube/kubectl-can-i-other test "$("$KUBECTL" auth can-i create pods --subresource=portforward -n other 2> "$W/kc.err")" = no

# ---- ps -n shop -o json ----------------------------------------------------------------------------------
"$D" ps -n shop -o json > "$W/ps.json" 2> "$W/ps.err"
rc=$?
WHY="exit $rc: $(oneline "$W/ps.err")"
check kube/ps-exit test "$rc" = 0
WHY="$(oneline "$W/ps.json" 1500)"
check kube/ps-json "$PY" - "$W/ps.json" "${APPPID[1]}" "${APPPID[2]}" "${APPPID[3]}" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "ProcessList" and d["caller"] == "alice", d
items = {i["target"]: i for i in d["items"]}
for n, pid in zip(("aaaaa", "bbbbb", "ccccc"), sys.argv[2:5]):
    it = items["shop/orders-5d8c7f9b4-" + n]
    assert it["state"] == "ready" and it["workload"] == "shop/Deployment/orders", it
    p = it["processes"]
    assert len(p) == 1 and p[0]["pid"] == int(pid) and p[0]["name"] == "webapp", it
assert items["shop/legacy"]["state"] != "ready" and items["shop/legacy"]["reason"] == "not injected", items["shop/legacy"]
assert items["shop/lonely"]["state"] == "unavailable", items["shop/lonely"]
assert len(items) == 5, sorted(items)
EOF

# ---- ps deploy/orders (table) -----------------------------------------------------------------------------
"$D" ps deploy/orders -n shop > "$W/ps.txt" 2> "$W/ps-t.err"
rc=$?
WHY="exit $rc: $(oneline "$W/ps.txt" 800) $(oneline "$W/ps-t.err")"
check kube/ps-table bash -c "test $rc = 0 && head -1 '$W/ps.txt' | grep -q 'WORKLOAD *TARGET *CONTAINER *PID' &&
	test \$(grep -c '^shop/Deployment/orders .*shop/orders-5d8c7f9b4-.* webapp .*ready' '$W/ps.txt') = 3 &&
	grep -q ' ${APPPID[2]} webapp' '$W/ps.txt' && ! grep -q -e legacy -e lonely '$W/ps.txt'"

# ---- capture stacks deploy/orders -------------------------------------------------------------------------
"$D" capture stacks deploy/orders -n shop -o "$W/stacks" > "$W/stacks.out" 2> "$W/stacks.err"
rc=$?
WHY="exit $rc: $(oneline "$W/stacks.out") $(oneline "$W/stacks.err")"
check kube/stacks-exit test "$rc" = 0
WHY="$(oneline "$W/stacks/manifest.json" 1200); files: $(ls "$W/stacks" 2>&1 | tr '\n' ' ')"
check kube/stacks-manifest "$PY" - "$W/stacks" "${APPPID[1]}" "${APPPID[2]}" "${APPPID[3]}" << 'EOF'
import hashlib, json, os, re, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["kind"] == "CaptureManifest" and m["capture"] == "stacks" and m["caller"] == "alice", m
assert (m["succeeded"], m["failed"], m["unavailable"]) == (3, 0, 0), m
files = sorted(f for f in os.listdir(d) if f != "manifest.json")
assert len(files) == 3, files
pods = set()
for it in m["items"]:
    assert it["status"] == "succeeded", it
    data = open(os.path.join(d, it["file"]), "rb").read()
    assert hashlib.sha256(data).hexdigest() == it["sha256"] and len(data) == it["bytes"] > 0, it
    assert data.startswith(b"Thread"), data[:80]
    mt = re.fullmatch(r"shop_(orders-5d8c7f9b4-[a-c]{5})_orders_(\d+)_stacks_\d{8}T\d{6}Z\.txt", it["file"])
    assert mt and int(mt.group(2)) == it["pid"], it["file"]
    pods.add((mt.group(1), it["pid"]))
want = {("orders-5d8c7f9b4-" + n, int(p)) for n, p in zip(("aaaaa", "bbbbb", "ccccc"), sys.argv[2:5])}
assert pods == want, (pods, want)
EOF

# ---- capture dump, three at once but one replica at a time (--max-unavailable 1, the default) --------------
"$D" capture dump --type Mini deploy/orders -n shop --parallel 3 -o "$W/dumps" > "$W/dumps.out" 2> "$W/dumps.err"
rc=$?
WHY="exit $rc: $(oneline "$W/dumps.out") $(oneline "$W/dumps.err")"
check kube/dump-exit test "$rc" = 0
WHY="$("$PY" - "$W/dumps/manifest.json" 2>&1 << 'EOF' | tail -3
import json, sys
print(open(sys.argv[1]).read()[:1500])
EOF
)"
check kube/dump-no-overlap "$PY" - "$W/dumps" << 'EOF'
import datetime, hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
ok = [i for i in m["items"] if i["status"] == "succeeded"]
assert len(ok) == 3 and m["succeeded"] == 3, m
for it in ok:
    f = os.path.join(d, it["file"])
    assert it["file"].startswith("shop_orders-5d8c7f9b4-") and os.path.getsize(f) == it["bytes"] > 100000, it
    assert open(f, "rb").read(4) == b"\x7fELF", it
def span(it):
    t = datetime.datetime.strptime(it["startedAt"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    return t, t + it["durationSeconds"]
spans = sorted(span(i) for i in ok)
for (s1, e1), (s2, e2) in zip(spans, spans[1:]):
    assert s2 + 0.005 >= e1, spans   # each began after the one before it ended
EOF

# ---- kubectl diagport: kubectl finds the plugin on PATH and runs it, KUBECONFIG set -------------------------
mkdir -p "$W/bin"
ln -s "$D" "$W/bin/kubectl-diagport"
PATH="$W/bin:$PATH" "$KUBECTL" diagport ps -n shop -o json > "$W/kps.json" 2> "$W/kps.err"
rc=$?
WHY="exit $rc: $(oneline "$W/kps.err") $(oneline "$W/kps.json")"
check kube/kubectl-plugin-ps bash -c "test $rc = 0 && jq -e '.caller == \"alice\" and
	([.items[] | select(.state == \"ready\") | .processes[0].pid] | sort) == ([${APPPID[1]}, ${APPPID[2]}, ${APPPID[3]}] | sort)' '$W/kps.json'"

# ---- bob: may look, may not port-forward -------------------------------------------------------------------
"$D" capture stacks deploy/orders -n shop --context bob -o "$W/bob" > "$W/bob.out" 2> "$W/bob.err"
rc=$?
WHY="exit $rc: $(oneline "$W/bob.err") $(oneline "$W/bob.out")"
check kube/bob-exit-4 test "$rc" = 4
check kube/bob-names-permission grep -qF 'cannot create pods/portforward in namespace shop (as bob)' "$W/bob.err"
WHY="bob's capture left files: $(ls -A "$W/bob" 2>&1)"
check kube/bob-nothing-written bash -c "test ! -e '$W/bob' || test -z \"\$(ls -A '$W/bob' | grep -v manifest.json)\""

# ---- -A: other's pods listed, unavailable: access denied -----------------------------------------------------
"$D" ps -A -o json > "$W/all.json" 2> "$W/all.err"
rc=$?
WHY="exit $rc: $(oneline "$W/all.err") $(oneline "$W/all.json" 1200)"
check kube/all-namespaces "$PY" - "$W/all.json" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
items = {i["target"]: i for i in d["items"]}
o = items["other/web-0"]
assert o["state"] == "unavailable" and o["reason"].startswith("access denied"), o
assert "pods/portforward in namespace other" in o["reason"], o
assert sum(1 for k, i in items.items() if k.startswith("shop/orders-") and i["state"] == "ready") == 3, items
EOF

# ---- a pod whose port leads nowhere: the kubelet's reason --------------------------------------------------
"$D" capture stacks pod/lonely -n shop -o "$W/lonely" > "$W/lonely.out" 2> "$W/lonely.err"
rc=$?
WHY="exit $rc: $(oneline "$W/lonely/manifest.json" 800) $(oneline "$W/lonely.err")"
check kube/not-forwarded-kubelet-reason bash -c "test $rc != 0 && jq -e '.items[0].status != \"succeeded\" and
	(.items[0].error | test(\"error forwarding port 52323 to pod .*connect: connection refused\"))' '$W/lonely/manifest.json'"
WHY="$(jq -c '.items[] | select(.target == "shop/lonely")' "$W/ps.json")"
check kube/not-forwarded-ps-reason bash -c "jq -e '.items[] | select(.target == \"shop/lonely\") |
	.reason | test(\"error forwarding port 52323 to pod\")' '$W/ps.json'"

# ---- every agent logged the captures with caller alice -----------------------------------------------------
for i in 1 2 3; do
	WHY="agent $i: $(grep capture-started "$W/a$i/agent.log" | tail -2 | tr '\n' ' ')"
	check "kube/agent$i-caller-alice" bash -c "test \"\$(grep capture-started '$W/a$i/agent.log' | jq -r '.kind + \" \" + .caller' |
		sort -u | tr '\n' ,)\" = 'dump alice,stacks alice,'"
done

# ---- ECS: three tasks at 127.0.0.1, their agents on their own ports ----------------------------------------
"$PY" $I/ecs_seed.py "$D" "${PORT[4]}" "$W/seed.json" "${PORT[4]}" "${PORT[1]}" "${PORT[2]}" 2> "$W/seed.err" ||
	{ fail ecs/seed "$(oneline "$W/seed.err")"; exit 0; }
"$PY" $I/ecs_api_fake.py "$W/seed.json" "$W/ecs.port" "$W/ecs.log" 2> "$W/ecs.err" &
PIDS+=($!)
wait_for "$W/ecs.port" . 10 || { fail ecs/setup "the stand-in did not start" "$W/ecs.err"; exit 0; }
EP=http://127.0.0.1:$(cat "$W/ecs.port")
awsenv() { env -i PATH=/usr/bin:/bin HOME="$W/empty" AWS_ENDPOINT_URL="$EP" AWS_REGION=eu-west-1 AWS_EC2_METADATA_DISABLED=true \
	AWS_ACCESS_KEY_ID=AKIDENV AWS_SECRET_ACCESS_KEY=env-secret-key "$@"; }
mkdir -p "$W/empty"
awsenv AWS_PAGER= "$AWS" --endpoint-url "$EP" --output json ecs list-tasks --cluster shopc --service-name orders > "$W/cli.json" 2> "$W/cli.err"
WHY="$(oneline "$W/cli.err")"
check ecs/aws-cli-list-tasks test "$(jq '.taskArns | length' "$W/cli.json" 2> /dev/null)" = 3

awsenv "$D" capture stacks --ecs-cluster shopc --ecs-service orders -o "$W/ecs-stacks" > "$W/ecs.out" 2> "$W/ecs-cap.err"
rc=$?
WHY="exit $rc: $(oneline "$W/ecs.out") $(oneline "$W/ecs-cap.err")"
check ecs/stacks-exit test "$rc" = 0
WHY="$(oneline "$W/ecs-stacks/manifest.json" 1200); files: $(ls "$W/ecs-stacks" 2>&1 | tr '\n' ' ')"
check ecs/stacks-manifest "$PY" - "$W/ecs-stacks" "${APPPID[4]}" "${APPPID[1]}" "${APPPID[2]}" << 'EOF'
import hashlib, json, os, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["capture"] == "stacks" and m["caller"] == "arn:aws:iam::123456789012:user/alice", m
assert (m["succeeded"], m["failed"], m["unavailable"]) == (3, 0, 0), m
files = sorted(f for f in os.listdir(d) if f != "manifest.json")
assert len(files) == 3, files
pids = set()
for it in m["items"]:
    data = open(os.path.join(d, it["file"]), "rb").read()
    assert hashlib.sha256(data).hexdigest() == it["sha256"] and len(data) == it["bytes"] > 0, it
    assert data.startswith(b"Thread"), data[:80]
    pids.add(it["pid"])
assert pids == {int(p) for p in sys.argv[2:5]}, pids
EOF
WHY="$(grep capture-started "$W/a4/agent.log" | tail -1)"
check ecs/token-agent-authenticated bash -c "grep capture-started '$W/a4/agent.log' | tail -1 |
	jq -e '.authenticated == true and .caller == \"arn:aws:iam::123456789012:user/alice\"'"

awsenv "$D" ps --ecs-cluster shopc > "$W/ecs-ps.txt" 2> "$W/ecs-ps.err"
rc=$?
WHY="exit $rc: $(oneline "$W/ecs-ps.txt" 800) $(oneline "$W/ecs-ps.err")"
check ecs/ps-table bash -c "test $rc = 0 && head -1 '$W/ecs-ps.txt' | grep -q 'WORKLOAD *TARGET *CONTAINER *PID' &&
	test \$(grep -c '^shopc/service:orders .* webapp .*ready' '$W/ecs-ps.txt') = 3 &&
	grep -q ' ${APPPID[4]} webapp' '$W/ecs-ps.txt'"
WHY="a token in the output: $(grep -l e2e-token "$W"/*.out "$W"/*.err "$W"/*.txt 2> /dev/null)"
check ecs/no-token-printed bash -c "! grep -q e2e-token '$W'/*.out '$W'/*.err '$W'/*.txt '$W'/ps.json '$W'/all.json '$W'/ecs-stacks/manifest.json"
exit 0
