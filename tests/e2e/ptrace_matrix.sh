#!/usr/bin/env bash
# ptrace_matrix.sh - which captures need SYS_PTRACE, measured in real containers: the agent's image
# (make image) and the test webapp's image (tests/e2e/lib.sh) played as a pod (`podman kube play`) from
# `diagport inject k8s --sidecar container --no-ptrace`, with the app's and the agent's securityContext
# set for each case:
#   same-nocap      app and agent uid 1000, both `capabilities: {drop: [ALL]}`  (what the injection gives
#                   when the app's runAsUser is set: the agent copies it)
#   same-ptrace     the same, the app with `add: [SYS_PTRACE]`
#   diff-nocap      app uid 1000, agent uid 1654, no capabilities (what it gives when runAsUser is not set:
#                   the app runs as its image's user, the agent as 1654)
#   diff-ptrace     the same, the app with `add: [SYS_PTRACE]`
#   root-nocap      the app as root with every capability dropped, the agent as 1654 (what the injection
#                   gives for an app whose runAsUser is 0)
#   nd-nocap        same-nocap, the app non-dumpable (its executable unreadable to it: see ND_IMG)
#   nd-ptrace       the same, the app with `add: [SYS_PTRACE]` (podman gives a non-root user the capabilities
#                   it adds, as ambient ones: CapEff shows it; Kubernetes' runtimes do not)
#   nd-root-ptrace  the non-dumpable app as root, ALL dropped and SYS_PTRACE added, the agent as 1654
# In each: /dump?type=Mini|Triage|WithHeap|Full, /gcdump and /stacks, each with a deadline (curl -m), its
# status, size and time printed as one row of the matrix (docs/INJECTION.md "When SYS_PTRACE is needed"
# records it), and the capabilities the app's process holds in effect (CapEff, from the host's /proc).
# Asserted every run: in every case each capture either succeeds (a whole ELF core, a gcdump, stacks) or is
# refused with the agent's problem+json error, never a hang; in the three no-capability cases every capture
# succeeds (the injection's default, `ptrace: false`, rests on it); a non-dumpable app's dumps without the
# capability are refused with the agent's error (its gcdump and stacks, over EventPipe, still succeed).
# Yama is not asserted here: a kernel without it (this one) has no ptrace_scope to test, and the test
# must not change the machine's settings; docs/INJECTION.md gives the kernel's rule instead.
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-ptrace-matrix
. tests/lib.sh
agent_setup e2eptrace
. tests/e2e/lib.sh
e2e_setup
build_apps
AGENT_IMG=localhost/diagport:e2e
APP_IMG=localhost/diagport-e2e-webapp:1
build_agent_image "$AGENT_IMG"
build_app_image "$APP_IMG"
# the same app, its executable (the dotnet host) unreadable to the app's user (owner 65534, mode 0711):
# the kernel makes a process that execs a file it cannot read non-dumpable (fs/exec.c would_dump), and a
# non-dumpable process can be traced only by a tracer holding CAP_SYS_PTRACE, its own children included
ND_IMG=localhost/diagport-e2e-webapp:nondumpable
mkdir -p "$W/nd-ctx"
cp "$(dirname "$(readlink -f "$(command -v dotnet)")")/dotnet" "$W/nd-ctx/dotnet"
printf '%s\n' "FROM $APP_IMG" 'COPY --chown=65534:65534 --chmod=0711 dotnet /usr/share/dotnet/dotnet' > "$W/nd-ctx/Containerfile"
podman build -q -t "$ND_IMG" -f "$W/nd-ctx/Containerfile" "$W/nd-ctx" > "$W/nd-image.out" 2>&1 ||
	{ fail nd-image "$(tail -3 "$W/nd-image.out")"; exit 0; }
pass images

"$D" inject k8s --sidecar container --no-auth --no-ptrace --image "$AGENT_IMG" -f tests/e2e/webapp.yaml \
	> "$W/injected.yaml" 2> "$W/inject.err"
WHY="$(cat "$W/inject.err")"
check inject-no-ptrace bash -c "grep -q 'name: diagport-agent' '$W/injected.yaml' && ! grep -q SYS_PTRACE '$W/injected.yaml'"

# case NAME APP_UID AGENT_UID PTRACE(0|1) IMAGE: the injected pod with those users, capabilities and app image,
# playable
case_yaml() {
	python3 - "$W/playable-$1.yaml" "$2" "$3" "$4" "$5" << 'EOF'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
if sys.argv[2] == "0":
    d["spec"]["template"]["spec"]["securityContext"]["runAsNonRoot"] = False
for c in d["spec"]["template"]["spec"]["containers"]:
    sc = c.setdefault("securityContext", {})
    if c["name"] == "diagport-agent":
        sc.update(runAsUser=int(sys.argv[3]), runAsGroup=int(sys.argv[3]))
        continue
    c["image"] = sys.argv[5]
    sc.update(runAsUser=int(sys.argv[2]), runAsGroup=int(sys.argv[2]), allowPrivilegeEscalation=False)
    sc["capabilities"] = {"drop": ["ALL"]}
    if sys.argv[4] == "1":
        sc["capabilities"]["add"] = ["SYS_PTRACE"]
print(yaml.safe_dump(d))
EOF
}
wait_processes() {
	for _ in $(seq 1 300); do
		curl -sf "$1/processes" > "$2" 2> /dev/null && grep -q '"pid"' "$2" && return 0
		sleep 0.1
	done
	return 1
}
# the uid and the capabilities in effect of a container's first process, from the host
host_uid() { awk '/^Uid:/ { print $2 }' "/proc/$(podman inspect --format '{{.State.Pid}}' "$1")/status"; }
# (CapEff/CapAmb, the last 8 hex digits of each: SYS_PTRACE is 00080000), and the owner of its /proc/PID
# files: the process's uid while it is dumpable, root once it is not (proc(5), "/proc/pid")
cap_eff() {
	local pid
	pid=$(podman inspect --format '{{.State.Pid}}' "$1")
	awk '/^CapEff:/ { e = substr($2, 9) } /^CapAmb:/ { a = substr($2, 9) } END { printf "%s/%s ", e, a }' "/proc/$pid/status"
	stat -c %u "/proc/$pid/status"
}

