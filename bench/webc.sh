#!/usr/bin/env bash
# bench/webc.sh - what OpenSSL for the egress client (common/webc_tls.c) costs the agent: the
# agent's idle resident memory (`diagport launch` with no app, VmRSS and VmHWM 1 s after start) and
# the static binary's size (RssAnon apart: the rest is the binary's own pages, clean, shared by every
# process of the image and reclaimable; the kernel's fault-around maps up to 16 cached pages around each
# one touched, so a larger binary shows more of them even where the code run is the same), for
#   dynamic     ./diagport (libssl loaded with dlopen only when a TLS connection is made: never by the agent)
#   static      build/static/diagport (the image's: libssl.a and libcrypto.a linked in)
#   static-pre  the same static link without build/static/webc_tls_linked.o, i.e. without OpenSSL
#               (what the image held before)
# and, for scale, the static test driver (tests/integration/webc_driver.c) with and without the TLS
# object: what OpenSSL adds to a program that does call it. Measures and prints; never gates.
# Knobs: RUNS (7), BUILD (build). Figures go to docs/BENCHMARKS.md by hand.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
RUNS=${RUNS:-7}
W=$(mktemp -d /tmp/dp-bench-webc.XXXXXX)
pids=()
trap 'for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$W"' EXIT
make -s diagport "$B/static/diagport" "$B/static/webc_tls_linked.o" || exit 1
LIBS_STATIC="$(pkg-config --static --libs jansson yaml-0.1 libseccomp) -lpthread"
# shellcheck disable=SC2086
cc -static -s -o "$W/static-pre" "$B/main.o" "$B/libdiagport.a" $LIBS_STATIC 2> /dev/null || exit 1
cc -c -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -o "$W/driver.o" tests/integration/webc_driver.c || exit 1
# shellcheck disable=SC2086
cc -static -s -o "$W/driver-tls" "$W/driver.o" "$B/static/webc_tls_linked.o" "$B/libdiagport.a" \
	$(pkg-config --static --libs openssl) $LIBS_STATIC 2> /dev/null || exit 1
# shellcheck disable=SC2086
cc -static -s -o "$W/driver-notls" "$W/driver.o" "$B/libdiagport.a" $LIBS_STATIC 2> /dev/null || exit 1

free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
median() { sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'; }

# idle RSS of BINARY: RUNS agents, one at a time; prints "VmRSS-median VmRSS-min-max VmHWM-median"
idle() {
	local bin=$1 i d p pid ssl=0
	: > "$W/rss" && : > "$W/hwm" && : > "$W/anon"
	for i in $(seq 1 "$RUNS"); do
		d=$W/run$i && mkdir -p "$d"
		p=$(free_port)
		"$bin" launch --no-auth --socket "$d/port" --urls "http://127.0.0.1:$p" --dumps "$d" 2> "$d/log" &
		pid=$!
		pids+=("$pid")
		for _ in $(seq 1 100); do curl -s -o /dev/null "http://127.0.0.1:$p/healthz" && break; sleep 0.02; done
		sleep 1
		awk '/^VmRSS/ { print $2 }' "/proc/$pid/status" >> "$W/rss"
		awk '/^VmHWM/ { print $2 }' "/proc/$pid/status" >> "$W/hwm"
		awk '/^RssAnon/ { print $2 }' "/proc/$pid/status" >> "$W/anon"
		ssl=$(grep -c 'libssl\|libcrypto' "/proc/$pid/maps")
		kill "$pid"
		wait "$pid" 2> /dev/null
	done
	echo "$(median < "$W/rss") $(sort -n "$W/rss" | head -1)-$(sort -n "$W/rss" | tail -1) $(median < "$W/hwm") $(median < "$W/anon") $ssl"
}

size() { stat -c %s "$1"; }
printf '%-12s %10s %10s %12s %10s %12s %12s\n' binary bytes "VmRSS KiB" "(min-max)" "VmHWM KiB" "RssAnon KiB" "libssl maps"
for b in dynamic static static-pre; do
	case $b in
	dynamic) bin=./diagport ;;
	static) bin=$B/static/diagport ;;
	static-pre) bin=$W/static-pre ;;
	esac
	read -r rss range hwm anon maps <<< "$(idle "$bin")"
	printf '%-12s %10s %10s %12s %10s %12s %12s\n' "$b" "$(size "$bin")" "$rss" "($range)" "$hwm" "$anon" "$maps"
done
printf '%-12s %10s\n' driver-tls "$(size "$W/driver-tls")" driver-notls "$(size "$W/driver-notls")"
echo "(RUNS=$RUNS; $(date -u +%FT%TZ); $(nproc) CPUs)"
