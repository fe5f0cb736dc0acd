#!/usr/bin/env bash
# perf_profile.sh - CPU profiles with engine=perf (/trace?engine=perf: perf events on every thread, frames
# named from the method rundown, the perf map, ELF symbols and debug files, kallsyms) against the real
# console app in its hot modes (tests/apps/console), the agent sandboxed as by default; stacks read by
# perf_stacks.py, `perf script` text folded by perf_collapse.py (stackcollapse-perf.pl's rules):
#   spin/*        two threads in Program.Spin: the top leaf is Program.Spin (> 50 %), on both threads
#   formats/*     folded parses; the flame graph is well-formed SVG (Python's XML parser) naming Program.Spin;
#                 speedscope's own schema accepts the JSON; perfscript, folded as stackcollapse-perf folds it,
#                 has the same leaves, shares and total as a folded profile taken at the same time
#   stop/*        durationSeconds=-1, then DELETE /operations/{id}?stop=true: the profile, Succeeded
#   bad/*         frequency 0 and 20000, event=bogus, kernel=maybe: 400 naming the field
#   alloc/*       Program.Churn with the standalone GC (DOTNET_GCName=libclrgc.so, workstation, not
#                 concurrent, so the GC runs on the allocating thread): libclrgc.so frames over Program.Churn
#   syscalls/*    Program.Sys writing to /dev/null: named [kernel]! frames over Program.Sys (we run as root,
#                 so kernel=auto takes them); kernel=false: none
#   native/*      Program.Native calling into libdpnative.so (tests/apps/dpnative, built here with gcc,
#                 stripped): dp_native_spin named from a debug file found by .gnu_debuglink (in .debug/
#                 beside the library) or by build id (/usr/lib/debug/.build-id/NN/REST.debug), over
#                 Program.Native; with no debug file, libdpnative.so![stripped]
#   sidebyside/*  Debian's perf (perf record -F 99 -g) and the agent (frequency=99) on the same process at the
#                 same time, for 10 s: the top 5 leaf functions (names normalised: perf_stacks.py) the same,
#                 each share within 5 points; both tables are printed
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=perf-profile
. tests/lib.sh
agent_setup perf
PY=/usr/bin/python3
STACKS=tests/integration/perf_stacks.py
COLLAPSE=tests/integration/perf_collapse.py
V=$PWD/tests/validate
PERF=$(command -v perf) || { fail setup "perf not found (scripts/prereqs.sh test installs linux-perf)"; exit 0; }
"$PERF" version > "$W/perf.version" 2>&1 || { fail setup "perf does not run: $(head -c 300 "$W/perf.version")"; exit 0; }
build_apps

# --- libdpnative.so, four ways: with its symbols; stripped with a debug file found by .gnu_debuglink
# (.debug/ beside it); stripped with one found by build id; stripped with none. Each has its own build id
# (random: nothing else on the machine has it), so no copy finds another's debug file.
# The build-id copy's debug file goes where the system's are; it and a directory made for it go at exit.
BUILD_ID_DEBUG=
BUILD_ID_DIR_MADE=
cleanup_more() {
	local a
	[ -n "$BUILD_ID_DEBUG" ] && rm -f "$BUILD_ID_DEBUG"
	[ -n "$BUILD_ID_DIR_MADE" ] && rmdir "$BUILD_ID_DIR_MADE" 2> /dev/null
	for a in "${APPS[@]+"${APPS[@]}"}"; do rm -f "/tmp/perf-$a.map" "/tmp/perfinfo-$a.map"; done
	return 0
}
APPS=()
new_id() { head -c 20 /dev/urandom | od -An -tx1 | tr -d ' \n'; }
# native DIR ID: DIR/libdpnative.so with build id ID, with frame pointers, so that a call chain walks from
# dp_native_spin through dp_native_run into the P/Invoke caller
native() {
	mkdir -p "$1" && gcc -O2 -g -fPIC -shared -fno-omit-frame-pointer \
		-Wl,--build-id=0x"$2" -o "$1/libdpnative.so" tests/apps/dpnative/dpnative.c 2>> "$W/gcc.log"
}
# strip_to DIR DEBUG: DIR/libdpnative.so's symbols into DEBUG, then stripped of them
strip_to() {
	mkdir -p "$(dirname "$2")" && objcopy --only-keep-debug "$1/libdpnative.so" "$2" 2>> "$W/gcc.log" &&
		strip --strip-all "$1/libdpnative.so" 2>> "$W/gcc.log"
}
ID_BID=$(new_id)
BUILD_ID_DEBUG=/usr/lib/debug/.build-id/${ID_BID:0:2}/${ID_BID:2}.debug
[ -d "$(dirname "$BUILD_ID_DEBUG")" ] || BUILD_ID_DIR_MADE=$(dirname "$BUILD_ID_DEBUG")
if ! { native "$W/full" "$(new_id)" &&
	native "$W/dl" "$(new_id)" && strip_to "$W/dl" "$W/dl/.debug/libdpnative.so.debug" &&
	(cd "$W/dl" && objcopy --add-gnu-debuglink=.debug/libdpnative.so.debug libdpnative.so 2>> "$W/gcc.log") &&
	native "$W/bid" "$ID_BID" && strip_to "$W/bid" "$BUILD_ID_DEBUG" &&
	native "$W/none" "$(new_id)" && strip_to "$W/none" "$W/none.debug" && rm -f "$W/none.debug"; }; then
	fail setup "building libdpnative.so: $(head -c 400 "$W/gcc.log")"
	exit 0
