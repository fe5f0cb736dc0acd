#!/usr/bin/env bash
# fleet_kube.sh - Kubernetes discovery for the fleet client (fleet/kube*.c, kubeconfig.c, kconn.c, kexec.c, kapi.c)
# against kubeapi_fake.py (no kube-apiserver can run here: see its header), seeded with
# tests/integration/data/fleet_kube/*.yaml and manifests/rbac/*.yaml as they are. Real kubectl, with the
# same kubeconfig, checks the fake first; then fleet_kube_driver.c (built here) runs
# fleet_kube_discover and prints the set as JSON lines. Results:
#   kubectl/*    get pods -l (JSON), get deploy, auth can-i create pods/portforward (alice yes, bob no),
#                auth whoami with a token, a client certificate and an exec plugin
#   deploy/*     deploy/orders: its pods through the ReplicaSet, workload shop/Deployment/orders, the token
#                from the agent's Secret, the Pending and agent-not-ready pods named as such, the caller
#   refs/*       sts (set-based selector, another port, suspend mode, two containers), job (a finished pod
#                not listed), ds, pod/NAME and a bare NAME, a missing one (not found), a bad kind
#   select/*     no ref: the namespace's pods (not-injected one included); -l equality and set-based;
#                --container; pagination past one page of 500 pods
#   all/*        -A --capture as alice: shop's pods, billing's denied ("access denied: cannot create ...")
#   denied/*     bob: "cannot create pods/portforward in namespace shop (as bob)"; carol cannot list pods;
#                bob without --capture: the token Secret he may not read named in why_not
#   auth/*       client certificate (inline data), exec plugin (v1beta1 and v1 with provideClusterInfo),
#                basic, tokenFile, oidc id-token; a failing plugin and an expired id-token named
#   merge/*      KUBECONFIG=a:b merged as kubectl merges it (first definition wins, current-context)
#   bad/*        a kubeconfig missing exec.command, not YAML, an unknown context: file and field named
#   incluster/*  no kubeconfig: the service account (a private mount namespace holds its files)
#   pages/*      a list whose metadata.continue repeats (EREMOTE after 2 pages), never ends with 500 pods a
#                page (the 50,000-pod cap, named), never ends with empty pages (EREMOTE after 1000 pages)
#   names/*      pods whose namespace, name or token Secret name is not a DNS-1123 one: listed with a why_not,
#                no URL, never in a request; the valid pod beside them read as usual
#   tls/*        a pod whose agent serves https (injected with tls-secret: `--urls https://+:52323`), a real agent
#                with a test CA's certificate behind the port-forward: `diagport ps` speaks TLS through the tunnel
#                (the agent answers plain http on that port with probes only), verifies the chain with --cacert
#                (another CA: unavailable, "certificate verif...") and checks no name (the API server chose the pod)
#   tokens/*     `diagport capture stacks -A` as oscar (diagport-capture in every namespace) over the port-forward
#                to two stand-in agents (hostile_agent.py, which records every request's headers): shop's
#                injected pod, whose agent reads Secret orders-agent-token, and a look-alike in namespace
#                team-b (the status record and a diagport-agent container, no Secret; its agent wants a
#                token). With $DIAGPORT_TOKEN set the look-alike gets no Authorization header, the capture
#                from it fails naming why, shop's agent gets its own Secret's token; with --token-file the
#                command is refused (exit 2) before any agent is called
#   ui/*         `diagport ui -n shop`: the TLS pod listed through the port-forward (no token in what the page gets),
#                SIGTERM exits 0; bob (no pods/portforward) is refused with exit 4 before a URL is printed
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=fleet-kube
. tests/lib.sh
agent_setup fleet-kube
cleanup_more() { [ -z "${KEEP:-}" ] || { rm -rf /tmp/dp-fleet-kube-kept; cp -r "$W" /tmp/dp-fleet-kube-kept; echo "kept /tmp/dp-fleet-kube-kept"; }; }
PY=/usr/bin/python3
KUBECTL=/usr/bin/kubectl
DATA=$PWD/tests/integration/data/fleet_kube
oneline() { head -c 400 "$1" 2> /dev/null | tr '\n\t' '  '; }
for tool in openssl "$PY" "$KUBECTL" jq unshare; do
  command -v "$tool" > /dev/null || { fail prerequisites "$tool is not installed (scripts/prereqs.sh test)"; exit 0; }
