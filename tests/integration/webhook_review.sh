#!/usr/bin/env bash
# webhook_review.sh - `diagport webhook review` answers one admission.k8s.io/v1
# AdmissionReview, and its JSON Patch turns the pod into exactly what
# `diagport inject -o json` makes of it.
#
# For every pod template of every golden k8s success case (made a bare Pod
# annotated diagport.dev/inject: "true"), the review is checked as
# NAME/response (uid echoed, allowed, patchType JSONPatch, base64 RFC 6902
# array), NAME/jsonpatch and NAME/kubectl (the patch applied by
# python3-jsonpatch and by `kubectl patch --local --type json` is JSON-equal to
# inject's output; on the kubectl side both go through kubectl, which reads
# numbers as float64) and NAME/minimal (no whole-map or whole-array
# replacement of what the pod had, annotation keys escaped per RFC 6901).
# A pod that inject leaves unchanged must get no patch (NAME/no-patch), one
# that inject refuses is admitted with a warning and no patch (NAME/refused),
# one injected already (diagport.dev/status) gets no patch either
# (NAME/already-injected: inject would re-inject it, the webhook leaves it).
# The same pods again over HTTPS: POSTed with curl to a running `diagport webhook`,
# the answers through the same checks (https/*).
# Then the edge cases (opt-in, opt-out, already injected, UPDATE, other kinds)
# and malformed input (exit 3, nothing on stdout; too big: exit 4 or 3).
# The JSON work is done by webhook_review.py, with /usr/bin/python3.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
PY=/usr/bin/python3
H=$PWD/tests/integration/webhook_review.py
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export KUBECONFIG=/dev/null
T_NAME=webhook-review
. tests/lib.sh # every script runs from the repository root

STEP=60 # seconds for one diagport or kubectl run

# oneline FILE: a file's first bytes on one line, for a reason.
oneline() { head -c 300 "$1" 2>/dev/null | tr '\n\t' '  '; }

# review OUT ERR ARGS...: run `diagport webhook review ARGS`; its status. With VIA=https,
# POST the request file (the last ARG) with curl to the running server instead (section 1b):
# --namespace-enabled and --no-ptrace choose the path as the API server's choice of webhook
# does; the status is the command's (0 a 200 answer, 3 a 400, 4 a 413, 5 anything else).
VIA=cli
review() {
  local out=$1 err=$2 path=/mutate np= a code
  shift 2
  if [ "$VIA" = cli ]; then
    timeout -k 5 "$STEP" "$D" webhook review "$@" > "$out" 2> "$err" < /dev/null
    return
  fi
  for a in "${@:1:$#-1}"; do
    case $a in
      --namespace-enabled) path=/mutate/namespace ;;
      --no-ptrace) np=/no-ptrace ;;
      *) echo "review: $a has no HTTPS form" > "$err"; return 2 ;;
    esac
  done
  code=$(curl -sS --max-time "$STEP" --cacert "$W/tls/ca.crt" -H 'Content-Type: application/json' \
    --data-binary "@${!#}" -o "$out" -w '%{http_code}' "https://127.0.0.1:$SRV_PORT$path$np" 2> "$err")
  case $code in 200) return 0 ;; 400) return 3 ;; 413) return 4 ;; *) echo "HTTP $code" >> "$err"; return 5 ;; esac
}

# answer NAME DIR POD NS [REVIEW-OPTS...]: wrap POD in an AdmissionReview
# (DIR/req.json), review it, and check the response answers it (uid, allowed,
# patch well-formed). Sets $got to "patch N warnings N" or "none warnings N"
# (the patch decoded into DIR/patch.json); on failure prints NAME's FAIL line
# and returns 1.
answer() {
  local name=$1 dir=$2 pod=$3 ns=$4 rc
  shift 4
  got=
  if ! "$PY" "$H" review "$pod" "$ns" > "$dir/req.json" 2> "$dir/why"; then
    fail "$name" "cannot build the AdmissionReview: $(oneline "$dir/why")"; return 1
  fi
  review "$dir/resp.json" "$dir/resp.err" "$@" "$dir/req.json"; rc=$?
  if [ $rc -ne 0 ]; then
    fail "$name" "webhook review exit $rc: $(oneline "$dir/resp.err")"; return 1
  fi
  if ! got=$("$PY" "$H" response "$dir/req.json" "$dir/resp.json" "$dir/patch.json" 2> "$dir/why"); then
    fail "$name" "$(oneline "$dir/why")"; return 1
  fi
  return 0
}

# expect_none NAME POD NS [REVIEW-OPTS...]: allowed, no patch.
n_dir=0
newdir() { n_dir=$((n_dir + 1)); dir=$W/r$n_dir; mkdir -p "$dir"; }
expect_none() {
  local name=$1 pod=$2 ns=$3 dir
  shift 3
  newdir
  answer "$name" "$dir" "$pod" "$ns" "$@" || return 0
  case $got in
    none*) pass "$name" ;;
    *) fail "$name" "a patch ($got) where none was expected" ;;
  esac
}

