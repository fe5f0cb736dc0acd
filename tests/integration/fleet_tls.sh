#!/usr/bin/env bash
# fleet_tls.sh - the fleet client and https agents (issue 33, item 4): a real agent serving https (a test CA)
# and plain http on every address, called by `diagport ps` and `diagport capture`:
#   verify/*    --cacert CA: verified and called; without it (the system's store) or with another CA: the agent
#               is unavailable, "certificate verification failed", and no answer is taken; --cacert is that CA
#               alone (a CA in the system's directory, swapped in a mount namespace, is not also trusted)
#   name/*      an agent whose certificate names a service (agents.internal.example.com), reached by address: refused
#               for the name, ready with --tls-server-name (or a targets file's servername=), a wrong name refused;
#               servername= on http:// and a bad name: exit 2
#   plain/*     a token over plain http:// to an address beyond loopback: exit 2 before any request, the message
#               saying why and how (https, --insecure-http), nothing received by the agent; with --insecure-http
#               it is sent; loopback http is allowed as before
set -u
cd "$(dirname "$0")/../.."
T_NAME=fleet-tls
. tests/lib.sh
agent_setup fleettls
O=/usr/bin/openssl
TOK=fleet-tls-token-0123456789
printf '%s\n' "$TOK" > "$W/token"
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$W/ext"
for ca in ca other; do
	"$O" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/$ca.key" -out "$W/$ca.crt" -days 2 \
		-subj "/CN=$ca" 2>> "$W/openssl.err" || { fail certs openssl "$W/openssl.err"; exit 0; }
done
"$O" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/agent.key" -out "$W/agent.csr" -subj /CN=agent \
	2>> "$W/openssl.err" &&
	"$O" x509 -req -in "$W/agent.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 5 -days 2 -extfile "$W/ext" \
		-out "$W/agent.crt" 2>> "$W/openssl.err" || { fail certs openssl "$W/openssl.err"; exit 0; }
# a non-loopback address of this machine, for "beyond loopback"
IP=$(ip -4 -o addr show scope global 2> /dev/null | awk '{ sub("/.*", "", $4); print $4; exit }')
[ -n "$IP" ] || { fail setup "no global IPv4 address on this machine"; exit 0; }

DIAGPORT_TLS_CERT=$W/agent.crt DIAGPORT_TLS_KEY=$W/agent.key \
	"$D" launch --no-metrics --socket "$W/port" --dumps "$W" --urls "https://127.0.0.1:0;http://0.0.0.0:0" \
	--auth-token-file "$W/token" 2> "$W/agent.log" &
AG=$!; PIDS+=($AG)
P=$(listening_port "$W/agent.log" urls 20 "$AG") || { fail agent-start "$(tail -c 400 "$W/agent.log")"; exit 0; }
Q=$(grep -m1 '"event":"listening"' "$W/agent.log" | sed -n 's/.*http:\/\/0\.0\.0\.0:\([0-9]*\).*/\1/p')

# --- verification
ps_json() { "$D" ps "$@" --token-file "$W/token" -o json 2> "$W/ps.err"; }
r=$(ps_json --target "https://127.0.0.1:$P" --cacert "$W/ca.crt")
WHY="$r $(cat "$W/ps.err")"; check verify/cacert-ready jq -e '.items[0].state == "ready"' <<< "$r"
r=$(ps_json --target "https://127.0.0.1:$P")
WHY="$r"; check verify/system-store-refuses jq -e '.items[0].state == "unavailable" and (.items[0].reason | test("certificate verif"))' <<< "$r"
r=$(ps_json --target "https://127.0.0.1:$P" --cacert "$W/other.crt")
WHY="$r"; check verify/other-ca-refuses jq -e '.items[0].state == "unavailable" and (.items[0].reason | test("certificate verif"))' <<< "$r"
"$D" ps --target "https://127.0.0.1:$P" --cacert "$W/nope.crt" --token-file "$W/token" > /dev/null 2> "$W/nocafile.err"; rc=$?
WHY="exit $rc: $(cat "$W/nocafile.err")"; check verify/missing-cacert-exit-2 bash -c "[ $rc = 2 ] && grep -q -- '--cacert $W/nope.crt: No such file' '$W/nocafile.err'"
"$D" capture stacks --target "https://127.0.0.1:$P" --cacert "$W/ca.crt" --token-file "$W/token" -o "$W/out" > "$W/cap.out" 2>&1; rc=$?
WHY="exit $rc: $(tail -3 "$W/cap.out")"; check verify/capture-over-https bash -c "[ $rc != 2 ] && ! grep -qi 'certificate' '$W/cap.out'"

