#!/usr/bin/env bash
# pod.sh - an injected Deployment running as a real pod: the agent's image (make image) and an image
# of the test webapp on a real .NET runtime (tests/e2e/lib.sh), the Deployment injected by
# `diagport inject k8s --sidecar container` (podman 4.3 does not know native sidecars) and run with
# `podman kube play`. Two containers, two root filesystems (the app's read-only), sharing only the
# injected volumes; the agent reached through the pod's port published on 127.0.0.1. Then:
# /processes lists the app, a WithHeap dump arrives whole (an ELF core), /stacks, a CPU profile;
# and an uninjected Deployment gets no agent. The time from `kube play` to the first /processes
# is printed beside the app's own start.
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-pod
. tests/lib.sh
agent_setup e2epod
. tests/e2e/lib.sh
e2e_setup
build_apps
AGENT_IMG=localhost/diagport:e2e
APP_IMG=localhost/diagport-e2e-webapp:1
build_agent_image "$AGENT_IMG"
build_app_image "$APP_IMG"
pass images

cat > "$W/deploy.yaml" << 'EOF'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: webapp
spec:
  replicas: 1
  selector:
    matchLabels: {app: webapp}
  template:
    metadata:
      labels: {app: webapp}
      annotations:
        diagport.dev/inject: "true"
    spec:
      securityContext:
        runAsNonRoot: true
      containers:
        - name: app
          image: localhost/diagport-e2e-webapp:1
          env:
            - {name: ASPNETCORE_URLS, value: "http://+:8080"}
          ports:
            - {containerPort: 8080}
          securityContext:
            runAsUser: 1000
            runAsGroup: 1000
            readOnlyRootFilesystem: true
          volumeMounts:
            - {name: tmp, mountPath: /tmp}
      volumes:
        - name: tmp
          emptyDir: {}
EOF
"$D" inject k8s --sidecar container --no-auth --image "$AGENT_IMG" -f "$W/deploy.yaml" > "$W/injected.yaml" 2> "$W/inject.err"
WHY="$(cat "$W/inject.err")"
check inject grep -q 'name: diagport-agent' "$W/injected.yaml"
# the ports published on the host's loopback (what `podman kube play` needs to reach a pod from here)
AP=$(free_port)
HP=$(free_port)
python3 - "$W/injected.yaml" "$AP" "$HP" > "$W/play.yaml" << 'EOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
for c in d["spec"]["template"]["spec"]["containers"]:
    port = sys.argv[2] if c["name"] == "diagport-agent" else sys.argv[3]
    c["ports"][0].update(hostPort=int(port), hostIP="127.0.0.1")
print(yaml.safe_dump(d))
EOF
T0=$(date +%s%N)
play "$W/play.yaml" > "$W/play.out" 2>&1
rc=$?
WHY="podman kube play: exit $rc: $(tail -3 "$W/play.out")"
check kube-play test "$rc" = 0
U=http://127.0.0.1:$AP
for _ in $(seq 1 300); do
	curl -sf "$U/processes" > "$W/procs.json" 2> /dev/null && grep -q '"pid"' "$W/procs.json" && break
	sleep 0.1
done
T1=$(date +%s%N)
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$HP/" > /dev/null 2>&1 && break; sleep 0.1; done
T2=$(date +%s%N)
echo "kube play to the first /processes: $(((T1 - T0) / 1000000)) ms; to the app's first answer: $(((T2 - T0) / 1000000)) ms" >&2
WHY="$(head -c 300 "$W/procs.json"); agent: $(podman logs webapp-pod-0-diagport-agent 2>&1 | tail -3)"
check processes jq -e 'length == 1 and .[0].name == "webapp"' "$W/procs.json"
WHY="the app answered: $(curl -s "http://127.0.0.1:$HP/")"
check app-serves test "$(curl -s "http://127.0.0.1:$HP/")" = ok
curl -s -o "$W/core" -w '%{http_code}' "$U/dump?type=WithHeap" > "$W/dump.code"
WHY="HTTP $(cat "$W/dump.code"): $(file "$W/core")"
check dump-withheap bash -c "test \"\$(cat '$W/dump.code')\" = 200 && file '$W/core' | grep -q 'ELF 64-bit LSB core file' &&
	test \$(stat -c %s '$W/core') -gt 10000000"
code "$U/stacks" > /dev/null
WHY="$(head -c 200 "$W/body")"
check stacks grep -q '^Thread' "$W/body"
code "$U/trace?profile=Cpu&durationSeconds=2&format=speedscope" > /dev/null
WHY="$(head -c 200 "$W/body")"
check cpu-profile jq -e '."$schema" | test("speedscope")' "$W/body"
# two root filesystems: the agent's image holds only /diagport, the app's is read-only
podman exec webapp-pod-0-app /usr/share/dotnet/dotnet --list-runtimes > "$W/app-rt.out" 2>&1
rc=$?
WHY="exit $rc: $(head -c 200 "$W/app-rt.out")"
check app-has-runtime test "$rc" = 0
podman exec webapp-pod-0-diagport-agent /usr/share/dotnet/dotnet --list-runtimes > "$W/agent-rt.out" 2>&1
rc=$?
WHY="the agent's container ran the app's runtime: exit $rc"
check separate-rootfs test "$rc" != 0
WHY="$(podman inspect webapp-pod-0-app --format '{{.HostConfig.ReadonlyRootfs}}' 2>&1)"
check app-read-only test "$(podman inspect webapp-pod-0-app --format '{{.HostConfig.ReadonlyRootfs}}' 2>/dev/null)" = true

# not injected: the same Deployment as written runs as it is, with no agent
PP=$(free_port)
python3 -c '
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["metadata"]["name"] = "plain"
d["spec"]["template"]["metadata"]["annotations"] = {}
d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(hostPort=int(sys.argv[2]), hostIP="127.0.0.1")
print(yaml.safe_dump(d))' "$W/deploy.yaml" "$PP" > "$W/plain.yaml"
play "$W/plain.yaml" > "$W/plain.out" 2>&1
for _ in $(seq 1 300); do curl -sf "http://127.0.0.1:$PP/" > /dev/null 2>&1 && break; sleep 0.1; done
WHY="the plain app answered: $(curl -s "http://127.0.0.1:$PP/"); $(tail -2 "$W/plain.out")"
check uninjected-serves test "$(curl -s "http://127.0.0.1:$PP/")" = ok
WHY="$(podman ps --format '{{.Names}}' 2>&1 | tr '\n' ' ')"
check uninjected-no-agent bash -c "podman ps --format '{{.Names}}' | grep -q '^plain-pod-0-app\$' &&
	! podman ps --format '{{.Names}}' | grep -q '^plain-pod-0-diagport'"
