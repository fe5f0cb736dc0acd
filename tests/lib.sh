# tests/lib.sh - what the integration scripts share (sourced from the repository root). Source it after setting T_NAME
# (the middle part of every result name: integration/$T_NAME/<check>).
#   pass NAME / fail NAME WHY   print one result line
#   check NAME CMD...           PASS when CMD succeeds (its stdout discarded), else FAIL
#                               with $WHY (set just before) or the command as the reason
#   wait_for FILE PATTERN SECS  until grep finds PATTERN in FILE; 1 on timeout
#   free_port                   a loopback TCP port nobody listens on now
pass() { echo "PASS integration/$T_NAME/$1"; }
fail() { echo "FAIL integration/$T_NAME/$1: $2"; }
WHY=
check() {
	local name=$1
	shift
	if "$@" > /dev/null; then pass "$name"; else fail "$name" "${WHY:-check failed: $*}"; fi
	WHY=
}
wait_for() {
	local i
	for ((i = 0; i < $3 * 20; i++)); do
		grep -q -- "$2" "$1" 2>/dev/null && return 0
		sleep 0.05
	done
	return 1
}
free_port() { /usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'; }
