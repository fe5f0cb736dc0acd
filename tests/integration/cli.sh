#!/usr/bin/env bash
# cli.sh - the command line's promises about files and streams:
# --in-place replaces atomically and keeps the mode; on any error nothing is
# written (stdout empty, file untouched, no temporary files left); a failed
# write is exit 5; options may come before or after the file; stdin works.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T_NAME=cli
. tests/lib.sh # every script runs from the repository root

IN=tests/golden/k8s/deployment-basic/input.yaml
EXP=tests/golden/k8s/deployment-basic/expected

# --in-place: same bytes as stdout, mode kept, no temporary file left
cp "$IN" "$W/d.yaml"; chmod 640 "$W/d.yaml"
"$D" inject -f "$W/d.yaml" --in-place
check in-place-content cmp -s "$W/d.yaml" "$EXP"
check in-place-mode test "$(stat -c %a "$W/d.yaml")" = 640
check in-place-no-temp test "$(ls "$W")" = d.yaml
"$D" uninject --in-place "$W/d.yaml"
"$D" uninject -f "$IN" > "$W/u"
check in-place-uninject cmp -s "$W/d.yaml" "$W/u"
# --max-input takes a size as the agent's settings and Kubernetes write one (common/size.h); anything
# else is a usage error
"$D" inject --max-input 1Ki -f "$IN" > /dev/null 2>&1; rc=$?
WHY="exit $rc"; check max-input-1ki-too-small test "$rc" = 4 -a "$(wc -c < "$IN")" -gt 1024
for v in 200M 64Mi; do
	"$D" inject --max-input "$v" -f "$IN" > /dev/null 2>&1; rc=$?
	WHY="'$v': exit $rc"; check "max-input-$v" test "$rc" = 0
done
for v in 5MB 1X ' 5' 0 -1; do
	"$D" inject --max-input "$v" -f "$IN" > /dev/null 2>&1; rc=$?
	WHY="'$v': exit $rc"; check "max-input-refuses-${v// /space}" test "$rc" = 2
done
# --in-place through a symbolic link replaces the file it names; the link stays a link
mkdir -p "$W/ln"; cp "$IN" "$W/ln/target.yaml"; ln -s target.yaml "$W/ln/link.yaml"
"$D" inject --in-place -f "$W/ln/link.yaml"
check in-place-link-stays test -L "$W/ln/link.yaml"
check in-place-link-target-replaced cmp -s "$W/ln/target.yaml" "$EXP"
check in-place-link-no-temp test "$(ls "$W/ln" | tr '\n' ' ')" = "link.yaml target.yaml "
rm -r "$W/ln"
# --in-place on a read-only file (in a writable directory, where a rename would work): refused, exit 5, the
# file kept; also as root, who may write anything
mkdir -p "$W/ro"; cp "$IN" "$W/ro/r.yaml"; chmod 444 "$W/ro/r.yaml"
"$D" inject --in-place -f "$W/ro/r.yaml" > "$W/out" 2> "$W/err"; rc=$?
WHY="exit $rc"; check in-place-read-only-exit-5 test $rc -eq 5
check in-place-read-only-kept cmp -s "$W/ro/r.yaml" "$IN"
check in-place-read-only-mode test "$(stat -c %a "$W/ro/r.yaml")" = 444
check in-place-read-only-says grep -q "r.yaml: the file is read-only: --in-place" "$W/err"
check in-place-read-only-no-temp test "$(ls "$W/ro")" = r.yaml
rm -r "$W/ro"

# --perf on a Fargate task definition, --in-place: refused as a usage error (exit 2), the file kept as it
# was, no temporary file beside it, nothing on stdout, the message naming requiresCompatibilities
mkdir -p "$W/pf"; cp tests/golden/ecs/fargate-suspend/input.json "$W/pf/td.json"
"$D" inject ecs --perf --in-place -f "$W/pf/td.json" > "$W/pf.out" 2> "$W/pf.err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/pf.err")"; check perf-fargate-in-place-exit-2 test $rc -eq 2
check perf-fargate-in-place-kept cmp -s "$W/pf/td.json" tests/golden/ecs/fargate-suspend/input.json
check perf-fargate-in-place-no-temp test "$(ls "$W/pf")" = td.json
check perf-fargate-in-place-no-stdout test ! -s "$W/pf.out"
check perf-fargate-in-place-says grep -q "perf: requiresCompatibilities holds FARGATE" "$W/pf.err"
rm -r "$W/pf" "$W/pf.out" "$W/pf.err"

