#!/usr/bin/env bash
# webhook_certs.sh - `diagport webhook certs` against an API server: the
# certificates it makes, the Secret and caBundle it writes, and what it does
# on every answer the API gives. The API server is kubeapi_fake.py, a
# contract-following fake (no kube-apiserver can run here: see its header),
# seeded with the MutatingWebhookConfiguration that `kubectl kustomize
# manifests/overlays/self-contained` renders. Results:
#   first/*      no Secret: one is created (kubernetes.io/tls, four keys, our label) and every webhook's
#                caBundle patched; exactly GET, GET, PATCH, POST; both objects as written validate with
#                kubernetes-models (tests/validate/k8s-validate.mjs)
#   cert/*       openssl's view of what was made: tls.crt verifies against ca.crt; exactly the four
#                DNS names; keys match; serverAuth, digitalSignature, CN, P-256, validity 365 days;
#                random 128-bit serials
#   ca/*         CA:TRUE critical, keyCertSign and cRLSign, 10 years
#   e2e/*        `diagport webhook` serving the Secret's pair is trusted by a client holding only the
#                caBundle, for the Service's DNS name (what the API server does)
#   second/*     a second run writes nothing (GETs only), resourceVersions unchanged
#   tampered/*   one webhook's caBundle changed by someone: exactly that one is patched back
#   serving/*    the serving certificate within --renew-before-days: a new one from the same CA,
#                caBundle untouched; the running server takes it and stays trusted
#   ca-renewal/* the CA within --renew-before-days: a new CA, ca.crt and caBundle hold new + old,
#                written caBundle first; the old serving certificate (still served) and the new
#                one both trusted; the next run keeps it all
#   prune/*      an expired old CA in ca.crt is taken out, nothing else changes
#   interop/*    a Secret made by openssl is read and kept
#   ca-key/*     a ca.key that is not the CA's: kept while nothing needs signing, then a new CA
#   race/*       another Job creates the Secret first (409 AlreadyExists): read again, keep theirs
#   stale/*      the Secret changes between GET and PUT (409 Conflict): read again, renew, PUT; the
#                other writer's annotation survives
#   patch-conflict/*  the configuration changes between GET and PATCH (a failed `test`, 422): again
#   retry/*      one 500: tried again; 500s that go on: exit 3 naming the status and message
#   auth/*       a wrong token: exit 4, 401 named, nothing written; 403 likewise
#   errors/*     API server down, not trusted, configuration missing, a Secret of another type,
#                usage errors: the documented exit codes and messages that name the object
#   dry-run/*    decides and says, writes nothing
#   token/*      the token is read for every request (it changes mid-run), and is in no output
#   valgrind/*   a create and a keep under valgrind: no errors, no definite leaks (the plain build, made
#                if need be, when ./diagport is a sanitizer build, which valgrind cannot run)
set -u
cd "$(dirname "$0")/../.." || exit 1
D=$PWD/diagport
PY=/usr/bin/python3
OSSL=/usr/bin/openssl
KUBECTL=/usr/bin/kubectl
FAKE=$PWD/tests/integration/kubeapi_fake.py
W=$(mktemp -d "${TMPDIR:-/tmp}/dp-webhook-certs.XXXXXX")
PIDS=() # everything started in the background here, and only that
cleanup() {
  local p
  for p in "${PIDS[@]}"; do { kill "$p" && wait "$p"; } 2> /dev/null; done
  [ -n "${KEEP:-}" ] && echo "kept $W" || rm -rf "$W"
}
trap cleanup EXIT
T_NAME=webhook-certs
. tests/lib.sh # every script runs from the repository root

oneline() { head -c 500 "$1" 2> /dev/null | tr '\n\t' '  '; }

if [ ! -x "$D" ]; then
  make > "$W/make.log" 2>&1 || { fail build "make failed: $(tail -c 300 "$W/make.log" | tr '\n' ' ')"; exit 0; }
