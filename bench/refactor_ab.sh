#!/usr/bin/env bash
# bench/refactor_ab.sh [BEFORE [AFTER]] - two commits' builds side by side in one run (issue 34's
# "performance unchanged"): measures and prints; never gates.
# Each commit is exported (git archive) into a temporary directory and built there (make diagport,
# and its own bench/bench_inject.c against its own libdiagport.a); the .NET test apps are built once
# (tests/apps/build.sh into BUILD/apps) and shared. Then ROUNDS rounds; in each, every figure is
# taken for both builds one after the other, the order reversing by round (A B, B A, ...) so that
# drift on a shared machine falls on both alike:
#   ready       exec to ready: the Unix socket accepts and GET /healthz answers (bench/ready_probe.c,
#               READY_RUNS runs a round; the round's median)
#   idle RSS    VmRSS of a fresh agent 1 s after /healthz first answered, no runtime attached
#   dump        Full dump delivery rate: body bytes / (request to last byte), one GET through the HTTP
#               API (bench/dump_client.c, file transport), of a console app holding HEAP_MB MiB
#               (`console.dll tick`), attached to a long-lived agent of each build; DUMPS a round
#   /metrics    wrk -t1 -c1 --latency for METRICS_S s on /metrics of a second long-lived agent of each
#               build, the webapp attached (counters every second, as bench/metrics.sh); p50 and p99, and
#               the agent's CPU time per scrape (its counters sessions' work in the window included)
#   webhook     wrk -t2 -c16 -s bench/webhook_post.lua for WRK_S s per stream against a long-lived
#               `diagport webhook` of each build (bench/webhook_lib.sh's keys and streams): the typical
#               pod's replicas (answer cache) and the 1,500-env pod, every pod new (full reviews);
#               requests/s and the webhook's CPU time per request (/proc/PID/stat)
#   inject      bench_inject on tests/golden/k8s/env-1500/input.yaml, INJECT_N iterations a round
#               (in-process parse + inject + render; the round's median)
# Prints one table: per figure the median over all samples of each build [min-max], after/before, and
# in how many same-round pairs the after build's figure was the higher (about half when nothing changed).
# Runs alone after `make` and `scripts/prereqs.sh bench` (wrk); about 5 min of builds, then about
# 1 min a round. Figures go to docs/BENCHMARKS.md by hand.
# Knobs: ROUNDS (6), READY_RUNS (10), DUMPS (2), HEAP_MB (128), METRICS_S (4), WRK_S (4),
#        INJECT_N (200), FIGURES ("ready rss dump metrics webhook inject": which to take), BUILD (build);
#        BEFORE and AFTER as arguments or variables (3acfdc6, HEAD).
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
BEFORE=${1:-${BEFORE:-3acfdc6}}
AFTER=${2:-${AFTER:-HEAD}}
ROUNDS=${ROUNDS:-6}
READY_RUNS=${READY_RUNS:-10}
DUMPS=${DUMPS:-2}
HEAP_MB=${HEAP_MB:-128}
METRICS_S=${METRICS_S:-4}
WRK_S=${WRK_S:-4}
INJECT_N=${INJECT_N:-200}
read -ra FIGURES <<<"${FIGURES:-ready rss dump metrics webhook inject}"
B=${BUILD:-build}
OSSL=/usr/bin/openssl
PY=/usr/bin/python3
W=$(mktemp -d /tmp/dp-bench-refactor.XXXXXX)
. bench/lib.sh
. bench/webhook_lib.sh
IDLE=
# the idle agent of m_rss is not in PIDS: it lives only while it is measured
cleanup() {
	[ -n "$IDLE" ] && kill "$IDLE" 2>/dev/null
	bench_cleanup
}
trap cleanup EXIT
trap 'exit 130' INT TERM
export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1

for t in wrk curl cc make "$OSSL" "$PY"; do command -v "$t" >/dev/null || die "$t not found (scripts/prereqs.sh bench installs it)"; done
SIDES=(a b)
declare -A REV SHA BIN AG AU MG MU AP APP WP WPID
REV[a]=$BEFORE REV[b]=$AFTER
for s in "${SIDES[@]}"; do
	SHA[$s]=$(git rev-parse --short=7 "${REV[$s]}^{commit}" 2>/dev/null) || die "${REV[$s]}: not a commit"
done

