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

# each rule bites: a small tree of its own, built, checked (shared by one folder, a cycle, a private header)
bite=$(mktemp -d) && trap 'rm -rf "$bite"' EXIT
mkdir -p "$bite"/{common,cloud,launcher,fleet,egress,webhook,obj/common,obj/cloud,obj/launcher,obj/fleet,obj/egress,obj/webhook}
put() { printf "%s\n" "$2" > "$bite/$1.c" && : > "$bite/$1.h" && cc -I "$bite" -c -o "$bite/obj/$1.o" "$bite/$1.c"; }
check() { /usr/bin/python3 tests/integration/tree_check.py "$bite/obj" "$bite" | grep "$1"; }
put common/one 'int one(void) { return 1; }'
put launcher/a 'int one(void); int a(void) { return one(); }'
check common-is-shared | grep -q '^FAIL common-is-shared: .*common/one.c (launcher/a)' &&
	pass bites/lonely-common || fail bites/lonely-common "$(check common-is-shared)"
put fleet/b 'int one(void); int b(void) { return one(); }'
check common-is-shared | grep -q '^PASS' && pass bites/shared-common || fail bites/shared-common "$(check common-is-shared)"
# a library's own piece (called only inside cloud/) is shared through the shared file that calls it;
# one whose only caller inside is not shared fails
put cloud/piece 'int piece(void) { return 2; }'
put cloud/client 'int piece(void); int client(void) { return piece(); }'
put egress/c 'int client(void); int c(void) { return client(); }'
out=$(check common-is-shared)
put fleet/d 'int client(void); int d(void) { return client(); }'
case "$out" in
*'cloud/client.c (egress/c)'*'cloud/piece.c (cloud/client)'*) check common-is-shared | grep -q '^PASS' ;;
*) false ;;
esac && pass bites/library-piece || fail bites/library-piece "$out / $(check common-is-shared)"
put webhook/e 'int f(void); int e(void) { return f(); }'
put webhook/f 'int e(void); int f(void) { return e(); }'
check no-cycles | grep -q '^FAIL no-cycles: webhook/e <-> webhook/f' && pass bites/cycle || fail bites/cycle "$(check no-cycles)"
mkdir -p "$bite/launcher/runtime" "$bite/launcher/trace" "$bite/obj/launcher/runtime" "$bite/obj/launcher/trace"
put launcher/runtime/r 'int r(void) { return 0; }'
put launcher/trace/t '#include "launcher/runtime/r.h"
int t(void) { return 0; }'
check agent-layers | grep -q '^PASS' && pass bites/agent-layers-down || fail bites/agent-layers-down "$(check agent-layers)"
put launcher/runtime/r '#include "launcher/trace/t.h"
int r(void) { return 0; }'
check agent-layers | grep -q '^FAIL agent-layers: launcher/runtime/r.c includes launcher/trace/' &&
	pass bites/agent-layers-up || fail bites/agent-layers-up "$(check agent-layers)"
