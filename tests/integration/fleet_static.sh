#!/usr/bin/env bash
# fleet_static.sh - `diagport ps` and `diagport capture` against real agents with real .NET apps on this
# machine, named as static targets (--target, --targets-file): parallel captures, the per-workload limit,
# progress on a pseudo-terminal (script(1)) and as plain lines, Ctrl-C, a target dying mid-dump, a target
# refusing the token, the manifest (checked against sha256sum and the files), egress, exit codes, and the
# binary as a real kubectl plugin (`kubectl diagport`, found by kubectl on PATH). Crashes and exceptions: a real
# app (tests/apps/console `throw`) that dies of an unhandled exception shows in ps as its target's crash, there
# still once the app has started again; an agent that does not serve `exceptions` (403) or is older than
# /crashes (404) shows '-' and its row stands; `capture exceptions` takes two apps' exception histories.
set -uo pipefail
T_NAME=fleet_static
source tests/lib.sh
agent_setup fleet
MOUNTS=()
cleanup_more() { for m in "${MOUNTS[@]+"${MOUNTS[@]}"}"; do umount "$m" 2>/dev/null; done; }
build_apps
N=6

# agent i: its socket and dumps in $W/a$i, HTTP on a loopback port it binds itself, its log $W/a$i/agent.log; URL[i], APPPID[i]
declare -a URL AGPID APPPID APPURL
start_one() {
	local i=$1 p
	shift
	mkdir -p -m 0777 "$W/a$i" "$W/a$i/out"
	printf 'Egress:\n  FileSystem:\n    out:\n      DirectoryPath: %s/a%s/out\n' "$W" "$i" > "$W/a$i/agent.yaml"
	"$D" launch --config "$W/a$i/agent.yaml" --socket "$W/a$i/port" --urls http://127.0.0.1:0 --dumps "$W/a$i" "$@" \
		2> "$W/a$i/agent.log" &
	AGPID[$i]=$!
	PIDS+=($!)
	p=$(listening_port "$W/a$i/agent.log" urls 30 "$!") || { fail setup "agent $i did not start" "$W/a$i/agent.log"; exit 0; }
	URL[$i]=http://127.0.0.1:$p
}
printf 's3cret-token-%s-0123456789\n' 1 > "$W/token"
printf 'another-token\n' > "$W/wrong-token"
chmod 600 "$W/token" "$W/wrong-token" # a targets file's token-file must be private
# agent 6 serves every kind but exceptions: its /crashes answers 403
NOEXC=dump,gcdump,trace,cpuprofile,stacks,metrics,logs,env
for i in $(seq 1 $N); do
	if [ "$i" = 2 ] || [ "$i" = 5 ]; then
		start_one "$i" --auth-token-file "$W/token"
	elif [ "$i" = 6 ]; then
		start_one "$i" --captures "$NOEXC"
	else
		start_one "$i"
	fi
done
for i in $(seq 1 $N); do
	hdr=()
	{ [ "$i" = 2 ] || [ "$i" = 5 ]; } && hdr=(-H "Authorization: Bearer s3cret-token-1-0123456789")
	if ! start_webapp "$W/a$i/app.log" "$W/a$i/port" "${URL[$i]}" "${hdr[@]+"${hdr[@]}"}"; then
		fail setup "webapp $i did not attach" "$W/a$i/agent.log"
		exit 0
	fi
	APPPID[$i]=$APID
	APPURL[$i]=$AURL
done

# two workloads of three, as a platform would group replicas; agent 2 needs the token, agent 5 gets the wrong one
{
	echo "# orders and payments, three replicas each"
	for i in 1 2 3; do
		extra=""
		[ "$i" = 2 ] && extra="token-file=$W/token"
		echo "${URL[$i]}  name=orders-$i  workload=orders $extra"
	done
	for i in 4 5 6; do
		extra=""
		[ "$i" = 5 ] && extra="token-file=$W/wrong-token"
		echo "${URL[$i]}  name=payments-$i  workload=payments $extra"
	done
} > "$W/targets"

# ---- ps ----
"$D" ps --targets-file "$W/targets" -o json > "$W/ps.json" 2> "$W/ps.err"
rc=$?
WHY="ps -o json: exit $rc, $(head -c 300 "$W/ps.err")"
check ps-exit test "$rc" = 0
WHY="ps -o json: $(head -c 600 "$W/ps.json")"
check ps-json python3 - "$W/ps.json" "${APPPID[1]}" "${APPPID[3]}" "${APPPID[6]}" << 'EOF'
import json, sys
d = json.load(open(sys.argv[1]))
assert d["kind"] == "ProcessList", d
items = {i["target"]: i for i in d["items"]}
assert len(items) == 6, items.keys()
for name, pid in (("orders-1", sys.argv[2]), ("orders-3", sys.argv[3]), ("payments-6", sys.argv[4])):
    it = items[name]
    assert it["state"] == "ready" and it["workload"] in ("orders", "payments"), it
    p = it["processes"]
    assert len(p) == 1 and p[0]["pid"] == int(pid) and p[0]["name"] == "webapp", p
    assert p[0]["runtimeVersion"].startswith("10.") and p[0]["uptimeSeconds"] >= 0, p
