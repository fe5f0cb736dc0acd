#!/usr/bin/env bash
# bench/exceptions.sh - the exception history and crash shipping (issue 35's Performance). Measures and prints;
# never gates.
#   history  an app throwing RATE rounds a second (tests/apps/console `throwwork RATE THREADS`: each round two
#            exceptions, an inner one caught and rethrown wrapped, then caught; the default 5,000 rounds = 10,000
#            exceptions a second) beside THREADS threads of counted CPU work (one per core by default, so the
#            machine is full and whatever the throwing or the agent costs comes out of the work). RUNS pairs of
#            runs, one agent with the history on (the default) and one with --no-exceptions, the order reversing
#            each pair; a new agent and app each run. Over SECONDS_EACH after WARM seconds: the app's work
#            rate (units a second, by the app's own clock and count: its WORK lines), the rounds a second it
#            reached, the CPU its throwing thread (the main thread) spent per round, the agent's CPU as a share
#            of one core (utime + stime from /proc/PID/stat, and the threads' schedstat), its VmRSS once the
#            history is full and before anything has asked for it (no names tables yet), and, with the history
#            on, how many of the exceptions thrown reached it (the ids of /exceptions' newest entries, asked
#            just before and after the window, against the round numbers in their messages).
#   pinned   the same two at once, each agent and its app pinned to a core of their own (taskset; one work
#            thread each), the cores swapped each pair: the machine's other work (it is shared) falls on both
#            alike, where runs one after the other each meet different load.
#   crash    a webapp (tests/apps/webapp) with the crash settings the injector gives an app and a 48 MiB GC heap
#            limit, made to die of an unhandled OutOfMemoryException on a background thread (/leak-start): the
#            runtime writes a Mini dump (~16 MB here) and its crash report into the agent's dumps directory; the
#            agent (Crashes: {Egress: out}, a FileSystem provider) records and ships both. From createdump's
#            "Dump successfully written" line (the app's output, stamped as it is read) to the agent's
#            "crash" and "crash-shipped" log lines. CRASHES crashes, one agent.
# Runs alone after `make` (it builds the test apps). Figures go to docs/BENCHMARKS.md by hand.
# Knobs: RATE (5000), THREADS (nproc), RUNS (4 pairs), SECONDS_EACH (30), WARM (5), CRASHES (5), PARTS
# ("history pinned crash"), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
RATE=${RATE:-5000}
THREADS=${THREADS:-$(nproc)}
RUNS=${RUNS:-4}
SECS=${SECONDS_EACH:-30}
WARM=${WARM:-5}
CRASHES=${CRASHES:-5}
PARTS=${PARTS:-history pinned crash}
W=$(mktemp -d /tmp/dp-bench-exc.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
for t in curl jq python3; do command -v "$t" > /dev/null || die "$t not found"; done
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"
HZ=$(getconf CLK_TCK)
echo "diagport $(cat VERSION) ($(git rev-parse --short HEAD 2> /dev/null)); $(nproc) CPUs; .NET $(dotnet --list-runtimes | awk '/NETCore.App/ {print $2}' | tail -1)"
echo "command: RATE=$RATE THREADS=$THREADS RUNS=$RUNS SECONDS_EACH=$SECS WARM=$WARM CRASHES=$CRASHES PARTS='$PARTS' bash bench/exceptions.sh"
echo "$(load) (the machine is shared: other work shows in the figures)"

# start_agent NAME [ARGS]: an agent in $W/NAME (socket NAME/port, dumps there), its log $W/NAME.log; AG, U
start_agent() {
	local n=$1 p
	shift
	mkdir -p -m 0777 "$W/$n" "$W/out"
	printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/out\n' "$W" > "$W/$n.yaml"
	[ "$n" = crash ] && printf 'Crashes:\n  Egress: out\n' >> "$W/$n.yaml"
	: > "$W/$n.log"
	"$D" launch --config "$W/$n.yaml" --socket "$W/$n/port" --dumps "$W/$n" --urls http://127.0.0.1:0 --no-auth \
		"$@" 2> "$W/$n.log" &
	AG=$!
	PIDS+=("$AG")
	p=$(listening_port "$W/$n.log" urls 30 "$AG") || die "the agent did not start: $(head -c 600 "$W/$n.log")"
	U=http://127.0.0.1:$p
}
# family PID: PID and its children (the egress process)
family() { echo "$1" $(awk -v pp="$1" '$4 == pp {print $1}' /proc/[0-9]*/stat 2> /dev/null); }
ticks() { # utime + stime of the family, in clock ticks
	local t=0 p
	for p in $(family "$1"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2> /dev/null || echo 0))); done
	echo $t
}
ns() { # the family's threads' time on a CPU, in ns (schedstat)
	local t=0 p f x
	for p in $(family "$1"); do
		for f in /proc/"$p"/task/*/schedstat; do read -r x _ < "$f" 2> /dev/null && t=$((t + x)); done
	done
	echo $t
}
# appns PID: "MAIN WORK OTHER", the app's threads' time on a CPU in ns: its main thread (the throwing one), its work
# threads, and every other thread (the runtime's own: the EventPipe session's writer among them)
appns() {
	local f x m=0 w=0 o=0 t c
	for f in /proc/"$1"/task/*; do
		read -r x _ < "$f/schedstat" 2> /dev/null || continue
		t=${f##*/} c=$(cat "$f/comm" 2> /dev/null)
		if [ "$t" = "$1" ]; then m=$((m + x)); elif [ "$c" = work ]; then w=$((w + x)); else o=$((o + x)); fi
	done
	echo "$m $w $o"
}
rss() { awk -v k="$2:" '$1 == k {print $2}' "/proc/$1/status"; }
# newest URL: "ID ROUND" of the newest exception in the agent's history (the round from its message), "0 0" when none
newest() {
	curl -s -m 30 "$1/exceptions" 2> /dev/null | jq -r -s '(map(select(.id != null)) | max_by(.id)) //
		{id: 0, message: "x 0"} | "\(.id) \(.message | split(" ")[1])"' 2> /dev/null || echo "0 0"
}