# --- the two builds, each in a directory of its own
for s in "${SIDES[@]}"; do
	d=$W/src-$s
	mkdir -p "$d"
	git archive "${SHA[$s]}" | tar -x -C "$d" || die "cannot export ${SHA[$s]}"
	echo "building ${SHA[$s]} in a temporary directory..."
	make -C "$d" -j2 diagport >"$W/make-$s.log" 2>&1 || die "make failed for ${SHA[$s]}: $(tail -5 "$W/make-$s.log")"
	(cd "$d" && cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -Iinjector -Ibench -o build/bench_inject bench/bench_inject.c \
		build/libdiagport.a $(pkg-config --libs jansson yaml-0.1 zlib) -lpthread) >"$W/cc-$s.log" 2>&1 ||
		die "cannot build bench_inject for ${SHA[$s]}: $(tail -5 "$W/cc-$s.log")"
	BIN[$s]=$d/diagport
done
# the measuring tools, once, from this tree
mkdir -p "$W/bin"
for p in ready_probe dump_client; do
	cc -O2 -std=c11 -D_GNU_SOURCE -Wall -Wextra -pthread -Ibench -o "$W/bin/$p" "bench/$p.c" || die "cannot build bench/$p.c"
done
bash tests/apps/build.sh "$B/apps" >"$W/apps.log" 2>&1 || die "cannot build the test apps: $(tail -5 "$W/apps.log")"
webhook_keys
webhook_streams

# wait_url URL [TRIES]: until URL answers 200 (every 10 ms)
wait_url() {
	local i
	for ((i = 0; i < ${2:-500}; i++)); do
		[ "$(curl -s -o /dev/null -w '%{http_code}' "$1")" = 200 ] && return 0
		sleep 0.01
	done
	return 1
}

# has URL PATTERN: URL's body holds PATTERN (not `curl | grep -q`: under pipefail, grep's early exit
# fails curl with SIGPIPE on a large body)
has() { curl -s "$1" >"$W/has.txt" && grep -q -- "$2" "$W/has.txt"; }

# --- per build: an agent with the console app attached (dumps), another with the webapp (/metrics
# serves the default process, which there is only when one runtime is attached), and a webhook
for s in "${SIDES[@]}"; do
	mkdir -p "$W/$s/dumps"
	AU[$s]=http://127.0.0.1:$(free_port)
	MU[$s]=http://127.0.0.1:$(free_port)
	"${BIN[$s]}" launch --socket "$W/$s/port" --dumps "$W/$s/dumps" --urls "${AU[$s]}" --no-auth 2>"$W/$s/agent.log" &
	AG[$s]=$!; PIDS+=($!)
	DOTNETMONITOR_GlobalCounter__IntervalSeconds=1 "${BIN[$s]}" launch --socket "$W/$s/mport" --dumps "$W/$s/dumps" \
		--urls "${MU[$s]}" --no-auth 2>"$W/$s/magent.log" &
	MG[$s]=$!; PIDS+=($!)
	wait_url "${AU[$s]}/healthz" || die "the ${SHA[$s]} agent did not start: $(tail -3 "$W/$s/agent.log")"
	wait_url "${MU[$s]}/healthz" || die "the ${SHA[$s]} agent did not start: $(tail -3 "$W/$s/magent.log")"
	DOTNET_DiagnosticPorts=$W/$s/port,connect,nosuspend dotnet "$B/apps/console/console.dll" tick "$HEAP_MB" 1000 \
		>"$W/$s/console.out" 2>&1 &
	PIDS+=($!)
	AP[$s]=$(free_port)
	DOTNET_DiagnosticPorts=$W/$s/mport,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:${AP[$s]} \
		dotnet "$B/apps/webapp/webapp.dll" >"$W/$s/webapp.out" 2>&1 &
	PIDS+=($!)
	wait_for "$W/$s/console.out" '^READY' 60 || die "the console app did not start: $(tail -3 "$W/$s/console.out")"
	wait_for "$W/$s/webapp.out" READY 60 || die "the webapp did not start: $(tail -3 "$W/$s/webapp.out")"
	APP[$s]=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/$s/console.out")
	for _ in $(seq 1 300); do has "${AU[$s]}/processes" "\"pid\":${APP[$s]}," && break; sleep 0.1; done
	has "${AU[$s]}/processes" "\"pid\":${APP[$s]}," || die "the console app did not attach to ${SHA[$s]}"
	# some traffic, until the counters session has begun, so that ASP.NET Core's meters have series too
	for _ in $(seq 1 300); do
		for r in / /pid "/log?count=1"; do curl -s "http://127.0.0.1:${AP[$s]}$r" >/dev/null; done
		has "${MU[$s]}/metrics" http_server_request_duration && break
		sleep 0.1
	done
	has "${MU[$s]}/metrics" http_server_request_duration || die "no webapp metrics from ${SHA[$s]}"
	WP[$s]=$(free_port)
	"${BIN[$s]}" webhook --listen "127.0.0.1:${WP[$s]}" --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" 2>"$W/$s/webhook.log" &
	WPID[$s]=$!; PIDS+=($!)
	webhook_wait "${WP[$s]}"