# --- --cacert is that CA alone: a CA in the system's directory (a public one, a TLS-inspecting proxy's) that signed
# the agent's certificate is not trusted with it. The directory is replaced in a mount namespace of this test's own.
"$O" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/pub.key" -out "$W/pub.crt" -days 2 \
	-subj /CN=some-public-ca 2>> "$W/openssl.err"
"$O" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ev.key" -out "$W/ev.csr" -subj /CN=ev \
	2>> "$W/openssl.err" &&
	"$O" x509 -req -in "$W/ev.csr" -CA "$W/pub.crt" -CAkey "$W/pub.key" -set_serial 6 -days 2 -extfile "$W/ext" \
		-out "$W/ev.crt" 2>> "$W/openssl.err" || { fail certs openssl "$W/openssl.err"; exit 0; }
mkdir -p "$W/store" && cp "$W/pub.crt" "$W/store/" && ln -s pub.crt "$W/store/$("$O" x509 -hash -noout -in "$W/pub.crt").0"
DIAGPORT_TLS_CERT=$W/ev.crt DIAGPORT_TLS_KEY=$W/ev.key "$D" launch --no-metrics --socket "$W/port-ev" --dumps "$W" \
	--urls "https://127.0.0.1:0" --auth-token-file "$W/token" 2> "$W/agent-ev.log" &
EV=$!; PIDS+=($EV)
EP=$(listening_port "$W/agent-ev.log" urls 20 "$EV") || { fail agent-start-ev "$(tail -c 400 "$W/agent-ev.log")"; exit 0; }
in_store() { unshare -m sh -c 'mount --bind "$1" /etc/ssl/certs && shift && exec "$@"' sh "$W/store" "$@"; }
r=$(in_store "$D" ps --target "https://127.0.0.1:$EP" --token-file "$W/token" -o json 2> "$W/ps.err")
WHY="$r $(cat "$W/ps.err")"; check verify/store-trusted-without-cacert jq -e '.items[0].state == "ready"' <<< "$r"
r=$(in_store "$D" ps --target "https://127.0.0.1:$EP" --cacert "$W/ca.crt" --token-file "$W/token" -o json 2> "$W/ps.err")
WHY="$r $(cat "$W/ps.err")"
check verify/cacert-alone jq -e '.items[0].state == "unavailable" and (.items[0].reason | test("certificate verif"))' <<< "$r"
kill "$EV"

# --- --tls-server-name (and a targets file's servername=): the name an agent reached by address must bear, as
# one certificate for every task of a service names the service, not each address
printf 'subjectAltName=DNS:agents.internal.example.com\nextendedKeyUsage=serverAuth\n' > "$W/ext-name"
"$O" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/named.key" -out "$W/named.csr" -subj /CN=agents \
	2>> "$W/openssl.err" &&
	"$O" x509 -req -in "$W/named.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 8 -days 2 -extfile "$W/ext-name" \
		-out "$W/named.crt" 2>> "$W/openssl.err" || { fail certs openssl "$W/openssl.err"; exit 0; }
DIAGPORT_TLS_PEM="$(cat "$W/named.crt" "$W/named.key")" "$D" launch --no-metrics --socket "$W/port-named" --dumps "$W" \
	--urls "https://127.0.0.1:0" --auth-token-file "$W/token" 2> "$W/agent-named.log" &
