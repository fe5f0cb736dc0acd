#!/usr/bin/env bash
# bench/webhook_ab.sh NAME=BINARY[:FLAGS] ... - builds of the webhook side by side in one run, for
# "what does this change buy": each binary serves as `diagport webhook` (FLAGS appended, commas for
# spaces: NAME=./diagport:--no-review-cache), all at once, on the same key pair, and each
# measurement visits them in turn, the order rotating every round. Measures and prints; never gates.
#   1. throughput: wrk -t2 -c16 -d${WRK_S}s, per stream (typical and 1,500-env pods; "replicas", the
#      same pod with new uids and token-volume names, and "distinct", a different pod each request)
#   2. latency at RATE requests/s over LAT_CONNS keep-alive TLS connections (bench/webhook_load.c):
#      p50 / p99 of the typical pod, every request a different pod (CASE-distinct, a full review)
#   3. the webhook's CPU time per request (utime+stime over the throughput runs / requests served)
# Knobs: ROUNDS (3), WRK_S (5), RATE (1000), LAT_S (5), LAT_CONNS (4), CASES, MODES.
# Figures go to docs/BENCHMARKS.md by hand, with the command.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
WRK_S=${WRK_S:-5}
RATE=${RATE:-1000}
LAT_S=${LAT_S:-5}
LAT_CONNS=${LAT_CONNS:-4}
OSSL=/usr/bin/openssl
PY=/usr/bin/python3
W=$(mktemp -d /tmp/dp-bench-webhook-ab.XXXXXX)
. bench/lib.sh
. bench/webhook_lib.sh
trap bench_cleanup EXIT
[ $# -ge 2 ] || die "usage: bench/webhook_ab.sh NAME=BINARY[:FLAGS] NAME=BINARY[:FLAGS] ..."
for t in wrk curl "$OSSL" "$PY"; do command -v "$t" >/dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
mkdir -p "$B/bench"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra $(pkg-config --cflags gnutls) -o "$B/bench/webhook_load" bench/webhook_load.c \
	$(pkg-config --libs gnutls) -lpthread || die "cannot build bench/webhook_load.c"
webhook_keys
webhook_streams

NAMES=() PORTS=() WPIDS=()
for spec in "$@"; do
	name=${spec%%=*} rest=${spec#*=}
	bin=${rest%%:*} flags=
	[ "$bin" != "$rest" ] && flags=${rest#*:}
	[ -x "$bin" ] || die "$bin is not an executable"
	port=$(free_port)
	# shellcheck disable=SC2086
	"$bin" webhook --listen "127.0.0.1:$port" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" ${flags//,/ } \
		2>"$W/$name.log" &
	WPIDS+=($!) PIDS+=($!) NAMES+=("$name") PORTS+=("$port")
	webhook_wait "$port"
done
n=${#NAMES[@]}
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; } # utime + stime, clock ticks

echo "== webhook builds side by side: $(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null)"
for i in $(seq 0 $((n - 1))); do echo "   ${NAMES[$i]}: $(sed -n "$((i + 1))p" <<<"$(printf '%s\n' "$@")")"; done
echo; echo "== 1. throughput: wrk -t2 -c16 -d${WRK_S}s ($ROUNDS rounds, order rotating)"
declare -A REQ TIME TICKS
for r in $(seq 1 "$ROUNDS"); do
	for c in "${CASES[@]}"; do
		for m in "${MODES[@]}"; do
			for k in $(seq 0 $((n - 1))); do
				i=$(((k + r) % n)) name=${NAMES[$i]}
				t0=$(cpu "${WPIDS[$i]}")
				BODIES=$W/$c-$m.list wrk -t2 -c16 -d"${WRK_S}s" -s bench/webhook_post.lua \
					"https://127.0.0.1:${PORTS[$i]}/mutate" >"$W/wrk-$c-$m-$name-$r.txt" 2>&1
				t1=$(cpu "${WPIDS[$i]}")
				read -r req us < <(awk '/^WRK/ {print $3, $5}' "$W/wrk-$c-$m-$name-$r.txt")
				REQ[$c-$m-$name]=$((${REQ[$c-$m-$name]:-0} + ${req:-0}))
				TIME[$c-$m-$name]=$((${TIME[$c-$m-$name]:-0} + ${us:-0}))
				TICKS[$c-$m-$name]=$((${TICKS[$c-$m-$name]:-0} + t1 - t0))
			done
		done
	done
done
hz=$(getconf CLK_TCK)
for c in "${CASES[@]}"; do
	for m in "${MODES[@]}"; do
		for name in "${NAMES[@]}"; do
			k=$c-$m-$name
			awk -v k="$k" -v req="${REQ[$k]}" -v us="${TIME[$k]}" -v t="${TICKS[$k]}" -v hz="$hz" 'BEGIN {
				printf "   %-28s %8.0f req/s   CPU %6.1f us/request\n", k, (us > 0 ? req / us * 1e6 : 0), (req > 0 ? t / hz * 1e6 / req : 0)}'
		done
	done
done

if [ "$RATE" != 0 ]; then
	echo; echo "== 2. latency at $RATE requests/s over $LAT_CONNS keep-alive connections, the typical pod, a full review each (the same body: answer cache off or missing)"
	for r in $(seq 1 "$ROUNDS"); do
		for k in $(seq 0 $((n - 1))); do
			i=$(((k + r) % n))
			"$B/bench/webhook_load" -r "$RATE" -c "$LAT_CONNS" -d "$LAT_S" -w 1 -o "$W/lat-${NAMES[$i]}-$r.raw" \
				"$W/ca.crt" "${PORTS[$i]}" /mutate "$W/typical.json" >/dev/null
		done
	done
	for name in "${NAMES[@]}"; do
		cat "$W"/lat-"$name"-*.raw | awk '{print $1}' | sort -n | awk -v n="$name" '{v[NR] = $1} END {
			printf "   %-12s p50 %.3f  p99 %.3f  max %.3f ms (%d requests)\n", n, v[int(NR * .5 + .999999)] / 1000,
			v[int(NR * .99 + .999999)] / 1000, v[NR] / 1000, NR}'
	done
fi
for i in $(seq 0 $((n - 1))); do kill -0 "${WPIDS[$i]}" 2>/dev/null || echo "   ${NAMES[$i]} died: $(tail -2 "$W/${NAMES[$i]}.log")"; done
