#!/usr/bin/env python3
"""scripts/test_census.py [BEFORE [AFTER]] - the tests of two commits counted side by side, read from
git (no checkout, nothing run), for "test count the same or higher, no assertion weakened".

Counts, per commit:
  unit       per tests/unit/test_*.c: cases (T_RUN calls) and check sites (T_CHECK, T_STREQ, T_FAIL);
             each case prints one result line (tests/unit/t.h)
  golden     the cases under tests/golden/GROUP/CASE/ and the result lines tests/run gives them
             (success: output, idempotent, uninject, preserve, + stderr when expected-stderr exists,
             + validate for k8s, ecs, cfn, compose; error: exit, no-output, + stderr)
  scripts    per tests/integration/*.sh and tests/e2e/*.sh (and their shared libraries): assertion
             sites, i.e. calls of pass, fail and check (tests/lib.sh) and of any shell function
             defined in the script or in a library it may source whose body makes one; plus, per
             helper program (tests/integration/*.py, *.c), the lines that print a PASS result
Then lists every file whose count fell from BEFORE to AFTER (a file renamed is followed: git's
rename detection), and, with --lines, the assertion lines removed and added between the two
commits, for a reading by eye (a count can stay while a check is weakened).
Exit status 0 when no count fell, 1 when one did, 2 on bad usage. Defaults: BEFORE 3acfdc6, AFTER HEAD.
"""
import re
import subprocess
import sys

GOLDEN_VALIDATED = {"k8s", "ecs", "cfn", "compose"}
SHELL_LIBS = ("tests/lib.sh", "tests/e2e/lib.sh")
UNIT_CHECK = re.compile(r"\bT_(CHECK|STREQ|FAIL)\s*\(")
UNIT_CASE = re.compile(r"\bT_RUN\s*\(")
SH_FUNC = re.compile(r"^\s*(?:function\s+)?([A-Za-z_][A-Za-z0-9_]*)\s*\(\)\s*\{?")
# a command word position: line start, or after ; && || | { ( then else do !
CMD_POS = r"(?:^|[;&|{(!]|\bthen\b|\belse\b|\bdo\b|\btime\b)\s*"
PRINT_PASS = re.compile(r"\b(print|printf|fprintf|puts|fputs|write)\s*\(.*\bPASS\b")


def git(*args):
    return subprocess.run(["git", *args], check=True, capture_output=True, text=True).stdout


def files(commit):
    return git("ls-tree", "-r", "--name-only", commit, "--", "tests").splitlines()


def show(commit, path):
    return git("show", f"{commit}:{path}")


def strip_comments(text):
    """Shell text without comment lines and trailing comments (rough: a # after a space)."""
    out = []
    for line in text.splitlines():
        s = line.lstrip()
        if s.startswith("#"):
            out.append("")
            continue
        out.append(re.sub(r"\s+#\s.*$", "", line))
    return out


def shell_functions(lines):
    """{name: body lines} of the functions defined in a shell file (body: up to the closing brace
    at the definition's indentation, or the line itself for a one-line definition)."""
    funcs = {}
    i = 0
    while i < len(lines):
        m = SH_FUNC.match(lines[i])
        if not m:
            i += 1
            continue
        name, indent = m.group(1), len(lines[i]) - len(lines[i].lstrip())
        if lines[i].rstrip().endswith("}") and lines[i].count("{") <= lines[i].count("}"):
            funcs[name] = [lines[i][m.end():]]
            i += 1
            continue
        body = []
        j = i + 1
        while j < len(lines):
            s = lines[j]
            if s.strip() == "}" and len(s) - len(s.lstrip()) == indent:
                break
            body.append(s)
            j += 1
        funcs[name] = body
        i = j + 1
    return funcs


def calls(lines, names):
    """Number of calls, at a command position, of any of names in lines."""
    if not names:
        return 0
    pat = re.compile(CMD_POS + r"(" + "|".join(map(re.escape, sorted(names))) + r")(?=\s|$)")
    n = 0
    for line in lines:
        if SH_FUNC.match(line):
            line = line[SH_FUNC.match(line).end():]  # a one-line definition's body still counts
        n += len(pat.findall(line))
    return n


def asserting(funcs, base):
    """The names among funcs whose bodies call a name in base, closed transitively."""
    names = set(base)
    while True:
        more = {f for f, body in funcs.items() if f not in names and calls(body, names)}
        if not more:
            return names
        names |= more


