#!/usr/bin/env bash
# bench/transport.sh - the dump transports side by side. Measures and prints; never gates.
#
# One agent, one .NET console app holding HEAP_MB of heap (`console.dll tick`),
# and for type=Full and type=WithHeap, transport=file, staged and fifo, with a
# client reading as fast as it can and one reading at SLOW_MBPS, RUNS rounds of
# all twelve combinations, interleaved (the transport order reverses by round).
# Each dump is one GET through the HTTP API (bench/dump_client.c), so the figures
# stay valid whatever the agent does inside. Per dump:
#   freeze: the longest pause of the app's threads in the dump's window, as the
#           app's own 1 ms ticker saw it (its "GAP <ms> <start> <end>" lines,
#           CLOCK_MONOTONIC, matched to the client's request..last byte);
#           0 means no pause over GAP_MS;
#   disk:   the peak bytes used in the dumps directory from the request to the
#           last byte (a tmpfs mounted for the run when we are root, read with
#           statvfs; with TMPFS=0 or when not root, a plain directory under /tmp,
#           read as the st_blocks of its files and of the agent's open files on it);
#   rate:   body bytes / (request to last byte), MB = 10^6 bytes; and that time.
# Every body must be a complete 200 answer starting with the ELF magic, at least
# HEAP_MB MiB, and within 10 % of the first dump of its type; otherwise the
# script stops with status 1 (a broken measurement, not a slow one).
#
# Called at the end of bench/run.sh (`make bench`, after bench/agent.sh); runs alone after `make`:
#   bash bench/transport.sh
# Knobs: RUNS (5), HEAP_MB (256), SLOW_MBPS (50), GAP_MS (50), TYPES ("Full WithHeap"), TRANSPORTS ("file staged fifo"),
#        TMPFS (1), DIAGPORT (./diagport), BUILD (build). Figures go to docs/BENCHMARKS.md by hand.
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
RUNS=${RUNS:-5}
HEAP_MB=${HEAP_MB:-256}
SLOW_MBPS=${SLOW_MBPS:-50}
GAP_MS=${GAP_MS:-50}
TYPES=${TYPES:-Full WithHeap}
TRANSPORTS=${TRANSPORTS:-file staged fifo}
TMPFS=${TMPFS:-1}
W=$(mktemp -d /tmp/dp-transport.XXXXXX)
. bench/lib.sh
MOUNTED=
cleanup() {
	bench_stop
	[ -n "$MOUNTED" ] && umount "$W/dumps"
	rm -rf "$W"
}
trap cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

mkdir -p "$B/bench" "$W/dumps"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -pthread -Ibench -o "$B/bench/dump_client" bench/dump_client.c ||
	die "cannot build bench/dump_client.c"
bash tests/apps/build.sh "$B/apps" >/dev/null || die "cannot build the test apps"
[ -x "$D" ] || die "$D not found (run make)"
APP=$B/apps/console/console.dll
CLIENT=$B/bench/dump_client

# The dumps directory: a tmpfs of its own when we may mount one, so statvfs
# counts exactly the dump's space, unlinked-but-open staging files included.
if [ "$TMPFS" = 1 ] && [ "$(id -u)" = 0 ] && mount -t tmpfs -o size=4g,mode=0755 diagport-bench "$W/dumps" 2>/dev/null; then
	MOUNTED=1
	DISK=vfs
	DISK_HOW="tmpfs mounted for the run, statvfs used bytes"
else
	DISK=files
	DISK_HOW="plain directory on $(df --output=fstype "$W" | tail -1), st_blocks of its files and of the agent's open files on it"
fi


echo "== dump transports: $(date -u +%FT%TZ), $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2 / 1048576}' /proc/meminfo)," \
	"$(uname -r), Debian $(cat /etc/debian_version 2>/dev/null)"
echo "diagport $(cat VERSION) ($(git rev-parse --short HEAD 2>/dev/null)); .NET $(dotnet --list-runtimes | awk '/NETCore.App/ {v=$2} END {print v}')"
echo "app: console.dll tick $HEAP_MB (MiB retained); $RUNS rounds; slow client ${SLOW_MBPS} MB/s; freeze threshold ${GAP_MS} ms"
echo "dumps directory: $DISK_HOW"
load

