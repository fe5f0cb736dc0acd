#!/usr/bin/env bash
# bench/azblob.sh - Azure Blob egress throughput (issue 19). Measures and prints; never gates.
# One azurite (npm, in memory, plain http on loopback), one file of MB MiB of random bytes, and, in
# alternating order for ROUNDS rounds:
#   diagport  tests/integration/azblob_driver.c: the agent's config reader, the egress process with its
#             seccomp profile, the file through its pipe, egress/azblob.c (SharedKey, 4 MiB blocks,
#             3 buffers: 2 senders)
#   sdk       @azure/storage-blob's BlockBlobClient.uploadFile (its defaults: 4 MiB blocks when the file
#             is over 256 MiB, else one Put Blob of up to 256 MiB; 5 at once) via tests/validate/azblob-read.mjs
# Each: wall time, MB/s, peak RSS (/usr/bin/time -v: the driver's is the larger of the agent side and
# the egress process, which it reports as its own children's), and the blob read back by sha256 once.
# azurite itself is the bottleneck on a 2-core machine: both figures are "through azurite", side by side.
# Knobs: MB (512), ROUNDS (3), BUILD (build).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
MB=${MB:-512}
ROUNDS=${ROUNDS:-3}
V=tests/validate
W=$(mktemp -d /tmp/bench-azblob.XXXXXX)
PIDS=()
trap 'for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null; done; rm -rf "$W"' EXIT
[ -x $V/node_modules/.bin/azurite-blob ] || scripts/prereqs.sh bench
# shellcheck disable=SC2046
cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -o "$W/driver" tests/integration/azblob_driver.c "$B/libdiagport.a" \
	$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread || exit 1
PORT=$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
$V/node_modules/.bin/azurite-blob --blobPort "$PORT" --inMemoryPersistence --disableTelemetry --skipApiVersionCheck \
	--silent > "$W/azurite.log" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 200); do grep -q "successfully listens" "$W/azurite.log" && break; sleep 0.1; done
URL=http://127.0.0.1:$PORT/devstoreaccount1
node $V/azblob-read.mjs "$URL" mkcontainer bench > /dev/null || exit 1
cat > "$W/az.yaml" << EOF
Egress:
  AzureBlobStorage:
    b:
      AccountUri: "$URL"
      ContainerName: bench
      AccountKey: "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
EOF
head -c $((MB << 20)) /dev/urandom > "$W/file"
SUM=$(sha256sum < "$W/file" | cut -d' ' -f1)
printf 'azblob egress: %d MiB to azurite on loopback, %d rounds\n' "$MB" "$ROUNDS"
printf '%-9s %8s %9s %10s\n' way seconds MB/s rss_MiB
one() { # WAY ROUND
	local t0 t1 s rss
	t0=$(date +%s.%N)
	if [ "$1" = diagport ]; then
		/usr/bin/time -v "$W/driver" "$W/az.yaml" b upload "d$2.bin" "$W/file" > "$W/out" 2> "$W/time" || { cat "$W/out"; return; }
	else
		/usr/bin/time -v node $V/azblob-read.mjs "$URL" upload bench "s$2.bin" "$W/file" > "$W/out" 2> "$W/time" ||
			{ cat "$W/time"; return; }
	fi
	t1=$(date +%s.%N)
	s=$(echo "$t1 - $t0" | bc -l)
	rss=$(awk -F: '/Maximum resident/ { print int($2 / 1024) }' "$W/time")
	printf '%-9s %8.2f %9.1f %10s\n' "$1" "$s" "$(echo "$MB / $s" | bc -l)" "$rss"
}
for r in $(seq 1 "$ROUNDS"); do
	if [ $((r % 2)) = 1 ]; then one diagport "$r"; one sdk "$r"; else one sdk "$r"; one diagport "$r"; fi
done
for b in d1.bin s1.bin; do
	got=$(node $V/azblob-read.mjs "$URL" get bench "$b" | sed 's/.*"sha256":"\([0-9a-f]*\)".*/\1/')
	[ "$got" = "$SUM" ] && echo "read back $b: sha256 matches" || echo "read back $b: sha256 DIFFERS ($got)"
done
