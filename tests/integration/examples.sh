#!/usr/bin/env bash
# examples.sh - the files under examples/, which the README and `make demo`
# hand a new user, do what the README says with them, one kind each:
#   <kind>/inject      `diagport inject -f FILE` (the kind detected, no flags) exits 0;
#   <kind>/validate    the kind's own judge accepts the output (kubernetes-models,
#                      the AWS CLI's request model, the CDK's CfnInclude,
#                      docker-compose and podman-compose), as the golden cases do;
#   <kind>/idempotent  injecting the output again gives it back;
#   <kind>/uninject    uninject of the output is uninject of FILE (the data back;
#                      ECS describe output as the register input inject made of it);
# and mode-warning: `inject --mode suspend` on the Kubernetes example, whose
# pod template says diagport.dev/mode: nosuspend, says on stderr which won.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
V=$PWD/tests/validate
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T_NAME=examples
. tests/lib.sh

one() { # KIND FILE VALIDATOR...
	local kind=$1 file=$2 rc
	shift 2
	"$D" inject -f "$file" > "$W/$kind.out" 2> "$W/$kind.err"; rc=$?
	if [ $rc -ne 0 ]; then
		fail "$kind/inject" "exit $rc" "$W/$kind.err"
		for c in validate idempotent uninject; do fail "$kind/$c" "nothing injected to check"; done
		return
	fi
	pass "$kind/inject"
	if timeout 120 "$@" "$W/$kind.out" > "$W/$kind.val" 2>&1; then
		pass "$kind/validate"
	else
		fail "$kind/validate" "'$*' rejected the output" "$W/$kind.val"
	fi
	"$D" inject -f "$W/$kind.out" > "$W/$kind.again" 2> /dev/null
	WHY="injecting the output again changed it"; check "$kind/idempotent" cmp -s "$W/$kind.again" "$W/$kind.out"
	"$D" uninject -f "$W/$kind.out" > "$W/$kind.back" 2> "$W/$kind.uerr"
	"$D" uninject -f "$file" > "$W/$kind.orig" 2>> "$W/$kind.uerr"
	WHY="$(head -c 300 "$W/$kind.uerr") uninject of the output differs from uninject of $file"
	check "$kind/uninject" cmp -s "$W/$kind.back" "$W/$kind.orig"
}

one k8s examples/k8s/deployment.yaml node "$V/k8s-validate.mjs"
one ecs examples/ecs/taskdef.json "$V/ecs-validate.sh"
one cfn examples/cfn/template.yaml node "$V/cfn-load.mjs"
one compose examples/compose/compose.yaml "$V/compose-validate.sh" examples/compose/compose.yaml

# what tripped a new user: the flag lost to the example's own annotation, silently
"$D" inject --mode suspend -f examples/k8s/deployment.yaml > "$W/m.out" 2> "$W/m.err"; rc=$?
WHY="exit $rc; stderr: $(head -c 400 "$W/m.err")"
check mode-warning bash -c "[ $rc = 0 ] && grep -qF 'diagport: warning: examples/k8s/deployment.yaml:19:28: Deployment shop/orders: annotation diagport.dev/mode=nosuspend wins over --mode suspend' '$W/m.err'"
# and the annotation did win: the app's port is nosuspend
WHY="DOTNET_DiagnosticPorts: $(grep -A1 'DOTNET_DiagnosticPorts' "$W/m.out" | tr '\n' ' ')"
check mode-annotation-kept grep -q 'value: /diag/port,nosuspend,connect' "$W/m.out"
exit 0
