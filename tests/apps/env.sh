# tests/apps/env.sh - sourced by build.sh and build-legacy.sh with the output
# directory as $1: sets here (this directory), root (the repository), out
# (OUTDIR, made absolute; default build/apps) and the environment every
# dotnet build of the test apps runs with (no telemetry, no build servers
# that outlive the build, no developer certificate).
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/../.." && pwd)
out=${1:-$root/build/apps}
mkdir -p "$out"
out=$(cd "$out" && pwd)

export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 \
	DOTNET_CLI_WORKLOAD_UPDATE_NOTIFY_DISABLE=1 \
	DOTNET_GENERATE_ASPNET_CERTIFICATE=false DOTNET_CLI_USE_MSBUILD_SERVER=0 \
	MSBUILDDISABLENODEREUSE=1

command -v dotnet >/dev/null || { echo "$(basename "$0"): dotnet not found" >&2; exit 1; }
