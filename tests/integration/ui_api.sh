#!/usr/bin/env bash
# ui_api.sh - `diagport ui`'s server, spoken to with curl as a browser and as an attacker would, against a real
# agent (token on) in init mode over a real .NET app (tests/apps/console `spin`): it listens on loopback only;
# without the secret, or its cookie, it answers 403 with nothing in the body; the printed URL sets an HttpOnly,
# SameSite=Strict cookie and redirects to a URL without the secret; a Host that is not its own (DNS rebinding) and
# a POST without its own Origin get 403; every answer carries the Content-Security-Policy. Through it: the process
# list, a CPU profile naming the hot method, a Mini dump that is an ELF core, a GC heap table, cancel (no file
# left), the live counters, bad requests (400 naming the field, 404, 405, 413), the agent's token nowhere in what
# the page gets, and SIGTERM: exit 0, -o's files kept, its own directory removed. The browser's side is ui.sh.
set -uo pipefail
T_NAME=ui_api
source tests/lib.sh
agent_setup uiapi
build_apps

printf 'ui-api-token-0123456789abcdef\n' > "$W/token"
chmod 600 "$W/token"
start_agent --auth-token-file "$W/token" -- dotnet "$B/apps/console/console.dll" spin
eventually 30 bash -c "curl -s -H 'Authorization: Bearer ui-api-token-0123456789abcdef' $U/processes | grep -q pid" ||
	{ fail setup "the app did not attach" "$W/agent.log"; exit 0; }
APPPID=$(curl -s -H 'Authorization: Bearer ui-api-token-0123456789abcdef' "$U/processes" | jq '.[0].pid')
TGT=127.0.0.1:$P

