#!/usr/bin/env bash
# list_stream.sh - a Kubernetes List goes through inject and uninject one item at a time (issue 32):
# the List of 11,000 Deployments that `kubectl get deploy -A -o json` gives (deploy_list.py, ~23 MB;
# the output, ~84 MB, is more than the input's cap would have allowed before) is injected and
# uninjected with default flags: every Deployment gets the agent, uninject gives the input back byte
# for byte (and as JSON), inject of the output changes nothing, peak RSS stays under 3 times the
# input (read whole, the List was a tree of ~20 times it); the same in YAML. An item the rules refuse near the end
# leaves no output: not on stdout (to a file or a pipe), not with --in-place. The bytes of a small
# List are the whole tree's (the golden cases), which the fuzz target checks on any List.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T_NAME=list_stream
. tests/lib.sh # every script runs from the repository root

python3 tests/integration/deploy_list.py 11000 "$W/list.json" || { fail generate "deploy_list.py failed"; exit 0; }
in_b=$(stat -c %s "$W/list.json")
check input-over-20mb test "$in_b" -gt 20000000

/usr/bin/time -f %M -o "$W/rss" "$D" inject k8s -f "$W/list.json" > "$W/out.json" 2> "$W/err"; rc=$?
out_b=$(stat -c %s "$W/out.json")
WHY="exit $rc: $(head -c 300 "$W/err"); $out_b bytes out"
check inject-default-flags bash -c "[ $rc = 0 ] && [ ! -s '$W/err' ] && [ $out_b -gt $((64 << 20)) ]"
rss_kb=$(tail -1 "$W/rss")
WHY="peak RSS $rss_kb KiB for $in_b bytes in"
check inject-rss-under-3x-input test $((rss_kb * 1024)) -le $((3 * in_b))

python3 - "$W/list.json" "$W/out.json" > "$W/py" 2>&1 << 'PY'
import json, sys
src, out = (json.load(open(p)) for p in sys.argv[1:3])
assert out["kind"] == "List" and len(out["items"]) == len(src["items"]) == 11000, "item count"
for i, (a, b) in enumerate(zip(src["items"], out["items"])):
    spec = b["spec"]["template"]["spec"]
    agents = [c for c in spec.get("initContainers", []) if c["name"] == "diagport-agent"]
    assert len(agents) == 1 and agents[0].get("restartPolicy") == "Always", "item %d: no agent" % i
    env = {e["name"]: e.get("value") for e in spec["containers"][0].get("env", [])}
    assert env.get("DOTNET_DiagnosticPorts") == "/diag/port,nosuspend,connect", "item %d: env" % i
    assert "diagport.dev/status" in b["spec"]["template"]["metadata"]["annotations"], "item %d: status" % i
    assert b["metadata"] == a["metadata"] and b["status"] == a["status"], "item %d: changed" % i
print("ok")
PY
WHY=$(tail -3 "$W/py")
check every-deployment-has-the-agent grep -qx ok "$W/py"

/usr/bin/time -f %M -o "$W/rss2" "$D" uninject k8s -f "$W/out.json" > "$W/back.json" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/err")"
check uninject-default-flags-bytes bash -c "[ $rc = 0 ] && cmp -s '$W/back.json' '$W/list.json'"
WHY="jq -S differs"
check uninject-same-json bash -c "cmp -s <(jq -S . '$W/back.json') <(jq -S . '$W/list.json')"
rss_kb=$(tail -1 "$W/rss2")
WHY="peak RSS $rss_kb KiB for $out_b bytes in"
check uninject-rss-under-3x-input test $((rss_kb * 1024)) -le $((3 * out_b))
"$D" inject k8s -f "$W/out.json" > "$W/twice.json" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/err")"
check inject-idempotent bash -c "[ $rc = 0 ] && cmp -s '$W/twice.json' '$W/out.json'"
# through a pipe, from stdin: the same bytes
"$D" inject k8s < "$W/list.json" | cat > "$W/piped.json"
check inject-stdin-to-pipe cmp -s "$W/piped.json" "$W/out.json"

