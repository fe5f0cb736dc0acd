# tests/lib.sh - what the integration scripts share (sourced from the repository root). Source it after setting T_NAME
# (the middle part of every result name: integration/$T_NAME/<check>).
#   agent_setup PREFIX          D (the binary), B (the build directory), W (a new scratch directory
#                               /tmp/dp-PREFIX.*, mode 755), PIDS; at exit the PIDS are killed, cleanup_more
#                               runs when the script defines it, and W is removed; the .NET CLI kept quiet
#   build_apps                  the test apps (tests/apps/build.sh) into $B/apps, else a FAIL and exit
#   code CURL-ARGS...           the HTTP status of a curl request, its body in $W/body
#   egressed NAME URL [CURL ARGS]
#                               a capture sent to egress: requests URL, follows the operation in its Location to
#                               its end; CODE (the answer's status) and $W/NAME-op.json (the operation at its end)
#   start_agent [LAUNCH ARGS]   the agent on a port it binds itself (--urls port 0; P, U from its listening
#                               line), its socket $W/dumps/port, dumps in $W/dumps, the egress provider "out"
#                               ($W/out), its log $W/agent.log; AG its pid (in PIDS). Returns once the agent
#                               says it is listening (socket and HTTP ready); else a FAIL agent-start and exit.
#                               AGENT_OUT: a file for the agent's stdout (its app's, in init mode)
#   listening_port LOG FIELD SECS [PID]
#                               the port in the "listening" line's FIELD (an agent's urls or metricsUrls, a
#                               webhook's port) of a server that bound port 0, once logged; 1 if not within SECS
#                               or PID has exited
#   pass NAME / fail NAME WHY [FILE]
#                               print one result line; with FILE (a log), its first 40 lines beneath it
#   check NAME CMD...           PASS when CMD succeeds (its stdout discarded), else FAIL
#                               with $WHY (set just before) or the command as the reason
#   wait_for FILE PATTERN SECS  until grep finds PATTERN in FILE; 1 on timeout
#   eventually SECS CMD...      until CMD succeeds (run again every 0.1 s); 1 when it has not within SECS: for a
#                               state the agent reaches by itself (a session on, a clean-up done), instead of a
#                               fixed sleep before checking it
#   logged_port FILE PREFIX SECS [PID]
#                               the port a server that bound port 0 printed in FILE right after PREFIX (a fixed
#                               string: "ACCEPT 127.0.0.1:", "listens on http://127.0.0.1:"), once printed; 1 when
#                               not within SECS or PID has exited
#   refused_port                RP: a loopback port on which every connection is refused while the script runs
#                               (held bound, not listening, by a process in PIDS: nobody else can take it)
#   on_free_ports N OUT CMD...  CMD with N loopback ports nobody listens on appended to its arguments, its output
#                               in OUT; run again with new ports (5 tries) while it fails saying a port was taken;
#                               PORTS the ports of the last try; CMD's status. Only for a server that cannot bind
#                               port 0 and say which port it got (a pod's hostPort in podman kube play, a compose
#                               file's published port): picked here, bound there, a port can be taken in between
#   op_ended SECS URL [CURL ARGS]
#                               until the operation at URL is no longer Running (eventually); 1 if it still is
#   asleep PID PREFIX N         N or more of PID's threads named PREFIX... are asleep (state S): a lock's waiters
#                               (the webapp's lock-waiter-N) have reached the wait, for eventually; PREFIX "" and N
#                               0: none of PID's threads is running (its thread pool's workers done spinning)
#   start_webapp OUT SOCKET AGENT_URL [CURL ARGS]
#                               the test webapp (tests/apps, built into $B/apps) on a port it binds itself (port 0;
#                               AURL from its LISTENING line), attached through
#                               the agent's SOCKET, its output in OUT; sets APP (the pid started), APID (the pid
#                               it prints), AURL; appends to PIDS; 1 unless it started and the agent lists it
#                               (CURL ARGS: e.g. the token header) within 30 s
#   ui_url OUT SECS             the URL `diagport ui` printed (its first line, in OUT, with the secret) once it has;
#                               1 when it has not within SECS
#   ui_login URL JAR            open the UI's URL with curl (its cookie into JAR); the base URL on stdout
#   api_cert CA                 a stand-in API server's certificate for 127.0.0.1 and localhost (ECDSA P-256,
#                               2 days): $W/CA.crt and .key (its own CA), $W/api.crt and .key; 1 with
#                               $W/openssl.err on failure
pass() { echo "PASS integration/$T_NAME/$1"; }
fail() {
	echo "FAIL integration/$T_NAME/$1: $2"
	if [ $# -ge 3 ] && [ -s "$3" ]; then head -n 40 "$3" | sed 's/^/    /'; fi
	return 0
}
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
eventually() {
	local end=$((SECONDS + $1))
	shift
	until "$@"; do
		[ "$SECONDS" -ge "$end" ] && return 1
		sleep 0.1
	done
}
op_ended() {
	local secs=$1
	shift
	eventually "$secs" op_not_running "$@"
}
op_not_running() {
	local u=$1
	shift
	[ "$(curl -s "$@" "$u" | jq -r .status)" != Running ]
}
asleep() {
	awk -v p="$2" -v want="$3" 'FNR == 1 { n = 0 } /^Name:/ { n = index($2, p) == 1 } /^State:/ && n && $2 == "S" { c++ }
		/^State:/ && $2 == "R" { r++ } END { exit !(want > 0 ? c >= want : r == 0 && NR > 0) }' /proc/"$1"/task/*/status 2>/dev/null
}
logged_port() {
	local i port
	for ((i = 0; i < $3 * 20; i++)); do
		port=$(awk -v p="$2" '(i = index($0, p)) && match(s = substr($0, i + length(p)), /^[0-9]+/) {
			print substr(s, 1, RLENGTH); exit }' "$1" 2>/dev/null)
		[ -n "$port" ] && { echo "$port"; return 0; }
		[ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}
refused_port() {
	local f
	f=$(mktemp "$W/refused.XXXXXX")
	/usr/bin/python3 -c 'import socket, time
s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1], flush=True); time.sleep(86400)' > "$f" &
	PIDS+=($!)
	disown $! # killed at exit like the others, without a job-status line
	wait_for "$f" '^[0-9]' 10 || { fail refused-port "no port held"; exit 0; }
	RP=$(cat "$f")
}
on_free_ports() {
	local n=$1 out=$2 try i rc
	shift 2
	for ((try = 1; try <= 5; try++)); do
		PORTS=()
		for ((i = 0; i < n; i++)); do
			PORTS+=("$(/usr/bin/python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')")
		done
		"$@" "${PORTS[@]}" > "$out" 2>&1
		rc=$?
		[ "$rc" = 0 ] && return 0
		grep -qi 'address already in use' "$out" || return "$rc"
	done
	return "$rc"
}
start_webapp() {
	local out=$1 sock=$2 agent=$3
	shift 3
	: > "$out" # emptied here, not by the background job: an earlier run's READY is not this one's
	DOTNET_DiagnosticPorts=$sock,connect,nosuspend ASPNETCORE_URLS=http://127.0.0.1:0 \
		dotnet "${B:-build}/apps/webapp/webapp.dll" > "$out" 2>&1 &
	APP=$!; PIDS+=($APP)
	wait_for "$out" READY 30 || return 1
	APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$out")
	AURL=$(sed -n 's/^LISTENING \(http:.*\)$/\1/p' "$out" | head -1)
	for _ in $(seq 1 100); do curl -s "$@" "$agent/processes" | grep -q "\"pid\":$APID" && return 0; sleep 0.1; done
	return 1
}
ui_url() {
	wait_for "$1" '^diagport ui: http://127\.0\.0\.1:[0-9]*/?secret=[0-9a-f]\{64\}$' "$2" || return 1
	sed -n 's/^diagport ui: \(http:.*secret=[0-9a-f]*\)$/\1/p' "$1" | head -1
}
ui_login() { curl -s -c "$2" -o /dev/null "$1" && echo "${1%%/\?*}"; }
# jqe ARGS...: jq -e on stdin that fails on no input as well (Debian's jq 1.6 exits 0 when it read nothing,
# so "curl ... | jq -e 'length == 0'" passed with the agent down); exported for bash -c
jqe() { local in; in=$(cat); [ -n "$in" ] && jq -e "$@" <<< "$in"; }
export -f jqe
# ours PID: whether PID is still a child of this script (a pid reaped earlier may belong to anyone by now:
# pid_max is 32768 here and every .NET thread takes one; the test runner included)
ours() { [ -n "$1" ] && [ "$(awk '{print $4}' "/proc/$1/stat" 2>/dev/null)" = "$$" ]; }
agent_cleanup() {
	local p
	# an agent in init mode (launch -- CMD) killed with -9 cannot stop its app: the app first (dump_judge.sh left
	# "console.dll sleep 600" running for 10 minutes)
	for p in "${PIDS[@]+"${PIDS[@]}"}"; do ours "$p" && { pkill -9 -P "$p" 2>/dev/null; kill -9 "$p" 2>/dev/null; }; done
	# a createdump whose agent died holds its app (a child of ours) unreaped: wait would never return
	pkill -9 -f "createdump --name $W/" 2>/dev/null
	wait 2>/dev/null
	if declare -F cleanup_more > /dev/null; then cleanup_more; fi
	rm -rf "$W"
}
agent_setup() {
	D=$PWD/diagport
	B=${BUILD:-build}
	W=$(mktemp -d "/tmp/dp-$1.XXXXXX") && chmod 755 "$W" || exit 1
	PIDS=()
	trap agent_cleanup EXIT
	export DOTNET_CLI_TELEMETRY_OPTOUT=1 DOTNET_NOLOGO=1
}
build_apps() {
	bash tests/apps/build.sh "$B/apps" > "$W/build.log" 2>&1 && return 0
	fail build-apps "$(tail -5 "$W/build.log")"
	exit 0
}
api_cert() {
	local o=/usr/bin/openssl
	"$o" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/$1.key" -out "$W/$1.crt" \
		-days 2 -subj /CN=fake-apiserver-ca 2> "$W/openssl.err" &&
		"$o" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/api.key" -out "$W/api.csr" \
			-subj /CN=kubernetes 2>> "$W/openssl.err" &&
		printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$W/api.ext" &&
		"$o" x509 -req -in "$W/api.csr" -CA "$W/$1.crt" -CAkey "$W/$1.key" -set_serial 7 -days 2 \
			-extfile "$W/api.ext" -out "$W/api.crt" 2>> "$W/openssl.err"
}
code() { curl -s -o "$W/body" -w '%{http_code}' "$@"; }
start_agent() {
	mkdir -p -m 0777 "$W/dumps" "$W/out"
	printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/out\n' "$W" > "$W/agent.yaml"
	: > "$W/agent.log" # emptied here, not by the background job: an earlier agent's listening line is not this one's
	if [ -n "${AGENT_OUT:-}" ]; then
		"$D" launch --config "$W/agent.yaml" --socket "$W/dumps/port" --urls http://127.0.0.1:0 --dumps "$W/dumps" \
			"$@" 2> "$W/agent.log" > "$AGENT_OUT" &
	else
		"$D" launch --config "$W/agent.yaml" --socket "$W/dumps/port" --urls http://127.0.0.1:0 --dumps "$W/dumps" \
			"$@" 2> "$W/agent.log" &
	fi
	AG=$!
	PIDS+=("$AG")
	if ! P=$(listening_port "$W/agent.log" urls 30 "$AG"); then
		if kill -0 "$AG" 2>/dev/null; then
			fail agent-start "the agent did not say it was listening within 30 s; its log:" "$W/agent.log"
		else
			fail agent-start "the agent exited before it was listening; its log:" "$W/agent.log"
		fi
		exit 0
	fi
	U=http://127.0.0.1:$P
}
# listening_port LOG FIELD SECS [PID]: the port in the listening line's FIELD once the agent or the webhook has
# written it: the first URL's in an agent's urls or metricsUrls, a webhook's port; 1 when it has not within
# SECS, or PID has exited
listening_port() {
	local i line
	for ((i = 0; i < $3 * 20; i++)); do
		line=$(grep -m1 '"event":"listening"' "$1" 2>/dev/null)
		if [ -n "$line" ]; then
			sed -n -e 's/.*"'"$2"'":"https\{0,1\}:\/\/[^";]*:\([0-9][0-9]*\)[";].*/\1/p' \
				-e 's/.*"'"$2"'":\([0-9][0-9]*\)[,}].*/\1/p' <<< "$line" | grep . && return 0
			return 1
		fi
		[ -n "${4:-}" ] && ! kill -0 "$4" 2>/dev/null && return 1
		sleep 0.05
	done
	return 1
}
egressed() {
	local name=$1 url=$2 loc
	shift 2
	CODE=$(curl -s -D "$W/$name.hdr" -o /dev/null -w '%{http_code}' "$@" "$url")
	loc=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/$name.hdr")
	[ -n "$loc" ] || { echo '{}' > "$W/$name-op.json"; return; }
	op_ended 30 "$U$loc" "$@"
	curl -s "$@" "$U$loc" > "$W/$name-op.json"
}
