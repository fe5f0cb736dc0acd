#!/usr/bin/env bash
# agent_tls.sh - the agent's https:// URLs (issue 33, item 4) with real clients (curl --cacert, openssl
# s_client, Python's ssl) and a real .NET app started under the agent (launch -- dotnet console.dll):
#   start/*     a missing certificate, a missing file, a mismatched key, an https URL without a certificate, a .pfx
#               with the wrong password: exit 2,
#               the message naming the setting (Kestrel:Certificates:Default:Path or :KeyPath) and the file; the
#               settings file, the environment (DOTNETMONITOR_ and DIAGPORT_) and key-per-file forms all bind; an
#               encrypted PEM key and a PKCS#12 file open with the Password setting
#   api/*       a dump (an ELF core; the fifo transport, whose pipe is never spliced onto a TLS socket), stacks and metrics over https with the token; 401 without it
#   trust/*     a client that does not trust the CA fails (curl 60, s_client's verify error); TLS 1.1 and a
#               TLS 1.2 cipher without forward secrecy are refused; TLS 1.2 with ECDHE and 1.3 are served
#   plain/*     plain http to the https port: 400 naming https for an API route; the probes answer
#               (/healthz, `diagport health --port`)
#   stall/*     a client that opens TLS and stalls (a record header, then nothing; or a handshake and no request)
#               is closed at the head deadline (--request-headers-timeout 3); /healthz answers meanwhile; what a
#               held TLS connection costs is under what the budget charges (HTTPD_TLS_CONN_COST, 48 KiB)
#   rotate/*    the kubelet's way (a new timestamped directory, the ..data symlink swapped): new connections get
#               the new certificate's serial without a restart; a mismatched pair is refused, the old kept, why
#               logged
set -u
cd "$(dirname "$0")/../.."
T_NAME=agent-tls
. tests/lib.sh
agent_setup tls
build_apps
APP=$PWD/$B/apps/console/console.dll
O=/usr/bin/openssl
TOK=tls-test-token-0123456789
printf '%s\n' "$TOK" > "$W/token"
H=(-H "Authorization: Bearer $TOK")

# --- certificates: a CA, the agent's (serial 7) and its successor (serial 8), a stranger CA, a key of no one's
mkcert() { # NAME SERIAL CA
	"$O" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/$1.key" -out "$W/$1.csr" -subj "/CN=$1" \
		2>> "$W/openssl.err" &&
		"$O" x509 -req -in "$W/$1.csr" -CA "$W/$3.crt" -CAkey "$W/$3.key" -set_serial "$2" -days 2 \
			-extfile "$W/ext" -out "$W/$1.crt" 2>> "$W/openssl.err"
}
printf 'subjectAltName=IP:127.0.0.1,DNS:localhost\nextendedKeyUsage=serverAuth\n' > "$W/ext"
for ca in ca other; do
	"$O" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/$ca.key" -out "$W/$ca.crt" -days 2 \
		-subj "/CN=$ca" 2>> "$W/openssl.err" || { fail certs "openssl" "$W/openssl.err"; exit 0; }
done
mkcert agent1 7 ca && mkcert agent2 8 ca && mkcert stray 9 ca || { fail certs "openssl" "$W/openssl.err"; exit 0; }

# a mounted kubernetes.io/tls Secret as the kubelet lays it out: tls.crt -> ..data/tls.crt, ..data -> ..TIMESTAMP
SEC=$W/secret
mkdir -p "$SEC/..2026_01"
cp "$W/agent1.crt" "$SEC/..2026_01/tls.crt"; cp "$W/agent1.key" "$SEC/..2026_01/tls.key"
ln -s ..2026_01 "$SEC/..data"; ln -s ..data/tls.crt "$SEC/tls.crt"; ln -s ..data/tls.key "$SEC/tls.key"
swap() { # DIR CRT KEY: the kubelet's update, one rename of ..data
	mkdir "$SEC/$1"; cp "$2" "$SEC/$1/tls.crt"; cp "$3" "$SEC/$1/tls.key"
	ln -s "$1" "$SEC/..data_tmp" && mv -T "$SEC/..data_tmp" "$SEC/..data"
}
# the settings in key-per-file form (a Secret or ConfigMap of settings)
mkdir "$W/settings"
printf '%s' "$SEC/tls.crt" > "$W/settings/Kestrel__Certificates__Default__Path"
printf '%s' "$SEC/tls.key" > "$W/settings/Kestrel__Certificates__Default__KeyPath"