fi
for tool in "$OSSL" curl "$PY" "$KUBECTL" valgrind; do
  command -v "$tool" > /dev/null || { fail prerequisites "$tool is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done
"$PY" -c 'import jsonpatch, yaml' 2> "$W/py.err" || { fail prerequisites "python3-jsonpatch and python3-yaml: $(oneline "$W/py.err")"; exit 0; }

NS=diagport-system SEC=diagport-webhook-tls SVC=diagport-webhook MWC=diagport
HOST=$SVC.$NS.svc
TOKEN="tok-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
printf '%s\n' "$TOKEN" > "$W/token"

# --- the fake API server's own CA and certificate, and the seed ----------------------------------

if ! api_cert api-ca; then
  fail setup "openssl could not make the fake API server's certificate: $(oneline "$W/openssl.err")"
  exit 0
fi
if ! "$KUBECTL" kustomize manifests/overlays/self-contained > "$W/rendered.yaml" 2> "$W/kustomize.err"; then
  fail setup "kubectl kustomize manifests/overlays/self-contained: $(oneline "$W/kustomize.err")"
  exit 0
fi
"$PY" - "$W/rendered.yaml" "$W/seed.yaml" "$MWC" > "$W/nhooks" << 'EOF'
import sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
m = [d for d in docs if d.get("kind") == "MutatingWebhookConfiguration" and d["metadata"]["name"] == sys.argv[3]]
yaml.safe_dump_all(m, open(sys.argv[2], "w"))
print(len(m[0]["webhooks"]) if m else 0)
EOF
NHOOKS=$(cat "$W/nhooks")
if [ "${NHOOKS:-0}" -lt 1 ]; then
  fail setup "the rendered overlay has no MutatingWebhookConfiguration $MWC with webhooks"
  exit 0
fi

# st.py STATE CMD ...: questions about the fake's store (the JSON of /__fake/state)
cat > "$W/st.py" << 'EOF'
import base64, json, sys
st = json.load(open(sys.argv[1]))
cmd, a = sys.argv[2], sys.argv[3:]
sec = st["secrets"].get(a[0]) if cmd.startswith("secret") else None
mwc = st["mutatingwebhookconfigurations"].get(a[0]) if cmd.startswith("mwc") else None
if cmd == "secret-files":        # NS/NAME DIR: write each data key, decoded, to DIR/KEY
    for k, v in sec["data"].items():
        open(f"{a[1]}/{k}", "wb").write(base64.b64decode(v))
elif cmd == "secret-summary":    # NS/NAME: type, sorted data keys, part-of label
    print(sec["type"], ",".join(sorted(sec["data"])), sec["metadata"].get("labels", {}).get("app.kubernetes.io/part-of"))
elif cmd == "secret-rv":
    print(sec["metadata"]["resourceVersion"] if sec else "none")
elif cmd == "secret-annotation":  # NS/NAME KEY
    print((sec["metadata"].get("annotations") or {}).get(a[1], "none"))
elif cmd == "secret-json":
    print(json.dumps(sec))
elif cmd == "mwc-rv":
    print(mwc["metadata"]["resourceVersion"])
elif cmd == "mwc-bundles":       # NAME: "I:same|other|none" per webhook, against the base64 of file a[1]
    want = base64.b64encode(open(a[1], "rb").read()).decode()
    print(" ".join(f"{i}:" + ("none" if "caBundle" not in w["clientConfig"] else "same" if w["clientConfig"]["caBundle"] == want else "other")
                   for i, w in enumerate(mwc["webhooks"])))
elif cmd == "mwc-json":
    print(json.dumps(mwc))
EOF

# start_fake NAME [SEED...]: a fake API server in $W/NAME; sets FP (port), FPID, FLOG
start_fake() {
  local name=$1 i seeds=()
  shift
  mkdir -p "$W/$name"
  for s in "$@"; do seeds+=(--seed "$s"); done
  : > "$W/$name/req.log"
  "$PY" "$FAKE" --cert "$W/api.crt" --key "$W/api.key" --token-file "$W/token" --log "$W/$name/req.log" \
    --ready "$W/$name/port" "${seeds[@]}" > "$W/$name/fake.out" 2>&1 &
  FPID=$!
  PIDS+=("$FPID")
  for ((i = 0; i < 100; i++)); do
    [ -s "$W/$name/port" ] && break
    sleep 0.05
  done
  FP=$(cat "$W/$name/port" 2> /dev/null)
  FLOG=$W/$name/req.log
  if [ -z "$FP" ]; then
    fail "$name/fake" "the fake API server did not start: $(oneline "$W/$name/fake.out")"
    return 1
  fi
}

# ctl PATH JSON: a control request to the fake on port $FP
ctl() { curl -sS --max-time 10 --cacert "$W/api-ca.crt" -H 'Content-Type: application/json' --data-binary "$2" "https://127.0.0.1:$FP/__fake/$1" > /dev/null; }
# state: the fake's store into $W/state.json
state() { curl -sS --max-time 10 --cacert "$W/api-ca.crt" -o "$W/state.json" "https://127.0.0.1:$FP/__fake/state"; }
st() { "$PY" "$W/st.py" "$W/state.json" "$@"; }

# certs [ARGS...]: run `diagport webhook certs` against the fake on $FP; $W/out, $W/err, $RC
RUN=0
certs() {
  RUN=$((RUN + 1))
  "$D" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
    --api-server "https://127.0.0.1:$FP" --token-file "$W/token" --api-ca-file "$W/api-ca.crt" "$@" \
    > "$W/out" 2> "$W/err" < /dev/null
  RC=$?
  cp "$W/out" "$W/out.$RUN"
  cp "$W/err" "$W/err.$RUN"
}
# requests FROM: the fake's log from line FROM on, one line
requests() { tail -n +"$1" "$FLOG" | tr '\n' '|'; }
lines() { wc -l < "$FLOG"; }
SECRET_PATH=/api/v1/namespaces/$NS/secrets/$SEC
MWC_PATH=/apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/$MWC

# --- 1. first run: create -----------------------------------------------------------------------

start_fake main "$W/seed.yaml" || exit 0
certs
WHY="exit $RC: $(oneline "$W/out") $(oneline "$W/err")"
check first/exit bash -c "test $RC = 0 && grep -q 'created' '$W/out' && grep -q 'patched on $NHOOKS webhooks' '$W/out'"
got=$(requests 1)
want="GET $SECRET_PATH 404|GET $MWC_PATH 200|PATCH $MWC_PATH 200 test:/metadata/resourceVersion"
for ((i = 0; i < NHOOKS; i++)); do want+=",add:/webhooks/$i/clientConfig/caBundle"; done
want+="|POST /api/v1/namespaces/$NS/secrets 201|"
WHY="requests '$got', want '$want'"
check first/requests test "$got" = "$want"
state
got=$(st secret-summary "$NS/$SEC" 2> "$W/st.err")
WHY="Secret: '$got' $(oneline "$W/st.err") (want kubernetes.io/tls ca.crt,ca.key,tls.crt,tls.key diagport)"
check first/secret test "$got" = "kubernetes.io/tls ca.crt,ca.key,tls.crt,tls.key diagport"
S1=$W/s1
mkdir -p "$S1"
st secret-files "$NS/$SEC" "$S1" 2> /dev/null
got=$(st mwc-bundles "$MWC" "$S1/ca.crt")
SAME_ALL=$(for ((i = 0; i < NHOOKS; i++)); do printf '%s:same ' $i; done)
SAME_ALL=${SAME_ALL% }
WHY="caBundle of each webhook against base64(ca.crt): '$got' (want '$SAME_ALL')"
check first/cabundle test "$got" = "$SAME_ALL"
RV_SEC=$(st secret-rv "$NS/$SEC") RV_MWC=$(st mwc-rv "$MWC")
# what was written, as objects: the Secret and the configuration validate with kubernetes-models
# (tests/validate/k8s-validate.mjs, with its API-server rules), as the API server would check them
for o in secret:"$NS/$SEC" mwc:"$MWC"; do
  st "${o%%:*}-json" "${o#*:}" > "$W/written-${o%%:*}.json" 2> "$W/st.err"
  timeout 120 node tests/validate/k8s-validate.mjs "$W/written-${o%%:*}.json" > "$W/val-${o%%:*}" 2>&1
  rc=$?
  WHY="k8s-validate.mjs exit $rc: $(oneline "$W/val-${o%%:*}") $(oneline "$W/st.err")"
  check "first/${o%%:*}-validates" bash -c "test $rc = 0 && ! grep -q 'note:' '$W/val-${o%%:*}'"
done

# --- 2. the certificates, as openssl sees them --------------------------------------------------

x509() { "$OSSL" x509 -in "$1" -noout "${@:2}" 2>&1; }
got=$("$OSSL" verify -CAfile "$S1/ca.crt" "$S1/tls.crt" 2>&1)
WHY="openssl verify: $got"
check cert/verify test "$got" = "$S1/tls.crt: OK"
got=$(x509 "$S1/tls.crt" -ext subjectAltName | tail -n +2 | tr -d ' ' | tr ',' '\n' | sort | tr '\n' ' ')
want=$(printf 'DNS:%s\n' "$SVC" "$SVC.$NS" "$SVC.$NS.svc" "$SVC.$NS.svc.cluster.local" | sort | tr '\n' ' ')
WHY="SANs '$got', want exactly '$want'"
check cert/sans test "$got" = "$want"
for k in tls ca; do
  a=$("$OSSL" pkey -in "$S1/$k.key" -pubout 2>&1)
  b=$(x509 "$S1/$k.crt" -pubkey)
  WHY="$k.key's public key is not $k.crt's"
  check "cert/$k-key-matches" test -n "$a" -a "$a" = "$b"
done
got=$(x509 "$S1/tls.crt" -ext extendedKeyUsage | tail -n +2 | sed 's/^ *//')
WHY="extendedKeyUsage '$got'"
check cert/eku-serverauth test "$got" = "TLS Web Server Authentication"
got=$(x509 "$S1/tls.crt" -ext keyUsage,basicConstraints | tr -s ' \n' ' ')
WHY="tls.crt keyUsage/basicConstraints: '$got'"
check cert/key-usage bash -c "grep -q 'Key Usage: critical Digital Signature ' <<< '$got' && grep -q 'CA:FALSE' <<< '$got'"
got=$(x509 "$S1/tls.crt" -subject)
WHY="subject '$got'"
check cert/cn test "$got" = "subject=CN = $HOST"
n=0
for k in tls ca; do
  x509 "$S1/$k.crt" -text | grep -q 'ASN1 OID: prime256v1' && n=$((n + 1))
done
WHY="$n of 2 certificates have an ECDSA P-256 key"
check cert/ecdsa-p256 test $n = 2
s_tls=$(x509 "$S1/tls.crt" -serial | sed 's/serial=//') s_ca=$(x509 "$S1/ca.crt" -serial | sed 's/serial=//')
hex32='^[0-9A-F]{32}$'
[[ $s_tls =~ $hex32 && $s_ca =~ $hex32 && $s_tls != "$s_ca" ]] && ok=1 || ok=0
WHY="serials '$s_tls' and '$s_ca' (want 32 hex digits each, different)"
check cert/random-serials test $ok = 1
WHY="tls.crt: $(x509 "$S1/tls.crt" -enddate) (want about 365 days from now)"
check cert/validity-365-days bash -c "'$OSSL' x509 -in '$S1/tls.crt' -noout -checkend $((364 * 86400)) > /dev/null && ! '$OSSL' x509 -in '$S1/tls.crt' -noout -checkend $((366 * 86400)) > /dev/null"
got=$(x509 "$S1/ca.crt" -ext basicConstraints,keyUsage | tr -s ' \n' ' ')
WHY="CA extensions: '$got'"
check ca/flags bash -c "grep -q 'Basic Constraints: critical CA:TRUE' <<< '$got' && grep -q 'Key Usage: critical Certificate Sign, CRL Sign ' <<< '$got'"
WHY="ca.crt: $(x509 "$S1/ca.crt" -enddate) (want about 3650 days from now)"
check ca/validity-10-years bash -c "'$OSSL' x509 -in '$S1/ca.crt' -noout -checkend $((3649 * 86400)) > /dev/null && ! '$OSSL' x509 -in '$S1/ca.crt' -noout -checkend $((3651 * 86400)) > /dev/null"
got=$("$OSSL" verify -CAfile "$S1/ca.crt" "$S1/ca.crt" 2>&1)
WHY="the CA is not self-signed: $got"
check ca/self-signed test "$got" = "$S1/ca.crt: OK"

# --- 3. end to end: the webhook serving the Secret's pair, trusted through the caBundle ----------

SRV=$W/srv
mkdir -p "$SRV"
cp "$S1/tls.crt" "$S1/tls.key" "$SRV/"
"$D" webhook --listen 127.0.0.1:0 --tls-cert "$SRV/tls.crt" --tls-key "$SRV/tls.key" 2> "$SRV/log" &
SPID=$!
PIDS+=("$SPID")
SP=$(listening_port "$SRV/log" port 10 "$SPID") || { fail e2e/start "the webhook did not start" "$SRV/log"; exit 0; }
# healthz BUNDLE-FILE: curl as the API server would: the Service's DNS name, only the caBundle trusted
healthz() {
  env -u CURL_CA_BUNDLE -u SSL_CERT_FILE -u SSL_CERT_DIR curl -sS --max-time 10 --cacert "$1" \
    --resolve "$HOST:$SP:127.0.0.1" "https://$HOST:$SP/healthz" 2>&1
}
mwc_bundle() { state && "$PY" -c 'import base64,json,sys; m=json.load(open(sys.argv[1]))["mutatingwebhookconfigurations"][sys.argv[2]]; open(sys.argv[3],"wb").write(base64.b64decode(m["webhooks"][int(sys.argv[4])]["clientConfig"]["caBundle"]))' "$W/state.json" "$MWC" "$1" "${2:-0}"; }
# served_serial: the serial of the certificate the server gives a new connection
served_serial() { echo | timeout 10 "$OSSL" s_client -connect "127.0.0.1:$SP" -servername "$HOST" 2> /dev/null | "$OSSL" x509 -noout -serial 2> /dev/null | sed 's/serial=//'; }
got=
for ((i = 0; i < 100; i++)); do
  mwc_bundle "$W/bundle1.pem" && got=$(healthz "$W/bundle1.pem") && [ "$got" = ok ] && break
  sleep 0.1
done
WHY="curl --cacert <caBundle> https://$HOST:$SP/healthz: '$got'; server log: $(oneline "$SRV/log")"
check e2e/healthz test "$got" = ok
"$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/other.key" -out "$W/other-ca.crt" \
  -days 2 -subj /CN=other 2> /dev/null
got=$(healthz "$W/other-ca.crt")
WHY="a client trusting another CA got '$got' (want a verification failure)"
check e2e/other-ca-refused bash -c "[ '$got' != ok ]"

# --- 4. second run: nothing to write --------------------------------------------------------------

from=$(($(lines) + 1))
certs
got=$(requests "$from")
WHY="exit $RC, requests '$got' (want only GET $SECRET_PATH 200 and GET $MWC_PATH 200): $(oneline "$W/out") $(oneline "$W/err")"
check second/gets-only test "$RC" = 0 -a "$got" = "GET $SECRET_PATH 200|GET $MWC_PATH 200|"
state
WHY="resourceVersions now $(st secret-rv "$NS/$SEC")/$(st mwc-rv "$MWC"), before $RV_SEC/$RV_MWC"
check second/resource-versions test "$(st secret-rv "$NS/$SEC")" = "$RV_SEC" -a "$(st mwc-rv "$MWC")" = "$RV_MWC"
WHY="stdout: $(oneline "$W/out")"
check second/says-kept bash -c "grep -q 'kept;' '$W/out' && grep -q 'already current on $NHOOKS webhooks' '$W/out'"

# --- 5. one caBundle tampered with: exactly that one patched back ----------------------------------

T=$((NHOOKS > 2 ? 2 : NHOOKS - 1))
state
st mwc-json "$MWC" | "$PY" -c 'import base64,json,sys; m=json.load(sys.stdin); m["webhooks"][int(sys.argv[1])]["clientConfig"]["caBundle"]=base64.b64encode(open(sys.argv[2],"rb").read()).decode(); print(json.dumps(m))' "$T" "$W/other-ca.crt" > "$W/tampered.json"
ctl object "@$W/tampered.json"
from=$(($(lines) + 1))
certs
got=$(requests "$from")
want="GET $SECRET_PATH 200|GET $MWC_PATH 200|PATCH $MWC_PATH 200 test:/metadata/resourceVersion,add:/webhooks/$T/clientConfig/caBundle|"
WHY="exit $RC, requests '$got', want '$want'"
check tampered/one-patched test "$RC" = 0 -a "$got" = "$want"
state
got=$(st mwc-bundles "$MWC" "$S1/ca.crt")
WHY="caBundles '$got' (want '$SAME_ALL'); stdout $(oneline "$W/out")"
check tampered/all-current bash -c "test '$got' = '$SAME_ALL' && grep -q 'patched on 1 webhook, already current on $((NHOOKS - 1)) webhooks' '$W/out'"

# --- 6. the serving certificate near expiry: renewed from the same CA ------------------------------

from=$(($(lines) + 1))
certs --validity-days 500 --renew-before-days 400
got=$(requests "$from")
WHY="exit $RC, requests '$got' (want GET, GET, PUT and no PATCH): $(oneline "$W/out") $(oneline "$W/err")"
check serving/requests test "$RC" = 0 -a "$got" = "GET $SECRET_PATH 200|GET $MWC_PATH 200|PUT $SECRET_PATH 200|"
WHY="stdout: $(oneline "$W/out")"
check serving/says-why bash -c "grep -q 'renewed serving certificate: tls.crt expires on .*within 400 days' '$W/out'"
state
S2=$W/s2
mkdir -p "$S2"
st secret-files "$NS/$SEC" "$S2"
WHY="ca.crt or ca.key changed, or tls.crt did not"
check serving/same-ca bash -c "cmp -s '$S1/ca.crt' '$S2/ca.crt' && cmp -s '$S1/ca.key' '$S2/ca.key' && ! cmp -s '$S1/tls.crt' '$S2/tls.crt' && ! cmp -s '$S1/tls.key' '$S2/tls.key'"
got=$("$OSSL" verify -CAfile "$S1/ca.crt" "$S2/tls.crt" 2>&1)
WHY="openssl verify: $got; $(x509 "$S2/tls.crt" -enddate)"
check serving/verifies-500-days bash -c "test '$got' = '$S2/tls.crt: OK' && '$OSSL' x509 -in '$S2/tls.crt' -noout -checkend $((499 * 86400)) > /dev/null"
got=$(st mwc-bundles "$MWC" "$S1/ca.crt")
WHY="caBundles '$got' (want all same as before)"
check serving/cabundle-unchanged test "$got" = "$SAME_ALL"
# the running server takes the new pair (as from a Secret volume update) and stays trusted
cp "$S2/tls.crt" "$SRV/tls.crt.tmp" && cp "$S2/tls.key" "$SRV/tls.key.tmp" && mv "$SRV/tls.crt.tmp" "$SRV/tls.crt" && mv "$SRV/tls.key.tmp" "$SRV/tls.key"
wait_for "$SRV/log" certificate-reloaded 10
s=$(served_serial) want_s=$(x509 "$S2/tls.crt" -serial | sed 's/serial=//')
got=$(healthz "$W/bundle1.pem")
WHY="after the reload: serial '$s' (want $want_s), /healthz with the unchanged caBundle: '$got'; log $(oneline "$SRV/log")"
check serving/served-and-trusted test "$s" = "$want_s" -a "$got" = ok

# --- 7. the CA near expiry: a new CA, the bundle holds both during the transition -------------------

from=$(($(lines) + 1))
certs --renew-before-days 3700 --validity-days 3800 --ca-validity-days 7000
got=$(requests "$from")
re="^GET [^|]*secrets[^|]* 200\|GET [^|]* 200\|PATCH [^|]* 200 test:[^|,]*(,add:[^|,]*){$NHOOKS}\|PUT [^|]*secrets/$SEC 200\|$"
[[ $RC = 0 && $got =~ $re ]] && ok=1 || ok=0
WHY="exit $RC, requests '$got' (want GET, GET, PATCH of every webhook, then PUT): $(oneline "$W/out") $(oneline "$W/err")"
check ca-renewal/cabundle-then-secret test $ok = 1
WHY="stdout: $(oneline "$W/out")"
check ca-renewal/says-why bash -c "grep -q 'renewed CA: the CA expires on .*within 3700 days' '$W/out' && grep -q 'caBundle (2 CAs)' '$W/out'"
state
S3=$W/s3
mkdir -p "$S3"
st secret-files "$NS/$SEC" "$S3"
"$PY" - "$S3/ca.crt" "$W/ca3" << 'EOF'
import sys
pem = open(sys.argv[1]).read()
blocks = ["-----BEGIN CERTIFICATE-----" + b for b in pem.split("-----BEGIN CERTIFICATE-----")[1:]]
for i, b in enumerate(blocks):
    open(f"{sys.argv[2]}.{i}", "w").write(b)
EOF
n=$(ls "$W"/ca3.* 2> /dev/null | wc -l)
old_fp=$(x509 "$S1/ca.crt" -fingerprint -sha256) new_fp=$(x509 "$W/ca3.0" -fingerprint -sha256) second_fp=$(x509 "$W/ca3.1" -fingerprint -sha256)
WHY="ca.crt holds $n certificates; first $new_fp, second $second_fp; the old CA is $old_fp (want new first, then the old)"
check ca-renewal/bundle-new-and-old test "$n" = 2 -a "$new_fp" != "$old_fp" -a "$second_fp" = "$old_fp"
got=$(st mwc-bundles "$MWC" "$S3/ca.crt")
WHY="caBundles '$got' (want every one the new ca.crt: '$SAME_ALL')"
check ca-renewal/cabundle test "$got" = "$SAME_ALL"
v_new=$("$OSSL" verify -CAfile "$W/ca3.0" "$S3/tls.crt" 2>&1) v_old=$("$OSSL" verify -CAfile "$S3/ca.crt" "$S2/tls.crt" 2>&1)
WHY="new tls.crt against the new CA: $v_new; the old tls.crt against the bundle: $v_old"
check ca-renewal/both-trusted test "$v_new" = "$S3/tls.crt: OK" -a "$v_old" = "$S2/tls.crt: OK"
WHY="ca.key did not change"
check ca-renewal/new-ca-key bash -c "! cmp -s '$S1/ca.key' '$S3/ca.key'"
mwc_bundle "$W/bundle3.pem"
got_old=$(healthz "$W/bundle3.pem") # the server still has the old pair: the transition
cp "$S3/tls.crt" "$SRV/tls.crt.tmp" && cp "$S3/tls.key" "$SRV/tls.key.tmp" && mv "$SRV/tls.crt.tmp" "$SRV/tls.crt" && mv "$SRV/tls.key.tmp" "$SRV/tls.key"
for ((i = 0; i < 100; i++)); do
  [ "$(grep -c certificate-reloaded "$SRV/log")" -ge 2 ] && break
  sleep 0.1
done
s=$(served_serial) want_s=$(x509 "$S3/tls.crt" -serial | sed 's/serial=//')
got_new=$(healthz "$W/bundle3.pem")
WHY="with the new caBundle: old pair served '$got_old', new pair (serial '$s', want $want_s) '$got_new'"
check ca-renewal/e2e-transition test "$got_old" = ok -a "$got_new" = ok -a "$s" = "$want_s"
from=$(($(lines) + 1))
certs
got=$(requests "$from")
WHY="exit $RC, requests '$got' (want GETs only): $(oneline "$W/out")"
check ca-renewal/then-kept bash -c "test $RC = 0 && test '$got' = 'GET $SECRET_PATH 200|GET $MWC_PATH 200|' && grep -q 'kept;.*caBundle (2 CAs) already current' '$W/out'"

# --- 8. an expired CA in ca.crt is taken out ---------------------------------------------------------

E=$W/expired
mkdir -p "$E"
touch "$E/index.txt"
echo 01 > "$E/serial"
cat > "$E/ca.cnf" << EOF
[ca]
default_ca = d
[d]
database = $E/index.txt
serial = $E/serial
new_certs_dir = $E
default_md = sha256
policy = p
x509_extensions = v3
unique_subject = no
[p]
commonName = supplied
[v3]
basicConstraints = critical,CA:TRUE
keyUsage = critical,keyCertSign,cRLSign
[req]
distinguished_name = dn
[dn]
EOF
if "$OSSL" req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$E/old.key" -out "$E/old.csr" \
  -subj /CN=expired-ca -config "$E/ca.cnf" > "$E/log" 2>&1 &&
  "$OSSL" ca -batch -config "$E/ca.cnf" -selfsign -keyfile "$E/old.key" -in "$E/old.csr" -startdate 20200101000000Z \
    -enddate 20200201000000Z -out "$E/old.crt" >> "$E/log" 2>&1; then
  state
  st secret-json "$NS/$SEC" | "$PY" -c 'import base64,json,sys; s=json.load(sys.stdin); ca=base64.b64decode(s["data"]["ca.crt"]) + open(sys.argv[1],"rb").read(); s["data"]["ca.crt"]=base64.b64encode(ca).decode(); print(json.dumps(s))' "$E/old.crt" > "$E/secret.json"
  ctl object "@$E/secret.json"
  from=$(($(lines) + 1))
  certs
  got=$(requests "$from")
  state
  S4=$W/s4
  mkdir -p "$S4"
  st secret-files "$NS/$SEC" "$S4"
  WHY="exit $RC, requests '$got' (want GET, GET, PUT: the caBundle already lacks it), ca.crt back to what it was: $(cmp "$S3/ca.crt" "$S4/ca.crt" 2>&1); $(oneline "$W/out") $(oneline "$W/err")"
  check prune/expired-ca-removed bash -c "test $RC = 0 && test '$got' = 'GET $SECRET_PATH 200|GET $MWC_PATH 200|PUT $SECRET_PATH 200|' && cmp -s '$S3/ca.crt' '$S4/ca.crt' && cmp -s '$S3/tls.crt' '$S4/tls.crt' && grep -q 'expired CA removed' '$W/out'"
else
  fail prune/expired-ca-removed "test setup: openssl could not make an expired CA: $(oneline "$E/log")"
fi

# --- 9. a Secret made by openssl is read and kept ------------------------------------------------------

O=$W/openssl
mkdir -p "$O"
printf 'basicConstraints=critical,CA:TRUE\nkeyUsage=critical,keyCertSign,cRLSign\nsubjectKeyIdentifier=hash\n' > "$O/ca.ext"
printf 'subjectAltName=DNS:%s,DNS:%s,DNS:%s,DNS:%s\nextendedKeyUsage=serverAuth\nkeyUsage=critical,digitalSignature\nbasicConstraints=CA:FALSE\n' \
  "$SVC" "$SVC.$NS" "$SVC.$NS.svc" "$SVC.$NS.svc.cluster.local" > "$O/srv.ext"
if "$OSSL" req -new -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$O/ca.key" -out "$O/ca.csr" -subj /CN=openssl-ca > "$O/log" 2>&1 &&
  "$OSSL" x509 -req -in "$O/ca.csr" -signkey "$O/ca.key" -days 1000 -extfile "$O/ca.ext" -out "$O/ca.crt" >> "$O/log" 2>&1 &&
  "$OSSL" req -new -newkey rsa:2048 -nodes -keyout "$O/tls.key" -out "$O/tls.csr" -subj "/CN=$HOST" >> "$O/log" 2>&1 &&
  "$OSSL" x509 -req -in "$O/tls.csr" -CA "$O/ca.crt" -CAkey "$O/ca.key" -set_serial 99 -days 300 -extfile "$O/srv.ext" -out "$O/tls.crt" >> "$O/log" 2>&1; then
  start_fake interop "$W/seed.yaml" || exit 0
  "$PY" - "$O" "$NS" "$SEC" > "$O/secret.json" << 'EOF'
import base64, json, sys
d, ns, name = sys.argv[1:]
b = lambda f: base64.b64encode(open(f"{d}/{f}", "rb").read()).decode()
print(json.dumps({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": name, "namespace": ns}, "type": "kubernetes.io/tls",
                  "data": {k: b(k) for k in ("tls.crt", "tls.key", "ca.crt", "ca.key")}}))
EOF
  ctl object "@$O/secret.json"
  certs
  got=$(requests 1)
  re="^GET [^|]* 200\|GET [^|]* 200\|PATCH [^|]* 200 [^|]*\|$"
  [[ $RC = 0 && $got =~ $re ]] && grep -q 'kept;' "$W/out" && ok=1 || ok=0
  WHY="exit $RC, requests '$got' (want GET, GET, PATCH of the caBundles, no Secret write): $(oneline "$W/out") $(oneline "$W/err")"
  check interop/openssl-made-kept test $ok = 1
else
  fail interop/openssl-made-kept "test setup: openssl: $(oneline "$O/log")"
fi

# --- 9b. a ca.key that is not the CA's: kept while nothing needs signing, a new CA when something does ----

start_fake cakey "$W/seed.yaml" || exit 0
certs
state
st secret-json "$NS/$SEC" | "$PY" -c 'import base64,json,sys; s=json.load(sys.stdin); s["data"]["ca.key"]=base64.b64encode(open(sys.argv[1],"rb").read()).decode(); print(json.dumps(s))' "$W/other.key" > "$W/cakey.json"
ctl object "@$W/cakey.json"
from=$(($(lines) + 1))
certs
got=$(requests "$from")
WHY="exit $RC, requests '$got' (want GETs only): $(oneline "$W/out") $(oneline "$W/err")"
check ca-key/foreign-key-kept bash -c "test $RC = 0 && test '$got' = 'GET $SECRET_PATH 200|GET $MWC_PATH 200|' && grep -q 'kept;' '$W/out'"
from=$(($(lines) + 1))
certs --validity-days 500 --renew-before-days 400
got=$(requests "$from")
WHY="exit $RC, requests '$got' (want a new CA: caBundle patched, then PUT): $(oneline "$W/out") $(oneline "$W/err")"
check ca-key/foreign-key-new-ca bash -c "test $RC = 0 && grep -q 'renewed CA: tls.crt expires on .*; the CA cannot sign a new one: ca.key is not the key of the CA in ca.crt' '$W/out' && grep -q 'PUT $SECRET_PATH 200' <<< '$got' && grep -q 'PATCH' <<< '$got'"

# --- 10. races and conflicts ----------------------------------------------------------------------------

# another Job's Secret: made by a run against a scratch fake
start_fake scratch "$W/seed.yaml" || exit 0
certs
state
st secret-json "$NS/$SEC" | "$PY" -c 'import json,sys; s=json.load(sys.stdin); m=s["metadata"]; [m.pop(k, None) for k in ("uid","resourceVersion","creationTimestamp")]; print(json.dumps(s))' > "$W/theirs.json"
OTHER=$W/other
mkdir -p "$OTHER"
st secret-files "$NS/$SEC" "$OTHER"

start_fake race "$W/seed.yaml" || exit 0
ctl fault "{\"method\": \"POST\", \"path\": \"/api/v1/namespaces/$NS/secrets\", \"action\": \"create-first\", \"object\": $(cat "$W/theirs.json")}"
certs
got=$(requests 1)
re="^GET $SECRET_PATH 404\|GET $MWC_PATH 200\|PATCH $MWC_PATH 200 [^|]*\|POST /api/v1/namespaces/$NS/secrets 409\|GET $SECRET_PATH 200\|GET $MWC_PATH 200\|PATCH $MWC_PATH 200 [^|]*\|$"
[[ $RC = 0 && $got =~ $re ]] && grep -q 'kept;.*1 conflict' "$W/out" && ok=1 || ok=0
WHY="exit $RC, requests '$got' (want: create refused 409, read again, caBundle set to theirs): $(oneline "$W/out") $(oneline "$W/err")"
check race/create-409-read-again test $ok = 1
state
R=$W/race
mkdir -p "$R/s"
st secret-files "$NS/$SEC" "$R/s"
got=$(st mwc-bundles "$MWC" "$OTHER/ca.crt")
WHY="the Secret is not the winner's, or caBundles '$got' are not the winner's CA"
check race/theirs-kept bash -c "cmp -s '$OTHER/ca.crt' '$R/s/ca.crt' && cmp -s '$OTHER/tls.crt' '$R/s/tls.crt' && test '$got' = '$SAME_ALL'"

start_fake stale "$W/seed.yaml" || exit 0
certs
ctl fault "{\"method\": \"PUT\", \"path\": \"$SECRET_PATH\", \"action\": \"bump\"}"
from=$(($(lines) + 1))
certs --validity-days 500 --renew-before-days 400
got=$(requests "$from")
WHY="exit $RC, requests '$got' (want PUT 409, then read again and PUT 200): $(oneline "$W/out") $(oneline "$W/err")"
check stale/put-409-retried bash -c "test $RC = 0 && test '$got' = 'GET $SECRET_PATH 200|GET $MWC_PATH 200|PUT $SECRET_PATH 409|GET $SECRET_PATH 200|GET $MWC_PATH 200|PUT $SECRET_PATH 200|' && grep -q 'renewed serving certificate.*1 conflict' '$W/out'"
state
got=$(st secret-annotation "$NS/$SEC" fake.diagport.dev/concurrent-writer)
WHY="the concurrent writer's annotation is '$got' in the Secret written (want 1: the object read was edited, not rebuilt)"
check stale/other-writer-kept test "$got" = 1
mkdir -p "$W/stale"
st secret-files "$NS/$SEC" "$W/stale"
got=$("$OSSL" verify -CAfile "$W/stale/ca.crt" "$W/stale/tls.crt" 2>&1)
WHY="$got"
check stale/result-verifies test "$got" = "$W/stale/tls.crt: OK"

start_fake patch "$W/seed.yaml" || exit 0
ctl fault "{\"method\": \"PATCH\", \"path\": \"$MWC_PATH\", \"action\": \"bump\"}"
certs
got=$(requests 1)
re="^GET $SECRET_PATH 404\|GET $MWC_PATH 200\|PATCH $MWC_PATH 422 [^|]*\|GET $MWC_PATH 200\|PATCH $MWC_PATH 200 [^|]*\|POST /api/v1/namespaces/$NS/secrets 201\|$"
[[ $RC = 0 && $got =~ $re ]] && ok=1 || ok=0
WHY="exit $RC, requests '$got' (want PATCH 422 for the failed test, GET, PATCH 200): $(oneline "$W/out") $(oneline "$W/err")"
check patch-conflict/422-retried test $ok = 1
state
mkdir -p "$W/patch"
st secret-files "$NS/$SEC" "$W/patch"
got=$(st mwc-bundles "$MWC" "$W/patch/ca.crt")
WHY="caBundles '$got' after the retry"
check patch-conflict/cabundle test "$got" = "$SAME_ALL"

# --- 11. 5xx: tried again; 5xx that go on: exit 3 -----------------------------------------------------

start_fake retry "$W/seed.yaml" || exit 0
ctl fault "{\"method\": \"GET\", \"path\": \"$SECRET_PATH\", \"action\": \"status\", \"status\": 500, \"message\": \"etcdserver: leader changed\"}"
certs
got=$(requests 1)
re="^GET $SECRET_PATH 500\|GET $SECRET_PATH 404\|GET $MWC_PATH 200\|PATCH [^|]*\|POST [^|]* 201\|$"
[[ $RC = 0 && $got =~ $re ]] && grep -q '"event":"api-retry".*"status":500' "$W/err" && ok=1 || ok=0
WHY="exit $RC, requests '$got': $(oneline "$W/out") $(oneline "$W/err")"
check retry/one-500 test $ok = 1
ctl fault "{\"method\": \"GET\", \"path\": \"$SECRET_PATH\", \"action\": \"status\", \"status\": 500, \"message\": \"etcdserver: request timed out\", \"times\": 20}"
from=$(($(lines) + 1))
certs
got=$(requests "$from")
WHY="exit $RC (want 3), stderr $(oneline "$W/err"), requests '$got'"
check retry/500s-exit-3 bash -c "test $RC = 3 && grep -q 'Secret $NS/$SEC: GET answered HTTP 500 Internal Server Error (InternalError): etcdserver: request timed out' '$W/err' && ! grep -qE 'PUT|POST|PATCH' <<< '$got'"

# --- 12. credentials --------------------------------------------------------------------------------------

start_fake auth "$W/seed.yaml" || exit 0
printf 'not-the-token\n' > "$W/wrong-token"
"$D" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "https://127.0.0.1:$FP" --token-file "$W/wrong-token" --api-ca-file "$W/api-ca.crt" > "$W/out" 2> "$W/err"
RC=$?
cp "$W/err" "$W/err.wrong-token"
got=$(requests 1)
WHY="exit $RC (want 4), stderr $(oneline "$W/err"), requests '$got' (want one GET 401)"
check auth/wrong-token-401 bash -c "test $RC = 4 && grep -q 'HTTP 401 Unauthorized (Unauthorized): Unauthorized' '$W/err' && test '$got' = 'GET $SECRET_PATH 401|' && test ! -s '$W/out'"
state
WHY="a Secret exists after a refused run"
check auth/nothing-written test "$(st secret-rv "$NS/$SEC")" = none
ctl fault "{\"method\": \"GET\", \"path\": \"$SECRET_PATH\", \"action\": \"status\", \"status\": 403, \"message\": \"secrets \\\"$SEC\\\" is forbidden: User \\\"system:serviceaccount:$NS:diagport-webhook\\\" cannot get resource \\\"secrets\\\"\"}"
certs
WHY="exit $RC (want 4), stderr $(oneline "$W/err")"
check auth/forbidden-403 bash -c "test $RC = 4 && jq -r 'select(.event == \"exit\") | .error' '$W/err' | grep -q 'HTTP 403 Forbidden (Forbidden): secrets \"$SEC\" is forbidden'"
"$D" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "https://127.0.0.1:$FP" --token-file "$W/no-such-token" --api-ca-file "$W/api-ca.crt" > "$W/out" 2> "$W/err"
RC=$?
WHY="exit $RC (want 5), stderr $(oneline "$W/err")"
check auth/token-file-missing bash -c "test $RC = 5 && grep -q 'token.*$W/no-such-token' '$W/err'"

# --- 13. errors ---------------------------------------------------------------------------------------------

refused_port; DOWN=$RP
"$D" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "https://127.0.0.1:$DOWN" --token-file "$W/token" --api-ca-file "$W/api-ca.crt" --timeout-seconds 2 > "$W/out" 2> "$W/err"
RC=$?
WHY="exit $RC (want 5), stderr $(oneline "$W/err")"
check errors/api-server-down bash -c "test $RC = 5 && grep -q 'Secret $NS/$SEC: GET https://127.0.0.1:$DOWN/api/v1/namespaces/$NS/secrets/$SEC: .*' '$W/err' && test ! -s '$W/out'"

from=$(($(lines) + 1))
"$D" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "https://127.0.0.1:$FP" --token-file "$W/token" --api-ca-file "$W/other-ca.crt" > "$W/out" 2> "$W/err"
RC=$?
got=$(requests "$from")
WHY="exit $RC (want 5), stderr $(oneline "$W/err"), requests that reached the handler '$got' (want none)"
check errors/api-server-not-trusted bash -c "test $RC = 5 && grep -qi 'certificate' '$W/err' && test -z '$got'"

start_fake empty || exit 0
certs
got=$(requests 1)
WHY="exit $RC (want 3), stderr $(oneline "$W/err"), requests '$got' (want no write)"
check errors/configuration-missing bash -c "test $RC = 3 && jq -r 'select(.event == \"exit\") | .error' '$W/err' | grep -q 'MutatingWebhookConfiguration $MWC: GET answered HTTP 404 Not Found (NotFound): mutatingwebhookconfigurations.admissionregistration.k8s.io \"$MWC\" not found' && ! grep -qE 'POST|PUT|PATCH' <<< '$got'"

start_fake opaque "$W/seed.yaml" || exit 0
ctl object "{\"apiVersion\": \"v1\", \"kind\": \"Secret\", \"metadata\": {\"name\": \"$SEC\", \"namespace\": \"$NS\"}, \"type\": \"Opaque\", \"data\": {\"x\": \"eA==\"}}"
certs
got=$(requests 1)
WHY="exit $RC (want 3), stderr $(oneline "$W/err"), requests '$got'"
check errors/secret-of-another-type bash -c "test $RC = 3 && grep -q 'Secret $NS/$SEC has type Opaque' '$W/err' && test '$got' = 'GET $SECRET_PATH 200|'"

usage_case() {
  local name=$1
  shift
  "$D" webhook certs "$@" > "$W/out" 2> "$W/err"
  RC=$?
  WHY="exit $RC (want 2), stderr $(oneline "$W/err")"
  check "errors/usage-$name" bash -c "test $RC = 2 && test -s '$W/err' && test ! -s '$W/out'"
}
usage_case missing-flags --namespace "$NS"
usage_case http-url --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "http://127.0.0.1:$FP" --token-file "$W/token" --api-ca-file "$W/api-ca.crt"
usage_case renew-not-below-validity --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "https://127.0.0.1:$FP" --token-file "$W/token" --api-ca-file "$W/api-ca.crt" --renew-before-days 400
usage_case bad-name --namespace "Bad_NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
  --api-server "https://127.0.0.1:$FP" --token-file "$W/token" --api-ca-file "$W/api-ca.crt"
env -u KUBERNETES_SERVICE_HOST -u KUBERNETES_SERVICE_PORT "$D" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" \
  --webhook-configuration "$MWC" > "$W/out" 2> "$W/err"
RC=$?
WHY="exit $RC, stderr $(oneline "$W/err")"
check errors/not-in-a-pod bash -c "test $RC = 2 && grep -q 'KUBERNETES_SERVICE_HOST' '$W/err'"

# --- 14. dry run --------------------------------------------------------------------------------------------

start_fake dry "$W/seed.yaml" || exit 0
certs --dry-run
got=$(requests 1)
WHY="exit $RC, requests '$got' (want GETs only), stdout $(oneline "$W/out")"
check dry-run/writes-nothing bash -c "test $RC = 0 && test '$got' = 'GET $SECRET_PATH 404|GET $MWC_PATH 200|' && grep -q 'dry run, nothing written: .*would be created.*would be patched on $NHOOKS webhooks' '$W/out'"

# --- 15. the token: read for every request, in no output -------------------------------------------------------

start_fake rotate "$W/seed.yaml" || exit 0
TOKEN2="tok2-$(head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')"
ctl fault "{\"method\": \"GET\", \"path\": \"$SECRET_PATH\", \"action\": \"rotate-token\", \"token\": \"$TOKEN2\"}"
certs
got=$(requests 1)
WHY="exit $RC, requests '$got' (the token file changed after the first request; want no 401): $(oneline "$W/err")"
check token/read-per-request bash -c "test $RC = 0 && ! grep -q ' 401' <<< '$got' && grep -q 'POST [^|]* 201' <<< '$got'"
printf '%s\n' "$TOKEN" > "$W/token"
n=$(cat "$W"/out.* "$W"/err.* "$W/err.wrong-token" 2> /dev/null | grep -c -e "$TOKEN" -e "$TOKEN2")
WHY="$n output lines hold a token"
check token/never-printed test "$n" = 0

# --- 16. valgrind: a create and a keep ------------------------------------------------------------------------

# valgrind cannot run a sanitizer build: then it runs the plain build of the same sources (made here,
# with the sanitizer settings of `make SANITIZER=... test` cleared), and AddressSanitizer has checked
# every run above
VG=$D
if nm -D "$D" 2> /dev/null | grep -q __asan_init; then
  VG=$PWD/build/diagport
  env -u MAKEFLAGS -u MFLAGS -u MAKELEVEL -u SANITIZER make -s BUILD=build build/diagport > "$W/vg-make.log" 2>&1 ||
    fail valgrind/build "cannot make the plain build for valgrind: $(tail -c 300 "$W/vg-make.log" | tr '\n' ' ')"
fi
echo "valgrind runs $VG"
start_fake vg "$W/seed.yaml" || exit 0
for run in create keep; do
  valgrind -q --error-exitcode=99 --leak-check=full --errors-for-leak-kinds=definite --show-leak-kinds=definite \
    "$VG" webhook certs --namespace "$NS" --secret "$SEC" --service "$SVC" --webhook-configuration "$MWC" \
    --api-server "https://127.0.0.1:$FP" --token-file "$W/token" --api-ca-file "$W/api-ca.crt" --timeout-seconds 30 \
    > "$W/vg.out" 2> "$W/vg.err"
  RC=$?
  WHY="exit $RC under valgrind: $(grep -v '^==[0-9]*== *$' "$W/vg.err" | head -c 600 | tr '\n' ' ')"
  check "valgrind/$run" test "$RC" = 0
done
exit 0
