#!/usr/bin/env bash
# prereqs.sh MODE - install what MODE (build|demo|test|bench|lint|fuzz|cdk) needs, and
# nothing else. Called by every Makefile target before it does its work, so it
# must be quiet and fast when everything is present: it only looks (dpkg-query,
# command -v, a stamp file) and calls apt-get or npm when something is missing,
# printing one line per thing it installs.
#
# Debian packages come from apt; npm packages are installed into
# tests/validate/node_modules (the test validators) and cdk/node_modules (the
# CDK construct library's build and test tools) from the package.json beside
# them (exact versions, no lock file), re-installed whenever it changes; a node_modules that
# `npm install` put there holding those exact versions is kept.
set -euo pipefail

usage() {
	echo "usage: scripts/prereqs.sh build|demo|test|bench|lint|fuzz|cdk" >&2
	exit 2
}
[ $# -eq 1 ] || usage
mode=$1

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

build_pkgs=(pkg-config gcc make libjansson-dev libyaml-dev libcurl4-gnutls-dev
	libseccomp-dev libmicrohttpd-dev libgnutls28-dev
	# gzip for pprof profiles (launcher/pprof.c; libz.a for the static build)
	zlib1g-dev
	# the egress client's TLS (cloud/webc_tls.c; libssl.a for the static build) and the CA bundle
	# that the image carries
	libssl-dev ca-certificates)
test_pkgs=(awscli python3-jsonpatch python3-yaml jq curl valgrind openssl file binutils util-linux librsvg2-bin chromium prometheus
	# job_pod.sh runs an injected pod in real containers: podman with runc (crun refuses cgroup v1
	# hybrids), catatonit for the pod's infra container (a Recommends, not a Depends, of podman)
	podman runc catatonit
	# the Compose golden cases: both read every injected file (config), no daemon needed
	docker-compose podman-compose
	# perf_profile.sh: Debian's perf beside the agent's perf engine, on the same process
	linux-perf
	# pprof_judge.sh: `go tool pprof -top` reads the agent's pprof profiles
	golang-go)
bench_pkgs=(hyperfine jq wrk nginx bc time)
lint_pkgs=(cppcheck clang-tidy)
fuzz_pkgs=(clang-14 libclang-rt-14-dev)
# the CDK library's copy of the injection rules is compiled to WebAssembly by Debian's emscripten,
# whose JavaScript passes need acorn (node-acorn; see NODE_PATH in the Makefile)
cdk_pkgs=(emscripten node-acorn)

want=()
want_npm=()
case $mode in
build) want=("${build_pkgs[@]}") ;;
# the demo pipes through kubectl
demo) want=("${build_pkgs[@]}" curl file openssl podman runc catatonit python3-yaml) ;;
test) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${cdk_pkgs[@]}"); want_npm=(tests/validate cdk) ;;
bench) want=("${build_pkgs[@]}" "${test_pkgs[@]}" "${bench_pkgs[@]}"); want_npm=(tests/validate) ;;
# lint and fuzz compile the sources too, so they need the build headers.
lint) want=("${build_pkgs[@]}" "${lint_pkgs[@]}") ;;
fuzz) want=("${build_pkgs[@]}" "${fuzz_pkgs[@]}") ;;
cdk) want=("${build_pkgs[@]}" "${cdk_pkgs[@]}"); want_npm=(cdk) ;;
*) usage ;;
esac

as_root=()
if [ "$(id -u)" -ne 0 ]; then
	as_root=(sudo)
fi

installed() {
	[ "$(dpkg-query -W -f='${Status}' "$1" 2>/dev/null)" = "install ok installed" ]
}

missing=()
add_missing() {
	local p
	for p in "${missing[@]+"${missing[@]}"}"; do
		[ "$p" = "$1" ] && return 0
	done
	missing+=("$1")
}

for p in "${want[@]}"; do
	installed "$p" || add_missing "$p"
done

if [ "$mode" = demo ]; then
	command -v kubectl >/dev/null 2>&1 || add_missing kubernetes-client
elif [ "$mode" = cdk ]; then
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		add_missing nodejs
		add_missing npm
	fi
