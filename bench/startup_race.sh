#!/usr/bin/env bash
# bench/startup_race.sh - the counters session against app startup: measures and prints; never gates.
#   Enabling the System.Runtime counters while an app's startup code first runs the thread pool's or
#   FrameworkEventSource's class constructor can deadlock the app inside the runtime (dotnet/runtime
#   #118014, #105682, #119014). The agent therefore starts its counters session metricsStartDelay
#   seconds after a runtime attaches. This script starts the webapp N times, one after another, on
#   two cores kept busy by LOAD spinning shells (startup is slow on a busy node, so the window is
#   wide), and counts the starts that never printed READY within 20 s, once with DELAY_A and once
#   with DELAY_B seconds of delay. With a delay, each app is kept until its session has run (the delay
#   plus 2 s) and must still answer HTTP then.
# Runs alone after `make`. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: N (40), LOAD (3), DELAY_A (0), DELAY_B (10, the default), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
N=${N:-40}
LOAD=${LOAD:-3}
W=$(mktemp -d /tmp/dp-bench-race.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"

# round DELAY: prints "delay=DELAY hung=H answered=A of N"
round() {
	local delay=$1 hung=0 answered=0 p u ap app i
	p=$(free_port); u=http://127.0.0.1:$p
	"$D" launch --socket "$W/port$delay" --urls "$u" --dumps "$W" --no-auth --metrics-interval 1 \
		--metrics-start-delay "$delay" 2> "$W/agent$delay.log" & local ag=$!
	for _ in $(seq 1 100); do curl -s "$u/processes" > /dev/null && break; sleep 0.1; done
	for i in $(seq 1 "$N"); do
		ap=$(free_port)
		DOTNET_DiagnosticPorts=$W/port$delay,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:$ap \
			dotnet "$B/apps/webapp/webapp.dll" > "$W/app.out" 2>&1 & app=$!
		if wait_for "$W/app.out" READY 20; then
			if [ "$delay" -gt 0 ]; then
				sleep $((delay + 2))
				curl -s -m 5 "http://127.0.0.1:$ap/pid" > /dev/null && answered=$((answered + 1))
			fi
		else
			hung=$((hung + 1))
		fi
		kill -9 "$app" 2> /dev/null; wait "$app" 2> /dev/null
	done
	kill "$ag"; wait "$ag" 2> /dev/null
	echo "delay=$delay hung=$hung answered=$answered of $N"
}

for _ in $(seq 1 "$LOAD"); do sh -c 'while :; do :; done' & PIDS+=($!); done
echo "webapp starts under $LOAD spinning shells on $(nproc) cores; counters every 1 s"
round "${DELAY_A:-0}"
round "${DELAY_B:-10}"