done
[ -f "$B/libdiagport.a" ] || make > "$W/make.log" 2>&1 || { fail build "make failed" "$W/make.log"; exit 0; }
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -I. -Icommon $(pkg-config --cflags jansson libcurl) -o "$W/driver" \
  tests/integration/fleet_kube_driver.c "$B/libdiagport.a" $(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread \
  2> "$W/cc.log" || { fail build-driver "$(oneline "$W/cc.log")"; exit 0; }

# --- certificates: the API server's, a client CA and dave's certificate (CN dave, O shop-team) ----------
{
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" -out "$W/ca.crt" -days 2 -subj /CN=fake-ca &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/api.key" -out "$W/api.csr" -subj /CN=kubernetes &&
  printf 'subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes.default.svc\nextendedKeyUsage=serverAuth\n' > "$W/api.ext" &&
  openssl x509 -req -in "$W/api.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 7 -days 2 -extfile "$W/api.ext" -out "$W/api.crt" &&
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/client-ca.key" -out "$W/client-ca.crt" -days 2 -subj /CN=client-ca &&
  openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/dave.key" -out "$W/dave.csr" -subj "/O=shop-team/CN=dave" &&
  printf 'extendedKeyUsage=clientAuth\n' > "$W/client.ext" &&
  openssl x509 -req -in "$W/dave.csr" -CA "$W/client-ca.crt" -CAkey "$W/client-ca.key" -set_serial 9 -days 2 -extfile "$W/client.ext" -out "$W/dave.crt"
} > "$W/openssl.log" 2>&1 || { fail setup "openssl" "$W/openssl.log"; exit 0; }

# --- users: static tokens (kube-apiserver's CSV), basic, the service account -------------------------
rnd() { head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
TA=alice-$(rnd) TB=bob-$(rnd) TC=carol-$(rnd) TE=eve-$(rnd) TSA=sa-$(rnd) PW=pw-$(rnd) TO=oscar-$(rnd)
b64url() { "$PY" -c 'import base64,sys; print(base64.urlsafe_b64encode(sys.argv[1].encode()).decode().rstrip("="))' "$1"; }
NOW=$(date +%s)
JWT_OK="$(b64url '{"alg":"none"}').$(b64url "{\"sub\":\"grace\",\"exp\":$((NOW + 3600))}").sig"
JWT_OLD="$(b64url '{"alg":"none"}').$(b64url "{\"sub\":\"grace\",\"exp\":$((NOW - 3600))}").sig"
cat > "$W/tokens.csv" << EOF2
$TA,alice,u1,"shop-team"
$TB,bob,u2
$TC,carol,u3
$TE,eve,u5,"shop-team"
$TO,oscar,u9,"oncall"
$JWT_OK,grace,u7,"shop-team"
$TSA,system:serviceaccount:shop:diagport-cli,u8,"system:serviceaccounts,system:serviceaccounts:shop"
EOF2
printf '%s,frank,u6,"shop-team"\n' "$PW" > "$W/basic.csv"
printf '%s\n' "$TE" > "$W/eve.token"

"$PY" -c 'import json; print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "Pod",
  "metadata": {"name": f"bulk-{i:04d}", "namespace": "bulk", "labels": {"app": "bulk"}}, "status": {"phase": "Running"}}
  for i in range(520)]}))' > "$W/bulk.json"
mkdir -p "$W/api"
start_fake() { # seeds...: the fake on a free port; PORT, SERVER
  rm -f "$W/api/port"
  "$PY" tests/integration/kubeapi_fake.py --cert "$W/api.crt" --key "$W/api.key" --token-auth-file "$W/tokens.csv" \
    --basic-auth-file "$W/basic.csv" --client-ca-file "$W/client-ca.crt" --log "$W/api/req.log" --ready "$W/api/port" \
    --seed "$DATA/cluster.yaml" --seed "$DATA/rbac.yaml" --seed manifests/rbac/clusterrole.yaml \
    --seed manifests/rbac/rolebinding-example.yaml --seed "$W/bulk.json" "$@" > "$W/api/fake.out" 2>&1 &
  PIDS+=($!)
  wait_for "$W/api/port" . 10 || { fail setup "the fake API server did not start" "$W/api/fake.out"; exit 0; }
  PORT=$(cat "$W/api/port") SERVER=https://127.0.0.1:$(cat "$W/api/port")
}
start_fake

# --- the kubeconfig: CA by relative path, a user per way of authenticating --------------------------
mkdir -p "$W/kube/certs" "$W/kube/bin" "$W/home"
cp "$W/ca.crt" "$W/kube/certs/ca.crt"
cat > "$W/kube/bin/plugin.sh" << 'EOF2'
#!/bin/sh
# an exec credential plugin: checks what client-go promises it, prints an ExecCredential
case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) ;; *) echo "no KUBERNETES_EXEC_INFO" >&2; exit 5 ;; esac
[ "$1" = get-token ] && [ "$2" = --cluster ] && [ "$3" = fake ] || { echo "bad args: $*" >&2; exit 6; }
if [ -n "$WANT_SERVER" ]; then
  case "$KUBERNETES_EXEC_INFO" in *"\"server\":\"$WANT_SERVER\""*'"config":{"region":"test-1"}'*) ;;
    *) echo "no cluster info in $KUBERNETES_EXEC_INFO" >&2; exit 7 ;; esac
fi
printf '{"kind":"ExecCredential","apiVersion":"%s","status":{"token":"%s"}}\n' "$API_VERSION" "$(cat "$TOKEN_FILE")"
EOF2
cat > "$W/kube/bin/broken.sh" << 'EOF2'
#!/bin/sh
echo "broken.sh: the identity provider said no" >&2
exit 3
EOF2
chmod +x "$W/kube/bin/plugin.sh" "$W/kube/bin/broken.sh"
DAVE_CRT=$(base64 -w0 < "$W/dave.crt") DAVE_KEY=$(base64 -w0 < "$W/dave.key")
K=$W/kube/config
cat > "$K" << EOF2
apiVersion: v1
kind: Config
current-context: alice
clusters:
  - name: fake
    cluster:
      server: $SERVER
      certificate-authority: certs/ca.crt
      extensions:
        - name: client.authentication.k8s.io/exec
          extension: {region: test-1}
