#!/usr/bin/env bash
# webhook_policy.sh - the platform's policy wins (issue 33): the webhook's --config with an enforce: map,
# as a real HTTPS server (port 0, read from its listening line) and `diagport webhook review`:
#   policy/admitted        a pod annotated diagport.dev/auth: none and diagport.dev/ptrace: "true" under
#                          enforce: {auth: required, ptrace: false, captures: ...} is admitted (allowed, a patch)
#   policy/enforced-*      the patched pod (python3-jsonpatch) has the enforced values: the agent on loopback
#                          without --no-auth, no SYS_PTRACE on the app, --captures the pod's list cut to the
#                          platform's
#   policy/warning-*       the response's warnings name each setting and both values
#   policy/same-as-inject  the patched pod is `diagport inject --policy CONFIG -o json` of the pod, whose
#                          stderr holds the same warnings (GitOps and the webhook agree)
#   policy/same-as-review  `diagport webhook review --config CONFIG` gives the server's answer, byte for byte
#   policy/pre-injected-enforced  a pod injected beforehand without the policy is injected again under it; so is
#                          one without the opt-in annotation, and one that opts out loses the agent it carries
#   policy/reloaded        the enforce: map removed from the file: the next pod's own auth: none is honoured
#   policy/bad-value       an enforce: value that is not an option's value stops the webhook at start
#                          (exit 1), naming FILE:LINE:COL and the option as an annotation's would be
set -u
cd "$(dirname "$0")/../.." || exit 1
D=$PWD/diagport
PY=/usr/bin/python3
OSSL=/usr/bin/openssl
H=$PWD/tests/integration/webhook_review.py
W=$(mktemp -d "${TMPDIR:-/tmp}/dp-webhook-policy.XXXXXX")
PIDS=()
cleanup() {
  local p
  for p in "${PIDS[@]}"; do { kill -9 "$p" && wait "$p"; } 2> /dev/null; done
  rm -rf "$W"
}
trap cleanup EXIT
T_NAME=webhook-policy
. tests/lib.sh

if [ ! -x "$D" ]; then
  make > "$W/make.log" 2>&1 || { fail build "make failed: $(tail -c 300 "$W/make.log" | tr '\n' ' ')"; exit 0; }
fi
for tool in "$OSSL" curl "$PY"; do
  command -v "$tool" > /dev/null || { fail prerequisites "$tool is not installed"; exit 0; }