# expect_refused NAME POD NS [REVIEW-OPTS...]: allowed, no patch, a warning.
expect_refused() {
  local name=$1 pod=$2 ns=$3 dir
  shift 3
  newdir
  answer "$name" "$dir" "$pod" "$ns" "$@" || return 0
  case $got in
    "none warnings 0") fail "$name" "admitted unchanged but without a warning saying why" ;;
    none*) pass "$name" ;;
    *) fail "$name" "a patch ($got) for a pod inject refuses" ;;
  esac
}

# kubectl_view IN OUT: the object as kubectl reads and writes it.
kubectl_view() {
  timeout -k 5 "$STEP" kubectl patch --local -f "$1" --type merge -p '{}' -o json > "$2" 2> "$2.err"
}

# one_pod NAME POD NS [REVIEW-OPTS...]: the whole contract for one pod, with
# `diagport inject -o json POD` as the expectation.
one_pod() {
  local name=$1 pod=$2 ns=$3 dir rc
  shift 3
  if grep -q '"diagport.dev/status"' "$pod"; then
    # injected already (a golden case of re-injection): the webhook leaves such a pod alone
    expect_none "$name/already-injected" "$pod" "$ns" "$@"; return 0
  fi
  newdir
  local base=$dir
  timeout -k 5 "$STEP" "$D" inject -o json "$pod" > "$base/inj.json" 2> "$base/inj.err"; rc=$?
  if [ $rc -ne 0 ]; then
    # inject refuses this pod: the webhook admits it unchanged, with a warning
    if answer "$name/refused" "$dir" "$pod" "$ns" "$@"; then
      case $got in
        "none warnings 0") fail "$name/refused" "inject refuses the pod (exit $rc) but the review gives no warning" ;;
        none*) pass "$name/refused" ;;
        *) fail "$name/refused" "a patch ($got) for a pod inject refuses: $(oneline "$base/inj.err")" ;;
      esac
    fi
    return 0
  fi
  if "$PY" "$H" equal "$pod" "$base/inj.json" 2> /dev/null; then
    # inject changes nothing (opted out): no patch
    if answer "$name/no-patch" "$dir" "$pod" "$ns" "$@"; then
      case $got in
        none*) pass "$name/no-patch" ;;
        *) fail "$name/no-patch" "a patch ($got) for a pod inject leaves as it is" ;;
      esac
    fi
    return 0
  fi
  answer "$name/response" "$dir" "$pod" "$ns" "$@" || return 0
  case $got in
    patch*) pass "$name/response" ;;
    *) fail "$name/response" "no patch ($got), but inject changes the pod"; return 0 ;;
  esac

  # (a) python3-jsonpatch
  if ! "$PY" "$H" apply "$pod" "$dir/patch.json" "$dir/jp.json" 2> "$dir/why"; then
    fail "$name/jsonpatch" "$(oneline "$dir/why")"
  elif "$PY" "$H" equal "$base/inj.json" "$dir/jp.json" 2> "$dir/why"; then
    pass "$name/jsonpatch"
  else
    fail "$name/jsonpatch" "the patched pod is not inject's output: $(oneline "$dir/why")"
  fi

  # (b) kubectl. kubectl cannot decode numbers beyond float64 (1e400): for a
  # pod holding one, the review is made again of the pod without them.
  local kpod=$pod kinj=$base/inj.json kpatch=$dir/patch.json safe
  safe=$("$PY" "$H" kubectl-safe "$pod" "$dir/kpod.json" 2> "$dir/why")
  if [ "$safe" = changed ]; then
    kpod=$dir/kpod.json kinj=$dir/kinj.json
    mkdir -p "$dir/k"
    if ! timeout -k 5 "$STEP" "$D" inject -o json "$kpod" > "$kinj" 2> "$dir/why"; then
      fail "$name/kubectl" "inject of the pod without its float64-overflowing numbers failed: $(oneline "$dir/why")"; return 0
    fi
    answer "$name/kubectl" "$dir/k" "$kpod" "$ns" "$@" || return 0
    case $got in
      patch*) kpatch=$dir/k/patch.json ;;
      *) fail "$name/kubectl" "no patch ($got) for the pod without its float64-overflowing numbers"; return 0 ;;
    esac
  elif [ "$safe" != same ]; then
    fail "$name/kubectl" "$(oneline "$dir/why")"; return 0
  fi
  if ! timeout -k 5 "$STEP" kubectl patch --local -f "$kpod" --type json -p "$(cat "$kpatch")" -o json > "$dir/kp.json" 2> "$dir/kp.err"; then
    fail "$name/kubectl" "kubectl patch --local --type json failed: $(oneline "$dir/kp.err")"
  elif ! kubectl_view "$kinj" "$dir/kwant.json"; then
    fail "$name/kubectl" "kubectl cannot read inject's output: $(oneline "$dir/kwant.json.err")"
  elif "$PY" "$H" equal "$dir/kwant.json" "$dir/kp.json" 2> "$dir/why"; then
    pass "$name/kubectl"
  else
    fail "$name/kubectl" "kubectl's patched pod is not inject's output: $(oneline "$dir/why")"
  fi

  # (c) minimal in spirit, and RFC 6901 escaping
  if "$PY" "$H" minimal "$pod" "$dir/patch.json" "$base/inj.json" 2> "$dir/why"; then
    pass "$name/minimal"
  else
    fail "$name/minimal" "$(oneline "$dir/why")"
  fi
}