PORT=$(free_port)
U=http://127.0.0.1:$PORT
"$D" launch --socket "$W/port" --dumps "$W/dumps" --urls "$U" --no-auth 2>"$W/agent.log" &
AG=$!; PIDS+=("$AG")
for i in $(seq 1 500); do [ "$(curl -s -o /dev/null -w '%{http_code}' "$U/healthz")" = 200 ] && break; sleep 0.01; done
kill -0 "$AG" 2>/dev/null || die "the agent did not start: $(tail -3 "$W/agent.log")"
DOTNET_DiagnosticPorts=$W/port,connect,nosuspend dotnet "$APP" tick "$HEAP_MB" "$GAP_MS" >"$W/app.out" 2>&1 &
APID=$!; PIDS+=("$APID")
for i in $(seq 1 600); do grep -q '^READY' "$W/app.out" && break; sleep 0.1; done
grep -q '^READY' "$W/app.out" || die "the console app did not start: $(tail -3 "$W/app.out")"
APP_PID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
for i in $(seq 1 100); do curl -s "$U/processes" | grep -q "\"pid\":$APP_PID," && break; sleep 0.05; done
curl -s "$U/processes" | grep -q "\"pid\":$APP_PID," || die "the app did not attach: $(tail -3 "$W/agent.log")"
# The app's ticker reads the same clock as dump_client: check they agree.
skew=$(awk -v now="$("$CLIENT" -n)" '$1 == "TICK" {d = now - $4; print (d < 0 || d > 600000) ? "bad" : "ok"}' "$W/app.out")
[ "$skew" = ok ] || die "the app's TICK clock does not match CLOCK_MONOTONIC: $(grep '^TICK' "$W/app.out")"
echo "app pid $APP_PID, VmRSS $(awk '/^VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$APP_PID/status")"

# one TYPE TRANSPORT CLIENT RUN: one dump; appends a line to $W/results:
# client type transport run bytes first total mbps freeze disk vfs files
declare -A REF
one() {
	local type=$1 tr=$2 client=$3 run=$4 rate=() line code bytes elf complete t0 first total vfs files freeze t1 i
	[ "$client" = slow ] && rate=(-r "$SLOW_MBPS")
	line=$("$CLIENT" "${rate[@]+"${rate[@]}"}" -d "$W/dumps" -a "$AG" "$PORT" "/dump?pid=$APP_PID&type=$type&transport=$tr")
	for kv in $line; do
		case ${kv%%=*} in
		code | bytes | elf | complete | t0 | first | total | vfs | files) printf -v "${kv%%=*}" %s "${kv#*=}" ;;
		esac
	done
	[ "${code:-}" = 200 ] && [ "${complete:-0}" = 1 ] ||
		die "$type $tr $client run $run: not a complete 200 answer: $line; agent: $(tail -2 "$W/agent.log")"
	[ "$elf" = 1 ] || die "$type $tr $client run $run: the body does not start with the ELF magic: $line"
	[ "$bytes" -ge $((HEAP_MB * 1048576)) ] || die "$type $tr $client run $run: $bytes bytes, less than the ${HEAP_MB} MiB heap"
	[ -n "${REF[$type]:-}" ] || REF[$type]=$bytes
	awk -v b="$bytes" -v r="${REF[$type]}" 'BEGIN {exit !(b > 0.9 * r && b < 1.1 * r)}' ||
		die "$type $tr $client run $run: $bytes bytes, not within 10 % of the first $type dump (${REF[$type]})"
	# The app prints a pause when it ends: within a few ms of the last byte at the latest.
	t1=$(awk -v a="$t0" -v t="$total" 'BEGIN {printf "%.3f", a + t * 1000}')
	for i in $(seq 1 100); do
		freeze=$(awk -v a="$t0" -v b="$t1" '$1 == "GAP" && $3 >= a - 5 && $3 <= b && $2 > m {m = $2} END {print m + 0}' "$W/app.out")
		[ "$freeze" != 0 ] && break
		sleep 0.02
	done
	local disk=$vfs
	[ "$DISK" = files ] && disk=$files
	echo "$client $type $tr $run $bytes $first $total $(awk -v b="$bytes" -v t="$total" 'BEGIN {printf "%.1f", b / t / 1e6}') $freeze $disk $vfs $files" >>"$W/results"
	awk -v c="$client" -v ty="$type" -v tr="$tr" -v r="$run" -v b="$bytes" -v f="$first" -v t="$total" -v fr="$freeze" \
		-v d="$disk" -v v="$vfs" -v fi="$files" -v g="$GAP_MS" 'BEGIN {
		printf "   %-8s %-6s %-4s run %d: %d bytes, first byte %.3f s, last %.3f s, %.0f MB/s, freeze %s, disk peak %d B (statvfs %d, files %d)\n",
			ty, tr, c, r, b, f, t, b / t / 1e6, (fr > 0 ? sprintf("%.0f ms", fr) : "none > " g " ms"), d, v, fi }'
	sleep 0.2
}

