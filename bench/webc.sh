#!/usr/bin/env bash
# bench/webc.sh - what OpenSSL for the egress client (cloud/webc_tls.c) costs the agent: the
# agent's idle resident memory (`diagport launch` with no app, VmRSS and VmHWM 1 s after start) and
# the static binary's size (RssAnon apart: the rest is the binary's own pages, clean, shared by every
# process of the image and reclaimable; the kernel's fault-around maps up to 16 cached pages around each
# one touched, so a larger binary shows more of them even where the code run is the same), for
#   dynamic     ./diagport (libssl loaded with dlopen only when a TLS connection is made: never by the agent)
#   static      build/static/diagport (the image's: libssl.a and libcrypto.a linked in)
#   static-pre  the same static link without build/static/tlsbase_linked.o, i.e. without OpenSSL
#               (what the image held before)
# and, for scale, the static test driver (tests/integration/webc_driver.c) with and without the TLS
# object: what OpenSSL adds to a program that does call it. Then uploads: UPLOAD_MB (500) of zeros PUT
# to tests/integration/webc_server.py's /sha (Python's http.server hashing what it reads: the server is
# the bottleneck, so this says webc is not slower than curl, not how fast either can go), by the
# dynamic driver and by `curl -T`, plain and TLS (a test CA), UPLOAD_RUNS (3) each: wall s, peak RSS.
# Measures and prints; never gates. Knobs: RUNS (7), UPLOAD_MB, UPLOAD_RUNS, BUILD (build). Figures go to docs/BENCHMARKS.md by hand.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
RUNS=${RUNS:-7}
W=$(mktemp -d /tmp/dp-bench-webc.XXXXXX)
pids=()
trap 'for p in "${pids[@]+"${pids[@]}"}"; do kill "$p" 2>/dev/null; done; wait 2>/dev/null; rm -rf "$W"' EXIT
make -s diagport "$B/static/diagport" "$B/static/tlsbase_linked.o" || exit 1
LIBS_STATIC="$(pkg-config --static --libs jansson yaml-0.1 zlib libseccomp) -lpthread"
# shellcheck disable=SC2086
cc -static -s -o "$W/static-pre" "$B/main.o" "$B/libdiagport.a" $LIBS_STATIC 2> /dev/null || exit 1
cc -c -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -o "$W/driver.o" tests/integration/webc_driver.c || exit 1
# shellcheck disable=SC2086
cc -static -s -o "$W/driver-tls" "$W/driver.o" "$B/static/tlsbase_linked.o" "$B/libdiagport.a" \
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

# --- uploads: webc against curl, same server, same bytes
UPLOAD_MB=${UPLOAD_MB:-500}
UPLOAD_RUNS=${UPLOAD_RUNS:-3}
cc -O2 -o "$W/driver" "$W/driver.o" "$B/libdiagport.a" $(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread || exit 1
o=/usr/bin/openssl
$o req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" -out "$W/ca.crt" -days 1 \
	-subj /CN=bench-ca 2> /dev/null &&
	$o req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/srv.key" -out "$W/srv.csr" \
		-subj /CN=localhost 2> /dev/null &&
	printf 'subjectAltName=DNS:localhost\n' > "$W/srv.ext" &&
	$o x509 -req -in "$W/srv.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 1 -days 1 -extfile "$W/srv.ext" \
		-out "$W/srv.crt" 2> /dev/null || exit 1
for mode in plain tls; do
	extra=()
	[ $mode = tls ] && extra=(--cert "$W/srv.crt" --key "$W/srv.key")
	python3 tests/integration/webc_server.py --ready "$W/$mode.port" --log "$W/$mode.log" "${extra[@]}" &
	pids+=($!)
	for _ in $(seq 1 100); do [ -s "$W/$mode.port" ] && break; sleep 0.05; done
done
head -c $((UPLOAD_MB * 1000000)) /dev/zero > "$W/body"
printf '%-6s %-5s %8s %14s\n' mode who "wall s" "peak RSS KiB"
for _ in $(seq 1 "$UPLOAD_RUNS"); do
	for mode in plain tls; do
		port=$(cat "$W/$mode.port")
		if [ $mode = tls ]; then url=https://localhost:$port; else url=http://127.0.0.1:$port; fi
		/usr/bin/time -f "%e %M" -o "$W/t" "$W/driver" --ca "$W/ca.crt" --body-file "$W/body" "$url" PUT /sha > /dev/null
		printf '%-6s %-5s %8s %14s\n' $mode webc $(cat "$W/t")
		/usr/bin/time -f "%e %M" -o "$W/t" curl -sf --cacert "$W/ca.crt" -T "$W/body" "$url/sha" -o /dev/null
		printf '%-6s %-5s %8s %14s\n' $mode curl $(cat "$W/t")
	done
done
