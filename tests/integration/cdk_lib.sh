#!/usr/bin/env bash
# cdk_lib.sh - the CDK construct library's own tests (cdk/test/*.test.js:
# DiagportAspect, DiagportMacro and the rules in WebAssembly, with
# aws-cdk-lib/assertions), run as a contributor runs them, `npm test` in cdk/
# (its pretest builds lib/, the WebAssembly, the Lambda bootstrap and
# ./diagport with `make -C .. diagport cdk`: nothing to do after `make
# test`'s own build), with Node's
# TAP reporter; each top-level test is one PASS/FAIL line.
set -uo pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

(cd "$root/cdk" && DIAGPORT_TEST_REPORTER=tap timeout 900 npm test) >"$tmp/tap" 2>&1 </dev/null
rc=$?
if grep -q '^> @diagport/cdk@[^ ]* pretest' "$tmp/tap" && ! grep -q '^> @diagport/cdk@[^ ]* test' "$tmp/tap"; then
	echo "FAIL integration/cdk_lib/build: npm test's pretest (make -C .. diagport cdk) failed (exit $rc)"
	tail -n 30 "$tmp/tap" | sed 's/^/    /'
	exit 1
fi
# top-level results only: "ok 3 - name" / "not ok 3 - name" at the start of a line
n=$(sed -n -E 's/^ok [0-9]+ - (.*)$/PASS integration\/cdk_lib\/\1/p; s/^not ok [0-9]+ - (.*)$/FAIL integration\/cdk_lib\/\1/p' "$tmp/tap" | tee "$tmp/lines" | wc -l)
cat "$tmp/lines"
if grep -q '^FAIL' "$tmp/lines"; then
	# the failures' details, as the runner printed them
	grep -n -A 25 '^not ok' "$tmp/tap" | head -n 120 | sed 's/^/    /'
fi
if [ "$n" -eq 0 ] || { [ "$rc" -ne 0 ] && ! grep -q '^FAIL' "$tmp/lines"; }; then
	echo "FAIL integration/cdk_lib/runner: npm test exited $rc with $n results"
	tail -n 30 "$tmp/tap" | sed 's/^/    /'
	exit 1
fi
[ "$rc" -eq 0 ]