users:
  - {name: alice, user: {token: $TA}}
  - {name: bob, user: {token: $TB}}
  - {name: carol, user: {token: $TC}}
  - {name: dave, user: {client-certificate-data: $DAVE_CRT, client-key-data: $DAVE_KEY}}
  - name: eve
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1beta1
        command: ./bin/plugin.sh
        args: [get-token, --cluster, fake]
        env: [{name: TOKEN_FILE, value: $W/eve.token}, {name: API_VERSION, value: client.authentication.k8s.io/v1beta1}]
  - name: eve-v1
    user:
      exec:
        apiVersion: client.authentication.k8s.io/v1
        interactiveMode: Never
        provideClusterInfo: true
        command: plugin.sh
        args: [get-token, --cluster, fake]
        env:
          - {name: TOKEN_FILE, value: $W/eve.token}
          - {name: API_VERSION, value: client.authentication.k8s.io/v1}
          - {name: WANT_SERVER, value: "$SERVER"}
  - name: broken
    user:
      exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: ./bin/broken.sh, installHint: "ask the platform team"}
  - {name: frank, user: {username: frank, password: $PW}}
  - {name: eve-file, user: {tokenFile: $W/eve.token}}
  - {name: oscar, user: {token: $TO}}
  - name: grace
    user: {auth-provider: {name: oidc, config: {id-token: "$JWT_OK", client-id: diagport}}}
  - name: grace-old
    user: {auth-provider: {name: oidc, config: {id-token: "$JWT_OLD", client-id: diagport}}}
contexts:
$(for u in alice bob carol dave eve eve-v1 broken frank eve-file grace grace-old oscar; do
  printf '  - {name: %s, context: {cluster: fake, user: %s, namespace: shop}}\n' "$u" "$u"; done)
EOF2

run() { # ARGS...: the driver, its output in $W/out (JSON lines), its stderr in $W/err
  HOME=$W/home PATH=$W/kube/bin:$PATH "$W/driver" "$@" > "$W/out" 2> "$W/err"
}
line() { grep -F "\"name\":\"$1\"" "$W/out"; } # the agent line of NS/POD
field() { line "$1" | jq -r ".$2"; }
is() { # NAME GOT WANT
  if [ "$2" = "$3" ]; then pass "$1"; else fail "$1" "got '$2', want '$3' ($(oneline "$W/out") $(oneline "$W/err"))"; fi
}
has() { # NAME TEXT: the output holds TEXT
  if grep -qF -- "$2" "$W/out"; then pass "$1"; else fail "$1" "no '$2' in: $(oneline "$W/out") $(oneline "$W/err")"; fi
}
nagents() { grep -c '"name"' "$W/out"; }

# --- kubectl against the fake, with the same kubeconfig ---------------------------------------------
kc() { HOME=$W/home PATH=$W/kube/bin:$PATH "$KUBECTL" --kubeconfig "$K" --cache-dir "$W/home/cache" "$@"; }
kc get pods -l 'app=orders,tier in (web,api)' -n shop -o json > "$W/kc.json" 2> "$W/kc.err"
is kubectl/get-pods-json "$(jq -r '[.items[].metadata.name] | sort | join(",")' "$W/kc.json" 2> /dev/null)" \
  "orders-7d9f8c6b5-abcde,orders-7d9f8c6b5-fghij"
kc get deploy orders -n shop > "$W/kc.out" 2> "$W/kc.err"
WHY="kubectl get deploy: $(oneline "$W/kc.out") $(oneline "$W/kc.err")" check kubectl/get-deploy grep -q '^orders ' "$W/kc.out"
kc auth can-i create pods --subresource=portforward -n shop > "$W/out" 2> "$W/err"
is kubectl/can-i-alice "$(cat "$W/out")" yes
kc --context bob auth can-i create pods --subresource=portforward -n shop > "$W/out" 2> "$W/err"
is kubectl/can-i-bob "$(cat "$W/out")" no
# "pods/portforward" to can-i is TYPE/NAME (a pod named portforward), not the subresource: create on pods is
# not granted, so the answer is no, as a real API server says
kc auth can-i create pods/portforward -n shop > "$W/out" 2> "$W/err"
is kubectl/can-i-type-name "$(cat "$W/out")" no
for u in alice dave eve; do
  kc --context "$u" auth whoami -o json > "$W/out" 2> "$W/err"
  is "kubectl/whoami-$u" "$(jq -r .status.userInfo.username "$W/out" 2> /dev/null)" "$u"
done
kc --context bob get pods -n billing > /dev/null 2> "$W/kc.err"
WHY="kubectl's 403: $(oneline "$W/kc.err")" check kubectl/forbidden-message \
  grep -qF 'pods is forbidden: User "bob" cannot list resource "pods" in API group "" in the namespace "billing"' "$W/kc.err"

# --- deploy/NAME ---------------------------------------------------------------------------------------
EXPECT_TOKEN=s3cret-agent-token run --kubeconfig "$K" --capture deploy/orders
is deploy/caller "$(head -1 "$W/out" | jq -r .caller)" alice
is deploy/count "$(nagents)" 3
is deploy/workload "$(field shop/orders-7d9f8c6b5-abcde workload)" shop/Deployment/orders
is deploy/url "$(field shop/orders-7d9f8c6b5-abcde url)" http://orders-7d9f8c6b5-abcde.shop:52323
is deploy/ready "$(field shop/orders-7d9f8c6b5-abcde why_not)" null
is deploy/token "$(field shop/orders-7d9f8c6b5-abcde token_ok)" true
is deploy/mode "$(field shop/orders-7d9f8c6b5-abcde mode)/$(field shop/orders-7d9f8c6b5-abcde container)" nosuspend/orders
is deploy/dialer "$(field shop/orders-7d9f8c6b5-abcde dialer)" true
is deploy/not-ready "$(field shop/orders-7d9f8c6b5-fghij why_not)" "agent not ready"
is deploy/pending "$(field shop/orders-7d9f8c6b5-pendg why_not)" "pod not running (Pending)"
WHY="the token is printed" check deploy/no-token-in-output bash -c "! grep -q s3cret '$W/out' '$W/err'"
for alias in deployment/orders deployments/orders; do
  run --kubeconfig "$K" "$alias"
  is "deploy/alias-${alias%%/*}" "$(nagents)" 3