# --- 0. the command is there; the comparer can tell a difference -----------------

timeout -k 5 "$STEP" "$D" webhook review --help > "$W/help" 2>&1; rc=$?
WHY="\`diagport webhook review --help\` exit $rc: $(oneline "$W/help")"
check help test $rc -eq 0 -a -s "$W/help"

mkdir -p "$W/self"
printf '%s\n' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"s","annotations":{"diagport.dev/inject":"true"}},"spec":{"containers":[{"name":"a","image":"x","n":1.0,"b":true}]}}' > "$W/self/pod.json"
self_ok=1 self_why=
"$D" inject -o json "$W/self/pod.json" > "$W/self/inj.json" 2> "$W/self/err" || { self_ok=0; self_why="inject failed: $(oneline "$W/self/err")"; }
if [ $self_ok = 1 ]; then
  # a hand-made patch with what inject adds to annotations, applied by both tools
  "$PY" - "$W/self/pod.json" "$W/self/inj.json" > "$W/self/patch.json" << 'EOF'
import json, sys
pod, inj = (json.load(open(p)) for p in sys.argv[1:3])
ops = []
for k, v in inj["metadata"]["annotations"].items():
    if k not in pod["metadata"]["annotations"]:
        ops.append({"op": "add", "path": "/metadata/annotations/" + k.replace("~", "~0").replace("/", "~1"), "value": v})
for k in ("volumes", "initContainers"):
    ops.append({"op": "add", "path": "/spec/" + k, "value": inj["spec"][k]})
ops.append({"op": "replace", "path": "/spec/containers/0", "value": inj["spec"]["containers"][0]})
print(json.dumps(ops))
EOF
  "$PY" "$H" apply "$W/self/pod.json" "$W/self/patch.json" "$W/self/jp.json" 2> "$W/self/err" &&
    "$PY" "$H" equal "$W/self/inj.json" "$W/self/jp.json" 2>> "$W/self/err" || { self_ok=0; self_why="hand-made patch not equal: $(oneline "$W/self/err")"; }
  kubectl patch --local -f "$W/self/pod.json" --type json -p "$(cat "$W/self/patch.json")" -o json > "$W/self/kp.json" 2> "$W/self/err" &&
    kubectl_view "$W/self/inj.json" "$W/self/kw.json" &&
    "$PY" "$H" equal "$W/self/kw.json" "$W/self/kp.json" 2>> "$W/self/err" || { self_ok=0; self_why="hand-made patch via kubectl not equal: $(oneline "$W/self/err")"; }
  # differences the comparer must see: the pod itself, 1.0 vs true, a key too many
  "$PY" "$H" equal "$W/self/inj.json" "$W/self/pod.json" 2> /dev/null && { self_ok=0; self_why="comparer: pod equals inject output"; }
  sed 's/"b":true/"b":1/' "$W/self/jp.json" > "$W/self/jp2.json"
  "$PY" "$H" equal "$W/self/inj.json" "$W/self/jp2.json" 2> /dev/null && { self_ok=0; self_why="comparer: true equals 1"; }
  sed 's/"b":true/"b":true,"c":null/' "$W/self/jp.json" > "$W/self/jp3.json"
  "$PY" "$H" equal "$W/self/inj.json" "$W/self/jp3.json" 2> /dev/null && { self_ok=0; self_why="comparer: an extra key unseen"; }
  # and the minimality check sees a whole-array replacement and an unescaped key
  printf '[{"op":"replace","path":"/spec/containers","value":[]}]' > "$W/self/bad1.json"
  "$PY" "$H" minimal "$W/self/pod.json" "$W/self/bad1.json" "$W/self/inj.json" 2> /dev/null && { self_ok=0; self_why="minimal: whole /spec/containers accepted"; }
  printf '[{"op":"add","path":"/metadata/annotations/diagport.dev/status","value":"x"}]' > "$W/self/bad2.json"
  "$PY" "$H" minimal "$W/self/pod.json" "$W/self/bad2.json" "$W/self/inj.json" 2> /dev/null && { self_ok=0; self_why="minimal: unescaped / accepted"; }
fi
if [ $self_ok = 1 ]; then pass self-test; else fail self-test "$self_why"; fi

# --- 1. every pod of every golden k8s success case --------------------------------

