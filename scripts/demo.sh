#!/usr/bin/env bash
# make demo: inject the example workloads under examples/ and show what changed, answer
# an AdmissionReview with the webhook, run the agent beside a .NET app, and run the injected
# Deployment as a real pod (scripts/demo-pod.sh, when podman can run containers here).
# The "before" side is `diagport uninject` of the original (nothing to remove, so
# it is the document exactly as diagport renders it), the "after" side is inject:
# the diff is exactly what diagport adds.
set -euo pipefail
cd "$(dirname "$0")/.."
D=./diagport
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
show() {
  local title=$1; shift
  local file=${*: -1}
  printf '\n\033[1m== %s\033[0m\n$ diagport inject %s\n' "$title" "$*"
  "$D" uninject "${@:1:1}" -f "$file" > "$W/before"
  "$D" inject "$@" > "$W/after"
  diff -u --label "$file" --label "$file (injected)" "$W/before" "$W/after" || true
  "$D" inject "$@" | "$D" inject "${@:1:$#-1}" - | cmp -s - "$W/after" && echo "(injecting again changes nothing)"
  "$D" inject "$@" | "$D" uninject "${@:1:1}" - | cmp -s - "$W/before" && echo "(uninject gives the original back)"
}
show "Kubernetes Deployment: native sidecar, app runs as uid 1000" k8s examples/k8s/deployment.yaml
show "ECS describe-task-definition output → register input with the agent" ecs examples/ecs/taskdef.json
show "CloudFormation template (YAML short-form tags kept), opted in by Metadata" cfn examples/cfn/template.yaml
show "Compose project: one diagport-agent service; the database opts out by a label" compose examples/compose/compose.yaml
printf '\n\033[1m== A kubectl pipeline\033[0m\n'
echo '$ kubectl create deployment web --image=mcr.microsoft.com/dotnet/samples:aspnetapp --dry-run=client -o yaml | diagport inject - | kubectl kustomize'
mkdir -p "$W/kz"
KUBECONFIG=/dev/null kubectl create deployment web --image=mcr.microsoft.com/dotnet/samples:aspnetapp --dry-run=client -o yaml \
  | "$D" inject - > "$W/kz/web.yaml"
printf 'resources:\n- web.yaml\n' > "$W/kz/kustomization.yaml"
kubectl kustomize "$W/kz" | grep -E 'name: diagport|DOTNET_DiagnosticPorts|value: /diag|restartPolicy: Always' 
printf '\n\033[1m== Bad input is refused with file, line and field; nothing is written\033[0m\n'
printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: app\n    env:\n    - name: DOTNET_DiagnosticPorts\n      valueFrom: {secretKeyRef: {name: s, key: k}}\n' > "$W/bad.yaml"
echo '$ diagport inject bad.yaml'
set +e; "$D" inject "$W/bad.yaml" > "$W/out"; rc=$?; set -e
echo "exit status $rc, $(wc -c < "$W/out") bytes on stdout"

printf '\n\033[1m== The webhook: an annotated pod, as the API server sends it, answered over HTTPS with a JSON Patch\033[0m\n'
mkdir -p "$W/tls"
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls/tls.key" -out "$W/tls/tls.crt" \
  -days 1 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2> /dev/null
WPORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
echo "\$ diagport webhook --listen 127.0.0.1:$WPORT --tls-cert tls.crt --tls-key tls.key &"
"$D" webhook --listen "127.0.0.1:$WPORT" --tls-cert "$W/tls/tls.crt" --tls-key "$W/tls/tls.key" 2> "$W/webhook.log" &
WPID=$!
trap 'kill "$WPID" 2> /dev/null || true; rm -rf "$W"' EXIT
for _ in $(seq 1 100); do curl -s -o /dev/null --cacert "$W/tls/tls.crt" "https://127.0.0.1:$WPORT/healthz" && break; sleep 0.05; done
/usr/bin/python3 - bench/webhook_pod.json > "$W/review.json" << 'EOF'
import json, sys, uuid
pod = json.load(open(sys.argv[1]))
print(json.dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"uid": str(uuid.uuid4()), "kind": {"group": "", "version": "v1", "kind": "Pod"},
                              "namespace": "shop", "operation": "CREATE", "object": pod}}))
EOF
echo "\$ curl --cacert tls.crt -H 'Content-Type: application/json' --data-binary @review.json https://127.0.0.1:$WPORT/mutate"
curl -s --cacert "$W/tls/tls.crt" -H 'Content-Type: application/json' --data-binary "@$W/review.json" \
  "https://127.0.0.1:$WPORT/mutate" > "$W/answer.json"
/usr/bin/python3 - "$W/answer.json" << 'EOF'
import base64, json, sys
r = json.load(open(sys.argv[1]))["response"]
print(f"  uid {r['uid']}, allowed {str(r['allowed']).lower()}, {r['patchType']}:")
for op in json.loads(base64.b64decode(r["patch"])):
    print(f"    {op['op']:8} {op['path']}")
