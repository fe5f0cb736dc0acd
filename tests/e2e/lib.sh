# tests/e2e/lib.sh - what the end-to-end container tests share (sourced after tests/lib.sh and
# agent_setup). podman reads tests/containers/containers.conf and keeps every image, container and pod
# in the scratch directory ($W/storage, vfs), and everything else it would keep for the whole machine
# there too (see e2e_setup): nothing global is touched, and cleanup removes it all.
#   e2e_setup                 CONTAINERS_CONF and CONTAINERS_STORAGE_CONF; cleanup_more (pods down, reset),
#                             which the exit trap runs whatever happened before
#   e2e_cleanup_check         cleanup_more now, then the check "cleanup": no container, pod, volume, image
#                             or podman process of this test is left
#   build_agent_image NAME    `make image IMAGE=NAME` (the Containerfile, FROM scratch)
#   e2e_playable INJECTED NAME AGENT_PORT APP_PORT
#                             the injected Deployment as podman 4.3 can play it (see the function); the ports
#                             given as 1 and 2: placeholders that play_on_ports fills in
#   play_on_ports N FILE OUT  play FILE (output in OUT) with its hostPorts 1..N replaced by loopback ports picked
#                             then, tried again with others while one was taken (on_free_ports); PORTS the ports,
#                             in the order of their placeholders; FILE is the file played (its placeholders kept
#                             in FILE.in); play's status
#   build_app_image NAME      the test webapp (tests/apps) on the host's .NET runtime in an image FROM scratch:
#                             the runtime and ASP.NET shared frameworks (no SDK), the seven libraries they
#                             link (ldd), the loader, the app in /app; uid 1000; invariant globalization
#   wait_app URL [SECS]       until the app at URL answers / (default 30 s); 1 on timeout
E2E_PLAYED=()
# Storage alone is not all of podman's state. Its tmp_dir (/run/libpod: the "alive" file, exit codes,
# events), its locks (one shared memory segment, /libpod_lock) and its network definitions
# (/etc/cni/net.d, the bridges made for them) are the machine's, whatever storage.conf says, and
# `podman system reset` wipes them: another test's cleanup (this one's, run in another checkout at the
# same time) took the kube network and its bridge away under a running pod, whose ports then answered
# nothing, and made every other podman "refresh" (free all locks, forget its containers' states). So each
# test gets its own tmp_dir, file locks in it, and its own network directory; a pod runs on podman's
# default network (cni-podman0), which no test creates or removes.
e2e_setup() {
	mkdir -p "$W/storage/root" "$W/storage/run" "$W/podman-tmp" "$W/networks"
	printf '[storage]\ndriver = "vfs"\ngraphroot = "%s/storage/root"\nrunroot = "%s/storage/run"\n' "$W" "$W" \
		> "$W/storage.conf"
	export CONTAINERS_STORAGE_CONF=$W/storage.conf
	awk -v tmp="$W/podman-tmp" -v net="$W/networks" '
		{ print }
		/^\[engine\]/ { printf "tmp_dir = \"%s\"\nlock_type = \"file\"\n", tmp }
		END { printf "\n[network]\nnetwork_config_dir = \"%s\"\n", net }' \
		tests/containers/containers.conf > "$W/containers.conf"
	export CONTAINERS_CONF=$W/containers.conf
	for t in podman runc file; do
		command -v "$t" > /dev/null || { fail prerequisites "$t is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
	done
}
cleanup_more() {
	local f
	if declare -F cleanup_compose > /dev/null; then cleanup_compose; fi
	for f in "${E2E_PLAYED[@]+"${E2E_PLAYED[@]}"}"; do (cd "$W" && podman kube down "$f" > /dev/null 2>&1); done
	podman pod rm -f -a -t 0 > /dev/null 2>&1
	podman rm -f -a -t 0 > /dev/null 2>&1
	podman system reset -f > /dev/null 2>&1
}
e2e_cleanup_check() {
	local left
	cleanup_more
	left="$(podman ps -a -q; podman pod ps -q; podman volume ls -q; podman images -q; pgrep -a -f "$W/storage" | grep -v pgrep)"
	WHY="left behind: $(echo "$left" | tr '\n' ' ')"
	check cleanup test -z "$left"
}
build_agent_image() {
	make -s image IMAGE="$1" > "$W/agent-image.out" 2>&1 || { fail agent-image "$(tail -3 "$W/agent-image.out")"; exit 0; }
}
build_app_image() {
	local ctx=$W/app-ctx dn l
	dn=$(dirname "$(readlink -f "$(command -v dotnet)")")
	rm -rf "$ctx"
	mkdir -p "$ctx/usr/share/dotnet" "$ctx/lib/x86_64-linux-gnu" "$ctx/lib64" "$ctx/app" "$ctx/tmp"
	cp -a "$dn/dotnet" "$dn/host" "$dn/shared" "$ctx/usr/share/dotnet/"
	for l in libc.so.6 libdl.so.2 libgcc_s.so.1 libm.so.6 libpthread.so.0 librt.so.1 libstdc++.so.6; do
		cp -L "/lib/x86_64-linux-gnu/$l" "$ctx/lib/x86_64-linux-gnu/"
	done
	cp -L /lib64/ld-linux-x86-64.so.2 "$ctx/lib64/"
	cp -r "$B/apps/webapp/." "$ctx/app/"
	printf '%s\n' 'FROM scratch' 'COPY . /' \
		'ENV DOTNET_SYSTEM_GLOBALIZATION_INVARIANT=1 DOTNET_CLI_TELEMETRY_OPTOUT=1' \
		'USER 1000:1000' 'ENTRYPOINT ["/usr/share/dotnet/dotnet", "/app/webapp.dll"]' > "$ctx/Containerfile"
	podman build -q -t "$1" -f "$ctx/Containerfile" "$ctx" > "$W/app-image.out" 2>&1 ||
		{ fail app-image "$(tail -3 "$W/app-image.out")"; exit 0; }
	rm -rf "$ctx"
}
# e2e_playable INJECTED NAME AGENT_PORT APP_PORT: the injected Deployment renamed NAME, its two ports published
# on the host's loopback (what `kube play` needs to reach a pod from here), the token's directory in place
# of the secret volume ($W/secrets/NAME in place of Secret NAME's, when there is one), $W/configmap (a ConfigMap's keys as files, as kubelet mounts one) in place of a
# configMap volume, and a new directory of mode 0777 (what kubelet makes) for each emptyDir (see pod.sh)
e2e_playable() {
	python3 - "$@" "$W/secret" "$W/volumes" "$W/configmap" << 'EOF'
import os, sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
d["metadata"]["name"] = sys.argv[2]
spec = d["spec"]["template"]["spec"]
for c in spec["containers"]:
    port = sys.argv[3] if c["name"] == "diagport-agent" else sys.argv[4]
    c["ports"][0].update(hostPort=int(port), hostIP="127.0.0.1")
for v in spec["volumes"]:
    if "secret" in v:
        own = os.path.join(os.path.dirname(sys.argv[5]), "secrets", v["secret"]["secretName"])
        del v["secret"]
        v["hostPath"] = {"path": own if os.path.isdir(own) else sys.argv[5], "type": "Directory"}
    elif "configMap" in v:
        del v["configMap"]
        v["hostPath"] = {"path": sys.argv[7], "type": "Directory"}
    elif "emptyDir" in v:
        path = os.path.join(sys.argv[6], sys.argv[2], v["name"])
        os.makedirs(path)
        os.chmod(path, 0o777)
        del v["emptyDir"]
        v["hostPath"] = {"path": path, "type": "Directory"}
print(yaml.safe_dump(d))
EOF
}
# play FILE: podman kube play (from $W, so that no directory there is taken for an image to build), on
# podman's default network (see e2e_setup)
play() {
	E2E_PLAYED+=("$1")
	(cd "$W" && podman kube play --build=false --network podman "$1")
}
# kube play cannot bind a hostPort of 0 and say which port it got, so the ports are picked here (on_free_ports);
# a try that fails is taken down before the next
play_on_ports() {
	local n=$1 f=$2 out=$3
	[ -e "$f.in" ] || cp "$f" "$f.in"
	on_free_ports "$n" "$out" play_with_ports "$f"
}
play_with_ports() {
	local f=$1 rc
	shift
	python3 - "$f.in" "$@" > "$f" << 'EOF' || return 1
import sys, yaml
ports = sys.argv[2:]
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
for d in docs:
    for c in d["spec"]["template"]["spec"]["containers"]:
        for p in c.get("ports", []):
            if 1 <= p.get("hostPort", 0) <= len(ports):
                p["hostPort"] = int(ports[p["hostPort"] - 1])
print(yaml.safe_dump_all(docs))
EOF
	play "$f" && return 0
	rc=$?
	(cd "$W" && podman kube down "$f" > /dev/null 2>&1)
	return "$rc"
}
wait_app() {
	for _ in $(seq 1 $((${2:-30} * 10))); do curl -sf -m 2 "$1/" > /dev/null 2>&1 && return 0; sleep 0.1; done
	return 1
}