# --- start: what does not hold is exit 2 with the setting and the file named
startfail() { # NAME EXPECTED-REGEX LAUNCH-ARGS... (env set by the caller's prefix)
	local name=$1 re=$2 rc
	shift 2
	timeout 20 "$D" launch --no-metrics --socket "$W/f.sock" --auth-token-file "$W/token" --urls https://127.0.0.1:0 \
		"$@" > /dev/null 2> "$W/$name.err"; rc=$?
	WHY="exit $rc: $(tail -c 400 "$W/$name.err")"
	check "start/$name" bash -c "[ $rc = 2 ] && grep -Eq '$re' '$W/$name.err'"
}
startfail no-certificate 'https URL, and no certificate is configured: set Kestrel:Certificates:Default:Path'
printf 'Kestrel:\n  Certificates:\n    Default:\n      Path: %s\n      KeyPath: %s\n' "$W/nope.crt" "$W/agent1.key" \
	> "$W/missing.yaml"
startfail missing-cert-file "Kestrel:Certificates:Default:Path $W/nope.crt: No such file" --config "$W/missing.yaml"
printf 'Kestrel:\n  Certificates:\n    Default:\n      Path: %s\n      KeyPath: %s\n' "$W/agent1.crt" "$W/stray.key" \
	> "$W/mismatch.yaml"
startfail mismatched-key "the key in Kestrel:Certificates:Default:KeyPath $W/stray.key does not match the certificate in Kestrel:Certificates:Default:Path $W/agent1.crt" \
	--config "$W/mismatch.yaml"
DOTNETMONITOR_Kestrel__Certificates__Default__Path=$W/agent1.crt DOTNETMONITOR_Kestrel__Certificates__Default__KeyPath=$W/gone.key \
	startfail env-missing-key "Kestrel:Certificates:Default:KeyPath $W/gone.key: No such file"
DIAGPORT_TLS_CERT=$W/agent1.key DIAGPORT_TLS_KEY=$W/agent1.key \
	startfail env-not-a-cert "Kestrel:Certificates:Default:Path $W/agent1.key does not hold a PEM certificate"
WHY="$(cat "$W/env-not-a-cert.err")"; check start/no-partial-listening bash -c "! grep -q '\"event\":\"listening\"' '$W/env-not-a-cert.err'"
# an encrypted key: refused without its password, served with it (Kestrel:Certificates:Default:Password)
"$O" pkey -in "$W/agent1.key" -aes256 -passout pass:hunter2-hunter2 -out "$W/enc.key" 2>> "$W/openssl.err"
DIAGPORT_TLS_CERT=$W/agent1.crt DIAGPORT_TLS_KEY=$W/enc.key \
	startfail encrypted-key-no-password "KeyPath $W/enc.key does not hold a PEM private key \\(an encrypted one needs the Password setting\\)"
: > "$W/enc.log"
DIAGPORT_TLS_CERT=$W/agent1.crt DIAGPORT_TLS_KEY=$W/enc.key DOTNETMONITOR_Kestrel__Certificates__Default__Password=hunter2-hunter2 \
	"$D" launch --no-metrics --socket "$W/e.sock" --auth-token-file "$W/token" --urls https://127.0.0.1:0 2> "$W/enc.log" &
