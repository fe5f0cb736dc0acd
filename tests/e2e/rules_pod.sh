#!/usr/bin/env bash
# tests/e2e/rules_pod.sh - collection rules carried by the workload, in a real pod: the test webapp's
# Deployment injected with `diagport inject k8s --rules NAME` (the annotation diagport.dev/rules names a
# ConfigMap of dotnet-monitor's keys, CollectionRules__... as a dotnet-monitor user writes them), played with
# `podman kube play`; the agent (its image, sandboxed, uid 1654) reads the ConfigMap as key-per-file settings
# and its rules act on the app in the other container: a Startup rule's stacks and a GC-heap rule's dump
# reach the egress directory, /collectionrules says so through the pod's port. Kubelet mounts a ConfigMap as
# a directory of files, one per key; podman 4.3 is given that directory as a hostPath in its place (as
# pod.sh does for the Secret, which podman 4.3 cannot play).
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-rules-pod
. tests/lib.sh
agent_setup e2erules
. tests/e2e/lib.sh
e2e_setup
build_apps
AGENT_IMG=localhost/diagport:e2e-rules
APP_IMG=localhost/diagport-e2e-webapp:1 # the name tests/e2e/webapp.yaml runs
build_agent_image "$AGENT_IMG"
build_app_image "$APP_IMG"
cp tests/e2e/webapp.yaml "$W/deploy.yaml"

# the ConfigMap a user writes, and its keys as the files kubelet would mount
kubectl create configmap app-rules --dry-run=client -o yaml \
	--from-literal=Egress__FileSystem__out__DirectoryPath=/dumps \
	--from-literal=CollectionRules__AtStart__Trigger__Type=Startup \
	--from-literal=CollectionRules__AtStart__Actions__0__Type=CollectStacks \
	--from-literal=CollectionRules__AtStart__Actions__0__Settings__Egress=out \
	--from-literal=CollectionRules__BigHeap__Trigger__Type=GCHeapSize \
	--from-literal=CollectionRules__BigHeap__Trigger__Settings__GreaterThan=60 \
	--from-literal=CollectionRules__BigHeap__Trigger__Settings__SlidingWindowDuration=00:00:02 \
	--from-literal=CollectionRules__BigHeap__Actions__0__Type=CollectDump \
	--from-literal=CollectionRules__BigHeap__Actions__0__Settings__Type=Mini \
	--from-literal=CollectionRules__BigHeap__Actions__0__Settings__Egress=out \
	--from-literal=CollectionRules__BigHeap__Limits__ActionCount=1 > "$W/configmap.yaml"
mkdir -p "$W/configmap"
python3 -c 'import os, sys, yaml
for k, v in yaml.safe_load(open(sys.argv[1]))["data"].items():
    open(os.path.join(sys.argv[2], k), "w").write(v)' "$W/configmap.yaml" "$W/configmap"
