# tests/lib.sh - what the integration scripts share (sourced from the repository root). Source it after setting T_NAME
# (the middle part of every result name: integration/$T_NAME/<check>).
#   pass NAME / fail NAME WHY   print one result line
#   check NAME CMD...           PASS when CMD succeeds (its stdout discarded), else FAIL
#                               with $WHY (set just before) or the command as the reason
#   wait_for FILE PATTERN SECS  until grep finds PATTERN in FILE; 1 on timeout
#   free_port                   a loopback TCP port nobody listens on now
#   start_webapp OUT SOCKET AGENT_URL [CURL ARGS]
#                               the test webapp (tests/apps, built into $B/apps) on a free port, attached through
#                               the agent's SOCKET, its output in OUT; sets APP (the pid started), APID (the pid
#                               it prints), AURL; appends to PIDS; 1 unless it started and the agent lists it
#                               (CURL ARGS: e.g. the token header) within 30 s
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
start_webapp() {
	local out=$1 sock=$2 agent=$3 ap
	shift 3
	ap=$(free_port); AURL=http://127.0.0.1:$ap
	DOTNET_DiagnosticPorts=$sock,connect,nosuspend ASPNETCORE_URLS=$AURL dotnet "${B:-build}/apps/webapp/webapp.dll" \
		> "$out" 2>&1 &
	APP=$!; PIDS+=($APP)
	wait_for "$out" READY 30 || return 1
	APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$out")
	for _ in $(seq 1 100); do curl -s "$@" "$agent/processes" | grep -q "\"pid\":$APID" && return 0; sleep 0.1; done
	return 1
}
