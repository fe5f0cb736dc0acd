#!/usr/bin/python3
"""trace_judge.py - diagport's CPU profiles and stacks beside TraceEvent's, in one spelling (trace_judge.sh).

  trace_judge.py cpu FILE      the CPU time in a profile, as JSON on stdout:
    {"threads": {TID: {"cpuMs", "top"}}, "leaves": {frame: ms}, "totalMs", "frames": [every frame]}
    (TIDs in decimal; "top" the thread's leaf with the most time). FILE is one of
    - diagport's speedscope (/trace?format=speedscope): "sampled" profiles named "Thread (0xHEX)", frames
      "Module.dll!Namespace.Type.Method"; every sample is CPU time (the agent keeps only the samples of
      threads running managed code), weights in milliseconds;
    - TraceEvent's speedscope (dotnet-trace collect --format speedscope, dotnet-trace convert): "evented"
      profiles named "Thread (DECIMAL)", frames "Module!Namespace.Type.Method(argument types)" under
      "Process64 ...", "Threads" and the like, with a pseudo-frame on top: CPU_TIME (the thread was
      running managed code) or UNMANAGED_CODE_TIME (it was not); only the time under CPU_TIME counts;
    - TraceEvent's Chromium trace (dotnet-trace convert --format chromium): "B"/"E" events per tid, the
      method in "name" and its module in stackFrames[sf].category, times in microseconds; every "E" must
      close the innermost open "B" of its tid, and none may stay open (else exit 1).
  trace_judge.py stacks TOOL AGENT
    dotnet-stack report's text (TOOL) beside the agent's /stacks text (AGENT): prints
    {"tool": [TIDs], "agent": [TIDs], "differ": {TID: {"tool": [frames], "agent": [frames]}}}.
    dotnet-stack's "CPU_TIME" and "[Native Frames]" above a stack are the sample's kind (running managed
    code, or not), not frames, and are dropped; an unnamed frame ("?!?") and a run of them in the agent's
    ("[NativeFrames]") are both "[NativeFrames]". An idle thread-pool worker's wait, spinning
    (LowLevelSpinWaiter.Wait under LowLevelLifoSemaphore.Wait) or blocked (LowLevelLifoSemaphore.WaitNative
    under .WaitForSignal), is one state the two tools, a moment apart, may each see either way: its leaf
    frames of System.Threading.LowLevel* are one "[thread pool wait]".
One spelling for frames: "Module!Namespace.Type.Method" (no ".dll", no argument list). Exit 1 on input
it cannot read.
"""
import json
import re
import sys

PSEUDO_CPU = "CPU_TIME"
PSEUDO_IDLE = "UNMANAGED_CODE_TIME"


def norm(name):
    """One spelling of a method frame: drop ".dll" after the module and the argument list."""
    if "!" not in name:
        return name
    mod, meth = name.split("!", 1)
    if mod.endswith(".dll"):
        mod = mod[:-4]
    if meth.endswith(")") and "(" in meth:
        meth = meth[: meth.index("(")]
    return mod + "!" + meth


def thread_id(profile_name):
    m = re.search(r"Thread \((0x[0-9A-Fa-f]+|[0-9]+)\)", profile_name)
    if not m:
        return None
    return int(m.group(1), 16) if m.group(1).startswith("0x") else int(m.group(1))


def add(d, k, v):
    d[k] = d.get(k, 0.0) + v


def sampled(prof, names, out_leaves):
    """diagport: (cpu ms, {leaf: ms}) of one sampled profile."""
    leaves = {}
    for stack, w in zip(prof["samples"], prof["weights"]):
        if stack:
            add(leaves, norm(names[stack[-1]]), w)
    for k, v in leaves.items():
        add(out_leaves, k, v)
    return sum(prof["weights"]), leaves


def evented(prof, names, out_leaves):
    """TraceEvent: (cpu ms, {leaf: ms}) of one evented profile, the time under CPU_TIME only."""
    leaves, stack, last = {}, [], None
    for ev in prof["events"]:
        at = ev["at"]
        if last is not None and len(stack) >= 2 and names[stack[-1]] == PSEUDO_CPU:
            add(leaves, norm(names[stack[-2]]), at - last)
        last = at
        if ev["type"] == "O":
            stack.append(ev["frame"])
        elif stack and stack[-1] == ev["frame"]:
            stack.pop()
        else:  # closed out of order: close down to it
            while stack and stack.pop() != ev["frame"]:
                pass
    for k, v in leaves.items():
        add(out_leaves, k, v)
    return sum(leaves.values()), leaves


