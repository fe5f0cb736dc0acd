#!/usr/bin/env bash
# scripts/build-image.sh [--webhook] IMAGE BINARY VERSION - build one of diagport's two images with
# whichever of podman, buildah or docker is installed (in that order; BUILDER= chooses).
#   the agent's (Containerfile): BINARY is the static diagport; the context holds only the
#     Containerfile, the binary, Debian's CA bundle and a tar of the two empty mount points.
#   --webhook (Containerfile.webhook): BINARY is the dynamically linked diagport; the context holds
#     the Containerfile and one tar of the root: /diagport (stripped), the CA bundle, the loader and
#     the shared libraries the webhook links or loads (ldd of the binary and of each library in
#     WEBHOOK_DLOPEN, the sonames webhook/server_mhd.c, webhook/certgen.c and common/hclient.c open).
# Nothing else of the checkout reaches the builder. With podman and buildah, CONTAINERS_CONF may
# point at tests/containers/containers.conf on machines whose cgroups need it.
set -euo pipefail
kind=agent
if [ "${1:-}" = --webhook ]; then kind=webhook; shift; fi
[ $# -eq 3 ] || { echo "usage: scripts/build-image.sh [--webhook] IMAGE BINARY VERSION" >&2; exit 2; }
image=$1 bin=$2 version=$3
root=$(cd "$(dirname "$0")/.." && pwd)
builder=${BUILDER:-}
if [ -z "$builder" ]; then
	for b in podman buildah docker; do
		if command -v "$b" > /dev/null; then builder=$b; break; fi
	done
fi
[ -n "$builder" ] || { echo "build-image: none of podman, buildah, docker is installed" >&2; exit 2; }
bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$bundle" ] || { echo "build-image: no CA bundle at $bundle (apt-get install ca-certificates)" >&2; exit 2; }
ctx=$(mktemp -d "${TMPDIR:-/tmp}/diagport-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT

# libs_of FILE...: the resolved paths of every shared library the files need, loader included
libs_of() {
	for f in "$@"; do ldd "$f"; done | awk '$2 == "=>" && $3 ~ /^\// { print $3 } $1 ~ /^\// && $2 ~ /^\(/ { print $1 }' | sort -u
}

if [ "$kind" = agent ]; then
	file "$bin" | grep -q 'statically linked' || { echo "build-image: $bin is not a static binary" >&2; exit 2; }
	containerfile=$root/Containerfile
	cp "$bin" "$ctx/diagport"
	chmod 0755 "$ctx/diagport"
	cp "$bundle" "$ctx/ca-certificates.crt"
	chmod 0644 "$ctx/ca-certificates.crt"
	mkdir -m 0777 "$ctx/diag" "$ctx/dumps"
	tar -C "$ctx" --owner=1654 --group=1654 --numeric-owner --mtime=@0 -cf "$ctx/mountpoints.tar" diag dumps
	rmdir "$ctx/diag" "$ctx/dumps"
else
	file "$bin" | grep -q 'dynamically linked' || { echo "build-image: $bin is not a dynamically linked binary" >&2; exit 2; }
	containerfile=$root/Containerfile.webhook
	multiarch=$(gcc -print-multiarch 2> /dev/null || echo x86_64-linux-gnu)
	dlopened=(${WEBHOOK_DLOPEN:-libmicrohttpd.so.12 libgnutls.so.30 libcurl-gnutls.so.4})
	r=$ctx/root
	mkdir -p "$r/lib/$multiarch" "$r/etc/ssl/certs" "$r/tmp"
	chmod 1777 "$r/tmp"
	cp "$bin" "$r/diagport"
	strip "$r/diagport"
	chmod 0755 "$r/diagport"
	cp "$bundle" "$r/etc/ssl/certs/ca-certificates.crt"
	libs=()
	for so in "${dlopened[@]}"; do
		p=/lib/$multiarch/$so
		[ -e "$p" ] || p=/usr/lib/$multiarch/$so
		[ -e "$p" ] || { echo "build-image: $so is not installed (scripts/prereqs.sh build installs it)" >&2; exit 2; }
		libs+=("$p")
	done
	while read -r lib; do
		case $lib in
		*/ld-linux*) mkdir -p "$r/$(dirname "$lib")"; cp -L "$lib" "$r/$lib" ;;
		*) cp -L "$lib" "$r/lib/$multiarch/$(basename "$lib")" ;;
		esac
	done < <({ libs_of "$bin" "${libs[@]}"; printf '%s\n' "${libs[@]}"; } | sort -u)
	# the webhook's own libraries resolve through the loader's default path, /lib/MULTIARCH
	chmod 0644 "$r"/lib/"$multiarch"/* "$r/etc/ssl/certs/ca-certificates.crt"
	tar -C "$r" --owner=0 --group=0 --numeric-owner --mtime=@0 -cf "$ctx/rootfs.tar" .
	rm -rf "$r"
fi
cp "$containerfile" "$ctx/Containerfile"
case $builder in
buildah) buildah bud --quiet --format docker --build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" ;;
podman) podman build --quiet --format docker --build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" ;;
*) "$builder" build --quiet --build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" ;;
esac > /dev/null
size=$("$builder" image inspect --format '{{.Size}}' "$image" 2>/dev/null || echo "?")
echo "$image ($builder, $size bytes)"
