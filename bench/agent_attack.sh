#!/usr/bin/env bash
# bench/agent_attack.sh NAME=BINARY ... - agents side by side under slow and idle clients (issue 15).
# Each binary runs `diagport launch` with a token and a real .NET app attached (its counters session
# on, as in production); for each attack (tests/integration/slow_clients.py: N connections of a mode
# from one address, from the probes' own address, or each from its own), every agent in turn is
# attacked for ATTACK_S seconds while /healthz (no token) and /processes (token) are asked every 0.2 s on new
# connections and the agent's VmRSS is sampled. Prints, per agent and attack: the slowest and the
# median answer of each, how many probes got no 200, and the peak RSS. Then each agent's idle RSS
# and exec-to-ready time (bench/ready_probe.c). Measures and prints; never gates.
# Knobs: N (500), ATTACK_S (10), READY_RUNS (30).
# Example: git worktree add /tmp/before a5f7423 && make -C /tmp/before &&
#          bench/agent_attack.sh before=/tmp/before/diagport after=./diagport
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
N=${N:-500}
ATTACK_S=${ATTACK_S:-10}
READY_RUNS=${READY_RUNS:-30}
W=$(mktemp -d /tmp/dp-bench-attack.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
[ $# -ge 1 ] || die "usage: bench/agent_attack.sh NAME=BINARY [NAME=BINARY ...]"
mkdir -p "$B/bench"
cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -Ibench -o "$B/bench/ready_probe" bench/ready_probe.c || die "cannot build bench/ready_probe.c"
bash tests/apps/build.sh "$B/apps" > "$W/apps.log" 2>&1 || die "cannot build the test apps: $(tail -3 "$W/apps.log")"
printf 'attack-token-0123456789\n' > "$W/token"

NAMES=() PORTS=() APIDS=()
for spec in "$@"; do
	name=${spec%%=*} bin=${spec#*=}
	[ -x "$bin" ] || die "$bin is not an executable"
	port=$(free_port)
	mkdir -p "$W/$name"
	"$bin" launch --socket "$W/$name/port" --dumps "$W/$name" --urls "http://127.0.0.1:$port" \
		--auth-token-file "$W/token" 2> "$W/$name/agent.log" &
	APIDS+=($!) PIDS+=($!) NAMES+=("$name") PORTS+=("$port")
	DOTNET_DiagnosticPorts=$W/$name/port,connect,nosuspend dotnet "$B/apps/console/console.dll" > "$W/$name/app.out" 2>&1 &
	PIDS+=($!)
	wait_for "$W/$name/agent.log" '"event":"attached"' 20 || die "$name: no runtime attached: $(tail -2 "$W/$name/agent.log")"
done
n=${#NAMES[@]}
echo "== agents under attack: $(date -u +%FT%TZ), $(nproc) cores, $(git rev-parse --short HEAD 2>/dev/null), N=$N, ${ATTACK_S} s each"
for spec in "$@"; do echo "   $spec"; done
printf '\n%-8s %-22s %17s %17s %10s %9s %s\n' agent attack "healthz max/p50" "processes max/p50" "no 200" "RSS peak" "closed by agent"
for c in "idle 127.0.0.2" "trickle 127.0.0.2" "trickle 127.0.0.1" "trickle many" "bighead many" "slowbody many" \
	"flood 127.0.0.2"; do
	read -r mode src <<< "$c"
	for i in $(seq 0 $((n - 1))); do
		r=$(python3 tests/integration/slow_clients.py "${PORTS[$i]}" "$N" "$mode" "$ATTACK_S" --token attack-token-0123456789 \
			--pid "${APIDS[$i]}" --src "$src")
		jq -r --arg a "${NAMES[$i]}" --arg m "$mode from $src" '[$a, $m,
			"\(.healthz_ms[0] // "-") / \(.healthz_ms[1] // "-") ms", "\(.processes_ms[0] // "-") / \(.processes_ms[1] // "-") ms",
			"\(.n_failed) of \(.probes)", "\(.rss_peak_kib) KiB", "\(.closed_by_server) of \(.opened)"] |
			"\(.[0])\t\(.[1])\t\(.[2])\t\(.[3])\t\(.[4])\t\(.[5])\t\(.[6])"' <<< "$r" |
			awk -F'\t' '{printf "%-8s %-22s %17s %17s %10s %9s %s\n", $1, $2, $3, $4, $5, $6, $7}'
		sleep 12 # the previous attack's connections time out (the old build: its idle timeout)
	done
done
echo; echo "== idle (app attached, after the attacks): VmRSS"
for i in $(seq 0 $((n - 1))); do echo "   ${NAMES[$i]}: $(awk '/VmRSS/ {print $2, $3}' "/proc/${APIDS[$i]}/status")"; done
echo; echo "== exec to ready (socket accepts and /healthz answers), $READY_RUNS runs each (bench/ready_probe.c)"
for spec in "$@"; do
	name=${spec%%=*} bin=${spec#*=} port=$(free_port)
	echo "   $name: $("$B/bench/ready_probe" -n "$READY_RUNS" -u "$W/$name/r.sock" -p "$port" -- "$bin" launch --no-metrics \
		--socket "$W/$name/r.sock" --urls "http://127.0.0.1:$port" --no-auth 2>/dev/null | tail -1)"
done
