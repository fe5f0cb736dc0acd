#!/usr/bin/env bash
# webhook_image.sh - the webhook as manifests/ deploys it: `make webhook-image` (Containerfile.webhook)
# built with podman, and the Deployment that `kubectl kustomize manifests/base` renders played with
# `podman kube play` from that image, as written (its command, uid 65532, read-only root, every
# capability dropped) but for what a kubelet would provide: the TLS Secret and the ConfigMap are
# directories in place of their volumes (podman 4.3's kube play panics on a secret volume), one
# replica, and the HTTPS port published on 127.0.0.1. The API server's side is played by curl and
# python: the certificate is checked for the Service's DNS name, /healthz and /readyz answer, and an
# AdmissionReview of an annotated pod comes back allowed with the JSON Patch that `diagport webhook
# review` (the same rules, on the host) gives for it, and that patch applied gives a pod with the agent.
# Then the certificate Job of manifests/overlays/self-contained, its command as rendered, runs from the
# same image against the project's API-server stand-in (kubeapi_fake.py: no kube-apiserver installs
# here) and creates the Secret. The image's size is printed and held under 24 MB.
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-webhook-image
. tests/lib.sh
agent_setup webhookimg
. tests/e2e/lib.sh
e2e_setup
for t in kubectl openssl jq curl; do
	command -v "$t" > /dev/null || { fail prerequisites "$t is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done
python3 -c 'import jsonpatch, yaml' 2> "$W/py.err" || { fail prerequisites "python3-jsonpatch, python3-yaml: $(head -c 200 "$W/py.err")"; exit 0; }
IMG=localhost/diagport-webhook:e2e
NS=diagport-system SVC=diagport-webhook
HOST=$SVC.$NS.svc

make -s webhook-image WEBHOOK_IMAGE="$IMG" > "$W/build.out" 2>&1
rc=$?
WHY="make webhook-image: exit $rc: $(tail -5 "$W/build.out")"
check build test "$rc" = 0
[ "$rc" = 0 ] || exit 0
podman image inspect "$IMG" > "$W/inspect.json" 2> /dev/null
size=$(jq '.[0].Size' "$W/inspect.json")
echo "webhook image size: $size bytes" >&2
WHY="the image is $size bytes"
check size-at-most-24MB test "${size:-99999999}" -le 24000000
WHY="$(jq -c '.[0].Config' "$W/inspect.json")"
check config jq -e '.[0].Config | .User == "65532:65532" and .Entrypoint == ["/diagport"] and .Cmd == ["webhook"]' \
	"$W/inspect.json"
podman create --name dp-webhook-export "$IMG" > /dev/null 2>&1
podman export -o "$W/rootfs.tar" dp-webhook-export 2> /dev/null
podman rm -f dp-webhook-export > /dev/null 2>&1
tar -tf "$W/rootfs.tar" > "$W/files.txt" 2> /dev/null
WHY="files: $(grep -c . "$W/files.txt"); shells: $(grep -E '(^|/)(sh|bash|dash|busybox)$' "$W/files.txt" | tr '\n' ' ')"
check no-shell bash -c "grep -qx 'diagport' '$W/files.txt' && ! grep -qE '(^|/)(sh|bash|dash|busybox)$' '$W/files.txt'"

# --- the serving pair, as cert-manager or `webhook certs` would put it in the Secret
cat > "$W/ext" << EOF
subjectAltName=DNS:$SVC,DNS:$SVC.$NS,DNS:$HOST,DNS:$HOST.cluster.local
extendedKeyUsage=serverAuth
EOF
{ openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" -out "$W/ca.crt" \
	-days 2 -subj /CN=webhook-ca &&
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls.key" -out "$W/tls.csr" -subj "/CN=$HOST" &&
	openssl x509 -req -in "$W/tls.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 9 -days 2 -extfile "$W/ext" \
		-out "$W/tls.crt"; } > "$W/openssl.err" 2>&1 || { fail setup "openssl: $(head -c 300 "$W/openssl.err")"; exit 0; }
mkdir -p "$W/tls" "$W/config"
cp "$W/tls.crt" "$W/tls.key" "$W/tls/"
chmod 0755 "$W/tls" "$W/config"
chmod 0644 "$W/tls/"*

kubectl kustomize manifests/base > "$W/base.yaml" 2> "$W/kustomize.err" ||
	{ fail setup "kubectl kustomize manifests/base: $(head -c 300 "$W/kustomize.err")"; exit 0; }
python3 - "$W/base.yaml" "$IMG" 1 "$W/tls" "$W/config" > "$W/play.yaml" 2> "$W/playable.err" << 'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
dep = next(d for d in docs if d["kind"] == "Deployment" and d["metadata"]["name"] == "diagport-webhook")
cm = next(d for d in docs if d["kind"] == "ConfigMap" and d["metadata"]["name"] == "diagport-webhook-config")
for k, v in cm["data"].items():
    open(f"{sys.argv[5]}/{k}", "w").write(v)
dep["spec"]["replicas"] = 1
spec = dep["spec"]["template"]["spec"]
(c,) = spec["containers"]
if not c["image"].startswith("ghcr.io/diagport/diagport-webhook:"):
    sys.exit(f"the Deployment runs {c['image']}, not the webhook's image")
c["image"] = sys.argv[2]
c["ports"][0].update(hostPort=int(sys.argv[3]), hostIP="127.0.0.1")
for v in spec["volumes"]:
    if "secret" in v:
        del v["secret"]
        v["hostPath"] = {"path": sys.argv[4], "type": "Directory"}
    elif "configMap" in v:
        del v["configMap"]
        v["hostPath"] = {"path": sys.argv[5], "type": "Directory"}
print(yaml.safe_dump(dep))
EOF
WHY="$(head -c 300 "$W/playable.err")"
check manifest-names-the-webhook-image test -s "$W/play.yaml"
[ -s "$W/play.yaml" ] || exit 0
play_on_ports 1 "$W/play.yaml" "$W/play.out"
rc=$?
HP=${PORTS[0]}
WHY="podman kube play: exit $rc: $(tail -3 "$W/play.out")"
check kube-play test "$rc" = 0
CURL=(curl -s -m 5 --cacert "$W/ca.crt" --resolve "$HOST:$HP:127.0.0.1")
U=https://$HOST:$HP
logs() { podman logs diagport-webhook-pod-0-webhook 2>&1 | tail -3 | tr '\n' ' '; }
for _ in $(seq 1 300); do
	[ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$U/healthz")" = 200 ] && break
	sleep 0.1
done
WHY="GET /healthz: $("${CURL[@]}" -o /dev/null -w '%{http_code}' "$U/healthz"); the webhook: $(logs)"
check healthz test "$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$U/healthz")" = 200
WHY="GET /readyz: $("${CURL[@]}" -o /dev/null -w '%{http_code}' "$U/readyz")"
check readyz test "$("${CURL[@]}" -o /dev/null -w '%{http_code}' "$U/readyz")" = 200
pid=$(podman inspect --format '{{.State.Pid}}' diagport-webhook-pod-0-webhook 2> /dev/null)
WHY="the webhook's process: $(grep -E '^(Uid|CapEff)' "/proc/$pid/status" 2> /dev/null | tr '\n\t' '  ')"
check runs-as-65532-no-caps bash -c "grep -qE '^Uid:\s+65532\s' /proc/$pid/status && grep -qE '^CapEff:\s+0+$' /proc/$pid/status"

# --- a review, as the API server sends it
python3 - bench/webhook_pod.json > "$W/review.json" << 'EOF'
import json, sys
pod = json.load(open(sys.argv[1]))
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
    "uid": "5d8b1c9e-e2e0-4c6e-9f1a-000000000001", "kind": {"group": "", "version": "v1", "kind": "Pod"},
    "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": pod["metadata"]["namespace"],
    "operation": "CREATE", "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller"},
    "object": pod, "dryRun": False}}))