for case in tests/golden/k8s/*/; do
  case=${case%/}
  [ -f "$case/expected" ] || continue
  c=$(basename "$case")
  mkdir -p "$W/pods/$c"
  if ! "$PY" "$H" pods "$case" "$W/pods/$c" > "$W/pods/$c.list" 2> "$W/pods/$c.err"; then
    fail "$c" "cannot take the pods out of $case: $(oneline "$W/pods/$c.err")"; continue
  fi
  while IFS=$'\t' read -r label pod ns; do
    one_pod "$c/$label" "$pod" "$ns"
  done < "$W/pods/$c.list"
done

# --- 1b. the same pods over HTTPS: curl to a running `diagport webhook` ----------------
# Each pod's AdmissionReview is POSTed with curl (TLS 1.3, the server's certificate checked
# against a CA made here) and the answer goes through the same contract as in section 1
# (response, python3-jsonpatch, kubectl patch --local, minimal), under https/<case>/<pod>.

mkdir -p "$W/tls"
SRV_OK=0
if openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls/ca.key" -out "$W/tls/ca.crt" \
     -days 2 -subj /CN=diagport-test-ca 2> "$W/tls/err" &&
   openssl req -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls/tls.key" -out "$W/tls/tls.csr" \
     -subj /CN=127.0.0.1 2>> "$W/tls/err" &&
   printf 'subjectAltName=IP:127.0.0.1\nextendedKeyUsage=serverAuth\n' > "$W/tls/ext" &&
   openssl x509 -req -in "$W/tls/tls.csr" -CA "$W/tls/ca.crt" -CAkey "$W/tls/ca.key" -set_serial 0x1 -days 2 \
     -extfile "$W/tls/ext" -out "$W/tls/tls.crt" 2>> "$W/tls/err"; then
  "$D" webhook --listen 127.0.0.1:0 --tls-cert "$W/tls/tls.crt" --tls-key "$W/tls/tls.key" 2> "$W/tls/log" &
  SRV_PID=$!
  SRV_PORT=$(listening_port "$W/tls/log" port 10 "$SRV_PID")
  disown "$SRV_PID" # killed by the trap; no job notice
  trap 'kill -9 "$SRV_PID" 2> /dev/null; rm -rf "$W"' EXIT
  for _ in $(seq 1 100); do
    curl -s -o /dev/null --cacert "$W/tls/ca.crt" "https://127.0.0.1:$SRV_PORT/healthz" && { SRV_OK=1; break; }
    sleep 0.1
  done
fi
if [ $SRV_OK = 1 ]; then
  VIA=https
  for case in tests/golden/k8s/*/; do
    case=${case%/}
    [ -f "$case/expected" ] || continue
    c=$(basename "$case")
    [ -f "$W/pods/$c.list" ] || continue # section 1 said why
    while IFS=$'\t' read -r label pod ns; do
      one_pod "https/$c/$label" "$pod" "$ns"
    done < "$W/pods/$c.list"
  done
  one_pod https/namespace-enabled "$W/pods/hardened/pod1.json" payments --namespace-enabled
  VIA=cli
  n=$(grep -c '"event":"admission"' "$W/tls/log")
  WHY="the server logged $n admissions"
  check https/server-answered test "$n" -gt 20
else
  fail https/server "cannot start \`diagport webhook\`: $(oneline "$W/tls/err") $(oneline "$W/tls/log")"
fi

# --- 2. edge cases ------------------------------------------------------------------

E=$W/edge
mkdir -p "$E"
"$PY" "$H" pods tests/golden/k8s/hardened "$E" > "$E/list" 2> "$E/err" || fail edge "cannot take the pod of hardened: $(oneline "$E/err")"
P=$E/pod1.json # a Pod with annotations (team, diagport.dev/inject: "true") and volumes
"$PY" "$H" strip-inject "$P" "$E/plain.json"
"$PY" "$H" set-annotation "$P" diagport.dev/inject false "$E/false.json"

# the label diagport.dev/inject (what the label-selected overlay's objectSelector matches): enabled
# opts a pod in on /mutate as the annotation does, disabled opts it out even in an opted-in namespace,
# an opt-out wins whichever of label and annotation says it, and a label value that is neither is
# refused (admitted unchanged, with the reason); each patch is diagport inject's (one_pod checks that)
"$PY" "$H" set-label "$E/plain.json" diagport.dev/inject enabled "$E/label.json"
"$PY" "$H" set-label "$E/plain.json" diagport.dev/inject disabled "$E/label-off.json"
"$PY" "$H" set-label "$E/false.json" diagport.dev/inject enabled "$E/label-ann-false.json"
"$PY" "$H" set-label "$P" diagport.dev/inject disabled "$E/label-off-ann-true.json"
"$PY" "$H" set-label "$E/plain.json" diagport.dev/inject disable "$E/label-typo.json"
one_pod edge/label-enabled "$E/label.json" payments
expect_none edge/label-disabled-namespace-enabled "$E/label-off.json" payments --namespace-enabled
expect_none edge/label-enabled-annotation-false "$E/label-ann-false.json" payments
expect_none edge/label-disabled-annotation-true "$E/label-off-ann-true.json" payments
expect_refused edge/label-typo-refused "$E/label-typo.json" payments --namespace-enabled

