#!/usr/bin/env bash
# agent_limits.sh - the agent under slow, idle and hostile clients (issue 15),
# with a real .NET app attached and the default counters session running:
# 500 connections that send nothing, trickle a head a byte at a time, park a
# 30 KiB head or a body sent a byte at a time, or fire complete requests they
# never read, from one address, from the probes' own address or each from an
# address of its own (tests/integration/slow_clients.py). Throughout, /healthz
# (no token) and /processes (with the token) are asked every 0.2 s on new
# connections: every answer must come (the defect was no answer at all: the
# slots were all held), well inside a wide margin, and the agent's RSS stays
# under 16 MiB. Then the knobs: the head deadline gives 408 (settable), the
# cap per address closes that address's oldest connections (settable).
# bench/agent_attack.sh records the figures against the issue's 100 ms. Last, a killed app leaves
# /processes within 1 s.
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-limits
. tests/lib.sh
agent_setup limits
build_apps
APP="$B/apps/console/console.dll"
S=$W/port
printf 'limits-token-0123456789\n' > "$W/token"
"$D" launch --socket "$S" --dumps "$W" --urls http://127.0.0.1:0 --auth-token-file "$W/token" \
	--request-headers-timeout 3 --max-connections-per-peer 50 2> "$W/agent.log" &
AG=$!; PIDS+=($AG)
P=$(listening_port "$W/agent.log" urls 10 "$AG") || { fail setup "the agent did not start: $(tail -3 "$W/agent.log")"; exit 0; }
DOTNET_DiagnosticPorts=$S,connect,nosuspend dotnet "$APP" > "$W/app.out" 2>&1 & PIDS+=($!)
wait_for "$W/app.out" READY 15
wait_for "$W/agent.log" '"event":"attached"' 10 || { fail attached "$(tail -3 "$W/agent.log")"; exit 0; }

attack() { python3 tests/integration/slow_clients.py "$P" "$1" "$2" "$3" --token limits-token-0123456789 --pid "$AG" --src "$4"; }
# every probe answered (200), the slowest well under a second (the target, 100 ms, is measured in bench/), RSS < 16 MiB
OK='.n_failed == 0 and .healthz_ms[0] < 500 and .processes_ms[0] < 500 and .rss_peak_kib > 0 and .rss_peak_kib < 16384'
for c in "idle 127.0.0.2" "trickle 127.0.0.2" "trickle 127.0.0.1" "trickle many" "bighead many" "slowbody many" \
	"flood 127.0.0.2"; do
	read -r mode src <<< "$c"
	r=$(attack 500 "$mode" 4 "$src")
	WHY="$r"; check "$mode-from-${src/127.0.0./}" jq -e "$OK" <<< "$r"
	# a body is read only with the token: the slow uploads are refused unread (401), holding no memory
	[ "$mode" = slowbody ] && { WHY="$r"; check slowbody-refused-unread jq -e '(.answers["401"] // 0) > 400' <<< "$r"; }
done
# one address holds at most 50 (--max-connections-per-peer): its oldest are closed for its newest
r=$(attack 100 idle 1.5 127.0.0.3)
WHY="$r"; check per-peer-cap jq -e '.closed_by_server == 50' <<< "$r"
# a head trickled a byte every 0.3 s gets 408 at the 3 s deadline (--request-headers-timeout), not never
r=$(python3 tests/integration/http_raw.py "$P" headtimeout)
WHY="got '$r'"; check head-deadline-408 bash -c "read st secs <<< '$r'; [ \"\$st\" = 408 ] && awk -v s=\"\$secs\" 'BEGIN{exit !(s > 2.5 && s < 6)}'"
WHY="$(tail -3 "$W/agent.log")"; check still-serving test "$(curl -s -o /dev/null -w '%{http_code}' -H 'Authorization: Bearer limits-token-0123456789' "http://127.0.0.1:$P/processes")" = 200
# a killed app leaves /processes at once (its idle connection hangs up), not after the 3 s grace a
# runtime between connections gets: within 1 s (checked with a margin); the counters session is running
APID=$(curl -s -H 'Authorization: Bearer limits-token-0123456789' "http://127.0.0.1:$P/processes" | jq -r '.[0].pid')
kill -9 "$APID"; wait "$APID" 2> /dev/null
t0=$(date +%s%N)
for _ in $(seq 1 150); do
	[ "$(curl -s -H 'Authorization: Bearer limits-token-0123456789' "http://127.0.0.1:$P/processes" | jq length)" = 0 ] && break
	sleep 0.02
done
ms=$((($(date +%s%N) - t0) / 1000000))
WHY="still listed after $ms ms"; check dead-app-gone-within-1s test "$ms" -lt 1500