def chromium(doc):
    """TraceEvent's Chromium trace: {tid: (cpu ms, {leaf: ms})}, the time under CPU_TIME only."""
    frames = doc.get("stackFrames", {})
    stacks, last, out = {}, {}, {}
    for ev in sorted((e for e in doc["traceEvents"] if e.get("ph") in ("B", "E")), key=lambda e: e["ts"]):
        tid, at = ev["tid"], ev["ts"] / 1000.0
        st = stacks.setdefault(tid, [])
        leaves = out.setdefault(tid, {})
        if tid in last and len(st) >= 2 and st[-1] == PSEUDO_CPU:
            add(leaves, st[-2], at - last[tid])
        last[tid] = at
        name = ev["name"]
        mod = frames.get(str(ev.get("sf")), {}).get("category", "")
        full = norm(mod + "!" + name) if mod else name
        if ev["ph"] == "B":
            st.append(full)
        elif st and st[-1] == full:
            st.pop()
        else:
            raise ValueError(f"tid {tid}: E {full!r} at {ev['ts']} closes {st[-1] if st else 'nothing'}")
    open_ = {t: s for t, s in stacks.items() if s}
    if open_:
        raise ValueError(f"left open: {open_}")
    return {t: (sum(l.values()), l) for t, l in out.items()}, sorted({f for s in out.values() for f in s})


def cpu(path):
    doc = json.load(open(path))
    threads, leaves = {}, {}
    if "traceEvents" in doc:
        per, _ = chromium(doc)
        for tid, (ms, mine) in per.items():
            for k, v in mine.items():
                add(leaves, k, v)
            if ms > 0:
                threads[str(tid)] = {"cpuMs": round(ms, 3), "top": max(mine.items(), key=lambda kv: kv[1])[0]}
        names = [norm((f.get("category", "") + "!" if f.get("category") else "") + f["name"])
                 for f in doc.get("stackFrames", {}).values()]
        dump(threads, leaves, names)
        return
    names = [f["name"] for f in doc["shared"]["frames"]]
    threads, leaves = {}, {}
    for prof in doc["profiles"]:
        tid = thread_id(prof["name"])
        if tid is None:
            continue
        if prof["type"] == "sampled":
            cpu, mine = sampled(prof, names, leaves)
        else:
            cpu, mine = evented(prof, names, leaves)
        if cpu <= 0:
            continue
        top = max(mine.items(), key=lambda kv: kv[1])[0] if mine else ""
        threads[str(tid)] = {"cpuMs": round(cpu, 3), "top": top}
    dump(threads, leaves, names)


def dump(threads, leaves, names):
    json.dump({"threads": threads, "leaves": {k: round(v, 3) for k, v in leaves.items()},
               "totalMs": round(sum(leaves.values()), 3),
               "frames": sorted({norm(n) for n in names if n not in (PSEUDO_CPU, PSEUDO_IDLE)})},
              sys.stdout, indent=1, sort_keys=True)
    print()


def stacks_text(path):
    """{tid: [frames, leaf first]} of dotnet-stack's or the agent's text."""
    threads, cur = {}, None
    for line in open(path):
        line = line.rstrip("\n")
        m = re.match(r"Thread:? \((0x[0-9A-Fa-f]+)\):?$", line)
        if m:
            cur = int(m.group(1), 16)
            threads[cur] = []
            continue
        if not line.startswith("  ") or cur is None:
            continue
        f = line.strip()
        if f in (PSEUDO_CPU, "[Native Frames]") and not threads[cur]:
            continue
        threads[cur].append("[NativeFrames]" if f == "?!?" else norm(f))
    for t, frames in threads.items():
        k = 0
        while k < len(frames) and "System.Threading.LowLevel" in frames[k]:
            k += 1
        if k:
            threads[t] = ["[thread pool wait]"] + frames[k:]
    return threads


def stacks(tool_path, agent_path):
    tool, agent = stacks_text(tool_path), stacks_text(agent_path)
    differ = {str(t): {"tool": tool.get(t), "agent": agent.get(t)}
              for t in sorted(set(tool) | set(agent)) if tool.get(t) != agent.get(t)}
    json.dump({"tool": sorted(tool), "agent": sorted(agent), "differ": differ}, sys.stdout, indent=1)
    print()


if __name__ == "__main__":
    try:
        if len(sys.argv) == 3 and sys.argv[1] == "cpu":
            cpu(sys.argv[2])
        elif len(sys.argv) == 4 and sys.argv[1] == "stacks":
            stacks(sys.argv[2], sys.argv[3])
        else:
            print("usage: trace_judge.py cpu FILE | stacks TOOL_TEXT AGENT_TEXT", file=sys.stderr)
            sys.exit(2)
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        print(f"speedscope_cpu.py: {sys.argv[1:]}: {e}", file=sys.stderr)
        sys.exit(1)
