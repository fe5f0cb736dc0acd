#!/usr/bin/env bash
# job_pod.sh - an injected Job's pod runs to completion in real containers: `diagport inject k8s`
# puts the agent into a Job (and a CronJob) as a native sidecar, and the pod, run with podman by
# tests/integration/kubelet_pod.py (a stand-in for the kubelet that follows the sidecar contract
# of KEP-753; see its header), starts the agent, then the console test app, which attaches to the
# agent through the shared emptyDir and exits 0 after a few seconds; the agent then gets SIGTERM
# and exits 0 within its grace period, and nothing is left running.
#
# Images cannot be pulled here: the agent's image is a directory holding ./diagport, the app's a
# directory holding build/apps/console; the host's /usr, /lib, /lib64 and /etc (and the .NET
# install, when it is outside /usr) are bind-mounted read-only into every container as their base
# layers. podman reads tests/containers/containers.conf (CONTAINERS_CONF) and keeps all its state
# in the scratch directory.
set -u
cd "$(dirname "$0")/../.."
T_NAME=job-pod
. tests/lib.sh # every script runs from the repository root
agent_setup jobpod
PY=/usr/bin/python3
KP=tests/integration/kubelet_pod.py
export CONTAINERS_CONF=$PWD/tests/containers/containers.conf
RUNS=()
cleanup_more() {
	local r
	for r in "${RUNS[@]+"${RUNS[@]}"}"; do $PY $KP cleanup --dir "$r"; done
}

