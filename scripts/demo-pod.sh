#!/usr/bin/env bash
# scripts/demo-pod.sh - the last part of `make demo`: the webapp's Deployment (tests/e2e/webapp.yaml)
# injected and run for real with `podman kube play` (the agent's image from `make image`, the app's
# image FROM scratch on this host's .NET runtime), then asked through the pod's published port.
# When podman cannot run containers here it says so and why, and skips. Everything it makes lives in a
# scratch directory (its own podman storage) and is removed at the end, whatever happens.
set -uo pipefail
cd "$(dirname "$0")/.."
printf '\n\033[1m== The injected Deployment as a real pod (podman kube play): two images, two users, the token of its Secret\033[0m\n'
skip() { echo "(skipped: $1)"; exit 0; }
for t in podman runc python3; do command -v "$t" > /dev/null || skip "$t is not installed; scripts/prereqs.sh demo installs it"; done
python3 -c 'import yaml' 2> /dev/null || skip "python3-yaml is not installed"
D=./diagport B=build
W=$(mktemp -d /tmp/diagport-demo-pod.XXXXXX)
chmod 755 "$W"
# tests/e2e/lib.sh's helpers report through fail(); here a failure ends this part with its reason
fail() { echo "(stopped: $1: $2)"; }
. tests/e2e/lib.sh
e2e_setup
trap 'cleanup_more; rm -rf "$W"' EXIT
podman info > "$W/info.out" 2>&1 || skip "podman cannot run here: $(tail -1 "$W/info.out")"
AGENT_IMG=localhost/diagport:demo
echo "\$ make image IMAGE=$AGENT_IMG"
build_agent_image "$AGENT_IMG"
tail -1 "$W/agent-image.out" | sed 's/^/  /'
echo "(and the webapp's image: the .NET runtime of this host, FROM scratch, USER 1000)"
build_app_image localhost/diagport-e2e-webapp:1

TOKEN=$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')
echo "\$ kubectl create secret generic diagport-token --from-literal=token=... --dry-run=client -o yaml > secret.yaml"
mkdir -p "$W/secret"
printf '%s' "$TOKEN" > "$W/secret/token"
chown -R 1654:1654 "$W/secret" 2> /dev/null
chmod 0400 "$W/secret/token"
echo "\$ diagport inject k8s --sidecar container --auth-secret diagport-token --image $AGENT_IMG -f webapp.yaml > injected.yaml"
"$D" inject k8s --sidecar container --auth-secret diagport-token --image "$AGENT_IMG" -f tests/e2e/webapp.yaml > "$W/injected.yaml"
echo "  (podman 4.3 knows no native sidecars, hence --sidecar container; it cannot mount a Secret as a"
echo "   volume either, so the token's directory stands in for it, and each emptyDir is a 0777 directory)"
AP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
HP=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
e2e_playable "$W/injected.yaml" webapp "$AP" "$HP" > "$W/play.yaml"
echo "\$ podman kube play injected.yaml   # the agent's port published on 127.0.0.1:$AP"
play "$W/play.yaml" > "$W/play.out" 2>&1 || { echo "(stopped: podman kube play: $(tail -2 "$W/play.out"))"; exit 0; }
for _ in $(seq 1 300); do
	curl -sf -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$AP/processes" > "$W/procs.json" 2> /dev/null &&
		grep -q '"pid"' "$W/procs.json" && break
	sleep 0.1
done
podman ps --format '  {{.Names}}  {{.Image}}  {{.Status}}' | grep -v infra
echo "\$ curl -H \"Authorization: Bearer \$TOKEN\" http://127.0.0.1:$AP/processes"
sed 's/^/  /' "$W/procs.json"; echo
echo "\$ curl http://127.0.0.1:$AP/processes   # no token"
curl -s -w '  HTTP %{http_code}\n' -o /dev/null "http://127.0.0.1:$AP/processes"
echo "\$ curl -H ... http://127.0.0.1:$AP/stacks | head -4"
curl -s -H "Authorization: Bearer $TOKEN" "http://127.0.0.1:$AP/stacks" | head -4 | sed 's/^/  /'
echo "\$ curl -H ... -o core 'http://127.0.0.1:$AP/dump?type=WithHeap' && file core"
curl -s -H "Authorization: Bearer $TOKEN" -o "$W/core" "http://127.0.0.1:$AP/dump?type=WithHeap"
echo "  $(stat -c %s "$W/core") bytes: $(file -b "$W/core" | cut -c1-110)"
echo "\$ podman kube down injected.yaml"
(cd "$W" && podman kube down "$W/play.yaml" > /dev/null 2>&1)
echo "(images, containers and volumes removed with the demo's scratch storage)"
