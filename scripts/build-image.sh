#!/usr/bin/env bash
# scripts/build-image.sh IMAGE BINARY VERSION - build the agent's image (Containerfile) from a static
# diagport binary with whichever of podman, buildah or docker is installed (in that order; BUILDER=
# chooses). The build context is a scratch directory holding only the Containerfile, the binary,
# Debian's CA bundle (/etc/ssl/certs/ca-certificates.crt, package ca-certificates) and a tar of the
# two empty directories the image gets, so nothing else of the checkout reaches the builder. With podman and buildah, CONTAINERS_CONF may point at tests/containers/containers.conf on
# machines whose cgroups need it.
set -euo pipefail
image=$1 bin=$2 version=$3
root=$(cd "$(dirname "$0")/.." && pwd)
builder=${BUILDER:-}
if [ -z "$builder" ]; then
	for b in podman buildah docker; do
		if command -v "$b" > /dev/null; then builder=$b; break; fi
	done
fi
[ -n "$builder" ] || { echo "build-image: none of podman, buildah, docker is installed" >&2; exit 2; }
file "$bin" | grep -q 'statically linked' || { echo "build-image: $bin is not a static binary" >&2; exit 2; }
ctx=$(mktemp -d "${TMPDIR:-/tmp}/diagport-image.XXXXXX")
trap 'rm -rf "$ctx"' EXIT
cp "$root/Containerfile" "$ctx/Containerfile"
cp "$bin" "$ctx/diagport"
chmod 0755 "$ctx/diagport"
bundle=${CA_BUNDLE:-/etc/ssl/certs/ca-certificates.crt}
[ -s "$bundle" ] || { echo "build-image: no CA bundle at $bundle (apt-get install ca-certificates)" >&2; exit 2; }
cp "$bundle" "$ctx/ca-certificates.crt"
chmod 0644 "$ctx/ca-certificates.crt"
mkdir -m 0777 "$ctx/diag" "$ctx/dumps"
tar -C "$ctx" --owner=1654 --group=1654 --numeric-owner --mtime=@0 -cf "$ctx/mountpoints.tar" diag dumps
rmdir "$ctx/diag" "$ctx/dumps"
case $builder in
buildah) buildah bud --quiet --format docker --build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" ;;
podman) podman build --quiet --format docker --build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" ;;
*) "$builder" build --quiet --build-arg "VERSION=$version" -t "$image" -f "$ctx/Containerfile" "$ctx" ;;
esac > /dev/null
size=$("$builder" image inspect --format '{{.Size}}' "$image" 2>/dev/null || echo "?")
echo "$image ($builder, $size bytes)"
