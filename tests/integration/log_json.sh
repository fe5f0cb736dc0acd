#!/usr/bin/env bash
# log_json.sh - every log line of the daemons is one JSON object (common/log.h), whatever the values
# hold: quotes, backslashes, newlines, control characters and bytes that are not UTF-8 are fed through
# each log site that carries outside input, and every line is read by a strict JSON reader
# (jsonlines.py: strict UTF-8, an object starting time, level, msg):
#   agent/*    an environment variable naming a dotnet-monitor setting this agent does not have (setting-ignored), a --connect-dir
#              that does not exist (unreachable), captures with hostile tags (capture started/ended),
#              a capture whose egress directory is gone (the error), wrong tokens (401s); the listening
#              line says whether the API asks for a token (true with one, false without)
#   secrets/*  the agent's token and the wrong tokens tried never appear in its log
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=log-json
. tests/lib.sh
agent_setup log-json
build_apps
J=tests/integration/jsonlines.py

# --- the agent
mkdir -p -m 0777 "$W/dumps" "$W/out" "$W/gone"
TOKEN="tok-$RANDOM$RANDOM-secret-0123456789"
printf '%s\n' "$TOKEN" > "$W/token"
printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/out\n    gone:\n      DirectoryPath: %s/gone\n' "$W" "$W" > "$W/agent.yaml"
HOSTILE_DIR=$W/$'no"such\\dir\nnl\x01\xff'
env $'DOTNETMONITOR_Logging__We"ird\\name\nnl\x01\xff__X=1' "$D" launch --config "$W/agent.yaml" --socket "$W/dumps/port" \
	--urls http://127.0.0.1:0 --dumps "$W/dumps" --auth-token-file "$W/token" --connect-dir "$HOSTILE_DIR" \
	--metrics-start-delay 0 --log-level debug 2> "$W/agent.log" &
AG=$!; PIDS+=("$AG")
P=$(listening_port "$W/agent.log" urls 10 "$AG"); U=http://127.0.0.1:$P
H=(-H "Authorization: Bearer $TOKEN")
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" > "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/agent.log" '"event":"attached"' 20 || { fail agent/attached "$(head -c 400 "$W/agent.log")"; exit 0; }
TAGS='q%22uote%5Cback%0Anl%0D%09%01%1F%FF%FEend'
code "${H[@]}" "$U/stacks?tags=$TAGS" > /dev/null
egressed tagged "$U/stacks?egressProvider=out&tags=$TAGS" "${H[@]}"
rmdir "$W/gone"
egressed gone "$U/stacks?egressProvider=gone&tags=$TAGS" "${H[@]}"
for guess in "Bearer guess-$RANDOM-one" "Bearer ${TOKEN}x" "bearer $TOKEN$TOKEN" "Basic Zm9vOmJhcg=="; do
	code -H "Authorization: $guess" "$U/processes" > /dev/null
done
kill -TERM "$AG"; wait "$AG" 2> /dev/null

r=$(/usr/bin/python3 "$J" "$W/agent.log" 2>&1)
WHY="$r"; check agent/every-line-json test "${r%% *}" = ok
r=$(/usr/bin/python3 "$J" "$W/agent.log" $'DOTNETMONITOR_Logging__We"ird\\name\nnl\x01\uFFFD' 2>&1)
WHY="$r"; check agent/setting-ignored-whole test "${r%% *}" = ok
r=$(/usr/bin/python3 "$J" "$W/agent.log" $'no"such\\dir\nnl\x01\uFFFD' 2>&1)
WHY="$r"; check agent/connect-dir-whole test "${r%% *}" = ok
r=$(/usr/bin/python3 "$J" "$W/agent.log" $'q"uote\\back\nnl\r\t\x01\x1f\uFFFD\uFFFDend' 2>&1)
WHY="$r"; check agent/tags-whole test "${r%% *}" = ok
WHY="$(grep -c 'capture-started' "$W/agent.log") capture-started lines"; check agent/capture-lines test "$(grep -c '"event":"capture-started"' "$W/agent.log")" -ge 3
WHY="$(grep '"outcome":"Failed"' "$W/agent.log" | head -c 300)"; check agent/failed-capture-says-why grep -q "\"outcome\":\"Failed\".*\"error\":\"egress provider 'gone'" "$W/agent.log"

WHY="$(grep '"event":"listening"' "$W/agent.log")"; check agent/listening-says-authenticated grep -q '"event":"listening".*"authentication":true' "$W/agent.log"
# Without a token (loopback only) the line must not say the API is protected.
"$D" launch --socket "$W/dumps/port2" --urls http://127.0.0.1:0 --dumps "$W/dumps" 2> "$W/agent2.log" &
AG2=$!; PIDS+=("$AG2")
wait_for "$W/agent2.log" '"event":"listening"' 10
kill -TERM "$AG2"; wait "$AG2" 2> /dev/null
WHY="$(grep '"event":"listening"' "$W/agent2.log" | head -c 300)"; check agent/listening-without-token-says-so grep -q '"event":"listening".*"authentication":false' "$W/agent2.log"