assert items["orders-2"]["state"] == "ready"          # its own token-file
assert items["payments-5"]["state"] == "unavailable"  # the wrong token
assert "refused the token" in items["payments-5"]["reason"], items["payments-5"]
assert items["orders-1"]["crashes"] == [] and "crashesReason" not in items["orders-1"], items["orders-1"]
# agent 6 does not serve exceptions: no crash records, the reason, and the row as ever
assert "crashes" not in items["payments-6"] and "403" in items["payments-6"]["crashesReason"], items["payments-6"]
assert "crashes" not in items["payments-5"] and "crashesReason" not in items["payments-5"]  # unavailable: its reason says
EOF
"$D" ps --targets-file "$W/targets" -o yaml > "$W/ps.yaml" 2>&1
WHY="ps -o yaml is not the JSON document: $(head -c 300 "$W/ps.yaml")"
check ps-yaml python3 -c '
import json, sys, yaml
y = yaml.safe_load(open(sys.argv[1])); j = json.load(open(sys.argv[2]))
for d in (y, j):
    for i in d["items"]:
        for p in i["processes"]: p.pop("uptimeSeconds", None)
assert y == j' "$W/ps.yaml" "$W/ps.json"
"$D" ps --targets-file "$W/targets" > "$W/ps.txt" 2>&1
WHY="ps table: $(head -c 400 "$W/ps.txt")"
check ps-table bash -c "head -1 '$W/ps.txt' | grep -q 'WORKLOAD *TARGET *CONTAINER *PID .* UPTIME CRASHES *LAST CRASH *MODE' &&
	grep -q '^orders .*orders-1 .* ${APPPID[1]} webapp .* 0 *- *- *ready' '$W/ps.txt' &&
	grep -q '^payments .*payments-6 .* ${APPPID[6]} webapp .*[0-9][smh] - *- *- *ready' '$W/ps.txt' &&
	grep -q 'payments-5 .*refused the token' '$W/ps.txt'"

# ---- crashes and exceptions: two apps that throw (handled), one of them crashed by an unhandled exception ----
# start_thrower I: the console app `throw` on agent I with the crash settings the injector gives an app (a dump and
# a report in the agent's dumps directory), attached and its exception history begun; THROWER[I] its pid
declare -a THROWER
start_thrower() {
	local i=$1 out=$W/a$1/thrower.out
	DOTNET_DiagnosticPorts=$W/a$i/port,connect,nosuspend DOTNET_DbgEnableMiniDump=1 DOTNET_DbgMiniDumpType=1 \
		DOTNET_DbgMiniDumpName="$W/a$i/crash-%p-%t-%e.dmp" DOTNET_EnableCrashReport=1 \
		dotnet "$B/apps/console/console.dll" throw > "$out" 2>&1 &
	THROWER[$i]=$!
	PIDS+=($!)
	wait_for "$out" READY 30 || { fail setup "thrower $i did not start" "$out"; exit 0; }
	eventually 30 bash -c "curl -s '${URL[$i]}/exceptions?pid=${THROWER[$i]}' | grep -q '\"outer '" ||
		{ fail setup "no exception history for thrower $i" "$W/a$i/agent.log"; exit 0; }
}
start_one 7
start_one 8
start_thrower 7
start_thrower 8
CRASHED=${THROWER[7]}
kill -HUP "$CRASHED" # its background thread throws, unhandled: the runtime writes the dump and the report, and aborts
wait "$CRASHED" 2>/dev/null
eventually 30 bash -c "curl -s '${URL[7]}/crashes' | jq -e 'length == 1' > /dev/null" ||
	fail setup "agent 7 recorded no crash" "$W/a7/agent.log"
printf '%s name=crashy workload=crashy\n%s name=steady workload=steady\n%s name=noexc workload=payments\n' \
	"${URL[7]}" "${URL[8]}" "${URL[6]}" > "$W/crash-targets"
# the app is gone, its crash is the target's: a row without a process, how many and how long ago, and why
"$D" ps --targets-file "$W/crash-targets" > "$W/cps.txt" 2>&1
WHY="$(cat "$W/cps.txt")"
check ps-crash-row bash -c "grep -q '^crashy *crashy .* - *- *- *- *1 ([0-9]*s ago) *InvalidOperationException *- *no .NET process attached' '$W/cps.txt' &&
	grep -q '^steady *steady .* ${THROWER[8]} console .* 0 *- *- *ready' '$W/cps.txt' &&
	grep -q '^payments *noexc .* ${APPPID[6]} webapp .* - *- *- *ready' '$W/cps.txt'"
"$D" ps --targets-file "$W/crash-targets" -o json > "$W/cps.json" 2>&1
WHY="$(head -c 1500 "$W/cps.json")"
check ps-crash-json python3 - "$W/cps.json" "$CRASHED" "$W/a7" << 'EOF'
import json, os, sys
d = json.load(open(sys.argv[1])); items = {i["target"]: i for i in d["items"]}
c = items["crashy"]
assert c["state"] == "ready" and c["processes"] == [] and len(c["crashes"]) == 1, c
k = c["crashes"][0]
assert k["pid"] == int(sys.argv[2]) and k["processName"] == "console.dll" and k["exitSignal"] == 6, k
assert k["time"].endswith("Z") and k["exitCode"] is None, k
e = k["exception"]
assert e["typeName"] == "System.InvalidOperationException" and e["hresult"] == "0x80131509", e
assert e["message"] in ("crash on a background thread", None), e  # the history's, best effort (crashes.sh)
assert e["stack"][0] == "console.dll!DiagportTestConsole.Program.Crash()", e
arts = {a["kind"]: a for a in k["artifacts"]}
assert sorted(arts) == ["crashReport", "dump"], k["artifacts"]
for a in arts.values():
    assert a["state"] == "kept" and os.path.dirname(a["file"]) == sys.argv[3] and a["bytes"] == os.path.getsize(a["file"]), a