done

# rec FIGURE SIDE VALUE: one sample
rec() { echo "$3" >>"$W/fig-$1-$2"; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
HZ=$(getconf CLK_TCK)
# wrk's latency field (us, ms or s) in ms
wrk_ms() { awk -v p="$1" '$1 == p {v = $2; if (v ~ /us$/) {sub(/us$/, "", v); v /= 1000} else if (v ~ /ms$/) sub(/ms$/, "", v);
	else if (v ~ /s$/) {sub(/s$/, "", v); v *= 1000}; print v}' "$2"; }

m_ready() {
	local s=$1 p
	p=$(free_port)
	"$W/bin/ready_probe" -n "$READY_RUNS" -u "$W/$s/ready.sock" -p "$p" -- "${BIN[$s]}" launch --socket "$W/$s/ready.sock" \
		--dumps "$W/$s/dumps" --urls "http://127.0.0.1:$p" --no-auth >"$W/ready.txt" 2>/dev/null
	rec ready "$s" "$(sed -n 's/^summary: .* median \([0-9.]*\) ms.*/\1/p' "$W/ready.txt")"
}
m_rss() {
	local s=$1 p pid
	p=$(free_port)
	"${BIN[$s]}" launch --socket "$W/$s/idle.sock" --dumps "$W/$s/dumps" --urls "http://127.0.0.1:$p" --no-auth 2>"$W/$s/idle.log" &
	pid=$! IDLE=$!
	wait_url "http://127.0.0.1:$p/healthz" || die "the ${SHA[$s]} idle agent did not start: $(tail -3 "$W/$s/idle.log")"
	sleep 1
	rec rss "$s" "$(awk '/^VmRSS/ {print $2}' "/proc/$pid/status")"
	kill "$pid"; wait "$pid" 2>/dev/null
	IDLE=
}
m_dump() {
	local s=$1 i line code bytes complete elf total
	for ((i = 0; i < DUMPS; i++)); do
		line=$("$W/bin/dump_client" -d "$W/$s/dumps" -a "${AG[$s]}" "${AU[$s]#http://127.0.0.1:}" "/dump?pid=${APP[$s]}&type=Full")
		code= bytes= complete= elf= total=
		for kv in $line; do
			case ${kv%%=*} in code | bytes | complete | elf | total) printf -v "${kv%%=*}" %s "${kv#*=}" ;; esac
		done
		[ "$code" = 200 ] && [ "$complete" = 1 ] && [ "$elf" = 1 ] && [ "${bytes:-0}" -ge $((HEAP_MB * 1048576)) ] ||
			die "${SHA[$s]}: not a complete Full dump: $line; agent: $(tail -2 "$W/$s/agent.log")"
		rec dump "$s" "$(awk -v b="$bytes" -v t="$total" 'BEGIN {printf "%.1f", b / t / 1e6}')"
		sleep 0.2
	done
}
m_metrics() {
	local s=$1 t0 t1
	t0=$(ticks "${MG[$s]}")
	wrk -t1 -c1 -d"${METRICS_S}s" --latency "${MU[$s]}/metrics" >"$W/wrk.txt" 2>&1
	t1=$(ticks "${MG[$s]}")
	rec mp50 "$s" "$(wrk_ms 50% "$W/wrk.txt")"
	rec mp99 "$s" "$(wrk_ms 99% "$W/wrk.txt")"
	rec mcpu "$s" "$(awk -v n="$(awk '/requests in/ {print $1}' "$W/wrk.txt")" -v t="$((t1 - t0))" -v hz="$HZ" \
		'BEGIN {printf "%.1f", (n > 0 ? t / hz * 1e6 / n : 0)}')"
}
m_webhook() {
	local s=$1 stream t0 t1 req us
	for stream in typical-replicas env1500-distinct; do
		t0=$(ticks "${WPID[$s]}")
		BODIES=$W/$stream.list wrk -t2 -c16 -d"${WRK_S}s" -s bench/webhook_post.lua "https://127.0.0.1:${WP[$s]}/mutate" >"$W/wrk.txt" 2>&1
		t1=$(ticks "${WPID[$s]}")
		read -r req us < <(awk '/^WRK/ {print $3, $5}' "$W/wrk.txt")
		[ "${req:-0}" -gt 0 ] || die "${SHA[$s]} webhook: no requests served: $(tail -3 "$W/wrk.txt")"
		awk '/^WRK/ {exit !($15 == 0)}' "$W/wrk.txt" || die "${SHA[$s]} webhook: non-2xx answers: $(grep '^WRK' "$W/wrk.txt")"
		rec "wh-$stream" "$s" "$(awk -v r="$req" -v u="$us" 'BEGIN {printf "%.0f", r / u * 1e6}')"
		rec "whcpu-$stream" "$s" "$(awk -v r="$req" -v t="$((t1 - t0))" -v hz="$HZ" 'BEGIN {printf "%.1f", t / hz * 1e6 / r}')"
	done
}
m_inject() {
	local s=$1
	rec inject "$s" "$("$W/src-$s/build/bench_inject" tests/golden/k8s/env-1500/input.yaml k8s "$INJECT_N" |
		sed -n 's/.* median \([0-9.]*\) ms.*/\1/p')"
}

