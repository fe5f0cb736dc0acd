#!/usr/bin/env python3
"""jsonlines.py FILE [MUST-CONTAIN...] - FILE is a log of JSON lines as diagport writes them (common/log.h).

Every line must be strict UTF-8 and one JSON object whose first three keys are
"time", "level" and "msg" (Go's log/slog JSONHandler names), with a level of
DEBUG, INFO, WARN or ERROR. Each MUST-CONTAIN must appear, once decoded, in
some line's values (so a hostile value was logged, and logged whole).
Prints "ok N" (the number of lines), or the first problem and exits 1.
"""
import json
import sys

path, wanted = sys.argv[1], sys.argv[2:]
values = []
with open(path, "rb") as f:
    raw = f.read()
lines = raw.split(b"\n")
if lines and lines[-1] == b"":
    lines.pop()
for i, line in enumerate(lines, 1):
    try:
        text = line.decode("utf-8", errors="strict")
        obj = json.loads(text, object_pairs_hook=lambda pairs: pairs)
    except (UnicodeDecodeError, ValueError) as e:
        print(f"line {i}: not a JSON line ({e}): {line[:200]!r}")
        sys.exit(1)
    if not isinstance(obj, list) or [k for k, _ in obj[:3]] != ["time", "level", "msg"]:
        print(f"line {i}: not an object starting time, level, msg: {text[:200]}")
        sys.exit(1)
    d = dict(obj)
    if d["level"] not in ("DEBUG", "INFO", "WARN", "ERROR"):
        print(f"line {i}: level {d['level']!r}")
        sys.exit(1)
    values += [v for _, v in obj if isinstance(v, str)]
for w in wanted:
    if not any(w in v for v in values):
        print(f"no value holds {w!r}")
        sys.exit(1)
print(f"ok {len(lines)}")
