#!/usr/bin/env bash
# bench/agent.sh - the agent's benchmarks (issue 3). Measures and prints; never gates.
# Each figure is taken side by side with its reference in the same run:
#   1. exec to ready (socket accepts and /healthz answers): diagport launch vs nginx
#   2. resident memory: the agent idle, with a runtime attached, after dumps; nginx idle
#   3. exec to Main of a .NET app: no diagnostic port vs connect,suspend to the agent
#   4. Full dump delivery: the agent (curl) vs nginx sendfile of a file of the same size,
#      and libmicrohttpd alone (bench/mhd_file.c) serving that file the way the agent does,
#      at once and held back as long as createdump took; and the FIFO transport (overall only)
# Called from bench/run.sh; runs alone too (after `make` and
# `scripts/prereqs.sh bench`). Figures go to docs/BENCHMARKS.md by hand.
# Knobs: READY_RUNS (30), MAIN_RUNS (40), DUMP_RUNS (15), DIAGPORT (./diagport), BUILD (build).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
READY_RUNS=${READY_RUNS:-30}
MAIN_RUNS=${MAIN_RUNS:-40}
DUMP_RUNS=${DUMP_RUNS:-15}
W=$(mktemp -d /tmp/dp-bench.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

mkdir -p "$B/bench" "$W/dumps/www" "$W/nginx/tmp"
for p in ready_probe main_probe; do
	cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ibench -o "$B/bench/$p" "bench/$p.c" || die "cannot build bench/$p.c"
done
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra $(pkg-config --cflags libmicrohttpd) -o "$B/bench/mhd_file" bench/mhd_file.c \
	$(pkg-config --libs libmicrohttpd) || die "cannot build bench/mhd_file.c"
# The library floor: an empty main linked (-pie, -z now) with the libraries ./diagport linked
# before this issue's changes: all of them; without libcurl (now loaded on demand by
# `diagport health`); and without libcurl, libmicrohttpd and gnutls, which is what ./diagport
# links today (its HTTP server is http/httpd.c).
FLOOR_LD=(-O2 -fPIE -pie -Wl,-z,relro,-z,now -Wl,--no-as-needed)
floor() {
	local name=$1
	shift
	cc "${FLOOR_LD[@]}" -o "$B/bench/lib_floor_$name" bench/lib_floor.c $(pkg-config --libs "$@") -lpthread ||
		die "cannot build bench/lib_floor.c"
}
floor all jansson yaml-0.1 libcurl libseccomp libmicrohttpd gnutls
floor nocurl jansson yaml-0.1 libseccomp libmicrohttpd gnutls
floor nohttp jansson yaml-0.1 libseccomp
command -v nginx >/dev/null || die "nginx not found (scripts/prereqs.sh bench installs it)"
bash tests/apps/build.sh "$B/apps" >/dev/null || die "cannot build the test apps"
APP=$B/apps/console/console.dll

# nginx_conf PORT: a foreground, single-process nginx on 127.0.0.1:PORT and on
# the Unix socket $W/nginx.sock, answering /healthz and serving $W/dumps/www with sendfile.
nginx_conf() {
	cat >"$W/nginx.conf" <<EOF
daemon off;
master_process off;
worker_processes 1;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log;
events { worker_connections 64; }
http {
	access_log off;
	sendfile on;
	client_body_temp_path $W/nginx/tmp; proxy_temp_path $W/nginx/tmp; fastcgi_temp_path $W/nginx/tmp;
	uwsgi_temp_path $W/nginx/tmp; scgi_temp_path $W/nginx/tmp;
	server {
		listen 127.0.0.1:$1;
		listen unix:$W/nginx.sock;
		root $W/dumps/www;
		location = /healthz { return 200 "ok\n"; }
	}
}
EOF
}
NGINX=(nginx -p "$W/nginx" -e "$W/nginx/error.log" -c "$W/nginx.conf")
# wait_http URL: up to 5 s for URL to answer 200.
wait_http() {
	local i
	for ((i = 0; i < 500; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
		sleep 0.01
	done
	return 1
}
# mem NAME PID: resident memory from /proc.
mem() {
	awk -v n="$1" '/^VmRSS/ {r=$2} /^VmHWM/ {h=$2} /^RssAnon/ {a=$2} /^RssFile/ {f=$2} /^Threads/ {t=$2}
		END {printf "%-44s VmRSS %6d KiB  VmHWM %6d KiB  (RssAnon %5d, RssFile %5d KiB; %d threads)", n, r, h, a, f, t}' \
		"/proc/$2/status"
	awk '/^Pss:/ {printf "  PSS %d KiB\n", $2}' "/proc/$2/smaps_rollup"
}
# median: of the numbers on stdin.
median() { sort -g | awk '{v[NR]=$1} END {if (NR) print (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2); else print "nan"}'; }

echo "== agent benchmarks (issue 3): $(date -u +%FT%TZ), $(nproc) cores, $(uname -r)"
echo "diagport $(cat VERSION); $(nginx -v 2>&1); libmicrohttpd $(pkg-config --modversion libmicrohttpd);" \
	"$(curl --version | head -1 | cut -d' ' -f1-2); .NET $(dotnet --list-runtimes | awk '/NETCore.App/ {v=$2} END {print v}')"
load

echo; echo "== 1. exec to ready: Unix socket accepts and GET /healthz answers 200 (target: agent <= 10 ms)"
P=$(free_port)
echo "-- diagport launch ($READY_RUNS runs)"
"$B/bench/ready_probe" -n "$READY_RUNS" -u "$W/ready.sock" -p "$P" -- \
	"$D" launch --socket "$W/ready.sock" --dumps "$W/dumps" --urls "http://127.0.0.1:$P" >"$W/ready-agent.txt"
tail -1 "$W/ready-agent.txt"
echo "-- nginx, foreground, single process, same two listeners ($READY_RUNS runs)"
nginx_conf "$P"
"$B/bench/ready_probe" -n "$READY_RUNS" -u "$W/nginx.sock" -p "$P" -- "${NGINX[@]}" >"$W/ready-nginx.txt"
tail -1 "$W/ready-nginx.txt"
echo "-- process start alone, no listening (hyperfine -N): what each pays before main() does any work"
echo "   (ldd lines: $D $(ldd "$D" | wc -l); empty main with its libraries $(ldd "$B/bench/lib_floor_all" | wc -l)," \
	"without libcurl $(ldd "$B/bench/lib_floor_nocurl" | wc -l), also without libmicrohttpd, gnutls" \
	"$(ldd "$B/bench/lib_floor_nohttp" | wc -l); nginx $(ldd "$(command -v nginx)" | wc -l))"
hyperfine -N --warmup 5 --runs 100 --style basic "$D launch --help" "$B/bench/lib_floor_all" \
	"$B/bench/lib_floor_nocurl" "$B/bench/lib_floor_nohttp" "nginx -v" 2>&1 | grep -E '^Benchmark|Time \(mean'

echo; echo "== 2. resident memory (target: agent idle <= 4 MiB)"
SOCK=$W/dumps/port
AP=$(free_port)
AU=http://127.0.0.1:$AP
"$D" launch --socket "$SOCK" --dumps "$W/dumps" --urls "$AU" 2>"$W/agent.log" &
AG=$!; PIDS+=("$AG")
wait_http "$AU/healthz" || die "the agent did not come up: $(tail -3 "$W/agent.log")"
NP=$(free_port)
nginx_conf "$NP"
"${NGINX[@]}" &
NG=$!; PIDS+=("$NG")
wait_http "http://127.0.0.1:$NP/healthz" || die "nginx did not come up: $(tail -3 "$W/nginx/error.log")"
FLOOR=()
for f in all nocurl nohttp; do "$B/bench/lib_floor_$f" wait & PIDS+=($!); FLOOR+=($!); done
sleep 1
mem "agent, idle" "$AG"
mem "nginx, idle" "$NG"
mem "empty main, the old link (all libraries)" "${FLOOR[0]}"
mem "empty main, without libcurl" "${FLOOR[1]}"
mem "empty main, today's link (no curl, MHD, gnutls)" "${FLOOR[2]}"
DOTNET_DiagnosticPorts=$SOCK,connect,suspend dotnet "$APP" sleep 3600 >"$W/app.out" 2>&1 &
APID=$!; PIDS+=("$APID")
for i in $(seq 1 300); do grep -q '"event":"attached"' "$W/agent.log" && grep -q READY "$W/app.out" && break; sleep 0.05; done
APP_PID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
[ -n "$APP_PID" ] || die "the console app did not start: $(tail -3 "$W/app.out")"
sleep 1
mem "agent, one runtime attached" "$AG"

echo; echo "== 3. exec of 'dotnet console.dll exit 0' to its first line of Main (target: suspend costs <= 5 ms)"
echo "variant 0: no DOTNET_DiagnosticPorts; 1: connect,suspend to the running agent; 2: connect,nosuspend (interleaved, $MAIN_RUNS runs each)"
load
"$B/bench/main_probe" -n "$MAIN_RUNS" -e "DOTNET_DiagnosticPorts=$SOCK,connect,suspend" \
	-e "DOTNET_DiagnosticPorts=$SOCK,connect,nosuspend" -- dotnet "$APP" exit 0 >"$W/main.txt"
grep -E '^(variant|difference)' "$W/main.txt"
kill -0 "$AG" 2>/dev/null || die "the agent died during the start-up runs: $(tail -3 "$W/agent.log")"

echo; echo "== 4. Full dump delivery vs nginx sendfile of a file of the same size (target: agent >= 0.9x nginx)"
CURLW='%{http_code} %{size_download} %{time_starttransfer} %{time_total}\n'
# report LABEL FILE: per-run and median rates; a line of FILE is "code size t_start t_total".
report() {
	awk -v n="$1" '{printf "   %s run %d: HTTP %s, %d bytes, first byte %.3f s, total %.3f s: %.0f MB/s overall, %.0f MB/s body\n",
		n, NR, $1, $2, $3, $4, $2 / $4 / 1e6, $2 / ($4 - $3) / 1e6}' "$2"
}
curl -s -o "$W/dump0.body" -w "$CURLW" "$AU/dump?pid=$APP_PID&type=Full" >"$W/dump0.txt"
read -r code SIZE _ < "$W/dump0.txt"
[ "$code" = 200 ] && [ "${SIZE:-0}" -gt 0 ] || die "the first dump failed: HTTP $code: $(head -c 300 "$W/dump0.body")"
rm -f "$W/dump0.body"
echo "dump size $SIZE bytes (first dump, not counted: $(awk '{printf "first byte %.3f s, total %.3f s", $3, $4}' "$W/dump0.txt"))"
head -c "$SIZE" /dev/urandom >"$W/dumps/www/blob"   # same file system as the agent's staging file
HOLD=$(awk '{printf "%d", $3 * 1000}' "$W/dump0.txt")   # ms the first dump took to its first byte
MP=$(free_port); MH=$(free_port)
"$B/bench/mhd_file" "$MP" "$W/dumps/www/blob" & PIDS+=($!)
"$B/bench/mhd_file" "$MH" "$W/dumps/www/blob" "$HOLD" & PIDS+=($!)
wait_http "http://127.0.0.1:$MP/" || die "bench/mhd_file did not come up"
wait_http "http://127.0.0.1:$MH/" || die "bench/mhd_file did not come up"
curl -s -o /dev/null "http://127.0.0.1:$NP/blob"         # all start from the page cache
: >"$W/dump-agent.txt"; : >"$W/dump-nginx.txt"; : >"$W/dump-mhd.txt"; : >"$W/dump-mhd-held.txt"; : >"$W/dump-fifo.txt"
for i in $(seq 1 "$DUMP_RUNS"); do
	curl -s -o /dev/null -w "$CURLW" "$AU/dump?pid=$APP_PID&type=Full" >>"$W/dump-agent.txt"
	curl -s -o /dev/null -w "$CURLW" "$AU/dump?pid=$APP_PID&type=Full&transport=fifo" >>"$W/dump-fifo.txt"
	curl -s -o /dev/null -w "$CURLW" "http://127.0.0.1:$NP/blob" >>"$W/dump-nginx.txt"
	curl -s -o /dev/null -w "$CURLW" "http://127.0.0.1:$MP/blob" >>"$W/dump-mhd.txt"
	curl -s -o /dev/null -w "$CURLW" "http://127.0.0.1:$MH/blob" >>"$W/dump-mhd-held.txt"
done
report agent "$W/dump-agent.txt"
report nginx "$W/dump-nginx.txt"
report mhd_file "$W/dump-mhd.txt"
report "mhd_file held ${HOLD} ms" "$W/dump-mhd-held.txt"
report "agent, FIFO transport" "$W/dump-fifo.txt"
body() { awk '$1 == 200 && $4 > $3 {print $2 / ($4 - $3) / 1e6}' "$1" | median; }
overall() { awk '$1 == 200 {print $2 / $4 / 1e6}' "$1" | median; }
a_first=$(awk '$1 == 200 {print $3}' "$W/dump-agent.txt" | median)
awk -v a="$(overall "$W/dump-agent.txt")" -v b="$(body "$W/dump-agent.txt")" -v f="$a_first" \
	-v n="$(overall "$W/dump-nginx.txt")" -v nb="$(body "$W/dump-nginx.txt")" -v mb="$(body "$W/dump-mhd.txt")" \
	-v hb="$(body "$W/dump-mhd-held.txt")" -v hold="$HOLD" -v fa="$(overall "$W/dump-fifo.txt")" 'BEGIN {
	printf "medians (MB = 10^6 bytes): agent body %.0f MB/s, overall %.0f MB/s (createdump until first byte %.3f s);", b, a, f
	printf " nginx body %.0f MB/s, overall %.0f MB/s\n", nb, n
	printf "   libmicrohttpd alone: body %.0f MB/s at once, %.0f MB/s held back %d ms\n", mb, hb, hold
	printf "   agent, FIFO transport (streams while createdump writes): overall %.0f MB/s, %.2fx the file transport overall\n", fa, (a > 0 ? fa / a : 0)
	if (nb > 0 && mb > 0 && hb > 0) {
		printf "ratio agent body / nginx body: %.2fx   (overall / overall, createdump included: %.2fx)\n", b / nb, a / n
		printf "   libmicrohttpd at once / nginx: %.2fx; held back / nginx: %.2fx; agent / libmicrohttpd held back: %.2fx\n", mb / nb, hb / nb, b / hb
	} }'
mem "agent, after $((2 * DUMP_RUNS + 1)) Full dumps" "$AG"
mem "nginx, after $((DUMP_RUNS + 1)) transfers" "$NG"
echo; load
exit 0
