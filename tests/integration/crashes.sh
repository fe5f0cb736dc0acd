#!/usr/bin/env bash
# crashes.sh - a real .NET app that dies of an unhandled exception (tests/apps/console `throw`, then SIGHUP:
# InvalidOperationException("crash on a background thread") thrown by Program.Crash on the thread "crasher"):
# the runtime's crash dump and report (the crash settings the injector and init mode give an app) are
# noticed, recorded in GET /crashes with the exception from the agent's history, shipped to Crashes:Egress and
# removed from the volume; dotnet-dump's printexception reads the shipped dump; init mode sets the crash
# settings itself and exits with the app's status once the evidence is shipped; nothing is lost when the
# agent is killed mid-shipment (a store that never answers: tests/integration/hostile_store.py's silent mode)
# or restarted; a crash loop never keeps more than Crashes:MaxCount crashes in the volume.
set -u
cd "$(dirname "$0")/../.."
T_NAME=crashes
. tests/lib.sh
agent_setup crashes
build_apps
APP="$B/apps/console/console.dll"
DD=$B/tools/dotnet-dump/dotnet-dump

# crash_app [DIR]: the app with the crash settings the injector gives it (dumps into DIR, default the agent's
# $W/dumps), attached, its history begun, then crashed; returns once it has died (APID its pid)
crash_app() {
	: > "$W/app.out" # emptied here, not by the background job: an earlier run's READY is not this one's
	DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=1 \
		DOTNET_DbgMiniDumpName="${1:-$W/dumps}/crash-%p-%t-%e.dmp" DOTNET_EnableCrashReport=1 \
		dotnet "$APP" throw > "$W/app.out" 2>&1 &
	local app=$!
	PIDS+=($app)
	wait_for "$W/app.out" READY 30 || { fail app-start "the app did not start" "$W/app.out"; exit 0; }
	APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
	if [ -n "${NO_HISTORY:-}" ]; then # an agent that keeps none: the app's rounds have begun (its SIGHUP handler is set)
		wait_for "$W/app.out" "ROUND 1\$" 30 || fail app-rounds "no rounds" "$W/app.out"
	else
		eventually 60 bash -c "curl -s '$U/exceptions?pid=$APID' | grep -q outer" ||
			fail app-history "no exception of pid $APID in /exceptions within 60 s" "$W/agent.log"
	fi
	kill -HUP "$app"
	wait "$app" 2>/dev/null
	APP_RC=$?
}
crashed() { curl -s "$U/crashes" | jq -e --argjson p "$1" 'any(.[]; .pid == $p)' > /dev/null; }
crash_files() { ls "$W"/dumps/crash-* 2>/dev/null | wc -l; }

# --- sidecar: recorded, kept (no egress)
start_agent
crash_app
WHY="app exit $APP_RC"
check app-aborted test "$APP_RC" = 134
eventually 15 crashed "$APID" || fail crash-seen "no crash in /crashes" "$W/agent.log"
curl -s "$U/crashes" > "$W/crashes.json"
C=$(jq -c --argjson p "$APID" '[.[] | select(.pid == $p)][0]' "$W/crashes.json")
WHY="$C"
check crash-who jqe '.processName == "console.dll" and .exitSignal == 6 and (.time | test("^20[0-9-]{8}T"))' <<< "$C"
check crash-exception jqe '.exception.typeName == "System.InvalidOperationException" and .exception.hresult == "0x80131509"' <<< "$C"
# the message is the history's: there when the throw's event left the runtime before it stopped (its events are
# sent about every 100 ms; createdump then freezes it), else null (the dump has it: dotnet-dump below)
check crash-message jqe '.exception.message == "crash on a background thread" or .exception.message == null' <<< "$C"
check crash-stack jqe '.exception.stack[0] == "console.dll!DiagportTestConsole.Program.Crash()"' <<< "$C"
check crash-kept jqe '[.artifacts[] | .kind + ":" + .state] | sort == ["crashReport:kept", "dump:kept"]' <<< "$C"
check crash-files-there bash -c "jq -r '.artifacts[].file' <<< '$C' | xargs ls"
check crash-logged grep -q '"event":"crash".*"exception":"System.InvalidOperationException"' "$W/agent.log"

# --- killed mid-shipment (a store that never answers), then restarted with a store: shipped, nothing lost
DUMP=$(ls "$W"/dumps/crash-*.dmp | head -1)
DUMP_BYTES=$(stat -c %s "$DUMP")
kill "$AG"; wait "$AG" 2>/dev/null
/usr/bin/python3 tests/integration/hostile_store.py "$W/store.port" "$W/store.log" > "$W/store.out" 2>&1 &
PIDS+=($!)
wait_for "$W/store.port" . 15 || { fail start-store "it did not start" "$W/store.out"; exit 0; }
printf 'Egress:\n  S3Storage:\n    stalled:\n      Endpoint: http://127.0.0.1:%s\n      BucketName: silent\n      AccessKeyId: AKID\n      SecretAccessKey: SECRET\nCrashes:\n  Egress: stalled\n' \
	"$(cat "$W/store.port")" > "$W/stalled.yaml"