EOF
kill "$WPID"; wait "$WPID" 2> /dev/null || true
echo "webhook log:"; grep -v '"event":"listening"' "$W/webhook.log" | sed 's/^/  /'

printf '\n\033[1m== The agent: a .NET app started under `diagport launch --`, listed, dumped (opened in dotnet-dump), heap-snapshotted (dotnet-gcdump), dumped to an egress directory, traced\033[0m\n'
bash tests/apps/build.sh build/apps | sed 's/^/  /'
mkdir -m 0777 "$W/diag" "$W/artifacts"
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
printf 'Egress:\n  FileSystem:\n    artifacts:\n      DirectoryPath: %s\n' "$W/artifacts" > "$W/agent.yaml"
echo "\$ cat agent.yaml"; sed 's/^/  /' "$W/agent.yaml"
echo "\$ diagport launch --config agent.yaml --socket $W/diag/port --dumps $W/diag --urls http://127.0.0.1:$PORT -- dotnet build/apps/console/console.dll &"
"$D" launch --config "$W/agent.yaml" --socket "$W/diag/port" --dumps "$W/diag" --urls "http://127.0.0.1:$PORT" -- dotnet build/apps/console/console.dll > "$W/app.out" 2> "$W/agent.log" &
AGENT=$!
for i in $(seq 1 200); do curl -sf "http://127.0.0.1:$PORT/processes" | grep -q pid && break; sleep 0.05; done
echo "\$ curl http://127.0.0.1:$PORT/processes"
curl -s "http://127.0.0.1:$PORT/processes"; echo
echo "\$ curl -o core 'http://127.0.0.1:$PORT/dump?type=WithHeap'"
curl -s -o "$W/core" -w 'HTTP %{http_code}, %{size_download} bytes in %{time_total} s\n' "http://127.0.0.1:$PORT/dump?type=WithHeap"
echo "\$ file core"; file -b "$W/core" | cut -c1-70
echo "(staging left behind: $(ls -A "$W/diag" | grep -c diagport-dump) files)"
echo "\$ dotnet-dump analyze core -c clrthreads -c exit   # Microsoft's tool opens it (build/tools, scripts/prereqs.sh)"
build/tools/dotnet-dump/dotnet-dump analyze "$W/core" -c clrthreads -c exit 2>&1 | grep -E 'ThreadCount|UnstartedThread|BackgroundThread' | sed 's/^/  /'
echo "\$ curl -o app.gcdump 'http://127.0.0.1:$PORT/gcdump'   # a GC heap snapshot, the .gcdump file"
curl -s -o "$W/app.gcdump" -w 'HTTP %{http_code}, %{size_download} bytes in %{time_total} s\n' "http://127.0.0.1:$PORT/gcdump"
echo "\$ dotnet-gcdump report app.gcdump | head -6"
build/tools/dotnet-gcdump/dotnet-gcdump report "$W/app.gcdump" 2>&1 | head -6 | sed 's/^/  /'
echo "\$ curl -i 'http://127.0.0.1:$PORT/dump?type=Mini&egressProvider=artifacts'"
curl -s -D "$W/hdr" -o /dev/null "http://127.0.0.1:$PORT/dump?type=Mini&egressProvider=artifacts"
grep -iE '^(HTTP|location)' "$W/hdr" | tr -d '\r' | sed 's/^/  /'
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/hdr")
for i in $(seq 1 200); do curl -s "http://127.0.0.1:$PORT$LOC" | grep -q '"Running"' || break; sleep 0.05; done
echo "\$ curl http://127.0.0.1:$PORT$LOC"
curl -s "http://127.0.0.1:$PORT$LOC"; echo
echo "\$ ls artifacts/"; ls -l "$W/artifacts" | tail -n +2 | sed 's/^/  /'
echo "\$ curl -o app.nettrace 'http://127.0.0.1:$PORT/trace?profile=Cpu&durationSeconds=3'   # an EventPipe trace, streamed as it comes"
curl -s -o "$W/app.nettrace" -w 'HTTP %{http_code}, %{size_download} bytes in %{time_total} s\n' "http://127.0.0.1:$PORT/trace?profile=Cpu&durationSeconds=3"
echo "\$ diagport nettrace stats app.nettrace   # (summed up here: the totals and the busiest event types)"
"$D" nettrace stats "$W/app.nettrace" | /usr/bin/python3 -c '
import json, sys
s = json.load(sys.stdin)
print("  trace of pid %d, started %s: %d bytes, %d events, %d dropped, %d stacks" % (s["trace"]["pid"], s["trace"]["start"],
      s["bytes"], s["totalEvents"], s["dropped"], s["stacks"]))
for e in sorted(s["events"], key=lambda e: -e["count"])[:4]:
    print("  %7d  %s/%d" % (e["count"], e["provider"], e["id"]))'
kill -TERM "$AGENT"; wait "$AGENT" 2>/dev/null || true
echo "agent log:"; sed 's/^/  /' "$W/agent.log"
scripts/demo-pod.sh
