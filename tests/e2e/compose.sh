#!/usr/bin/env bash
# compose.sh - an injected Compose project run for real with podman-compose: the webapp's service as a
# team writes it (read-only, its image's uid 1000), `diagport inject compose --auth-secret` adding the
# agent service (the agent's image, uid 1654), the two named volumes and the token as a Compose secret
# from a file. Through the agent's port published on 127.0.0.1: the token is required, /processes lists
# the app, a WithHeap dump arrives whole (an ELF core), /stacks. The socket's volume got the image's
# mount point (0777, 1654), the app and the agent run as their own uids. Then `uninject compose` gives
# the project back as written (same data), and it runs with no agent. Everything is taken down and
# checked gone (tests/e2e/lib.sh).
#
# podman-compose 1.0.3 starts services in depends_on order but does not wait on conditions, and it
# rewrites an exec-form health check (`test: [CMD, /diagport, health]`) into `/bin/sh -c ...`, which
# the agent's image, having no shell, cannot run; podman here runs health checks only when asked (no
# systemd timers) anyway. So the test runs the injected health check's command itself in the agent's
# container, as docker-compose would.
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-compose
. tests/lib.sh
agent_setup e2ecompose
. tests/e2e/lib.sh
e2e_setup
command -v podman-compose > /dev/null || { fail prerequisites "podman-compose is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
build_apps
AGENT_IMG=localhost/diagport:e2e
build_agent_image "$AGENT_IMG"
build_app_image localhost/diagport-e2e-webapp:1
pass images

mkdir -p "$W/project"
python3 -c 'import secrets; print(secrets.token_urlsafe(32), end="")' > "$W/project/token"
chmod 0644 "$W/project/token" # a Compose secret from a file is that file, bind-mounted: the agent's uid reads it
AUTH=(-H "Authorization: Bearer $(cat "$W/project/token")")
# compose PROJECT-FILE ARGS...: podman-compose in the project's directory (the secret's ./token)
E2E_COMPOSED=()
compose() {
	local f=$1
	shift
	E2E_COMPOSED+=("$f")
	(cd "$W/project" && podman-compose -p dpe2e -f "$f" "$@")
}
cleanup_compose() {
	local f
	for f in "${E2E_COMPOSED[@]+"${E2E_COMPOSED[@]}"}"; do compose "$f" down -v > /dev/null 2>&1; done
}
# up_on AP HP: the project with the app published on HP, injected with the agent on AP, brought up; taken down
# again when up fails (the ports are picked by on_free_ports: the injection writes the agent's port into
# its --urls and its published port alike, so podman cannot pick it)
up_on() {
	local AP=$1 HP=$2 rc
	cat > "$W/project/compose.yaml" << EOF
# the shop's web front, as its team runs it
x-app: &app
  read_only: true
  tmpfs: [/tmp]
services:
  web:
    <<: *app
    image: localhost/diagport-e2e-webapp:1
    environment:
      ASPNETCORE_URLS: http://+:8080
    ports: ["127.0.0.1:$HP:8080"]
secrets:
  diagport-token:
    file: ./token
EOF
	"$D" inject compose --auth-secret diagport-token --image "$AGENT_IMG" --port "$AP" -f "$W/project/compose.yaml" \
		> "$W/project/injected.yaml" 2> "$W/inject.err"
	INJECT_RC=$?
	[ "$INJECT_RC" = 0 ] || return 1
	compose injected.yaml up -d && return 0
	rc=$?
	compose injected.yaml down -v > /dev/null 2>&1
	return "$rc"
}
T0=$(date +%s%N)
on_free_ports 2 "$W/up.out" up_on
rc=$?
AP=${PORTS[0]} HP=${PORTS[1]}
WHY="exit $INJECT_RC: $(cat "$W/inject.err")"
check inject bash -c "test $INJECT_RC = 0 && grep -q '^  diagport-agent:' '$W/project/injected.yaml'"
WHY="podman-compose up: exit $rc: $(tail -3 "$W/up.out")"
check compose-up test "$rc" = 0
U=http://127.0.0.1:$AP
for _ in $(seq 1 300); do
	curl -sf "${AUTH[@]}" "$U/processes" > "$W/procs.json" 2> /dev/null && grep -q '"pid"' "$W/procs.json" && break
	sleep 0.1
done
T1=$(date +%s%N)
wait_app "http://127.0.0.1:$HP"
T2=$(date +%s%N)
echo "podman-compose up to the first /processes: $(((T1 - T0) / 1000000)) ms; to the app's first answer: $(((T2 - T0) / 1000000)) ms" >&2
WHY="$(head -c 300 "$W/procs.json"); agent: $(podman logs dpe2e_diagport-agent_1 2>&1 | tail -3)"
check processes jq -e 'length == 1 and .[0].name == "webapp"' "$W/procs.json"
WHY="the app answered: $(curl -s "http://127.0.0.1:$HP/")"
check app-serves test "$(curl -s "http://127.0.0.1:$HP/")" = ok
c=$(code "$U/processes")
WHY="without the token: HTTP $c"
check token-required test "$c" = 401
uid_of() { awk '/^Uid:/ { print $2 }' "/proc/$(podman inspect --format '{{.State.Pid}}' "$1")/status"; }
WHY="the app runs as $(uid_of dpe2e_web_1), the agent as $(uid_of dpe2e_diagport-agent_1)"
check two-users test "$(uid_of dpe2e_web_1):$(uid_of dpe2e_diagport-agent_1)" = 1000:1654
WHY="$(podman inspect dpe2e_web_1 --format '{{.HostConfig.ReadonlyRootfs}}' 2>&1)"
check app-read-only test "$(podman inspect dpe2e_web_1 --format '{{.HostConfig.ReadonlyRootfs}}' 2>/dev/null)" = true
SV=$(podman volume inspect dpe2e_diagport-diag --format '{{.Mountpoint}}' 2>/dev/null)
WHY="the socket's volume: $(ls -la "$SV" 2>&1 | tr '\n' ' ')"
check volume-from-image bash -c "test \"\$(stat -c '%a %u' '$SV')\" = '777 1654' && test -S '$SV/port'"
curl -s "${AUTH[@]}" -o "$W/core" -w '%{http_code}' "$U/dump?type=WithHeap" > "$W/dump.code"
WHY="HTTP $(cat "$W/dump.code"): $(file "$W/core")"
check dump-withheap bash -c "test \"\$(cat '$W/dump.code')\" = 200 && file '$W/core' | grep -q 'ELF 64-bit LSB core file' &&
	test \$(stat -c %s '$W/core') -gt 10000000"
rm -f "$W/core"
code "${AUTH[@]}" "$U/stacks" > /dev/null
WHY="$(head -c 200 "$W/body")"
check stacks grep -q '^Thread' "$W/body"
# the injected health check's command, as docker-compose would run it (see the top)
HC=$(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1]))["services"]["diagport-agent"]["healthcheck"]["test"]))' \
	"$W/project/injected.yaml")