echo; echo "== warm-up (not counted): one fast dump of each type and transport"
: >"$W/results"
for type in $TYPES; do for tr in $TRANSPORTS; do one "$type" "$tr" fast 0; done; done
: >"$W/results"

echo; echo "== $RUNS rounds, each: fast client, then slow client (${SLOW_MBPS} MB/s); types $TYPES; transports alternating"
for run in $(seq 1 "$RUNS"); do
	order=$TRANSPORTS
	[ $((run % 2)) = 0 ] && order=$(echo "$TRANSPORTS" | awk '{for (i = NF; i > 0; i--) printf "%s%s", $i, (i > 1 ? " " : "")}')
	for client in fast slow; do for type in $TYPES; do for tr in $order; do
		one "$type" "$tr" "$client" "$run"
	done; done; done
done

echo; echo "== medians [min-max] over $RUNS runs (MB = 10^6 bytes; freeze 0 = no pause over ${GAP_MS} ms; disk: $DISK)"
printf "%-6s %-9s %-5s %-20s %-34s %-16s %-22s %s\n" client type trans "freeze ms" "peak disk bytes" "MB/s" "request-last byte s" "first byte s"
for client in fast slow; do for type in $TYPES; do for tr in $TRANSPORTS; do
	sel() { awk -v c="$client" -v ty="$type" -v tr="$tr" -v k="$1" '$1 == c && $2 == ty && $3 == tr {print $k}' "$W/results" | stat3; }
	read -r fm fl fh <<<"$(sel 9)"
	read -r dm dl dh <<<"$(sel 10)"
	read -r rm rl rh <<<"$(sel 8)"
	read -r tm tl th <<<"$(sel 7)"
	read -r sm sl sh <<<"$(sel 6)"
	printf "%-6s %-9s %-5s %-20s %-34s %-16s %-22s %s\n" "$client" "$type" "$tr" \
		"$(printf '%.0f [%.0f-%.0f]' "$fm" "$fl" "$fh")" "$(printf '%.0f [%.0f-%.0f]' "$dm" "$dl" "$dh")" \
		"$(printf '%.0f [%.0f-%.0f]' "$rm" "$rl" "$rh")" "$(printf '%.3f [%.3f-%.3f]' "$tm" "$tl" "$th")" \
		"$(printf '%.3f [%.3f-%.3f]' "$sm" "$sl" "$sh")"
done; done; done
echo "dump sizes: $(for type in $TYPES; do awk -v ty="$type" '$2 == ty {print $5}' "$W/results" | stat3 |
	awk -v ty="$type" '{printf "%s %d bytes [%d-%d]  ", ty, $1, $2, $3}'; done)"
echo "app VmRSS after: $(awk '/^VmRSS/ {printf "%.0f MiB", $2 / 1024}' "/proc/$APP_PID/status"); agent VmRSS $(awk '/^VmRSS/ {printf "%d KiB", $2}' "/proc/$AG/status")"
load
exit 0
