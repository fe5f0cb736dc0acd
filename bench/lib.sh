# bench/lib.sh - what the benchmark scripts share (sourced from the repository root, after W is set):
#   PIDS              processes to stop at exit (append with PIDS+=($!))
#   bench_stop        kill PIDS and wait for them
#   bench_cleanup     bench_stop, then remove $W (the scripts' EXIT trap)
#   die MESSAGE       print "SCRIPT: MESSAGE" on stderr, exit 1
#   free_port         a loopback TCP port nobody listens on now: picked here, bound later by the server given it,
#                     so another process can take it first (the tests have servers bind port 0 and say which;
#                     the benchmarks still pick)
#   load              "load: 1m 5m 15m; busiest: the three busiest commands" (the machine is shared)
#   stat3             "median min max" of the numbers on stdin ("nan nan nan" for none)
. tests/lib.sh
PIDS=()
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
bench_stop() {
	local p
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do kill "$p" 2>/dev/null; done
	wait 2>/dev/null
}
bench_cleanup() {
	bench_stop
	rm -rf "$W"
}
die() { echo "$(basename "$0"): $*" >&2; exit 1; }
load() { echo "load: $(cut -d' ' -f1-3 /proc/loadavg); busiest: $(ps -eo pcpu=,comm= --sort=-pcpu | head -3 | awk '{printf "%s %s%%  ", $2, $1}')"; }
stat3() { sort -g | awk '{v[NR]=$1} END {if (!NR) {print "nan nan nan"; exit}
	printf "%s %s %s\n", (NR % 2 ? v[(NR+1)/2] : (v[NR/2] + v[NR/2+1]) / 2), v[1], v[NR]}'; }
