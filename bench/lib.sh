# bench/lib.sh - what the benchmark scripts share (sourced from the repository root, after W is set):
#   PIDS              processes to stop at exit (append with PIDS+=($!))
#   bench_stop        kill PIDS and wait for them
#   bench_cleanup     bench_stop, then remove $W (the scripts' EXIT trap)
#   die MESSAGE       print "SCRIPT: MESSAGE" on stderr, exit 1
#   free_port         a loopback TCP port nobody listens on now (from tests/lib.sh)
. tests/lib.sh
PIDS=()
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
