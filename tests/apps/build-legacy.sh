#!/usr/bin/env bash
# tests/apps/build-legacy.sh [OUTDIR] - publishes tests/apps/legacy31, a
# self-contained .NET Core 3.1 app, into OUTDIR/legacy31 (default
# build/apps/legacy31), run as: TMPDIR=DIR OUTDIR/legacy31/legacy31 [SECONDS].
#
# Unlike the other test apps it restores packages: the 3.1 runtime, host and
# targeting packs, from nuget.org (tests/apps/legacy31/NuGet.config), into
# NuGet's global package folder, where a second build finds them. Not rebuilt
# when the executable is newer than its sources. Prints "built ..." or
# "up to date ..."; on failure the build's output goes to stderr, exit 1.
set -euo pipefail

. "$(dirname "${BASH_SOURCE[0]}")/env.sh" "${1:-}"
exe=$out/legacy31/legacy31

if [ -x "$exe" ] && [ -z "$(find "$here/legacy31" "$here/build-legacy.sh" "$here/env.sh" -newer "$exe" -type f -print -quit)" ]; then
	echo "up to date legacy31: $exe"
	exit 0
fi
mkdir -p "$out/.artifacts"
log=$out/.artifacts/legacy31.log
start=$SECONDS
if ! dotnet publish "$here/legacy31/legacy31.csproj" -c Release --nologo -o "$out/legacy31" \
	--artifacts-path "$out/.artifacts" -nodeReuse:false -p:UseSharedCompilation=false >"$log" 2>&1; then
	cat "$log" >&2
	echo "build-legacy.sh: publishing legacy31 failed (it needs nuget.org for the 3.1 runtime packs)" >&2
	exit 1
fi
touch "$exe"
echo "built legacy31: $exe ($((SECONDS - start))s)"
