#!/usr/bin/env bash
# dump_judge.sh - dotnet-dump (build/tools/dotnet-dump, scripts/prereqs.sh test) as the judge of every dump the
# agent serves: Mini, Triage, WithHeap and Full, downloaded (the default transport: staged and followed) and
# egressed (a FileSystem provider), each opened with
#   dotnet-dump analyze CORE -c clrthreads -c "clrstack -all" -c "dumpheap -stat" -c exit
# and set beside `dotnet-dump collect --type T` taken on the same process just before. Two apps:
# (dotnet-dump calls WithHeap "Heap".)
#   launched/*  the console app started by the agent (diagport launch -- dotnet console.dll sleep N), both root;
#               its main thread sleeps in DiagportTestConsole.Program.Main
#   xuid/*      the webapp running as nobody (65534), attached to an agent running as uid 1654; WAITERS threads
#               blocked in LockContention.Wait, HEAP_MB MB held in LeakedBuffer objects
# Per dump and way (get = downloaded, egress = the provider's file):
#   T-WAY/opens      dotnet-dump reads it (exit 0, the runtime found: clrthreads prints ThreadCount)
#   T-WAY/threads    its ThreadCount equals that of the tool's dump (launched: within 1; xuid: within 2, as
#                    thread-pool threads start and retire between the two dumps)
#   T-WAY/frame      the known frame is on a managed stack (xuid: on every waiter's)
#   T-WAY/heap       WithHeap and Full: dumpheap -stat's total objects and bytes within 2 % of the tool's dump
#                    of the same type (xuid: and the same count of LeakedBuffer objects);
#                    Mini and Triage: no heap to speak of, in ours as in the tool's own (under 1 MiB of objects,
#                    none of those the app holds: seen here, nothing at all, or in a webapp's Mini dump 14
#                    objects of 400 bytes that happened to lie in memory the dump keeps; the dumps hold
#                    threads, stacks and modules)
#   T-egress/op      the operation Succeeded, its file in the provider's directory, nothing else left there
set -u
cd "$(dirname "$0")/../.."
T_NAME=dump-judge
. tests/lib.sh
agent_setup dumpjudge
DD=$PWD/build/tools/dotnet-dump/dotnet-dump
[ -x "$DD" ] || bash scripts/prereqs.sh test > "$W/prereqs.log" 2>&1
[ -x "$DD" ] || { fail prereqs "no $DD after scripts/prereqs.sh test: $(tail -3 "$W/prereqs.log")"; exit 0; }
build_apps
HEAP_MB=64
WAITERS=4

# analyze CORE OUT: dotnet-dump's reading of CORE into OUT; its exit status
analyze() { "$DD" analyze "$1" -c clrthreads -c "clrstack -all" -c "dumpheap -stat" -c exit > "$2" 2>&1; }
threads_of() { sed -n 's/^ThreadCount: *\([0-9]*\)$/\1/p' "$1"; }
total_of() { sed -n 's/^Total \([0-9,]*\) objects, \([0-9,]*\) bytes$/\1 \2/p' "$1" | tr -d ,; }
count_of() { awk -v t="$2" '$NF == t {gsub(",", "", $2); print $2}' "$1"; }
within() { awk -v a="$1" -v b="$2" -v p="$3" 'BEGIN {d = a - b; if (d < 0) d = -d; exit !(a > 0 && b > 0 && d <= p / 100 * b)}'; }

# judge PREFIX TYPE WAY CORE REF FRAME MINFRAMES THREAD_SLACK: the checks above on CORE against the tool's
# reading REF
judge() {
	local p=$1/$2-$3 core=$4 ref=$5 frame=$6 min=$7 slack=$8 out=$W/an.$1.$2.$3 rc n t0 t1 o0 b0 o1 b1 c0 c1
	analyze "$core" "$out"; rc=$?
	t1=$(threads_of "$out"); t0=$(threads_of "$ref")
	WHY="dotnet-dump exit $rc, $(stat -c %s "$core" 2>/dev/null) bytes: $(grep -m2 -i 'error\|fail\|not' "$out")"
	check "$p/opens" test "$rc" = 0 -a -n "$t1"
	WHY="ThreadCount ${t1:-none}, the tool's dump ${t0:-none} (slack $slack)"
	check "$p/threads" bash -c "[ -n '$t1' ] && [ -n '$t0' ] && [ \$(( $t1 - $t0 )) -le $slack ] && [ \$(( $t0 - $t1 )) -le $slack ]"
	n=$(grep -c -- "$frame" "$out")
	WHY="$n frames '$frame' (want $min): $(grep -m3 -- ' Call Site\|Program\|Thread' "$out" | tr '\n' '|')"
	check "$p/frame" test "$n" -ge "$min"
	read -r o1 b1 <<< "$(total_of "$out")"; read -r o0 b0 <<< "$(total_of "$ref")"
	c1=$(count_of "$out" LeakedBuffer); c0=$(count_of "$ref" LeakedBuffer)
	case $2 in
	Mini | Triage)
		WHY="a $2 dump: ours ${o1:-no} objects ${b1:-0} bytes (LeakedBuffer ${c1:-none}), the tool's ${o0:-no} ${b0:-0} (${c0:-none})"
		check "$p/heap" bash -c "[ ${b1:-0} -lt 1048576 ] && [ ${b0:-0} -lt 1048576 ] && [ -z '$c1' ]" ;;
	*)
		WHY="ours ${o1:-?} objects ${b1:-?} bytes (LeakedBuffer ${c1:-none}), the tool's ${o0:-?} ${b0:-?} (${c0:-none})"
		check "$p/heap" bash -c "within '${o1:-0}' '${o0:-0}' 2 && within '${b1:-0}' '${b0:-0}' 2 && [ '${c1:-x}' = '${c0:-x}' ]" ;;
	esac
}
export -f within