# item 10,990 of 11,000 refused (an annotation diagport does not know): exit 1, the error names the
# file, the item's line and the workload, and nothing is written anywhere
python3 - "$W/list.json" "$W/bad.json" << 'PY'
import sys
text = open(sys.argv[1]).read()
at = text.index('"name": "svc-10990"')
at = text.index('"diagport.dev/inject": "true"', at)
open(sys.argv[2], "w").write(text[:at] + '"diagport.dev/bogus": "x",\n' + " " * 28 + text[at:])
PY
line=$(grep -n '"diagport.dev/bogus"' "$W/bad.json" | cut -d: -f1)
"$D" inject k8s -f "$W/bad.json" > "$W/bad.out" 2> "$W/err"; rc=$?
WHY="exit $rc, $(stat -c %s "$W/bad.out") bytes out: $(head -c 300 "$W/err")"
check refused-item-exit-1-no-output bash -c "[ $rc = 1 ] && [ ! -s '$W/bad.out' ]"
check refused-item-named grep -Eq "^diagport: $W/bad.json:$line:[0-9]+: Deployment team-30/svc-10990: .*diagport.dev/bogus" "$W/err"
"$D" inject k8s -f "$W/bad.json" 2> /dev/null | cat > "$W/bad.pipe"
WHY="$(stat -c %s "$W/bad.pipe") bytes through the pipe"
check refused-item-nothing-to-pipe test ! -s "$W/bad.pipe"
cp "$W/bad.json" "$W/inplace.json"
"$D" inject k8s -i -f "$W/inplace.json" 2> /dev/null; rc=$?
WHY="exit $rc; $(ls "$W" | grep -c diagport-) temporary files"
check refused-item-in-place-untouched bash -c "[ $rc = 1 ] && cmp -s '$W/inplace.json' '$W/bad.json' && ! ls '$W' | grep -q diagport-"
cp "$W/list.json" "$W/inplace.json"
"$D" inject k8s -i -f "$W/inplace.json" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/err")"
check in-place-large-list bash -c "[ $rc = 0 ] && cmp -s '$W/inplace.json' '$W/out.json' && ! ls '$W' | grep -q diagport-"

# the same List in YAML (`kubectl get -o yaml`, ~10 MB): item by item too (libyaml reads it twice: once
# for the envelope, once for the items), the round trip exact, peak RSS under 3 times the input
python3 -c 'import json, sys, yaml; yaml.safe_dump(json.load(open(sys.argv[1])), open(sys.argv[2], "w"), sort_keys=False)' \
	"$W/list.json" "$W/list.yaml"
yin_b=$(stat -c %s "$W/list.yaml")
/usr/bin/time -f %M -o "$W/rss" "$D" inject k8s -f "$W/list.yaml" > "$W/out.yaml" 2> "$W/err"; rc=$?
rss_kb=$(tail -1 "$W/rss")
WHY="exit $rc: $(head -c 300 "$W/err"); peak RSS $rss_kb KiB for $yin_b bytes in"
check yaml-inject-rss-under-3x-input bash -c "[ $rc = 0 ] && [ $((rss_kb * 1024)) -le $((3 * yin_b)) ]"
WHY="the YAML output holds other data than the JSON output"
check yaml-same-data-as-json python3 -c 'import json, sys, yaml; sys.exit(yaml.safe_load(open(sys.argv[1])) != json.load(open(sys.argv[2])))' \
	"$W/out.yaml" "$W/out.json"
"$D" uninject k8s -f "$W/out.yaml" > "$W/back.yaml" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/err")"
check yaml-uninject-bytes bash -c "[ $rc = 0 ] && cmp -s '$W/back.yaml' '$W/list.yaml'"

# a syntax error in the last item: the whole reading's message (line and column), nothing written
head -c $((in_b - 40)) "$W/list.json" > "$W/cut.json"
"$D" inject k8s -f "$W/cut.json" > "$W/cut.out" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/err")"
check syntax-error-exit-3-no-output bash -c "[ $rc = 3 ] && [ ! -s '$W/cut.out' ] && grep -Eq '^diagport: $W/cut.json:[0-9]+:[0-9]+: unexpected end of input' '$W/err'"
exit 0
