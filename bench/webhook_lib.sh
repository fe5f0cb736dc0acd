# bench/webhook_lib.sh - what bench/webhook.sh and bench/webhook_ab.sh share (sourced from the
# repository root after bench/lib.sh, with W, PY, OSSL set):
#   webhook_keys        $W/ca.crt, $W/tls.crt, $W/tls.key: a CA and a serving certificate for IP 127.0.0.1
#   webhook_streams     $W/typical.json, $W/env1500.json (AdmissionReviews of the typical and the
#                       1,500-env pods) and the request streams $W/CASE-MODE.list (see below)
#   webhook_wait PORT   until the webhook on PORT answers /healthz (5 s), else die
webhook_keys() {
	"$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/ca.key" -out "$W/ca.crt" \
		-days 2 -subj /CN=diagport-bench-ca 2>"$W/openssl.err" &&
		"$OSSL" req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls.key" -out "$W/tls.csr" \
			-subj /CN=127.0.0.1 2>>"$W/openssl.err" &&
		printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\nbasicConstraints=CA:FALSE\n' >"$W/tls.ext" &&
		"$OSSL" x509 -req -in "$W/tls.csr" -CA "$W/ca.crt" -CAkey "$W/ca.key" -set_serial 0x1 -days 2 \
			-extfile "$W/tls.ext" -out "$W/tls.crt" 2>>"$W/openssl.err" || die "openssl: $(tail -3 "$W/openssl.err")"
}

webhook_streams() {
# --- the two AdmissionReviews (compact JSON, as the API server sends them)
mkdir -p "$W/pods"
"$PY" tests/integration/webhook_review.py pods tests/golden/k8s/env-1500 "$W/pods" >/dev/null || die "cannot make the 1,500-env pod"
"$PY" tests/integration/webhook_review.py review bench/webhook_pod.json shop >"$W/typical.json" || die "cannot make the typical review"
"$PY" tests/integration/webhook_review.py review "$W/pods/pod1.json" default >"$W/env1500.json" || die "cannot make the 1,500-env review"
read -ra CASES <<<"${CASES:-typical env1500}"
# --- the request streams (wrk cycles through each list; bench/webhook_post.lua):
#   replicas: the same pod again and again as a ReplicaSet's replicas reach the webhook: each request
#             with its own request.uid and its own generated token-volume name (kube-api-access-XXXXX,
#             when the pod has one). The webhook answers all but the first from its cache (rcache.h).
#   distinct: every request a different pod (an annotation numbered 000000..), and its own uid: every
#             request is a cache miss, a full review (parse, inject, diff).
read -ra MODES <<<"${MODES:-replicas distinct}"
"$PY" - "$W" typical:2000 env1500:200 <<'EOF' || die "cannot make the request streams"
import json, random, sys, uuid
w = sys.argv[1]
for spec in sys.argv[2:]:
    case, n = spec.split(":")
    base = open(f"{w}/{case}.json").read()
    r0 = json.loads(base)
    vols = r0["request"]["object"]["spec"].get("volumes") or []
    tok = next((v["name"] for v in vols if v["name"].startswith("kube-api-access-")), None)
    for mode in ("replicas", "distinct"):
        paths = []
        for i in range(int(n)):
            text = base
            if tok:
                text = text.replace(tok, "kube-api-access-" + "".join(random.choice("bcdfghjklmnpqrstvwxz2456789") for _ in range(5)))
            r = json.loads(text)
            r["request"]["uid"] = str(uuid.uuid4())
            if mode == "distinct":
                r["request"]["object"]["metadata"].setdefault("annotations", {})["bench.diagport.dev/seq"] = "%06d" % i
            p = f"{w}/stream-{case}-{mode}-{i}.json"
            open(p, "w").write(json.dumps(r, separators=(",", ":")))
            paths.append(p)
        open(f"{w}/{case}-{mode}.list", "w").write("\n".join(paths) + "\n")
EOF
}

webhook_wait() {
	local i
	for i in $(seq 1 500); do
		[ "$(curl -s --cacert "$W/ca.crt" -o /dev/null -w '%{http_code}' "https://127.0.0.1:$1/healthz")" = 200 ] && return 0
		sleep 0.01
	done
	die "the webhook on port $1 did not start"
}
