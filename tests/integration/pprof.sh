#!/usr/bin/env bash
# pprof.sh - format=pprof (gzip'd google/pprof profile.proto, launcher/pprof.c) against real .NET apps, judged by
# `go tool pprof -top` (Debian's golang-go, offline) and by Datadog's pprof-format decoder
# (tests/validate/pprof-validate.mjs: sample types, ids that resolve, string_table[0] "", positive values):
#   cpu/*       the console app spinning on two threads (Program.Spin): GET /trace?profile=Cpu&format=pprof (EventPipe)
#               and ?engine=perf&format=pprof: 200, a .pb.gz attachment; pprof -top's first row is Program.Spin;
#               samples/count and cpu/nanoseconds, period the sampling interval; each sample labelled with its
#               thread (pprof -tags: both spinning threads)
#   heap/*      tests/apps/heapobjects holding 200,000 Node objects: GET /gcdump?format=pprof: pprof -top by
#               inuse_space puts Node first, and by inuse_objects counts exactly 200000 of it; top=2: two types
#   egress/*    /gcdump?format=pprof&egressProvider=out: 202, Succeeded, a .pb.gz in the provider's directory
#               that pprof reads
#   fleet/*     `diagport capture cpuprofile --format pprof` and `capture gcdump --format pprof` with --target:
#               .pb.gz files pprof reads, naming Program.Spin and Node
#   bad/*       format=pprof where it is not a format (/stacks, POST /trace): 400 naming the field "format"
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=pprof
. tests/lib.sh
agent_setup pprof
V=$PWD/tests/validate
GO=$(command -v go) || { fail setup "go not found (scripts/prereqs.sh test installs golang-go)"; exit 0; }
# go tool pprof offline, its caches in the scratch directory
export GOTOOLCHAIN=local GOFLAGS= GOPROXY=off HOME=$W/home GOCACHE=$W/gocache GOPATH=$W/gopath
mkdir -p "$HOME"
build_apps
start_agent

# top FILE [PPROF ARGS]: `go tool pprof -top`'s table of FILE, in $W/top.txt (its errors after it); FIRST the name
# on its first row, FLAT that row's flat value
top() {
	local f=$1
	shift
	"$GO" tool pprof -top "$@" "$f" > "$W/top.txt" 2>&1
	read -r FLAT FIRST < <(awk '/^ *flat +flat%/ {on = 1; next} on && NF >= 6 {print $1, $6; exit}' "$W/top.txt")
}
top_why() { head -c 900 "$W/top.txt" | tr '\n' '|'; }
# validate FILE TYPES [NAME]: pprof-validate.mjs's verdict, its line in $W/val.txt
validate() { node "$V/pprof-validate.mjs" "$@" > "$W/val.txt" 2>&1; }
CPU_TYPES=samples/count,cpu/nanoseconds
HEAP_TYPES=inuse_objects/count,inuse_space/bytes
SPIN=DiagportTestConsole.Program.Spin

# --- cpu: two threads in Program.Spin, both engines
env DOTNET_DiagnosticPorts="$W/dumps/port,connect,nosuspend" dotnet "$B/apps/console/console.dll" spin 2 \
	> "$W/spin.out" 2>&1 &
APID=$!
PIDS+=("$APID")
listed() { curl -s "$U/processes" | grep -q "\"pid\":$1[,}]"; }
if ! wait_for "$W/spin.out" READY 30 || ! eventually 10 listed "$APID"; then
	fail setup "the console app did not start or attach: $(tail -3 "$W/spin.out")"
	exit 0
