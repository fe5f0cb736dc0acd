#!/usr/bin/env bash
# bench/metrics.sh - /metrics scrapes (issue 5): measures and prints; never gates.
#   The agent keeps the counters of the webapp (EventCounters and the System.Runtime and ASP.NET Core
#   meters, every second) while wrk scrapes /metrics over one keep-alive connection for SECONDS, side by
#   side in one run with nginx serving the same bytes as a static file (the floor: no work per request);
#   latency percentiles from wrk --latency, and the agent's CPU per scrape from /proc (which includes
#   the counters sessions' own work during the run). The body is the real set of a web app that served
#   a few routes (its size is printed).
# Runs alone after `make` and `scripts/prereqs.sh bench`. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: SECONDS_EACH (10), ROUNDS (3), DIAGPORT, BUILD.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
B=${BUILD:-build}
D=${DIAGPORT:-./diagport}
SECS=${SECONDS_EACH:-10}
ROUNDS=${ROUNDS:-3}
W=$(mktemp -d /tmp/dp-bench-metrics.XXXXXX)
. bench/lib.sh
trap bench_cleanup EXIT
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

[ -x "$D" ] || die "$D not found: run make first"
for t in wrk nginx curl; do command -v "$t" > /dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/build.log")"

P=$(free_port); U=http://127.0.0.1:$P
DOTNETMONITOR_GlobalCounter__IntervalSeconds=1 "$D" launch --socket "$W/port" --urls "$U" --dumps "$W" --no-auth \
	2> "$W/agent.log" & AG=$!; PIDS+=("$AG")
AP=$(free_port)
DOTNET_DiagnosticPorts=$W/port,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:$AP dotnet "$B/apps/webapp/webapp.dll" \
	> "$W/app.out" 2>&1 & PIDS+=($!)
for _ in $(seq 1 300); do grep -q READY "$W/app.out" && curl -s "$U/processes" | grep -q pid && break; sleep 0.1; done
curl -s "$U/processes" | grep -q pid || die "the webapp did not attach: $(tail -3 "$W/app.out")"
# some traffic so that ASP.NET Core's meters have series (a histogram per route) too
for r in / /pid /gc "/log?count=1" "/memory-leak?mb=8"; do curl -s "http://127.0.0.1:$AP$r" > /dev/null; done
for _ in $(seq 1 300); do curl -s "$U/metrics" | grep -q http_server_request_duration && break; sleep 0.1; done
curl -s "$U/metrics" > "$W/metrics.txt"
[ -s "$W/metrics.txt" ] || die "no metrics"

# nginx: the same bytes as a static file
mkdir -p "$W/nginx/tmp" "$W/www"
cp "$W/metrics.txt" "$W/www/metrics"
NP=$(free_port)
cat > "$W/nginx.conf" <<EOF
worker_processes 1;
daemon off;
pid $W/nginx/nginx.pid;
error_log $W/nginx/error.log;
events { worker_connections 64; }
http {
	access_log off;
	client_body_temp_path $W/nginx/tmp; proxy_temp_path $W/nginx/tmp; fastcgi_temp_path $W/nginx/tmp;
	uwsgi_temp_path $W/nginx/tmp; scgi_temp_path $W/nginx/tmp;
	keepalive_requests 1000000;
	server { listen 127.0.0.1:$NP; root $W/www; default_type text/plain; }
}
EOF
nginx -p "$W/nginx" -e "$W/nginx/error.log" -c "$W/nginx.conf" & PIDS+=($!)
for _ in $(seq 1 50); do curl -s "http://127.0.0.1:$NP/metrics" > /dev/null && break; sleep 0.1; done

ticks() { awk '{print $14 + $15}' "/proc/$AG/stat"; }
HZ=$(getconf CLK_TCK)
echo "diagport $(cat VERSION); $(nginx -v 2>&1 | sed 's/^nginx version: //'); $(wrk -v 2>&1 | head -1 | cut -d' ' -f1-2)"
echo "body: $(wc -c < "$W/metrics.txt") bytes, $(grep -c '^# TYPE' "$W/metrics.txt") families, $(grep -vc '^#' "$W/metrics.txt") samples"
echo "wrk -t1 -c1 -d${SECS}s --latency, one keep-alive connection, $ROUNDS rounds each, alternating"
printf '%-8s %-6s %10s %9s %9s %9s %9s %12s\n' server round req/s p50_ms p90_ms p99_ms max_ms cpu_us/req
for r in $(seq 1 "$ROUNDS"); do
	for who in agent nginx; do
		if [ "$who" = agent ]; then url="$U/metrics"; else url="http://127.0.0.1:$NP/metrics"; fi
		t0=$(ticks)
		wrk -t1 -c1 -d"${SECS}s" --latency "$url" > "$W/wrk.txt" 2>&1
		t1=$(ticks)
		rps=$(awk '/^Requests\/sec/ {print $2}' "$W/wrk.txt")
		reqs=$(awk '/requests in/ {print $1}' "$W/wrk.txt")
		ms() { awk -v p="$1" '$1 == p {v = $2; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) sub(/ms$/, "", v); else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; print v}' "$W/wrk.txt"; }
		max=$(awk '/Latency/ && !/Distribution/ {v = $4; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) sub(/ms$/, "", v); else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; print v}' "$W/wrk.txt")
		cpu=-
		[ "$who" = agent ] && cpu=$(awk -v a="$t0" -v b="$t1" -v hz="$HZ" -v n="$reqs" 'BEGIN {printf "%.1f", (b - a) / hz / n * 1e6}')
		printf '%-8s %-6s %10s %9s %9s %9s %9s %12s\n' "$who" "$r" "$rps" "$(ms 50%)" "$(ms 90%)" "$(ms 99%)" "$max" "$cpu"
	done
done
echo "agent VmRSS after: $(awk '/^VmRSS/ {print $2, $3}' "/proc/$AG/status"), VmHWM: $(awk '/^VmHWM/ {print $2, $3}' "/proc/$AG/status")"