fi
# what the native checks rest on: the stripped copies name dp_native_spin nowhere, the full one in .symtab
# only (hidden), and only the debuglink copy carries a .gnu_debuglink
stripped_ok() {
	local d
	nm "$W/full/libdpnative.so" | grep -q ' t dp_native_spin$' && ! nm -D "$W/full/libdpnative.so" | grep -q dp_native_spin || return 1
	for d in dl bid none; do
		! nm "$W/$d/libdpnative.so" 2>&1 | grep -q dp_native_spin && ! nm -D "$W/$d/libdpnative.so" | grep -q dp_native_spin || return 1
	done
	readelf -S "$W/dl/libdpnative.so" | grep -q .gnu_debuglink && ! readelf -S "$W/bid/libdpnative.so" | grep -q .gnu_debuglink &&
		readelf -n "$W/bid/libdpnative.so" | grep -q "Build ID: $ID_BID"
}
WHY="$(nm "$W/dl/libdpnative.so" 2>&1 | head -3) / $(readelf -S "$W/dl/libdpnative.so" 2>&1 | grep -c debuglink) debuglink"
check native/stripped-as-planned stripped_ok

start_agent

# app NAME ARGS...: the console app with ARGS (its environment: APPENV's words) attached to the agent;
# APID its pid, once the agent lists it; its output in $W/NAME.out; 1 when it did not start or attach
APPENV=()
app() {
	local name=$1
	shift
	env "${APPENV[@]+"${APPENV[@]}"}" DOTNET_DiagnosticPorts="$W/dumps/port,connect,nosuspend" \
		dotnet "$B/apps/console/console.dll" "$@" > "$W/$name.out" 2>&1 &
	APID=$!
	PIDS+=("$APID")
	APPS+=("$APID")
	wait_for "$W/$name.out" READY 30 || return 1
	for _ in $(seq 1 100); do curl -s "$U/processes" | grep -q "\"pid\":$APID" && return 0; sleep 0.1; done
	return 1
}
app_end() { kill -9 "$APID" 2> /dev/null; wait "$APID" 2> /dev/null; rm -f "/tmp/perf-$APID.map" "/tmp/perfinfo-$APID.map"; }
# prof NAME QUERY: GET /trace?pid=APID&engine=perf&QUERY into $W/NAME (headers $W/NAME.hdr); CODE its status
prof() { CODE=$(curl -s -D "$W/$1.hdr" -o "$W/$1" -w '%{http_code}' "$U/trace?pid=$APID&engine=perf&$2"); }
# stacks ARGS...: perf_stacks.py's answer (a share, a table), its errors after it
stacks() { "$PY" "$STACKS" "$@" 2>&1; }
# at_least NUMBER MIN: NUMBER (a share perf_stacks.py printed) is a number, MIN or more
at_least() { [[ $1 =~ ^[0-9]+(\.[0-9]+)?$ ]] && awk -v v="$1" -v m="$2" 'BEGIN {exit !(v >= m)}'; }
top_stacks() { sort -t' ' -k2 -nr "$W/$1" 2> /dev/null | head -${2:-3} | cut -c1-400 | tr '\n' '|'; }

