#!/usr/bin/env bash
# compose.sh - inject/uninject compose beyond the golden cases: detection
# without the kind word, --in-place both ways and untouched on refusal,
# warnings (env_file, an agent on loopback only, extends), uninject of a file never
# injected, a status record that no longer matches, the meaning of merge keys
# after inject (PyYAML resolving them), and the caps' exit codes.
set -u
cd "$(dirname "$0")/../.."
D=$PWD/diagport
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
T_NAME=compose
. tests/lib.sh # every script runs from the repository root

G=tests/golden/compose
PY=/usr/bin/python3
same_data() { "$PY" -c 'import sys, yaml; a, b = (yaml.safe_load(open(f)) for f in sys.argv[1:3]); sys.exit(a != b)' "$1" "$2"; }

# detection: a top-level services map and nothing of the other kinds
"$D" inject -f "$G/env-map/input.yaml" > "$W/det" 2>/dev/null
check detected cmp -s "$W/det" "$G/env-map/expected"
printf 'apiVersion: v1\nkind: ConfigMap\nservices: {a: {image: x}}\n' > "$W/k8s.yaml"
"$D" inject -f "$W/k8s.yaml" > "$W/k8s.out" 2>/dev/null
check k8s-with-services-is-k8s cmp -s "$W/k8s.out" "$W/k8s.yaml"

# --in-place, then uninject --in-place: the input's data again
cp "$G/anchors/input.yaml" "$W/c.yaml"
"$D" inject compose -i --ptrace true -f "$W/c.yaml" 2>/dev/null  # as the golden case's args
check in-place-inject cmp -s "$W/c.yaml" "$G/anchors/expected"
"$D" uninject compose -i -f "$W/c.yaml"
WHY="$(head -c 300 "$W/c.yaml")"; check in-place-uninject-data same_data "$W/c.yaml" "$G/anchors/input.yaml"

# a refusal with -i: exit 1, file untouched, nothing on stdout, file:line in the message
for e in err-agent-label err-interpolated err-mount-collision; do
	cp "$G/$e/input.yaml" "$W/e.yaml"
	"$D" inject compose -i -f "$W/e.yaml" > "$W/out" 2> "$W/err"; rc=$?
	WHY="exit $rc: $(head -c 200 "$W/err")"
	check "$e-in-place-exit-1" test "$rc" = 1
	check "$e-in-place-untouched" cmp -s "$W/e.yaml" "$G/$e/input.yaml"
	check "$e-in-place-no-stdout" test ! -s "$W/out"
	check "$e-names-line" grep -q "e.yaml:[0-9]*:[0-9]*: " "$W/err"
done

# merge keys mean the same after inject: api gets the merged variables plus ours, x-common is not edited
"$D" inject compose -f "$G/anchors/input.yaml" > "$W/a.yaml" 2>/dev/null
"$PY" - "$G/anchors/input.yaml" "$W/a.yaml" > "$W/py" 2>&1 <<'PY'
import sys, yaml
inp, out = (yaml.safe_load(open(f)) for f in sys.argv[1:3])
api, worker = out["services"]["api"], out["services"]["worker"]
assert out["x-common"] == inp["x-common"], "x-common changed"
crash = {"COMPlus_DbgEnableMiniDump": "1", "COMPlus_DbgMiniDumpType": "1",
         "COMPlus_DbgMiniDumpName": "/dumps/crash-%p-%t-%e.dmp", "COMPlus_EnableCrashReport": "1"}
assert api["environment"] == dict(inp["x-common"]["environment"], DOTNET_DiagnosticPorts="/diag/port,nosuspend,connect",
                                  **crash), api["environment"]
assert api["depends_on"] == ["db", "diagport-agent"], api["depends_on"]
assert api["cap_add"] == ["NET_BIND_SERVICE"], api["cap_add"]  # ptrace is off by default
assert api["labels"]["com.example.team"] == "orders", api["labels"]
assert worker["volumes"] == ["data:/var/lib/app", "diagport-diag:/diag", "diagport-dumps:/dumps"], worker["volumes"]
assert worker["environment"]["ROLE"] == "worker" and worker["environment"]["ASPNETCORE_URLS"] == "http://+:8080"
assert "DOTNET_DiagnosticPorts" not in out["services"]["db"].get("environment", {})
PY
WHY="$(head -c 300 "$W/py")"; check merge-keys-meaning test -s "$W/a.yaml" -a ! -s "$W/py"
# a variable that environment's own merge key gives is appended to, not replaced
printf 'x-env: &env\n  DOTNET_DiagnosticPorts: /tmp/p.sock\nservices:\n  a:\n    image: x\n    environment:\n      <<: *env\n' > "$W/m.yaml"
"$D" inject compose -f "$W/m.yaml" > "$W/m.out" 2>/dev/null
"$PY" -c 'import sys, yaml; e = yaml.safe_load(open(sys.argv[1]))["services"]["a"]["environment"]; sys.exit(e["DOTNET_DiagnosticPorts"] != "/tmp/p.sock;/diag/port,nosuspend,connect")' "$W/m.out"
check merged-variable-appended test $? = 0
"$D" uninject compose -f "$W/m.out" > "$W/m.back"
check merged-variable-uninject same_data "$W/m.back" "$W/m.yaml"