# on error: file untouched, stdout empty, exit 1
printf 'apiVersion: v1\nkind: Pod\nmetadata: {name: p}\nspec:\n  containers:\n  - name: a\n  volumes:\n  - name: diagport-diag\n' > "$W/bad.yaml"
cp "$W/bad.yaml" "$W/bad.orig"
"$D" inject --in-place -f "$W/bad.yaml" > "$W/out" 2> "$W/err"; rc=$?
check error-exit-1 test $rc -eq 1
check error-file-untouched cmp -s "$W/bad.yaml" "$W/bad.orig"
check error-no-temp test -z "$(ls "$W" | grep diagport- || true)"
check error-stdout-empty test ! -s "$W/out"
check error-names-file grep -q "bad.yaml:8:5: Pod p: a volume named diagport-diag" "$W/err"

# a multi-document stream where only the last document is bad: no partial output
{ cat "$IN"; echo '---'; cat "$W/bad.yaml"; } > "$W/multi.yaml"
"$D" inject -f "$W/multi.yaml" > "$W/out" 2>/dev/null; rc=$?
check multi-error-no-partial-output test $rc -eq 1 -a ! -s "$W/out"

# write failure: exit 5 with a message
"$D" inject -f "$IN" > /dev/full 2> "$W/err"; rc=$?
check write-failure-exit-5 test $rc -eq 5
check write-failure-message grep -q "cannot write to standard output" "$W/err"

# stdin, '-', and options after the file
"$D" inject < "$IN" > "$W/a"
"$D" inject - < "$IN" > "$W/b"
"$D" inject "$IN" k8s -o yaml > "$W/c"
check stdin cmp -s "$W/a" "$EXP"
check stdin-dash cmp -s "$W/b" "$EXP"
check options-after-file cmp -s "$W/c" "$EXP"

# usage errors: exit 2, nothing on stdout
"$D" inject --in-place < "$IN" > "$W/out" 2>/dev/null; rc=$?
check "usage-exit-2 (--in-place on stdin)" test $rc -eq 2 -a ! -s "$W/out"
for args in "--mode" "--bogus" "k8s ecs" "-o xml" "a b" "--auth-secret s --no-auth" "--port 99999"; do
  "$D" inject $args -f "$IN" > "$W/out" 2>/dev/null; rc=$?
  check "usage-exit-2 ($args)" test $rc -eq 2 -a ! -s "$W/out"
done
"$D" uninject --mode suspend -f "$IN" > /dev/null 2>&1; rc=$?
check uninject-rejects-options test $rc -eq 2

# missing file: exit 5 and the file named
"$D" inject -f "$W/nope.yaml" > "$W/out" 2> "$W/err"; rc=$?
check missing-file-exit-5 test $rc -eq 5
check missing-file-named grep -q "nope.yaml: cannot open" "$W/err"

# input cap: exit 4 before parsing
head -c 2000000 /dev/zero | tr '\0' ' ' > "$W/big.yaml"
"$D" inject --max-input 1000000 -f "$W/big.yaml" > "$W/out" 2> "$W/err"; rc=$?
check cap-exit-4 test $rc -eq 4 -a ! -s "$W/out"

# several documents as JSON: a stream of JSON values, one per document, read by jq and by kubectl's own
# decoder (kubectl label --local reads what kubectl apply -f - reads, with no API server)
MD=tests/golden/k8s/multidoc/input.yaml
docs=$(/usr/bin/python3 -c 'import sys, yaml; print(sum(1 for d in yaml.safe_load_all(open(sys.argv[1])) if d is not None))' "$MD")
"$D" inject -o json -f "$MD" > "$W/md.json" 2> "$W/err"
WHY="jq read $(jq -c .kind "$W/md.json" 2>&1 | wc -l) values, the input has $docs documents"
check json-stream-jq test "$(jq -c .kind "$W/md.json" 2> /dev/null | wc -l)" = "$docs"
KUBECONFIG=/dev/null kubectl label --local -f - diagport.dev/check=1 -o name < "$W/md.json" > "$W/kubectl.out" 2> "$W/kubectl.err"
WHY="kubectl: $(head -c 300 "$W/kubectl.err") $(cat "$W/kubectl.out" | tr '\n' ' ')"
check json-stream-kubectl test "$(wc -l < "$W/kubectl.out")" = "$docs"
WHY="kubectl's order: $(tr '\n' ' ' < "$W/kubectl.out"); jq's: $(jq -r .kind "$W/md.json" | tr '\n' ' ')"
check json-stream-in-order test "$(sed 's|/.*||; s|\..*||' "$W/kubectl.out" | tr -d '\n')" = "$(jq -r '.kind | ascii_downcase' "$W/md.json" | tr -d '\n')"
"$D" inject --help > "$W/help"
check help-says-json-stream grep -q 'stream of JSON values' "$W/help"

