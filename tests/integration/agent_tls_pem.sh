#!/usr/bin/env bash
# agent_tls_pem.sh - the agent's https:// URLs with the certificate chain and key given as PEM text (tlsPem,
# DIAGPORT_TLS_PEM: an ECS secret's value) instead of files (issue 33, item 4), with real clients (curl --cacert,
# openssl s_client) and certificates made by openssl (a root CA, an intermediate CA, the server's):
#   serve/*   leaf, intermediate, key in DIAGPORT_TLS_PEM: curl and s_client trusting the root only verify (the
#             intermediate comes from the agent); the key first and the certificates after it works too; the
#             metrics listener (--metrics-urls https://) gets the same certificate; the settings file (a YAML block
#             scalar) and key-per-file (a file named tlsPem) forms bind
#   secret/*  after start the agent's /proc/PID/environ holds DIAGPORT_TLS_PEM with its value wiped; the log names
#             where the text came from and holds none of it
#   refuse/*  exit 2, nothing listening, a message naming tlsPem and where it came from and never a line of a key:
#             tlsPem with a certificate or key file (or their password), text without a certificate, a certificate
#             that does not parse, text without a key, an encrypted key, a key that does not parse, a key that
#             is not the first certificate's (a mismatched key; the intermediate before the leaf), text over
#             64 KiB, and an https URL with neither tlsPem nor files
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-tls-pem
. tests/lib.sh
agent_setup tlspem
O=/usr/bin/openssl
TOK=tls-pem-test-token-0123456789
printf '%s\n' "$TOK" > "$W/token"
H=(-H "Authorization: Bearer $TOK")

# --- certificates: root CA -> intermediate CA -> the agent's (serial 0x51); a key of no one's
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$W/leaf.ext"
printf 'basicConstraints=critical,CA:true\nkeyUsage=critical,keyCertSign,cRLSign\n' > "$W/ca.ext"
key() { "$O" genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out "$W/$1.key" 2>> "$W/openssl.err"; }
sign() { # NAME CN ISSUER SERIAL EXT
	"$O" req -new -key "$W/$1.key" -subj "/CN=$2" -out "$W/$1.csr" 2>> "$W/openssl.err" &&
		"$O" x509 -req -in "$W/$1.csr" -CA "$W/$3.crt" -CAkey "$W/$3.key" -set_serial "$4" -days 2 \
			-extfile "$W/$5" -out "$W/$1.crt" 2>> "$W/openssl.err"
}
{ key root && "$O" req -x509 -key "$W/root.key" -subj /CN=root -days 2 -out "$W/root.crt" 2>> "$W/openssl.err" &&
	key int && sign int intermediate root 2 ca.ext && key leaf && sign leaf agent int 0x51 leaf.ext && key stray &&
	"$O" pkey -in "$W/leaf.key" -aes256 -passout pass:hunter2-hunter2 -out "$W/enc.key" 2>> "$W/openssl.err"; } ||
	{ fail certs openssl "$W/openssl.err"; exit 0; }
# every base64 line of every key: none may appear in a message or the log
grep -hv -- '-----' "$W/leaf.key" "$W/stray.key" "$W/enc.key" > "$W/keylines"

cat "$W/leaf.crt" "$W/int.crt" "$W/leaf.key" > "$W/chain.pem"
cat "$W/leaf.key" "$W/leaf.crt" "$W/int.crt" > "$W/key-first.pem"

# --- serve: from DIAGPORT_TLS_PEM, the chain verified against the root alone
: > "$W/agent.log"
DIAGPORT_TLS_PEM=$(cat "$W/chain.pem") "$D" launch --socket "$W/a.sock" --auth-token-file "$W/token" \
	--urls https://127.0.0.1:0 --metrics-urls https://127.0.0.1:0 2> "$W/agent.log" &