assert items["steady"]["crashes"] == [] and len(items["steady"]["processes"]) == 1, items["steady"]
assert "crashes" not in items["noexc"] and "does not serve crashes" in items["noexc"]["crashesReason"], items["noexc"]
assert len(items["noexc"]["processes"]) == 1, items["noexc"]
EOF
# the app starts again (its container restarted): a new process, and the target's crash is still shown
start_thrower 7
"$D" ps --targets-file "$W/crash-targets" > "$W/cps2.txt" 2>&1
WHY="$(cat "$W/cps2.txt")"
check ps-crash-after-restart grep -q "^crashy *crashy .* ${THROWER[7]} console .* 1 ([0-9]*[sm] ago) *InvalidOperationException *- *ready" "$W/cps2.txt"

# capture exceptions from both apps (and from the agent that does not serve them): a file of each app's history
"$D" capture exceptions --targets-file "$W/crash-targets" -o "$W/exc" > "$W/exc.out" 2> "$W/exc.err"
rc=$?
WHY="exit $rc (want 1: noexc refuses): $(cat "$W/exc.out") $(head -c 600 "$W/exc/manifest.json" 2>/dev/null)"
check exceptions-exit test "$rc" = 1
check exceptions-files python3 - "$W/exc" "${THROWER[7]}" "${THROWER[8]}" << 'EOF'
import json, os, re, sys
d = sys.argv[1]; m = json.load(open(os.path.join(d, "manifest.json")))
assert m["capture"] == "exceptions" and m["request"] == "/exceptions" and "method" not in m, m
assert (m["succeeded"], m["failed"]) == (2, 1), m
pids = set()
for it in m["items"]:
    if it["target"]["name"] == "noexc":
        assert it["status"] == "failed" and "403" in it["error"], it
        continue
    assert re.fullmatch(r"(crashy|steady)_%d_exceptions_\d{8}T\d{6}Z\.ndjson" % it["pid"], it["file"]), it
    recs = [json.loads(l) for l in open(os.path.join(d, it["file"]))]
    outer = [r for r in recs if r["typeName"] == "System.ApplicationException" and r["message"].startswith("outer ")]
    inner = [r for r in recs if r["typeName"] == "System.InvalidOperationException" and r["message"].startswith("inner ")]
    assert outer and inner and outer[0]["stack"]["frames"][0]["methodName"] == "Wrap", recs[:2]
    assert all(r["stack"]["threadId"] == it["pid"] for r in outer), outer[0]  # the main thread: its id is the pid
    pids.add(it["pid"])
assert pids == {int(sys.argv[2]), int(sys.argv[3])}, pids
EOF
# text, and a filter (POST /exceptions): only the outer exceptions, the manifest says what was asked
"$D" capture exceptions --target "${URL[7]}" --target "${URL[8]}" --format text -o "$W/exct" \
	--filter '{"include": [{"exceptionType": "System.ApplicationException"}]}' > "$W/exct.out" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/exct.out"); $(head -c 400 "$W/exct/"*.txt 2>/dev/null)"