start_agent --config "$W/stalled.yaml"
WHY="$(grep -E 'crash|capture' "$W/agent.log" | tail -3)"
check ship-on-start wait_for "$W/agent.log" '"kind":"file"' 15
kill -9 "$AG"; wait "$AG" 2>/dev/null
WHY="$(ls -la "$W/dumps")"
check mid-ship-kept test "$(crash_files)" = 2
printf 'Crashes:\n  Egress: out\n' > "$W/ship.yaml"
start_agent --config "$W/ship.yaml"
shipped() { [ "$(crash_files)" = 0 ] && ls "$W"/out/crash-*.dmp > /dev/null 2>&1; }
WHY="dumps: $(ls "$W/dumps"); out: $(ls "$W/out"); $(grep crash "$W/agent.log" | tail -3)"
check restart-shipped eventually 30 shipped
check shipped-whole bash -c "[ \"\$(stat -c %s '$W/out/$(basename "$DUMP")')\" = '$DUMP_BYTES' ]"
check report-shipped bash -c "ls '$W'/out/crash-*.dmp.crashreport.json"
curl -s "$U/crashes" > "$W/crashes2.json"
WHY="$(cat "$W/crashes2.json")"
check crashes-after-restart jq -e '.[0].artifacts | all(.[]; .state == "shipped" and .file == null and (.location | startswith("'"$W"'/out/")))' "$W/crashes2.json"
check crash-type-from-report jq -e '.[0].exception.typeName == "System.InvalidOperationException"' "$W/crashes2.json"

# --- dotnet-dump reads the shipped dump: the crashed thread's exception, type and message
TID=$(jq -r '.payload.threads[] | select(.crashed == "true") | .native_thread_id' "$W"/out/crash-*.dmp.crashreport.json)
timeout 120 "$DD" analyze "$W/out/$(basename "$DUMP")" -c "setthread -t $((TID))" -c "pe" -c "exit" > "$W/pe.txt" 2>&1
WHY="$(tail -12 "$W/pe.txt")"
check dotnet-dump-type grep -q 'Exception type: *System.InvalidOperationException' "$W/pe.txt"
check dotnet-dump-message grep -q 'Message: *crash on a background thread' "$W/pe.txt"

