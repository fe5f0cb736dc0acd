#!/usr/bin/env bash
# bench/rules.sh - collection rules (issue 20): what evaluating them costs the agent, and how soon an action
# follows a threshold crossed. Measures and prints; never gates.
#   cpu      two agents side by side in one run, both attached to the same 4 webapps (each app's
#            DOTNET_DiagnosticPorts names both sockets), counters every second: the reference with no rules,
#            and the same agent with 20 rules (19 counter triggers that never fire, over System.Runtime's
#            counters and the CPUUsage/GCHeapSize/ThreadpoolQueueLength shortcuts, and the latency rule below):
#            80 rule instances. Each agent's CPU over SECONDS (utime + stime from /proc/PID/stat, its egress
#            process included) as a share of one core, and its VmRSS.
#   latency  the rule GCHeapSize > 100 MB, SlidingWindowDuration 1 s, ActionCount 1, CollectStacks: each app in
#            turn is made to retain 150 MiB at once (/memory-leak); from that request's end (the heap is over the
#            threshold; it crossed it during the request, whose duration is printed) to the agent's rule-triggered
#            and rule-action-started log lines. dotnet-monitor counts the first reading over the threshold for
#            its whole interval (EventCounterTriggerImpl), so a 1 s window at 1 s counters is satisfied by that
#            first reading: the floor is the wait for the next reading, 0 to 1 s.
# Runs alone after `make`. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: SECONDS_EACH (60), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
SECS=${SECONDS_EACH:-60}
APPS=4
W=$(mktemp -d /tmp/dp-bench-rules.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
for t in curl jq; do command -v "$t" > /dev/null || die "$t not found"; done
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"

# --- the settings: the reference has the egress provider only; the other adds 20 rules
mkdir -p -m 0777 "$W/out" "$W/ref" "$W/rules"
printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/out\n' "$W" > "$W/ref.yaml"
{
  cat "$W/ref.yaml"
  echo 'CollectionRules:'
  n=0
  # rule NAME TRIGGER-YAML: a rule that collects stacks when its trigger fires
  rule() {
    printf '  %s:\n    Trigger: %s\n    Actions:\n      - {Type: CollectStacks, Settings: {Egress: out}}\n' "$1" "$2"
    n=$((n + 1))
  }
  for c in cpu-usage working-set gc-heap-size gen-0-gc-count gen-1-gc-count gen-2-gc-count threadpool-thread-count \
    monitor-lock-contention-count threadpool-queue-length threadpool-completed-items-count alloc-rate assembly-count \
    exception-count time-in-gc gen-0-size loh-size; do
    rule "never-$c" "{Type: EventCounter, Settings: {ProviderName: System.Runtime, CounterName: $c, GreaterThan: 1e15, SlidingWindowDuration: \"00:00:10\"}}"
  done
  rule never-cpu "{Type: CPUUsage, Settings: {GreaterThan: 99.9, SlidingWindowDuration: \"00:00:10\"}}"
  rule never-heap "{Type: GCHeapSize, Settings: {GreaterThan: 100000}}"
  rule never-queue "{Type: ThreadpoolQueueLength, Settings: {GreaterThan: 1000000}}"
  printf '  LeakLatency:\n    Trigger: {Type: GCHeapSize, Settings: {GreaterThan: 100, SlidingWindowDuration: "00:00:01"}}\n'
  printf '    Actions:\n      - {Type: CollectStacks, Settings: {Egress: out}}\n    Limits: {ActionCount: 1}\n'
  n=$((n + 1))
  [ "$n" = 20 ] || echo "rules: $n, not 20" >&2
} > "$W/rules.yaml"

# --- two agents, four webapps attached to both
agent() { # agent NAME: AG_NAME, U_NAME
  local p
  p=$(free_port)
  "$D" launch --config "$W/$1.yaml" --socket "$W/$1/port" --dumps "$W/$1" --urls "http://127.0.0.1:$p" --no-auth \
    --metrics-interval 1 --metrics-start-delay 5 2> "$W/$1.log" &
  PIDS+=($!)
  eval "AG_$1=$! U_$1=http://127.0.0.1:$p"
}
agent ref
agent rules
for _ in $(seq 1 100); do grep -q '"listening"' "$W/ref.log" && grep -q '"listening"' "$W/rules.log" && break; sleep 0.05; done
grep -q '"listening"' "$W/rules.log" || die "the agent with rules did not start: $(head -c 400 "$W/rules.log")"
APIDS=() AURLS=()
for i in $(seq 1 $APPS); do
  ap=$(free_port)
  DOTNET_DiagnosticPorts="$W/ref/port,connect,nosuspend;$W/rules/port,connect,nosuspend" \
    ASPNETCORE_URLS=http://127.0.0.1:$ap dotnet "$B/apps/webapp/webapp.dll" > "$W/app$i.out" 2>&1 &
  PIDS+=($!)
  AURLS+=("http://127.0.0.1:$ap")
  for _ in $(seq 1 300); do grep -q READY "$W/app$i.out" && break; sleep 0.1; done
  APIDS+=("$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app$i.out")")
done
# both agents read every app's counters, the rules are on all of them
series() { curl -s "$1/metrics" | grep -c '^systemruntime_working_set_bytes{pid='; }
for _ in $(seq 1 300); do
  [ "$(series "$U_ref")" = $APPS ] && [ "$(series "$U_rules")" = $APPS ] &&
    [ "$(grep -c '"event":"rule-started"' "$W/rules.log")" = $((20 * APPS)) ] && break
  sleep 0.1
done
[ "$(grep -c '"event":"rule-started"' "$W/rules.log")" = $((20 * APPS)) ] ||
  die "$(grep -c '"event":"rule-started"' "$W/rules.log") rule instances started, not $((20 * APPS)): $(tail -3 "$W/rules.log")"
[ "$(series "$U_ref")$(series "$U_rules")" = "$APPS$APPS" ] || die "counters of $(series "$U_ref")/$(series "$U_rules") apps, not $APPS"
sleep 5

# family PID: PID and its children (the egress process)
family() { echo "$1" $(awk -v pp="$1" '$4 == pp {print $1}' /proc/[0-9]*/stat 2> /dev/null); }
# ticks PID: utime + stime of the family, in clock ticks (threads that ended included)
ticks() {
  local t=0 p
  for p in $(family "$1"); do t=$((t + $(awk '{print $14 + $15}' "/proc/$p/stat" 2> /dev/null || echo 0))); done
  echo $t
}
# ns PID: the family's threads' time on a CPU, in ns (schedstat: finer than ticks; a thread that ends takes its
# time with it, and none should end here: no rule fires in this phase)
ns() {
  local t=0 p f x
  for p in $(family "$1"); do
    for f in /proc/"$p"/task/*/schedstat; do read -r x _ < "$f" 2> /dev/null && t=$((t + x)); done
  done
  echo $t
}
HZ=$(getconf CLK_TCK)
echo "diagport $(cat VERSION); $(nproc) CPUs; $APPS webapps ($(dotnet --list-runtimes | awk '/NETCore.App/ {print $2}' | tail -1)); counters every 1 s"
echo "command: DIAGPORT=$D SECONDS_EACH=$SECS bash bench/rules.sh"
echo "load average before: $(cut -d' ' -f1-3 /proc/loadavg) (other work on the machine shows here and in the figures)"
r0=$(ticks "$AG_ref") s0=$(ticks "$AG_rules") rn0=$(ns "$AG_ref") sn0=$(ns "$AG_rules") t0=$(date +%s.%N)
sleep "$SECS"
r1=$(ticks "$AG_ref") s1=$(ticks "$AG_rules") rn1=$(ns "$AG_ref") sn1=$(ns "$AG_rules") t1=$(date +%s.%N)
trig=$(grep -c '"event":"rule-triggered"' "$W/rules.log")
printf '%-22s %6s %10s %22s %24s %10s\n' agent rules instances 'cpu % (utime+stime)' 'cpu % (schedstat ns)' 'VmRSS kB'
for who in ref rules; do
  if [ $who = ref ]; then a=$r0 b=$r1 na=$rn0 nb=$rn1 p=$AG_ref nr=0; else a=$s0 b=$s1 na=$sn0 nb=$sn1 p=$AG_rules nr=20; fi
  printf '%-22s %6s %10s %22s %24s %10s\n' "$([ $who = ref ] && echo 'reference (no rules)' || echo 'with rules')" $nr $((nr * APPS)) \
    "$(awk -v a="$a" -v b="$b" -v s="$t0" -v e="$t1" -v hz="$HZ" 'BEGIN {printf "%.3f (%d ticks)", (b - a) / hz / (e - s) * 100, b - a}')" \
    "$(awk -v a="$na" -v b="$nb" -v s="$t0" -v e="$t1" 'BEGIN {printf "%.3f (%.0f ms)", (b - a) / 1e9 / (e - s) * 100, (b - a) / 1e6}')" \
    "$(awk '/^VmRSS/ {print $2}' "/proc/$p/status")"
done
echo "over $(awk -v s="$t0" -v e="$t1" 'BEGIN {printf "%.1f", e - s}') s (one tick = 1/$HZ s); rules triggered meanwhile: $trig (0 expected)"

# --- latency: threshold crossed -> rule-triggered -> rule-action-started
# evt EVENT PID: the rules agent's first such line for LeakLatency and that pid, its time in epoch seconds
evt() {
  jq -R -r --arg e "$1" --argjson p "$2" 'fromjson? | select(.event == $e and .rule == "LeakLatency" and .pid == $p) | .time' \
    "$W/rules.log" | head -1 | jq -R -r '(sub("\\.[0-9]+Z$"; "Z") | fromdateiso8601) + (capture("\\.(?<f>[0-9]+)Z$").f | "0." + . | tonumber)'
}
echo
echo "latency: GCHeapSize > 100 MB over a 1 s window, 1 s counters; 150 MiB retained at once, timed from the request's end"
printf '%-6s %8s %12s %18s %22s %18s\n' app pid 'request ms' 'to triggered ms' 'triggered to action ms' 'to action ms'
: > "$W/lat.txt"
for i in $(seq 0 $((APPS - 1))); do
  p=${APIDS[$i]}
  ts=$(date +%s.%N)
  curl -s "${AURLS[$i]}/memory-leak?mb=150" > /dev/null
  tc=$(date +%s.%N)
  for _ in $(seq 1 200); do [ -n "$(evt rule-action-started "$p")" ] && break; sleep 0.05; done
  tt=$(evt rule-triggered "$p")
  ta=$(evt rule-action-started "$p")
  if [ -z "$ta" ]; then
    printf '%-6s %8s %18s\n' $((i + 1)) "$p" 'no action within 10 s'
    continue
  fi
  awk -v c="$tc" -v t="$tt" -v a="$ta" 'BEGIN {printf "%.0f %.0f %.0f\n", (t - c) * 1000, (a - t) * 1000, (a - c) * 1000}' >> "$W/lat.txt"
  read -r x y z < <(tail -1 "$W/lat.txt")
  printf '%-6s %8s %12s %18s %22s %18s\n' $((i + 1)) "$p" "$(awk -v s="$ts" -v c="$tc" 'BEGIN {printf "%.0f", (c - s) * 1000}')" "$x" "$y" "$z"
  sleep 1.3 # a different phase of the 1 s counters for the next app
done
sort -n -k3 "$W/lat.txt" | awk '{v[NR] = $3} END {if (NR) printf "to action: min %d ms, median %d ms, max %d ms (%d samples)\n", v[1], v[int((NR + 1) / 2)], v[NR], NR}'
