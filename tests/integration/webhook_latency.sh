#!/usr/bin/env bash
# webhook_latency.sh - no answer of the webhook waits for a timer. Every kind of answer (patched,
# not patched, a ~150 KB review patched and not, 400, 404, 405, /healthz, /readyz, /metrics) is
# timed on new connections and on a kept-alive one (its first request and later ones, small after
# large and large after small), through Python's ssl (webhook_latency.py) and through curl. On
# loopback an answer takes about a millisecond; the kernel's cork timer, Nagle against a delayed
# ACK and the like hold one back 40-200 ms. So each kind's median must be under LIMIT_MS (50), a
# margin wide enough for a loaded 2-core machine, and the status must be the expected one.
#   python/*  curl/*   per client: new-<kind>, first (the first request on a kept-alive
#                      connection), kept-<kind>, kept-after (a small review after each kind)
# docs/BENCHMARKS.md has the figures (bench/webhook.sh, the latency part).
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=webhook-latency
. tests/lib.sh
agent_setup webhook-latency
LIMIT_MS=${LIMIT_MS:-50}
PY=/usr/bin/python3
OSSL=/usr/bin/openssl
J=tests/integration/webhook_latency.py

"$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/key.pem" -out "$W/cert.pem" \
	-days 2 -subj /CN=127.0.0.1 -addext subjectAltName=IP:127.0.0.1 2> "$W/openssl.err" ||
	{ fail setup "openssl: $(head -c 300 "$W/openssl.err")"; exit 0; }
"$PY" "$J" bodies bench/webhook_pod.json "$W" 2> "$W/bodies.err" || { fail setup "$(cat "$W/bodies.err")"; exit 0; }
size=$(stat -c %s "$W/big.json")
WHY="big.json is $size bytes"; check setup/large-review-is-150kb test "$size" -gt 140000 -a "$size" -lt 200000

"$D" webhook --listen 127.0.0.1:0 --tls-cert "$W/cert.pem" --tls-key "$W/key.pem" 2> "$W/webhook.log" &
PIDS+=($!)
WP=$(listening_port "$W/webhook.log" port 10 "${PIDS[-1]}") || { fail setup "the webhook did not start: $(head -c 300 "$W/webhook.log")"; exit 0; }
prefix() { sed "s/^\(PASS\|FAIL\) /\1 integration\/$T_NAME\//"; }

# --- Python's ssl
if timeout 120 "$PY" "$J" run "$W/cert.pem" "$WP" "$W" > "$W/python.out" 2> "$W/python.err"; then
	"$PY" "$J" judge "$W/python.out" python "$LIMIT_MS" | prefix
else
	fail python/run "$(tail -c 300 "$W/python.err")"
fi

# --- curl: a new connection per request (its time after the handshake), then one connection for all
U=https://127.0.0.1:$WP
KINDS=("patched POST /mutate typical.json" "not-patched POST /mutate plain.json" "large-patched POST /mutate big.json"
	"large-not-patched POST /mutate bigplain.json" "malformed-400 POST /mutate bad.json" "no-route-404 GET /nope -"
	"wrong-method-405 GET /mutate -" "healthz GET /healthz -" "readyz GET /readyz -" "metrics GET /metrics -")
: > "$W/curl.raw"
for rep in 1 2 3; do
	for k in "${KINDS[@]}"; do
		read -r name method path file <<< "$k"
		data=()
		[ "$file" != - ] && data=(-H 'Content-Type: application/json' --data-binary "@$W/$file")
		curl -s -o /dev/null --cacert "$W/cert.pem" -X "$method" "${data[@]}" \
			-w "new $name %{http_code} %{time_appconnect} %{time_total}\n" "$U$path" >> "$W/curl.raw" 2>> "$W/curl.err"
	done
done
awk '{ printf "%s %s %s %.2f\n", $1, $2, $3, ($5 - $4) * 1000 }' "$W/curl.raw" > "$W/curl.out"
args=()
for rep in 1 2 3; do
	for k in "${KINDS[@]}" "after-plain POST /mutate plain.json"; do
		read -r name method path file <<< "$k"
		[ ${#args[@]} -gt 0 ] && args+=(--next)
		args+=(-s -o /dev/null --cacert "$W/cert.pem" -X "$method")
		[ "$file" != - ] && args+=(-H 'Content-Type: application/json' --data-binary "@$W/$file")
		args+=(-w "kept $name %{http_code} %{num_connects} %{time_total}\n" "$U$path")
	done
done
timeout 120 curl "${args[@]}" > "$W/curl.kept" 2>> "$W/curl.err"
conns=$(awk '{ s += $4 } END { print s + 0 }' "$W/curl.kept")
WHY="curl opened $conns connections for $(wc -l < "$W/curl.kept") requests (want 1: kept alive)"; check curl/one-connection test "$conns" = 1
awk 'NR == 1 { printf "first %s %s %.2f\n", $2, $3, $5 * 1000; next } { printf "kept %s %s %.2f\n", $2, $3, $5 * 1000 }' \
	"$W/curl.kept" >> "$W/curl.out"
"$PY" "$J" judge "$W/curl.out" curl "$LIMIT_MS" | prefix
