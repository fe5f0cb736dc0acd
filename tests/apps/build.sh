#!/usr/bin/env bash
# tests/apps/build.sh [OUTDIR] - builds the .NET apps diagport's tests attach
# to, offline, into OUTDIR (default build/apps, relative to the repository):
#
#   OUTDIR/webapp/webapp.dll     run as: ASPNETCORE_URLS=http://127.0.0.1:PORT dotnet OUTDIR/webapp/webapp.dll
#   OUTDIR/console/console.dll   run as: dotnet OUTDIR/console/console.dll [sleep N | exit N | signal | tick N [GAP_MS]
#                                | spin [THREADS] | alloc | syscalls | native LIB | mix LIB | throw [RATE]
#                                | throwwork RATE [THREADS]]
#                                (LIB: tests/apps/dpnative/dpnative.c built as a shared library by the test)
#   OUTDIR/tracecount/tracecount.dll FILE.nettrace   (only with TRACEEVENT_DIR: TraceEvent counting events)
#   OUTDIR/heapstat/heapstat.dll CORE                (only with HEAPSTAT=1: ClrMD's per-type heap table;
#                                                     its package comes from NuGet, tests/apps/heapstat/NuGet.config)
#
# The apps reference no packages, so restore needs only the targeting packs
# that ship with the SDK; tests/apps/NuGet.config clears every package source
# so nothing reaches for the network. Intermediate files go to OUTDIR/.artifacts,
# never next to the sources. An app whose dll is newer than every file of its
# source directory (and this script and NuGet.config) is not rebuilt.
#
# Prints one line per app: "built NAME: PATH (Ns)" or "up to date NAME: PATH".
# On a failed build, the build's output goes to stderr and the exit status is 1.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/env.sh" "${1:-}"

# up_to_date APP DLL: true when DLL exists and no source is newer.
up_to_date() {
	[ -f "$2" ] || return 1
	[ -z "$(find "$here/$1" "$here/NuGet.config" "$here/build.sh" "$here/env.sh" \
		-newer "$2" -type f -print -quit)" ]
}

build() {
	local app=$1 dll=$out/$1/$1.dll log start
	shift
	if up_to_date "$app" "$dll"; then
		echo "up to date $app: $dll"
		return 0
	fi
	log=$out/.artifacts/$app.log
	mkdir -p "$out/.artifacts"
	start=$SECONDS
	# No build servers: nothing outlives the build holding our output open.
	if ! dotnet build "$here/$app/$app.csproj" -c Release --nologo \
		-o "$out/$app" --artifacts-path "$out/.artifacts" \
		-nodeReuse:false -p:UseSharedCompilation=false \
		-p:UseAppHost=false -p:TreatWarningsAsErrors=false "$@" \
		>"$log" 2>&1; then
		cat "$log" >&2
		echo "build.sh: building $app failed" >&2
		return 1
	fi
	# msbuild leaves the dll's old time when nothing changed: mark it fresh.
	touch "$dll"
	echo "built $app: $dll ($((SECONDS - start))s)"
}

build webapp
build console
# tracecount (an independent nettrace reader for the tests) needs TraceEvent: TRACEEVENT_DIR names the
# directory that holds Microsoft.Diagnostics.Tracing.TraceEvent.dll (the dotnet-trace tool's own copy)
if [ -n "${TRACEEVENT_DIR:-}" ]; then
	build tracecount "-p:TraceEventDir=$TRACEEVENT_DIR"
fi
# heapstat (an independent GC heap reader for the tests: ClrMD) restores its package from NuGet
if [ "${HEAPSTAT:-0}" = 1 ]; then
	build heapstat
fi