# empty input is an error, not an empty success
: > "$W/empty.yaml"
"$D" inject -f "$W/empty.yaml" > "$W/out" 2> "$W/err"; rc=$?
check empty-input-exit-3 test $rc -eq 3

# make install: PREFIX and DESTDIR; the binary lands executable and runs, kubectl-diagport beside it
make -s install DESTDIR="$W/inst" PREFIX=/usr > "$W/inst.log" 2>&1; rc=$?
WHY="exit $rc: $(head -c 300 "$W/inst.log")"; check install-exit-0 test $rc -eq 0
WHY="$(ls -l "$W/inst/usr/bin" 2>&1 | tr '\n' ' ')"
check install-executable bash -c "[ -f '$W/inst/usr/bin/diagport' ] && [ -x '$W/inst/usr/bin/diagport' ]"
WHY="--version said: $("$W/inst/usr/bin/diagport" --version 2>&1 | head -c 200)"
check install-runs-version bash -c "'$W/inst/usr/bin/diagport' --version | grep -qx 'diagport $(cat VERSION)'"
WHY="$("$W/inst/usr/bin/kubectl-diagport" ps --help 2>&1 | head -1)"
check install-kubectl-plugin bash -c "'$W/inst/usr/bin/kubectl-diagport' ps --help | head -1 | grep -q '^usage: kubectl diagport ps'"

# --help as a new user reads it: inject's line names Compose; capture's --parallel is listed once, with its
# one meaning (captures at once); ps has its own (agents asked at once); uninject says what it gives back
# for ECS describe output
"$D" --help > "$W/h"
check help-inject-names-compose grep -q '^  inject .*Compose' "$W/h"
"$D" capture --help > "$W/h"
WHY="$(grep -- '--parallel' "$W/h" | tr '\n' '|')"; check capture-help-parallel-once test "$(grep -c -- '--parallel' "$W/h")" = 1
check capture-help-parallel-captures grep -q -- '--parallel N  *captures at once' "$W/h"
"$D" ps --help > "$W/h"
WHY="$(grep -- '--parallel' "$W/h" | tr '\n' '|')"; check ps-help-parallel test "$(grep -c -- '--parallel N  *agents asked at once' "$W/h")" = 1
"$D" uninject --help > "$W/h"
check uninject-help-describe-output grep -q 'ECS describe-task-definition output, which inject made register input' "$W/h"

# warnings on stderr, output still written, exit 0: a hostNetwork pod; diagport's annotation on a
# workload's own metadata (read only from the pod template)
cat > "$W/hn.yaml" << 'YAML'
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  annotations:
    diagport.dev/mode: suspend
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata:
      labels: {app: web}
      annotations: {diagport.dev/inject: "true"}
    spec:
      hostNetwork: true
      containers:
      - name: app
        image: app:1
YAML
"$D" inject k8s "$W/hn.yaml" > "$W/hn.out" 2> "$W/hn.err"; rc=$?
WHY="exit $rc: $(cat "$W/hn.err")"
check warn-hostnetwork bash -c "[ $rc = 0 ] && [ -s '$W/hn.out' ] && grep -q 'diagport: warning: Deployment web: hostNetwork is true' '$W/hn.err'"
check warn-workload-annotation grep -q 'diagport: warning: Deployment web: annotation diagport.dev/mode is on the workload.s own metadata, which diagport does not read; put it under spec/template/metadata/annotations' "$W/hn.err"
# an ECS task definition whose agent gets a secret, with no execution role to fetch it: a warning
# (ECS refuses to register it so), the output written; none with the role
# shellcheck disable=SC2046
"$D" inject $(cat tests/golden/ecs/monitor/args) tests/golden/ecs/monitor/input.json > "$W/er.out" 2> "$W/er.err"; rc=$?
WHY="exit $rc: $(cat "$W/er.err")"
check warn-execution-role bash -c "[ $rc = 0 ] && [ -s '$W/er.out' ] && grep -q 'diagport: warning: task definition svc: the agent gets secrets (auth-secret) and the task definition has no executionRoleArn' '$W/er.err'"
# shellcheck disable=SC2046
"$D" inject $(cat tests/golden/ecs/egress-settings/args) tests/golden/ecs/egress-settings/input.json > "$W/er.out" 2> "$W/er.err"; rc=$?
WHY="exit $rc: $(cat "$W/er.err")"
check no-warn-execution-role bash -c "[ $rc = 0 ] && ! grep -q executionRoleArn '$W/er.err'"