# --- a crash while shipping is on: shipped at once; the app's hostile names beside it (the volume is the
# app's: a FIFO that would hold a reader, links to files that are not the app's) hold nothing up, ship nothing
rm -f "$W"/out/*
mkfifo "$W/dumps/crash-997-1-fifo.dmp" "$W/dumps/crash-996-1-fifo.dmp.crashreport.json"
ln -s /etc/passwd "$W/dumps/crash-998-1-link.dmp"
ln -s /etc/passwd "$W/dumps/crash-998-1-link.dmp.crashreport.json"
crash_app
real_shipped() { ls "$W"/out/crash-"$APID"-*.dmp > /dev/null 2>&1 && ! ls "$W"/dumps/crash-"$APID"-* > /dev/null 2>&1; }
WHY="dumps: $(ls "$W/dumps"); out: $(ls "$W/out")"
check live-shipped eventually 30 real_shipped
WHY="out: $(ls "$W/out"); $(grep -E 'crash-ship' "$W/agent.log" | tail -2)"
check hostile-not-shipped bash -c "! ls '$W'/out/crash-99* 2>/dev/null && ! grep -rq '^root:' '$W/out'"
WHY="$(curl -s "$U/crashes" | jq -c '[.[].pid]')"
check hostile-not-listed bash -c "curl -s '$U/crashes' | jq -e 'all(.[]; .pid < 990 or .pid > 999)' > /dev/null"
check hostile-left-alone bash -c "[ -p '$W/dumps/crash-997-1-fifo.dmp' ] && [ -L '$W/dumps/crash-998-1-link.dmp' ]"
rm -f "$W"/dumps/crash-99*
check live-crash-listed eventually 10 crashed "$APID"

# --- a crash loop: the volume keeps Crashes:MaxCount crashes, the oldest removed first
kill "$AG"; wait "$AG" 2>/dev/null
printf 'Crashes:\n  MaxCount: 1\n' > "$W/cap.yaml"
start_agent --config "$W/cap.yaml"
crash_app
FIRST=$APID
eventually 15 crashed "$FIRST" || fail loop-first "not seen" "$W/agent.log"
crash_app
eventually 15 crashed "$APID" || fail loop-second "not seen" "$W/agent.log"
WHY="$(ls "$W/dumps")"
check loop-capped eventually 10 bash -c "[ \$(ls '$W'/dumps/crash-* | wc -l) = 2 ] && ls '$W'/dumps/crash-$APID-*.dmp"
check loop-oldest-gone bash -c "! ls '$W'/dumps/crash-$FIRST-* 2>/dev/null"
check loop-said grep -q 'crash evidence removed' "$W/agent.log"
curl -s "$U/crashes" > "$W/crashes3.json"
WHY="$(cat "$W/crashes3.json")"
check loop-listed jq -e --argjson p "$FIRST" '[.[] | select(.pid == $p)][0].artifacts | all(.[]; .state == "dropped")' "$W/crashes3.json"
kill "$AG"; wait "$AG" 2>/dev/null
rm -f "$W"/dumps/crash-*
# the oldest by the crash's time, not by the directory's order: five crashes' files (no runtime has their pids)
for t in 1795900004 1795900001 1795900003 1795900000 1795900002; do
	printf 'x' > "$W/dumps/crash-$((t % 10 + 900))-$t-app.dmp"
done
start_agent --config "$W/cap.yaml"
newest_only() { [ "$(ls "$W"/dumps/crash-* 2>/dev/null)" = "$W/dumps/crash-904-1795900004-app.dmp" ]; }
WHY="$(ls "$W/dumps")"
check loop-oldest-by-time eventually 10 newest_only
curl -s "$U/crashes" > "$W/crashes5.json"
WHY="$(jq -c '[.[].pid]' "$W/crashes5.json")"
check crashes-newest-first jq -e '[.[].pid] == [904, 903, 902, 901, 900]' "$W/crashes5.json"
kill "$AG"; wait "$AG" 2>/dev/null
rm -f "$W"/dumps/crash-*

# --- shipments need the exceptions kind to be seen: an agent without it lists none in /operations
start_agent --captures stacks,metrics --config "$W/ship.yaml"
rm -f "$W"/out/*
NO_HISTORY=1 crash_app
check unseen-shipped eventually 30 shipped
WHY="$(curl -s "$U/operations")"
check unseen-operations bash -c "curl -s '$U/operations' | jq -e 'length == 0' > /dev/null"
check unseen-crashes-403 test "$(code "$U/crashes")" = 403
kill "$AG"; wait "$AG" 2>/dev/null

# --- a full volume (a 3 MiB tmpfs; the Mini dump is 8 MB): createdump writes the report, fails the dump and
# removes it; the crash is recorded from the report, nothing half written is kept or shipped
mkdir -p "$W/small"
mount -t tmpfs -o size=3m,mode=1777 tmpfs "$W/small" || { fail full-volume-mount "cannot mount a tmpfs (the tests run as root)"; exit 0; }
cleanup_more() { umount "$W/small" 2>/dev/null; }
start_agent --dumps "$W/small" --config "$W/ship.yaml"
crash_app "$W/small"
eventually 15 crashed "$APID" || fail full-seen "not seen" "$W/agent.log"
curl -s "$U/crashes" > "$W/crashes4.json"
C=$(jq -c --argjson p "$APID" '[.[] | select(.pid == $p)][0]' "$W/crashes4.json")
WHY="$C; app: $(grep createdump "$W/app.out" | tail -3)"
check full-createdump-failed grep -q 'Writing dump FAILED' "$W/app.out"
check full-recorded jqe '.exception.typeName == "System.InvalidOperationException" and ([.artifacts[].kind] == ["crashReport"])' <<< "$C"
check full-no-partial bash -c "! ls '$W'/small/crash-*.dmp 2>/dev/null && ! ls '$W'/out/crash-$APID-*.dmp 2>/dev/null"
check full-report-shipped eventually 15 bash -c "ls '$W'/out/crash-$APID-*.crashreport.json"
check full-agent-serves test "$(code "$U/healthz")" = 200
kill "$AG"; wait "$AG" 2>/dev/null
umount "$W/small"

# --- init mode: the crash settings set for the app, the evidence shipped before the agent exits with its status
: > "$W/agent.log"
"$D" launch --config "$W/agent.yaml" --config "$W/ship.yaml" --socket "$W/dumps/port" --urls http://127.0.0.1:0 \
	--dumps "$W/dumps" -- dotnet "$APP" throw > "$W/init.out" 2> "$W/agent.log" &
AG=$!
PIDS+=($AG)
P=$(listening_port "$W/agent.log" urls 30 "$AG") || { fail init-start "no listening line" "$W/agent.log"; exit 0; }
U=http://127.0.0.1:$P
wait_for "$W/init.out" READY 30 || fail init-app "not ready" "$W/init.out"
IPID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/init.out")
eventually 30 bash -c "curl -s '$U/exceptions?pid=$IPID' | grep -q outer" || fail init-history "no history" "$W/agent.log"
kill -HUP "$IPID"
wait "$AG"
RC=$?
WHY="exit $RC; $(grep -E 'crash' "$W/agent.log" | tail -3)"
check init-exit-status test "$RC" = 134
check init-shipped-before-exit bash -c "ls '$W'/out/crash-$IPID-*.dmp && ls '$W'/out/crash-$IPID-*.crashreport.json"
check init-volume-empty test "$(crash_files)" = 0