done

# --- other refs --------------------------------------------------------------------------------------
run --kubeconfig "$K" sts/cache
is refs/sts "$(jq -sr '[.[] | select(.name) | .name] | join(",")' "$W/out")" shop/cache-0
is refs/sts-fields "$(field shop/cache-0 port) $(field shop/cache-0 mode) $(field shop/cache-0 container) $(field shop/cache-0 workload)" \
  "6000 suspend redis,worker shop/StatefulSet/cache"
is refs/sts-url "$(field shop/cache-0 url)" http://cache-0.shop:6000
run --kubeconfig "$K" job/migrate
is refs/job "$(jq -sr '[.[] | select(.name) | .name + " " + .workload] | join(",")' "$W/out")" "shop/migrate-x7k2p shop/Job/migrate"
run --kubeconfig "$K" ds/node-probe
is refs/ds "$(field shop/node-probe-q8w4r workload)" shop/DaemonSet/node-probe
run --kubeconfig "$K" pod/legacy cache-0
is refs/pods "$(field shop/legacy why_not) $(field shop/legacy workload) $(field shop/cache-0 why_not)" "not injected shop/Pod/legacy null"
run --kubeconfig "$K" deploy/nothere
has refs/not-found "error ENOTFOUND: Deployment nothere in namespace shop: not found"
run --kubeconfig "$K" svc/orders
has refs/bad-kind "svc/orders: svc is not a kind diagport follows"

# --- selectors -----------------------------------------------------------------------------------------
run --kubeconfig "$K"
is select/namespace "$(jq -sr '[.[] | select(.name) | .name] | sort | join(",")' "$W/out")" \
  "shop/cache-0,shop/cache-old,shop/legacy,shop/migrate-x7k2p,shop/node-probe-q8w4r,shop/orders-7d9f8c6b5-abcde,shop/orders-7d9f8c6b5-fghij,shop/orders-7d9f8c6b5-pendg"
run --kubeconfig "$K" -l 'app=orders,tier!=api'
is select/equality "$(jq -sr '[.[] | select(.name) | .name] | sort | join(",")' "$W/out")" \
  "shop/orders-7d9f8c6b5-abcde,shop/orders-7d9f8c6b5-pendg"
run --kubeconfig "$K" -l 'app in (cache,legacy),!legacy'
is select/set-based "$(jq -sr '[.[] | select(.name) | .name] | sort | join(",")' "$W/out")" "shop/cache-0,shop/legacy"
run --kubeconfig "$K" --container worker
is select/container "$(jq -sr '[.[] | select(.name) | .name] | join(",")' "$W/out")" shop/cache-0

# --- all namespaces, one forbidden for port-forward ----------------------------------------------------
run --kubeconfig "$K" -A --capture
is all/billing "$(field billing/invoices-0 why_not)" "access denied: cannot create pods/portforward in namespace billing"
is all/shop "$(field shop/cache-0 why_not)" null
is all/count "$(nagents)" 529 # 520 of them in namespace bulk

# --- refusals --------------------------------------------------------------------------------------------
run --kubeconfig "$K" --context bob --capture deploy/orders
is denied/bob "$(cat "$W/out")" "error EAUTH: cannot create pods/portforward in namespace shop (as bob)"
run --kubeconfig "$K" --context carol
is denied/carol "$(cat "$W/out")" "error EAUTH: cannot list pods in namespace shop (as carol)"
run --kubeconfig "$K" --context bob deploy/orders
is denied/bob-secret "$(field shop/orders-7d9f8c6b5-abcde why_not)" \
  "the agent needs its token from Secret orders-agent-token in shop, which you may not get (a --token-file is not sent to pods found through Kubernetes)"

run --kubeconfig "$K" -n bulk
is select/pages "$(nagents) $(grep -c '^GET /api/v1/namespaces/bulk/pods 200' "$W/api/req.log")" "520 2"

# --- each way of authenticating ---------------------------------------------------------------------------
auth() { # NAME CONTEXT WANT-CALLER
  run --kubeconfig "$K" --context "$2" --capture deploy/orders
  is "auth/$1" "$(head -1 "$W/out" | jq -r .caller 2> /dev/null) $(nagents)" "$3 3"
}
auth client-cert dave dave
auth exec-v1beta1 eve eve
auth exec-v1 eve-v1 eve
auth basic frank frank
auth token-file eve-file eve
auth oidc grace grace
run --kubeconfig "$K" --context broken
is auth/exec-failure "$(cat "$W/out")" \
  "error EAUTH: $K: users[broken].user.exec: ./bin/broken.sh failed with exit status 3 (its own message is above)"
