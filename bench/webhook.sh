#!/usr/bin/env bash
# bench/webhook.sh - the admission webhook's benchmarks (issue 4). Measures and prints; never gates.
# `diagport webhook` side by side in one run with nginx returning, over the same TLS (same
# certificate and key, TLS 1.2/1.3, keep-alive), a static body of the size of the webhook's
# answer to the same AdmissionReview. Two pods: a typical one (bench/webhook_pod.json: one
# container, four env vars, annotated diagport.dev/inject: "true") and the golden 1,500-env-var
# pod (tests/golden/k8s/env-1500).
#   0. one request each first: every answer 200, same body size, the webhook's carries a patch;
#      0b. the review alone, in-process (bench/bench_review.c); 0c. the admission log line alone, in-process,
#      against the same line as a jansson object and dump (bench/bench_log.c)
#   1. throughput: wrk -t2 -c16 (bench/webhook_post.lua), two streams of AdmissionReviews per pod
#      (requests/s, and each server's own CPU time per request, from /proc/PID/stat):
#      "replicas" (the pod as a ReplicaSet's replicas: a new uid and token-volume name each time;
#      answered from the webhook's cache but for the first) and "distinct" (a different pod every
#      request: every one a full review); the cache's hits and misses from /metrics per run
#   2. latency at a fixed 1,000 requests/s (bench/webhook_load.c: open loop, keep-alive TLS,
#      latency from each request's due time), and at LOW_RATE for the 1,500-env pod, against a
#      second webhook started with --no-review-cache, so every request is a full review
# Each measurement is taken ROUNDS times, the order of the two servers alternating (ABBA).
# Runs alone after `make` and `scripts/prereqs.sh bench`. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: ROUNDS (2), WRK_S (5: seconds per wrk run), LAT_S (6: seconds per latency run, the first
# not counted), RATE (1000; 0: no latency runs), LAT_CONNS (4), LOW_RATE (10; 0: none),
# NGINX_WORKERS (2), DIAGPORT, BUILD, CASES ("typical env1500"), MODES ("replicas distinct").
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
ROUNDS=${ROUNDS:-2}
WRK_S=${WRK_S:-5}
LAT_S=${LAT_S:-6}
RATE=${RATE:-1000}
LAT_CONNS=${LAT_CONNS:-4}
LOW_RATE=${LOW_RATE:-10}
NGINX_WORKERS=${NGINX_WORKERS:-2}
OSSL=/usr/bin/openssl
PY=/usr/bin/python3
W=$(mktemp -d /tmp/dp-bench-webhook.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT

for t in wrk nginx curl "$OSSL" "$PY"; do command -v "$t" >/dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
[ -x "$D" ] || die "$D not found: run make first"
mkdir -p "$B/bench" "$W/nginx/tmp" "$W/pods"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra $(pkg-config --cflags gnutls) -o "$B/bench/webhook_load" bench/webhook_load.c \
	$(pkg-config --libs gnutls) -lpthread || die "cannot build bench/webhook_load.c"
cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -Iinjector -Iwebhook -Ibench -o "$B/bench/bench_review" bench/bench_review.c \
	"$B/libdiagport.a" $(pkg-config --libs jansson yaml-0.1 zlib) -lpthread || die "cannot build bench/bench_review.c"
cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -Ibench -o "$B/bench/bench_log" bench/bench_log.c "$B/libdiagport.a" \
	$(pkg-config --libs jansson) -lpthread || die "cannot build bench/bench_log.c"


. bench/webhook_lib.sh
webhook_keys
webhook_streams

# --- the webhook
WP=$(free_port)
"$D" webhook --listen "127.0.0.1:$WP" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" 2>"$W/webhook.log" &
WPID=$!; PIDS+=("$WPID")
CURL=(curl -s --cacert "$W/ca.crt")
for _ in $(seq 1 500); do [ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$WP/healthz")" = 200 ] && break; sleep 0.01; done
kill -0 "$WPID" 2>/dev/null || die "the webhook did not start: $(tail -3 "$W/webhook.log")"
WURL=https://127.0.0.1:$WP/mutate
# the latency runs send one body again and again: a second webhook without the answer cache, so each
# of those requests is a full review (the slower case)
WPN=$(free_port)
"$D" webhook --listen "127.0.0.1:$WPN" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" --no-review-cache 2>"$W/webhook-nocache.log" &
WPNID=$!; PIDS+=("$WPNID")
for _ in $(seq 1 500); do [ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$WPN/healthz")" = 200 ] && break; sleep 0.01; done
kill -0 "$WPNID" 2>/dev/null || die "the second webhook did not start: $(tail -3 "$W/webhook-nocache.log")"

# --- the webhook's answers, then nginx answering POST /CASE with the same bytes
for c in "${CASES[@]}"; do
	code=$("${CURL[@]}" -o "$W/$c.resp" -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$W/$c.json" "$WURL")
	[ "$code" = 200 ] || die "the webhook answered $code to the $c review: $(head -c 300 "$W/$c.resp")"
	grep -q "[\$'\\\\]" "$W/$c.resp" && die "the $c answer has a \$, ' or \\ : the nginx config below would need escaping"
done
NP=$(free_port)
{
	cat <<EOF
daemon off;
master_process on;
worker_processes $NGINX_WORKERS;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log;
events { worker_connections 256; }
http {
	access_log off;
	keepalive_timeout 10s;
	keepalive_requests 1000000;
	client_max_body_size 8m;
	client_body_buffer_size 256k;
	client_body_temp_path $W/nginx/tmp; proxy_temp_path $W/nginx/tmp; fastcgi_temp_path $W/nginx/tmp;
	uwsgi_temp_path $W/nginx/tmp; scgi_temp_path $W/nginx/tmp;
	server {
		listen 127.0.0.1:$NP ssl;
		ssl_certificate $W/tls.crt;
		ssl_certificate_key $W/tls.key;
		ssl_protocols TLSv1.2 TLSv1.3;
		default_type application/json;
		add_header Cache-Control no-store;
		add_header X-Content-Type-Options nosniff;
EOF
	for c in "${CASES[@]}"; do printf "\t\tlocation = /%s { return 200 '%s'; }\n" "$c" "$(cat "$W/$c.resp")"; done
	printf '\t}\n}\n'
} >"$W/nginx.conf"
nginx -p "$W/nginx" -e "$W/nginx/error.log" -c "$W/nginx.conf" &
NPID=$!; PIDS+=("$NPID")
NURL=https://127.0.0.1:$NP
for _ in $(seq 1 500); do [ "$("${CURL[@]}" -o /dev/null -w '%{http_code}' -X POST "$NURL/typical")" = 200 ] && break; sleep 0.01; done
kill -0 "$NPID" 2>/dev/null || die "nginx did not start: $(tail -3 "$W/nginx/error.log")"

echo "== webhook benchmarks (issue 4): $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD -- . 2>/dev/null || echo ' (work tree differs)')"
echo "diagport $(cat VERSION); $(nginx -v 2>&1 | sed 's/^nginx version: //'); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2);" \
	"$("$OSSL" version | cut -d' ' -f1-2); GnuTLS $(pkg-config --modversion gnutls); libmicrohttpd $(pkg-config --modversion libmicrohttpd)"
echo "webhook: 2 worker threads (fixed), sandbox on, one log line per admission to a file, answer cache on (throughput) and off (latency, a second webhook);" \
	"nginx: master + $NGINX_WORKERS worker processes, return 200 with the body inline, keepalive_requests 1000000"
for u in "127.0.0.1:$WP webhook" "127.0.0.1:$NP nginx"; do
	set -- $u
	echo "TLS with $2: $("$OSSL" s_client -connect "$1" -CAfile "$W/ca.crt" -verify_return_error </dev/null 2>/dev/null |
		awk '/^New, / {printf "%s ", $0} /Verify return code/ && !v++ {sub(/^ */, ""); printf "(%s)", $0}')"
done
load

echo; echo "== 0. one request each: status, body bytes (equal for both servers), the webhook's patch"
for c in "${CASES[@]}"; do
	patch=$("$PY" tests/integration/webhook_review.py response "$W/$c.json" "$W/$c.resp" "$W/$c.patch") ||
		die "the webhook's answer to the $c review does not check"
	n=$("${CURL[@]}" -o "$W/$c.nginx" -w '%{http_code} %{size_download}' -H 'Content-Type: application/json' --data-binary "@$W/$c.json" "$NURL/$c")
	cmp -s "$W/$c.resp" "$W/$c.nginx" || die "nginx's $c body differs from the webhook's"
	echo "$c: request $(wc -c <"$W/$c.json") bytes; webhook 200 $(wc -c <"$W/$c.resp") bytes ($patch);" \
		"nginx $n bytes (POST, same bytes)"
	[ "${n%% *}" = 200 ] || die "nginx answered ${n%% *} to POST /$c"
done

echo; echo "== 0b. a full review in-process (bench/bench_review.c: review_admit, no cache, no HTTP or TLS)"
"$B/bench/bench_review" 20000 $(head -200 "$W/typical-distinct.list")
"$B/bench/bench_review" 2000 $(head -100 "$W/env1500-distinct.list")
echo; echo "== 0c. the admission log line in-process, to /dev/null (bench/bench_log.c), against a jansson object and dump"
"$B/bench/bench_log" 100000 5

# order R: the two servers, alternating by round
order() { if [ $(($1 % 2)) = 1 ]; then echo webhook nginx; else echo nginx webhook; fi; }
url() { if [ "$1" = webhook ]; then echo "$WURL"; else echo "$NURL/$2"; fi; }
loglines() { wc -l <"$W/webhook-nocache.log"; } # the latency runs go to the cache-less webhook

# cpu SERVER: CPU ticks (user + system) used so far by the server's processes (nginx: master and workers)
cpu() {
	local p=$WPID
	[ "$1" = nginx ] && p="$NPID $(pgrep -P "$NPID" | tr '\n' ' ')"
	for q in $p; do awk '{print $14 + $15}' "/proc/$q/stat"; done | awk '{t += $1} END {print t + 0}'
}

# cache PORT: "hits misses" of the webhook's answer cache, from /metrics
cache() {
	"${CURL[@]}" "https://127.0.0.1:$1/metrics" | awk '/^diagport_webhook_review_cache_lookups_total\{result="hit"\}/ {h = $2}
		/^diagport_webhook_review_cache_lookups_total\{result="miss"\}/ {m = $2} END {print h + 0, m + 0}'
}

echo; echo "== 1. throughput: wrk -t2 -c16 -d${WRK_S}s -s bench/webhook_post.lua, POST the reviews of each stream ($ROUNDS rounds, order alternating) (goal: webhook >= 0.8x nginx)"
for r in $(seq 1 "$ROUNDS"); do
	for c in "${CASES[@]}"; do
		for m in "${MODES[@]}"; do
			for s in $(order "$r"); do
				read -r h0 m0 < <(cache "$WP")
				c0=$(cpu "$s")
				BODIES=$W/$c-$m.list wrk -t2 -c16 -d"${WRK_S}s" -s bench/webhook_post.lua "$(url "$s" "$c")" >"$W/wrk-$c-$m-$s-$r.txt" 2>&1
				read -r h1 m1 < <(cache "$WP")
				echo "$(($(cpu "$s") - c0))" >"$W/cpu-$c-$m-$s-$r.txt"
				hm=""
				[ "$s" = webhook ] && hm="; cache hits $((h1 - h0)), misses $((m1 - m0))"
				awk -v s="$s" -v c="$c-$m" -v r="$r" -v hm="$hm" -v cpu="$(cat "$W/cpu-$c-$m-$s-$r.txt")" -v hz="$(getconf CLK_TCK)" \
					'/^WRK/ {w = $0} /Latency/ {lat = $2 " avg, " $4 " max"} /Requests\/sec/ {rps = $2}
					END {split(w, f, " "); printf "   round %d %-17s %-7s %9.0f req/s, %5.1f us CPU/req  (latency %s; non-2xx %d, errors connect %d read %d write %d timeout %d%s)\n",
					r, c, s, rps, cpu / hz * 1e6 / (f[3] > 0 ? f[3] : 1), lat, f[15], f[9], f[11], f[13], f[17], hm}' "$W/wrk-$c-$m-$s-$r.txt"
			done
		done
	done
done
for c in "${CASES[@]}"; do
	for m in "${MODES[@]}"; do
		w=$(cat "$W"/wrk-"$c"-"$m"-webhook-*.txt | awk '/^WRK/ {n += $3; t += $5} END {printf "%.0f", n / t * 1e6}')
		n=$(cat "$W"/wrk-"$c"-"$m"-nginx-*.txt | awk '/^WRK/ {n += $3; t += $5} END {printf "%.0f", n / t * 1e6}')
		awk -v c="$c-$m" -v w="$w" -v n="$n" 'BEGIN {printf "%-17s webhook %.0f req/s, nginx %.0f req/s: ratio %.3fx\n", c":", w, n, (n > 0 ? w / n : 0)}'
		# the servers' own CPU per request: on a machine others load too, steadier than requests per second
		for s in webhook nginx; do
			cat "$W"/cpu-"$c"-"$m"-"$s"-*.txt | awk -v t="$(cat "$W"/wrk-"$c"-"$m"-"$s"-*.txt | awk '/^WRK/ {n += $3} END {print n}')" \
				-v hz="$(getconf CLK_TCK)" '{u += $1} END {printf "%.1f\n", u / hz * 1e6 / (t > 0 ? t : 1)}' >"$W/cpureq-$s"
		done
		awk -v c="$c-$m" -v w="$(cat "$W/cpureq-webhook")" -v n="$(cat "$W/cpureq-nginx")" \
			'BEGIN {printf "%-17s CPU per request: webhook %.1f us, nginx %.1f us: nginx/webhook %.3fx\n", c":", w, n, (w > 0 ? n / w : 0)}'
	done
done
load

# pcts FILES: nearest-rank percentiles of the first column (us) of the raw files, in ms
pcts() {
	cat "$@" | awk '{print $1}' | sort -n | awk '{v[NR] = $1} END {
		if (!NR) {print "no samples"; exit}
		split("50 90 99 99.9", p, " ")
		for (i = 1; i <= 4; i++) {k = int(p[i] / 100 * NR + 0.999999); if (k < 1) k = 1; printf "p%s %.3f  ", p[i], v[k] / 1000}
		printf "max %.3f ms  (%d samples)\n", v[NR] / 1000, NR}'
}
# logms FROM TO: the webhook's own admission time (its log's "ms") on lines FROM+1..TO
logms() {
	sed -n "$(($1 + 1)),$2p" "$W/webhook-nocache.log" | sed -n 's/.*"event":"admission".*"ms":\([0-9.]*\).*/\1/p' | sort -g |
		awk '{v[NR] = $1} END {if (NR) printf "webhook log, time in the handler: p50 %.3f p99 %.3f ms (%d admissions)", v[int(NR * .5 + .999999)], v[int(NR * .99 + .999999)], NR}'
}
# latency RATE LABEL: ROUNDS runs of bench/webhook_load per case and server
latency() {
	local rate=$1 label=$2 r c s from
	shift 2
	for r in $(seq 1 "$ROUNDS"); do
		for c in "$@"; do
			for s in $(order "$r"); do
				from=$(loglines)
				printf '   round %d %-8s %-7s ' "$r" "$c" "$s"
				if [ "$s" = webhook ]; then
					"$B/bench/webhook_load" -r "$rate" -c "$LAT_CONNS" -d "$LAT_S" -w 1 -o "$W/lat-$label-$c-$s-$r.raw" "$W/ca.crt" "$WPN" /mutate "$W/$c.json"
				else
					"$B/bench/webhook_load" -r "$rate" -c "$LAT_CONNS" -d "$LAT_S" -w 1 -o "$W/lat-$label-$c-$s-$r.raw" "$W/ca.crt" "$NP" "/$c" "$W/$c.json"
				fi
				[ "$s" = webhook ] && sleep 0.5 && echo "      $(logms "$from" "$(loglines)")" # lines come every 200 ms
			done
		done
	done
	for c in "$@"; do
		for s in webhook nginx; do
			printf '%s at %s/s, %s: ' "$c" "$rate" "$s"
			pcts "$W"/lat-"$label"-"$c"-"$s"-*.raw
		done
	done
}

if [ "$RATE" != 0 ]; then
echo; echo "== 2. latency at $RATE requests/s over $LAT_CONNS keep-alive TLS connections, ${LAT_S}s runs, the first second not counted (goal: typical pod p99 <= 2 ms)"
echo "   (latency = last byte of the answer - the request's due time; service = last byte - actual send)"
latency "$RATE" fixed "${CASES[@]}"
fi
if [ "$LOW_RATE" != 0 ]; then
	echo; echo "== 2b. latency of the 1,500-env pod at $LOW_RATE requests/s (one request in flight at a time, mostly)"
	latency "$LOW_RATE" low env1500
fi
echo; load
kill -0 "$WPID" 2>/dev/null || echo "webhook.sh: the webhook died during the run: $(tail -3 "$W/webhook.log")"
echo "webhook log: $(grep -c '"event":"admission"' "$W/webhook.log") admissions, outcomes: $(sed -n 's/.*"outcome":"\([^"]*\)".*/\1/p' "$W/webhook.log" | sort | uniq -c | tr -s ' ' | tr '\n' ';')" \
	"other events: $(grep -v '"event":"admission"' "$W/webhook.log" | sed -n 's/.*"event":"\([^"]*\)".*/\1/p' | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
grep '"event":"http-error"' "$W/webhook.log" | sed -n 's/.*"message":"\(.*\)"}$/\1/p' | sed 's/[0-9][0-9]*/N/g' | sort | uniq -c |
	sort -rn | head -5 | sed 's/^ */   http-error: /'
[ -s "$W/nginx/error.log" ] && echo "nginx error.log: $(grep -cv '\[notice\]' "$W/nginx/error.log") lines above notice"
exit 0
