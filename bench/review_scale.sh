#!/usr/bin/env bash
# bench/review_scale.sh NAME=BINARY ... - a review's cost against the number of containers (issue 15):
# `diagport webhook review` of a pod with N containers (one of them named in diagport.dev/containers),
# for N = 1,000 .. 16,000, each binary in turn; wall time (median of RUNS) and peak RSS. Measures and
# prints; never gates. Knobs: RUNS (5).
# Example: bench/review_scale.sh before=/tmp/before/diagport after=./diagport
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
RUNS=${RUNS:-5}
W=$(mktemp -d /tmp/dp-bench-review-scale.XXXXXX)
trap 'rm -rf "$W"' EXIT
[ $# -ge 1 ] || { echo "usage: bench/review_scale.sh NAME=BINARY ..." >&2; exit 1; }
python3 - "$W" << 'PY'
import json, sys
for n in (1000, 2000, 4000, 8000, 16000):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p", "namespace": "d",
           "annotations": {"diagport.dev/inject": "enabled", "diagport.dev/containers": "c7"}},
           "spec": {"containers": [{"name": "c%d" % i, "image": "app:1"} for i in range(n)]}}
    json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
               "request": {"uid": "u1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                           "resource": {"group": "", "version": "v1", "resource": "pods"}, "namespace": "d",
                           "operation": "CREATE", "object": pod}}, open("%s/r%d.json" % (sys.argv[1], n), "w"))
PY
echo "== review cost by containers: $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null), median of $RUNS"
printf '%-8s %8s %10s %10s\n' build containers "time" "peak RSS"
for n in 1000 2000 4000 8000 16000; do
	for spec in "$@"; do
		name=${spec%%=*} bin=${spec#*=}
		for r in $(seq 1 "$RUNS"); do
			/usr/bin/time -o "$W/t" -f '%e %M' "$bin" webhook review "$W/r$n.json" > /dev/null 2>&1
			cat "$W/t"
		done | sort -n | awk -v b="$name" -v n="$n" '{t[NR]=$1; m=$2} END {printf "%-8s %8d %8.2f s %7d KiB\n", b, n, t[int((NR+1)/2)], m}'
	done
done
