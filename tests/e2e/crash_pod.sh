#!/usr/bin/env bash
# crash_pod.sh - a crash in an injected pod leaves its evidence in the dumps volume: the test webapp's
# Deployment (tests/e2e/webapp.yaml: the app as its image's uid 1000, its root filesystem read-only)
# injected with the default options (crash-dumps mini) and `--sidecar container` (podman 4.3 does not
# know native sidecars), played with `podman kube play` (the emptyDirs as directories of mode 0777, as
# kubelet makes them: tests/e2e/lib.sh), then made to die of an unhandled exception (/crash).
#   the dumps volume holds crash-PID-TIME-dotnet.dmp and its .crashreport.json, PID the app's (in its
#   container), written by the app's own user (createdump runs as the app), the report's crashed thread
#   naming the exception's type; dotnet-dump opens the dump and sees the exception
#   the agent's container got none of the crash-dump settings
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-crash-pod
. tests/lib.sh
agent_setup e2ecrash
. tests/e2e/lib.sh
e2e_setup
build_apps
AGENT_IMG=localhost/diagport:e2e-crash
APP_IMG=localhost/diagport-e2e-webapp:1
build_agent_image "$AGENT_IMG"
build_app_image "$APP_IMG"
pass images
DD=$B/tools/dotnet-dump/dotnet-dump

"$D" inject k8s --sidecar container --image "$AGENT_IMG" -f tests/e2e/webapp.yaml > "$W/injected.yaml" 2> "$W/inject.err"
WHY="$(cat "$W/inject.err")"
check inject grep -q 'name: COMPlus_DbgEnableMiniDump' "$W/injected.yaml"
e2e_playable "$W/injected.yaml" crashapp 1 2 > "$W/play.yaml"
play_on_ports 2 "$W/play.yaml" "$W/play.out"
rc=$?
HP=${PORTS[1]}
WHY="podman kube play: exit $rc: $(tail -3 "$W/play.out")"
check kube-play test "$rc" = 0
wait_app "http://127.0.0.1:$HP"
APID=$(curl -s "http://127.0.0.1:$HP/pid")
WHY="the app answered /pid: '$APID'"
check app-serves test -n "$APID"
WHY="$(podman inspect crashapp-pod-0-diagport-agent --format '{{.Config.Env}}' 2>&1 | head -c 300)"
check agent-no-crash-settings bash -c "! podman inspect crashapp-pod-0-diagport-agent --format '{{.Config.Env}}' |
	grep -q DbgEnableMiniDump"

DUMPS=$W/volumes/crashapp/diagport-dumps
T0=$(date +%s)
curl -s "http://127.0.0.1:$HP/crash?message=crash-pod" > "$W/crash.out"
# the report is written before the dump, and the dump is whole once createdump has exited: the app's
# container then stops (and is restarted), so the app's logs saying the dump was written is the sign
done_writing() { podman logs crashapp-pod-0-app 2>&1 | grep -q 'Dump successfully written'; }
WHY="files: $(ls -la "$DUMPS" 2>&1 | tail -n +2 | head -5); app: $(podman logs crashapp-pod-0-app 2>&1 | tail -5)"
check crash-written eventually 60 done_writing
T1=$(date +%s)
DUMP=$(ls "$DUMPS"/crash-*.dmp 2>/dev/null | head -1)
base=$(basename "${DUMP:-none}")
WHY="$(ls "$DUMPS" | tr '\n' ' ')"
check dump-and-report test -n "$DUMP" -a -s "$DUMP.crashreport.json"
pid=$(sed -E -n 's/^crash-([0-9]+)-([0-9]+)-(.+)\.dmp$/\1/p' <<< "$base")
t=$(sed -E -n 's/^crash-([0-9]+)-([0-9]+)-(.+)\.dmp$/\2/p' <<< "$base")
WHY="$base: pid '$pid' (the app's: $APID), time '$t' (the crash: $T0..$T1)"
check dump-name test "$pid" = "$APID" -a "${t:-0}" -ge "$T0" -a "${t:-0}" -le "$T1"
WHY="$(stat -c '%U %u:%g %a' "$DUMP" "$DUMP.crashreport.json" 2>&1 | tr '\n' ' ')"
check written-as-app test "$(stat -c '%u %a' "$DUMP" "$DUMP.crashreport.json" | sort -u)" = "1000 600"
WHY="$(head -c 300 "$DUMP.crashreport.json")"
check report-names-exception jq -e '[.payload.threads[] | select(.crashed == "true") | .managed_exception_type] ==
	["System.InvalidOperationException"]' "$DUMP.crashreport.json"
WHY="$(stat -c %s "$DUMP") bytes"
check dump-size test "$(stat -c %s "$DUMP")" -gt 1000000
echo "crash dump (mini) of the webapp in a pod: $(stat -c %s "$DUMP") bytes; report $(stat -c %s "$DUMP.crashreport.json") bytes" >&2
if [ -x "$DD" ]; then
	timeout 120 "$DD" analyze "$DUMP" -c clrthreads -c exit > "$W/dd.out" 2>&1
	WHY="$(head -c 600 "$W/dd.out")"
	check dotnet-dump-sees-exception grep -q 'System.InvalidOperationException' "$W/dd.out"
else
	fail dotnet-dump-sees-exception "no $DD (copy build/tools from a full build)"
fi
(cd "$W" && podman kube down "$W/play.yaml" > /dev/null 2>&1)
e2e_cleanup_check
