#!/usr/bin/env bash
# pod.sh - an injected Deployment running as a real pod: the agent's image (make image) and an image
# of the test webapp on a real .NET runtime (tests/e2e/lib.sh), the Deployment injected by
# `diagport inject k8s --sidecar container` (podman 4.3 does not know native sidecars) and run with
# `podman kube play`. Two containers, two root filesystems (the app's read-only), two users (the app
# as its image's 1000, the agent as 1654), sharing only the injected volumes; the agent reached
# through the pod's port published on 127.0.0.1 with the token of the Secret the injection names.
#   main pod: /processes lists the app, a WithHeap dump arrives whole (an ELF core), /stacks, a CPU
#             profile, /metrics; the agent's container restarted under the live app attaches it again
#             (same pid, same runtime uid, the app's container not restarted)
#   suspend:  --mode suspend: the app does not serve while the agent cannot come up, and does once it
#             is up; --dumps-size-limit: a WithHeap dump over it is refused, named, and
#             leaves nothing in the dumps volume, the app unharmed
#   tls:      --tls-secret: the agent serves https with a kubernetes.io/tls Secret (laid out as kubelet
#             does), verified with the test CA; plain http there is refused; the image's probe is healthy;
#             a rotated certificate (a new ..data link) is served without a restart
#   plain:    the Deployment as written (no annotation) runs as it is, with no agent
# The time from `kube play` to the first /processes is printed beside the app's own start.
#
# podman 4.3.1's `kube play` panics on a `secret:` volume (VolumeFromSecret with no secrets manager),
# so the test writes the token of the Secret it made (kubectl create secret) to a directory and plays
# the injected pod with that directory in place of the secret volume: same mount, same file, same
# agent arguments. podman makes an emptyDir a named volume owned by whichever container mounts it
# first, where kubelet makes a directory of mode 0777 that every container of the pod can write: so
# each emptyDir is played as a new directory of mode 0777 under $W/volumes. Neither enforces sizeLimit
# (kubelet evicts the pod once the volume outgrows it); the agent's --dumps-limit, which the injection
# derives from dumps-size-limit, is what keeps a dump under it, and what the check sees.
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

cp tests/e2e/webapp.yaml "$W/deploy.yaml"

# wait_processes URL FILE [CURL ARGS]: until the agent lists a process (30 s); 1 on timeout
wait_processes() {
	local u=$1 f=$2
	shift 2
	for _ in $(seq 1 300); do
		curl -sf "$@" "$u/processes" > "$f" 2> /dev/null && grep -q '"pid"' "$f" && return 0
		sleep 0.1
	done
	return 1
}
# host_uid CONTAINER: the uid the container's first process runs as, seen from the host
host_uid() { awk '/^Uid:/ { print $2 }' "/proc/$(podman inspect --format '{{.State.Pid}}' "$1")/status"; }

# ---- the main pod: the token from the Secret the injection names ----
kubectl create secret generic diagport-token --from-literal=token="$(python3 -c 'import secrets; print(secrets.token_urlsafe(32))')" \
	--dry-run=client -o yaml > "$W/secret.yaml"
mkdir -p "$W/secret"
python3 -c 'import base64, sys, yaml; sys.stdout.write(base64.b64decode(yaml.safe_load(open(sys.argv[1]))["data"]["token"]).decode())' \
	"$W/secret.yaml" > "$W/secret/token"
chown -R 1654:1654 "$W/secret"
chmod 0400 "$W/secret/token"
AUTH=(-H "Authorization: Bearer $(cat "$W/secret/token")")
"$D" inject k8s --sidecar container --auth-secret diagport-token --image "$AGENT_IMG" -f "$W/deploy.yaml" \
	> "$W/injected.yaml" 2> "$W/inject.err"