check exceptions-text-filter bash -c "test $rc = 0 && test \$(ls '$W/exct'/*_exceptions_*.txt | wc -l) = 2 &&
	for f in '$W/exct'/*.txt; do grep -q '^First chance exception at ' \"\$f\" &&
		grep -q '^System.ApplicationException: outer ' \"\$f\" && ! grep -q '^System.InvalidOperationException' \"\$f\" || exit 1; done &&
	jq -e '.method == \"POST\" and .body.include[0].exceptionType == \"System.ApplicationException\"' '$W/exct/manifest.json'"
printf '{"exclude": [{"methodName": "Wrap"}]}' > "$W/filter.json"
"$D" capture exceptions --target "${URL[8]}" --format json-seq --filter "$W/filter.json" -o "$W/excs" > "$W/excs.out" 2>&1
WHY="$(cat "$W/excs.out")"
check exceptions-json-seq-filter-file bash -c "head -c 1 '$W/excs/'*.json-seq | od -An -tx1 | grep -q 1e &&
	tr '\036' '\n' < '$W/excs/'*.json-seq | jq -e -s 'length > 0 and all(.[]; .typeName == \"System.InvalidOperationException\")'"

# ---- capture stacks from all six, four at a time: five files, one refusal, exit 1 ----
"$D" capture stacks --targets-file "$W/targets" -o "$W/stacks" --parallel 4 > "$W/stacks.out" 2> "$W/stacks.err"
rc=$?
WHY="exit $rc (want 1: one target refused the token): $(tail -3 "$W/stacks.out")"
check stacks-exit test "$rc" = 1
WHY="manifest or files wrong: $(head -c 800 "$W/stacks/manifest.json" 2>/dev/null)"
check stacks-manifest python3 - "$W/stacks" << 'EOF'
import hashlib, json, os, re, sys
d = sys.argv[1]
m = json.load(open(os.path.join(d, "manifest.json")))
assert m["kind"] == "CaptureManifest" and m["capture"] == "stacks", m
assert (m["succeeded"], m["failed"], m["unavailable"]) == (5, 0, 1), m
names = sorted(f for f in os.listdir(d) if f != "manifest.json")
assert len(names) == 5 and not any(f.startswith(".") for f in os.listdir(d)), os.listdir(d)
for it in m["items"]:
    if it["status"] != "succeeded":
        assert it["target"]["name"] == "payments-5" and "refused the token" in it["error"], it
        continue
    f = os.path.join(d, it["file"])
    data = open(f, "rb").read()
    assert hashlib.sha256(data).hexdigest() == it["sha256"], it
    assert len(data) == it["bytes"] > 0 and data.startswith(b"Thread"), it
    assert it["durationSeconds"] > 0 and it["startedAt"].endswith("Z") and it["pid"] > 0
    assert re.fullmatch(r"(orders|payments)-\d_%d_stacks_\d{8}T\d{6}Z\.txt" % it["pid"], it["file"]), it["file"]
    assert oct(os.stat(f).st_mode & 0o777) == "0o600", f
EOF
WHY="plain progress lines (not a terminal): $(head -c 400 "$W/stacks.err")"
check progress-plain bash -c "grep -q 'orders-1 pid ${APPPID[1]}: stacks started' '$W/stacks.err' &&
	grep -q 'orders-1 pid ${APPPID[1]}: stacks succeeded, .* B in ' '$W/stacks.err' &&
	! grep -q \$'\\e\\[' '$W/stacks.err'"
WHY="every agent logs the capture with its caller: $(grep capture-started "$W/a1/agent.log" | tail -1)"
check caller-logged bash -c "grep capture-started '$W/a1/agent.log' | tail -1 |
	jq -e '.caller == \"${USER:-unknown}@'\$(hostname)'\" and .peer == \"127.0.0.1\" and .authenticated == false' &&
	grep capture-started '$W/a2/agent.log' | tail -1 | jqe '.authenticated == true'"

# ---- the per-workload limit: dumps (they freeze the process) of one workload never overlap ----
"$D" capture dump --type Mini --targets-file "$W/targets" -o "$W/dumps1" --parallel 4 > "$W/dumps1.out" 2>&1
check_overlap() {
	python3 - "$1/manifest.json" "$2" << 'EOF'
import datetime, json, sys
m = json.load(open(sys.argv[1])); limit = int(sys.argv[2])
def span(it):
    t = datetime.datetime.strptime(it["startedAt"], "%Y-%m-%dT%H:%M:%S.%fZ").timestamp()
    return t, t + it["durationSeconds"]
ok = [i for i in m["items"] if i["status"] == "succeeded"]
assert len(ok) == 5, m
most = {}
for w in ("orders", "payments"):
    spans = [span(i) for i in ok if i["target"]["workload"] == w]
    # the most that ran at once: at each start, how many had started and not ended (ends are measured
    # after the transfer, starts before it, so 5 ms of clock slack)
    most[w] = max(sum(1 for s2, e2 in spans if s2 <= s + 0.005 and e2 > s + 0.005) for s, e in spans)
assert max(most.values()) <= limit, most
allspans = [span(i) for i in ok]
cross = max(sum(1 for s2, e2 in allspans if s2 <= s + 0.005 and e2 > s + 0.005) for s, e in allspans)
print(most, cross)
if limit > 1: assert max(most.values()) > 1, most   # with room, replicas did run together
EOF
}
WHY="two dumps of one workload overlapped: $(check_overlap "$W/dumps1" 1 2>&1 | tail -2)"
check max-unavailable-1 check_overlap "$W/dumps1" 1
"$D" capture dump --type Mini --targets-file "$W/targets" -o "$W/dumps2" --parallel 6 --max-unavailable 2 \
	> "$W/dumps2.out" 2>&1
WHY="--max-unavailable 2: $(check_overlap "$W/dumps2" 2 2>&1 | tail -2)"
check max-unavailable-2 check_overlap "$W/dumps2" 2

# ---- progress on a terminal: lines redrawn in place, a total line ----
script -qfec "'$D' capture stacks --target '${URL[1]}' --target '${URL[3]}' -o '$W/tty'" /dev/null > "$W/tty.txt" 2>&1
rc=$?
WHY="exit $rc; $(head -c 600 "$W/tty.txt" | cat -v)"
check progress-tty bash -c "test $rc = 0 && grep -q \$'\\e\\[[0-9]*A\\e\\[J' '$W/tty.txt' &&
	grep -q 'stacks: 2/2 done (0 failed, 0 cancelled), 0 running, 0 queued' '$W/tty.txt' &&
	grep -q '127.0.0.1:[0-9]* pid [0-9]* *succeeded' '$W/tty.txt'"

# ---- more than ten targets need --yes ----
args=()
for i in 1 3 4 6; do args+=(--target "${URL[$i]}"); done
for _ in 1 2 3 4 5 6 7; do refused_port; args+=(--target "http://127.0.0.1:$RP"); done
"$D" capture stacks "${args[@]}" -o "$W/yes" < /dev/null > "$W/yes.out" 2>&1
rc=$?
WHY="11 targets without --yes: exit $rc, $(cat "$W/yes.out")"
check needs-yes bash -c "test $rc = 2 && grep -q '11 targets; more than 10 need --yes' '$W/yes.out' && ! test -e '$W/yes'"

# ---- Ctrl-C during a dump: cancelled on the agent, nothing partial anywhere, exit 130 ----
curl -s "${APPURL[3]}/memory-leak?mb=1500" > /dev/null
"$D" capture dump --type Full --target "${URL[3]}" -o "$W/cancel" > "$W/cancel.out" 2> "$W/cancel.err" &
cap=$!
wait_for "$W/cancel.err" "dump started" 10
sleep 1.5 # time passing: Ctrl-C in the middle of the transfer
kill -INT $cap
wait $cap
rc=$?
WHY="exit $rc (want 130): $(tail -3 "$W/cancel.out")"
check ctrl-c-exit test "$rc" = 130
WHY="left: $(ls -A "$W/cancel"); manifest: $(head -c 400 "$W/cancel/manifest.json" 2>/dev/null)"
check ctrl-c-no-partial bash -c "test \"\$(ls -A '$W/cancel')\" = manifest.json &&
	jq -e '.cancelled == 1 and .items[0].status == \"cancelled\" and (.items[0] | has(\"file\") | not)' '$W/cancel/manifest.json'"
wait_for "$W/a3/agent.log" '"outcome":"Cancelled"' 15
WHY="the agent did not stop the dump: $(grep capture-ended "$W/a3/agent.log" | tail -1)"
check ctrl-c-agent-cancelled bash -c "grep capture-ended '$W/a3/agent.log' | tail -1 |
	jq -e '.kind == \"dump\" and .outcome == \"Cancelled\"'"
WHY="staging files left in the agent's dumps directory: $(ls -A "$W/a3")"
check ctrl-c-agent-clean bash -c "test -z \"\$(ls -A '$W/a3' | grep -v -e '^port$' -e '^agent' -e '^app.log$' -e '^out$')\""
WHY="the app did not run on after the cancelled dump"
check ctrl-c-app-alive curl -sf "${APPURL[3]}/"

# ---- one target dying mid-dump: its item fails, the others succeed, nothing partial ----
"$D" capture dump --type Full --target "${URL[3]}" --target "${URL[4]}" -o "$W/dying" --parallel 2 \
	> "$W/dying.out" 2> "$W/dying.err" &
cap=$!
wait_for "$W/dying.err" "127.0.0.1:${URL[3]##*:} pid .*: dump started" 10
sleep 1 # time passing: the agent killed in the middle of the transfer
kill -9 "${AGPID[3]}"
wait $cap
rc=$?
WHY="exit $rc (want 1); $(cat "$W/dying.out")"
check dying-exit test "$rc" = 1
# the kubelet restarts a dead agent: the new one releases the dump its predecessor left half-way (createdump
# waiting on the pipe with the app stopped), and the app runs on
dead_port=${URL[3]##*:}
start_one 3
WHY="the app stayed frozen after its agent died mid-dump and came back"
check dying-app-resumes bash -c "for _ in \$(seq 1 150); do curl -sf -m 1 '${APPURL[3]}/' > /dev/null && exit 0; sleep 0.1; done; exit 1"
WHY="$(head -c 900 "$W/dying/manifest.json" 2>/dev/null); files: $(ls -A "$W/dying")"
check dying-manifest python3 - "$W/dying" "$dead_port" << 'EOF'
import json, os, sys
d = sys.argv[1]; m = json.load(open(os.path.join(d, "manifest.json")))
st = {i["target"]["name"].split(":")[1]: i for i in m["items"]}
dead = st[sys.argv[2]]
assert dead["status"] == "failed" and "file" not in dead and dead["error"], dead
ok = [i for i in m["items"] if i["status"] == "succeeded"]
assert len(ok) == 1 and os.path.getsize(os.path.join(d, ok[0]["file"])) == ok[0]["bytes"] > 1000000, ok
assert not [f for f in os.listdir(d) if f.startswith(".")], os.listdir(d)
EOF

# ---- egress: each agent writes to its provider; the manifest (stdout) says where ----
"$D" capture stacks --target "${URL[1]}" --target "${URL[6]}" --egress out > "$W/egress.json" 2> "$W/egress.err"
rc=$?
WHY="exit $rc: $(head -c 300 "$W/egress.err") $(head -c 500 "$W/egress.json")"
check egress python3 - "$W/egress.json" "$W/a1/out" "$W/a6/out" << 'EOF'
import json, os, sys
m = json.load(open(sys.argv[1]))
assert m["egressProvider"] == "out" and m["succeeded"] == 2, m
for it in m["items"]:
    loc = it["location"]
    assert os.path.dirname(loc) in (sys.argv[2], sys.argv[3]) and open(loc, "rb").read().startswith(b"Thread"), it
EOF

# ---- other kinds, briefly: each file is what its format says ----
"$D" capture cpuprofile --target "${URL[1]}" --duration 1 -o "$W/cpu" > /dev/null 2>&1
WHY="cpuprofile: $(ls "$W/cpu")"
check cpuprofile bash -c "jq -e '.\"\$schema\" | test(\"speedscope\")' '$W/cpu/'*.speedscope.json"
"$D" capture metrics --target "${URL[1]}" --target "${URL[4]}" -o "$W/metrics" > /dev/null 2>&1
WHY="metrics: $(cat "$W/metrics/manifest.json" 2>/dev/null | head -c 300)"
check metrics-per-agent bash -c "jq -e '.succeeded == 2 and ([.items[] | has(\"pid\")] | any | not)' '$W/metrics/manifest.json' &&
	test \$(ls '$W/metrics'/*.prom | wc -l) = 2"
"$D" capture logs --target "${URL[1]}" --duration 4 --level Information -o "$W/logs" > /dev/null 2>&1 &
cap=$!
sleep 2 # time passing: the lines logged in the middle of the 4 s capture
curl -s "${APPURL[1]}/log?count=3&message=fleet-hello" > /dev/null
wait $cap
WHY="logs: $(ls "$W/logs"); $(head -c 300 "$W/logs/"*.ndjson 2>/dev/null)"
check logs bash -c "test \$(jq -c 'select(.Message | test(\"fleet-hello\"))' '$W/logs/'*.ndjson | wc -l) -ge 1"
"$D" capture trace --profile Cpu --duration 1 --target "${URL[1]}" -o "$W/trace" > /dev/null 2>&1
WHY="trace: $(ls "$W/trace")"
check trace bash -c "'$D' nettrace stats '$W/trace/'*.nettrace | jqe '.totalEvents > 0'"
"$D" capture gcdump --format json --target "${URL[1]}" -o "$W/gc" > /dev/null 2>&1
WHY="gcdump: $(ls "$W/gc"); $(head -c 200 "$W/gc/"*.gcdump.json 2>/dev/null)"
check gcdump bash -c "jq -e '.objects > 0 and (.types | length) > 0' '$W/gc/'*.gcdump.json"
"$D" capture gcdump --target "${URL[1]}" -o "$W/gcf" > /dev/null 2>&1
WHY="gcdump (default format): $(ls "$W/gcf")"
check gcdump-file bash -c "build/tools/dotnet-gcdump/dotnet-gcdump report '$W/gcf/'*.gcdump | grep -q 'GC Heap objects'"

# ---- exit codes and messages ----
"$D" capture frobnicate --target "${URL[1]}" > "$W/e1" 2>&1
rc=$?
check usage-kind bash -c "test $rc = 2 && grep -q \"'frobnicate' is not a kind\" '$W/e1'"
"$D" capture stacks --target "${URL[1]}" --format svg > "$W/e2" 2>&1
rc=$?
check usage-format bash -c "test $rc = 2 && grep -q \"format 'svg' is not one of text, json, speedscope\" '$W/e2'"
"$D" capture stacks --target "${URL[1]}" --filter '{}' > "$W/e5" 2>&1
rc=$?
check usage-filter-kind bash -c "test $rc = 2 && grep -q -- '--filter is for exceptions, not stacks' '$W/e5'"
"$D" capture exceptions --target "${URL[1]}" --filter '{"include": [' -o "$W/e6d" > "$W/e6" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/e6")"
check usage-filter-json bash -c "test $rc = 2 && grep -q -- '--filter is not a JSON object' '$W/e6' && ! test -e '$W/e6d'"
printf '%s\n# fine\nftp://nope\n' "${URL[1]}" > "$W/bad-targets"
"$D" ps --targets-file "$W/bad-targets" > "$W/e3" 2>&1
rc=$?
WHY="$(cat "$W/e3")"
check usage-targets-file-line bash -c "test $rc = 2 && grep -q \"$W/bad-targets:3: 'ftp://nope' is not an http:// or https:// URL\" '$W/e3'"
refused_port
"$D" capture stacks --target "http://127.0.0.1:$RP" -o "$W/none" > "$W/e4" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/e4")"
check nothing-to-capture test "$rc" = 5

# ---- hostile input: what agents, files and places say cannot harm the operator ----
start_hostile() { # MODE: a hostile agent (hostile_agent.py); HURL its URL
	rm -f "$W/h-$1.port"
	python3 tests/integration/hostile_agent.py "$1" "$W/h-$1.port" "$W/h-$1.log" &
	PIDS+=($!)
	wait_for "$W/h-$1.port" '[0-9]' 10
	HURL=http://127.0.0.1:$(cat "$W/h-$1.port")
}
start_hostile escapes
"$D" ps --target "$HURL" > "$W/h1.out" 2>&1
"$D" capture stacks --target "$HURL" -o "$W/h1" > "$W/h1c.out" 2> "$W/h1c.err"
WHY="an escape sequence reached the terminal: $(cat -v "$W/h1.out" "$W/h1c.out" "$W/h1c.err" | head -c 600)"
check no-terminal-escapes bash -c "! grep -q \$'\\e' '$W/h1.out' '$W/h1c.out' '$W/h1c.err' &&
	! grep -q '^FAKE' '$W/h1c.out' && grep -qF '?]0;PWNED??[2Jwebapp' '$W/h1.out' && grep -q 'bad thing' '$W/h1c.out'"
# its crash record, escapes and all: the table's type made safe, the JSON's every string too
WHY="$(cat -v "$W/h1.out")"
check crash-record-made-safe grep -qE '1 \([0-9]+d ago\) +\?\[2JBoomException ' "$W/h1.out"
"$D" ps --target "$HURL" -o json > "$W/h1.json" 2>&1
WHY="$(head -c 1200 "$W/h1.json")"
check crash-record-json-safe jq -e '.items[0].crashes[0] | .exception.message == "a??FAKE line" and
	.exception.typeName == "Evil.?[2JBoomException" and .exception.stack == ["x.dll!?]0;PWNED?Main()"] and
	.processName == "?]0;PWNED??[2Jwebapp" and .artifacts[0].file == "/dumps/?[2Jcrash.dmp" and .artifacts[0].bytes == 5' "$W/h1.json"
# an agent older than /runtimes (404): ps takes the runtime's version and uptime from its /process, as before
start_hostile plain
"$D" ps --target "$HURL" -o json > "$W/h-old.json" 2>&1
WHY="$(head -c 400 "$W/h-old.json")"
check ps-agent-without-runtimes jq -e '.items[0].processes[0] | .runtimeVersion == "9.0.11" and .uptimeSeconds > 0' "$W/h-old.json"
# nor /crashes (404): no records, the reason, the row as ever
check ps-agent-without-crashes jq -e '.items[0] | .state == "ready" and (has("crashes") | not) and
	(.crashesReason | test("no /crashes .*404"))' "$W/h-old.json"
"$D" ps --target "$HURL" > "$W/h-old.txt" 2>&1
WHY="$(cat "$W/h-old.txt")"
check ps-agent-without-crashes-table grep -qE ' 7 webapp +9\.0\.11 +[0-9]+d +- +- +- +ready' "$W/h-old.txt"
start_hostile many
"$D" capture stacks --target "$HURL" -o "$W/h2" > "$W/h2.out" 2>&1
rc=$?
WHY="exit $rc: $(tail -2 "$W/h2.out")"
check too-many-processes bash -c "test $rc = 5 && grep -q 'lists 300 processes; more than 256 is not taken' '$W/h2.out'"
start_hostile nopid
"$D" capture stacks --target "$HURL" -o "$W/h3" > "$W/h3.out" 2>&1
WHY="$(cat "$W/h3.out")"
check process-without-pid bash -c "test \$(grep -c 'without a valid pid' '$W/h3.out') -ge 3 && ! grep -q '/stacks' '$W/h-nopid.log'"
start_hostile endless
timeout 60 "$D" capture stacks --target "$HURL" --max-size 1Mi -o "$W/h4" > "$W/h4.out" 2>&1
rc=$?
WHY="exit $rc: $(tail -2 "$W/h4.out"); left: $(ls -A "$W/h4")"
check max-size bash -c "test $rc = 1 && grep -q 'larger than 1048576 bytes (--max-size)' '$W/h4.out' &&
	test \"\$(ls -A '$W/h4')\" = manifest.json"
# a disk that fills up under an artifact allowed more than it holds (--max-size given: a real 2 MiB tmpfs; this
# runs as root): exit 1, the write's own error, nothing partial left (the artifact is written in pieces of a MiB:
# the error comes from one of them or the last)
mkdir -p "$W/small" && mount -t tmpfs -o size=2m,mode=0777 tmpfs "$W/small" && MOUNTS+=("$W/small")
timeout 60 "$D" capture stacks --target "$HURL" --max-size 1Gi -o "$W/small/out" > "$W/h5.out" 2>&1
rc=$?
WHY="exit $rc: $(tail -2 "$W/h5.out"); left: $(ls -A "$W/small/out" 2>&1)"
check artifact-disk-full bash -c "test $rc = 1 && grep -q 'writing .*partial: No space left on device' '$W/h5.out' &&
	! ls -A '$W/small/out' | grep -q partial"
# without --max-size a dump takes at most the output disk's free space less 5% of its size (a real 32 MiB tmpfs):
# an endless agent is stopped there, the message names --max-size and the free space, nothing partial is left
mkdir -p "$W/disk32" && mount -t tmpfs -o size=32m,mode=0777 tmpfs "$W/disk32" && MOUNTS+=("$W/disk32")
timeout 60 "$D" capture dump --target "$HURL" -o "$W/disk32/out" > "$W/h7.out" 2>&1
rc=$?
WHY="exit $rc: $(tail -2 "$W/h7.out"); left: $(ls -A "$W/disk32/out" 2>&1)"
check dump-keeps-disk-free bash -c "test $rc = 1 && grep -q 'dump failed: stopped at 3[01].[0-9] MiB: writing on would leave less than 1638.4 KiB free on the filesystem of $W/disk32/out, which had 32.0 MiB free at the start. Without --max-size a capture may take the output disk.s free space less 5% of its size (at most 1 GiB); give -o a disk with room, or --max-size' '$W/h7.out' &&
	test \"\$(ls -A '$W/disk32/out')\" = manifest.json && jq -e '.failed == 1' '$W/disk32/out/manifest.json'"
# an agent that sends a byte a second (hostile_agent.py drip): given up once under the low-speed floor (1 KiB/s
# over 30 s, armed by the first byte), the message naming the agent and its rate, nothing partial, exit 1; a
# capture with a --duration (logs, 15 s) is not held to the floor before its duration has passed
EURL=$HURL
start_hostile drip
DURL=$HURL
HURL=$EURL
t0=$(date +%s%N)
timeout 120 "$D" capture logs --duration 15 --target "$DURL" -o "$W/h6l" > "$W/h6l.out" 2>&1 &
LOGSPID=$!
timeout 120 "$D" capture dump --target "$DURL" -o "$W/h6" > "$W/h6.out" 2>&1
rc=$?
secs=$((($(date +%s%N) - t0) / 1000000000))
WHY="exit $rc after $secs s: $(tail -3 "$W/h6.out"); left: $(ls -A "$W/h6")"
check low-speed-floor bash -c "test $rc = 1 && test $secs -ge 30 && test $secs -le 45 &&
	grep -q '127.0.0.1:[0-9]* pid 7: dump failed: 127.0.0.1:[0-9]* sent [0-9]* bytes in the last 30 s ([0-9.]* B/s), under the low-speed floor of 1024 B/s' '$W/h6.out' &&
	test \"\$(ls -A '$W/h6')\" = manifest.json && jq -e '.failed == 1' '$W/h6/manifest.json'"
wait "$LOGSPID"
rc=$?
secs=$((($(date +%s%N) - t0) / 1000000000))
WHY="exit $rc after $secs s: $(tail -3 "$W/h6l.out"); left: $(ls -A "$W/h6l")"
check low-speed-floor-after-duration bash -c "test $rc = 1 && test $secs -ge 45 && test $secs -le 65 &&
	grep -q 'logs failed: .* under the low-speed floor' '$W/h6l.out' && test \"\$(ls -A '$W/h6l')\" = manifest.json"
USER=$'mallory\r\nAuthorization: Bearer injected\r\nX-Evil: 1' "$D" ps --target "$HURL" > /dev/null 2>&1
WHY="$(tail -1 "$W/h-endless.log")"
check caller-one-header python3 -c '
import json, sys
h = json.loads(open(sys.argv[1]).read().splitlines()[-1])["headers"]
names = [k.lower() for k, v in h]
assert "x-evil" not in names and "authorization" not in names, h
assert [v for k, v in h if k.lower() == "x-diagport-caller"][0].startswith("mallory??Authorization"), h' "$W/h-endless.log"
# files: a NUL byte, a token file others can read, the same URL twice
printf '%s\n\0%s\n' "${URL[1]}" "${URL[3]}" > "$W/nul-targets"
"$D" ps --targets-file "$W/nul-targets" > "$W/f1" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/f1")"
check targets-nul bash -c "test $rc = 2 && grep -q 'nul-targets:2: a NUL byte' '$W/f1'"
printf 's3cret-token-1-0123456789\n' > "$W/open-token"
chmod 644 "$W/open-token"
printf '%s token-file=%s\n' "${URL[2]}" "$W/open-token" > "$W/open-targets"
"$D" ps --targets-file "$W/open-targets" > "$W/f2" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/f2")"
check token-file-private bash -c "test $rc = 2 && grep -q 'must be a file of your own that only you can read' '$W/f2'"
"$D" ps --target "${URL[1]}" --target "${URL[1]}/" > "$W/f3" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/f3")"
check same-url-twice bash -c "test $rc = 2 && grep -q 'is listed twice' '$W/f3'"
# places: a manifest.json planted as a symlink is replaced, not followed; a directory others may write is refused
mkdir -m 700 "$W/planted"
echo precious > "$W/victim"
ln -s "$W/victim" "$W/planted/manifest.json"
"$D" capture stacks --target "${URL[1]}" -o "$W/planted" > /dev/null 2>&1
WHY="victim: $(cat "$W/victim"); manifest: $(ls -l "$W/planted/manifest.json")"
check manifest-not-followed bash -c "test \"\$(cat '$W/victim')\" = precious && test -f '$W/planted/manifest.json' &&
	! test -L '$W/planted/manifest.json' && jq -e '.succeeded == 1' '$W/planted/manifest.json'"
mkdir -m 777 "$W/shared"
chmod 777 "$W/shared"
"$D" capture stacks --target "${URL[1]}" -o "$W/shared" > "$W/f4" 2>&1
rc=$?
WHY="exit $rc: $(cat "$W/f4")"
check output-dir-shared bash -c "test $rc = 2 && grep -q 'is writable by others' '$W/f4' && test -z \"\$(ls -A '$W/shared')\""
# the agent: a download given up half-way is logged as failed or cancelled, never succeeded: Cancelled when
# the client left while createdump still wrote (the dump is stopped), Failed when it left after the dump was
# whole (which of the two depends on how fast createdump is)
ndumps=$(grep capture-ended "$W/a1/agent.log" | grep -c '"kind":"dump"')
python3 -c '
import socket, sys
host, port = sys.argv[1].split("//")[1].split(":")
s = socket.create_connection((host, int(port)))
s.sendall(("GET /dump?type=Mini&pid=%s HTTP/1.1\r\nHost: x\r\n\r\n" % sys.argv[2]).encode())
got = 0
while got < 1000000:
    b = s.recv(65536)
    if not b:
        break
    got += len(b)
s.close()
print(got)' "${URL[1]}" "${APPPID[1]}" > "$W/abort.out" 2>&1
eventually 15 bash -c "test \$(grep capture-ended '$W/a1/agent.log' | grep -c '\"kind\":\"dump\"') -gt $ndumps"
WHY="$(grep capture-ended "$W/a1/agent.log" | tail -1)"
check agent-logs-abandoned-download bash -c "grep capture-ended '$W/a1/agent.log' | grep '\"kind\":\"dump\"' | tail -1 |
	jqe '(.outcome == \"Failed\" or .outcome == \"Cancelled\") and .bytes > 0'"

# ---- a kubectl plugin: kubectl finds kubectl-diagport on PATH and runs it ----
mkdir -p "$W/bin"
ln -s "$D" "$W/bin/kubectl-diagport"
PATH="$W/bin:$PATH" kubectl plugin list > "$W/plugins" 2>&1
WHY="$(cat "$W/plugins")"
check kubectl-plugin-list grep -q "$W/bin/kubectl-diagport" "$W/plugins"
PATH="$W/bin:$PATH" kubectl diagport ps --target "${URL[1]}" -o json > "$W/kps.json" 2>&1
WHY="$(head -c 300 "$W/kps.json")"
check kubectl-plugin-ps jq -e ".items[0].processes[0].pid == ${APPPID[1]}" "$W/kps.json"
PATH="$W/bin:$PATH" kubectl diagport capture --help > "$W/khelp" 2>&1
check kubectl-plugin-help grep -q '^usage: kubectl diagport capture KIND' "$W/khelp"