WHY="the token is in the agent's log"; check secrets/token-never-logged bash -c "! grep -qF -- '$TOKEN' '$W/agent.log'"
WHY="a tried token is in the agent's log"; check secrets/guesses-never-logged bash -c "! grep -q 'guess-\|Zm9vOmJhcg' '$W/agent.log'"

# --- the webhook
OSSL=/usr/bin/openssl
WD=$W/$'wh"we\\ird\nnl'
mkdir -p "$WD"
if ! "$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$WD/key.pem" -out "$WD/cert.pem" \
	-days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2> "$W/openssl.err"; then
	fail webhook/certificate "$(head -c 300 "$W/openssl.err")"; exit 0
fi
printf 'mode: nosuspend\n' > "$WD/config.yaml"
"$D" webhook --listen 127.0.0.1:0 --tls-cert "$WD/cert.pem" --tls-key "$WD/key.pem" --config "$WD/config.yaml" \
	--no-sandbox 2> "$W/webhook.log" &
WH=$!; PIDS+=("$WH")
WP=$(listening_port "$W/webhook.log" port 10 "$WH") || { fail webhook/listening "$(head -c 300 "$W/webhook.log")"; exit 0; }
WU=https://127.0.0.1:$WP
post() { curl -s -o /dev/null --cacert "$WD/cert.pem" -H 'Content-Type: application/json' --data-binary "@$1" "$WU/mutate"; }
# bodies that are not AdmissionReviews, holding every kind of hostile byte: each is a 400 and a log line
printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"q\\"uote\\\\back\\nnl\x01\xff\xfe' > "$W/bad1"
printf '{"kind":"Admission\x01\x1f\xc3\x28Review\\u0000","apiVersion":"v1\\"\\\\\\n"}' > "$W/bad2"
printf '\xff\xfe"\\\n{"' > "$W/bad3"
for f in bad1 bad2 bad3; do post "$W/$f"; done
# a pod whose fields hold them, as JSON escapes: well-formed, admitted
printf '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u\\"1\\\\\\n\\u0001","kind":{"group":"","version":"v1","kind":"Pod"},"operation":"CREATE","namespace":"n\\"s\\\\\\n\\u0001","object":{"apiVersion":"v1","kind":"Pod","metadata":{"generateName":"g\\"n\\\\\\n-","annotations":{"diagport.dev/inject":"true","diagport.dev/mode":"we\\"ird\\\\\\n\\u0001"}},"spec":{"containers":[{"name":"app","image":"app"}]}}}}' > "$W/pod.json"
post "$W/pod.json"
# a configuration that does not load, its value hostile; then a key pair that does not
printf 'mode: "we\\"ird\\\\ \\u0001 \\x7f"\nexcludedNamespaces: [a]\n' > "$WD/config.yaml"
wait_for "$W/webhook.log" '"event":"config-reload-failed"' 8
printf 'not a certificate "\\\n\x01\xff' > "$WD/cert.pem"
wait_for "$W/webhook.log" '"event":"certificate-reload-failed"' 8
kill -TERM "$WH"; wait "$WH" 2> /dev/null

r=$(/usr/bin/python3 "$J" "$W/webhook.log" 2>&1)
WHY="$r"; check webhook/every-line-json test "${r%% *}" = ok
WHY="$(grep -c '"event":"rejected"' "$W/webhook.log") rejected lines"; check webhook/rejected-lines test "$(grep -c '"event":"rejected"' "$W/webhook.log")" = 3
WHY="$(grep '"event":"admission"' "$W/webhook.log")"; check webhook/hostile-pod-admitted grep -q '"event":"admission".*"outcome":"refused"' "$W/webhook.log"
# the refused pod's line carries its uid, decoded whole, and the reason it was admitted without diagnostics
r=$(/usr/bin/python3 - "$W/webhook.log" << 'EOF'
import json, sys
ls = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
a = [l for l in ls if l.get("event") == "admission" and l.get("outcome") == "refused"]
ok = len(a) == 1 and a[0].get("uid") == 'u"1\\\n\x01' and a[0].get("level") == "WARN" and 'we"ird' in a[0].get("reason", "")
print("ok" if ok else f"refused lines: {a}")
EOF
)
WHY="$r"; check webhook/refused-line-uid-and-reason test "$r" = ok
r=$(/usr/bin/python3 "$J" "$W/webhook.log" $'we"ird\\ \x01 \x7f' 2>&1)
WHY="$r"; check webhook/config-reload-failed-whole test "${r%% *}" = ok
r=$(/usr/bin/python3 "$J" "$W/webhook.log" $'wh"we\\ird\nnl/cert.pem' 2>&1)
WHY="$r"; check webhook/certificate-reload-failed-whole test "${r%% *}" = ok
key=$(sed -n 2p "$WD/key.pem")
WHY="a line of the private key is in the webhook's log"; check secrets/webhook-key-never-logged bash -c "! grep -qF -- '$key' '$W/webhook.log'"