EP=$!; PIDS+=($EP)
EPORT=$(listening_port "$W/enc.log" urls 20 "$EP")
WHY="$(tail -c 300 "$W/enc.log")"
check start/encrypted-key-with-password test "$(curl -s -o /dev/null -w '%{http_code}' --cacert "$W/ca.crt" "https://127.0.0.1:${EPORT:-1}/healthz")" = 200
WHY="the password is in the agent's environ"; check start/password-wiped-from-environ bash -c "! tr '\\0' '\\n' < /proc/$EP/environ | grep -q hunter2"
kill "$EP"
# a PKCS#12 file (.pfx) in Path with its Password and no KeyPath, as dotnet-monitor takes one: served, chain included
"$O" pkcs12 -export -in "$W/agent1.crt" -inkey "$W/agent1.key" -certfile "$W/ca.crt" -passout pass:pfx-pass-1234 \
	-out "$W/agent.pfx" 2>> "$W/openssl.err"
DOTNETMONITOR_Kestrel__Certificates__Default__Path=$W/agent.pfx DIAGPORT_TLS_KEY_PASSWORD=wrong-password-123 \
	startfail pfx-wrong-password "Kestrel:Certificates:Default:Path $W/agent.pfx: the PKCS#12 file does not open with the Password setting"
: > "$W/pfx.log"
DOTNETMONITOR_Kestrel__Certificates__Default__Path=$W/agent.pfx DOTNETMONITOR_Kestrel__Certificates__Default__Password=pfx-pass-1234 \
	"$D" launch --no-metrics --socket "$W/x.sock" --auth-token-file "$W/token" --urls https://127.0.0.1:0 2> "$W/pfx.log" &
XP=$!; PIDS+=($XP)
XPORT=$(listening_port "$W/pfx.log" urls 20 "$XP")
"$O" s_client -connect "127.0.0.1:${XPORT:-1}" -CAfile "$W/ca.crt" -showcerts < /dev/null > "$W/sc-pfx.txt" 2>&1
WHY="$(tail -c 300 "$W/pfx.log") $(grep -E 'Verify return|BEGIN' "$W/sc-pfx.txt")"
check start/pkcs12-with-password bash -c "grep -q 'Verify return code: 0 (ok)' '$W/sc-pfx.txt' && [ \$(grep -c 'BEGIN CERTIFICATE' '$W/sc-pfx.txt') = 2 ]"
kill "$XP"

# --- the agent: https, settings key-per-file, the app under it
: > "$W/agent.log"
mkdir -p -m 0777 "$W/dumps"
"$D" launch --config-dir "$W/settings" --socket "$W/dumps/port" --dumps "$W/dumps" --urls https://127.0.0.1:0 \
	--auth-token-file "$W/token" --request-headers-timeout 3 --metrics-interval 1 --metrics-start-delay 0 --dump-transport fifo \
	-- dotnet "$APP" sleep 600 > "$W/app.out" 2> "$W/agent.log" &
AG=$!; PIDS+=($AG)
P=$(listening_port "$W/agent.log" urls 30 "$AG") || { fail agent-start "$(tail -c 600 "$W/agent.log")"; exit 0; }
U=https://127.0.0.1:$P
C=(--cacert "$W/ca.crt")
WHY="$(grep '"event":"listening"' "$W/agent.log")"; check api/listening-line-says-https grep -q "\"urls\":\"https://127.0.0.1:$P\"" "$W/agent.log"
wait_for "$W/app.out" READY 30 || { fail app "$(tail -5 "$W/app.out")"; exit 0; }
APID=$(sed -n 's/^READY \([0-9]*\)$/\1/p' "$W/app.out")
eventually 15 bash -c "curl -s ${C[*]@Q} ${H[*]@Q} '$U/processes' | grep -q '\"pid\":$APID'"
WHY="$(curl -s "${C[@]}" "${H[@]}" "$U/processes")"; check api/processes bash -c "curl -s ${C[*]@Q} ${H[*]@Q} '$U/processes' | jq -e '.[0].pid == $APID'"
WHY="got $(code "${C[@]}" "$U/processes")"; check api/no-token-401 test "$(code "${C[@]}" "$U/processes")" = 401
c=$(curl -s "${C[@]}" "${H[@]}" -o "$W/core" -w '%{http_code} %{size_download}' "$U/dump?pid=$APID&type=Mini")
WHY="got $c, $(head -c 200 "$W/core" | tr -d '\0')"
check api/dump-elf-core bash -c "[ '${c%% *}' = 200 ] && [ \"\$(head -c 4 '$W/core' | tail -c 3)\" = ELF ] && [ ${c##* } -gt 1000000 ]"
WHY="left in $W/dumps: $(ls "$W/dumps")"; check api/dump-leaves-nothing eventually 5 bash -c "[ -z \"\$(ls '$W/dumps' | grep -v '^port$')\" ]"
c=$(code "${C[@]}" "${H[@]}" "$U/stacks?pid=$APID")
WHY="got $c: $(head -c 300 "$W/body")"; check api/stacks bash -c "[ $c = 200 ] && grep -q 'Main' '$W/body'"
eventually 20 bash -c "curl -s ${C[*]@Q} ${H[*]@Q} '$U/metrics' | grep -q '^# TYPE'"
c=$(code "${C[@]}" "${H[@]}" "$U/metrics")
WHY="got $c: $(head -c 300 "$W/body")"; check api/metrics bash -c "[ $c = 200 ] && grep -q '^# TYPE systemruntime' '$W/body'"