# judge_all PREFIX URL DIR FRAME MINFRAMES SLACK APP_PID OUTDIR [CURL ARGS]: every type, downloaded and egressed,
# beside the tool's dump of the same type written into DIR
judge_all() {
	local pre=$1 url=$2 dir=$3 frame=$4 min=$5 slack=$6 apid=$7 outdir=$8 t c art
	shift 8
	for t in Mini Triage WithHeap Full; do
		rm -f "$dir/tool.core"
		"$DD" collect -p "$apid" --type "${t/WithHeap/Heap}" -o "$dir/tool.core" > "$W/collect.out" 2>&1
		analyze "$dir/tool.core" "$W/ref.$pre.$t"
		WHY="$(tail -2 "$W/collect.out")"; check "$pre/$t-tool-collect" test -n "$(threads_of "$W/ref.$pre.$t")"
		rm -f "$dir/tool.core"
		c=$(curl -s "$@" -D "$W/hdr" -o "$W/core" -w '%{http_code}' "$url/dump?pid=$apid&type=$t")
		WHY="http $c, $(file -b "$W/core" | head -c 60)"; check "$pre/$t-get/200" test "$c" = 200
		judge "$pre" "$t" get "$W/core" "$W/ref.$pre.$t" "$frame" "$min" "$slack"
		rm -f "$W/core"
		U=$url egressed "eg.$pre.$t" "$url/dump?pid=$apid&type=$t&egressProvider=out" "$@"
		art=$(jq -r '.resourceLocation // empty' "$W/eg.$pre.$t-op.json")
		WHY="$CODE $(cat "$W/eg.$pre.$t-op.json"); in $outdir: $(ls -A "$outdir")"
		check "$pre/$t-egress/op" bash -c "[ $CODE = 202 ] && jq -e '.status == \"Succeeded\"' '$W/eg.$pre.$t-op.json' > /dev/null && [ \"\$(ls -A '$outdir')\" = '$(basename "${art:-none}")' ]"
		[ -f "$art" ] && judge "$pre" "$t" egress "$art" "$W/ref.$pre.$t" "$frame" "$min" "$slack"
		rm -f "$outdir"/core_*
	done
}

# --- launched: the console app as the agent's child, both root
AGENT_OUT=$W/app.out start_agent --no-metrics -- dotnet "$PWD/$B/apps/console/console.dll" sleep 600
wait_for "$W/agent.log" '"event":"attached"' 30 || { fail launched/attach "$(tail -3 "$W/agent.log")"; exit 0; }
CPID=$(curl -s "$U/processes" | jq '.[0].pid')
judge_all launched "$U" "$W/dumps" DiagportTestConsole.Program.Main 1 1 "$CPID" "$W/out"
WHY="left: $(ls -A "$W/dumps")"; check launched/nothing-left test "$(ls -A "$W/dumps")" = port

# --- xuid: the webapp as nobody (65534), the agent as uid 1654
mkdir -m 0777 "$W/fy" "$W/fy/out" "$W/fy/home"
printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/fy/out\n' "$W" > "$W/fy.yaml"
setpriv --reuid 1654 --regid 1654 --clear-groups "$D" launch --no-metrics --config "$W/fy.yaml" --socket "$W/fy/port" \
	--dumps "$W/fy" --urls http://127.0.0.1:0 2> "$W/agent2.log" & AG2=$!; PIDS+=($AG2)
P2=$(listening_port "$W/agent2.log" urls 30 "$AG2") || { fail xuid/agent-start "the agent did not start" "$W/agent2.log"; exit 0; }
U2=http://127.0.0.1:$P2
DOTNET_DiagnosticPorts=$W/fy/port,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:0 HOME=$W/fy/home \
	setpriv --reuid 65534 --regid 65534 --clear-groups dotnet "$PWD/$B/apps/webapp/webapp.dll" > "$W/web.out" 2>&1 & PIDS+=($!)
wait_for "$W/web.out" READY 30 || { fail xuid/start "$(tail -3 "$W/web.out")"; exit 0; }
WPID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/web.out")
AP=$(sed -n 's/^LISTENING http:.*:\([0-9]*\)$/\1/p' "$W/web.out" | head -1)
wait_for "$W/agent2.log" "\"event\":\"attached\",\"pid\":$WPID" 15 || { fail xuid/attach "$(tail -3 "$W/agent2.log")"; exit 0; }
curl -s "http://127.0.0.1:$AP/blocking-threads?count=$WAITERS&seconds=600" > /dev/null
held=$(curl -s "http://127.0.0.1:$AP/memory-leak?mb=$HEAP_MB")
WHY="app uid $(awk '/^Uid/ {print $2}' /proc/"$WPID"/status), agent uid $(ps -o uid= -p "$AG2"), held '$held'"
check xuid/setup bash -c "[ \"\$(awk '/^Uid/ {print \$2}' /proc/$WPID/status)\" = 65534 ] && [ '$held' -ge $HEAP_MB ]"
judge_all xuid "$U2" "$W/fy" "LockContention.Wait" "$WAITERS" 2 "$WPID" "$W/fy/out"
WHY="left: $(ls -A "$W/fy")"; check xuid/nothing-left test "$(ls -A "$W/fy" | grep -v -x -e port -e out -e home | wc -l)" = 0
exit 0
