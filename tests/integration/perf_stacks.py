#!/usr/bin/env python3
"""perf_stacks.py - questions perf_profile.sh asks of folded stacks ("a;b;c COUNT",
root first): the agent's format=folded, or perf_collapse.py's folding of
`perf script` text (Debian perf's, or the agent's format=perfscript).

  check FILE                       the file is folded stacks: every line "FRAMES COUNT", COUNT a positive
                                   integer, no empty frame; prints "N samples in M stacks"; 1 when not
  leaf FILE REGEX                  the share (%) of samples whose leaf frame matches REGEX
  topleaf FILE                     the leaf frame of most samples: "SHARE NAME" (SHARE in %)
  under FILE RE1 RE2 [RE3...]      the share (%) of samples with a frame matching RE1 that has a frame
                                   matching RE2 nearer the root (the caller side), and so on
  has FILE REGEX                   the share (%) of samples with any frame matching REGEX
  compare A DIALECT_A B DIALECT_B [--top N] [--tol POINTS] [--total-tol PERCENT]
                                   the top N leaf functions of A and of B by share, names normalised
                                   (DIALECT: "ours" for the agent's folded names, "perf" for
                                   stackcollapse-perf's); both tables printed; 0 when the top N are the
                                   same functions and each share is within POINTS (default 5) of the
                                   other's, and (with --total-tol) the sample totals within PERCENT

A share check ("leaf", "under", "has") prints its number; with --min X it
exits 1 when the number is below X.

Names are normalised to what both namers can agree on (the mapping the
side-by-side comparison relies on):

  the agent (ours)                          perf (stackcollapse-perf)                     normalised
  console.dll!Ns.Type.Method  (rundown)     void [console] Ns.Type::Method  (perf map)   Ns.Type.Method
  [jit]!void [console] Ns.Type::Method()[T] (same, the perf map's text)                   Ns.Type.Method
  [jit]!stub<3> Name (a stub in the map)    stub<3> Name                                  stub<3> Name
  libdpnative.so!dp_native_spin             dp_native_spin                                dp_native_spin
  [kernel]!do_syscall_64                    do_syscall_64                                 do_syscall_64
  libcoreclr.so![stripped]  (a run of them) [libcoreclr.so]  (one per frame)             [libcoreclr.so]
  [jit]![no perf map entry]                 [perf-PID.map], [memfd:doublemapper           [jit]
                                            (deleted)]

The perf map's text keeps the return type and module ("void [console]"),
its arguments and tier ("(int64)[OptimizedTier1]"; stackcollapse-perf
drops from the first '('), and "::" before the method; the rundown's name is
"Type.Method". A ReadyToRun method (System.Private.CoreLib.dll) perf cannot
name ("[System.Private.CoreLib.dll]") and the agent names from the rundown:
these two stay different, and are never among the leaves compared here.
"""
import re
import sys

PERFMAP_METHOD = re.compile(r'\[[^\]]+\] (\S+)::([^\s:]+)$')


def load(path):
    """[(frames root first, count)], [bad lines]."""
    stacks, bad = [], []
    with open(path, encoding='utf-8', errors='replace') as f:
        for n, line in enumerate(f, 1):
            line = line.rstrip('\n')
            stack, _, count = line.rpartition(' ')
            frames = stack.split(';') if stack else []
            if not frames or any(fr == '' for fr in frames) or not count.isdigit() or int(count) == 0:
                bad.append(f'line {n}: {line[:200]!r}')
                continue
            stacks.append((frames, int(count)))
    return stacks, bad


def perfmap_name(text):
    """A perf map entry's text (or stackcollapse-perf's tidy form of it) as Type.Method."""
    text = re.sub(r'\((?!anonymous namespace\)).*', '', text, count=1)
    m = PERFMAP_METHOD.search(text)
    return f'{m.group(1)}.{m.group(2)}' if m else text.strip()


def norm(frame, dialect):
    if dialect == 'raw':
        return frame
    if dialect == 'ours':
        file, bang, sym = frame.partition('!')
        if not bang:
            return frame
        if sym.startswith('[') and sym.endswith(']'):  # unnamed: [stripped], [unreadable], [no perf map entry]
            return '[jit]' if file == '[jit]' else f'[{file}]'
        if file == '[jit]':
            return perfmap_name(sym)
        return sym
    if frame.startswith('[memfd:') or re.fullmatch(r'\[perf-\d+\.map\]', frame):
        return '[jit]'
    if frame.startswith('[') and frame.endswith(']'):
        return frame
    return perfmap_name(frame)