AG=$!; PIDS+=("$AG")
P=$(listening_port "$W/agent.log" urls 20 "$AG") || { fail agent-start "$(tail -c 600 "$W/agent.log")"; exit 0; }
MP=$(listening_port "$W/agent.log" metricsUrls 5 "$AG")
U=https://127.0.0.1:$P
WHY="got $(code --cacert "$W/root.crt" "${H[@]}" "$U/processes"): $(cat "$W/body" 2> /dev/null)"
check serve/curl-root-ca-only bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert '$W/root.crt' -H 'Authorization: Bearer $TOK' '$U/processes') = 200 ]"
WHY="got $(code --cacert "$W/root.crt" "$U/processes")"; check serve/no-token-401 test "$(code --cacert "$W/root.crt" "$U/processes")" = 401
"$O" s_client -connect "127.0.0.1:$P" -CAfile "$W/root.crt" -verify_return_error -showcerts < /dev/null > "$W/sc.txt" 2>&1
WHY="$(grep -E 'Verify return|s:|i:' "$W/sc.txt")"
check serve/s_client-chain-verified bash -c "grep -q 'Verify return code: 0 (ok)' '$W/sc.txt' && [ \$(grep -c 'BEGIN CERTIFICATE' '$W/sc.txt') = 2 ]"
WHY="$(grep -E '^ *[01] s:' "$W/sc.txt")"
check serve/s_client-leaf-then-intermediate bash -c "grep -q '^ *0 s:CN *= *agent' '$W/sc.txt' && grep -q '^ *1 s:CN *= *intermediate' '$W/sc.txt'"
WHY="metrics port ${MP:-none}: got $(code --cacert "$W/root.crt" "https://127.0.0.1:${MP:-1}/metrics")"
check serve/metrics-listener-https test "$(code --cacert "$W/root.crt" "https://127.0.0.1:${MP:-1}/metrics")" = 200
# the secret: gone from the environment the kernel shows, never in the log
tr '\0' '\n' < "/proc/$AG/environ" > "$W/environ" 2> "$W/environ.err"
WHY="$(cat "$W/environ.err") $(grep -c . "$W/environ") lines; $(grep -a -m3 -E 'TLS_PEM|BEGIN' "$W/environ")"
check secret/environ-wiped bash -c "grep -aqx 'DIAGPORT_TLS_PEM=' '$W/environ' && ! grep -aq -e BEGIN -f '$W/keylines' '$W/environ'"
WHY="$(grep tls-certificate "$W/agent.log")"
check secret/log-names-source grep -q '"event":"tls-certificate","certificate":"tlsPem (environment variable DIAGPORT_TLS_PEM)","serial":"51"' "$W/agent.log"
WHY="$(grep -a -e BEGIN -f "$W/keylines" "$W/agent.log" | head -c 300)"
check secret/log-holds-none bash -c "! grep -aq -e BEGIN -e 'PRIVATE KEY' -f '$W/keylines' '$W/agent.log'"
kill "$AG"

# the same agent a few ways: the key first; a settings file; a key-per-file directory. Each: served, verified.
served() { # NAME LOG (launch runs in the background, its pid in $!)
	local pid=$! port
	PIDS+=("$pid")
	port=$(listening_port "$2" urls 20 "$pid")
	"$O" s_client -connect "127.0.0.1:${port:-1}" -CAfile "$W/root.crt" -verify_return_error < /dev/null \
		> "$W/sc-$1.txt" 2>&1
	WHY="$(tail -c 400 "$2") $(grep -E 'Verify return' "$W/sc-$1.txt")"
	check "serve/$1" bash -c "[ \$(curl -s -o /dev/null -w '%{http_code}' --cacert '$W/root.crt' 'https://127.0.0.1:${port:-1}/healthz') = 200 ] && grep -q 'Verify return code: 0 (ok)' '$W/sc-$1.txt'"
	kill "$pid"
}
: > "$W/kf.log"
DIAGPORT_TLS_PEM=$(cat "$W/key-first.pem") "$D" launch --no-metrics --socket "$W/k.sock" --auth-token-file "$W/token" \
	--urls https://127.0.0.1:0 2> "$W/kf.log" &
served key-first "$W/kf.log"
{ echo 'tlsPem: |'; sed 's/^/  /' "$W/chain.pem"; } > "$W/pem.yaml"
: > "$W/yaml.log"
"$D" launch --no-metrics --config "$W/pem.yaml" --socket "$W/y.sock" --auth-token-file "$W/token" \
	--urls https://127.0.0.1:0 2> "$W/yaml.log" &
served settings-file "$W/yaml.log"
mkdir "$W/kpf"; cp "$W/chain.pem" "$W/kpf/tlsPem"
: > "$W/kpf.log"
"$D" launch --no-metrics --config-dir "$W/kpf" --socket "$W/d.sock" --auth-token-file "$W/token" \
	--urls https://127.0.0.1:0 2> "$W/kpf.log" &
served key-per-file "$W/kpf.log"

# --- refusals: exit 2 with the setting and its source named, nothing listening, no key text
refuse() { # NAME PEM-FILE EXPECTED-REGEX [LAUNCH ARGS...] (more env from the caller's prefix)
	local name=$1 pem=$2 re=$3 rc
	shift 3
	DIAGPORT_TLS_PEM=$(cat "$pem") timeout 20 "$D" launch --no-metrics --socket "$W/r.sock" \
		--auth-token-file "$W/token" --urls https://127.0.0.1:0 "$@" > /dev/null 2> "$W/$name.err"; rc=$?
	WHY="exit $rc: $(tail -c 500 "$W/$name.err")"
	check "refuse/$name" bash -c "[ $rc = 2 ] && grep -Eq '$re' '$W/$name.err' && ! grep -q '\"event\":\"listening\"' '$W/$name.err'"
	WHY="$(grep -a -e BEGIN -f "$W/keylines" "$W/$name.err" | head -c 300)"
	check "refuse/$name-no-key-text" bash -c "! grep -aq -f '$W/keylines' '$W/$name.err' && ! grep -aq -e '-----BEGIN EC' -e 'BEGIN ENCRYPTED' '$W/$name.err'"
}
E='tlsPem \(environment variable DIAGPORT_TLS_PEM\)'
DIAGPORT_TLS_CERT=$W/leaf.crt refuse with-cert-file "$W/chain.pem" \
	"$E and Kestrel:Certificates:Default:Path \\(tlsCert\\) \\(environment variable DIAGPORT_TLS_CERT\\) are both set"
