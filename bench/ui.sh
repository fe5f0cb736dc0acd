#!/usr/bin/env bash
# bench/ui.sh - `diagport ui`'s benchmark (issue 36). Measures and prints; never gates.
# Issue 36's targets: "The page lists 200 processes (static targets) and stays responsive (first render and a
# capture started under 500 ms on loopback); a 50 MB CPU profile's flame graph renders in under 2 s; `ui` itself
# under 20 MiB RSS with 200 targets." In one run, each figure beside its reference:
#   1. 200 targets: NAPPS real .NET apps (tests/apps/console `sleep`), each with its own diagnostic socket, and
#      NAGENTS agents (`diagport launch --connect-dir`, no token, no counters or exceptions sessions), agent i
#      attached to app i mod NAPPS through a symbolic link to its socket: NAGENTS targets, one process each.
#      - `diagport ps --targets-file F -o json --parallel 16`, the same listing on the command line: wall time and
#        peak RSS (/usr/bin/time -v), ROUNDS times (the reference for ui's RSS and for its first list);
#      - `diagport ui --targets-file F --parallel 16`: the time until it prints its URL (its first list made),
#        and its VmHWM after the page has loaded and the list was refreshed REFRESHES times (every 10 s).
#   2. the page, in Debian's Chromium driven by playwright-core (bench/ui_page.mjs): the bytes the browser
#      loads; the first render (navigation to the table showing all NAGENTS rows), ROUNDS times; a capture
#      started (the "CPU profile" button pressed to the capture listed as running), ROUNDS times.
#   3. a 50 MB folded CPU profile (synthetic, deterministic: PROFILE_MB, deep stacks of many distinct frames)
#      drawn by the page's own flame graph (flame.js, loaded in the page: parse, lay out, draw, the first frame
#      painted) beside speedscope (the npm package's viewer, served from loopback) opening the same file (its
#      title says the file once loaded), ROUNDS times each.
# Runs alone after `make` (it builds the apps with tests/apps/build.sh and needs tests/validate/node_modules:
# `scripts/prereqs.sh test`). Figures go to docs/BENCHMARKS.md ("diagport ui") by hand.
# Knobs: NAPPS (10), NAGENTS (200), ROUNDS (5), REFRESHES (3), PROFILE_MB (50), DIAGPORT (./diagport), BUILD (build).
set -uo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
D=$(realpath "${DIAGPORT:-./diagport}")
NAPPS=${NAPPS:-10}
NAGENTS=${NAGENTS:-200}
ROUNDS=${ROUNDS:-5}
REFRESHES=${REFRESHES:-3}
PROFILE_MB=${PROFILE_MB:-50}
W=$(mktemp -d /tmp/dp-bench-ui.XXXXXX)
chmod 755 "$W"
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
[ -d tests/validate/node_modules/playwright-core ] || die "no playwright-core: run scripts/prereqs.sh test first"

echo "== machine: $(nproc) cores, $(free -g | awk '/^Mem:/{print $2}') GiB; $(date -u '+%F %H:%M UTC');" \
	"code $(git rev-parse --short HEAD 2>/dev/null)$(git diff --quiet HEAD 2>/dev/null || echo '+changes'); $(load)"
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "the apps did not build: $(tail -3 "$W/build.log")"

# ---- NAPPS apps, NAGENTS agents ----
for i in $(seq 0 $((NAPPS - 1))); do
	mkdir -p "$W/app$i"
	TMPDIR=$W/app$i dotnet "$B/apps/console/console.dll" sleep 3600 > "$W/app$i.out" 2>&1 &
	PIDS+=($!)
done
for i in $(seq 0 $((NAPPS - 1))); do
	for _ in $(seq 1 300); do compgen -G "$W/app$i/dotnet-diagnostic-*-socket" > /dev/null && break; sleep 0.1; done
	compgen -G "$W/app$i/dotnet-diagnostic-*-socket" > /dev/null || die "app $i made no diagnostic socket"
