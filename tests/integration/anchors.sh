#!/usr/bin/env bash
# anchors.sh - YAML anchors, aliases and merge keys through `diagport inject
# k8s` and `uninject`, judged by other readers: PyYAML (yaml.safe_load, YAML
# 1.1 with merge keys) says the data is what it should be, kubectl reads the
# output, and the text keeps the same `&name` / `*name` as the input.
#   - every alias inject leaves alone, or changes as it changes its anchor,
#     comes back as an alias; uninject of that gives the input's text back;
#   - a copy inject changes differently from its anchor (one Deployment's
#     annotations, which get its own status) is written in full: the data
#     stays exact, and after uninject the data is the input's again.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
PY=/usr/bin/python3
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
export KUBECONFIG=/dev/null
T_NAME=anchors
. tests/lib.sh # every script runs from the repository root

IN=tests/golden/k8s/anchors/input.yaml # every alias there still fits after inject

# same_data A B: the two YAML (or JSON) files hold the same documents, as PyYAML reads them
same_data() {
	"$PY" -c 'import sys, yaml
a, b = (list(yaml.safe_load_all(open(f))) for f in sys.argv[1:3])
sys.exit(0 if a == b else 1)' "$1" "$2"
}
# as_yaml11 JSON: JSON has no merge keys (-o json writes "<<" as a key): apply them as YAML 1.1 would
as_yaml11() {
	"$PY" -c 'import sys, json
def merged(v):
	if isinstance(v, list):
		return [merged(x) for x in v]
	if not isinstance(v, dict):
		return v
	own = {k: merged(x) for k, x in v.items() if k != "<<"}
	m = v.get("<<", [])
	for src in ([m] if isinstance(m, dict) else m)[::-1]:
		own = {**merged(src), **own}
	return own
json.dump(merged(json.load(open(sys.argv[1]))), sys.stdout)' "$1"
}
# marks FILE: the anchors and aliases written in FILE, in order, one a line
marks() { grep -oE '(^|[ :[,-])[&*][A-Za-z0-9_-]+' "$1" | grep -oE '[&*][A-Za-z0-9_-]+'; }

"$D" inject k8s -f "$IN" > "$W/inj.yaml" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 300 "$W/err")"; check inject test $rc = 0
"$D" inject k8s -o json -f "$IN" > "$W/raw.json" && as_yaml11 "$W/raw.json" > "$W/inj.json"
WHY="the YAML with aliases does not read as inject -o json's data"; check inject-data-exact same_data "$W/inj.yaml" "$W/inj.json"
WHY="$(diff <(marks "$IN") <(marks "$W/inj.yaml") | head -5)"
check inject-keeps-marks diff <(marks "$IN") <(marks "$W/inj.yaml")
WHY="&/* seen: $(marks "$IN" | wc -l)"; check input-has-marks test "$(marks "$IN" | wc -l)" -ge 8
"$D" uninject k8s -f "$W/inj.yaml" > "$W/back.yaml"
WHY="$(diff <(marks "$IN") <(marks "$W/back.yaml") | head -5)"
check uninject-keeps-marks diff <(marks "$IN") <(marks "$W/back.yaml")
WHY="PyYAML reads other data"; check uninject-data-equal same_data "$IN" "$W/back.yaml"
"$D" uninject k8s -f "$IN" > "$W/plain.yaml"
WHY="$(diff "$W/plain.yaml" "$W/back.yaml" | head -5)"; check uninject-text-equal cmp -s "$W/plain.yaml" "$W/back.yaml"
# kubectl (go-yaml: aliases and merge keys) reads the injected list and sees the agent in both
if kubectl patch --local -f "$W/inj.yaml" -p '{}' --type merge -o json > "$W/kubectl.json" 2> "$W/err"; then
	got=$(jq -rs '[.[] | .spec.template.spec.initContainers[0].name, (.spec.template.spec.containers[0].env | map(.name) | join(",")), (.metadata.labels | keys_unsorted | join(","))] | join(" ")' "$W/kubectl.json")
	crash=COMPlus_DbgEnableMiniDump,COMPlus_DbgMiniDumpType,COMPlus_DbgMiniDumpName,COMPlus_EnableCrashReport
	want="diagport-agent ASPNETCORE_URLS,LOG_LEVEL,DOTNET_DiagnosticPorts,$crash app,tier diagport-agent ASPNETCORE_URLS,LOG_LEVEL,DOTNET_DiagnosticPorts,$crash app,role,tier"
	WHY="got '$got'"; check kubectl-reads-output test "$got" = "$want"
else
	fail kubectl-reads-output "$(head -c 300 "$W/err")"
fi

# a shared annotations map: inject writes a different status into each Deployment's copy (their
# containers have other names)
"$PY" -c 'import sys; t = open(sys.argv[1]).read()
ann = "annotations:\n          diagport.dev/inject: \"true\"\n"
i = t.index(ann); j = t.index(ann, i + 1)
t = t[:i] + ann.replace(":", ": &ann", 1) + t[i + len(ann):j] + "annotations: *ann\n" + t[j + len(ann):]
k = t.rindex("- name: app")
sys.stdout.write(t[:k] + "- name: api" + t[k + len("- name: app"):])' "$IN" > "$W/ann.yaml"
WHY="the test input did not get its alias"; check diverging-input grep -q 'annotations: \*ann' "$W/ann.yaml"
"$D" inject k8s -f "$W/ann.yaml" > "$W/ann.inj.yaml" && "$D" inject k8s -o json -f "$W/ann.yaml" > "$W/raw.json" &&
	as_yaml11 "$W/raw.json" > "$W/ann.inj.json"
WHY="the expanded copy does not hold inject's data"; check diverging-data-exact same_data "$W/ann.inj.yaml" "$W/ann.inj.json"
WHY="$(grep -c 'annotations: \*ann' "$W/ann.inj.yaml") aliases of &ann left"
check diverging-copy-in-full test "$(grep -c 'annotations: \*ann' "$W/ann.inj.yaml")" = 0
WHY="the other aliases changed: $(diff <(marks "$W/ann.yaml" | grep -v ann) <(marks "$W/ann.inj.yaml" | grep -v ann) | head -3)"
check diverging-others-kept diff <(marks "$W/ann.yaml" | grep -v ann) <(marks "$W/ann.inj.yaml" | grep -v ann)
"$D" uninject k8s -f "$W/ann.inj.yaml" > "$W/ann.back.yaml"
WHY="PyYAML reads other data"; check diverging-uninject-data-equal same_data "$W/ann.yaml" "$W/ann.back.yaml"
exit 0
