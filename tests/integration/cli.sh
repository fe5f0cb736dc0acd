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

# empty input is an error, not an empty success
: > "$W/empty.yaml"
"$D" inject -f "$W/empty.yaml" > "$W/out" 2> "$W/err"; rc=$?
check empty-input-exit-3 test $rc -eq 3
exit 0