EOF
code=$("${CURL[@]}" -o "$W/answer.json" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary @"$W/review.json" \
	"$U/mutate")
WHY="POST /mutate: HTTP $code: $(head -c 300 "$W/answer.json"); the webhook: $(logs)"
check review-answered bash -c "test '$code' = 200 && jq -e '.response.allowed == true and .response.patchType == \"JSONPatch\"
	and .response.uid == \"5d8b1c9e-e2e0-4c6e-9f1a-000000000001\"' '$W/answer.json'"
"$D" webhook review --config "$W/config/config.yaml" "$W/review.json" > "$W/host-answer.json" 2> "$W/host.err"
WHY="the image's patch and the host's \`diagport webhook review\` differ: $(jq -r .response.patch "$W/answer.json" | head -c 120) / $(jq -r .response.patch "$W/host-answer.json" | head -c 120)"
check same-patch-as-review test "$(jq -r .response.patch "$W/answer.json")" = "$(jq -r .response.patch "$W/host-answer.json")"
python3 - bench/webhook_pod.json "$W/answer.json" > "$W/patched.json" 2> "$W/patch.err" << 'EOF'
import base64, json, jsonpatch, sys
pod = json.load(open(sys.argv[1]))
patch = json.loads(base64.b64decode(json.load(open(sys.argv[2]))["response"]["patch"]))
print(json.dumps(jsonpatch.apply_patch(pod, patch)))
EOF
WHY="$(head -c 300 "$W/patch.err")"
check patch-injects jq -e '([.spec.initContainers[]?, .spec.containers[]] | map(.name) | index("diagport-agent")) != null
	and (.spec.containers[0].env | map(select(.name == "DOTNET_DiagnosticPorts")) | length == 1)' "$W/patched.json"