# history_run OUT SPEC...: runs at once, one per SPEC (MODE:INDEX:CPU: on or off, the run's number, the CPU its agent
# and app are pinned to, - for none), each a new agent and app; their figures lines of OUT
history_run() {
	local out=$1 spec i k c t0 t1 hz=$HZ threads pin
	local -A mode cpu app apid ag url l0 l1 a0 a1 n0 n1 m0 m1 w0 w1 o0 o1 ida ka idb kb rss0 rss1 hwm
	local -a ix=()
	shift
	for spec in "$@"; do
		IFS=: read -r k i c <<< "$spec"
		ix+=("$i") mode[$i]=$k cpu[$i]=$c
		pin=() threads=$THREADS
		[ "$c" != - ] && pin=(taskset -c "$c") threads=1
		if [ "$k" = on ]; then start_agent "h$i"; else start_agent "h$i" --no-exceptions; fi
		ag[$i]=$AG url[$i]=$U
		[ "$c" != - ] && taskset -a -p -c "$c" "$AG" > /dev/null
		DOTNET_DiagnosticPorts="$W/h$i/port,connect,nosuspend" "${pin[@]}" dotnet "$B/apps/console/console.dll" \
			throwwork "$RATE" "$threads" > "$W/app$i.out" 2>&1 &
		app[$i]=$!
		PIDS+=("$!")
	done
	for i in "${ix[@]}"; do
		wait_for "$W/app$i.out" READY 30 || die "the app did not start: $(head -c 400 "$W/app$i.out")"
		apid[$i]=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app$i.out")
		wait_for "$W/h$i.log" '"event":"attached"' 15 || die "the app did not attach: $(tail -3 "$W/h$i.log")"
		if [ "${mode[$i]}" = on ]; then
			wait_for "$W/h$i.log" '"event":"exceptions-session"' 15 || die "no exceptions session: $(tail -3 "$W/h$i.log")"
		fi
	done
	sleep "$WARM"
	for i in "${ix[@]}"; do
		rss0[$i]=$(rss "${ag[$i]}" VmRSS)
		read -r "ida[$i]" "ka[$i]" < <(newest "${url[$i]}")
	done
	t0=$(date +%s.%N)
	for i in "${ix[@]}"; do
		l0[$i]=$(wc -l < "$W/app$i.out") a0[$i]=$(ticks "${ag[$i]}") n0[$i]=$(ns "${ag[$i]}")
		read -r "m0[$i]" "w0[$i]" "o0[$i]" < <(appns "${apid[$i]}")
	done
	sleep "$SECS"
	for i in "${ix[@]}"; do
		read -r "m1[$i]" "w1[$i]" "o1[$i]" < <(appns "${apid[$i]}")
		l1[$i]=$(wc -l < "$W/app$i.out") a1[$i]=$(ticks "${ag[$i]}") n1[$i]=$(ns "${ag[$i]}")
		rss1[$i]=$(rss "${ag[$i]}" VmRSS)
	done
	t1=$(date +%s.%N)
	for i in "${ix[@]}"; do
		read -r "idb[$i]" "kb[$i]" < <(newest "${url[$i]}")
		hwm[$i]=$(rss "${ag[$i]}" VmHWM)
	done
	for i in "${ix[@]}"; do
		# the app's WORK lines written within the window: the first and the last, by its own clock
		sed -n "$((l0[$i] + 1)),${l1[$i]}p" "$W/app$i.out" | awk -v mode="${mode[$i]}" -v i="$i" -v cpu="${cpu[$i]}" \
			-v t0="$t0" -v t1="$t1" -v a0="${a0[$i]}" -v a1="${a1[$i]}" -v n0="${n0[$i]}" -v n1="${n1[$i]}" -v hz="$hz" \
			-v m0="${m0[$i]}" -v m1="${m1[$i]}" -v w0="${w0[$i]}" -v w1="${w1[$i]}" -v o0="${o0[$i]}" -v o1="${o1[$i]}" \
			-v ida="${ida[$i]}" -v ka="${ka[$i]}" -v idb="${idb[$i]}" -v kb="${kb[$i]}" \
			-v rss0="${rss0[$i]}" -v rss1="${rss1[$i]}" -v hwm="${hwm[$i]}" '
			$1 == "WORK" { if (!n) { ms0 = $2; u0 = $3; r0 = $4 } ms1 = $2; u1 = $3; r1 = $4; n++ }
			END {
				s = (ms1 - ms0) / 1000; w = t1 - t0
				recv = (mode == "on" && kb > ka) ? sprintf("%.4f", (idb - ida) / (2 * (kb - ka))) : "-"
				printf "%s %d %.0f %.1f %.2f %.3f %.3f %d %d %d %s %.1f %.1f %.1f %s\n", mode, i, (u1 - u0) / s,
					(r1 - r0) / s, (m1 - m0) / 1000 / (r1 - r0), (a1 - a0) / hz / w * 100, (n1 - n0) / 1e9 / w * 100,
					rss0, rss1, hwm, recv, (m1 - m0) / 1e9 / w * 100, (w1 - w0) / 1e9 / w * 100, (o1 - o0) / 1e9 / w * 100, cpu
			}' >> "$out"
	done
	for i in "${ix[@]}"; do kill "${app[$i]}" "${ag[$i]}" 2> /dev/null; done
	for i in "${ix[@]}"; do wait "${app[$i]}" "${ag[$i]}" 2> /dev/null; done
}

