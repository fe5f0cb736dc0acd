#!/usr/bin/env bash
# bench/list_stream.sh [BINARY] - a Kubernetes List injected item by item (issue 32): the List of
# 11,000 Deployments that `kubectl get deploy -A -o json` gives (tests/integration/deploy_list.py, ~23 MB),
# `diagport inject k8s -f list.json > out` against `jq -c . list.json > out` on the same file, side by
# side, alternating, ROUNDS times (5). Prints each one's median wall time and peak RSS (/usr/bin/time),
# and the ratios: targets, time <= jq's and peak RSS <= 3 x the input. Then uninject of the output,
# alone. Measures and prints; never gates. Knobs: ROUNDS, ITEMS (11000).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BIN=${1:-./diagport}
ROUNDS=${ROUNDS:-5}
ITEMS=${ITEMS:-11000}
W=$(mktemp -d "${TMPDIR:-/tmp}/dp-bench-list.XXXXXX")
trap 'rm -rf "$W"' EXIT
python3 tests/integration/deploy_list.py "$ITEMS" "$W/list.json" || exit 1
in_b=$(stat -c %s "$W/list.json")
echo "== List streaming: $(date -u +%FT%TZ), commit $(git rev-parse --short HEAD 2>/dev/null), $(nproc) cores"
echo "input: $ITEMS Deployments, $in_b bytes; $ROUNDS rounds, alternating"
# one NAME CMD...: runs CMD with stdout to $W/out.NAME, appends "seconds KiB" to $W/NAME
one() {
	local name=$1
	shift
	/usr/bin/time -o "$W/t" -f '%e %M' "$@" > "$W/out.$name" 2> "$W/err" ||
		{ echo "$name failed: $(head -c 300 "$W/err")"; exit 1; }
	cat "$W/t" >> "$W/$name"
}
for _ in $(seq "$ROUNDS"); do
	one diagport "$BIN" inject k8s -f "$W/list.json"
	one jq jq -c . "$W/list.json"
done
one uninject "$BIN" uninject k8s -f "$W/out.diagport"
out_b=$(stat -c %s "$W/out.diagport")
cmp -s "$W/out.uninject" "$W/list.json" || { echo "uninject did not give the input back"; exit 1; }
median() { sort -n | awk '{v[NR] = $1} END {print (NR % 2) ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2}'; }
dt=$(cut -d' ' -f1 "$W/diagport" | median) dm=$(cut -d' ' -f2 "$W/diagport" | median)
jt=$(cut -d' ' -f1 "$W/jq" | median) jm=$(cut -d' ' -f2 "$W/jq" | median)
read -r ut um < "$W/uninject"
printf '%-34s %8s %12s %10s\n' command "time" "peak RSS" "RSS/input"
awk -v i="$in_b" -v t="$dt" -v m="$dm" 'BEGIN {printf "%-34s %6.2f s %8d KiB %9.2fx\n", "diagport inject k8s (median)", t, m, m * 1024 / i}'
awk -v i="$in_b" -v t="$jt" -v m="$jm" 'BEGIN {printf "%-34s %6.2f s %8d KiB %9.2fx\n", "jq -c . (median)", t, m, m * 1024 / i}'
awk -v i="$out_b" -v t="$ut" -v m="$um" 'BEGIN {printf "%-34s %6.2f s %8d KiB %9.2fx\n", "diagport uninject k8s (once)", t, m, m * 1024 / i}'
echo "output: $out_b bytes; uninject gives the input back byte for byte"
awk -v a="$dt" -v b="$jt" -v m="$dm" -v i="$in_b" \
	'BEGIN {printf "inject / jq: time %.2fx (target <= 1), peak RSS / input %.2fx (target <= 3)\n", a / b, m * 1024 / i}'
echo "all runs (s KiB): diagport $(tr '\n' ';' < "$W/diagport") jq $(tr '\n' ';' < "$W/jq")"
