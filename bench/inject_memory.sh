#!/usr/bin/env bash
# bench/inject_memory.sh NAME=BINARY ... - inject's time and peak memory on large honest inputs (issue 15):
# YAML streams of Deployments (each the ~450-byte workload below) of about 0.5, 5 and 50 MB, injected
# by each binary in turn with limits raised to fit (--max-input 1Gi, and --max-nodes where the build
# has it). Prints input and output sizes, wall time and peak RSS, and RSS over input bytes. Measures and
# prints; never gates. Knobs: SIZES_MB ("0.5 5 50").
# Example: bench/inject_memory.sh before=/tmp/before/diagport after=./diagport
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
read -ra SIZES <<< "${SIZES_MB:-0.5 5 50}"
W=$(mktemp -d /tmp/dp-bench-inject-mem.XXXXXX)
trap 'rm -rf "$W"' EXIT
[ $# -ge 1 ] || { echo "usage: bench/inject_memory.sh NAME=BINARY ..." >&2; exit 1; }
echo "== inject on large streams: $(date -u +%FT%TZ), $(git rev-parse --short HEAD 2>/dev/null)"
printf '%-8s %10s %11s %8s %11s %10s\n' build "input" "output" "time" "peak RSS" "RSS/input"
for mb in "${SIZES[@]}"; do
	python3 - "$W/in.yaml" "$mb" << 'PY'
import sys
doc = """apiVersion: apps/v1
kind: Deployment
metadata:
  name: web-%d
spec:
  replicas: 2
  selector:
    matchLabels: {app: web-%d}
  template:
    metadata:
      labels: {app: web-%d}
      annotations: {diagport.dev/inject: "true"}
    spec:
      containers:
      - name: app
        image: registry.example.com/web:1.2.3
        env:
        - {name: A, value: "1"}
        - {name: B, value: two}
        ports:
        - containerPort: 8080
"""
want = float(sys.argv[2]) * 1e6
with open(sys.argv[1], "w") as f:
    i = 0
    while f.tell() < want:
        f.write(("---\n" if i else "") + doc % (i, i, i))
        i += 1
PY
	in_b=$(stat -c %s "$W/in.yaml")
	for spec in "$@"; do
		name=${spec%%=*} bin=${spec#*=}
		extra=()
		"$bin" inject --help 2>&1 | grep -q -- --max-nodes && extra=(--max-nodes 1000000000)
		/usr/bin/time -o "$W/t" -f '%e %M' "$bin" inject k8s --max-input 1Gi "${extra[@]}" "$W/in.yaml" > "$W/out" 2> "$W/err" ||
			{ echo "$name: failed: $(head -c 200 "$W/err")"; continue; }
		read -r t m < "$W/t"
		awk -v n="$name" -v i="$in_b" -v o="$(stat -c %s "$W/out")" -v t="$t" -v m="$m" \
			'BEGIN {printf "%-8s %8.1f MB %8.1f MB %6.2f s %8d KiB %9.1fx\n", n, i / 1e6, o / 1e6, t, m, m * 1024 / i}'
	done
done