MATRIX=$W/matrix.txt
printf '%-14s %-5s %-5s %-24s %-20s %s\n' case app agent 'app Eff/Amb proc-owner' capture result > "$MATRIX"
run_case() {
	local name=$1 app_uid=$2 agent_uid=$3 ptrace=$4 img=${5:-$APP_IMG} ap hp u what t0 t1 rc c size ok eff
	e2e_playable "$W/injected.yaml" "$name" 1 2 > "$W/playable-$name.yaml"
	case_yaml "$name" "$app_uid" "$agent_uid" "$ptrace" "$img" > "$W/$name.yaml"
	play_on_ports 2 "$W/$name.yaml" "$W/$name-play.out"
	rc=$?
	ap=${PORTS[0]} hp=${PORTS[1]}
	WHY="podman kube play: exit $rc: $(tail -3 "$W/$name-play.out")"
	check "$name/kube-play" test "$rc" = 0
	u=http://127.0.0.1:$ap
	wait_processes "$u" "$W/$name-procs.json"
	WHY="$(head -c 300 "$W/$name-procs.json"); agent: $(podman logs "$name-pod-0-diagport-agent" 2>&1 | tail -3)"
	check "$name/processes" jq -e 'length == 1 and .[0].name == "webapp"' "$W/$name-procs.json"
	eff=$(cap_eff "$name-pod-0-app")
	users="$(host_uid "$name-pod-0-app"):$(host_uid "$name-pod-0-diagport-agent")"
	WHY="the app runs as ${users%:*}, the agent as ${users#*:} (host's /proc)"
	check "$name/users" test "$users" = "$app_uid:$agent_uid"
	for what in dump?type=Mini dump?type=Triage dump?type=WithHeap dump?type=Full gcdump stacks; do
		t0=$(date +%s%N)
		c=$(curl -s -m 120 -o "$W/artifact" -D "$W/headers" -w '%{http_code}' "$u/$what")
		rc=$?
		t1=$(date +%s%N)
		size=$(stat -c %s "$W/artifact" 2>/dev/null || echo 0)
		case $what in
		dump*) ok="file '$W/artifact' | grep -q 'ELF 64-bit LSB core file'" ;;
		gcdump) ok="head -c 64 '$W/artifact' | grep -qa FastSerialization" ;;
		stacks) ok="grep -q '^Thread' '$W/artifact'" ;;
		esac
		if [ "$rc" = 0 ] && [ "$c" = 200 ] && bash -c "$ok"; then
			res="200 ok $size bytes $(((t1 - t0) / 1000000)) ms"
		elif [ "$rc" = 0 ] && grep -qi '^content-type: application/problem+json' "$W/headers"; then
			res="$c refused, $(((t1 - t0) / 1000000)) ms: $(jq -r '.detail // .title' "$W/artifact" | head -c 200)"
		else
			res="curl exit $rc, HTTP $c, $size bytes: $(head -c 200 "$W/artifact" | tr -c '[:print:]' ' ')"
		fi
		printf '%-14s %-5s %-5s %-24s %-20s %s\n' "$name" "$app_uid" "$agent_uid" "$eff" "$what" "$res" >> "$MATRIX"
		WHY="$what: $res"
		case $name-$what in
		nd-nocap-dump*) check "$name/${what//[?=]/-}" bash -c "[[ '$res' == [45][0-9][0-9]' refused, '* ]]" ;;
		*-nocap-*) check "$name/${what//[?=]/-}" bash -c "[[ '$res' == '200 ok'* ]]" ;;
		*) check "$name/${what//[?=]/-}" bash -c "[[ '$res' == '200 ok'* || '$res' == [45][0-9][0-9]' refused, '* ]]" ;;
		esac
		rm -f "$W/artifact"
	done
	(cd "$W" && podman kube down "$W/$name.yaml" > /dev/null 2>&1)
}
run_case same-nocap 1000 1000 0
run_case same-ptrace 1000 1000 1
run_case diff-nocap 1000 1654 0
run_case diff-ptrace 1000 1654 1
run_case root-nocap 0 1654 0
run_case nd-nocap 1000 1000 0 "$ND_IMG"
run_case nd-ptrace 1000 1000 1 "$ND_IMG"
run_case nd-root-ptrace 0 1654 1 "$ND_IMG"
echo "kernel $(uname -r); Yama: $(cat /proc/sys/kernel/yama/ptrace_scope 2>/dev/null || echo 'not in this kernel')" >&2
cat "$MATRIX" >&2
e2e_cleanup_check