done
# json FILE EXPR: a Python expression over the JSON in FILE (as j), printed
json() { "$PY" -c 'import json,sys; j=json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2" 2> /dev/null; }

if ! "$OSSL" req -x509 -newkey ec -pkeyopt ec_paramgen_curve:P-256 -nodes -keyout "$W/tls.key" -out "$W/tls.crt" \
  -days 2 -subj /CN=localhost -addext subjectAltName=IP:127.0.0.1 2> "$W/openssl.err"; then
  fail certificates "openssl could not make a key pair: $(head -c 300 "$W/openssl.err")"
  exit 0
fi
CURL=(curl -sS --max-time 30 --cacert "$W/tls.crt")

cat > "$W/config.yaml" << 'YAML'
mode: nosuspend
excludedNamespaces: [kube-system]
enforce:
  auth: required
  ptrace: false
  captures: "stacks,metrics,cpuprofile"
YAML
cat > "$W/pod.json" << 'JSON'
{"apiVersion": "v1", "kind": "Pod",
 "metadata": {"name": "orders-7d9c", "namespace": "shop",
              "annotations": {"diagport.dev/inject": "true", "diagport.dev/auth": "none",
                              "diagport.dev/ptrace": "true", "diagport.dev/captures": "dump,stacks"}},
 "spec": {"containers": [{"name": "orders", "image": "mcr.microsoft.com/dotnet/samples:aspnetapp",
                          "securityContext": {"runAsUser": 1000}}]}}
JSON

"$D" webhook --listen 127.0.0.1:0 --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" --config "$W/config.yaml" \
  --no-review-cache 2> "$W/log" &
SPID=$!
PIDS+=("$SPID")
if ! SPORT=$(listening_port "$W/log" port 10 "$SPID"); then
  fail policy/start "no listening line: $(head -c 300 "$W/log")"
  exit 0
fi
U=https://127.0.0.1:$SPORT
if ! eventually 10 "${CURL[@]}" -o /dev/null "$U/healthz"; then
  fail policy/start "the webhook did not answer /healthz: $(head -c 300 "$W/log")"
  exit 0
fi

"$PY" "$H" review "$W/pod.json" shop > "$W/req.json"
"${CURL[@]}" -H 'Content-Type: application/json' --data-binary @"$W/req.json" "$U/mutate" > "$W/resp.json"
WHY="no patch in the answer: $(head -c 400 "$W/resp.json")"
check policy/admitted "$PY" "$H" response "$W/req.json" "$W/resp.json" "$W/patch.json"
check policy/allowed test "$(json "$W/resp.json" "j['response']['allowed']")" = True
"$PY" "$H" apply "$W/pod.json" "$W/patch.json" "$W/patched.json" 2> "$W/apply.err"
WHY="applying the patch: $(cat "$W/apply.err")"
check policy/patch-applies test -s "$W/patched.json"

agent="[c for c in j['spec'].get('initContainers', []) if c['name'] == 'diagport-agent'][0]"
args=$(json "$W/patched.json" "' '.join($agent['args'])")
WHY="agent args: $args"
check policy/enforced-auth-loopback grep -q -- '--urls http://127.0.0.1:52323' <<< "$args"
WHY="agent args: $args"
check policy/enforced-auth-no-no-auth test -n "$args" -a "${args/--no-auth/}" = "$args"
WHY="agent args: $args"
check policy/enforced-captures-intersected grep -q -- '--captures stacks$' <<< "$args"
caps=$(json "$W/patched.json" "j['spec']['containers'][0].get('securityContext', {}).get('capabilities', {})")
WHY="app capabilities: $caps"
check policy/enforced-ptrace-off test "${caps/SYS_PTRACE/}" = "$caps"

warnings=$(json "$W/resp.json" "'\n'.join(j['response'].get('warnings', []))")
WHY="warnings: $warnings"
check policy/warning-auth grep -q "policy enforces auth=required, the workload asked for auth=none" <<< "$warnings"
WHY="warnings: $warnings"
check policy/warning-ptrace grep -q "policy enforces ptrace=false, the workload asked for ptrace=true" <<< "$warnings"
WHY="warnings: $warnings"
check policy/warning-captures grep -q "policy allows captures=cpuprofile,metrics,stacks, the workload asked for captures=dump,stacks" <<< "$warnings"

"$D" inject --policy "$W/config.yaml" -o json -f "$W/pod.json" > "$W/inject.json" 2> "$W/inject.err"
WHY="the patched pod is not inject --policy's output ($(head -c 300 "$W/inject.err"))"
check policy/same-as-inject "$PY" "$H" equal "$W/inject.json" "$W/patched.json"
WHY="inject --policy's stderr: $(head -c 600 "$W/inject.err")"
check policy/same-warnings-from-inject grep -q "policy enforces auth=required, the workload asked for auth=none" "$W/inject.err"

"$D" webhook review --config "$W/config.yaml" "$W/req.json" > "$W/offline.json" 2> "$W/offline.err"
WHY="webhook review's answer differs: $(head -c 300 "$W/offline.err")"
check policy/same-as-review cmp -s <(tr -d '\n' < "$W/offline.json") <(tr -d '\n' < "$W/resp.json")

# a pod injected beforehand without the policy (diagport inject, no --policy: auth none, SYS_PTRACE) and sent as
# it is: injected again under the policy, not skipped as already injected
"$D" inject -o json -f "$W/pod.json" > "$W/pre.json" 2> /dev/null
"$PY" "$H" review "$W/pre.json" shop > "$W/pre-req.json"
"$D" webhook review --config "$W/config.yaml" "$W/pre-req.json" > "$W/pre-resp.json" 2> "$W/pre.err"
"$PY" "$H" response "$W/pre-req.json" "$W/pre-resp.json" "$W/pre-patch.json" > /dev/null 2>&1
"$PY" "$H" apply "$W/pre.json" "$W/pre-patch.json" "$W/pre-patched.json" 2> /dev/null
WHY="$(head -c 600 "$W/pre-resp.json"); the pre-injected pod patched: $(head -c 300 "$W/pre-patched.json")"
check policy/pre-injected-enforced bash -c "grep -q 'policy enforces auth=required' '$W/pre-resp.json' &&
  ! grep -q -- '--no-auth' '$W/pre-patched.json' && ! grep -q SYS_PTRACE '$W/pre-patched.json' &&
  grep -q -- 'http://127.0.0.1:52323' '$W/pre-patched.json'"

# the same pre-injected pod that does not opt in (the annotation gone: a look-alike made by hand, or injected
# offline) is injected again under the policy too; one that opts out loses the agent it carries, as
# `inject --policy` takes it out
"$PY" - "$W/pre.json" "$W/pre-noopt.json" "$W/pre-optout.json" << 'EOF2'
import json, sys
p = json.load(open(sys.argv[1]))
a = p["metadata"]["annotations"]
a.pop("diagport.dev/inject", None)
json.dump(p, open(sys.argv[2], "w"))
a["diagport.dev/inject"] = "false"
json.dump(p, open(sys.argv[3], "w"))
EOF2
for v in noopt optout; do
  "$PY" "$H" review "$W/pre-$v.json" shop > "$W/pre-$v-req.json"
  "$D" webhook review --config "$W/config.yaml" "$W/pre-$v-req.json" > "$W/pre-$v-resp.json" 2> "$W/pre-$v.err"
  "$PY" "$H" response "$W/pre-$v-req.json" "$W/pre-$v-resp.json" "$W/pre-$v-patch.json" > /dev/null 2>&1
  "$PY" "$H" apply "$W/pre-$v.json" "$W/pre-$v-patch.json" "$W/pre-$v-patched.json" 2> /dev/null
done
WHY="$(head -c 600 "$W/pre-noopt-resp.json"); patched: $(head -c 300 "$W/pre-noopt-patched.json")"
check policy/pre-injected-not-opted-in-enforced bash -c "! grep -q -- '--no-auth' '$W/pre-noopt-patched.json' &&
  grep -q -- 'http://127.0.0.1:52323' '$W/pre-noopt-patched.json' && grep -q diagport-agent '$W/pre-noopt-patched.json'"
"$D" inject --policy "$W/config.yaml" -o json -f "$W/pre-optout.json" > "$W/optout-inject.json" 2> /dev/null
WHY="$(head -c 600 "$W/pre-optout-resp.json"); patched: $(head -c 300 "$W/pre-optout-patched.json")"
check policy/pre-injected-opted-out-stripped bash -c "! grep -q diagport-agent '$W/pre-optout-patched.json' &&
  ! grep -q 'diagport.dev/status' '$W/pre-optout-patched.json' &&
  '$PY' '$H' equal '$W/optout-inject.json' '$W/pre-optout-patched.json'"

# one that cannot be injected again (a bad annotation beside its record) is admitted as it came: never blocked, and
# the warning says it carries an agent the policy was not applied to, not that it has no diagnostics
"$PY" - "$W/pre.json" "$W/pre-bad.json" << 'EOF2'
import json, sys
p = json.load(open(sys.argv[1]))
p["metadata"]["annotations"]["diagport.dev/ptrace"] = "maybe"
json.dump(p, open(sys.argv[2], "w"))
EOF2
"$PY" "$H" review "$W/pre-bad.json" shop > "$W/pre-bad-req.json"
"$D" webhook review --config "$W/config.yaml" "$W/pre-bad-req.json" > "$W/pre-bad-resp.json" 2> /dev/null
WHY="$(head -c 600 "$W/pre-bad-resp.json")"
check policy/pre-injected-unusable-said bash -c "grep -q '\"allowed\":true' '$W/pre-bad-resp.json' &&
  grep -q 'admitted as it came, with the diagnostics agent it carries, which the platform' '$W/pre-bad-resp.json'"

# reload: without enforce:, the pod's own auth: none is the documented precedence again
sed -i '/^enforce:/,$d' "$W/config.yaml"
touch -d '+2 seconds' "$W/config.yaml"
if ! wait_for "$W/log" '"event":"config-reloaded"' 10; then
  fail policy/reloaded "no config-reloaded line: $(tail -c 300 "$W/log")"
else
  "$PY" "$H" review "$W/pod.json" shop > "$W/req2.json"
  "${CURL[@]}" -H 'Content-Type: application/json' --data-binary @"$W/req2.json" "$U/mutate" > "$W/resp2.json"
  "$PY" "$H" response "$W/req2.json" "$W/resp2.json" "$W/patch2.json" > /dev/null 2>&1
  "$PY" "$H" apply "$W/pod.json" "$W/patch2.json" "$W/patched2.json" 2> /dev/null
  args2=$(json "$W/patched2.json" "' '.join($agent['args'])")
  WHY="agent args after reload: $args2"
  check policy/reloaded grep -q -- '--no-auth' <<< "$args2"
fi

# a bad enforce: value stops the webhook at start, with where and the annotation's own message
printf 'mode: nosuspend\nenforce:\n  auth: maybe\n' > "$W/bad.yaml"
timeout 10 "$D" webhook --listen 127.0.0.1:0 --tls-cert "$W/tls.crt" --tls-key "$W/tls.key" --config "$W/bad.yaml" \
  2> "$W/bad.log"
rc=$?
WHY="exit $rc: $(head -c 400 "$W/bad.log")"
check policy/bad-value-exit test "$rc" = 1
WHY="log: $(head -c 400 "$W/bad.log")"
check policy/bad-value-says-where grep -q "bad.yaml:3:9: option auth: 'maybe' is not required or none" "$W/bad.log"