def total(stacks):
    return sum(c for _, c in stacks)


def share(stacks, pred):
    t = total(stacks)
    return 100.0 * sum(c for fr, c in stacks if pred(fr)) / t if t else 0.0


def leaves(stacks, dialect):
    """{normalised leaf: share %}"""
    t, out = total(stacks), {}
    for fr, c in stacks:
        k = norm(fr[-1], dialect)
        out[k] = out.get(k, 0) + c
    return {k: 100.0 * v / t for k, v in out.items()} if t else {}


def table(title, shares, n):
    rows = sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return [title] + [f'  {v:5.1f}%  {k}' for k, v in rows]


def top(shares, n):
    return [k for k, _ in sorted(shares.items(), key=lambda kv: (-kv[1], kv[0]))[:n]]


def opt(args, name, default):
    if name in args:
        i = args.index(name)
        v = args[i + 1]
        del args[i:i + 2]
        return float(v)
    return default


def main(argv):
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    cmd, args = argv[0], argv[1:]
    minimum = opt(args, '--min', None)
    if cmd == 'compare':
        n = int(opt(args, '--top', 5))
        tol = opt(args, '--tol', 5.0)
        total_tol = opt(args, '--total-tol', None)
        (a, da, b, db) = args
        sa, bad_a = load(a)
        sb, bad_b = load(b)
        la, lb = leaves(sa, da), leaves(sb, db)
        print('\n'.join(table(f'{a} ({total(sa)} samples), top {n} leaves:', la, n)))
        print('\n'.join(table(f'{b} ({total(sb)} samples), top {n} leaves:', lb, n)))
        problems = bad_a[:3] + bad_b[:3]
        ta, tb = top(la, n), top(lb, n)
        if set(ta) != set(tb):
            problems.append(f'top {n} differ: only in the first {sorted(set(ta) - set(tb))}, '
                            f'only in the second {sorted(set(tb) - set(ta))}')
        for k in ta:
            d = abs(la.get(k, 0.0) - lb.get(k, 0.0))
            if d > tol:
                problems.append(f'{k}: {la.get(k, 0.0):.1f}% against {lb.get(k, 0.0):.1f}% ({d:.1f} points apart)')
        if total_tol is not None and max(total(sa), total(sb)) > 0:
            d = 100.0 * abs(total(sa) - total(sb)) / max(total(sa), total(sb))
            if d > total_tol:
                problems.append(f'totals {total(sa)} and {total(sb)} are {d:.1f}% apart')
        print('same' if not problems else 'differ: ' + '; '.join(problems))
        return 0 if not problems else 1
    stacks, bad = load(args[0])
    if cmd == 'check':
        print(f'{total(stacks)} samples in {len(stacks)} stacks' + (f'; not folded: {bad[:3]}' if bad else ''))
        return 0 if stacks and not bad else 1
    if cmd == 'leaf':
        rx = re.compile(args[1])
        v = share(stacks, lambda fr: rx.search(fr[-1]) is not None)
        print(f'{v:.1f}')
    elif cmd == 'topleaf':
        lt = sorted(leaves(stacks, 'raw').items(), key=lambda kv: (-kv[1], kv[0]))[:1]
        print(f'{lt[0][1]:.1f} {lt[0][0]}' if lt else '0 none')
        v = 0.0
    elif cmd == 'under':
        rxs = [re.compile(r) for r in args[1:]]

        def nested(fr):  # the patterns in turn, from the leaf towards the root
            it = iter(reversed(fr))
            return all(any(rx.search(f) for f in it) for rx in rxs)
        v = share(stacks, nested)
        print(f'{v:.1f}')
    elif cmd == 'has':
        rx = re.compile(args[1])
        v = share(stacks, lambda fr: any(rx.search(f) for f in fr))
        print(f'{v:.1f}')
    else:
        print(f'unknown command {cmd}', file=sys.stderr)
        return 2
    if bad:
        print(f'not folded: {bad[:3]}', file=sys.stderr)
        return 1
    return 0 if minimum is None or v >= minimum else 1


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