WHY="the plugin's stderr is passed through: $(oneline "$W/err")" check auth/exec-stderr grep -q 'the identity provider said no' "$W/err"
run --kubeconfig "$K" --context grace-old
has auth/oidc-expired "users[grace-old].user.auth-provider: the id-token has expired and there is no refresh-token"
sed 's/plugin.sh$/no-such-plugin/' "$K" > "$W/kube/missing.yaml"
run --kubeconfig "$W/kube/missing.yaml" --context eve-v1
has auth/exec-missing "users[eve-v1].user.exec: cannot run no-such-plugin: No such file or directory"

# --- KUBECONFIG=a:b, merged as kubectl merges it ------------------------------------------------------
CA_DATA=$(base64 -w0 < "$W/ca.crt")
cat > "$W/kube/a.yaml" << EOF2
apiVersion: v1
kind: Config
contexts: [{name: merged, context: {cluster: fake, user: alice, namespace: shop}}]
users: [{name: alice, user: {token: $TA}}]
EOF2
cat > "$W/kube/b.yaml" << EOF2
apiVersion: v1
kind: Config
current-context: merged
clusters: [{name: fake, cluster: {server: $SERVER, certificate-authority-data: $CA_DATA}}]
users: [{name: alice, user: {token: $TC}}]
contexts: [{name: merged, context: {cluster: fake, user: alice, namespace: billing}}]
EOF2
KUBECONFIG=$W/kube/a.yaml:$W/kube/nothere.yaml:$W/kube/b.yaml run --capture
is merge/first-wins "$(head -1 "$W/out" | jq -r .caller) $(jq -sr '[.[] | select(.name) | .namespace] | unique | join(",")' "$W/out")" \
  "alice shop"
KUBECONFIG=$W/kube/a.yaml:$W/kube/b.yaml HOME=$W/home "$KUBECTL" --cache-dir "$W/home/cache" auth whoami -o json > "$W/out" 2> "$W/err"
is merge/kubectl-agrees "$(jq -r .status.userInfo.username "$W/out" 2> /dev/null)" alice

# --- bad kubeconfigs: the file and the field named ------------------------------------------------------
sed 's|command: ./bin/plugin.sh|args2: []|' "$K" > "$W/kube/bad.yaml"
run --kubeconfig "$W/kube/bad.yaml" --context eve
is bad/exec-command "$(cat "$W/out")" "error EINVAL: $W/kube/bad.yaml: users[eve].user.exec.command: missing"
printf 'clusters: [\n' > "$W/kube/broken.yaml"
run --kubeconfig "$W/kube/broken.yaml"
has bad/not-yaml "error EINVAL: $W/kube/broken.yaml:2:1: "
run --kubeconfig "$K" --context nobody
is bad/context "$(cat "$W/out")" "error EINVAL: $K: contexts[nobody]: no such context (--context)"
sed 's|certificate-authority: certs/ca.crt|certificate-authority-data: "not base64!"|' "$K" > "$W/kube/bad-ca.yaml"
run --kubeconfig "$W/kube/bad-ca.yaml"
is bad/ca-data "$(cat "$W/out")" "error EINVAL: $W/kube/bad-ca.yaml: clusters[fake].cluster.certificate-authority-data: not base64"
mkdir -p "$W/home2/.kube" && cp "$W/kube/bad.yaml" "$W/home2/.kube/config"
env -u KUBECONFIG HOME="$W/home2" "$W/driver" --context eve > "$W/out" 2> "$W/err"
is bad/home-config "$(cat "$W/out")" "error EINVAL: ~/.kube/config: users[eve].user.exec.command: missing"

# --- in-cluster: no kubeconfig, the service account's files (in a private mount namespace) ---------------
mkdir -p "$W/sa"
cp "$W/ca.crt" "$W/sa/ca.crt"
printf '%s' "$TSA" > "$W/sa/token"
printf 'shop' > "$W/sa/namespace"
EXPECT_TOKEN=s3cret-agent-token unshare -m sh -c '
  mount -t tmpfs none /run && mkdir -p /run/secrets/kubernetes.io/serviceaccount &&
  mount --bind "$1/sa" /run/secrets/kubernetes.io/serviceaccount &&
  exec env -u KUBECONFIG HOME=$1/nohome KUBERNETES_SERVICE_HOST=127.0.0.1 KUBERNETES_SERVICE_PORT=$2 "$1/driver" --capture deploy/orders
' sh "$W" "$PORT" > "$W/out" 2> "$W/err"
is incluster/caller "$(head -1 "$W/out" | jq -r .caller 2> /dev/null)" system:serviceaccount:shop:diagport-cli
is incluster/token "$(field shop/orders-7d9f8c6b5-abcde token_ok)" true
env -u KUBECONFIG -u KUBERNETES_SERVICE_HOST HOME="$W/nohome" "$W/driver" > "$W/out" 2> "$W/err"
has incluster/nothing "error ENOTFOUND: no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a pod"

# --- an API server whose pages never end (a fault answers each list of namespace loopN) ------------------
fault() { curl -sf --cacert "$W/ca.crt" -X POST "$SERVER/__fake/fault" -d "$1" > /dev/null || fail setup "fault $1"; }
lists() { grep -c "^GET /api/v1/namespaces/$1/pods 200" "$W/api/req.log"; }
fault '{"method": "GET", "path": "/api/v1/namespaces/loop1/pods", "action": "pages", "token": "again", "items": 1, "namespace": "loop1", "times": 50}'
timeout 60 bash -c "$(declare -f run); W='$W' K='$K'; run --kubeconfig '$K' -n loop1"
is pages/repeat "$(cat "$W/out")" \
  "error EREMOTE: listing pods: the API server gave the same continue token again after 2 pages (2 pods): its pages would never end"