NA=$!; PIDS+=($NA)
NP=$(listening_port "$W/agent-named.log" urls 20 "$NA") || { fail agent-start-named "$(tail -c 400 "$W/agent-named.log")"; exit 0; }
r=$(ps_json --target "https://127.0.0.1:$NP" --cacert "$W/ca.crt")
WHY="$r"; check name/address-refused jq -e '.items[0].state == "unavailable" and (.items[0].reason | test("does not match.*give --tls-server-name NAME"))' <<< "$r"
r=$(ps_json --target "https://127.0.0.1:$NP" --cacert "$W/ca.crt" --tls-server-name agents.internal.example.com)
WHY="$r $(cat "$W/ps.err")"; check name/server-name-ready jq -e '.items[0].state == "ready"' <<< "$r"
r=$(ps_json --target "https://127.0.0.1:$NP" --cacert "$W/ca.crt" --tls-server-name other.internal.example.com)
WHY="$r"; check name/wrong-name-refused jq -e '.items[0].state == "unavailable" and (.items[0].reason | test("does not match"))' <<< "$r"
"$D" capture stacks --target "https://127.0.0.1:$NP" --cacert "$W/ca.crt" --tls-server-name agents.internal.example.com \
	--token-file "$W/token" -o "$W/named-out" > "$W/named-cap.out" 2>&1; rc=$?
WHY="exit $rc: $(tail -3 "$W/named-cap.out")"; check name/capture bash -c "[ $rc != 2 ] && ! grep -qi 'certificate\|does not match' '$W/named-cap.out'"
printf 'https://127.0.0.1:%s name=named servername=agents.internal.example.com\n' "$NP" > "$W/targets"
r=$("$D" ps --targets-file "$W/targets" --cacert "$W/ca.crt" --token-file "$W/token" -o json 2> "$W/ps.err")
WHY="$r $(cat "$W/ps.err")"; check name/targets-file-servername jq -e '.items[0].state == "ready"' <<< "$r"
printf 'http://127.0.0.1:%s servername=agents.internal.example.com\n' "$NP" > "$W/targets-http"
"$D" ps --targets-file "$W/targets-http" --token-file "$W/token" > /dev/null 2> "$W/sn-http.err"; rc=$?
WHY="exit $rc: $(cat "$W/sn-http.err")"; check name/servername-needs-https bash -c "[ $rc = 2 ] && grep -q 'goes with an https:// URL only' '$W/sn-http.err'"
"$D" ps --target "https://127.0.0.1:$NP" --tls-server-name 'a..b' --token-file "$W/token" > /dev/null 2> "$W/sn-bad.err"; rc=$?
WHY="exit $rc: $(cat "$W/sn-bad.err")"; check name/bad-name-exit-2 bash -c "[ $rc = 2 ] && grep -q 'tls-server-name a..b: not a DNS name' '$W/sn-bad.err'"
"$D" ps --target "https://127.0.0.1:$NP" --tls-server-name 2130706433 --token-file "$W/token" > /dev/null 2> "$W/sn-num.err"; rc=$?
WHY="exit $rc: $(cat "$W/sn-num.err")"; check name/numeric-name-exit-2 test "$rc" = 2
# the URL's path prefix is kept (the agent answers 404 under it), and the port is the authority's, not one in the path
r=$(ps_json --target "https://127.0.0.1:$NP/prefix" --cacert "$W/ca.crt" --tls-server-name agents.internal.example.com)
WHY="$r"; check name/path-kept jq -e '.items[0].reason | test("no route /prefix/processes")' <<< "$r"
r=$(ps_json --target "https://127.0.0.1/a:$NP" --cacert "$W/ca.crt" --tls-server-name agents.internal.example.com)
WHY="$r"; check name/port-from-authority jq -e '.items[0].state == "unavailable" and (.items[0].reason | test(":443|port 443"))' <<< "$r"

# a listener on the same kind of address that records every connection made to it
python3 -c '
import socket, sys
s = socket.socket(); s.bind((sys.argv[1], 0)); s.listen(8)
print(s.getsockname()[1], flush=True)
while True:
    c, _ = s.accept(); open(sys.argv[2], "a").write("connected\n"); c.close()