expect_none edge/no-opt-in "$E/plain.json" payments
expect_none edge/opt-out "$E/false.json" payments
expect_none edge/opt-out-namespace-enabled "$E/false.json" payments --namespace-enabled
one_pod edge/namespace-enabled "$E/plain.json" payments --namespace-enabled

# a Pod with no annotations map and no volumes: both must be created first
printf '%s\n' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bare"},"spec":{"containers":[{"name":"app","image":"example.com/app:1"}]}}' > "$E/bare.json"
expect_none edge/bare-no-opt-in "$E/bare.json" default
one_pod edge/bare-namespace-enabled "$E/bare.json" default --namespace-enabled
printf '%s\n' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"bare2","labels":{"app":"x"},"annotations":{"diagport.dev/inject":"true"}},"spec":{"containers":[{"name":"app","image":"example.com/app:1","env":[{"name":"A","value":"1"}],"volumeMounts":[{"name":"cfg","mountPath":"/cfg"}]}],"volumes":[{"name":"cfg","configMap":{"name":"cfg"}}],"initContainers":[{"name":"setup","image":"busybox"}]}}' > "$E/full.json"
one_pod edge/existing-lists "$E/full.json" default
# nulls where lists go (Helm's `env:` with nothing under it), an empty
# initContainers, a second container whose DOTNET_DiagnosticPorts gets ours
# appended; and empty maps and arrays, opted in by the namespace
printf '%s\n' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"nulls","annotations":{"diagport.dev/inject":"true","we~ird/key":"x"}},"spec":{"containers":[{"name":"app","image":"x","env":null,"volumeMounts":null,"securityContext":{"capabilities":{"add":null,"drop":["ALL"]}}},{"name":"b","image":"y","env":[{"name":"DOTNET_DiagnosticPorts","value":"/x"}]}],"volumes":null,"initContainers":[]}}' > "$E/nulls.json"
one_pod edge/null-lists "$E/nulls.json" default
printf '%s\n' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"empty","annotations":{}},"spec":{"containers":[{"name":"app","image":"x","env":[]}],"volumes":[]}}' > "$E/empty.json"
one_pod edge/empty-maps-namespace-enabled "$E/empty.json" default --namespace-enabled

# already injected: inject's own output (diagport.dev/status present)
if timeout -k 5 "$STEP" "$D" inject -o json "$P" > "$E/injected.json" 2> "$E/err"; then
  expect_none edge/already-injected "$E/injected.json" payments
  expect_none edge/already-injected-namespace-enabled "$E/injected.json" payments --namespace-enabled
else
  fail edge/already-injected "inject of the hardened pod failed: $(oneline "$E/err")"
fi

# not a pod CREATE: allowed, no patch
newdir
if "$PY" "$H" review "$P" payments --operation UPDATE > "$dir/req.json" 2> "$dir/why"; then
  review "$dir/resp.json" "$dir/resp.err" "$dir/req.json"; rc=$?
  if [ $rc -ne 0 ]; then
    fail edge/update "webhook review exit $rc: $(oneline "$dir/resp.err")"
  elif got=$("$PY" "$H" response "$dir/req.json" "$dir/resp.json" "$dir/patch.json" 2> "$dir/why"); then
    case $got in none*) pass edge/update ;; *) fail edge/update "a patch ($got) on UPDATE" ;; esac
  else
    fail edge/update "$(oneline "$dir/why")"
  fi
else
  fail edge/update "cannot build the review: $(oneline "$dir/why")"
fi
newdir
"$PY" - tests/golden/k8s/deployment-basic/input.yaml "$dir/deploy.json" << 'EOF'
import json, sys, yaml
d = next(yaml.safe_load_all(open(sys.argv[1])))
d["spec"]["template"]["metadata"]["annotations"]["diagport.dev/inject"] = "true"
json.dump(d, open(sys.argv[2], "w"))
EOF
for mode in "" --namespace-enabled; do
  name=edge/deployment-kind${mode:+-namespace-enabled}
  if "$PY" "$H" review "$dir/deploy.json" shop --kind apps/v1/Deployment/deployments > "$dir/req.json" 2> "$dir/why"; then
    review "$dir/resp.json" "$dir/resp.err" $mode "$dir/req.json"; rc=$?
    if [ $rc -ne 0 ]; then
      fail "$name" "webhook review exit $rc: $(oneline "$dir/resp.err")"
    elif got=$("$PY" "$H" response "$dir/req.json" "$dir/resp.json" "$dir/patch.json" 2> "$dir/why"); then
      case $got in none*) pass "$name" ;; *) fail "$name" "a patch ($got) for a Deployment" ;; esac
    else
      fail "$name" "$(oneline "$dir/why")"
    fi
  else
    fail "$name" "cannot build the review: $(oneline "$dir/why")"
  fi
done