is pages/repeat-requests "$(lists loop1)" 2
fault '{"method": "GET", "path": "/api/v1/namespaces/loop2/pods", "action": "pages", "items": 500, "namespace": "loop2", "times": 1000}'
timeout 120 bash -c "$(declare -f run); W='$W' K='$K'; run --kubeconfig '$K' -n loop2"
has pages/pod-cap ": listing pods: more than 50000 pods (diagport's cap on one discovery): narrow it down with a selector or a namespace"
is pages/pod-cap-requests "$(lists loop2)" 101
fault '{"method": "GET", "path": "/api/v1/namespaces/loop3/pods", "action": "pages", "items": 0, "namespace": "loop3", "times": 2000}'
timeout 120 bash -c "$(declare -f run); W='$W' K='$K'; run --kubeconfig '$K' -n loop3"
is pages/page-cap "$(cat "$W/out")" "error EREMOTE: listing pods: the API server's pages did not end after 1000 pages (0 pods)"
is pages/page-cap-requests "$(lists loop3)" 1000

# --- names from the API server that are not Kubernetes names: listed with why, never in a URL ------------
kc get pod orders-7d9f8c6b5-abcde -n shop -o json > "$W/good-pod.json" 2> "$W/kc.err"
jq -c --slurpfile p "$W/good-pod.json" '$p[0] as $g | {method: "GET", path: "/api/v1/namespaces/evil/pods",
  action: "answer", times: 1, body: {kind: "PodList", apiVersion: "v1", metadata: {resourceVersion: "1"}, items: [
  ($g | .metadata.name = "a@evil.example:80/" | .metadata.namespace = "evil"),
  ($g | .metadata.namespace = "Evil_NS"),
  ($g | .metadata.name = ("a" * 254) | .metadata.namespace = "evil"),
  ($g | .metadata.name = "-x" | .metadata.namespace = "evil"),
  ($g | .metadata.name = "ok-1" | .metadata.namespace = "evil"
      | .spec.volumes |= map(if .secret then .secret.secretName = "../../../api/v1/x" else . end)),
  ($g | .metadata.name = "ok-2.x" | .metadata.namespace = "evil")]}}' "$W/good-pod.json" > "$W/evil.json"
fault "$(cat "$W/evil.json")"
before=$(wc -l < "$W/api/req.log")
run --kubeconfig "$K" -n evil
tail -n +$((before + 1)) "$W/api/req.log" > "$W/evil.log"
NOTDNS="not a DNS-1123 subdomain (lower-case letters, digits, '-' and '.')"
is names/pod "$(field 'evil/a@evil.example:80/' why_not)" "the API server gave a pod name that is not valid: \"a@evil.example:80/\": $NOTDNS"
is names/pod-no-url "$(field 'evil/a@evil.example:80/' url) $(field 'evil/a@evil.example:80/' pod)" "null null"
is names/namespace "$(field 'Evil_NS/orders-7d9f8c6b5-abcde' why_not)" \
  "the API server gave a namespace that is not valid: \"Evil_NS\": not a DNS-1123 label (lower-case letters, digits and '-')"
is names/long "$(jq -r 'select(.name | tostring | startswith("evil/aaaa")) | .why_not' "$W/out")" \
  "the API server gave a pod name that is not valid: \"$(printf 'a%.0s' $(seq 80))...\": it is longer than 253 characters"
is names/edge "$(field evil/-x why_not)" \
  "the API server gave a pod name that is not valid: \"-x\": each part must start and end with a lower-case letter or digit"
is names/secret "$(field evil/ok-1 why_not) $(field evil/ok-1 url)" \
  "the pod's token Secret name is not valid: \"../../../api/v1/x\": each part must start and end with a lower-case letter or digit http://ok-1.evil:52323"
is names/valid-one-read "$(field evil/ok-2.x url)" http://ok-2.x.evil:52323
WHY="$(cat "$W/evil.log")"; check names/no-request-with-them bash -c "! grep -E 'evil\.example|Evil_NS|aaaaaaaa|/-x|api/v1/x' '$W/evil.log'"
WHY="$(cat "$W/evil.log")"; check names/valid-secret-asked grep -q '^GET /api/v1/namespaces/evil/secrets/orders-agent-token ' "$W/evil.log"

# --- a token given by the user never goes to a pod found through Kubernetes (a look-alike would keep it) -----
# The API server lists two pods for -A (an "answer" fault: exactly what it would list were they created):
# shop's real one and team-b's look-alike, each port-forwarded to a stand-in agent that logs what it gets.
start_hostile() { # NAME MODE: the stand-in agent's port in HPORT, its headers in $W/h-NAME.log
  rm -f "$W/h-$1.port"
  "$PY" tests/integration/hostile_agent.py "$2" "$W/h-$1.port" "$W/h-$1.log" > "$W/h-$1.out" 2>&1 &
  PIDS+=($!)
  wait_for "$W/h-$1.port" '[0-9]' 10 || { fail setup "hostile_agent.py $2 did not start" "$W/h-$1.out"; exit 0; }
  HPORT=$(cat "$W/h-$1.port")
}
start_hostile real plain
curl -sf --cacert "$W/ca.crt" -X POST "$SERVER/__fake/forward" \
  -d "{\"namespace\":\"shop\",\"pod\":\"orders-7d9f8c6b5-abcde\",\"port\":52323,\"to\":\"127.0.0.1:$HPORT\"}" > /dev/null ||
  fail setup "forward to the real pod's agent"