for t in podman runc catatonit; do
	command -v "$t" > /dev/null || { fail prerequisites "$t is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done
build_apps

# --- the images, as directories (kubelet_pod.py copies one per container)
mkdir -p "$W/img/agent" "$W/img/console/tmp"
chmod 1777 "$W/img/console/tmp"
cp "$D" "$W/img/agent/diagport"
cp -r "$B/apps/console" "$W/img/console/app"
DOTNET=$(readlink -f "$(command -v dotnet)")
BINDS=(--bind /usr:/usr --bind /lib:/lib --bind /lib64:/lib64 --bind /etc:/etc)
case $DOTNET in
/usr/*) ;;
*) BINDS+=(--bind "${DOTNET%/*}:${DOTNET%/*}") ;;
esac

# jqc NAME FILTER FILE: check that jq's FILTER holds for FILE, its content as the reason
jqc() { WHY="$(head -c 600 "$3")"; check "$1" jq -e "$2" "$3"; }

# pod NAME MANIFEST APP_IMAGE [WANT_APP_EXIT]: inject MANIFEST, check the injection, run the pod
# and check how it ran. The app container is the pod's first regular container.
pod() {
	local n=$1 manifest=$2 image=$3 want=${4:-0} dir=$W/$1 rc start end spec app
	mkdir -p "$dir"
	RUNS+=("$dir/pod")
	WHY="$(cat "$dir/inject.err" 2>/dev/null)"
	check "$n/inject" bash -c "'$D' inject k8s -o json -f '$manifest' > '$dir/pod.json' 2> '$dir/inject.err'"
	spec='(if .kind == "CronJob" then .spec.jobTemplate.spec else .spec end).template.spec'
	jqc "$n/native-sidecar" "$spec"' | .initContainers[0] | .name == "diagport-agent" and .restartPolicy == "Always"
		and (.startupProbe.exec.command | length > 0)' "$dir/pod.json"
	jqc "$n/app-wired" "$spec"' | .containers[0] | ([.env[] | select(.name == "DOTNET_DiagnosticPorts")] | length == 1)
		and ((.securityContext.capabilities.add // []) | index("SYS_PTRACE") | not)' "$dir/pod.json"
	app=$(jq -r "$spec.containers[0].name" "$dir/pod.json")

	# the agent lists the app, asked from inside the pod's network namespace (it listens on 127.0.0.1)
	(
		cname=$(jq -r '.metadata.name' "$dir/pod.json")-$app
		wait_for "$dir/pod/events.jsonl" "\"started\", \"container\": \"$app\"" 60 || exit 0
		for _ in $(seq 1 50); do
			$PY $KP podman --dir "$dir/pod" exec "$cname" curl -s -m 2 http://127.0.0.1:52323/processes \
				> "$dir/processes.json" 2> /dev/null && jq -e 'length > 0' "$dir/processes.json" > /dev/null && exit 0
			sleep 0.1
		done
	) &
	local asker=$!
	PIDS+=($asker)
	start=$(date +%s.%N)
	timeout 90 $PY $KP run --dir "$dir/pod" --manifest "$dir/pod.json" --timeout 60 \
		--image "ghcr.io/diagport/diagport:$(cat VERSION)=$W/img/agent" --image "$image=$W/img/console" \
		--entrypoint "$image=[\"$DOTNET\", \"/app/console.dll\"]" "${BINDS[@]}" > "$dir/kp.out" 2>&1
	rc=$? end=$(date +%s.%N)
	wait "$asker"
	local S=$dir/pod/status.json E=$dir/pod/events.jsonl A=$dir/pod/logs/diagport-agent.log
	[ -f "$S" ] || echo '{}' > "$S"
	jq -sc "[.[] | {event, container}]" "$E" > "$dir/events.json" 2> /dev/null || echo '[]' > "$dir/events.json"

	if [ "$want" = 0 ]; then
		WHY="exit $rc: $(tail -5 "$dir/kp.out") $(cat "$S")"; check "$n/pod-succeeded" jq -e '.phase == "Succeeded"' "$S"
	else
		WHY="exit $rc: $(cat "$S")"; check "$n/pod-failed" jq -e '.phase == "Failed"' "$S"
	fi
	local took
	took=$(awk -v a="$start" -v b="$end" 'BEGIN { printf "%.1f", b - a }')
	WHY="took $took s"; check "$n/within-60s" awk -v t="$took" 'BEGIN { exit !(t < 60) }'
	jqc "$n/agent-started-first" "[.[] | select(.container == \"diagport-agent\" or .container == \"$app\")
		| select(.event | test(\"start\"))] | map(.event + \" \" + .container)
		| . == [\"started diagport-agent\", \"startup-probe-succeeded diagport-agent\",
			\"sidecar-started diagport-agent\", \"started $app\"]" "$dir/events.json"
	# (an app that exits at once may be gone before its runtime has connected: attach is checked
	# only for apps that run a while)
	if [ "$want" = 0 ]; then
		WHY="$(head -c 600 "$A" 2>/dev/null)"
		check "$n/attached" grep -q '"event":"attached".*"assembly":"console"' "$A"
		jqc "$n/agent-lists-app" 'length == 1 and .[0].name == "console"' "$dir/processes.json"
	fi
	WHY="$(cat "$S")"
	check "$n/app-exit-$want" jq -e --arg a "$app" --argjson w "$want" '.containers[$a].exitCode == $w' "$S"
	WHY="$(head -c 400 "$dir/pod/logs/$app.log" 2>/dev/null)"; check "$n/app-ran" grep -q '^READY ' "$dir/pod/logs/$app.log"
	# the sidecar's stop: SIGTERM only once the app had exited, exit 0 before the grace period's
	# end and without SIGKILL (the agent exits 0 only from its wait for SIGTERM or SIGINT)
	WHY="$(cat "$S")"
	check "$n/sigterm-after-app-exit" jq -e --arg a "$app" '.containers as $c
		| $c["diagport-agent"].sigterm > $c[$a].finishedAt' "$S"
	grace=$(jq "$spec.terminationGracePeriodSeconds // 30" "$dir/pod.json")
	WHY="$(cat "$S")"
	check "$n/agent-exit-0-in-grace" jq -e --argjson g "$grace" '.containers["diagport-agent"]
		| .exitCode == 0 and .sigkill == null and .finishedAt - .sigterm < $g' "$S"
	WHY="$(grep -E 'liveness|early|restarted' "$E")"
	check "$n/agent-no-restart" bash -c "! grep -qE 'liveness-probe-failed|sidecar-exited-early' '$E'"
	# nothing running when the pod ended, nothing running now (containers, the sandbox, conmon)
	WHY="$(cat "$S")"; check "$n/nothing-running-at-end" jq -e '.runningAtEnd == []' "$S"
	local left
	left=$($PY $KP podman --dir "$dir/pod" ps --format '{{.Names}}' 2>&1; pgrep -af -- "$dir/pod/")
	WHY="left: $left"; check "$n/nothing-left" test -z "$left"
}

pod job tests/integration/data/job-console.yaml example.com/console:1.0

# The CronJob golden case's input, its app container running the console app for a few seconds
# instead of its --since argument (the injection is the golden case's own)
$PY - tests/golden/k8s/cronjob/input.yaml "$W/cronjob.yaml" << 'PYEOF'
import sys, yaml
doc = yaml.safe_load(open(sys.argv[1]))
doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]["containers"][0]["args"] = ["sleep", "4"]
yaml.safe_dump(doc, open(sys.argv[2], "w"), sort_keys=False)
PYEOF
pod cronjob "$W/cronjob.yaml" example.com/report:1.0

# A Job whose app fails: the pod fails, and the sidecar is still stopped cleanly
sed 's/args: \["sleep", "6"\]/args: ["exit", "3"]/' tests/integration/data/job-console.yaml > "$W/job-fails.yaml"
pod job-app-fails "$W/job-fails.yaml" example.com/console:1.0 3