echo "== refactor A/B: $(date -u +%FT%TZ), $(nproc) cores, $(uname -r), Debian $(cat /etc/debian_version 2>/dev/null)"
echo "   before (A): ${SHA[a]} ($(git log -1 --format=%s "${SHA[a]}" | cut -c1-70))"
echo "   after  (B): ${SHA[b]} ($(git log -1 --format=%s "${SHA[b]}" | cut -c1-70))"
echo "   $ROUNDS rounds, order A B then B A; console app heap $HEAP_MB MiB; /metrics body $(curl -s "${MU[a]}/metrics" | wc -c) bytes"
load
for r in $(seq 1 "$ROUNDS"); do
	order="a b"
	[ $((r % 2)) = 0 ] && order="b a"
	for m in "${FIGURES[@]}"; do
		for s in $order; do "m_$m" "$s"; done
	done
	for s in "${SIDES[@]}"; do kill -0 "${AG[$s]}" 2>/dev/null && kill -0 "${MG[$s]}" 2>/dev/null && kill -0 "${WPID[$s]}" 2>/dev/null ||
		die "a ${SHA[$s]} server died: $(tail -2 "$W/$s/agent.log" "$W/$s/webhook.log")"; done
	echo "   round $r done ($order): $(load)"
done

echo
echo "| figure | unit | before ${SHA[a]} median [min-max] | after ${SHA[b]} median [min-max] | after/before | after higher |"
echo "|---|---|---|---|---|---|"
# row FIGURE LABEL UNIT: medians, ranges, their ratio, and in how many of the pairs (the same round's
# sample of each build, taken one after the other) the after build's figure was the higher
row() {
	local fig=$1 label=$2 unit=$3 a b
	[ -s "$W/fig-$fig-a" ] || return 0
	a=$(stat3 <"$W/fig-$fig-a")
	b=$(stat3 <"$W/fig-$fig-b")
	awk -v l="$label" -v u="$unit" -v a="$a" -v b="$b" -v hi="$(paste "$W/fig-$fig-a" "$W/fig-$fig-b" |
		awk '$2 > $1 {h++} END {printf "%d of %d", h, NR}')" 'BEGIN {split(a, x, " "); split(b, y, " ")
		printf "| %s | %s | %g [%g-%g] | %g [%g-%g] | %.2f | %s |\n", l, u, x[1], x[2], x[3], y[1], y[2], y[3],
			(x[1] > 0 ? y[1] / x[1] : 0), hi}'
}
row rss "agent idle RSS" "KiB (VmRSS)"
row ready "agent exec to ready" "ms"
row dump "Full dump delivery ($HEAP_MB MiB heap)" "MB/s"
row wh-typical-replicas "webhook throughput, typical pod, replicas" "req/s"
row whcpu-typical-replicas "webhook CPU, typical pod, replicas" "us/request"
row wh-env1500-distinct "webhook throughput, 1,500-env pod, every pod new" "req/s"
row whcpu-env1500-distinct "webhook CPU, 1,500-env pod, every pod new" "us/request"
row mp50 "/metrics latency p50" "ms"
row mp99 "/metrics latency p99" "ms"
row mcpu "agent CPU per /metrics scrape" "us/request"
row inject "inject, 1,500-env pod (in-process)" "ms"
echo "samples a build: RSS $ROUNDS, ready $ROUNDS (medians of $READY_RUNS), dump $((ROUNDS * DUMPS)), webhook $ROUNDS per stream" \
	"(${WRK_S} s each), /metrics $ROUNDS (${METRICS_S} s each), inject $ROUNDS (medians of $INJECT_N)"
load
exit 0