# --max-input and --max-nodes limit what is read (exit 4, nothing written); what inject writes is not
# limited (a List's output is ~3.6 times its input), and uninject reads it with limits that fit
python3 - "$W/many.yaml" << 'PY'
import sys
doc = """apiVersion: apps/v1
kind: Deployment
metadata: {name: web-%d}
spec:
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - name: app
        image: app:1
"""
open(sys.argv[1], "w").write("---\n".join(doc % i for i in range(2000)))
PY
in_bytes=$(stat -c %s "$W/many.yaml")
"$D" inject k8s --max-input "$((in_bytes + 1000))" "$W/many.yaml" > "$W/lim.out" 2> "$W/lim.err"; rc=$?
out_bytes=$(stat -c %s "$W/lim.out")
WHY="exit $rc: $(head -c 300 "$W/lim.err"); $out_bytes bytes out"
check limits-output-not-limited bash -c "[ $rc = 0 ] && [ $out_bytes -gt $((in_bytes + 1000)) ]"
"$D" uninject k8s --max-input "$((in_bytes + 1000))" "$W/lim.out" > "$W/lim.back" 2> "$W/lim.err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/lim.err")"
check limits-uninject-reads-under-max-input bash -c "[ $rc = 4 ] && [ ! -s '$W/lim.back' ] && grep -q 'larger than .* bytes (--max-input)' '$W/lim.err'"
"$D" inject k8s --max-input "$((in_bytes - 1))" "$W/many.yaml" > "$W/lim.out" 2> "$W/lim.err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/lim.err")"
check limits-input-over-max-input bash -c "[ $rc = 4 ] && [ ! -s '$W/lim.out' ] && grep -q 'larger than .* bytes (--max-input)' '$W/lim.err'"
"$D" inject k8s --max-nodes 5000 "$W/many.yaml" > "$W/lim.out" 2> "$W/lim.err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/lim.err")"
check limits-input-over-max-nodes bash -c "[ $rc = 4 ] && [ ! -s '$W/lim.out' ] && grep -q 'more than 5000 values (--max-nodes)' '$W/lim.err'"
# with limits that fit both, uninject reads what inject wrote, and gives the data back
"$D" inject k8s --max-input 8M --max-nodes 1000000 "$W/many.yaml" > "$W/lim.out" 2> "$W/lim.err"; rc1=$?
"$D" uninject k8s --max-input 8M --max-nodes 1000000 "$W/lim.out" > "$W/lim.back" 2>> "$W/lim.err"; rc2=$?
WHY="exit $rc1/$rc2: $(head -c 300 "$W/lim.err")"
check limits-same-for-uninject bash -c "[ $rc1 = 0 ] && [ $rc2 = 0 ] && cmp -s '$W/lim.back' '$W/many.yaml'"
# memory: documents go through one at a time, so a stream of many costs a small multiple of its bytes in
# and out (before: ~60 times the input, 3 GB for 50 MB); here 2,000 Deployments, 0.4 MB in, ~2.6 MB out
out_bytes=$(stat -c %s "$W/lim.out")
/usr/bin/time -f %M -o "$W/rss" "$D" inject k8s --max-input 8M --max-nodes 1000000 "$W/many.yaml" > /dev/null 2>&1
rss_kb=$(cat "$W/rss")
WHY="peak RSS $rss_kb KiB for $in_bytes bytes in, $out_bytes out (want under 3 x (in + out) + 4 MiB)"
check limits-memory-small-multiple test "$rss_kb" -lt $(((3 * (in_bytes + out_bytes)) / 1024 + 4096))
# a reader that goes away (`| head`): a failed write, exit 5 as docs/INJECTION.md says, not SIGPIPE (141)
/usr/bin/python3 -c '
import json
print(json.dumps({"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "d%d" % i}, "spec": {"template": {"spec": {"containers": [{"name": "a", "image": "x"}]}}}}
    for i in range(3000)]}))' > "$W/pipe.json"
"$D" inject k8s -f "$W/pipe.json" 2> "$W/pipe.err" | head -c 10 > /dev/null
rc=${PIPESTATUS[0]}
WHY="exit $rc: $(head -c 200 "$W/pipe.err")"
check closed-pipe-exit-5 test "$rc" -eq 5
exit 0
