#!/usr/bin/env bash
# webc.sh - the egress process's HTTP/1.1 client (cloud/webc.c, webc_resp.c, webc_tls.c) through
# tests/integration/webc_driver.c against Python's own http.server (tests/integration/webc_server.py:
# ThreadingHTTPServer, HTTP/1.1 keep-alive, its ssl module for TLS), with a test CA made by openssl.
# No real object store is needed here: S3 and Azure over webc are tested by the egress's own tests.
# Results:
#   plain/*     answers with Content-Length, chunked (extension, trailer), read-to-close, HEAD, 204,
#               a 100 before the 200; the kept headers and only those; the request's head as the server
#               read it (Host with the port, Content-Length, Connection: keep-alive, our header)
#   upload/*    a 50 MB body streamed by body_fn arrives whole (length and sha256 as the server counted);
#               a server answering 403 before reading a 50 MB body: the 403 is returned
#   keepalive/* 20 requests on one connection (the server saw one); a connection the server closed
#               while idle is reopened; one closed as the request went out is retried once on a new one
#               (the server read the request twice); a streamed body already taken is not resent
#   caps/*      max_resp: at the cap answered, past it DP_ETOOBIG (by length, chunked, to close)
#   timeout/*   a server that reads and never answers: io_timeout_ms fires within its margin; one that
#               sends its answer a byte at a time (each read within io_timeout_ms): answer_timeout_ms ends it
#   allow/*     an allowlist refusing the host's address: no connection reached the server; allowed: answered
#   tls/*       verified against ca_file (SNI sent), an IP literal (no SNI); refused: another CA, the system
#               bundle, a certificate for another name or address, a server stopping at TLS 1.1; insecure
#               passes another CA; SSL_CERT_FILE; keep-alive and a 50 MB upload over TLS; read-to-close
#               without close_notify refused
#   static/*    the same client linked statically (OpenSSL from libssl.a through
#               build/static/tlsbase_linked.o, as build/static/diagport is): verified, refused for another
#               CA and another name
#   proxy/*     through tests/integration/webc_proxy.py: https by a CONNECT tunnel (its target, the
#               Proxy-Authorization from the proxy URL's user and password, one tunnel for two requests,
#               SNI through it), http as an absolute-form request, a 403 to CONNECT named, socks refused
#   secrets/*   a failing request's message holds neither a header's value nor the query
set -u
cd "$(dirname "$0")/../.."
T_NAME=webc
. tests/lib.sh
agent_setup webc
PY=/usr/bin/python3
OSSL=/usr/bin/openssl
for tool in "$OSSL" "$PY" sha256sum file; do
	command -v "$tool" > /dev/null || { fail prerequisites "$tool is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done
make -s "$B/static/tlsbase_linked.o" > "$W/make.log" 2>&1 || { fail build "$(tail -3 "$W/make.log")"; exit 0; }
PKGS="jansson yaml-0.1 zlib libseccomp"
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -Icommon -o "$W/driver" tests/integration/webc_driver.c "$B/libdiagport.a" \
	$(pkg-config --libs $PKGS) -lpthread 2> "$W/cc.log" || { fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }
# shellcheck disable=SC2046
cc -static -std=c11 -D_GNU_SOURCE -I. -Icommon -o "$W/driver-static" tests/integration/webc_driver.c \
	"$B/static/tlsbase_linked.o" "$B/libdiagport.a" $(pkg-config --static --libs $PKGS openssl) -lpthread \
	2> "$W/cc-static.log" || { fail build-static-driver "$(grep -v warning "$W/cc-static.log" | head -c 300)"; exit 0; }
WHY="$(file "$W/driver-static")"
check static/is-static sh -c "file '$W/driver-static' | grep -q 'statically linked'"

# --- certificates: a test CA, a server certificate for localhost and 127.0.0.1, one for another name
# and address, and another CA
cert() { # NAME CA SAN
	"$OSSL" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/$1.key" -out "$W/$1.csr" \
		-subj "/CN=$1" 2>> "$W/openssl.err" &&
		printf 'subjectAltName=%s\nextendedKeyUsage=serverAuth\n' "$3" > "$W/$1.ext" &&
		"$OSSL" x509 -req -in "$W/$1.csr" -CA "$W/$2.crt" -CAkey "$W/$2.key" -set_serial "$RANDOM" -days 2 \
			-extfile "$W/$1.ext" -out "$W/$1.crt" 2>> "$W/openssl.err"
}
for ca in ca otherca; do
	"$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/$ca.key" -out "$W/$ca.crt" \
		-days 2 -subj "/CN=webc-test-$ca" 2>> "$W/openssl.err" || { fail setup "openssl" "$W/openssl.err"; exit 0; }
done
cert srv ca IP:127.0.0.1,DNS:localhost && cert other ca IP:127.0.0.9,DNS:other.example ||
	{ fail setup "openssl could not make the certificates" "$W/openssl.err"; exit 0; }

server() { # NAME [ARGS]: a server logging to $W/NAME.log; its port in the variable NAME
	"$PY" tests/integration/webc_server.py --ready "$W/$1.port" --log "$W/$1.log" "${@:2}" > "$W/$1.out" 2>&1 &
	PIDS+=($!)
	wait_for "$W/$1.port" . 5
	[ -s "$W/$1.port" ] || { fail setup "the server $1 did not start" "$W/$1.out"; exit 0; }
	printf -v "$1" '%s' "$(cat "$W/$1.port")"
	touch "$W/$1.log"
}
server plain
server tls --cert "$W/srv.crt" --key "$W/srv.key"
server wrongname --cert "$W/other.crt" --key "$W/other.key"
server old --cert "$W/srv.crt" --key "$W/srv.key" --max-tls 1.1
HP=http://127.0.0.1:$plain
HT=https://localhost:$tls
drv() { "$W/driver" "$@" > "$W/out" 2> "$W/err"; }
conns() { grep -c '^conn ' "$W/$1.log"; }
has() { grep -q -- "$1" "$W/out"; }
line() { sed -n "$1p" "$W/out"; }
ms() { line "$1" | sed -n 's/.* ms=\([0-9]*\).*/\1/p'; }

# --- plain HTTP ---------------------------------------------------------------------------------
drv --want etag --want X-AMZ-Request-Id "$HP" GET /cl/10 GET /chunked/5000 GET /close/3000 HEAD /cl/100 GET /204 \
	GET /interim GET /headers
WHY="$(cat "$W/out")"
check plain/content-length grep -q '^1 status=200 len=10 ' "$W/out"
check plain/chunked grep -q '^2 status=200 len=5000 ' "$W/out"
check plain/read-to-close grep -q '^3 status=200 len=3000 ' "$W/out"
check plain/head-no-body grep -q '^4 status=200 len=0 ' "$W/out"
check plain/204 grep -q '^5 status=204 len=0 ' "$W/out"
check plain/interim-skipped grep -q '^6 status=200 len=2 ms=[0-9]*$' "$W/out"
check plain/headers-kept grep -qx '7 status=200 len=1 ms=[0-9]* \[x-amz-request-id: REQ123\] \[etag: "etag-1"\]' "$W/out"
drv --out "$W/body" "$HP" GET /chunked/5000
"$PY" -c 'import sys; sys.stdout.buffer.write(bytes(i % 251 for i in range(5000)))' > "$W/expect"
WHY="the chunked body differs from what the server sent"
check plain/chunked-bytes cmp -s "$W/body" "$W/expect"
drv --out "$W/echo" -H "X-Test: one" --data hello "$HP" PUT /echo
WHY="$(cat "$W/echo")"
check plain/request-head "$PY" -c '
import sys
h = open(sys.argv[1], "rb").read().decode().splitlines()
assert h[0] == "PUT /echo HTTP/1.1", h
hs = [l.lower() for l in h[1:] if l]
assert hs == ["host: 127.0.0.1:%s" % sys.argv[2], "x-test: one", "content-length: 5", "connection: keep-alive"], hs
' "$W/echo" "$plain"
drv "$HP" GET /echo
WHY="$(cat "$W/out")"
check plain/get-no-content-length grep -q '^1 status=200 ' "$W/out"

# --- uploads ------------------------------------------------------------------------------------
head -c 50000000 /dev/urandom > "$W/big"
want="50000000 $(sha256sum "$W/big" | cut -d' ' -f1)"
drv --body-file "$W/big" --out "$W/sha" "$HP" PUT /sha
WHY="driver: $(cat "$W/out"); server counted: $(cat "$W/sha" 2>/dev/null)"
check upload/50MB-streamed-sha256 test "$(cat "$W/sha" 2>/dev/null)" = "$want"
drv --body-file "$W/big" "$HP" PUT /early-403
WHY="$(cat "$W/out")"
check upload/early-403-returned grep -q '^1 status=403 len=6 ' "$W/out"
drv --body-file "$W/big" --body-fail-at 1000000 "$HP" PUT /sha GET /cl/1
WHY="$(cat "$W/out")"
check upload/source-failure-abandons grep -q "^1 error=input/output error .*body's source failed" "$W/out"
check upload/next-request-works grep -q '^2 status=200 len=1 ' "$W/out"

# --- keep-alive ---------------------------------------------------------------------------------
before=$(conns plain)
args=()
for i in $(seq 1 20); do args+=(GET "/cl/$i"); done
drv "$HP" "${args[@]}"
WHY="$(tail -2 "$W/out"); connections: $(($(conns plain) - before))"
check keepalive/20-requests-one-connection test "$(grep -c 'status=200' "$W/out"):$(($(conns plain) - before))" = 20:1
before=$(conns plain)
drv "$HP" GET /close-after GET /cl/2
WHY="$(cat "$W/out"); connections: $(($(conns plain) - before))"
check keepalive/closed-while-idle-reopened test "$(grep -c 'status=200' "$W/out"):$(($(conns plain) - before))" = 2:2
before=$(conns plain)
drv "$HP" GET /drop-next GET /cl/77
WHY="$(cat "$W/out"); server: $(tail -5 "$W/plain.log" | tr '\n' ' ')"
check keepalive/closed-unanswered-retried test "$(line 2 | cut -d' ' -f2-3):$(($(conns plain) - before)):$(grep -c '^req GET /cl/77$' "$W/plain.log")" \
	= "status=200 len=77:2:2"
drv --data small-body --out "$W/sha" "$HP" GET /drop-next PUT /sha?mem
WHY="$(cat "$W/out"); the server read it $(grep -c '^req PUT /sha?mem$' "$W/plain.log") times"
check keepalive/memory-body-retried test "$(cat "$W/sha"):$(grep -c '^req PUT /sha?mem$' "$W/plain.log")" = \
	"10 $(printf small-body | sha256sum | cut -d' ' -f1):2"
drv --body-file "$W/big" "$HP" GET /drop-next PUT /sha?stream
WHY="$(cat "$W/out"); the server read it $(grep -c '^req PUT /sha?stream$' "$W/plain.log") times"
check keepalive/streamed-body-not-resent test "$(grep -c '^2 error=input/output error .*streamed body cannot be sent again' \
	"$W/out"):$(grep -c '^req PUT /sha?stream$' "$W/plain.log")" = 1:1

# --- caps and timeouts --------------------------------------------------------------------------
drv --max-resp 100 "$HP" GET /cl/100 GET /cl/101 GET /chunked/101 GET /close/101 GET /cl/1
WHY="$(cat "$W/out")"
check caps/at-the-cap grep -q '^1 status=200 len=100 ' "$W/out"
check caps/content-length-over grep -q "^2 error=input too large .*the answer's body (101 bytes) is over the cap of 100" "$W/out"
check caps/chunked-over grep -q '^3 error=input too large' "$W/out"
check caps/to-close-over grep -q '^4 error=input too large' "$W/out"
check caps/connection-usable-after grep -q '^5 status=200 len=1 ' "$W/out"
drv --io-timeout 700 "$HP" GET /stall
t=$(ms 1)
WHY="$(cat "$W/out")"
check timeout/io-timeout-fires test "${t:-0}" -ge 690 -a "${t:-99999}" -le 1500
check timeout/says-so grep -q 'no progress waiting for the answer within 700 ms' "$W/out"
drv --io-timeout 700 --answer-timeout 1500 "$HP" GET /drip
t=$(ms 1)
WHY="$(cat "$W/out")"
check timeout/slow-drip-bounded test "${t:-0}" -ge 1490 -a "${t:-99999}" -le 2500
check timeout/slow-drip-says-so grep -q 'the answer did not come whole within 1.5 s' "$W/out"
refused_port
drv "http://127.0.0.1:$RP" GET /
WHY="$(cat "$W/out")"
check timeout/refused-connect grep -q 'cannot connect to 127.0.0.1 port' "$W/out"

# --- the allowlist ------------------------------------------------------------------------------
before=$(conns plain)
drv --allow 10.1.2.3,::2 "http://localhost:$plain" GET /cl/1
WHY="$(cat "$W/out" "$W/err"); connections: $(($(conns plain) - before))"
check allow/refused-never-connected test "$(($(conns plain) - before))" = 0 -a "$(grep -c ' no (localhost)$' "$W/err")" -ge 1
check allow/refused-error grep -q '^1 error=input/output error .*no address of localhost is allowed' "$W/out"
drv --allow 127.0.0.1 "http://localhost:$plain" GET /cl/1
WHY="$(cat "$W/out" "$W/err")"
check allow/allowed-answered grep -q '^1 status=200 len=1 ' "$W/out"

# --- TLS ----------------------------------------------------------------------------------------
drv --ca "$W/ca.crt" "$HT" GET /cl/10 GET /chunked/3000 GET /cl/3
WHY="$(cat "$W/out"); $(cat "$W/tls.log" | tr '\n' ' ')"
check tls/verified test "$(grep -c 'status=200' "$W/out"):$(conns tls)" = 3:1
check tls/sni-sent grep -qx 'sni localhost' "$W/tls.log"
nosni=$(grep -c '^sni None$' "$W/tls.log")
drv --ca "$W/ca.crt" "https://127.0.0.1:$tls" GET /cl/10
WHY="$(cat "$W/out"); $(tail -3 "$W/tls.log" | tr '\n' ' ')"
check tls/ip-literal-verified-no-sni test "$(line 1 | cut -d' ' -f2):$(($(grep -c '^sni None$' "$W/tls.log") - nosni))" = status=200:1
drv --ca "$W/otherca.crt" "$HT" GET /cl/10
WHY="$(cat "$W/out")"
check tls/wrong-ca-refused grep -q 'not trusted: unable to get local issuer certificate' "$W/out"
drv "$HT" GET /cl/10
WHY="$(cat "$W/out")"
check tls/system-bundle-refuses-test-ca grep -q 'not trusted' "$W/out"
SSL_CERT_FILE=$W/ca.crt drv "$HT" GET /cl/10
WHY="$(cat "$W/out")"
check tls/ssl-cert-file grep -q '^1 status=200 len=10 ' "$W/out"
drv --ca "$W/ca.crt" "https://localhost:$wrongname" GET /cl/10
WHY="$(cat "$W/out")"
check tls/wrong-name-refused grep -q 'not trusted: hostname mismatch' "$W/out"
drv --ca "$W/ca.crt" "https://127.0.0.1:$wrongname" GET /cl/10
WHY="$(cat "$W/out")"
check tls/wrong-address-refused grep -q 'not trusted: IP address mismatch' "$W/out"
drv --insecure "https://localhost:$wrongname" GET /cl/10
WHY="$(cat "$W/out")"
check tls/insecure-passes grep -q '^1 status=200 len=10 ' "$W/out"
drv --insecure "https://localhost:$old" GET /cl/10
WHY="$(cat "$W/out")"
check tls/tls11-refused grep -q 'protocol version' "$W/out"
drv --ca "$W/ca.crt" --body-file "$W/big" --out "$W/sha" "$HT" PUT /sha
WHY="driver: $(cat "$W/out"); server counted: $(cat "$W/sha" 2>/dev/null)"
check tls/50MB-streamed-sha256 test "$(cat "$W/sha" 2>/dev/null)" = "$want"
drv --ca "$W/ca.crt" "$HT" GET /close/100
WHY="$(cat "$W/out")"
check tls/unclean-close-refused grep -q 'without close_notify' "$W/out"

# --- the static build's TLS ---------------------------------------------------------------------
sdrv() { "$W/driver-static" "$@" > "$W/out" 2> "$W/err"; }
sdrv --ca "$W/ca.crt" "$HT" GET /cl/10 GET /cl/20
WHY="$(cat "$W/out" "$W/err")"
check static/verified test "$(grep -c 'status=200' "$W/out")" = 2
sdrv --ca "$W/otherca.crt" "$HT" GET /cl/10
WHY="$(cat "$W/out")"
check static/wrong-ca-refused grep -q 'not trusted: unable to get local issuer certificate' "$W/out"
sdrv --ca "$W/ca.crt" "https://localhost:$wrongname" GET /cl/10
WHY="$(cat "$W/out")"
check static/wrong-name-refused grep -q 'not trusted: hostname mismatch' "$W/out"

# --- through an HTTP proxy (tests/integration/webc_proxy.py) --------------------------------------
"$PY" tests/integration/webc_proxy.py --ready "$W/proxy.port" --log "$W/proxy.log" --deny localhost.localdomain \
	> "$W/proxy.out" 2>&1 &
PIDS+=($!)
for _ in $(seq 1 100); do [ -s "$W/proxy.port" ] && break; sleep 0.05; done
[ -s "$W/proxy.port" ] || { fail setup "the proxy did not start" "$W/proxy.out"; exit 0; }
PX=http://127.0.0.1:$(cat "$W/proxy.port")
touch "$W/proxy.log"
drv --ca "$W/ca.crt" --proxy "http://u%40x:p%3Aw@${PX#http://}" "$HT" GET /cl/10 GET /cl/20
WHY="$(cat "$W/out" "$W/proxy.log")"
check proxy/https-through-connect test "$(grep -c 'status=200' "$W/out")" = 2
check proxy/connect-target-and-auth grep -qx "CONNECT localhost:$tls auth=Basic dUB4OnA6dw==" "$W/proxy.log"
check proxy/one-tunnel-kept-alive test "$(grep -c '^CONNECT' "$W/proxy.log")" = 1
check proxy/sni-through-tunnel grep -q '^sni localhost' "$W/tls.log"
drv --proxy "$PX" "$HP" GET /cl/5
WHY="$(cat "$W/out" "$W/proxy.log")"
check proxy/http-absolute-form grep -q '^1 status=200 len=5 ' "$W/out"
check proxy/http-request-line grep -qx "FORWARD GET http://127.0.0.1:$plain/cl/5 auth=-" "$W/proxy.log"
drv --ca "$W/ca.crt" --proxy "$PX" "https://localhost.localdomain:$tls" GET /cl/10
WHY="$(cat "$W/out")"
check proxy/connect-refused-named grep -q 'answered CONNECT with HTTP 403' "$W/out"
drv --proxy "socks5://127.0.0.1:1" "$HT" GET /cl/10
WHY="$(cat "$W/out")"
check proxy/socks-refused grep -q "^open error: the proxy socks5 is not an http:// proxy" "$W/out"

# --- secrets stay out of messages ---------------------------------------------------------------
drv --io-timeout 300 -H "Authorization: Bearer sekrit-token-1" "$HP" GET "/stall?X-Amz-Signature=sekrit-sig-2"
WHY="$(cat "$W/out")"
check secrets/failed-request-names-path grep -q "GET http://127.0.0.1:$plain/stall: no progress" "$W/out"
check secrets/no-header-no-query sh -c "! grep -q sekrit '$W/out' '$W/err'"