printf 'Kestrel:\n  Certificates:\n    Default:\n      KeyPath: %s\n' "$W/leaf.key" > "$W/keypath.yaml"
refuse with-key-file "$W/chain.pem" \
	"$E and Kestrel:Certificates:Default:KeyPath \\(tlsKey\\) \\($W/keypath.yaml:4:16\\) are both set" --config "$W/keypath.yaml"
DOTNETMONITOR_Kestrel__Certificates__Default__Password=hunter2-hunter2 refuse with-password "$W/chain.pem" \
	"$E and Kestrel:Certificates:Default:Password \\(tlsKeyPassword\\) \\(environment variable DOTNETMONITOR_Kestrel__Certificates__Default__Password\\) are both set"
cp "$W/leaf.key" "$W/key-only.pem"
refuse no-certificate "$W/key-only.pem" "$E holds no PEM certificate"
printf 'not a certificate at all\n' > "$W/junk.pem"
refuse junk "$W/junk.pem" "$E holds no PEM certificate"
{ echo '-----BEGIN CERTIFICATE-----'; echo 'bm90IGEgY2VydGlmaWNhdGU='; echo '-----END CERTIFICATE-----'; cat "$W/leaf.key"; } \
	> "$W/bad-cert.pem"
refuse certificate-does-not-parse "$W/bad-cert.pem" "$E: certificate 1 does not parse"
cat "$W/leaf.crt" "$W/int.crt" > "$W/no-key.pem"
refuse no-key "$W/no-key.pem" "$E holds no PEM private key"
cat "$W/leaf.crt" "$W/int.crt" "$W/enc.key" > "$W/enc.pem"
refuse encrypted-key "$W/enc.pem" "$E holds an encrypted private key; it takes an unencrypted one"
{ cat "$W/leaf.crt"; echo '-----BEGIN PRIVATE KEY-----'; echo 'bm90IGEga2V5'; echo '-----END PRIVATE KEY-----'; } \
	> "$W/bad-key.pem"
refuse key-does-not-parse "$W/bad-key.pem" "the private key in $E does not parse"
cat "$W/leaf.crt" "$W/int.crt" "$W/stray.key" > "$W/mismatch.pem"
refuse mismatched-key "$W/mismatch.pem" "the private key in $E does not match its first certificate"
cat "$W/int.crt" "$W/leaf.crt" "$W/leaf.key" > "$W/int-first.pem"
refuse intermediate-first "$W/int-first.pem" "the private key in $E does not match its first certificate"
{ cat "$W/chain.pem"; head -c 70000 /dev/zero | tr '\0' 'x'; } > "$W/big.pem"
refuse over-64KiB "$W/big.pem" "environment variable DIAGPORT_TLS_PEM: tlsPem is larger than 65536 bytes"
# key-per-file: the file is named as where it came from
mkdir "$W/kpf-bad"; cp "$W/mismatch.pem" "$W/kpf-bad/tlsPem"
rc=0; timeout 20 "$D" launch --no-metrics --config-dir "$W/kpf-bad" --socket "$W/r.sock" --auth-token-file "$W/token" \
	--urls https://127.0.0.1:0 > /dev/null 2> "$W/kpf-bad.err" || rc=$?
WHY="exit $rc: $(tail -c 400 "$W/kpf-bad.err")"
check refuse/key-per-file-names-file bash -c "[ $rc = 2 ] && grep -q 'the private key in tlsPem ($W/kpf-bad/tlsPem) does not match' '$W/kpf-bad.err'"
# an https URL with neither tlsPem nor files
rc=0; timeout 20 "$D" launch --no-metrics --socket "$W/r.sock" --auth-token-file "$W/token" --urls https://127.0.0.1:0 \
	> /dev/null 2> "$W/neither.err" || rc=$?
WHY="exit $rc: $(tail -c 400 "$W/neither.err")"
check refuse/https-with-neither bash -c "[ $rc = 2 ] && grep -q 'no certificate is configured: set Kestrel:Certificates:Default:Path and Kestrel:Certificates:Default:KeyPath, or tlsPem (DIAGPORT_TLS_PEM) to the certificate chain and key as PEM text' '$W/neither.err'"
