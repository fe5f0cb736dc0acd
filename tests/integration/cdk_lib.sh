#!/usr/bin/env bash
# cdk_lib.sh - the CDK construct library's own tests (cdk/test/*.test.js:
# DiagportAspect, DiagportMacro and the rules in WebAssembly, with
# aws-cdk-lib/assertions), run by Node's test runner; each top-level test is
# one PASS/FAIL line. Needs `make cdk` (the test target builds it).
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

if [ ! -f "$root/cdk/lib/index.js" ] || [ ! -f "$root/cdk/lib/rules-wasm.cjs" ]; then
	echo "FAIL integration/cdk_lib/build: cdk/lib is not built (make cdk)"
	exit 1
fi
(cd "$root/cdk" && timeout 600 node --test --test-reporter=tap test/) >"$tmp/tap" 2>&1 </dev/null
rc=$?
# top-level results only: "ok 3 - name" / "not ok 3 - name" at the start of a line
n=$(sed -n -E 's/^ok [0-9]+ - (.*)$/PASS integration\/cdk_lib\/\1/p; s/^not ok [0-9]+ - (.*)$/FAIL integration\/cdk_lib\/\1/p' "$tmp/tap" | tee "$tmp/lines" | wc -l)
cat "$tmp/lines"
if grep -q '^FAIL' "$tmp/lines"; then
	# the failures' details, as the runner printed them
	grep -n -A 25 '^not ok' "$tmp/tap" | head -n 120 | sed 's/^/    /'
fi
if [ "$n" -eq 0 ] || { [ "$rc" -ne 0 ] && ! grep -q '^FAIL' "$tmp/lines"; }; then
	echo "FAIL integration/cdk_lib/runner: node --test exited $rc with $n results"
	tail -n 30 "$tmp/tap" | sed 's/^/    /'
	exit 1
fi
[ "$rc" -eq 0 ]