# refused by the rules: admitted unchanged, with a warning
printf '%s\n' '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"clash","annotations":{"diagport.dev/inject":"true"}},"spec":{"containers":[{"name":"app","image":"x"}],"volumes":[{"name":"diagport-diag","emptyDir":{}}]}}' > "$E/clash.json"
"$PY" "$H" set-annotation "$P" diagport.dev/mode sometimes "$E/badmode.json"
"$PY" "$H" set-annotation "$P" diagport.dev/mdoe suspend "$E/typo.json"
for f in clash badmode typo; do
  if timeout -k 5 "$STEP" "$D" inject -o json "$E/$f.json" > /dev/null 2> "$E/$f.err"; then
    fail "edge/refused-$f" "inject accepts this pod, the test expected a refusal"
  else
    expect_refused "edge/refused-$f" "$E/$f.json" payments
  fi
done

# stdin: `-` and no FILE give what FILE gives
newdir
"$PY" "$H" review "$P" payments > "$dir/req.json"
review "$dir/file.out" "$dir/file.err" "$dir/req.json"
timeout -k 5 "$STEP" "$D" webhook review - < "$dir/req.json" > "$dir/dash.out" 2> "$dir/dash.err"; rc1=$?
timeout -k 5 "$STEP" "$D" webhook review < "$dir/req.json" > "$dir/stdin.out" 2> "$dir/stdin.err"; rc2=$?
WHY="webhook review - exit $rc1, or output differs from FILE's: $(oneline "$dir/dash.err")"
check stdin-dash test $rc1 -eq 0 -a -s "$dir/file.out" -a "$(cmp -s "$dir/file.out" "$dir/dash.out"; echo $?)" = 0
WHY="webhook review (no FILE) exit $rc2, or output differs from FILE's: $(oneline "$dir/stdin.err")"
check stdin test $rc2 -eq 0 -a -s "$dir/file.out" -a "$(cmp -s "$dir/file.out" "$dir/stdin.out"; echo $?)" = 0

# --- 3. malformed input: exit 3, nothing on stdout, a message on stderr ----------------

M=$W/malformed
mkdir -p "$M"
"$PY" "$H" review "$E/bare.json" default > "$M/good.json"
printf 'this is not JSON\n' > "$M/not-json"
head -c 150 "$M/good.json" > "$M/truncated"
: > "$M/empty"
printf '[]\n' > "$M/array"
cp "$E/bare.json" "$M/a-pod"
printf '%s\n' '{"apiVersion":"v1","kind":"Status","status":"Success"}' > "$M/other-kind"
"$PY" - "$M" << 'EOF'
import json, sys
d = sys.argv[1]
good = json.load(open(d + "/good.json"))
def write(name, f):
    r = json.loads(json.dumps(good))
    f(r)
    json.dump(r, open(d + "/" + name, "w"))
write("missing-request", lambda r: r.pop("request"))
write("request-not-map", lambda r: r.__setitem__("request", "x"))
write("missing-uid", lambda r: r["request"].pop("uid"))
write("uid-not-string", lambda r: r["request"].__setitem__("uid", 7))
write("object-not-map", lambda r: r["request"].__setitem__("object", [r["request"]["object"]]))
write("object-string", lambda r: r["request"].__setitem__("object", "pod"))
write("missing-object", lambda r: r["request"].pop("object"))
write("wrong-apiversion", lambda r: r.__setitem__("apiVersion", "admission.k8s.io/v2"))
write("wrong-kind", lambda r: r.__setitem__("kind", "TokenReview"))
EOF
for f in not-json truncated empty array a-pod other-kind missing-request request-not-map missing-uid uid-not-string object-not-map object-string missing-object wrong-apiversion wrong-kind; do
  review "$M/$f.out" "$M/$f.err" "$M/$f"; rc=$?
  why=
  [ $rc -eq 3 ] || why="exit $rc, expected 3"
  [ -s "$M/$f.out" ] && why="${why:+$why; }printed $(wc -c < "$M/$f.out") bytes on stdout: $(oneline "$M/$f.out")"
  [ -s "$M/$f.err" ] || why="${why:+$why; }no message on stderr"
  if [ -z "$why" ]; then pass "malformed/$f"; else fail "malformed/$f" "$why"; fi
done

# over 16 MiB: a well-formed review whose pod carries a 17 MiB annotation
"$PY" - "$M/good.json" "$M/big" << 'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["request"]["object"]["metadata"]["annotations"] = {"blob": "x" * (17 << 20)}
json.dump(r, open(sys.argv[2], "w"))
EOF
review "$M/big.out" "$M/big.err" "$M/big"; rc=$?
why=
[ $rc -eq 4 ] || [ $rc -eq 3 ] || why="exit $rc, expected 4 (or 3)"
[ -s "$M/big.out" ] && why="${why:+$why; }printed $(wc -c < "$M/big.out") bytes on stdout"
if [ -z "$why" ]; then pass oversized; else fail oversized "$why"; fi
timeout -k 5 "$STEP" "$D" webhook review - < "$M/big" > "$M/big2.out" 2> "$M/big2.err"; rc=$?
why=
[ $rc -eq 4 ] || [ $rc -eq 3 ] || why="exit $rc, expected 4 (or 3)"
[ -s "$M/big2.out" ] && why="${why:+$why; }printed $(wc -c < "$M/big2.out") bytes on stdout"
if [ -z "$why" ]; then pass oversized-stdin; else fail oversized-stdin "$why"; fi