# --- trust: a client without the CA, or with another CA, fails; old protocols and ciphers are refused
curl -s -o /dev/null "$U/healthz"; rc=$?
WHY="curl exit $rc"; check trust/no-ca-curl-60 test "$rc" = 60
curl -s -o /dev/null --cacert "$W/other.crt" "$U/healthz"; rc=$?
WHY="curl exit $rc"; check trust/other-ca-curl-60 test "$rc" = 60
"$O" s_client -connect "127.0.0.1:$P" -CAfile "$W/other.crt" -verify_return_error < /dev/null > "$W/sc-other.txt" 2>&1; rc=$?
WHY="exit $rc: $(grep -i verify "$W/sc-other.txt" | head -3)"; check trust/other-ca-s_client bash -c "[ $rc != 0 ] && grep -q 'unable to get local issuer certificate' '$W/sc-other.txt'"
"$O" s_client -connect "127.0.0.1:$P" -tls1_1 < /dev/null > "$W/sc-11.txt" 2>&1; rc=$?
WHY="exit $rc: $(grep -iE 'alert|Cipher is' "$W/sc-11.txt" | head -3)"; check trust/tls1.1-refused bash -c "[ $rc != 0 ] && grep -q 'Cipher is (NONE)' '$W/sc-11.txt'"
"$O" s_client -connect "127.0.0.1:$P" -tls1_2 -cipher AES128-SHA < /dev/null > "$W/sc-rsa.txt" 2>&1; rc=$?
WHY="exit $rc: $(grep -iE 'alert|Cipher is' "$W/sc-rsa.txt" | head -3)"; check trust/no-forward-secrecy-refused bash -c "[ $rc != 0 ] && grep -q 'Cipher is (NONE)' '$W/sc-rsa.txt'"
"$O" s_client -connect "127.0.0.1:$P" -tls1_2 -CAfile "$W/ca.crt" < /dev/null > "$W/sc-12.txt" 2>&1
WHY="$(grep -E 'Cipher is|Verify return' "$W/sc-12.txt")"; check trust/tls1.2-ecdhe-aead grep -Eq 'TLSv1.2, Cipher is ECDHE-ECDSA-(AES(128|256)-GCM|CHACHA20)' "$W/sc-12.txt"
"$O" s_client -connect "127.0.0.1:$P" -tls1_3 -CAfile "$W/ca.crt" < /dev/null > "$W/sc-13.txt" 2>&1
WHY="$(grep -E 'Cipher is|Verify return' "$W/sc-13.txt")"; check trust/tls1.3-verified bash -c "grep -q 'TLSv1.3, Cipher is' '$W/sc-13.txt' && grep -q 'Verify return code: 0 (ok)' '$W/sc-13.txt'"

