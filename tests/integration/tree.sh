#!/usr/bin/env bash
# tree.sh - the source tree keeps the shape docs/ARCHITECTURE.md draws: no two
# files that call each other, common/ only for what two components share, no
# component reaching into another's private headers (tree_check.py says how); and every path a
# document names is there (doc_paths.py).
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=tree
. tests/lib.sh
B=${BUILD:-build}
[ -f "$B/libdiagport.a" ] || { fail built "$B/libdiagport.a is missing: run make first"; exit 0; }
/usr/bin/python3 tests/integration/tree_check.py "$B" | sed "s/^\(PASS\|FAIL\) /\1 integration\/$T_NAME\//"
# every repository path a document names exists (doc_paths.py says how)
/usr/bin/python3 tests/integration/doc_paths.py | sed "s/^\(PASS\|FAIL\) /\1 integration\/$T_NAME\//"