# start_ui OUT [ARGS]: the UI on a port of its own, its first line in OUT; UIPID, UIBASE, UIURL
start_ui() {
	local out=$1
	shift
	TMPDIR=$W "$D" ui --target "$U" --token-file "$W/token" "$@" > "$out" 2> "$out.err" &
	UIPID=$!
	PIDS+=($UIPID)
	UIURL=$(ui_url "$out" 30) || { fail ui-start "no URL printed" "$out.err"; exit 0; }
	UIBASE=${UIURL%%/\?*}
}
mkdir -p "$W/keep"
start_ui "$W/ui.out" -o "$W/keep"
UIPORT=${UIBASE##*:}
check prints-url [ -n "$UIURL" ]
WHY="listening sockets on $UIPORT: $(ss -ltnH "sport = :$UIPORT" | awk '{print $4}' | tr '\n' ' ')"
check loopback-only bash -c "[ \"\$(ss -ltnH 'sport = :$UIPORT' | awk '{print \$4}')\" = 127.0.0.1:$UIPORT ]"
check secret-is-256-bits bash -c "[[ '$UIURL' =~ secret=[0-9a-f]{64}$ ]]"

# without the secret: 403 and nothing else for the API; a page gets the gate (no data: a link back in, for a
# browser that has the cookie but did not send it), whose own two files are the only ones served without it
for p in /api/processes /api/captures "/api/live?target=$TGT&pid=$APPPID" /api/nothing; do
	c=$(curl -s -o "$W/body" -w '%{http_code}' "$UIBASE$p")
	WHY="$p: $c, $(wc -c < "$W/body") bytes"
	check "no-cookie-403$p" bash -c "[ $c = 403 ] && [ ! -s '$W/body' ]"
done
for p in / /index.html /app.js /nothing; do
	c=$(curl -s -o "$W/body" -w '%{http_code}' "$UIBASE$p")
	WHY="$p: $c, $(head -c 300 "$W/body")"
	check "no-cookie-gate$p" bash -c "[ $c = 403 ] && grep -q 'Continue to diagport ui' '$W/body' &&
		! grep -q '${UIURL##*secret=}' '$W/body' && ! grep -q 'api/' '$W/body'"
done
c=$(curl -s -o /dev/null -w '%{http_code}' -X POST "$UIBASE/")
check no-cookie-post-403 [ "$c" = 403 ]
c=$(curl -s -o /dev/null -w '%{http_code}' "$UIBASE/app.css")
check no-cookie-gate-css [ "$c" = 200 ]
c=$(curl -s -o /dev/null -w '%{http_code}' "$UIBASE/?secret=$(printf '%064d' 0)")
check wrong-secret-403 [ "$c" = 403 ]
c=$(curl -s -o /dev/null -w '%{http_code}' "$UIBASE/?secret=${UIURL##*secret=}x")
check longer-secret-403 [ "$c" = 403 ]
c=$(curl -s -D "$W/login.hdr" -c "$W/jar" -o /dev/null -w '%{http_code}' "$UIURL")
WHY="$c; $(tr -d '\r' < "$W/login.hdr")"
tr -d '\r' < "$W/login.hdr" > "$W/login.h"
check secret-sets-cookie-and-redirects bash -c "[ $c = 303 ] && grep -qix 'location: /' '$W/login.h' &&
	grep -qix 'set-cookie: diagport-ui-$UIPORT=[0-9a-f]\{64\}; HttpOnly; SameSite=Strict; Path=/' '$W/login.h'"
# curl matches cookies by the Host header it sends: with another Host, the cookie goes by hand
COOKIE="Cookie: diagport-ui-$UIPORT=${UIURL##*secret=}"
ui() { local m=$1 p=$2; shift 2; curl -s -b "$W/jar" -H "Origin: $UIBASE" -X "$m" "$UIBASE$p" "$@"; }
c=$(curl -s -b "$W/jar" -o "$W/body" -D "$W/h" -w '%{http_code}' "$UIBASE/api/processes")
check cookie-admits [ "$c" = 200 ]
WHY=$(tr -d '\r' < "$W/h")
check csp-header grep -qi "^content-security-policy: default-src 'self';.*frame-ancestors 'none'" "$W/h"
c=$(curl -s -H "$COOKIE" -H "Host: rebound.example:$UIPORT" -o "$W/body" -w '%{http_code}' "$UIBASE/api/processes")
check foreign-host-403 bash -c "[ $c = 403 ] && [ ! -s '$W/body' ]"
c=$(curl -s -H "$COOKIE" -H "Host: localhost:$UIPORT" -o /dev/null -w '%{http_code}' "$UIBASE/api/processes")
check localhost-host-200 [ "$c" = 200 ]
c=$(printf 'GET /api/processes HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nHost: rebound.example\r\n%s\r\nConnection: close\r\n\r\n' \
	"$UIPORT" "$COOKIE" | timeout 10 /usr/bin/python3 -c 'import socket, sys
s = socket.create_connection(("127.0.0.1", int(sys.argv[1]))); s.sendall(sys.stdin.buffer.read())
print(s.recv(100).split(b" ")[1].decode())' "$UIPORT")
check two-hosts-400 [ "$c" = 400 ]
# the cookie reaches every server on 127.0.0.1 (cookies are kept by host, not port): another user who learns it
# is still refused, by the uid owning the connection's socket
setpriv --reuid=nobody --regid=nogroup --clear-groups curl -s -H "$COOKIE" -w '\n%{http_code}' \
	"$UIBASE/api/processes" > "$W/other" 2> "$W/setpriv.err"
WHY="$(head -c 300 "$W/other") $(cat "$W/setpriv.err")"
check other-user-with-secret-403 bash -c "[ \"\$(cat '$W/other')\" = \$'\\n403' ]"
setpriv --reuid=nobody --regid=nogroup --clear-groups curl -s -H "$COOKIE" -w '\n%{http_code}' "$UIBASE/" > "$W/other" 2>&1
check other-user-no-gate bash -c "[ \"\$(cat '$W/other')\" = \$'\\n403' ]"
body="{\"target\":\"$TGT\",\"pid\":$APPPID,\"kind\":\"stacks\"}"
c=$(curl -s -b "$W/jar" -o /dev/null -w '%{http_code}' "$UIBASE/api/captures" -d "$body")
check post-without-origin-403 [ "$c" = 403 ]
c=$(curl -s -b "$W/jar" -H 'Origin: http://evil.example' -o /dev/null -w '%{http_code}' "$UIBASE/api/captures" -d "$body")
check post-foreign-origin-403 [ "$c" = 403 ]
c=$(curl -s -b "$W/jar" -H "Origin: http://127.0.0.1:1$UIPORT" -o /dev/null -w '%{http_code}' "$UIBASE/api/captures" -d "$body")
check post-other-port-origin-403 [ "$c" = 403 ]

ui GET /api/processes > "$W/ps.json"
WHY=$(head -c 600 "$W/ps.json")
check process-listed jq -e --arg t "$TGT" --argjson p "$APPPID" '.kind == "ProcessList" and (.items[] | select(.target == $t) |
	.state == "ready" and (.processes[] | select(.pid == $p) | .runtimeVersion | test("^[0-9]+\\.")))' "$W/ps.json"
check refreshed-at jq -e '.refreshedAt | test("^20[0-9-]+T")' "$W/ps.json"

# start KIND [EXTRA JSON]: POST a capture; its id in CID
start() { CID=$(ui POST /api/captures -d "{\"target\":\"$TGT\",\"pid\":$APPPID,\"kind\":\"$1\"${2:+,$2}}" | jq -r .id); }
state_is() { [ "$(ui GET "/api/captures/$1" | jq -r .state)" = "$2" ]; }
start cpuprofile '"durationSeconds":3'
PROF=$CID
start dump '"type":"Mini"'
DUMP=$CID
start gcdump
GC=$CID
for id in "$PROF" "$DUMP" "$GC"; do
	WHY="$id: $(ui GET "/api/captures/$id")"
	check "succeeded-$id" eventually 120 state_is "$id" succeeded
done
ui GET "/api/captures/$PROF/data" > "$W/prof.folded"
WHY=$(head -c 400 "$W/prof.folded")
check cpuprofile-names-spin grep -q 'console.dll!DiagportTestConsole.Program.Spin [0-9]' "$W/prof.folded"
ui GET "/api/captures/$DUMP/data?download=1" -D "$W/dump.hdr" -o "$W/dump.dmp"
WHY=$(tr -d '\r' < "$W/dump.hdr")
check dump-download-attachment grep -qi '^content-disposition: attachment; filename=".*\.dmp"' "$W/dump.hdr"
WHY="$(head -c 20 "$W/dump.dmp" | od -An -tx1)"
check dump-is-elf-core bash -c "[ \"\$(head -c 4 '$W/dump.dmp' | od -An -tx1 | tr -d ' ')\" = 7f454c46 ] &&
	[ \"\$(od -An -tu2 -j16 -N2 '$W/dump.dmp' | tr -d ' ')\" = 4 ]"
check dump-bytes-match bash -c "[ \$(stat -c %s '$W/dump.dmp') = \$(curl -s -b '$W/jar' '$UIBASE/api/captures/$DUMP' | jq .bytes) ]"
ui GET "/api/captures/$GC/data" > "$W/gc.json"
check gcdump-types jq -e '.types | length > 10 and (.[0].bytes > 0)' "$W/gc.json"
check list-newest-first bash -c "ui() { curl -s -b '$W/jar' \"$UIBASE\$1\"; }; [ \"\$(ui /api/captures | jq -r '.items[0].id')\" = '$GC' ]"

# cancel: a long profile stops at once, and leaves no file behind
start cpuprofile '"durationSeconds":120'
LONG=$CID
check running state_is "$LONG" running
c=$(ui DELETE "/api/captures/$LONG" -o /dev/null -w '%{http_code}')
check cancel-204 [ "$c" = 204 ]
check cancelled eventually 15 state_is "$LONG" cancelled
WHY=$(ls -la "$W/keep")
check no-partial-left bash -c "! ls -a '$W/keep' | grep -q partial && [ \$(ls '$W/keep' | wc -l) = 3 ]"
c=$(ui DELETE "/api/captures/$GC" -o /dev/null -w '%{http_code}')
check forget-finished bash -c "[ $c = 204 ] && [ \$(ls '$W/keep' | grep -c gcstats) = 0 ]"

# the live counters come through, as the agent's json-seq
timeout 20 curl -s -N -b "$W/jar" "$UIBASE/api/live?target=$TGT&pid=$APPPID" > "$W/live" &
LIVE=$!
check live-first-reading eventually 15 grep -q '"provider":"System.Runtime"' "$W/live"
kill "$LIVE" 2>/dev/null
check live-is-json-seq bash -c "head -c 1 '$W/live' | od -An -tx1 | grep -q 1e"

# bad requests: the field named
bad() { ui POST /api/captures -d "$1" -o "$W/bad" -w '%{http_code}'; }
c=$(bad "{\"target\":\"$TGT\",\"pid\":$APPPID,\"kind\":\"coredump\"}")
check bad-kind bash -c "[ $c = 400 ] && jq -e '.detail | startswith(\"\$.kind\")' '$W/bad'"
c=$(bad "{\"target\":\"$TGT\",\"pid\":\"1\",\"kind\":\"dump\"}")
check bad-pid bash -c "[ $c = 400 ] && jq -e '.detail | startswith(\"\$.pid\")' '$W/bad'"
c=$(bad "{\"target\":\"$TGT\",\"pid\":$APPPID,\"kind\":\"cpuprofile\",\"durationSeconds\":0}")
check bad-duration bash -c "[ $c = 400 ] && jq -e '.detail | startswith(\"\$.durationSeconds\")' '$W/bad'"
c=$(bad "{\"target\":\"$TGT\",\"pid\":$APPPID,\"kind\":\"cpuprofile\",\"engine\":\"dtrace\"}")
check bad-engine bash -c "[ $c = 400 ] && jq -e '.detail | startswith(\"\$.engine\")' '$W/bad'"
c=$(bad "{\"target\":\"$TGT\",\"pid\":$APPPID,\"kind\":\"dump\",\"type\":\"Huge\"}")
check bad-dump-type bash -c "[ $c = 400 ] && jq -e '.detail | startswith(\"\$.type\")' '$W/bad'"
c=$(bad "{\"target\":\"nobody:1\",\"pid\":$APPPID,\"kind\":\"stacks\"}")
check unknown-target-404 [ "$c" = 404 ]
c=$(bad "not json")
check not-json-400 [ "$c" = 400 ]
c=$(head -c 20000 /dev/zero | tr '\0' ' ' | ui POST /api/captures --data-binary @- -o /dev/null -w '%{http_code}')
check body-cap-413 [ "$c" = 413 ]
c=$(ui GET "/api/live?target=$TGT&pid=999999" -o "$W/bad" -w '%{http_code}')
WHY=$(cat "$W/bad")
check live-no-such-pid bash -c "[ $c = 400 ] && jq -e '.detail | contains(\"no attached process\")' '$W/bad'"
c=$(ui GET /api/nothing -o /dev/null -w '%{http_code}')
check unknown-api-404 [ "$c" = 404 ]
c=$(ui PUT /api/captures -o /dev/null -w '%{http_code}')
check wrong-method-405 [ "$c" = 405 ]
c=$(ui GET /api/captures/c999 -o /dev/null -w '%{http_code}')
check unknown-capture-404 [ "$c" = 404 ]

# the agent's token never reaches the page
for p in /api/processes /api/captures "/api/captures/$PROF"; do ui GET "$p"; done > "$W/all.json"
check token-not-given-to-page bash -c "! grep -q ui-api-token '$W/all.json'"

# the same as a kubectl plugin: kubectl finds kubectl-diagport on PATH; its URL works as the other's did
mkdir -p "$W/bin"
ln -s "$D" "$W/bin/kubectl-diagport"
PATH="$W/bin:$PATH" kubectl diagport ui --help > "$W/khelp" 2>&1
check kubectl-plugin-help grep -q '^usage: kubectl diagport ui' "$W/khelp"
TMPDIR=$W PATH="$W/bin:$PATH" kubectl diagport ui --target "$U" --token-file "$W/token" > "$W/kui.out" 2> "$W/kui.err" &
KUI=$!
PIDS+=($KUI)
if KURL=$(ui_url "$W/kui.out" 30); then
	KBASE=$(ui_login "$KURL" "$W/kjar")
	curl -s -b "$W/kjar" "$KBASE/api/processes" > "$W/kps.json"
	check kubectl-plugin-ui jq -e --argjson p "$APPPID" '[.items[].processes[].pid] == [$p]' "$W/kps.json"
	c=$(curl -s -b "$W/jar" -o /dev/null -w '%{http_code}' "$KBASE/api/processes")
	check other-ui-cookie-refused [ "$c" = 403 ]
else
	fail kubectl-plugin-ui "no URL printed" "$W/kui.err"
fi
kill -TERM "$KUI"
wait "$KUI"

# SIGTERM: exit 0, -o's files kept; a run without -o removes its own directory
kill -TERM "$UIPID"
wait "$UIPID"
rc=$?
check sigterm-exit-0 [ "$rc" = 0 ]
check kept-with-o bash -c "ls '$W/keep' | grep -q '\.dmp$'"
TMPDIR=$W start_ui "$W/ui2.out"
own=$(sed -n 's/^diagport ui: artifacts in \(.*\) (removed at exit).*/\1/p' "$W/ui2.out")
check own-dir-private bash -c "[ -n '$own' ] && [ \"\$(stat -c %a '$own')\" = 700 ]"
kill -TERM "$UIPID"
wait "$UIPID"
check own-dir-removed [ ! -e "$own" ]