done
: > "$W/targets"
for j in $(seq 1 "$NAGENTS"); do
	mkdir -p "$W/c$j"
	ln -s "$(compgen -G "$W/app$((j % NAPPS))/dotnet-diagnostic-*-socket")" "$W/c$j/"
	p=$(free_port)
	"$D" launch --socket "$W/c$j/port" --connect-dir "$W/c$j" --urls "http://127.0.0.1:$p" --no-auth --no-metrics \
		--no-exceptions --dumps "$W/c$j" 2> "$W/c$j/agent.log" &
	PIDS+=($!)
	echo "http://127.0.0.1:$p name=pod-$j workload=app-$((j % NAPPS))" >> "$W/targets"
done
for j in $(seq 1 "$NAGENTS"); do
	u=$(awk -v n="$j" 'NR == n {print $1}' "$W/targets")
	for _ in $(seq 1 200); do curl -s "$u/processes" 2>/dev/null | grep -q '"pid"' && break; sleep 0.05; done
	curl -s "$u/processes" | grep -q '"pid"' || die "agent $j lists no process: $(tail -2 "$W/c$j/agent.log")"
done
echo "== $NAPPS apps, $NAGENTS agents attached (one process each); $(load)"

# ---- 1. ps beside ui ----
for r in $(seq 1 "$ROUNDS"); do
	/usr/bin/time -v "$D" ps --targets-file "$W/targets" -o json --parallel 16 > "$W/ps.json" 2> "$W/ps.time"
	n=$(jq '[.items[].processes[]] | length' "$W/ps.json")
	[ "$n" = "$NAGENTS" ] || die "ps listed $n processes, not $NAGENTS"
	awk -F': ' '/Elapsed/ {split($2, t, ":"); printf "%.3f ", t[1] * 60 + t[2]} /Maximum resident/ {print $2}' "$W/ps.time"
done > "$W/ps.fig"
echo "ps -o json, $NAGENTS targets: wall s (median min max) $(cut -d' ' -f1 "$W/ps.fig" | stat3);" \
	"peak RSS KiB $(cut -d' ' -f2 "$W/ps.fig" | stat3)"

t0=$(date +%s.%N)
TMPDIR=$W "$D" ui --targets-file "$W/targets" --parallel 16 > "$W/ui.out" 2> "$W/ui.err" &
UI=$!
PIDS+=($UI)
wait_for "$W/ui.out" 'secret=' 120 || die "ui printed no URL: $(tail -3 "$W/ui.err")"
echo "ui: URL printed (its first list of $NAGENTS targets made) after $(echo "$(date +%s.%N) - $t0" | bc | xargs printf '%.2f') s"
URL=$(grep -o 'http://127.0.0.1:[0-9]*/?secret=[0-9a-f]*' "$W/ui.out")

# ---- 2. and 3. in the browser ----
head -c 0 /dev/null > "$W/page.json"
node bench/ui_page.mjs "$URL" "$NAGENTS" "$ROUNDS" "$PROFILE_MB" "$W" > "$W/page.json" 2> "$W/page.err" ||
	die "the browser part failed: $(tail -5 "$W/page.err")"
jq -r '"page weight: \(.weight.bytes) bytes in \(.weight.requests) requests (\(.weight.files | to_entries | map("\(.key) \(.value)") | join(", ")))",
	"first render, \(.rows) rows: ms (median min max) \(.firstRender | sort | "\(.[length/2|floor]) \(.[0]) \(.[-1])")",
	"capture started (button to running row): ms \(.captureStarted | sort | "\(.[length/2|floor]) \(.[0]) \(.[-1])")",
	"flame graph of a \(.profileMB) MB profile (\(.profileLines) lines, \(.profileFrames) distinct frames): page ms \(.flame | sort | "\(.[length/2|floor]) \(.[0]) \(.[-1])") (parse \(.flameParse | sort | .[length/2|floor]) ms)",
	"speedscope, the same file: ms \(.speedscope | sort | "\(.[length/2|floor]) \(.[0]) \(.[-1])")"' "$W/page.json"

# ui's memory once the page has used it and the list has been made REFRESHES more times
for _ in $(seq 1 $((REFRESHES * 10 + 2))); do sleep 1; done
echo "ui: VmHWM $(awk '/VmHWM/{print $2, $3}' "/proc/$UI/status"), VmRSS $(awk '/VmRSS/{print $2, $3}' "/proc/$UI/status")" \
	"after the page and $REFRESHES refreshes of $NAGENTS targets"
echo "== $(load)"