chmod 0755 "$W/configmap"
chmod 0644 "$W/configmap"/*

"$D" inject k8s --sidecar container --no-auth --rules app-rules --image "$AGENT_IMG" -f "$W/deploy.yaml" \
	> "$W/injected.yaml" 2> "$W/inject.err"
WHY="$(cat "$W/inject.err"; grep -n 'rules' "$W/injected.yaml" | head -5)"
check inject bash -c "grep -q 'name: app-rules' '$W/injected.yaml' && grep -q -- '--workload-config' '$W/injected.yaml'"
# the agent's settings: with --no-auth it listens on loopback only; the test reaches it through the pod's
# published port, so it is told to listen on every address of the pod (a test-only argument)
python3 - "$W/injected.yaml" << 'PY'
import sys, yaml
d = yaml.safe_load(open(sys.argv[1]))
for c in d["spec"]["template"]["spec"]["containers"]:
    if c["name"] == "diagport-agent":
        a = c["args"]
        a[a.index("--urls") + 1] = "http://+:52323"
        a += ["--metrics-interval", "1"]  # counters from metricsStartDelay (10 s) after the attach: earlier can hang the app at startup (metrics.h)
yaml.safe_dump(d, open(sys.argv[1], "w"))
PY
e2e_playable "$W/injected.yaml" rulespod 1 2 > "$W/play.yaml"
play_on_ports 2 "$W/play.yaml" "$W/play.out"
rc=$?
AP=${PORTS[0]} HP=${PORTS[1]}
WHY="podman kube play: exit $rc: $(tail -3 "$W/play.out")"
check kube-play test "$rc" = 0
U=http://127.0.0.1:$AP
DUMPS=$W/volumes/rulespod/diagport-dumps
eventually 30 bash -c "ls '$DUMPS'/*.stacks.json > /dev/null 2>&1"
WHY="in the egress directory: $(ls -A "$DUMPS" 2>&1 | tr '\n' ' '); agent: $(podman logs rulespod-pod-0-diagport-agent 2>&1 | tail -3)"
check startup-rule-stacks bash -c "ls '$DUMPS'/*.stacks.json > /dev/null 2>&1"
for _ in $(seq 1 50); do curl -sf --max-time 5 -o "$W/rules.json" "$U/collectionrules" && grep -q Finished "$W/rules.json" && break; sleep 0.1; done
WHY="$(cat "$W/rules.json" 2>&1)"
check collectionrules-listed jq -e '.AtStart.state == "Finished" and .BigHeap.state == "Running"' "$W/rules.json"
# heap_verdict: which of the three it was, for a heap check that failed, in one sentence first: the app stalled
# (it does not answer), no counter readings reached the agent's rules (the counters session never delivered, or
# stopped: its metrics-readings / metrics-ended lines), the app did not allocate (readings at or under 60 MB), or
# the trigger's math (readings over 60 MB for longer than the 2 s window without a gap over 1.5 intervals, and
# the rule still Running). The readings are the agent's own: /metrics' GC heap size (the same session's readings
# the rules are handed), polled while the test waited ($W/heap.readings: now_ms value reading_ms).
heap_verdict() {
	local app
	app=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "http://127.0.0.1:$HP/" 2>&1)
	python3 - "$W/heap.readings" "$app" "$LEAK_MS" "$(curl -s --max-time 5 "$U/collectionrules/BigHeap")" \
		"$(podman logs rulespod-pod-0-diagport-agent 2>&1 | grep -E '"event":"(attached|metrics-readings|metrics-ended|detached)"' | head -6)" << 'PY'
import json, sys
path, app, leak_ms, rule, events = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
seen, last_poll = {}, 0
for line in open(path):
    f = line.split()
    if len(f) == 3:
        seen[int(f[2])] = float(f[1])  # one reading per reading time
        last_poll = max(last_poll, int(f[0]))
r = sorted(seen.items())
try:
    state = json.loads(rule).get("state")
except ValueError:
    state = "unknown (%s)" % rule[:200]
over = [(t, v) for t, v in r if v > 60e6]
gaps = [(b[0] - a[0]) / 1000 for a, b in zip(over, over[1:])]
if state in ("Finished", "ActionExecuting"):
    v = "the rule fired (now %s): its action, the dump, is what to look at (below)" % state
elif app != "200":
    v = "the app stalled: it does not answer / (HTTP %s)" % app
elif not r:
    v = "no counter readings reached the agent's rules (no GC heap reading in /metrics since the leak)"
elif last_poll - r[-1][0] > 5000:
    v = ("counter readings stopped reaching the agent's rules: the last at %.1f s after the leak, %.1f s before "
         "the last look (%d readings)" % ((r[-1][0] - leak_ms) / 1000, (last_poll - r[-1][0]) / 1000, len(r)))
elif not over:
    v = "the app did not allocate: %d GC heap readings, at most %.1f MB (the rule wants over 60)" % (
        len(r), max(x for _, x in r) / 1e6)
elif over[-1][0] - over[0][0] >= 2000 and max(gaps or [0]) <= 1.5:
    v = ("the trigger's math: %d readings over 60 MB across %.1f s (window 2 s), no gap over 1.5 s, rule %s"
         % (len(over), (over[-1][0] - over[0][0]) / 1000, state))
else:
    v = ("readings over 60 MB did not cover the 2 s window without a gap: %d of them across %.1f s, largest gap "
         "%.1f s (the readings stopped or came late), rule %s" % (
             len(over), (over[-1][0] - over[0][0]) / 1000, max(gaps or [0]), state))
print("VERDICT: " + v)
print("GC heap readings (ms after the leak: MB): " + " ".join(
    "%d:%.0f" % (t - leak_ms, x / 1e6) for t, x in r[-12:]))
print("agent's session lines: " + events.replace("\n", " | ")[:1200])
PY
}
# heap_why: heap_verdict, then what the rule had to go on: the app's answer to the leak, the agent's last GC heap
# readings (/metrics: value and the reading's time, against now), its rules, the processes it sees, its log and
# the app's
heap_why() {
	local now
	heap_verdict
	now=$(date +%s%3N)
	printf 'the app, asked to leak at %s ms: %s\n' "$LEAK_MS" "$LEAK"
	printf 'now %s ms; /metrics (GC heap):\n' "$now"
	curl -sS --max-time 5 "$U/metrics" 2>&1 |
		grep -E '^# diagport|^systemruntime_(gc_heap_size|dotnet_gc_last_collection_heap_size)|^curl' | head -8
	printf '/collectionrules: %s\n' "$(curl -sS --max-time 5 "$U/collectionrules" 2>&1 | head -c 1500)"
	printf '/processes: %s\n' "$(curl -sS --max-time 5 "$U/processes" 2>&1 | head -c 600)"
	printf 'in the egress directory: %s\n' "$(ls -A "$DUMPS" 2>&1 | tr '\n' ' ')"
	echo 'agent log (last 25 lines):'
	podman logs rulespod-pod-0-diagport-agent 2>&1 | tail -25 | cut -c1-400
	echo 'app log (last 5 lines):'
	podman logs rulespod-pod-0-app 2>&1 | tail -5 | cut -c1-400
}
# the app grows its heap past 60 MB and keeps it: one Mini dump, then the rule is Finished. The app starts
# beside the agent (nosuspend), and the Startup rule's stacks can be in place before it listens: it is
# asked to leak once it answers, and its answer (the MiB it now holds) is checked; a leak asked earlier
# was refused, unseen, and the rule waited for a heap that never grew.
wait_app "http://127.0.0.1:$HP"
LEAK_MS=$(date +%s%3N)
c=$(curl -sS --max-time 30 -o "$W/leak.out" -w '%{http_code}' "http://127.0.0.1:$HP/memory-leak?mb=100" 2> "$W/leak.err")
LEAK="HTTP $c: $(head -c 200 "$W/leak.out" 2>/dev/null)$(head -c 200 "$W/leak.err")"
WHY="the app, asked to leak: $LEAK"
check app-leaked test "$LEAK" = "HTTP 200: 100"
# Until the rule has finished (its one action list ended: no second dump can come after that), at most 90 s:
# counters begin metricsStartDelay (10 s) after the attach, the window is 2 s, the Mini dump a second or two.
# Meanwhile the agent's GC heap readings are kept for heap_verdict.
: > "$W/heap.readings"
for i in $(seq 1 900); do
	if [ $((i % 5)) = 1 ]; then
		curl -s --max-time 2 "$U/metrics" 2>/dev/null | sed -n "s/^systemruntime_gc_heap_size_bytes \([^ ]*\) \([0-9]*\)$/$(date +%s%3N) \1 \2/p" \
			>> "$W/heap.readings"
		curl -s --max-time 2 "$U/collectionrules/BigHeap" 2>/dev/null | jq -e '.state == "Finished"' > /dev/null 2>&1 && break
	fi
	sleep 0.1
done
WHY="$(heap_why)"
check heap-rule-one-dump test "$(ls "$DUMPS" | grep -c '^core_')" = 1
f=$(ls "$DUMPS"/core_* 2>/dev/null | head -1)
WHY="${f:-no core_* in the egress directory}: $(head -c 4 "$f" 2>/dev/null | od -c | head -1)"
check heap-rule-elf-core test "$(head -c 4 "$f" 2>/dev/null | tail -c 3)" = ELF
curl -sSf --max-time 5 -o "$W/bigheap.json" "$U/collectionrules/BigHeap" 2> "$W/bigheap.err"
WHY="$(cat "$W/bigheap.json" "$W/bigheap.err" 2>/dev/null)"
check heap-rule-finished jq -e '.state == "Finished" and .lifetimeOccurrences == 1' "$W/bigheap.json"
e2e_cleanup_check