# --- plain http to the https port: refused cleanly for the API, answered for the probes
c=$(code "${H[@]}" "http://127.0.0.1:$P/processes")
WHY="got $c: $(cat "$W/body")"; check plain/api-400-says-https bash -c "[ $c = 400 ] && jq -e '.detail | test(\"this port speaks https\")' '$W/body'"
WHY="got $(code "http://127.0.0.1:$P/healthz")"; check plain/healthz-200 test "$(code "http://127.0.0.1:$P/healthz")" = 200
check plain/health-command "$D" health --port "$P"
WHY="got $(code "${C[@]}" "$U/healthz")"; check plain/https-healthz-200 test "$(code "${C[@]}" "$U/healthz")" = 200

# --- stalls: cut off at the head deadline (3 s), the probes answered meanwhile
python3 tests/integration/tls_clients.py "$P" stall-hello > "$W/stall1.txt" & SP=$!
# the stalled client is connected (its own wait is what is measured); probes while it holds on
stall_connected() { ss -Htnp state established "( dport = :$P )" | grep -q "pid=$SP,"; }
eventually 5 stall_connected
WHY="got $(code "${C[@]}" "$U/healthz")"; check stall/healthz-during-stall test "$(code "${C[@]}" "$U/healthz")" = 200
wait "$SP"
WHY="closed after $(cat "$W/stall1.txt") s"; check stall/record-header-cut-at-deadline awk '{ exit !($1 > 2.5 && $1 < 5) }' "$W/stall1.txt"
r=$(python3 tests/integration/tls_clients.py "$P" stall-after 60 "$AG")
WHY="$r"; check stall/handshaken-idle-cut-at-deadline jq -e '.opened == 60 and .closed_after_s < 5' <<< "$r"
WHY="$r"; check stall/held-connection-under-48KiB jq -e '(.rss_held_kib - .rss_before_kib) / .opened < 48' <<< "$r"
echo "# agent_tls: a handshaken idle TLS connection held $(jq '(.rss_held_kib - .rss_before_kib) / .opened' <<< "$r") KiB of RSS each (60 of them)"
WHY="got $(code "${C[@]}" "${H[@]}" "$U/processes")"; check stall/still-serving test "$(code "${C[@]}" "${H[@]}" "$U/processes")" = 200

# --- rotation, the kubelet's way: the new serial without a restart
serial() { "$O" s_client -connect "127.0.0.1:$P" -CAfile "$W/ca.crt" < /dev/null 2> /dev/null | "$O" x509 -noout -serial 2> /dev/null; }
WHY="$(serial)"; check rotate/serial-7-first test "$(serial)" = serial=07
swap ..2026_02 "$W/agent2.crt" "$W/agent2.key"
WHY="still $(serial)"; check rotate/new-serial-8 eventually 10 bash -c "[ \"\$($(declare -f serial); O=$O P=$P W=$W serial)\" = serial=08 ]"
WHY="$(grep tls-reloaded "$W/agent.log")"; check rotate/logged grep -q '"event":"tls-reloaded".*"serial":"08"' "$W/agent.log"
WHY="got $(code "${C[@]}" "${H[@]}" "$U/processes")"; check rotate/serving test "$(code "${C[@]}" "${H[@]}" "$U/processes")" = 200
# a bad pair (a key that is not the certificate's): refused, the old one kept, the reason logged
swap ..2026_03 "$W/agent1.crt" "$W/stray.key"
WHY="$(grep tls-reload-failed "$W/agent.log")"
check rotate/bad-pair-logged eventually 10 bash -c "serial=\$($(declare -f serial); O=$O P=$P W=$W serial); grep -q '\"event\":\"tls-reload-failed\".*does not match' '$W/agent.log'"
WHY="$(serial)"; check rotate/bad-pair-old-kept test "$(serial)" = serial=08
WHY="got $(code "${C[@]}" "${H[@]}" "$U/processes")"; check rotate/bad-pair-still-serving test "$(code "${C[@]}" "${H[@]}" "$U/processes")" = 200
# and a good pair after the bad one is taken
swap ..2026_04 "$W/agent1.crt" "$W/agent1.key"
WHY="still $(serial)"; check rotate/good-after-bad eventually 10 bash -c "[ \"\$($(declare -f serial); O=$O P=$P W=$W serial)\" = serial=07 ]"
kill "$AG"