fi
for engine in eventpipe perf; do
	f=$W/$engine.pb.gz
	code=$(curl -s -D "$W/$engine.hdr" -o "$f" -w '%{http_code}' \
		"$U/trace?pid=$APID&profile=Cpu&engine=$engine&format=pprof&durationSeconds=3")
	WHY="code $code, $(tr -d '\r' < "$W/$engine.hdr" | grep -i 'content-' | tr '\n' ' ') $(head -c 300 "$f" | tr -cd '[:print:]')"
	check "cpu/$engine-answer" bash -c "[ $code = 200 ] && grep -qi '^Content-Disposition: attachment; filename=\"[0-9_]*\.pb\.gz\"' '$W/$engine.hdr' &&
		grep -qi '^Content-Type: application/octet-stream' '$W/$engine.hdr' && [ \"\$(head -c 2 '$f' | od -An -tx1 | tr -d ' ')\" = 1f8b ]"
	top "$f"
	WHY="first row '$FIRST' (want $SPIN): $(top_why)"
	check "cpu/$engine-top-is-spin" test "$FIRST" = "$SPIN"
	WHY="pprof: $(top_why)"
	check "cpu/$engine-type-cpu" grep -q '^Type: cpu$' "$W/top.txt"
	validate "$f" "$CPU_TYPES" "$SPIN"
	WHY="$(head -c 600 "$W/val.txt")"
	check "cpu/$engine-decodes" jq -e --arg s "$SPIN" '.topLeaf == $s and .samples > 0' "$W/val.txt"
	# each sample labelled with its thread: the two spinning threads apart (EventPipe "Thread (0xID)", perf "COMM (TID)")
	"$GO" tool pprof -tags "$f" > "$W/tags.txt" 2>&1
	want='Thread (0x[0-9A-F]*)'
	[ "$engine" = perf ] && want='spin ([0-9]*)'
	WHY="want two threads like '$want': $(head -c 600 "$W/tags.txt" | tr '\n' '|')"
	check "cpu/$engine-thread-labels" test "$(grep -c "$want" "$W/tags.txt")" -ge 2
done
# the sampling interval: EventPipe's sampler 1 ms, perf 99 Hz by default
WHY="$(head -c 300 "$W/val.txt")"
check cpu/perf-period jq -e '.period == 10101010' "$W/val.txt"
validate "$W/eventpipe.pb.gz" "$CPU_TYPES" "$SPIN"
WHY="$(head -c 300 "$W/val.txt")"
check cpu/eventpipe-period jq -e '.period == 1000000' "$W/val.txt"

# --- fleet: the same through `diagport capture`
"$D" capture cpuprofile --target "$U" --param "pid=$APID" --format pprof --duration 2 -o "$W/fcpu" \
	> "$W/fcpu.out" 2>&1
f=$(ls "$W/fcpu"/*.pb.gz 2>/dev/null | head -1)
top "${f:-/dev/null}"
WHY="file '$f'; first row '$FIRST'; $(tail -c 300 "$W/fcpu.out"); $(top_why)"
check fleet/cpuprofile test -n "$f" -a "$FIRST" = "$SPIN"
kill "$APID" 2> /dev/null
wait "$APID" 2> /dev/null

# --- heap: 200,000 Node objects
N=200000
env DOTNET_DiagnosticPorts="$W/dumps/port,connect,nosuspend" dotnet "$B/apps/heapobjects/heapobjects.dll" "$N" \
	> "$W/heap.out" 2>&1 &
HPID=$!
PIDS+=("$HPID")
if ! wait_for "$W/heap.out" READY 60 || ! eventually 10 listed "$HPID"; then
	fail setup "heapobjects did not start or attach: $(tail -3 "$W/heap.out")"
	exit 0
fi
f=$W/heap.pb.gz
code=$(curl -s -D "$W/heap.hdr" -o "$f" -w '%{http_code}' "$U/gcdump?pid=$HPID&format=pprof")
WHY="code $code, $(tr -d '\r' < "$W/heap.hdr" | grep -i 'content-' | tr '\n' ' ')"
check heap/answer bash -c "[ $code = 200 ] && grep -qi '^Content-Disposition: attachment; filename=\"[0-9_]*\.gcdump\.pb\.gz\"' '$W/heap.hdr'"
top "$f" -sample_index=inuse_space
WHY="first row '$FIRST' (want Node): $(top_why)"
check heap/top-by-space-is-node test "$FIRST" = Node
top "$f" -sample_index=inuse_objects
WHY="Node's objects $FLAT (want $N): $(top_why)"
check heap/node-objects bash -c "[ '$FIRST' = Node ] && [ '$FLAT' = $N ]"
validate "$f" "$HEAP_TYPES" Node
WHY="$(head -c 600 "$W/val.txt")"
check heap/decodes jq -e '.topLeaf == "Node" and .topValue >= 200000 * 24' "$W/val.txt"

# top=N keeps the first N types, as in format=stats
code=$(curl -s -o "$W/top1.pb.gz" -w '%{http_code}' "$U/gcdump?pid=$HPID&format=pprof&top=2")
validate "$W/top1.pb.gz" "$HEAP_TYPES" Node
WHY="code $code: $(head -c 600 "$W/val.txt")"
check heap/top-n bash -c "[ $code = 200 ] && jq -e '.samples == 2 and .topLeaf == \"Node\"' '$W/val.txt'"

# --- egress
egressed eg "$U/gcdump?pid=$HPID&format=pprof&egressProvider=out"
f=$(ls "$W/out"/*.gcdump.pb.gz 2>/dev/null | head -1)
WHY="code $CODE, $(cat "$W/eg-op.json"), '$f'"
check egress/succeeded bash -c "[ $CODE = 202 ] && jq -e '.status == \"Succeeded\"' '$W/eg-op.json' && [ -n '$f' ]"
top "${f:-/dev/null}"
WHY="first row '$FIRST': $(top_why)"
check egress/read test "$FIRST" = Node

"$D" capture gcdump --target "$U" --param "pid=$HPID" --format pprof -o "$W/fgc" > "$W/fgc.out" 2>&1
f=$(ls "$W/fgc"/*.gcdump.pb.gz 2>/dev/null | head -1)
top "${f:-/dev/null}"
WHY="file '$f'; first row '$FIRST'; $(tail -c 300 "$W/fgc.out"); $(top_why)"
check fleet/gcdump test -n "$f" -a "$FIRST" = Node

# --- bad: pprof where it is no format
code=$(curl -s -o "$W/b1.json" -w '%{http_code}' "$U/stacks?pid=$HPID&format=pprof")
WHY="code $code $(cat "$W/b1.json")"
check bad/stacks bash -c "[ $code = 400 ] && jq -e '.errors.format' '$W/b1.json'"
code=$(curl -s -o "$W/b2.json" -w '%{http_code}' -X POST -H 'Content-Type: application/json' \
	-d '{"Providers": [{"Name": "Microsoft-DotNETCore-SampleProfiler"}]}' "$U/trace?pid=$HPID&format=pprof")
WHY="code $code $(cat "$W/b2.json")"
check bad/post-trace bash -c "[ $code = 400 ] && jq -e '.errors.format' '$W/b2.json'"