start_hostile fake wants-token
curl -sf --cacert "$W/ca.crt" -X POST "$SERVER/__fake/forward" \
  -d "{\"namespace\":\"team-b\",\"pod\":\"orders-lookalike\",\"port\":52323,\"to\":\"127.0.0.1:$HPORT\"}" > /dev/null ||
  fail setup "forward to the look-alike's agent"
jq -c '. as $g | {method: "GET", path: "/api/v1/pods", action: "answer", times: 1, body: {kind: "PodList",
  apiVersion: "v1", metadata: {resourceVersion: "1"}, items: [$g,
  ($g | .metadata.name = "orders-lookalike" | .metadata.namespace = "team-b" | del(.metadata.ownerReferences)
      | .spec.volumes |= map(select(.secret | not))
      | .spec.initContainers |= map(.volumeMounts |= map(select(.name != "diagport-auth"))))]}}' \
  "$W/good-pod.json" > "$W/two-pods.json"
SHARED=shared-token-$(rnd)
printf '%s\n' "$SHARED" > "$W/shared.tok"
chmod 600 "$W/shared.tok"
capture_all() { # OUT-DIR [ARGS...]: capture stacks -A as oscar; exit code in RC, output in $W/cap.out and .err
  local out=$1
  shift
  fault "$(cat "$W/two-pods.json")"
  HOME=$W/home timeout 120 "$D" capture stacks -A --kubeconfig "$K" --context oscar -o "$out" "$@" \
    > "$W/cap.out" 2> "$W/cap.err"
  RC=$?
}
auths() { # NAME: the Authorization headers the stand-in NAME got, one a line ("-" for a request without one)
  jq -r '[.headers[] | select(.[0] | ascii_downcase == "authorization") | .[1]] | if length == 0 then "-" else .[] end' \
    "$W/h-$1.log" 2> /dev/null
}
DIAGPORT_TOKEN=$SHARED capture_all "$W/tok-env"
WHY="exit $RC: $(oneline "$W/cap.out" 600) $(oneline "$W/cap.err")"
check tokens/env-ran bash -c "[ $RC = 1 ] && [ -s '$W/h-fake.log' ] && [ -s '$W/h-real.log' ]"
is tokens/env-lookalike-gets-none "$(auths fake | sort -u | tr '\n' ' ')" "- "
is tokens/env-real-gets-its-own "$(auths real | sort -u | tr '\n' ' ')" "Bearer s3cret-agent-token "
WHY="$(oneline "$W/cap.err")"
check tokens/env-warned grep -qF "warning: \$DIAGPORT_TOKEN is not sent to pods found through Kubernetes" "$W/cap.err"
WHY="$(cat "$W/tok-env/manifest.json" 2> /dev/null | head -c 800)"
check tokens/env-lookalike-why jq -e '[.items[] | select(.target.namespace == "team-b")][0] | .status == "unavailable" and
  (.error | contains("the agent needs a token and its pod has no token Secret of its own (--token-file and $DIAGPORT_TOKEN are not sent to pods found through Kubernetes"))' \
  "$W/tok-env/manifest.json"
check tokens/env-real-succeeded jq -e '[.items[] | select(.target.namespace == "shop")][0].status == "succeeded"' "$W/tok-env/manifest.json"
WHY="the shared token is printed"; check tokens/env-not-printed bash -c "! grep -qF '$SHARED' '$W/cap.out' '$W/cap.err' '$W/tok-env/manifest.json'"
: > "$W/h-fake.log"
: > "$W/h-real.log"
capture_all "$W/tok-file" --token-file "$W/shared.tok"
WHY="exit $RC: $(oneline "$W/cap.err")"
check tokens/file-refused bash -c "[ $RC = 2 ] && grep -qF -- '--token-file goes with --target, --targets-file or --ecs-cluster: an agent found through Kubernetes gets only its own pod' '$W/cap.err'"
WHY="the look-alike got: $(auths fake | tr '\n' ' ')"
check tokens/file-lookalike-gets-none bash -c "[ ! -s '$W/h-fake.log' ] && [ ! -e '$W/tok-file' ]"

# --- an agent served with TLS (tls-secret): TLS through the tunnel, the chain checked with --cacert -------------
mkdir -p "$W/tls"
for ca in tlsca otherca; do
  openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls/$ca.key" -out "$W/tls/$ca.crt" \
    -days 2 -subj "/CN=$ca" 2>> "$W/tls/openssl.err" || fail setup "openssl $ca" "$W/tls/openssl.err"
done
# a name the port-forward never uses: the client must not check it (cert-manager issues the Service's names)
printf 'subjectAltName=DNS:orders.shop.svc\nextendedKeyUsage=serverAuth\n' > "$W/tls/ext"
openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls/tls.key" -out "$W/tls/agent.csr" \
  -subj /CN=orders 2>> "$W/tls/openssl.err" &&
  openssl x509 -req -in "$W/tls/agent.csr" -CA "$W/tls/tlsca.crt" -CAkey "$W/tls/tlsca.key" -set_serial 7 -days 2 \
    -extfile "$W/tls/ext" -out "$W/tls/tls.crt" 2>> "$W/tls/openssl.err" || fail setup "openssl agent" "$W/tls/openssl.err"
