#!/usr/bin/env python3
"""tree_check.py BUILD - the tree shows the architecture (docs/ARCHITECTURE.md).

Reads the symbols of every object file built from a current source (nm) and
prints one line per rule, "PASS name" or "FAIL name: why":
  no-cycles          no two source files call each other, directly or round a loop
                     (a file that needs another is below it, never beside it)
  common-is-shared   every common/*.c and cloud/*.c is called directly from two or more top
                     folders, or is a piece of its own library that a shared file of it calls
                     (code with one user lives with it)
  no-private-headers a component includes only its own headers, common/'s, the
                     libraries' (http/, eventpipe/) and the injector's public inj.h; the agent
                     (launcher/) also egress/'s, the store clients its egress process calls, and
                     egress/ nothing of launcher/; cloud/ (the cloud clients) serves egress/ and
                     fleet/ alone, and common/ includes nothing of it
  agent-layers       launcher/'s folders include only folders below them: runtime/, then trace/, then
                     metrics/, gcdump/, profile/ and exceptions/, then capture/, then rules/ and crashes/
                     (the top files use all)
"""
import collections, glob, os, re, subprocess, sys

build = sys.argv[1]
# the tree checked: the repository, or (second argument) a small tree the test makes to see each rule bite
root = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(root)
COMPONENTS = ("injector", "webhook", "launcher", "fleet", "egress")
LIBS = ("common", "cloud", "http", "eventpipe")
sources = [s for d in COMPONENTS + LIBS for s in glob.glob(d + "/**/*.c", recursive=True)]

defs, uses = {}, {}
for src in sources:
    obj = os.path.join(build, src[:-2] + ".o")
    if not os.path.exists(obj):
        print(f"FAIL no-cycles: {obj} was not built")
        sys.exit(0)
    out = subprocess.run(["nm", obj], capture_output=True, text=True, check=True).stdout
    name = src[:-2]
    uses[name] = set()
    for line in out.splitlines():
        f = line.split()
        if len(f) == 3 and f[1] in "TDBR":
            defs[f[2]] = name
        elif len(f) == 2 and f[0] == "U":
            uses[name].add(f[1])
graph = {n: {defs[s] for s in u if s in defs and defs[s] != n} for n, u in uses.items()}

# strongly connected components (Tarjan, iterative)
index, low, stack, on, cycles, counter = {}, {}, [], set(), [], [0]
for start in graph:
    if start in index:
        continue
    work = [(start, iter(sorted(graph[start])))]
    index[start] = low[start] = counter[0]; counter[0] += 1; stack.append(start); on.add(start)
    while work:
        v, it = work[-1]
        w = next(it, None)
        if w is not None:
            if w not in index:
                index[w] = low[w] = counter[0]; counter[0] += 1; stack.append(w); on.add(w)
                work.append((w, iter(sorted(graph[w]))))
            elif w in on:
                low[v] = min(low[v], index[w])
            continue
        work.pop()
        if work:
            low[work[-1][0]] = min(low[work[-1][0]], low[v])
        if low[v] == index[v]:
            comp = []
            while True:
                x = stack.pop(); on.discard(x); comp.append(x)
                if x == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))
if cycles:
    print("FAIL no-cycles: " + "; ".join(" <-> ".join(c) for c in cycles))
else:
    print(f"PASS no-cycles ({len(graph)} files)")

# who uses each common/ and cloud/ file, directly: the top folders of the files that call it. A file used
# from two or more folders is shared; one used only inside its own folder is a piece of that library (the
# document tree's value ids, the egress client's TLS), shared when a file using it is. A user inside the
# folder counts as that folder only when it is itself shared, so a library file no one outside needs fails.
users = collections.defaultdict(set)
for n, outs in graph.items():
    for y in outs:
        users[y].add(n)
libfiles = sorted(n for n in graph if n.startswith(("common/", "cloud/")))
shared, changed = set(), True
while changed:
    changed = False
    for n in libfiles:
        if n in shared:
            continue
        own = n.split("/")[0]
        outside = {u.split("/")[0] for u in users[n] if u.split("/")[0] != own}
        inside = [u for u in users[n] if u.split("/")[0] == own]
        if len(outside) + (1 if any(u in shared for u in inside) else 0) >= 2 or \
                (not outside and inside and any(u in shared for u in inside)):
            shared.add(n); changed = True
lonely = [f"{n}.c ({', '.join(sorted(users[n])) or 'nobody'})" for n in libfiles if n not in shared]
if lonely:
    print("FAIL common-is-shared: used directly by fewer than two folders: " + ", ".join(lonely))
else:
    print(f"PASS common-is-shared ({len(libfiles)} files, users counted directly)")

def allowed(d, inc):
    other = inc.split("/")[0] if "/" in inc else d
    if other == d or other == "common":
        return True
    if other == "cloud":  # the cloud clients (HTTP/1.1 with TLS, AWS credentials and signatures): egress/ and fleet/
        return d in ("egress", "fleet")
    if other in ("http", "eventpipe"):
        return d in COMPONENTS + ("http", "eventpipe")  # common/ stays below the libraries
    if d == "launcher" and other == "egress":
        return True
    return d in COMPONENTS and inc == "injector/inj.h"

bad = []
for src in sorted(sources + glob.glob("*/**/*.h", recursive=True)):
    d = src.split("/")[0]
    if d not in COMPONENTS + LIBS:
        continue
    bad += [f"{src} includes {m}" for m in re.findall(r'#include "([^"]+)"', open(src).read()) if not allowed(d, m)]
if bad:
    print("FAIL no-private-headers: " + "; ".join(bad))
else:
    print("PASS no-private-headers")

# the agent's folders in layers: a folder includes its own headers and those of the layers below it only
LAYER = {"runtime": 0, "trace": 1, "metrics": 2, "gcdump": 2, "profile": 2, "exceptions": 2, "capture": 3,
         "rules": 4, "crashes": 4}
up = []
for src in sorted(glob.glob("launcher/*/*.[ch]")):
    mine = src.split("/")[1]
    for inc in re.findall(r'#include "launcher/([a-z_]+)/', open(src).read()):
        if inc != mine and (inc not in LAYER or mine not in LAYER or LAYER[inc] >= LAYER[mine]):
            up.append(f"{src} includes launcher/{inc}/")
if up:
    print("FAIL agent-layers: " + "; ".join(sorted(set(up))))
else:
    print("PASS agent-layers")
