#!/usr/bin/env bash
# image.sh - the agent's image (Containerfile, `make image`), built with podman and run as a real
# container: its size (at most 8 MB), its config (uid 1654, /diagport, labels, health check), that it
# holds nothing but the binary and Debian's CA bundle (no shell), and that the agent in it serves a real .NET app on this host
# through a shared directory and a port published on 127.0.0.1 (the token required), its health check
# passing. podman reads tests/containers/containers.conf (CONTAINERS_CONF) and keeps its images and
# containers in the scratch directory (CONTAINERS_STORAGE_CONF): nothing global is touched.
set -u
cd "$(dirname "$0")/../.."
T_NAME=image
. tests/lib.sh
agent_setup image
build_apps
. tests/e2e/lib.sh
e2e_setup
IMAGE=localhost/diagport-test:$(cat VERSION)

make -s image IMAGE="$IMAGE" > "$W/build.out" 2>&1
rc=$?
WHY="make image: exit $rc: $(tail -5 "$W/build.out")"
check build test "$rc" = 0
podman image inspect "$IMAGE" > "$W/inspect.json" 2> "$W/inspect.err"
WHY="$(head -c 300 "$W/inspect.err")"
check inspect test -s "$W/inspect.json"
size=$(jq '.[0].Size' "$W/inspect.json")
WHY="the image is $size bytes"
check size-at-most-8MB test "${size:-99999999}" -le 8000000
echo "image size: $size bytes" >&2
WHY="$(jq -c '.[0].Config' "$W/inspect.json")"
check config jq -e --arg v "$(cat VERSION)" '.[0].Config | .User == "1654:1654" and .Entrypoint == ["/diagport"]
	and .Cmd == ["launch"] and .Labels["org.opencontainers.image.version"] == $v
	and (.Labels["org.opencontainers.image.source"] | test("diagport"))
	and (.Labels | has("org.opencontainers.image.licenses"))' "$W/inspect.json"
WHY="$(jq -c '.[0].Healthcheck' "$W/inspect.json")"
check healthcheck-config jq -e '.[0].Healthcheck.Test == ["CMD", "/diagport", "health"]' "$W/inspect.json"
# one program: the image's filesystem, exported, is /diagport, the CA bundle and the two empty mount
# points, nothing else
podman create --name dp-image-export "$IMAGE" > /dev/null 2>&1
podman export -o "$W/rootfs.tar" dp-image-export 2> /dev/null
tar -tvf "$W/rootfs.tar" > "$W/files-v.txt" 2> /dev/null
awk '{ print $6 }' "$W/files-v.txt" > "$W/files.txt"
podman rm -f dp-image-export > /dev/null 2>&1
WHY="files in the image: $(tr '\n' ' ' < "$W/files.txt" | head -c 300)"
check only-the-binary test "$(sort "$W/files.txt" | tr '\n' ' ')" = \
	"diag/ diagport dumps/ etc/ etc/ssl/ etc/ssl/certs/ etc/ssl/certs/ca-certificates.crt "
WHY="$(grep ca-certificates.crt "$W/files-v.txt")"
check ca-bundle sh -c "tar -xOf '$W/rootfs.tar' etc/ssl/certs/ca-certificates.crt | cmp -s - /etc/ssl/certs/ca-certificates.crt &&
	grep -q '^-rw-r--r-- 0/0 .* etc/ssl/certs/ca-certificates.crt$' '$W/files-v.txt'"