mapfile -t HCMD < <(jq -r '.[1:][]' <<< "$HC")
podman exec dpe2e_diagport-agent_1 "${HCMD[@]}" > "$W/hc.out" 2>&1
rc=$?
WHY="$HC: exit $rc: $(cat "$W/hc.out")"
check agent-healthcheck bash -c "test $rc = 0 && test '$(jq -r '.[0]' <<< "$HC")' = CMD"

# uninject: the project as written (same data), run with no agent
"$D" uninject compose -f "$W/project/injected.yaml" > "$W/project/plain.yaml" 2> "$W/uninject.err"
WHY="$(cat "$W/uninject.err"; diff <(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1])), indent=1, sort_keys=True))' "$W/project/compose.yaml") \
	<(python3 -c 'import json, sys, yaml; print(json.dumps(yaml.safe_load(open(sys.argv[1])), indent=1, sort_keys=True))' "$W/project/plain.yaml") | head -20)"
check uninject-same-data python3 -c 'import sys, yaml; sys.exit(yaml.safe_load(open(sys.argv[1])) != yaml.safe_load(open(sys.argv[2])))' \
	"$W/project/compose.yaml" "$W/project/plain.yaml"
compose injected.yaml down -v > "$W/down.out" 2>&1
compose plain.yaml up -d > "$W/up2.out" 2>&1
wait_app "http://127.0.0.1:$HP"
WHY="the plain app answered: $(curl -s "http://127.0.0.1:$HP/"); $(tail -2 "$W/up2.out")"
check uninjected-serves test "$(curl -s "http://127.0.0.1:$HP/")" = ok
WHY="$(podman ps --format '{{.Names}}' 2>&1 | tr '\n' ' ')"
check uninjected-no-agent bash -c "podman ps --format '{{.Names}}' | grep -q '^dpe2e_web_1\$' &&
	! podman ps --format '{{.Names}}' | grep -q diagport"
compose plain.yaml down -v > /dev/null 2>&1
e2e_cleanup_check