# over 100,000 JSON values (review.h REVIEW_MAX_NODES): a small body whose tree would be large is
# refused as too big (exit 4) at once, with the cap named, before anything is made of it
"$PY" - "$M/good.json" "$M/many" << 'EOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["request"]["object"].setdefault("spec", {})["many"] = [[] for _ in range(120000)]
json.dump(r, open(sys.argv[2], "w"), separators=(",", ":"))
EOF
review "$M/many.out" "$M/many.err" "$M/many"; rc=$?
why=
[ $rc -eq 4 ] || why="exit $rc, expected 4"
[ -s "$M/many.out" ] && why="${why:+$why; }printed $(wc -c < "$M/many.out") bytes on stdout"
grep -q 'more than 100000 values' "$M/many.err" || why="${why:+$why; }stderr does not name the cap: $(oneline "$M/many.err")"
if [ -z "$why" ]; then pass too-many-values; else fail too-many-values "$why"; fi

# Pod Security (--no-ptrace, the server's /no-ptrace paths): no SYS_PTRACE, and the patched pod equals
# `diagport inject --no-ptrace`; with no warning when the configuration did not ask for it (ptrace defaults to
# false), with one when it did (ptrace: true); a pod that insists on ptrace is admitted unchanged. Outside
# them the configuration's ptrace is the default: true adds SYS_PTRACE, with no label involved
PT=$W/ptrace; mkdir -p "$PT"
"$PY" - "$M/good.json" "$PT" << 'PYEOF'
import json, sys
r = json.load(open(sys.argv[1]))
r["request"]["object"].setdefault("metadata", {}).setdefault("annotations", {})["diagport.dev/inject"] = "true"
json.dump(r["request"]["object"], open(sys.argv[2] + "/pod.json", "w"))
json.dump(r, open(sys.argv[2] + "/review.json", "w"))
r["request"]["object"]["metadata"].setdefault("annotations", {})["diagport.dev/ptrace"] = "true"
json.dump(r, open(sys.argv[2] + "/insist.json", "w"))
PYEOF
printf 'ptrace: true\n' > "$PT/ptrace-on.yaml"
timeout -k 5 "$STEP" "$D" inject --no-ptrace -o json "$PT/pod.json" > "$PT/want.json" 2> "$PT/err"
timeout -k 5 "$STEP" "$D" inject --ptrace true -o json "$PT/pod.json" > "$PT/want-on.json" 2>> "$PT/err"
# ptrace_case NAME WANT WARNING(0|1) REVIEW ARGS...: the review's patched pod equals WANT, SYS_PTRACE in the
# patch as WANT has it, and the "left out" warning there or not
ptrace_case() {
	local name=$1 want=$2 warning=$3 rc
	shift 3
	timeout -k 5 "$STEP" "$D" webhook review "$@" "$PT/review.json" > "$PT/$name.json" 2>> "$PT/err"; rc=$?
	"$PY" - "$PT" "$name" "$want" "$warning" > "$PT/$name.why" 2>&1 << 'PYEOF'
import base64, json, sys, jsonpatch
d, name, want_file, warning = sys.argv[1:5]
resp = json.load(open(f"{d}/{name}.json"))["response"]
patch = json.loads(base64.b64decode(resp["patch"]))
got = jsonpatch.apply_patch(json.load(open(d + "/pod.json")), patch)
want = json.load(open(f"{d}/{want_file}"))
problems = []
if ("SYS_PTRACE" in json.dumps(patch)) != ("SYS_PTRACE" in json.dumps(want)): problems.append("SYS_PTRACE in the patch: %s" % ("SYS_PTRACE" in json.dumps(patch)))
if got != want: problems.append("patched pod differs from " + want_file)
warned = any("SYS_PTRACE left out" in w for w in resp.get("warnings", []))
if warned != (warning == "1"): problems.append("the left-out warning: %s, %s wanted" % (warned, warning == "1"))
if problems: print("; ".join(problems))
PYEOF
	WHY="exit $rc; $(oneline "$PT/$name.why") $(oneline "$PT/err")"
	check "$name" bash -c "[ $rc = 0 ] && [ ! -s '$PT/$name.why' ]"
}
ptrace_case no-ptrace-default-quiet want.json 0 --no-ptrace
ptrace_case no-ptrace-left-out want.json 1 --no-ptrace --config "$PT/ptrace-on.yaml"
ptrace_case ptrace-default-off want.json 0
ptrace_case ptrace-config-on want-on.json 0 --config "$PT/ptrace-on.yaml"
timeout -k 5 "$STEP" "$D" webhook review --no-ptrace "$PT/insist.json" > "$PT/insist.out" 2>/dev/null; rc=$?
WHY="exit $rc: $(oneline "$PT/insist.out")"
check no-ptrace-insisting-pod-admitted-unchanged bash -c "[ $rc = 0 ] && jq -e '.response.allowed == true and (.response | has(\"patch\") | not) and (.response.warnings | map(test(\"SYS_PTRACE\")) | any)' '$PT/insist.out' > /dev/null"
# a hostNetwork pod is injected with a warning in the response (kubectl prints it to the user)
"$PY" - "$PT" << 'PYEOF'
import json, sys
d = sys.argv[1]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "hn", "namespace": "default",
       "annotations": {"diagport.dev/inject": "true"}},
       "spec": {"hostNetwork": True, "containers": [{"name": "app", "image": "app:1"}]}}