elif [ "$mode" != build ] && [ "$mode" != lint ] && [ "$mode" != fuzz ]; then
	# The tests call Debian's AWS CLI and Debian's python3 by absolute path:
	# an `aws` or `python3` earlier on PATH may be another installation.
	[ -x /usr/bin/aws ] || add_missing awscli
	[ -x /usr/bin/python3 ] || add_missing python3
	# kubectl may come from another vendor's package; Debian's is the fallback.
	command -v kubectl >/dev/null 2>&1 || add_missing kubernetes-client
	if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
		add_missing nodejs
		add_missing npm
	fi
fi

apt_log=
apt_run() {
	if ! DEBIAN_FRONTEND=noninteractive "${as_root[@]+"${as_root[@]}"}" "$@" >>"$apt_log" 2>&1 </dev/null; then
		echo "prereqs: '$*' failed; its output:" >&2
		tail -n 40 "$apt_log" >&2
		exit 1
	fi
}

if [ ${#missing[@]} -gt 0 ]; then
	apt_log=$(mktemp)
	trap 'rm -f "$apt_log"' EXIT
	for p in "${missing[@]}"; do
		echo "prereqs: installing $p (apt)"
	done
	apt_run apt-get update
	apt_run apt-get install -y --no-install-recommends "${missing[@]}"
fi

# npm_as_pinned DIR: DIR/node_modules holds every package DIR/package.json names at the exact version it
# pins (what `npm install` by hand in cdk/ gives a new contributor, before `npm test` calls make).
npm_as_pinned() {
	node -e '
const fs = require("fs"), path = require("path"), dir = process.argv[1];
const read = (f) => JSON.parse(fs.readFileSync(f, "utf8"));
const p = read(path.join(dir, "package.json"));
for (const [name, want] of Object.entries({ ...p.dependencies, ...p.devDependencies })) {
  let got = null;
  try { got = read(path.join(dir, "node_modules", name, "package.json")).version; } catch (e) { }
  if (got !== want) process.exit(1);
}' "$1" 2>/dev/null
}

for rel in "${want_npm[@]+"${want_npm[@]}"}"; do
	dir=$root/$rel
	stamp=$dir/node_modules/.diagport-stamp
	sum="$(sha256sum <"$dir/package.json" | cut -d' ' -f1) node-$(node --version)"
	# installed by npm, not by this script (no stamp), and as pinned: kept, not installed again
	if [ ! -f "$stamp" ] && [ -d "$dir/node_modules" ] && npm_as_pinned "$dir"; then
		printf '%s\n' "$sum" >"$stamp"
	fi
	if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$sum" ]; then
		echo "prereqs: installing $rel npm packages (npm)"
		rm -rf "$dir/node_modules"
		npm_log=$(mktemp)
		if ! (cd "$dir" && npm install --no-package-lock --no-audit --no-fund \
			--loglevel=error >"$npm_log" 2>&1 </dev/null); then
			echo "prereqs: npm install in $rel failed; its output:" >&2
			tail -n 40 "$npm_log" >&2
			rm -f "$npm_log"
			exit 1
		fi
		rm -f "$npm_log"
		printf '%s\n' "$sum" >"$stamp"
	fi
done

# Microsoft's diagnostics tools, the judges of what the agent writes (dumps in dotnet-dump analyze,
# .gcdump files in dotnet-gcdump report, counters beside dotnet-counters, nettrace through
# dotnet-trace convert; TraceEvent, which dotnet-trace ships, reads traces independently) and the
# references of the benchmarks: one pinned version from NuGet, each in build/tools/NAME.
DOTNET_TOOLS_VERSION=10.0.750501
if [ "$mode" = test ] || [ "$mode" = bench ] || [ "$mode" = demo ]; then
	for name in dotnet-trace dotnet-dump dotnet-gcdump dotnet-counters dotnet-stack; do
		tool=$root/build/tools/$name
		if [ -x "$tool/$name" ] && [ -d "$tool/.store/$name/$DOTNET_TOOLS_VERSION" ]; then
			continue
		fi
		echo "prereqs: installing $name $DOTNET_TOOLS_VERSION (NuGet)"
		rm -rf "$tool"
		tool_log=$(mktemp)
		if ! DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1 dotnet tool install "$name" \
			--version "$DOTNET_TOOLS_VERSION" --tool-path "$tool" >"$tool_log" 2>&1 </dev/null; then
			echo "prereqs: dotnet tool install $name failed; its output:" >&2
			tail -n 40 "$tool_log" >&2
			rm -f "$tool_log"
			exit 1
		fi
		rm -f "$tool_log"
	done
fi
