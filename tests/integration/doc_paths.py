#!/usr/bin/env python3
"""doc_paths.py - every path of this repository that a document names exists.

Reads README.md, every docs/**/*.md and every README.md below the top, finds the words
that start with a top-level folder of the repository (`launcher/capture/dump.c`,
`manifests/agent-certs`) and prints one line per document: "PASS docs/NAME.md"
or "FAIL docs/NAME.md: PATH (line N), ...". A word names a path that exists
when it is a file or folder, relative to the top or to the document's own
folder, or the stem of one (`cloud/webc` for webc.c, webc.h ...;
`X.h/.c` for both), or under one of the top folders
(`examples/fargate-api` in cdk/). What the build makes (build/, cdk/lambda/,
*.o) is left out: it is named, not kept.
"""
import glob, os, re, sys

root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.chdir(root)
tops = sorted(d for d in os.listdir(".") if os.path.isdir(d) and not d.startswith(".") and d not in ("build",))
made = ("cdk/lambda", "cdk/lib")  # written by make (make lambda, make cdk)
docs = sorted({"README.md", *glob.glob("docs/**/*.md", recursive=True), *glob.glob("*/**/README.md", recursive=True)} -
              {p for p in glob.glob("*/**/README.md", recursive=True) if "node_modules" in p})
word = re.compile(r"(?<![\w/.-])((?:%s)/[A-Za-z0-9_.\-/]*[A-Za-z0-9_])" % "|".join(map(re.escape, tops)))


def exists(p, here):
    if p.startswith(made) or p.endswith(".o") or p == "http/https":
        return True
    if p.endswith(".h/.c"):
        return exists(p[:-4] + "h", here) and exists(p[:-4] + "c", here)
    for base in ("", here, *tops):
        q = os.path.join(base, p)
        if os.path.exists(q) or glob.glob(glob.escape(q) + "*"):
            return True
    return False


for d in docs:
    here = os.path.dirname(d)
    bad = []
    for i, line in enumerate(open(d, encoding="utf-8"), 1):
        bad += [f"{m.group(1)} (line {i})" for m in word.finditer(line) if not exists(m.group(1), here)]
    print(f"FAIL doc-paths/{d}: " + ", ".join(bad[:20]) if bad else f"PASS doc-paths/{d}")