# warnings: env_file, and the agent on its own loopback; none of the latter with a token or auth none
printf 'services:\n  a:\n    image: x\n    env_file: [app.env]\n' > "$W/ef.yaml"
"$D" inject compose -f "$W/ef.yaml" > /dev/null 2> "$W/warn"
check warn-env-file grep -q "warning: service a has env_file" "$W/warn"
check warn-loopback grep -q "warning: diagport-agent listens on its own loopback only" "$W/warn"
"$D" inject compose --no-auth -f "$W/ef.yaml" > /dev/null 2> "$W/warn2"
check no-loopback-warning-with-no-auth test "$(grep -c loopback "$W/warn2")" = 0

# every service injected by default: said, naming them (a database gets the variable for nothing); not with
# --containers; nothing injected at all: said
printf 'services:\n  web: {image: x}\n  db: {image: postgres}\n' > "$W/two.yaml"
"$D" inject compose --no-auth -f "$W/two.yaml" > /dev/null 2> "$W/warn"
check warn-every-service grep -q 'warning: injected every service (web, db): one that is not .NET .* DOTNET_DiagnosticPorts, the crash-dump settings and nothing else for nothing' "$W/warn"
"$D" inject compose --no-auth --containers web -f "$W/two.yaml" > /dev/null 2> "$W/warn"
check no-every-service-warning-with-containers test "$(grep -c 'every service' "$W/warn")" = 0
printf 'services:\n  web: {image: x, labels: {diagport.dev/inject: "false"}}\n' > "$W/none.yaml"
"$D" inject compose --no-auth -f "$W/none.yaml" > "$W/none.out" 2> "$W/warn"
check warn-nothing-injected bash -c "grep -q 'warning: no service was injected' '$W/warn' && ! grep -q diagport-agent '$W/none.out'"

# extends: a base in this file gets no depends_on (Compose refuses to extend a service that has one), and
# says so; a service extending a base whose DOTNET_DiagnosticPorts it replaces, or a base in another file,
# says that; suspend mode on the base too
printf 'services:\n  base:\n    image: x\n    environment: {DOTNET_DiagnosticPorts: /tmp/p.sock}\n  a:\n    extends: base\n  b:\n    extends: {file: common.yaml, service: dotnet}\n' > "$W/ext.yaml"
"$D" inject compose --mode suspend -f "$W/ext.yaml" > "$W/ext.out" 2> "$W/warn"
"$PY" -c 'import sys, yaml; s = yaml.safe_load(open(sys.argv[1]))["services"]; sys.exit("depends_on" in s["base"] or "diagport-agent" not in s["a"]["depends_on"])' "$W/ext.out"
check extends-base-no-depends test $? = 0
check warn-extends-base grep -q "warning: service base is extended by service a, and Compose refuses .* (its runtime waits, suspended" "$W/warn"
check warn-extends-replaces grep -q "warning: service a extends service base, whose DOTNET_DiagnosticPorts ('/tmp/p.sock;/diag/port,suspend,connect') is replaced" "$W/warn"
check warn-extends-other-file grep -q "warning: service b extends service dotnet of common.yaml, which diagport does not read" "$W/warn"
"$D" uninject compose -f "$W/ext.out" > "$W/ext.back"
check extends-uninject same_data "$W/ext.back" "$W/ext.yaml"

# uninject of a file never injected: its data, unchanged
"$D" uninject compose -f "$G/depends-map/input.yaml" > "$W/u"
check uninject-never-injected same_data "$W/u" "$G/depends-map/input.yaml"

# a record that no longer matches: the service it names is gone
"$PY" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); del d["services"]["web"]; yaml.safe_dump(d, open(sys.argv[2], "w"))' "$G/env-map/expected" "$W/gone.yaml"
"$D" uninject compose -f "$W/gone.yaml" > "$W/out" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 200 "$W/err")"; check record-gone-service-refused test "$rc" = 1 -a ! -s "$W/out"
check record-gone-service-named grep -q "names service web, which is gone" "$W/err"
# a service's status label without the agent that holds the project's record
"$PY" -c 'import sys, yaml; d = yaml.safe_load(open(sys.argv[1])); del d["services"]["diagport-agent"]; yaml.safe_dump(d, open(sys.argv[2], "w"))' "$G/env-map/expected" "$W/noagent.yaml"
"$D" uninject compose -f "$W/noagent.yaml" > "$W/out" 2> "$W/err"; rc=$?
WHY="exit $rc: $(head -c 200 "$W/err")"; check status-without-agent-refused test "$rc" = 1 -a ! -s "$W/out"

# caps and syntax: the same exit codes as the other kinds
"$D" inject compose --max-input 64 -f "$G/env-map/input.yaml" > "$W/out" 2>/dev/null; rc=$?
WHY="exit $rc"; check max-input-exit-4 test "$rc" = 4 -a ! -s "$W/out"
printf 'services:\n  a: [\n' > "$W/syn.yaml"
"$D" inject compose -f "$W/syn.yaml" > "$W/out" 2>/dev/null; rc=$?
WHY="exit $rc"; check syntax-exit-3 test "$rc" = 3 -a ! -s "$W/out"
"$D" inject compose --mode fast -f "$G/env-map/input.yaml" > "$W/out" 2>/dev/null; rc=$?
WHY="exit $rc"; check bad-flag-exit-2 test "$rc" = 2 -a ! -s "$W/out"

# the agent's options from x-diagport override the command line's
"$D" inject compose --port 7000 -f "$G/x-diagport/input.yaml" 2>/dev/null | grep -q "http://127.0.0.1:9100"
check x-diagport-over-command-line test $? = 0