WHY="$(cat "$W/inject.err")"
check inject bash -c "grep -q 'name: diagport-agent' '$W/injected.yaml' && grep -q 'secretName: diagport-token' '$W/injected.yaml'"
e2e_playable "$W/injected.yaml" webapp 1 2 > "$W/play.yaml"
T0=$(date +%s%N)
play_on_ports 2 "$W/play.yaml" "$W/play.out"
rc=$?
AP=${PORTS[0]} HP=${PORTS[1]}
WHY="podman kube play: exit $rc: $(tail -3 "$W/play.out")"
check kube-play test "$rc" = 0
U=http://127.0.0.1:$AP
wait_processes "$U" "$W/procs.json" "${AUTH[@]}"
T1=$(date +%s%N)
wait_app "http://127.0.0.1:$HP"
T2=$(date +%s%N)
echo "kube play to the first /processes: $(((T1 - T0) / 1000000)) ms; to the app's first answer: $(((T2 - T0) / 1000000)) ms" >&2
WHY="$(head -c 300 "$W/procs.json"); agent: $(podman logs webapp-pod-0-diagport-agent 2>&1 | tail -3)"
check processes jq -e 'length == 1 and .[0].name == "webapp"' "$W/procs.json"
WHY="the app answered: $(curl -s "http://127.0.0.1:$HP/")"
check app-serves test "$(curl -s "http://127.0.0.1:$HP/")" = ok
c=$(code "$U/processes")
WHY="without the token: HTTP $c"
check token-required test "$c" = 401
c=$(code -H "Authorization: Bearer not-the-token" "$U/processes")
WHY="with another token: HTTP $c"
check token-wrong test "$c" = 401
APP_UID=$(host_uid webapp-pod-0-app)
AGENT_UID=$(host_uid webapp-pod-0-diagport-agent)
WHY="the app runs as $APP_UID, the agent as $AGENT_UID"
check two-users test "$APP_UID:$AGENT_UID" = 1000:1654
curl -s "${AUTH[@]}" -o "$W/core" -w '%{http_code}' "$U/dump?type=WithHeap" > "$W/dump.code"
WHY="HTTP $(cat "$W/dump.code"): $(file "$W/core")"
check dump-withheap bash -c "test \"\$(cat '$W/dump.code')\" = 200 && file '$W/core' | grep -q 'ELF 64-bit LSB core file' &&
	test \$(stat -c %s '$W/core') -gt 10000000"
rm -f "$W/core"
code "${AUTH[@]}" "$U/stacks" > /dev/null
WHY="$(head -c 200 "$W/body")"
check stacks grep -q '^Thread' "$W/body"
code "${AUTH[@]}" "$U/trace?profile=Cpu&durationSeconds=2&format=speedscope" > /dev/null
WHY="$(head -c 200 "$W/body")"
check cpu-profile jq -e '."$schema" | test("speedscope")' "$W/body"
# the counters start metricsStartDelay (10 s) after the runtime attached
for _ in $(seq 1 300); do
	curl -s "$U/metrics" > "$W/metrics.txt" 2> /dev/null
	grep -q '^systemruntime_cpu_usage_ratio ' "$W/metrics.txt" && break
	sleep 0.1
done
WHY="$(grep -c '^# TYPE' "$W/metrics.txt") families: $(head -c 200 "$W/metrics.txt")"
check metrics grep -q '^systemruntime_cpu_usage_ratio [0-9.e+-]* [0-9]*$' "$W/metrics.txt"
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

# the agent's container restarted under the live app: attached again, the app not restarted
BEFORE=$(podman inspect webapp-pod-0-app --format '{{.State.Pid}} {{.State.StartedAt}}')
RT_BEFORE=$(jq -r '.[0] | "\(.pid) \(.uid)"' "$W/procs.json")
podman restart -t 1 webapp-pod-0-diagport-agent > "$W/restart.out" 2>&1
rc=$?
WHY="podman restart: exit $rc: $(tail -2 "$W/restart.out")"
check agent-restarted test "$rc" = 0
wait_processes "$U" "$W/procs2.json" "${AUTH[@]}"
WHY="before: $RT_BEFORE; after: $(head -c 300 "$W/procs2.json")"
check agent-restart-reattached test "$(jq -r '.[0] | "\(.pid) \(.uid)"' "$W/procs2.json" 2>/dev/null)" = "$RT_BEFORE"
WHY="the app's container before: $BEFORE; after: $(podman inspect webapp-pod-0-app --format '{{.State.Pid}} {{.State.StartedAt}}')"
check agent-restart-app-untouched test "$(podman inspect webapp-pod-0-app --format '{{.State.Pid}} {{.State.StartedAt}}')" = "$BEFORE"
code "${AUTH[@]}" "$U/stacks" > /dev/null
WHY="$(head -c 200 "$W/body")"
check agent-restart-stacks grep -q '^Thread' "$W/body"
(cd "$W" && podman kube down "$W/play.yaml" > /dev/null 2>&1)

# ---- suspend mode and a dumps size limit ----
"$D" inject k8s --sidecar container --no-auth --mode suspend --dumps-size-limit 32Mi --image "$AGENT_IMG" \
	-f "$W/deploy.yaml" > "$W/susp-injected.yaml" 2> "$W/susp-inject.err"
