#!/usr/bin/env bash
# bench/webhook_attack.sh NAME=BINARY ... - webhooks side by side under slow uploads (issue 15).
# Each binary serves `diagport webhook` on the same key pair; for each attack, every webhook in turn
# gets N TLS clients (tests/integration/webhook_slow.py, in a process of their own) that declare
# LENGTH-byte bodies and send them at RATE bytes/s, a client starting another a second after its
# request ends, for ATTACK_S seconds, while an ordinary review (the typical pod) is posted every
# 0.2 s on a connection of its own (handshake not timed) and VmRSS is sampled. Prints, per webhook and
# attack: the slowest and the median review, reviews that failed, peak RSS, and how the attackers'
# requests ended. Measures and prints; never gates.
# Knobs: N (200), ATTACK_S (10), ATTACKS ("8388608:16384 8388608:131072 8388608:0 200000:100000").
# Example: bench/webhook_attack.sh before=/tmp/before/diagport after=./diagport
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
N=${N:-200}
ATTACK_S=${ATTACK_S:-10}
read -ra ATTACKS <<< "${ATTACKS:-8388608:16384 8388608:131072 8388608:0 200000:100000}"
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
printf '\n%-8s %-22s %17s %9s %10s %s\n' webhook "attack (bytes @ B/s)" "review max/p50" "failed" "RSS peak" "attackers' requests"
for a in "${ATTACKS[@]}"; do
	len=${a%%:*} rate=${a#*:}
	for spec in "$@"; do
		name=${spec%%=*} bin=${spec#*=} port=$(free_port)
		"$bin" webhook --listen "127.0.0.1:$port" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" --log-level error \
			2> "$W/$name.log" &
		pid=$!
		PIDS+=($pid)
		webhook_wait "$port"
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