# report FILE: the runs' lines, each mode's median [min max], the work rate on/off within each pair
report() {
	printf '%-4s %3s %3s %12s %9s %13s %12s %13s %8s %8s %8s %9s %7s %7s %7s\n' mode run cpu 'work units/s' rounds/s \
		'us/round thr' 'agent % tick' 'agent % sched' 'RSS kB' 'RSS@end' 'HWM kB' received 'main %' 'work %' 'other %'
	sort -k2n "$1" | while read -r mo ix wk rd us ct cs r0 r1 hw rc pm pw po cp; do
		printf '%-4s %3s %3s %12s %9s %13s %12s %13s %8s %8s %8s %9s %7s %7s %7s\n' "$mo" "$ix" "$cp" "$wk" "$rd" "$us" "$ct" "$cs" \
			"$r0" "$r1" "$hw" "$rc" "$pm" "$pw" "$po"
	done
	echo "(us/round thr: the main thread's CPU per round; main/work/other %: the app's threads' CPU, share of one core;"
	echo " RSS: the agent's VmRSS before any /exceptions, RSS@end after one, HWM its peak after two)"
	echo "median [min max] per mode:"
	for m in off on; do
		line="  $m:"
		for c in 3:work 4:rounds/s 5:us/round 6:agent%tick 7:agent%sched 8:RSS 10:HWM 12:main% 13:work% 14:other%; do
			line+=" ${c#*:} $(awk -v m="$m" -v k="${c%%:*}" '$1 == m {print $k}' "$1" | stat3 |
				awk '{printf "%s [%s %s]", $1, $2, $3}');"
		done
		echo "$line"
	done
	awk '{v[$1, int($2 / 2)] = $3} END {for (p = 0; v["off", p] != ""; p++) print v["on", p] / v["off", p]}' "$1" |
		stat3 | awk '{printf "work rate on/off, same pair: median %.3f [%.3f %.3f]\n", $1, $2, $3}'
}