WHY="$(cat "$W/susp-inject.err")"
check suspend-inject bash -c "grep -q 'suspend,connect' '$W/susp-injected.yaml' && grep -q 'sizeLimit: 32Mi' '$W/susp-injected.yaml'"
e2e_playable "$W/susp-injected.yaml" susp 1 2 > "$W/susp.yaml"
# the agent cannot come up while the socket's directory is closed to it (it exits, podman starts it
# again): the app waits at startup, its container running and its port silent ...
chmod 0555 "$W/volumes/susp/diagport-diag"
play_on_ports 2 "$W/susp.yaml" "$W/susp.out"
AP=${PORTS[0]} HP=${PORTS[1]}
U=http://127.0.0.1:$AP
# Until the agent has failed on the closed directory and the app's container runs (at most 30 s, not a fixed
# 4 s before looking); then the app, suspended, must not answer for 4 s (what an app that did not wait needs,
# and more, to answer: it is asked every 0.2 s, not once at the end)
susp_ready() {
	podman logs susp-pod-0-diagport-agent 2>&1 | grep -q 'cannot listen on /diag/port' &&
		[ "$(podman inspect susp-pod-0-app --format '{{.State.Running}}' 2>/dev/null)" = true ]
}
eventually 30 susp_ready
answered=
# time passing: 4 s in which the app must not answer, asked every 0.2 s
for _ in $(seq 1 20); do curl -sf -m 1 "http://127.0.0.1:$HP/" > /dev/null 2>&1 && { answered=yes; break; }; sleep 0.2; done
WHY="the app answered with no agent: ${answered:-no}; the app's container: $(podman inspect susp-pod-0-app --format '{{.State.Status}}' 2>&1); the agent: $(podman logs --tail 1 susp-pod-0-diagport-agent 2>&1)"
check suspend-waits bash -c "[ -z '$answered' ] && ! curl -sf -m 2 'http://127.0.0.1:$HP/' &&
	test \"\$(podman inspect susp-pod-0-app --format '{{.State.Running}}')\" = true &&
	podman logs susp-pod-0-diagport-agent 2>&1 | grep -q 'cannot listen on /diag/port'"
# ... and serves once the agent is up
chmod 0777 "$W/volumes/susp/diagport-diag"
wait_app "http://127.0.0.1:$HP"
WHY="the app did not answer within 30 s of the agent's start: $(podman logs --tail 2 susp-pod-0-diagport-agent 2>&1)"
check suspend-resumed test "$(curl -s "http://127.0.0.1:$HP/")" = ok
wait_processes "$U" "$W/susp-procs.json"
WHY="$(head -c 200 "$W/susp-procs.json"); $(tail -2 "$W/susp.out")"
check suspend-attached jq -e 'length == 1' "$W/susp-procs.json"
# a dump over the size limit is refused, named, and leaves nothing behind. The app first holds 64 MiB more, so
# that its WithHeap dump is over 32 MiB whatever its heap happened to be (a fresh app's was sometimes under it:
# the dump came back, 200)
leak=$(curl -s -m 120 "http://127.0.0.1:$HP/memory-leak?mb=64")
c=$(code "$U/dump?type=WithHeap")
WHY="HTTP $c (the app holds '$leak' MiB more): $(head -c 300 "$W/body" | tr -cd '[:print:]')"
check dumps-limit-refused bash -c "test '$c' = 507 && grep -q 'larger than the staging cap of 33554432 bytes' '$W/body'"
DV=$W/volumes/susp/diagport-dumps
WHY="the dumps volume ($DV) holds: $(ls -A "$DV" 2>&1 | head -5)"
check dumps-limit-nothing-left bash -c "test -d '$DV' && test -z \"\$(ls -A '$DV')\""
WHY="the app after the refused dump: $(curl -s "http://127.0.0.1:$HP/")"
check dumps-limit-app-alive test "$(curl -s "http://127.0.0.1:$HP/")" = ok
(cd "$W" && podman kube down "$W/susp.yaml" > /dev/null 2>&1)