printf 's3cret-agent-token\n' > "$W/tls/token" # the pod's Secret orders-agent-token (data/fleet_kube/cluster.yaml)
DIAGPORT_TLS_CERT=$W/tls/tls.crt DIAGPORT_TLS_KEY=$W/tls/tls.key "$D" launch --no-metrics --socket "$W/tls/port" \
  --dumps "$W/tls" --urls https://127.0.0.1:0 --auth-token-file "$W/tls/token" 2> "$W/tls/agent.log" &
TLSAG=$!
PIDS+=($TLSAG)
TP=$(listening_port "$W/tls/agent.log" urls 20 "$TLSAG") || { fail setup "the https agent did not start" "$W/tls/agent.log"; exit 0; }
curl -sf --cacert "$W/ca.crt" -X POST "$SERVER/__fake/forward" \
  -d "{\"namespace\":\"shop\",\"pod\":\"orders-tls\",\"port\":52323,\"to\":\"127.0.0.1:$TP\"}" > /dev/null ||
  fail setup "forward to the https agent"
jq -c '. as $g | {method: "GET", path: "/api/v1/namespaces/shop/pods", action: "answer", times: 1,
  body: {kind: "PodList", apiVersion: "v1", metadata: {resourceVersion: "1"}, items: [$g | .metadata.name = "orders-tls"
  | .spec.initContainers[0].args = ["launch", "--socket", "/diag/port", "--dumps", "/dumps", "--urls", "https://+:52323",
      "--auth-token-file", "/etc/diagport/auth/token"]]}}' "$W/good-pod.json" > "$W/tls/pods.json"
tls_ps() { # ARGS...: `diagport ps -n shop` as alice, JSON in $W/tls/ps.json
  fault "$(cat "$W/tls/pods.json")"
  HOME=$W/home timeout 60 "$D" ps -n shop --kubeconfig "$K" -o json "$@" > "$W/tls/ps.json" 2> "$W/tls/ps.err"
}
tls_ps --cacert "$W/tls/tlsca.crt"
WHY="$(head -c 600 "$W/tls/ps.json") $(oneline "$W/tls/ps.err")"
check tls/verified-ready jq -e '.items[0].target == "shop/orders-tls" and .items[0].state == "ready"' "$W/tls/ps.json"
tls_ps --cacert "$W/tls/otherca.crt"
WHY="$(head -c 600 "$W/tls/ps.json") $(oneline "$W/tls/ps.err")"
check tls/other-ca-refused jq -e '.items[0].state == "unavailable" and (.items[0].reason | test("certificate verif"))' \
  "$W/tls/ps.json"
tls_ps
WHY="$(head -c 600 "$W/tls/ps.json") $(oneline "$W/tls/ps.err")"
check tls/tunnel-without-cacert jq -e '.items[0].state == "ready"' "$W/tls/ps.json"
# the same pod said to serve plain http: the agent's https port refuses it (probes only), so ready above was TLS
jq -c '.body.items[0].spec.initContainers[0].args[6] = "http://+:52323"' "$W/tls/pods.json" > "$W/tls/plain.json"
fault "$(cat "$W/tls/plain.json")"
HOME=$W/home timeout 60 "$D" ps -n shop --kubeconfig "$K" -o json > "$W/tls/ps2.json" 2> "$W/tls/ps2.err"
WHY="$(head -c 600 "$W/tls/ps2.json")"
check tls/plain-http-refused jq -e '.items[0].state != "ready"' "$W/tls/ps2.json"
# --- diagport ui over the same discovery: the pod listed through the port-forward; bob refused before serving --
jq -c '.times = 1000' "$W/tls/pods.json" > "$W/tls/pods-ui.json" # the UI lists the pods again every 10 s
fault "$(cat "$W/tls/pods-ui.json")"
HOME=$W/home TMPDIR=$W "$D" ui -n shop --kubeconfig "$K" --cacert "$W/tls/tlsca.crt" > "$W/ui.out" 2> "$W/ui.err" &
UIPID=$!
PIDS+=($UIPID)
if UIURL=$(ui_url "$W/ui.out" 60); then
  curl -s -b "$W/ui.jar" "$(ui_login "$UIURL" "$W/ui.jar")/api/processes" > "$W/ui.json"
  WHY="$(head -c 600 "$W/ui.json") $(oneline "$W/ui.err")"
  check ui/pod-through-portforward jq -e '.items | length == 1 and .[0].target == "shop/orders-tls" and
    .[0].state == "ready" and .[0].workload != null' "$W/ui.json"
  check ui/no-token-in-page bash -c "! grep -q s3cret-agent-token '$W/ui.json'"
else
  fail ui/pod-through-portforward "diagport ui printed no URL" "$W/ui.err"
fi
kill -TERM "$UIPID" 2> /dev/null
wait "$UIPID"
check ui/stops-0 [ $? = 0 ]
HOME=$W/home TMPDIR=$W timeout 60 "$D" ui -n shop --kubeconfig "$K" --context bob > "$W/ui-bob.out" 2> "$W/ui-bob.err"
RC=$?
WHY="exit $RC: $(oneline "$W/ui-bob.err")"
check ui/bob-denied-before-serving bash -c "[ $RC = 4 ] && grep -q 'cannot create pods/portforward in namespace shop' '$W/ui-bob.err' &&
  ! grep -q secret= '$W/ui-bob.out'"
kill "$TLSAG" 2> /dev/null
