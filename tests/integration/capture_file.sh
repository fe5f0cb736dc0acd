#!/usr/bin/env bash
# capture_file.sh - a capture run with no HTTP request in the middle, into a
# file (capture_driver.c: the agent's port, a capture value, capture_run, the
# operation's outcome), against the real console app:
#   stacks/*   the file is written whole under its own name (no partial file left)
#   again/*    a second capture to the same path does not replace the first (PATH-2)
#   dump/*     a dump into a file: an ELF core
#   trace/*    a 1 s trace into a file: a whole nettrace stream (diagport nettrace stats)
#   failed/*   a file in a directory that does not exist: Failed, named, nothing written
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=capture-file
. tests/lib.sh
agent_setup capture-file
build_apps
CFLAGS_PKG=$(pkg-config --cflags jansson yaml-0.1 libcurl libseccomp)
LIBS_PKG="$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread"
# shellcheck disable=SC2086
cc -std=c11 -D_GNU_SOURCE -I. -Icommon $CFLAGS_PKG -o "$W/driver" tests/integration/capture_driver.c \
	"$B/libdiagport.a" $LIBS_PKG 2> "$W/cc.log" || { fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }
mkdir -p -m 0777 "$W/dumps" "$W/out"

# drive KIND FILE: the driver on a fresh socket with the console app attached; its output in $W/drive.out
drive() {
	local s=$W/dumps/port-$RANDOM
	"$W/driver" "$s" "$W/dumps" "$1" "$2" > "$W/drive.out" 2> "$W/drive.err" &
	local d=$!
	eventually 5 test -S "$s"
	DOTNET_DiagnosticPorts=$s,connect,nosuspend dotnet "$B/apps/console/console.dll" sleep 60 > "$W/app.out" 2>&1 &
	local app=$!
	PIDS+=("$d" "$app")
	wait "$d"
	RC=$?
	kill -9 "$app" 2> /dev/null
	wait "$app" 2> /dev/null
}

drive stacks "$W/out/threads.txt"
WHY="rc $RC: $(cat "$W/drive.out" "$W/drive.err")"; check stacks/succeeded test "$RC" = 0
WHY="$(cat "$W/drive.out")"; check stacks/location grep -qx "Succeeded $W/out/threads.txt" "$W/drive.out"
WHY="$(head -c 300 "$W/out/threads.txt" 2> /dev/null)"; check stacks/has-threads grep -q 'console.dll!DiagportTestConsole.Program.Main' "$W/out/threads.txt"
WHY="$(ls -a "$W/out")"; check stacks/no-partial-left bash -c "! ls -a '$W/out' | grep -q partial"

first=$(sha256sum < "$W/out/threads.txt")
drive stacks "$W/out/threads.txt"
WHY="$(cat "$W/drive.out")"; check again/new-name grep -qx "Succeeded $W/out/threads.txt-2" "$W/drive.out"
WHY="the first file changed"; check again/first-kept test "$(sha256sum < "$W/out/threads.txt")" = "$first"

drive dump "$W/out/app.core"
WHY="rc $RC: $(cat "$W/drive.out" "$W/drive.err")"; check dump/succeeded test "$RC" = 0
WHY="$(file "$W/out/app.core" 2>&1)"; check dump/elf-core bash -c "file '$W/out/app.core' | grep -q 'ELF.*core file'"

drive trace "$W/out/cpu.nettrace"
WHY="rc $RC: $(cat "$W/drive.out" "$W/drive.err")"; check trace/succeeded test "$RC" = 0
WHY="$("$D" nettrace stats "$W/out/cpu.nettrace" 2>&1 | head -c 300)"; check trace/whole "$D" nettrace stats "$W/out/cpu.nettrace"

drive stacks "$W/nowhere/threads.txt"
WHY="rc $RC: $(cat "$W/drive.out")"; check failed/failed test "$RC" = 1
WHY="$(cat "$W/drive.out")"; check failed/names-the-place grep -q "$W/nowhere" "$W/drive.out"
WHY="$(ls -a "$W/out" "$W/dumps")"; check failed/nothing-left bash -c "! ls -a '$W/out' '$W/dumps' | grep -q 'partial\|diagport-dump'"