# ---- TLS: the agent serves https with the kubernetes.io/tls Secret the injection names, and rotates it ----
# The Secret's directory as kubelet's atomic writer lays it out (files in a timestamped directory, ..data a link
# to it, each key a link through ..data); a rotation (cert-manager renewing) makes a new directory and renames a
# new ..data link over the old one.
TD=$W/secrets/orders-diagport-tls
mkdir -p "$TD"
tls_cert() { # SERIAL OUT-DIR: a certificate from the test CA for 127.0.0.1 in OUT-DIR/tls.crt, tls.key
	openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$2/tls.key" -out "$2/csr" -subj /CN=orders \
		2>> "$W/tls-openssl.err" &&
		openssl x509 -req -in "$2/csr" -CA "$W/tls-ca.crt" -CAkey "$W/tls-ca.key" -set_serial "$1" -days 2 \
			-extfile <(printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n') -out "$2/tls.crt" \
			2>> "$W/tls-openssl.err" && rm -f "$2/csr"
}
publish() { # DIR: make DIR the Secret's current data, as kubelet does
	chown -R 1654:1654 "$1" && chmod 0400 "$1"/tls.* && ln -sfn "$(basename "$1")" "$TD/..data_tmp" &&
		mv -T "$TD/..data_tmp" "$TD/..data"
}
openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls-ca.key" -out "$W/tls-ca.crt" \
	-days 2 -subj /CN=tls-ca 2>> "$W/tls-openssl.err"
mkdir -p "$TD/..2026_01_01_00_00_01.1"
tls_cert 17 "$TD/..2026_01_01_00_00_01.1" && publish "$TD/..2026_01_01_00_00_01.1" &&
	ln -s ..data/tls.crt "$TD/tls.crt" && ln -s ..data/tls.key "$TD/tls.key" && chown -h 1654:1654 "$TD" "$TD"/*
WHY="$(tail -3 "$W/tls-openssl.err")"; check tls-secret-made test -s "$TD/tls.crt"
"$D" inject k8s --sidecar container --auth-secret diagport-token --tls-secret orders-diagport-tls --image "$AGENT_IMG" \
	-f "$W/deploy.yaml" > "$W/tls-injected.yaml" 2> "$W/tls-inject.err"
e2e_playable "$W/tls-injected.yaml" tlspod 1 2 > "$W/tls.yaml"
WHY="$(cat "$W/tls-inject.err")"; check tls-inject grep -q "path: $TD\$" "$W/tls.yaml"
play_on_ports 2 "$W/tls.yaml" "$W/tls.out"
AP=${PORTS[0]} HP=${PORTS[1]}
U=https://127.0.0.1:$AP
wait_processes "$U" "$W/tls-procs.json" --cacert "$W/tls-ca.crt" "${AUTH[@]}"
WHY="$(head -c 300 "$W/tls-procs.json"); agent: $(podman logs tlspod-pod-0-diagport-agent 2>&1 | tail -3)"
check tls-processes jq -e 'length == 1 and .[0].name == "webapp"' "$W/tls-procs.json"
c=$(code "${AUTH[@]}" "http://127.0.0.1:$AP/processes")
WHY="plain http to the https port: HTTP $c"; check tls-plain-http-refused test "$c" != 200
podman exec tlspod-pod-0-diagport-agent /diagport health > "$W/tls-health.out" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/tls-health.out")"; check tls-probe-healthy test "$rc" = 0
served_serial() { openssl s_client -connect "127.0.0.1:$AP" -CAfile "$W/tls-ca.crt" < /dev/null 2> /dev/null |
	openssl x509 -noout -serial 2> /dev/null; }
WHY="$(served_serial)"; check tls-serves-secret test "$(served_serial)" = serial=11
mkdir -p "$TD/..2026_01_02_00_00_01.2"
tls_cert 18 "$TD/..2026_01_02_00_00_01.2" && publish "$TD/..2026_01_02_00_00_01.2"
WHY="served: $(served_serial); agent: $(podman logs tlspod-pod-0-diagport-agent 2>&1 | grep -i tls | tail -2)"
check tls-rotated eventually 30 bash -c "[ \"\$(openssl s_client -connect 127.0.0.1:$AP -CAfile '$W/tls-ca.crt' < /dev/null 2> /dev/null |
	openssl x509 -noout -serial 2> /dev/null)\" = serial=12 ]"
code --cacert "$W/tls-ca.crt" "${AUTH[@]}" "$U/stacks" > /dev/null
WHY="$(head -c 200 "$W/body")"; check tls-stacks-after-rotation grep -q '^Thread' "$W/body"
(cd "$W" && podman kube down "$W/tls.yaml" > /dev/null 2>&1)

# ---- not injected: the same Deployment as written runs as it is, with no agent ----
python3 -c '
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["metadata"]["name"] = "plain"
d["spec"]["template"]["metadata"]["annotations"] = {}
d["spec"]["template"]["spec"]["containers"][0]["ports"][0].update(hostPort=int(sys.argv[2]), hostIP="127.0.0.1")
print(yaml.safe_dump(d))' "$W/deploy.yaml" 1 > "$W/plain.yaml"
play_on_ports 1 "$W/plain.yaml" "$W/plain.out"
PP=${PORTS[0]}
wait_app "http://127.0.0.1:$PP"
WHY="the plain app answered: $(curl -s "http://127.0.0.1:$PP/"); $(tail -2 "$W/plain.out")"
check uninjected-serves test "$(curl -s "http://127.0.0.1:$PP/")" = ok
WHY="$(podman ps --format '{{.Names}}' 2>&1 | tr '\n' ' ')"
check uninjected-no-agent bash -c "podman ps --format '{{.Names}}' | grep -q '^plain-pod-0-app\$' &&
	! podman ps --format '{{.Names}}' | grep -q '^plain-pod-0-diagport'"
e2e_cleanup_check
