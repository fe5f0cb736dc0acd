#!/usr/bin/env bash
# bench/webhook_attack.sh NAME=BINARY ... - webhooks side by side under slow uploads (issue 15).
# Each binary serves `diagport webhook` on the same key pair; for each attack, every webhook in turn
# gets N TLS clients (tests/integration/webhook_slow.py, in a process of their own) that declare
# LENGTH-byte bodies and send them at RATE bytes/s, a client starting another a second after its
# request ends, for ATTACK_S seconds, while an ordinary review (the typical pod) is posted every
# 0.2 s on a connection of its own (handshake not timed) and VmRSS is sampled. Prints, per webhook and
# attack: the slowest and the median review, reviews that failed, peak RSS, and how the attackers'
# requests ended. Measures and prints; never gates.
# Then, unless ONE_ADDRESS=0, the attack of tests/integration/webhook_one_address.py, where attackers and
# reviews share one address (127.0.0.1; as behind a sidecar proxy or SNAT): 120 connections declaring
# 8 MiB and trickling, 4 sending 8 MiB fast, 100 holding ordinary bodies half sent, 100 holding half a
# request line; a review every 0.1 s on a new connection, for ONE_S seconds: the review's p50/p99/max
# (first byte to last; the handshake apart), peak RSS, how the attackers' requests ended.
# Knobs: N (200), ATTACK_S (10), ATTACKS ("8388608:16384 8388608:131072 8388608:0 200000:100000"; "" for
# none), ONE_ADDRESS (1), ONE_S (20).
# Example: bench/webhook_attack.sh before=/tmp/before/diagport after=./diagport
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
N=${N:-200}
ATTACK_S=${ATTACK_S:-10}
read -ra ATTACKS <<< "${ATTACKS-8388608:16384 8388608:131072 8388608:0 200000:100000}"
ONE_ADDRESS=${ONE_ADDRESS:-1}
ONE_S=${ONE_S:-20}
OSSL=/usr/bin/openssl
PY=/usr/bin/python3
W=$(mktemp -d /tmp/dp-bench-webhook-attack.XXXXXX)
. bench/lib.sh
. bench/webhook_lib.sh
trap bench_cleanup EXIT
[ $# -ge 1 ] || die "usage: bench/webhook_attack.sh NAME=BINARY [NAME=BINARY ...]"
webhook_keys
"$PY" tests/integration/webhook_review.py review bench/webhook_pod.json shop > "$W/typical.json" || die "cannot make the review"
echo "== webhooks under slow uploads: $(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null), N=$N, ${ATTACK_S} s each"
for spec in "$@"; do echo "   $spec"; done
# start_webhook: the webhook $bin as $name on $port, its log in $W/$name.log; sets pid once it answers
start_webhook() {
	"$bin" webhook --listen "127.0.0.1:$port" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" --log-level error \
		2> "$W/$name.log" &
	pid=$!
	PIDS+=($pid)
	webhook_wait "$port"
}
[ ${#ATTACKS[@]} -gt 0 ] && printf '\n%-8s %-22s %17s %9s %10s %s\n' webhook "attack (bytes @ B/s)" "review max/p50" "failed" "RSS peak" "attackers' requests"
for a in "${ATTACKS[@]}"; do
	len=${a%%:*} rate=${a#*:}
	for spec in "$@"; do
		name=${spec%%=*} bin=${spec#*=} port=$(free_port)
		start_webhook
		r=$("$PY" tests/integration/webhook_slow.py "$port" "$W/ca.crt" "$N" "$ATTACK_S" "$rate" "$W/typical.json" \
			--pid "$pid" --length "$len")
		jq -r --arg n "$name" --arg a "$len @ $rate" '[$n, $a, "\(.review_ms[0] // "-") / \(.review_ms[1] // "-") ms",
			"\(.n_failed) of \(.reviews + .n_failed)", "\(.rss_peak_kib) KiB",
			"\(.attacks) sent: \(.answers | to_entries | map("\(.value) x \(.key)") | join(", ")), \(.closed) cut off"] |
			@tsv' <<< "$r" | awk -F'\t' '{printf "%-8s %-22s %17s %9s %10s %s\n", $1, $2, $3, $4, $5, $6}'
		kill "$pid"
		wait "$pid" 2> /dev/null
	done
done
[ "$ONE_ADDRESS" = 1 ] || exit 0
echo; echo "== attackers and reviews from one address (tests/integration/webhook_one_address.py, ${ONE_S} s; target: every review 200 within 50 ms, RSS under 64Mi)"
printf '%-8s %26s %19s %9s %10s %s\n' webhook "review p50 / p99 / max" "handshake p50/max" "failed" "RSS peak" "attackers' requests"
for spec in "$@"; do
	name=${spec%%=*} bin=${spec#*=} port=$(free_port)
	start_webhook
	r=$("$PY" tests/integration/webhook_one_address.py "$port" "$W/ca.crt" "$W/typical.json" --pid "$pid" --seconds "$ONE_S")
	jq -r --arg n "$name" '[$n, (if .review_ms then "\(.review_ms.p50) / \(.review_ms.p99) / \(.review_ms.max) ms" else "-" end),
		"\(.handshake_ms.p50 // "-") / \(.handshake_ms.max // "-") ms", "\(.reviews - .ok) of \(.reviews)", "\(.rss_peak_kib) KiB",
		(.attackers | to_entries | map("\(.key) \(.value.requests): \(.value.answers | to_entries | map("\(.value) x \(.key)") | join(" ")) \(.value.cut) cut") | join("; "))] |
		@tsv' <<< "$r" | awk -F'\t' '{printf "%-8s %26s %19s %9s %10s %s\n", $1, $2, $3, $4, $5, $6}'
	kill "$pid"
	wait "$pid" 2> /dev/null
done
