#!/usr/bin/env bash
# pipeline.sh - diagport between two real kubectl commands, as people use it:
#   kubectl create ... --dry-run=client -o yaml | diagport inject - | kubectl ...
# kubectl runs offline here (no cluster), so the consuming side is
# `kubectl patch --local` (decodes every object) and `kubectl kustomize`.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export KUBECONFIG=/dev/null
T_NAME=pipeline
. tests/lib.sh # every script runs from the repository root

for kind in deployment cronjob job; do
  case $kind in
    deployment) gen=(create deployment web --image=mcr.microsoft.com/dotnet/samples:aspnetapp) ;;
    cronjob) gen=(create cronjob nightly --image=example.com/report:1 --schedule='0 3 * * *') ;;
    job) gen=(create job once --image=example.com/once:1) ;;
  esac
  if ! kubectl "${gen[@]}" --dry-run=client -o yaml > "$W/$kind.yaml" 2> "$W/err"; then
    fail "$kind" "kubectl could not generate the object: $(head -c 200 "$W/err")"; continue
  fi
  if ! kubectl "${gen[@]}" --dry-run=client -o yaml | "$D" inject - > "$W/$kind.inj.yaml" 2> "$W/err"; then
    fail "$kind/inject" "$(cat "$W/err")"; continue
  fi
  pass "$kind/inject"
  # kubectl itself must read what we wrote, and see the agent and the env
  if kubectl patch --local -f "$W/$kind.inj.yaml" -p '{}' --type merge -o json > "$W/$kind.json" 2> "$W/err"; then
    pass "$kind/kubectl-reads-output"
  else
    fail "$kind/kubectl-reads-output" "$(head -c 300 "$W/err")"; continue
  fi
  spec='.spec.template.spec'
  [ $kind = cronjob ] && spec='.spec.jobTemplate.spec.template.spec'
  got=$(jq -r "$spec | [.initContainers[0].name, .initContainers[0].restartPolicy, (.containers[0].env[] | select(.name==\"DOTNET_DiagnosticPorts\") | .value), (.containers[0].securityContext.capabilities.add[0]), (.volumes | map(.name) | join(\",\"))] | join(\" \")" "$W/$kind.json")
  want="diagport-agent Always /diag/port,nosuspend,connect  diagport-diag,diagport-dumps"
  if [ "$got" = "$want" ]; then pass "$kind/fields"; else fail "$kind/fields" "got '$got', want '$want'"; fi
  # and back: uninject gives what kubectl generated, as diagport renders it
  "$D" uninject - < "$W/$kind.inj.yaml" > "$W/back.yaml"
  "$D" uninject - < "$W/$kind.yaml" > "$W/orig.yaml"
  if cmp -s "$W/back.yaml" "$W/orig.yaml"; then pass "$kind/uninject"; else fail "$kind/uninject" "$(diff "$W/orig.yaml" "$W/back.yaml" | head -5)"; fi
done

# kustomize accepts a directory of injected output
mkdir -p "$W/kz"
cp "$W/deployment.inj.yaml" "$W/kz/web.yaml"
printf 'resources:\n- web.yaml\nnamePrefix: prod-\n' > "$W/kz/kustomization.yaml"
if kubectl kustomize "$W/kz" > "$W/kz.out" 2> "$W/err" && grep -q 'name: prod-web' "$W/kz.out" && grep -q 'name: diagport-agent' "$W/kz.out"; then
  pass kustomize
else
  fail kustomize "$(head -c 300 "$W/err")"
fi

# JSON all the way: kubectl -o json | diagport inject - | kubectl
kubectl create deployment js --image=x --dry-run=client -o json | "$D" inject - > "$W/js.json"
if jq -e '.spec.template.spec.initContainers[0].name == "diagport-agent"' "$W/js.json" > /dev/null &&
   kubectl patch --local -f "$W/js.json" -p '{}' --type merge -o name > /dev/null 2>&1; then
  pass json-pipeline
else
  fail json-pipeline "JSON output not read back"
fi
exit 0