json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": "hn-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "resource": {"group": "", "version": "v1", "resource": "pods"},
                       "namespace": "default", "operation": "CREATE", "object": pod}}, open(d + "/hn.json", "w"))
PYEOF
timeout -k 5 "$STEP" "$D" webhook review "$PT/hn.json" > "$PT/hn.out" 2>/dev/null; rc=$?
WHY="exit $rc: $(oneline "$PT/hn.out")"
check hostnetwork-warning bash -c "[ $rc = 0 ] && jq -e '.response.allowed == true and (.response | has(\"patch\")) and (.response.warnings | map(test(\"hostNetwork is true\")) | any)' '$PT/hn.out' > /dev/null"
# perf (diagport.dev/perf): the patch shares the pod's process namespace and gives the agent PERFMON, as
# inject does (golden k8s/perf-* go through section 1), and the response carries inject's two warnings:
# Pod Security refuses PERFMON, kernel frames need perf_event_paranoid <= 1. In a namespace that enforces
# baseline or restricted (--no-ptrace), a pod asking for perf is admitted unchanged, with the reason and
# without the warnings about an injection that was not made
"$PY" - "$PT" << 'PYEOF'
import json, sys
d = sys.argv[1]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "pf", "namespace": "default",
       "annotations": {"diagport.dev/inject": "true", "diagport.dev/perf": "true"}},
       "spec": {"containers": [{"name": "app", "image": "app:1"}]}}
json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": "pf-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "resource": {"group": "", "version": "v1", "resource": "pods"},
                       "namespace": "default", "operation": "CREATE", "object": pod}}, open(d + "/pf.json", "w"))
PYEOF
timeout -k 5 "$STEP" "$D" webhook review "$PT/pf.json" > "$PT/pf.out" 2>/dev/null; rc=$?
WHY="exit $rc: $(oneline "$PT/pf.out")"
check perf-patch-and-warnings bash -c "[ $rc = 0 ] && jq -e '.response.allowed == true and
  (.response.patch | @base64d | fromjson | map(select(.path == \"/spec/shareProcessNamespace\" and .value == true)) | length == 1) and
  (.response.patch | @base64d | test(\"PERFMON\")) and
  (.response.warnings | map(test(\"Pod Security baseline and restricted refuse\")) | any) and
  (.response.warnings | map(test(\"kernel.perf_event_paranoid at 1 or less\")) | any)' '$PT/pf.out' > /dev/null"
timeout -k 5 "$STEP" "$D" webhook review --no-ptrace "$PT/pf.json" > "$PT/pf-pss.out" 2>/dev/null; rc=$?
WHY="exit $rc: $(oneline "$PT/pf-pss.out")"
check no-ptrace-perf-pod-admitted-unchanged bash -c "[ $rc = 0 ] && jq -e '.response.allowed == true and
  (.response | has(\"patch\") | not) and (.response.warnings | map(test(\"asks for perf .*PERFMON\")) | any) and
  (.response.warnings | map(test(\"perf_event_paranoid\")) | any | not)' '$PT/pf-pss.out' > /dev/null"
# a name as long as the API server lets through (it validates names after mutating admission): a 1 MiB
# metadata.name on 64 containers once took a review to 72 MB, past the webhook's 64 MiB limit, as each
# container's location string repeated it; names in messages are cut at 253 bytes
"$PY" - "$PT" << 'PYEOF'
import json, sys
d = sys.argv[1]
pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "n" * (1 << 20), "namespace": "default",
       "annotations": {"diagport.dev/inject": "true"}},
       "spec": {"containers": [{"name": "c%d" % i, "image": "app:1"} for i in range(64)]}}
json.dump({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
           "request": {"uid": "ln-1", "kind": {"group": "", "version": "v1", "kind": "Pod"},
                       "resource": {"group": "", "version": "v1", "resource": "pods"},
                       "namespace": "default", "operation": "CREATE", "object": pod}}, open(d + "/ln.json", "w"))
PYEOF
timeout -k 5 "$STEP" /usr/bin/time -f %M -o "$PT/ln.rss" "$D" webhook review "$PT/ln.json" > "$PT/ln.out" 2>/dev/null; rc=$?
WHY="exit $rc, peak RSS $(cat "$PT/ln.rss" 2>/dev/null) KiB (want under 16 MiB): $(oneline "$PT/ln.out")"
check long-name-bounded-memory bash -c "[ $rc = 0 ] && [ \$(tail -1 '$PT/ln.rss') -lt 16384 ] && jq -e '.response.allowed == true and (.response | has(\"patch\"))' '$PT/ln.out' > /dev/null"
exit 0