# --- the certificate Job, from the same image, against the API-server stand-in
kubectl kustomize manifests/overlays/self-contained > "$W/sc.yaml" 2> "$W/kustomize.err" ||
	{ fail setup "kubectl kustomize manifests/overlays/self-contained: $(head -c 300 "$W/kustomize.err")"; exit 0; }
python3 - "$W/sc.yaml" "$W/seed.yaml" "$W/job-args" << 'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
yaml.safe_dump_all([d for d in docs if d["kind"] == "MutatingWebhookConfiguration"], open(sys.argv[2], "w"))
job = next(d for d in docs if d["kind"] == "Job")
(c,) = job["spec"]["template"]["spec"]["containers"]
assert c["command"][0] == "/diagport", c["command"]
open(sys.argv[3], "w").write("\n".join([c["image"]] + c["command"][1:]) + "\n")
EOF
mapfile -t job < "$W/job-args"
WHY="the Job runs ${job[0]:-nothing}"
check job-names-the-webhook-image test "${job[0]%%:*}" = ghcr.io/diagport/diagport-webhook
api_cert api-ca || { fail setup "openssl: $(head -c 300 "$W/openssl.err")"; exit 0; }
mkdir -p "$W/sa"
head -c 24 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/sa/token"
cp "$W/api-ca.crt" "$W/sa/ca.crt"
chmod 0755 "$W/sa"
chmod 0644 "$W/sa/"*
python3 tests/integration/kubeapi_fake.py --cert "$W/api.crt" --key "$W/api.key" --token-file "$W/sa/token" \
	--log "$W/fake-req.log" --ready "$W/fake-port" --seed "$W/seed.yaml" > "$W/fake.out" 2>&1 &
FPID=$!
wait_for "$W/fake-port" . 10
FP=$(cat "$W/fake-port" 2> /dev/null)
WHY="the API-server stand-in did not start: $(head -c 300 "$W/fake.out")"
check stand-in test -n "$FP"
podman run --rm --network host --read-only --cap-drop ALL --security-opt no-new-privileges --user 65532:65532 \
	-e KUBERNETES_SERVICE_HOST=127.0.0.1 -e KUBERNETES_SERVICE_PORT="$FP" \
	-v "$W/sa:/var/run/secrets/kubernetes.io/serviceaccount:ro" "$IMG" "${job[@]:1}" > "$W/job.out" 2> "$W/job.err"
rc=$?
curl -s -m 5 --cacert "$W/api-ca.crt" -o "$W/state.json" "https://127.0.0.1:$FP/__fake/state"
WHY="webhook certs in the image: exit $rc: $(head -c 300 "$W/job.out") $(head -c 300 "$W/job.err")"
check certs-job bash -c "test $rc = 0 && jq -e '.secrets[\"$NS/diagport-webhook-tls\"].type == \"kubernetes.io/tls\"' '$W/state.json'"
{ kill "$FPID" && wait "$FPID"; } 2> /dev/null

e2e_cleanup_check