# --- spin: two threads in a managed hot loop
if app spin spin 2; then
	prof spin.folded "durationSeconds=4"
	WHY="$CODE $(stacks check "$W/spin.folded") $(head -c 300 "$W/spin.folded")"
	check formats/folded-parses bash -c "[ $CODE = 200 ] && $PY $STACKS check '$W/spin.folded'"
	read -r tshare tname < <(stacks topleaf "$W/spin.folded")
	WHY="top leaf: $tname in $tshare % (want console.dll!DiagportTestConsole.Program.Spin, over 50 %); $(top_stacks spin.folded)"
	check spin/top-leaf-is-spin bash -c "[ '$tname' = console.dll!DiagportTestConsole.Program.Spin ] && awk -v s='$tshare' 'BEGIN {exit !(s > 50)}'"
	prof spin.speedscope.json "durationSeconds=3&format=speedscope"
	node "$V/speedscope-validate.mjs" "$W/spin.speedscope.json" > "$W/ss.err" 2>&1
	rc=$?
	WHY="$CODE, speedscope's schema: exit $rc $(head -c 600 "$W/ss.err")"
	check formats/speedscope-valid test "$CODE:$rc" = 200:0
	# every thread sampled: both spinning threads have a profile of their own holding Program.Spin, named
	# as the kernel names the thread ("spin", the name the app gave it) with its id
	n=$(jq '[.shared.frames | to_entries[] | select(.value.name | test("Program\\.Spin$")) | .key] as $hot |
		[.profiles[] | select((.name | test("^spin \\([0-9]+\\)$")) and any(.samples[][]; . as $i | $hot | index($i)))] |
		length' "$W/spin.speedscope.json" 2>&1)
	WHY="threads named spin with Program.Spin: $n (want 2); profiles: $(jq -c '[.profiles[].name]' "$W/spin.speedscope.json" 2>&1 | head -c 300)"
	check spin/both-threads test "$n" = 2
	prof spin.svg "durationSeconds=2&format=flamegraph"
	"$PY" -c 'import sys, xml.etree.ElementTree as E; r = E.parse(sys.argv[1]).getroot(); sys.exit(r.tag != "{http://www.w3.org/2000/svg}svg")' \
		"$W/spin.svg" > "$W/svg.err" 2>&1
	rc=$?
	WHY="$CODE, XML parse exit $rc $(tail -1 "$W/svg.err"); $(grep -o '<title>[^<]*Spin[^<]*' "$W/spin.svg" | head -2)"
	check formats/flamegraph-xml bash -c "[ $CODE:$rc = 200:0 ] && grep -qi '^content-type: image/svg+xml' '$W/spin.svg.hdr' && grep -q '<title>console.dll!DiagportTestConsole.Program.Spin (' '$W/spin.svg'"

	# --- until stopped: durationSeconds=-1, then DELETE /operations/{id}?stop=true
	curl -s -o "$W/stop.folded" -w '%{http_code}' "$U/trace?pid=$APID&engine=perf&durationSeconds=-1" > "$W/stop.code" &
	TP=$!
	OP=
	for _ in $(seq 1 50); do
		OP=$(curl -s "$U/operations" | jq -r --argjson p "$APID" '[.[] | select(.process.pid == $p and .status == "Running")] | .[0].operationId // empty')
		[ -n "$OP" ] && break
		sleep 0.1
	done
	sleep 2 # time passing: the profile has run 2 s when it is stopped
	curl -s "$U/operations/$OP" > "$W/stop-run.json"
	c=$(curl -s -o /dev/null -w '%{http_code}' -X DELETE "$U/operations/$OP?stop=true")
	wait $TP
	op_ended 5 "$U/operations/$OP"
	curl -s "$U/operations/$OP" > "$W/stop-op.json"
	WHY="op '$OP' running: $(head -c 300 "$W/stop-run.json"); DELETE $c; the profile: $(cat "$W/stop.code") $(stacks check "$W/stop.folded"); then: $(head -c 300 "$W/stop-op.json")"
	check stop/ends-with-profile bash -c "[ '$c' = 200 ] && [ \"\$(cat '$W/stop.code')\" = 200 ] && jq -e '.status == \"Running\" and .isStoppable == true' '$W/stop-run.json' && jq -e '.status == \"Succeeded\"' '$W/stop-op.json' && $PY $STACKS check '$W/stop.folded' && grep -q 'Program.Spin ' '$W/stop.folded'"

	# --- refusals: the field named
	bad() { # bad NAME FIELD QUERY
		local c
		c=$(curl -s -o "$W/bad-$1.json" -w '%{http_code}' "$U/trace?pid=$APID&engine=perf&durationSeconds=1&$3")
		WHY="got $c $(head -c 300 "$W/bad-$1.json") (want 400 naming $2)"
		check "bad/$1" bash -c "[ $c = 400 ] && jq -e --arg f '$2' '.errors | has(\$f)' '$W/bad-$1.json'"
	}
	bad frequency-0 frequency frequency=0
	bad frequency-20000 frequency frequency=20000
	bad event event event=bogus
	bad kernel kernel kernel=maybe
else
	fail spin/app "the console app (spin) did not start or attach: $(tail -3 "$W/spin.out") $(tail -3 "$W/agent.log")"
fi
app_end

# --- alloc: the GC on the allocating thread, all of it in libclrgc.so
APPENV=(DOTNET_GCName=libclrgc.so DOTNET_gcServer=0 DOTNET_gcConcurrent=0)
if app alloc alloc; then
	prof alloc.folded "durationSeconds=4"
	s=$(stacks under "$W/alloc.folded" '^libclrgc\.so!' 'Program\.Churn$')
	WHY="$CODE; samples with libclrgc.so over Program.Churn: $s % (want >= 10); $(stacks check "$W/alloc.folded"); $(top_stacks alloc.folded 2)"
	check alloc/gc-under-churn at_least "$s" 10
else
	fail alloc/app "the console app (alloc) did not start or attach: $(tail -3 "$W/alloc.out")"
fi
app_end
APPENV=()

# --- syscalls: kernel frames, as root
if app sys syscalls; then
	prof sys.folded "durationSeconds=3"
	s=$(stacks under "$W/sys.folded" '^\[kernel\]![^[]' 'Program\.Sys$')
	WHY="$CODE; samples with named [kernel]! frames over Program.Sys: $s % (want >= 10); $(top_stacks sys.folded 2)"
	check syscalls/kernel-under-sys at_least "$s" 10
	prof sys-nok.folded "durationSeconds=2&kernel=false"
	s=$(stacks has "$W/sys-nok.folded" '^\[kernel\]!')
	WHY="$CODE; kernel=false, samples with [kernel]! frames: $s % (want 0); $(stacks check "$W/sys-nok.folded")"
	check syscalls/kernel-false-none bash -c "[ $CODE = 200 ] && [ '$s' = 0.0 ] && $PY $STACKS check '$W/sys-nok.folded'"
else
	fail syscalls/app "the console app (syscalls) did not start or attach: $(tail -3 "$W/sys.out")"
fi
app_end

# --- native: dp_native_spin named from its debug file (debuglink, build id), [stripped] without one
# native_case NAME DIR: the profile of Program.Native calling DIR/libdpnative.so into $W/NAME.folded
native_case() {
	if ! app "$1" native "$2/libdpnative.so"; then
		fail "native/$1" "the console app (native) did not start or attach: $(tail -3 "$W/$1.out")"
		return 1
	fi
	prof "$1.folded" "durationSeconds=3"
	app_end
}
for d in dl bid; do
	native_case "$d" "$W/$d" || continue
	s=$(stacks leaf "$W/$d.folded" '^libdpnative\.so!dp_native_spin$')
	u=$(stacks under "$W/$d.folded" '^libdpnative\.so!dp_native_spin$' '^libdpnative\.so!dp_native_run$' 'Program\.Native$')
	WHY="$CODE; leaf libdpnative.so!dp_native_spin in $s %, over dp_native_run over Program.Native in $u % (want > 50 both); $(top_stacks "$d.folded" 2)"
	[ $d = dl ] && name=native/debuglink-named || name=native/build-id-named
	check "$name" eval "at_least '$s' 50 && at_least '$u' 50"
done
if native_case none "$W/none"; then
	s=$(stacks leaf "$W/none.folded" '^libdpnative\.so!\[stripped\]$')
	n=$(stacks has "$W/none.folded" 'dp_native_spin')
	e=$(stacks under "$W/none.folded" '^libdpnative\.so!\[stripped\]$' '^libdpnative\.so!dp_native_run$' 'Program\.Native$')
	WHY="$CODE; leaf libdpnative.so![stripped] in $s % (want > 50), dp_native_spin in $n % (want 0), under the exported dp_native_run (.dynsym) under Program.Native in $e % (want > 50); $(top_stacks none.folded 2)"
	check native/no-debug-file-stripped eval "at_least '$s' 50 && at_least '$e' 50 && [ '$n' = 0.0 ]"
fi

# --- side by side with Debian's perf, and perfscript against folded: the mix (known shares of CPU time),
# JIT code named for perf too (the perf map, and no W^X double mapping, which perf cannot read); no tiered
# compilation, so that each method's code is the same from the first round to the last. The agent's
# profiles start as soon as perf has opened its events: the three cover the same 10 s, give or take a few
# ms, so that the shares differ by where each sampled, not by when.
APPENV=(DOTNET_PerfMapEnabled=1 DOTNET_EnableWriteXorExecute=0 DOTNET_TieredCompilation=0)
if app mix mix "$W/full/libdpnative.so"; then
	sleep 1 # time passing: the mix has run a while (its methods jitted, named in the perf map) before it is recorded
	"$PERF" record -N -e cpu-clock -F 99 -g -p "$APID" -o "$W/mix.data" -- sleep 10 > "$W/perf-record.out" 2>&1 &
	PR=$!
	for _ in $(seq 1 500); do find "/proc/$PR/fd" -lname 'anon_inode:*perf_event*' 2> /dev/null | grep -q . && break; sleep 0.01; done
	curl -s -o "$W/mix.folded" -w '%{http_code}' \
		"$U/trace?pid=$APID&engine=perf&event=cpu-clock&frequency=99&durationSeconds=10&format=folded" > "$W/mix.code" &
	P1=$!
	CODE2=$(curl -s -o "$W/mix.perfscript" -w '%{http_code}' \
		"$U/trace?pid=$APID&engine=perf&frequency=99&durationSeconds=10&format=perfscript")
	wait $P1
	CODE1=$(cat "$W/mix.code")
	wait $PR
	prc=$?
	"$PERF" script -i "$W/mix.data" > "$W/mix.perf.txt" 2> "$W/perf-script.err"
	src=$?
	app_end
	"$PY" "$COLLAPSE" --samples "$W/mix.perf.txt" > "$W/mix.perf.folded" 2> "$W/collapse.err"
	n=$(stacks check "$W/mix.perf.folded")
	WHY="perf record exit $prc $(tail -2 "$W/perf-record.out"); perf script exit $src $(head -c 200 "$W/perf-script.err"); folded: $n $(head -c 200 "$W/collapse.err")"
	check sidebyside/perf-recorded eval "[ $prc = 0 ] && [ $src = 0 ] && [ ! -s '$W/collapse.err' ] && at_least '${n%% *}' 100"
	stacks compare "$W/mix.folded" ours "$W/mix.perf.folded" perf --top 5 --tol 5 > "$W/sidebyside.txt"
	rc=$?
	echo "side by side, the agent (engine=perf) and Debian's perf on pid $APID for 10 s:"
	sed 's/^/  /' "$W/sidebyside.txt"
	WHY="the agent's answer $CODE1; $(cat "$W/sidebyside.txt")"
	check sidebyside/same-top5 test "$CODE1:$rc" = 200:0
	# perfscript: stackcollapse-perf's reading of it against the folded profile taken at the same time
	"$PY" "$COLLAPSE" --samples --no-pname "$W/mix.perfscript" > "$W/mix.ps.folded" 2> "$W/ps-collapse.err"
	rc=$?
	hdr=$(head -1 "$W/mix.perfscript")
	blocks=$(grep -c ' cpu-clock: $' "$W/mix.perfscript")
	WHY="$CODE2; collapse exit $rc $(head -c 300 "$W/ps-collapse.err"); header '$hdr', $blocks samples written"
	check formats/perfscript-reads bash -c "[ $CODE2 = 200 ] && [ $rc = 0 ] && [[ '$hdr' =~ ^#\ diagport\ .*\ ([0-9]+)\ samples,\ ([0-9]+)\ written\ here ]] && [ \${BASH_REMATCH[2]} = $blocks ] && [ $blocks -gt 100 ]"
	stacks compare "$W/mix.folded" ours "$W/mix.ps.folded" perf --top 5 --tol 5 --total-tol 10 > "$W/ps-vs-folded.txt"
	rc=$?
	echo "format=perfscript (folded by perf_collapse.py) against format=folded, taken at the same time:"
	sed 's/^/  /' "$W/ps-vs-folded.txt"
	WHY="$(cat "$W/ps-vs-folded.txt")"
	check formats/perfscript-same-as-folded test "$rc" = 0
else
	fail sidebyside/app "the console app (mix) did not start or attach: $(tail -3 "$W/mix.out")"
fi
app_end

WHY="$(tail -3 "$W/agent.log")"
check agent/alive kill -0 "$AG"
