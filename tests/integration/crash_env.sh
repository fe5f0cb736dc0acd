#!/usr/bin/env bash
# crash_env.sh - the crash-dump settings inject gives an app container (option crash-dumps), on a real
# .NET runtime: the test webapp run with exactly the variables `diagport inject k8s` wrote (the dumps
# directory /dumps moved to a scratch directory, the rest as written), then made to die of an unhandled
# exception on a thread of its own (/crash).
#   injected:  the crash leaves crash-PID-TIME-dotnet.dmp (PID the app's, TIME the crash's second) and its
#              .crashreport.json, whose crashed thread names the exception's type (the report holds no
#              message); dotnet-dump opens the dump and sees the exception on the crashing thread
#   own-off:   the workload's own DOTNET_DbgEnableMiniDump=0 beside them (as an image's ENV or an envFrom
#              would give it, where inject cannot see it): no dump, no report, as docs/INJECTION.md says
#   own-name:  the workload's own DOTNET_DbgMiniDumpName: the dump goes there, not to ours
#   off:       `--crash-dumps off` writes none of the variables
set -u
cd "$(dirname "$0")/../.."
T_NAME=crash-env
. tests/lib.sh
agent_setup crashenv
build_apps
unset DOTNET_DiagnosticPorts DOTNET_DbgEnableMiniDump DOTNET_DbgMiniDumpType DOTNET_DbgMiniDumpName \
	DOTNET_EnableCrashReport COMPlus_DbgEnableMiniDump COMPlus_DbgMiniDumpType COMPlus_DbgMiniDumpName \
	COMPlus_EnableCrashReport
DD=$B/tools/dotnet-dump/dotnet-dump

printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - {name: app, image: x}\n' > "$W/pod.yaml"
# settings ARGS...: the app container's crash-dump variables as `diagport inject k8s ARGS` writes them, NAME=VALUE a line
settings() {
	"$D" inject k8s "$@" -o json -f "$W/pod.yaml" |
		jq -r '.spec.containers[0].env[] | select(.name | test("DbgEnableMiniDump|DbgMiniDump|EnableCrashReport")) | "\(.name)=\(.value)"'
}
settings > "$W/env"
WHY="$(cat "$W/env")"
check four-settings test "$(wc -l < "$W/env")" = 4 -a "$(grep -c '^COMPlus_' "$W/env")" = 4
mapfile -t ENVS < <(sed "s|=/dumps/|=$W/DIR/|" "$W/env")

# crash NAME [ENV=VALUE...]: the webapp with the injected settings (dumps into $W/NAME) and the extra
# variables, made to crash; sets CPID (its pid) and waits until it has exited (30 s)
crash() {
	local name=$1 out=$W/$1.out i
	shift
	mkdir -p "$W/$name"
	env "${ENVS[@]//\/DIR\//\/$name\/}" "$@" ASPNETCORE_URLS=http://127.0.0.1:0 \
		dotnet "$B/apps/webapp/webapp.dll" > "$out" 2>&1 &
	CPID=$!
	PIDS+=($CPID)
	wait_for "$out" READY 30 || return 1
	curl -s "$(sed -n 's/^LISTENING \(http:.*\)$/\1/p' "$out" | head -1)/crash?message=crash-env-$name" > /dev/null
	for ((i = 0; i < 300; i++)); do kill -0 "$CPID" 2>/dev/null || break; sleep 0.1; done
	wait "$CPID" 2>/dev/null
	CRC=$?
}

T0=$(date +%s)
crash injected 2>/dev/null # bash says "Aborted": the runtime ends a crash with SIGABRT
T1=$(date +%s)
DUMP=$(ls "$W/injected"/crash-*.dmp 2>/dev/null | head -1)
WHY="exit $CRC; files: $(ls "$W/injected" | tr '\n' ' '); app: $(tail -3 "$W/injected.out")"
check injected-dump test -n "$DUMP" -a "$CRC" = 134
base=$(basename "$DUMP")
pid=$(sed -E -n 's/^crash-([0-9]+)-([0-9]+)-(.+)\.dmp$/\1/p' <<< "$base")
t=$(sed -E -n 's/^crash-([0-9]+)-([0-9]+)-(.+)\.dmp$/\2/p' <<< "$base")
exe=$(sed -E -n 's/^crash-([0-9]+)-([0-9]+)-(.+)\.dmp$/\3/p' <<< "$base")
WHY="$base: pid '$pid' (the app's: $CPID), time '$t' (the crash: $T0..$T1), exe '$exe'"
check injected-name test "$pid" = "$CPID" -a "$exe" = dotnet -a "${t:-0}" -ge "$T0" -a "${t:-0}" -le "$T1"
WHY="$(ls "$W/injected")"
check injected-report jq -e '[.payload.threads[] | select(.crashed == "true") | .managed_exception_type] ==
	["System.InvalidOperationException"]' "$DUMP.crashreport.json"
WHY="$(file "$DUMP")"
check injected-elf-core bash -c "file '$DUMP' | grep -q 'ELF 64-bit LSB core file'"
if [ -x "$DD" ]; then
	timeout 120 "$DD" analyze "$DUMP" -c clrthreads -c exit > "$W/dd.out" 2>&1
	WHY="$(head -c 600 "$W/dd.out")"
	check dotnet-dump-sees-exception grep -q 'System.InvalidOperationException' "$W/dd.out"
else
	fail dotnet-dump-sees-exception "no $DD (copy build/tools from a full build)"
fi

crash own-off DOTNET_DbgEnableMiniDump=0 2>/dev/null
WHY="exit $CRC; files: $(ls "$W/own-off" | tr '\n' ' ')"
check own-off-no-dump test "$CRC" = 134 -a -z "$(ls -A "$W/own-off")"

crash own-name DOTNET_DbgMiniDumpName="$W/own-name/mine-%p.dmp" 2>/dev/null
WHY="exit $CRC; files: $(ls "$W/own-name" | tr '\n' ' ')"
check own-name-wins test -f "$W/own-name/mine-$CPID.dmp" -a -z "$(ls "$W/own-name" | grep '^crash-')"

settings --crash-dumps off > "$W/env-off"
WHY="$(cat "$W/env-off")"
check off-none test ! -s "$W/env-off"
