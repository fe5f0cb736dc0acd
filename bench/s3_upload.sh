#!/usr/bin/env bash
# s3_upload.sh - S3 egress (egress/s3.c through tests/integration/s3_driver.c) uploading SIZE_MB MiB of
# random bytes to s3rver on loopback, beside `aws s3 cp` (Debian's AWS CLI) of the same file to the same
# s3rver, RUNS times each; then the driver's CPU time and peak RSS (GNU time) for that upload with 1, 2 and
# 4 part buffers (8 MiB parts; over plain http every part's SHA-256 is signed, so the CPU includes it; the
# driver reads the file 1 MiB at a time, which is in its RSS too).
# Measures and prints; gates nothing.
#   SIZE_MB=1024 RUNS=3 bench/s3_upload.sh
set -u
cd "$(dirname "$0")/.." || exit 1
W=$(mktemp -d /tmp/dp-bench-s3.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
SIZE_MB=${SIZE_MB:-1024}
RUNS=${RUNS:-3}
B=${BUILD:-build}
V=tests/validate
[ -f "$B/libdiagport.a" ] || die "$B/libdiagport.a is missing: run make first"
[ -d $V/node_modules/s3rver ] || die "s3rver is missing: scripts/prereqs.sh bench"
# shellcheck disable=SC2046
cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon $(pkg-config --cflags jansson) -o "$W/driver" \
	tests/integration/s3_driver.c "$B/libdiagport.a" $(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread -ldl ||
	die "cannot build the driver"
mkdir -p "$W/store"
node $V/s3rver-run.mjs "$W/store" "$W/port" > /dev/null 2>&1 &
PIDS+=($!)
wait_for "$W/port" . 30 || die "s3rver did not start"
EP=http://127.0.0.1:$(cat "$W/port")
head -c $((SIZE_MB << 20)) /dev/urandom > "$W/data"
export S3_ENDPOINT=$EP S3_BUCKET=diag S3_ACCESS_KEY_ID=S3RVER S3_SECRET_ACCESS_KEY=S3RVER
export AWS_ACCESS_KEY_ID=S3RVER AWS_SECRET_ACCESS_KEY=S3RVER AWS_DEFAULT_REGION=us-east-1

secs() { local t0 t1; t0=$(date +%s.%N); "$@" > /dev/null 2>&1 || echo "FAILED: $*" >&2; t1=$(date +%s.%N); echo "$t1 - $t0" | bc; }
printf '%s MiB to s3rver on loopback, %s runs (MB/s = 2^20 bytes per second)\n' "$SIZE_MB" "$RUNS"
for r in $(seq 1 "$RUNS"); do
	d=$(secs "$W/driver" "$W/data" "bench/d$r.bin")
	a=$(secs aws --endpoint-url "$EP" s3 cp "$W/data" "s3://diag/bench/a$r.bin")
	printf 'run %d  diagport egress %6.1f MiB/s (%.2f s)   aws s3 cp %6.1f MiB/s (%.2f s)\n' "$r" \
		"$(echo "$SIZE_MB / $d" | bc -l)" "$d" "$(echo "$SIZE_MB / $a" | bc -l)" "$a"
done
for n in 1 2 4; do
	S3_PART_BUFFERS=$n /usr/bin/time -f '%e %U %S %M' -o "$W/time" "$W/driver" "$W/data" "bench/b$n.bin" \
		> /dev/null 2>&1 || die "the driver failed with $n buffers"
	read -r el us sy rss < "$W/time"
	printf 'part buffers %d: %.2f s, CPU user %.2f s + sys %.2f s, peak RSS %d KiB\n' "$n" "$el" "$us" "$sy" "$rss"
done
