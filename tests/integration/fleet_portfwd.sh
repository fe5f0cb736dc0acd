#!/usr/bin/env bash
# fleet_portfwd.sh - the fleet client's port-forward tunnel (fleet/portfwd.c, fleet/pfpump.c, and
# fleet/fdcurl.c for libcurl over the tunnel's fd) to a real diagport agent with the real .NET test
# webapp attached, through the API server stand-in (kubeapi_fake.py with kube_portfwd.py: the
# kubelet's port-forward over WebSocket, v4.channel.k8s.io, as pkg/kubelet/cri/streaming/portforward/
# websocket.go serves it; no kube-apiserver or kubelet can run here).
#
# The stand-in is itself checked by the real client: @kubernetes/client-node's PortForward
# (tests/validate/portforward-get.mjs) gets the agent's /processes through it, and reads the kubelet's
# refusal on the error channel. kubectl is not the checker: `kubectl port-forward` speaks SPDY (or,
# since 1.31, SPDY tunnelled over WebSocket, v2.portforward.k8s.io), not this channel protocol.
# Results:
#   client-node/*  the JavaScript client's request answered by the agent; its error channel gets the
#                  kubelet's "error forwarding port ..." for a pod whose port is closed
#   processes/*    our dialer + libcurl over the fd: /processes of the agent lists the webapp
#   coalesced/*    the same when the 101 and the first frames come in one write (one read for us);
#                  split/* says the other runs had them in separate writes
#   dump/*         a /dump of the webapp (hundreds of MB) through the tunnel is byte for byte what the
#                  agent sent (the stand-in tees the pod side's bytes; the test decodes that HTTP
#                  answer); the driver's peak RSS grows by less than 8 MiB over a /processes run
#   many/*         20 dials at once from 20 threads: every /processes answered
#   refused/*      the pod's port not forwarded: the request fails and kube_portfwd_explain gives the
#                  kubelet's message
#   auth/*         a wrong token (401) and a forbidden port-forward (403): the dial fails, DP_EAUTH,
#                  em quoting the API server's Status message
#   early/*        the caller closes mid-request: the stand-in sees the WebSocket closed by the client,
#                  and the tunnel's thread is gone
#   oversize/*     a frame over the 1 MiB cap: the request fails and the explanation names the cap
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=fleet-portfwd
. tests/lib.sh
agent_setup fleet-portfwd
PY=/usr/bin/python3
OSSL=/usr/bin/openssl
V=$PWD/tests/validate
for tool in "$OSSL" curl "$PY" node jq; do
	command -v "$tool" > /dev/null || { fail prerequisites "$tool is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done
[ -d "$V/node_modules/@kubernetes/client-node" ] ||
	{ fail prerequisites "@kubernetes/client-node is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
build_apps
CFLAGS_PKG=$(pkg-config --cflags jansson yaml-0.1 libcurl libseccomp)
LIBS_PKG="$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread"
# shellcheck disable=SC2086
cc -std=c11 -D_GNU_SOURCE -I. -Icommon $CFLAGS_PKG -o "$W/driver" tests/integration/portfwd_driver.c \
	"$B/libdiagport.a" $LIBS_PKG 2> "$W/cc.log" || { fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }

# --- the stand-in API server (HTTPS with its own CA), the agent and the app -----------------------
if ! api_cert ca; then
	fail setup "openssl could not make the stand-in's certificate: $(head -c 300 "$W/openssl.err")"
	exit 0
fi
head -c 18 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/token"
echo wrong > "$W/bad-token"
"$PY" tests/integration/kubeapi_fake.py --cert "$W/api.crt" --key "$W/api.key" --token-file "$W/token" \
	--log "$W/api.log" --ready "$W/api.port" > "$W/fake.out" 2>&1 &
PIDS+=($!)
wait_for "$W/api.port" . 10
[ -s "$W/api.port" ] || { fail setup "the stand-in did not start" "$W/fake.out"; exit 0; }
API=https://127.0.0.1:$(cat "$W/api.port")

ATOK=agent-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
printf '%s\n' "$ATOK" > "$W/agent-token"
start_agent --auth-token-file "$W/agent-token"
if ! start_webapp "$W/app.out" "$W/dumps/port" "$U" -H "Authorization: Bearer $ATOK"; then
	fail setup "the webapp did not attach to the agent" "$W/app.out"
	exit 0
fi
forward() { # NS POD [JSON fields]: the pod's port 52323 leads to the agent
	curl -sf --cacert "$W/ca.crt" -X POST "$API/__fake/forward" \
		-d "{\"namespace\":\"$1\",\"pod\":\"$2\",\"port\":52323,\"to\":\"127.0.0.1:$P\"${3:+,$3}}" > /dev/null
}
forward shop orders-1
drv() { "$W/driver" "$API" "$W/ca.crt" "${TOKFILE:-$W/token}" "$@"; }

# --- the real client against the stand-in ---------------------------------------------------------
(cd "$V" && timeout 60 node portforward-get.mjs "$API" "$W/ca.crt" "$W/token" shop orders-1 52323 /processes "$ATOK") \
	> "$W/js.out" 2> "$W/js.err"
RC=$?
WHY="exit $RC: $(head -c 300 "$W/js.err")"; check client-node/succeeded test "$RC" = 0
WHY="$(head -c 300 "$W/js.out")"; check client-node/http-200 bash -c "head -1 '$W/js.out' | grep -q '^HTTP/1.1 200'"
WHY="$(head -c 300 "$W/js.out")"; check client-node/lists-the-app grep -q "\"pid\":$APID" "$W/js.out"
(cd "$V" && timeout 60 node portforward-get.mjs "$API" "$W/ca.crt" "$W/token" shop nowhere 52323 /processes "$ATOK") \
	> "$W/js2.out" 2> "$W/js2.err"
WHY="$(head -c 300 "$W/js2.err")"
check client-node/error-channel grep -q "error forwarding port 52323 to pod [0-9a-f]*, uid : .*connect: connection refused" "$W/js2.err"
WHY="$(cat "$W/api.log")"; check client-node/v4-agreed grep -q "WS shop/orders-1 open v4.channel.k8s.io" "$W/api.log"

# --- our dialer, libcurl over the fd ---------------------------------------------------------------
drv shop orders-1 52323 get /processes "$W/processes.json" "$ATOK" > "$W/p.out" 2>&1
WHY="$(cat "$W/p.out")"; check processes/status-200 grep -q '^status 200 ' "$W/p.out"
WHY="$(head -c 300 "$W/processes.json")"; check processes/lists-the-app jq -se "length == 1 and (.[0] | any(.[]; .pid == $APID))" "$W/processes.json"
HWM_SMALL=$(sed -n 's/.*hwm-kb \([0-9]*\).*/\1/p' "$W/p.out")

# the 101 and the port prefix frames in ONE write (an upgrading proxy may deliver them so): the head's
# text check must stop at its end, and the frames after it go to the pump
forward shop orders-coalesced '"coalesce":true'
drv shop orders-coalesced 52323 get /processes "$W/coalesced.json" "$ATOK" > "$W/c.out" 2>&1
WHY="$(grep orders-coalesced "$W/api.log")"; check coalesced/one-write grep -q 'WS shop/orders-coalesced open v4.channel.k8s.io ports=52323 coalesced$' "$W/api.log"
WHY="$(cat "$W/c.out")"; check coalesced/status-200 grep -q '^status 200 ' "$W/c.out"
WHY="$(head -c 300 "$W/coalesced.json")"; check coalesced/lists-the-app jq -se "length == 1 and (.[0] | any(.[]; .pid == $APID))" "$W/coalesced.json"
WHY="$(grep 'WS shop/orders-1 open' "$W/api.log" | head -2)"; check split/two-writes bash -c "grep 'WS shop/orders-1 open' '$W/api.log' | grep -qv coalesced"

forward shop orders-dump "\"tee\":\"$W/tee.http\""
drv shop orders-dump 52323 get "/dump?pid=$APID" "$W/pf.dmp" "$ATOK" > "$W/d.out" 2>&1
WHY="$(cat "$W/d.out")"; check dump/status-200 grep -q '^status 200 ' "$W/d.out"
BYTES=$(sed -n 's/.*bytes \([0-9]*\).*/\1/p' "$W/d.out")
WHY="only ${BYTES:-0} bytes"; check dump/hundreds-of-mb test "${BYTES:-0}" -gt 100000000
WHY="$(file "$W/pf.dmp" 2>&1)"; check dump/elf-core bash -c "file '$W/pf.dmp' | grep -q 'ELF.*core file'"
"$PY" - "$W/tee.http" "$W/direct.dmp" << 'EOF'
import http.client, sys
class Sock:  # the tee holds the agent's whole HTTP answer as it left the pod's port
    def __init__(self, f): self.f = f
    def makefile(self, *a, **k): return self.f
r = http.client.HTTPResponse(Sock(open(sys.argv[1], "rb")))
r.begin()
with open(sys.argv[2], "wb") as o:
    while (b := r.read(1 << 20)):
        o.write(b)
EOF
WHY="$(ls -l "$W/pf.dmp" "$W/direct.dmp" 2>&1 | tr '\n' ' ')"; check dump/byte-exact cmp -s "$W/pf.dmp" "$W/direct.dmp"
HWM_DUMP=$(sed -n 's/.*hwm-kb \([0-9]*\).*/\1/p' "$W/d.out")
WHY="peak RSS ${HWM_DUMP:-?} kB for the dump, ${HWM_SMALL:-?} kB for /processes"
check dump/rss-flat test $((${HWM_DUMP:-999999} - ${HWM_SMALL:-0})) -lt 8192
echo "# dump: ${BYTES:-?} bytes through the tunnel; driver peak RSS ${HWM_DUMP:-?} kB (${HWM_SMALL:-?} kB for /processes)"
rm -f "$W/pf.dmp" "$W/direct.dmp" "$W/tee.http" "$W"/dumps/*.dmp 2> /dev/null

# --- 20 at once -----------------------------------------------------------------------------------
drv shop orders-1 52323 many 20 /processes "$ATOK" > "$W/many.out" 2>&1
WHY="$(head -c 500 "$W/many.out")"; check many/all-answered grep -qx 'ok 20 of 20' "$W/many.out"
WHY="$(grep -c 'WS shop/orders-1 open' "$W/api.log") WebSockets opened"
check many/twenty-websockets test "$(grep -c 'WS shop/orders-1 open' "$W/api.log")" -ge 22

# --- the pod's port closed: the kubelet's reason ----------------------------------------------------
drv shop nowhere 52323 get /processes "$W/x.json" "$ATOK" > "$W/r.out" 2>&1
RC=$?
WHY="exit $RC: $(cat "$W/r.out")"; check refused/fails test "$RC" = 1
WHY="$(cat "$W/r.out")"
check refused/explained grep -q "^explain: the port-forward to shop/nowhere:52323 ended: error forwarding port 52323 to pod [0-9a-f]*, uid : .*connect: connection refused" "$W/r.out"

# --- the API server refuses ------------------------------------------------------------------------
TOKFILE=$W/bad-token drv shop orders-1 52323 dial > "$W/401.out" 2>&1
WHY="$(cat "$W/401.out")"; check auth/401 grep -q '^dial -10: port-forward to shop/orders-1:52323: the API server answered 401 Unauthorized: Unauthorized$' "$W/401.out"
MSG='pods "orders-1" is forbidden: User "alice" cannot create resource "pods/portforward" in API group "" in the namespace "shop"'
jq -n --arg m "$MSG" '{method: "GET", path: "/api/v1/namespaces/shop/pods/orders-1/portforward", action: "status", status: 403, message: $m}' |
	curl -sf --cacert "$W/ca.crt" -X POST "$API/__fake/fault" -d @- > /dev/null
drv shop orders-1 52323 dial > "$W/403.out" 2>&1
WHY="$(cat "$W/403.out")"; check auth/403 grep -qF "dial -10: port-forward to shop/orders-1:52323: the API server answered 403 Forbidden: $MSG" "$W/403.out"
WHY="$(cat "$W/403.out" "$W/401.out")"; check auth/no-token-shown bash -c "! grep -qF '$(cat "$W/token")' '$W/403.out' '$W/401.out'"

# --- the caller closes early -----------------------------------------------------------------------
forward shop orders-early
drv shop orders-early 52323 early > "$W/e.out" 2>&1
WHY="$(cat "$W/e.out")"; check early/thread-gone grep -qx 'threads 1' "$W/e.out"
WHY="$(grep orders-early "$W/api.log")"; check early/server-saw-close wait_for "$W/api.log" 'WS shop/orders-early closed by the client' 5

# --- a frame over the cap ----------------------------------------------------------------------------
forward shop orders-big '"oversize":2097152'
drv shop orders-big 52323 get /processes "$W/x.json" "$ATOK" > "$W/o.out" 2>&1
RC=$?
WHY="exit $RC: $(cat "$W/o.out")"; check oversize/fails test "$RC" = 1
WHY="$(cat "$W/o.out")"
check oversize/explained grep -q '^explain: the port-forward to shop/orders-big:52323 failed: the API server sent a WebSocket frame of 2097153 bytes, over the cap of 1048576$' "$W/o.out"