if [[ " $PARTS " == *" history "* ]]; then
	echo
	echo "history, one after the other: throwwork $RATE (= $((RATE * 2)) exceptions/s) $THREADS work threads; $RUNS pairs," \
		"${SECS} s windows after ${WARM} s"
	: > "$W/history.txt"
	for ((r = 0; r < RUNS; r++)); do
		if ((r % 2 == 0)); then order="off on"; else order="on off"; fi
		for m in $order; do history_run "$W/history.txt" "$m:$((r * 2 + ${#m} - 2)):-"; done
		echo "  pair $((r + 1)) done; $(load)"
	done
	report "$W/history.txt"
fi
# at once, each pinned to a core of its own (agent and app), the cores swapped each pair: the machine's other work
# falls on both alike
if [[ " $PARTS " == *" pinned "* ]]; then
	echo
	echo "history, at once, pinned: throwwork $RATE 1 per core, on and off side by side; $RUNS pairs, ${SECS} s windows"
	: > "$W/pinned.txt"
	for ((r = 0; r < RUNS; r++)); do
		history_run "$W/pinned.txt" "on:$((r * 2)):$((r % 2))" "off:$((r * 2 + 1)):$((1 - r % 2))"
		echo "  pair $((r + 1)) done; $(load)"
	done
	report "$W/pinned.txt"
fi