WHY="$(grep -e ' diag/$' -e ' dumps/$' "$W/files-v.txt")"
check mountpoints-0777 test "$(awk '$6 ~ /^(diag|dumps)\/$/ { print $1, $2 }' "$W/files-v.txt" | sort -u)" = "drwxrwxrwx 1654/1654"
podman run --rm --entrypoint /bin/sh "$IMAGE" -c true > "$W/sh.out" 2>&1
rc=$?
WHY="a shell ran in the image: $(cat "$W/sh.out")"
check no-shell test "$rc" != 0
podman run --rm "$IMAGE" --version > "$W/version.out" 2>&1
WHY="$(cat "$W/version.out")"
check runs grep -qx "diagport $(cat VERSION)" "$W/version.out"
# what needs a shared library (the webhook: libmicrohttpd; the fleet client: libcurl) cannot run in a
# static program: one sentence and exit 1, not the SIGSEGV of glibc's static dlopen (the webhook image
# is tests/e2e/webhook_image.sh)
printf 'x\n' > "$W/pem"
podman run --rm --no-healthcheck -v "$W/pem:/pem:ro" "$IMAGE" webhook --listen :8443 --tls-cert /pem --tls-key /pem > "$W/wh.out" 2>&1
rc=$?
WHY="diagport webhook in the agent's image: exit $rc: $(head -c 300 "$W/wh.out")"
check webhook-refused-in-one-line bash -c "test $rc = 1 && test \$(wc -l < '$W/wh.out') = 1 && grep -q 'linked statically' '$W/wh.out'"
podman run --rm --no-healthcheck --tmpfs /tmp "$IMAGE" capture stacks --target http://127.0.0.1:9 -o /tmp/out > "$W/cap.out" 2>&1
rc=$?
WHY="diagport capture in the agent's image: exit $rc: $(head -c 300 "$W/cap.out")"
check capture-refused-not-crashed bash -c "test $rc -ne 0 && test $rc -lt 128 && grep -q 'linked statically' '$W/cap.out'"

# the agent in its image, for a .NET app on this host: the socket in a shared directory, HTTP on a
# port published on loopback (one podman picks and binds: -p 127.0.0.1::52323, read back with podman port), the
# token from a mounted file
mkdir -m 0777 "$W/diag"
printf 'image-test-token-0123456789\n' > "$W/token"
chmod 0644 "$W/token"
podman run -d --name dp-image-agent --network bridge -p 127.0.0.1::52323 \
	-v "$W/diag:/diag" -v "$W/token:/run/diagport/token:ro" --tmpfs /dumps:mode=1777 \
	--read-only --cap-drop ALL --security-opt no-new-privileges \
	"$IMAGE" launch --socket /diag/port --dumps /dumps --auth-token-file /run/diagport/token \
	> "$W/run.out" 2>&1
rc=$?
WHY="podman run: exit $rc: $(cat "$W/run.out")"
check agent-starts test "$rc" = 0
HP=$(podman port dp-image-agent 52323 2> /dev/null | sed -n '1s/.*://p')
wait_for_socket() { for _ in $(seq 1 100); do [ -S "$W/diag/port" ] && return 0; sleep 0.1; done; return 1; }
WHY="no socket: $(podman logs dp-image-agent 2>&1 | tail -3)"
check socket wait_for_socket
AUTH=(-H "Authorization: Bearer image-test-token-0123456789")
if start_webapp "$W/app.log" "$W/diag/port" "http://127.0.0.1:$HP" "${AUTH[@]}"; then pass app-attached; else
	fail app-attached "$(tail -3 "$W/app.log") $(podman logs dp-image-agent 2>&1 | tail -3)"
fi
WHY="without the token: $(code "http://127.0.0.1:$HP/processes")"
check token-required test "$(code "http://127.0.0.1:$HP/processes")" = 401
code "${AUTH[@]}" "http://127.0.0.1:$HP/processes" > /dev/null
WHY="$(head -c 300 "$W/body")"
check processes jq -e --argjson p "$APID" 'map(.pid) | index($p) != null' "$W/body"
code "${AUTH[@]}" "http://127.0.0.1:$HP/stacks?pid=$APID" > /dev/null
WHY="$(head -c 300 "$W/body")"
check stacks grep -q '^Thread' "$W/body"
podman exec dp-image-agent /diagport health > "$W/health.out" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/health.out")"
check health-in-container test "$rc" = 0
podman healthcheck run dp-image-agent > "$W/hc.out" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/hc.out")"
check healthcheck test "$rc" = 0
WHY="$(podman top dp-image-agent user 2>&1 | tail -2 | tr '\n' ' ')"
check runs-as-1654 bash -c "podman top dp-image-agent user huser 2>/dev/null | tail -1 | grep -q '^1654 '"
e2e_cleanup_check