def census(commit):
    paths = files(commit)
    have = set(paths)
    unit, golden, scripts = {}, {}, {}
    for p in paths:
        if re.fullmatch(r"tests/unit/test_[^/]+\.c", p):
            text = show(commit, p)
            # comments out, string literals kept whole (a "*/" or "//" inside one is not a comment)
            text = re.sub(r'("(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\')|//[^\n]*|/\*.*?\*/',
                          lambda m: m.group(1) or "", text, flags=re.S)
            unit[p] = (len(UNIT_CASE.findall(text)), len(UNIT_CHECK.findall(text)))
    cases = {}
    for p in paths:
        m = re.fullmatch(r"tests/golden/([^/]+)/([^/]+)/([^/]+)", p)
        if m:
            cases.setdefault((m.group(1), m.group(2)), set()).add(m.group(3))
    for (group, case), names in cases.items():
        if "expected" in names:
            n = 4 + ("expected-stderr" in names) + (group in GOLDEN_VALIDATED)
        else:
            n = 2 + ("expected-stderr" in names)
        golden[f"tests/golden/{group}/{case}"] = n
    # the shell libraries' asserting functions, visible to every script
    lib_funcs = {}
    for lib in SHELL_LIBS:
        if lib in have:
            lib_funcs.update(shell_functions(strip_comments(show(commit, lib))))
    lib_assert = asserting(lib_funcs, {"pass", "fail", "check"})
    shared = [p for p in paths if re.fullmatch(r"tests/(integration|e2e)/[^/]+_lib\.sh", p)]
    shared_funcs = {}
    for p in shared:
        shared_funcs.update(shell_functions(strip_comments(show(commit, p))))
    for p in paths:
        if re.fullmatch(r"tests/(integration|e2e)/[^/]+\.sh", p) or p in SHELL_LIBS:
            lines = strip_comments(show(commit, p))
            own = shell_functions(lines)
            names = asserting({**lib_funcs, **shared_funcs, **own}, lib_assert)
            scripts[p] = calls(lines, names)
        elif re.fullmatch(r"tests/(integration|e2e)/[^/]+\.(py|c)", p):
            n = sum(1 for line in show(commit, p).splitlines() if PRINT_PASS.search(line))
            if n:
                scripts[p] = n
    return unit, golden, scripts


def renames(a, b):
    """{new path: old path} for the files under tests/ git sees renamed from a to b."""
    out = {}
    for line in git("diff", "-M", "--name-status", a, b, "--", "tests").splitlines():
        f = line.split("\t")
        if f[0].startswith("R"):
            out[f[2]] = f[1]
    return out


ASSERT_LINE = re.compile(r"\bT_(CHECK|STREQ|FAIL|RUN)\s*\(|" + CMD_POS + r"(pass|fail|check)\s|PASS ")


def changed_lines(a, b):
    """The assertion lines removed (-) and added (+) under tests/, by file."""
    diff = git("diff", "-M", "-U0", a, b, "--", "tests")
    out, cur = [], None
    for line in diff.splitlines():
        if line.startswith("+++ "):
            cur = line[6:] if line.startswith("+++ b/") else line[4:]
        elif line[:1] in "+-" and not line.startswith(("+++", "---")) and ASSERT_LINE.search(line[1:]):
            out.append(f"{cur}: {line[0]} {line[1:].strip()}")
    return out


def main(argv):
    args = [x for x in argv if not x.startswith("--")]
    if len(args) > 2 or any(x not in ("--lines",) for x in argv if x.startswith("--")):
        print(__doc__.split("\n\n")[0], file=sys.stderr)
        return 2
    a = git("rev-parse", "--short=7", (args[0] if args else "3acfdc6") + "^{commit}").strip()
    b = git("rev-parse", "--short=7", (args[1] if len(args) > 1 else "HEAD") + "^{commit}").strip()
    ca, cb = census(a), census(b)
    ren = renames(a, b)
    fell, rose = [], []

    def compare(kind, before, after, unit_of):
        label = "results" if kind == "golden" else "assertion sites"
        for path in sorted(set(after) | set(before)):
            old = ren.get(path, path)
            if path not in after:
                if any(v == path for v in ren.values()):
                    continue  # followed under its new name
                fell.append(f"{kind} {path}: gone ({unit_of(before[path])})")
                continue
            if old in before:
                x, y = before[old], after[path]
                for i, what in enumerate(("cases", "checks") if isinstance(x, tuple) else (label,)):
                    xv = x[i] if isinstance(x, tuple) else x
                    yv = y[i] if isinstance(y, tuple) else y
                    if yv < xv:
                        fell.append(f"{kind} {path}: {what} {xv} -> {yv}")
                    elif yv > xv:
                        rose.append(f"{kind} {path}: {what} {xv} -> {yv}")
            else:
                rose.append(f"{kind} {path}: new ({unit_of(after[path])})")

    total = lambda d, i=None: sum((v[i] if i is not None else v) for v in d.values())
    print(f"test census: before {a}, after {b} (read from git; nothing run)")
    print(f"{'':38} {'before':>8} {'after':>8}")
    rows = [
        ("unit programs", len(ca[0]), len(cb[0])),
        ("unit cases (T_RUN: one result each)", total(ca[0], 0), total(cb[0], 0)),
        ("unit check sites (T_CHECK/STREQ/FAIL)", total(ca[0], 1), total(cb[0], 1)),
        ("golden cases", len(ca[1]), len(cb[1])),
        ("golden results", total(ca[1]), total(cb[1])),
        ("integration/e2e files with assertions", len(ca[2]), len(cb[2])),
        ("integration/e2e assertion sites", total(ca[2]), total(cb[2])),
    ]
    for name, x, y in rows:
        print(f"{name:38} {x:8} {y:8}{'   FELL' if y < x else ''}")
    compare("unit", ca[0], cb[0], lambda v: f"{v[0]} cases, {v[1]} checks")
    compare("golden", ca[1], cb[1], lambda v: f"{v} results")
    compare("script", ca[2], cb[2], lambda v: f"{v} assertion sites")
    if ren:
        print("renamed: " + ", ".join(f"{o} -> {n}" for n, o in sorted(ren.items())))
    print("counts that rose or are new:" if rose else "counts that rose or are new: none")
    for r in rose:
        print("  " + r)
    print("counts that fell:" if fell else "counts that fell: none")
    for f in fell:
        print("  " + f)
    if "--lines" in argv:
        print("assertion lines removed (-) and added (+) under tests/:")
        for line in changed_lines(a, b):
            print("  " + line)
    return 1 if fell else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