# --- crashes: dump written -> crash recorded -> report and dump shipped
iso_s() { jq -R -r 'sub("\\.[0-9]+Z$"; "Z") as $s | ($s | fromdateiso8601) + (capture("\\.(?<f>[0-9]+)Z$").f | "0." + . | tonumber)' <<< "$1"; }
if [[ " $PARTS " == *" crash "* ]]; then
	echo
	echo "crash: webapp, DOTNET_GCHeapHardLimit=0x3000000, /leak-start?mbPerSecond=64: an unhandled OutOfMemoryException"
	start_agent crash
	: > "$W/crash.txt"
	for ((c = 1; c <= CRASHES; c++)); do
		# every line of the app's output stamped with the time it was read
		(DOTNET_DiagnosticPorts="$W/crash/port,connect,nosuspend" DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=1 \
			DOTNET_DbgMiniDumpName="$W/crash/crash-%p-%t-%e.dmp" DOTNET_EnableCrashReport=1 \
			DOTNET_GCHeapHardLimit=0x3000000 ASPNETCORE_URLS=http://127.0.0.1:0 \
			exec dotnet "$B/apps/webapp/webapp.dll" 2>&1 | python3 -u -c '
import sys, time
for l in sys.stdin:
    sys.stdout.write("%.6f %s" % (time.time(), l))' > "$W/crash$c.out") 2> /dev/null & # (not bash's "Aborted")
		sp=$!
		PIDS+=("$sp")
		wait_for "$W/crash$c.out" READY 60 || die "the webapp did not start: $(head -c 400 "$W/crash$c.out")"
		apid=$(sed -n 's/^[0-9.]* READY \([0-9]*\)$/\1/p' "$W/crash$c.out")
		url=$(sed -n 's/^[0-9.]* LISTENING //p' "$W/crash$c.out" | head -1)
		eventually 15 grep -q "\"event\":\"attached\",\"pid\":$apid," "$W/crash.log" || die "the webapp did not attach"
		sleep 1
		curl -s "$url/leak-start?mbPerSecond=64&seconds=5" > /dev/null
		wait_for "$W/crash$c.out" 'Dump successfully written' 30 || die "no dump: $(tail -5 "$W/crash$c.out")"
		eventually 30 bash -c "[ \$(grep -c '\"event\":\"crash-shipped\".*crash-$apid-.*\\.dmp\"' '$W/crash.log') = 1 ]" ||
			die "the dump was not shipped: $(grep crash "$W/crash.log" | tail -3)"
		tw=$(awk '/Dump successfully written/ {print $1; exit}' "$W/crash$c.out")
		bytes=$(sed -n 's/.*Written \([0-9]*\) bytes.*/\1/p' "$W/crash$c.out")
		shipped=$(stat -c %s "$W"/out/crash-"$apid"-*.dmp)
		tdet=$(jq -R -r --argjson p "$apid" 'fromjson? | select(.event == "detached" and .pid == $p) | .time' "$W/crash.log")
		trec=$(jq -R -r --argjson p "$apid" 'fromjson? | select(.event == "crash" and .pid == $p) | .time' "$W/crash.log")
		trep=$(jq -R -r --arg f "crash-$apid-" 'fromjson? | select(.event == "crash-shipped" and (.file | contains($f)) and (.file | endswith(".json"))) | .time' "$W/crash.log")
		tdmp=$(jq -R -r --arg f "crash-$apid-" 'fromjson? | select(.event == "crash-shipped" and (.file | contains($f)) and (.file | endswith(".dmp"))) | .time' "$W/crash.log")
		awk -v c="$c" -v b="$bytes" -v s="$shipped" -v w="$tw" -v d="$(iso_s "$tdet")" -v r="$(iso_s "$trec")" \
			-v j="$(iso_s "$trep")" -v m="$(iso_s "$tdmp")" 'BEGIN {
			printf "%d %d %d %.0f %.0f %.0f %.0f\n", c, b, s, (d - w) * 1000, (r - w) * 1000, (j - w) * 1000, (m - w) * 1000 }' >> "$W/crash.txt"
		wait "$sp" 2> /dev/null
	done
	printf '%-5s %12s %12s %12s %12s %18s %16s\n' crash 'dump bytes' shipped 'detached ms' 'recorded ms' 'report shipped ms' 'dump shipped ms'
	while read -r c b s d r j m; do printf '%-5s %12s %12s %12s %12s %18s %16s\n' "$c" "$b" "$s" "$d" "$r" "$j" "$m"; done < "$W/crash.txt"
	echo "(each from createdump's 'Dump successfully written' line)"
	awk '{print $7}' "$W/crash.txt" | stat3 | awk '{printf "dump written to dump shipped: median %s ms, min %s, max %s\n", $1, $2, $3}'
fi
echo "$(load)"
