#!/usr/bin/env bash
# validators.sh - proves that the validators in tests/validate/ bite: each one
# accepts a known-good input and rejects a known-bad one, for the right reason
# (exit 1 and a message that names the fault). The golden cases trust these
# validators; a validator that accepts everything would make them worthless.
# Inputs are in tests/integration/data/. Prints PASS/FAIL lines.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
data=$root/tests/integration/data
v=$root/tests/validate
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

failed=0
pass() { echo "PASS integration/validators/$1"; }
fail() {
	echo "FAIL integration/validators/$1: $2"
	failed=1
	[ -s "$tmp/out" ] && head -n 20 "$tmp/out" | sed 's/^/    /'
}

# good NAME CMD...: CMD must exit 0.
good() {
	local name=$1 rc
	shift
	timeout 120 "$@" >"$tmp/out" 2>&1 </dev/null
	rc=$?
	if [ "$rc" -eq 0 ]; then pass "$name"; else fail "$name" "rejected a valid input (exit $rc)"; fi
}

# bad NAME WANT CMD...: CMD must exit 1 and print WANT (a fixed string).
bad() {
	local name=$1 want=$2 rc
	shift 2
	timeout 120 "$@" >"$tmp/out" 2>&1 </dev/null
	rc=$?
	if [ "$rc" -ne 1 ]; then
		fail "$name" "exit $rc on an invalid input, expected 1"
	elif ! grep -qF -- "$want" "$tmp/out"; then
		fail "$name" "rejected the input but did not say \"$want\""
	else
		pass "$name"
	fi
}

# Kubernetes: kubernetes-models' schema and the API-server rules.
good k8s-validate/good node "$v/k8s-validate.mjs" "$data/k8s-good.yaml"
bad k8s-validate/bad-port-type "containers[0].ports[0].containerPort must be integer" \
	node "$v/k8s-validate.mjs" "$data/k8s-bad.yaml"
bad k8s-validate/bad-missing-name "containers[1] must have required property name" \
	node "$v/k8s-validate.mjs" "$data/k8s-bad.yaml"
bad k8s-validate/bad-restart-policy "restartPolicy must be equal to one of the allowed values" \
	node "$v/k8s-validate.mjs" "$data/k8s-bad.yaml"
bad k8s-validate/bad-duplicate-container 'duplicate container name "app"' \
	node "$v/k8s-validate.mjs" "$data/k8s-bad-rules.yaml"
bad k8s-validate/bad-mount-without-volume 'volume "diagport-diag" not found' \
	node "$v/k8s-validate.mjs" "$data/k8s-bad-rules.yaml"
bad k8s-validate/bad-probe-on-plain-init-container 'startupProbe: may not be set on an init container' \
	node "$v/k8s-validate.mjs" "$data/k8s-bad-rules.yaml"

# CloudFormation: CfnInclude's parser and the CDK's schema validation.
good cfn-load/good node "$v/cfn-load.mjs" "$data/cfn-good.yaml"
bad cfn-load/bad-ref "'NoSuchResource' not found" node "$v/cfn-load.mjs" "$data/cfn-bad-ref.yaml"
bad cfn-load/bad-no-type "The \`type\` property is required" node "$v/cfn-load.mjs" "$data/cfn-bad-notype.yaml"
bad cfn-load/bad-property "'Bogus' was unexpected" node "$v/cfn-load.mjs" "$data/cfn-bad-property.yaml"

# ECS: the AWS CLI's request model.
good ecs-validate/good "$v/ecs-validate.sh" "$data/ecs-good.json"
bad ecs-validate/bad "Invalid type for parameter cpu" "$v/ecs-validate.sh" "$data/ecs-bad.json"

# preserve.py: what the injector must keep.
good preserve/good /usr/bin/python3 "$v/preserve.py" "$data/preserve-input.yaml" \
	"$data/preserve-good.yaml" --allow-change DOTNET_DiagnosticPorts
bad preserve/bad 'env[MODE].value: input has str "1", output has int 1' /usr/bin/python3 \
	"$v/preserve.py" "$data/preserve-input.yaml" "$data/preserve-bad.yaml" \
	--allow-change DOTNET_DiagnosticPorts

# pprof-format: a profile whose ids resolve, and one whose sample names a location that is not there
# (both encoded here by hand: varints and length-delimited fields, gzip'd)
/usr/bin/python3 - "$tmp" <<'PY'
import gzip, sys
def varint(v):
    out = b""
    while v >= 0x80:
        out += bytes([v & 0x7f | 0x80]); v >>= 7
    return out + bytes([v])
def num(f, v): return varint(f << 3) + varint(v)
def msg(f, b): return varint(f << 3 | 2) + varint(len(b)) + b
def packed(f, vs): return msg(f, b"".join(varint(v) for v in vs))
def profile(loc):
    p = msg(1, num(1, 1) + num(2, 2)) + msg(1, num(1, 3) + num(2, 4))
    p += msg(2, packed(1, [loc]) + packed(2, [1, 1000000]))
    p += msg(4, num(1, 1) + msg(4, num(1, 1))) + msg(5, num(1, 1) + num(2, 5))
    for s in ["", "samples", "count", "cpu", "nanoseconds", "Program.Spin"]:
        p += msg(6, s.encode())
    return gzip.compress(p)
open(sys.argv[1] + "/good.pb.gz", "wb").write(profile(1))
open(sys.argv[1] + "/bad.pb.gz", "wb").write(profile(9))
PY
good pprof-validate/good node "$v/pprof-validate.mjs" "$tmp/good.pb.gz" samples/count,cpu/nanoseconds Program.Spin
bad pprof-validate/bad-location "sample 0: location 9 does not exist" \
	node "$v/pprof-validate.mjs" "$tmp/bad.pb.gz" samples/count,cpu/nanoseconds
bad pprof-validate/bad-types "sample types are samples/count,cpu/nanoseconds, not inuse_objects/count" \
	node "$v/pprof-validate.mjs" "$tmp/good.pb.gz" inuse_objects/count

exit "$failed"