' "$IP" "$W/rec.log" > "$W/rec.port" & PIDS+=($!)
eventually 5 test -s "$W/rec.port"
R=$(cat "$W/rec.port")
"$D" ps --target "http://$IP:$R" --token-file "$W/token" > /dev/null 2>&1
WHY="$(cat "$W/rec.log" 2> /dev/null)"; check plain/nothing-sent test ! -e "$W/rec.log"
"$D" ps --target "http://$IP:$R" --token-file "$W/token" --insecure-http > /dev/null 2>&1
WHY="the recorder saw nothing even when told to send"; check plain/recorder-bites eventually 5 test -s "$W/rec.log"
"$D" ps --target "http://$IP:$Q" --token-file "$W/token" > "$W/plain.out" 2> "$W/plain.err"; rc=$?
WHY="exit $rc: $(cat "$W/plain.err")"
check plain/refused-exit-2 bash -c "[ $rc = 2 ] && grep -q 'http://$IP:$Q is plain http beyond this machine: its token would cross the network in clear text' '$W/plain.err' && grep -q -- '--insecure-http' '$W/plain.err'"
"$D" capture stacks --target "http://$IP:$Q" --token-file "$W/token" -o "$W/out2" > /dev/null 2> "$W/plain2.err"; rc=$?
WHY="exit $rc: $(cat "$W/plain2.err")"; check plain/capture-refused-exit-2 bash -c "[ $rc = 2 ] && [ ! -e '$W/out2' ]"
r=$(ps_json --target "http://$IP:$Q" --insecure-http)
WHY="$r $(cat "$W/ps.err")"; check plain/insecure-http-sends jq -e '.items[0].state == "ready"' <<< "$r"
r=$(ps_json --target "http://127.0.0.1:$Q")
WHY="$r $(cat "$W/ps.err")"; check plain/loopback-allowed jq -e '.items[0].state == "ready"' <<< "$r"
# user information before the host: "http://[::1]@HOST" goes to HOST, not loopback: refused, nothing sent
rm -f "$W/rec.log"
"$D" ps --target "http://[::1]@$IP:$R" --token-file "$W/token" > /dev/null 2> "$W/userinfo.err"; rc=$?
WHY="exit $rc: $(cat "$W/userinfo.err"); recorder: $(cat "$W/rec.log" 2> /dev/null)"
check plain/userinfo-not-loopback bash -c "[ $rc = 2 ] && [ ! -e '$W/rec.log' ]"
# nor $https_proxy for an agent on loopback reached with --tls-server-name (the proxy is decided on the address)
rm -f "$W/rec.log"
r=$(https_proxy=http://$IP:$R HTTPS_PROXY=http://$IP:$R ps_json --target "https://127.0.0.1:$NP" --cacert "$W/ca.crt" \
	--tls-server-name agents.internal.example.com)
WHY="$r; the proxy saw: $(cat "$W/rec.log" 2> /dev/null)"
check name/loopback-not-proxied bash -c "[ ! -e '$W/rec.log' ] && jq -e '.items[0].state == \"ready\"' <<< '$r' > /dev/null"
kill "$NA"
# $http_proxy is not used for an agent on loopback: the token does not go to the proxy (the recorder as the proxy)
r=$(http_proxy=http://$IP:$R HTTP_PROXY=http://$IP:$R ps_json --target "http://127.0.0.1:$Q")
WHY="$r; the proxy saw: $(cat "$W/rec.log" 2> /dev/null)"
check plain/loopback-not-proxied bash -c "[ ! -e '$W/rec.log' ] && jq -e '.items[0].state == \"ready\"' <<< '$r' > /dev/null"
DIAGPORT_TOKEN=$TOK "$D" ps --target "http://$IP:$Q" > /dev/null 2> "$W/plain3.err"; rc=$?
WHY="exit $rc: $(cat "$W/plain3.err")"; check plain/env-token-refused-too test "$rc" = 2
r=$("$D" ps --target "http://$IP:$Q" -o json 2> /dev/null)
WHY="$r"; check plain/no-token-no-refusal jq -e '.items[0].state == "unavailable" or .items[0].state == "ready"' <<< "$r"
kill "$AG"
