#!/usr/bin/env python3
"""perf_collapse.py - `perf script` text to folded stacks, as FlameGraph's
stackcollapse-perf.pl folds it: an independent reader of the text the perf
engine writes with format=perfscript, and the folder of Debian perf's own
`perf script` output in perf_profile.sh.

Usage: perf_collapse.py [--samples] [--no-pname] [FILE]   (stdin without FILE)

The rules are stackcollapse-perf.pl's with its default options (no --pid,
--tid, --inline, --context, --all, --addrs, --event-filter):
  - a line starting with '#' is a comment; a blank line ends a sample;
  - a header line "COMM [PID/]TID [CPU] TIME: [PERIOD] EVENT:" starts one;
    only samples of the first event type seen are counted; each weighs its
    PERIOD (1 when the header has none);
  - a frame line is "ADDRESS FUNC (MODULE)", leaf first; a trailing +0xOFF
    is stripped from FUNC; FUNC "[unknown]" becomes "[MODULE's basename]"
    (or "[unknown]" when the module is unknown too); tidy_generic: ';'
    becomes ':', everything from the first '(' on is dropped (unless the name
    looks like a Go method "pkg.(*T).M", or the '(' opens "(anonymous
    namespace)"), quotes are dropped;
  - the stack is the frames root first, under the process name (COMM with
    spaces as '_') as its root frame;
  - output: "frame;frame;... WEIGHT", sorted by stack.

Two switches of ours, not stackcollapse-perf.pl's, for comparing with the
agent's format=folded (a sample counted once, no process-name root):
  --samples   weigh every sample 1, not its period
  --no-pname  no process-name root frame

A line that is none of these is reported on stderr as the original warns
("Unrecognized line: ..."), and the exit status is then 1.
"""
import re
import sys

HEADER = re.compile(r'^(\S.+?)\s+(\d+)/*(\d+)*\s+')
PERIOD_EVENT = re.compile(r':\s*(\d+)*\s+(\S+):\s*$')
FRAME = re.compile(r'^\s*(\w+)\s*(.+) \((.*)\)')
GO_METHOD = re.compile(r'\.\(.*\)\.')
PAREN_TAIL = re.compile(r'\((?!anonymous namespace\)).*')


def tidy(func, mod):
    """One frame's name, as stackcollapse-perf.pl writes it (default options)."""
    if func == '[unknown]':
        func = '[' + (re.sub(r'.*/', '', mod) if mod != '[unknown]' else 'unknown') + ']'
    func = func.replace(';', ':')
    if not GO_METHOD.search(func):
        func = PAREN_TAIL.sub('', func, count=1)
    return func.replace('"', '').replace("'", '')


def collapse(lines, by_samples=False, pname_root=True):
    """(folded dict stack -> weight, unrecognised lines)."""
    folded, bad = {}, []
    stack, pname, period, event_filter = [], None, 1, ''
    for raw in lines:
        line = raw.rstrip('\n')
        if line.startswith('#'):
            continue
        if line == '':
            if not pname:
                continue
            if pname_root:
                stack.insert(0, pname)
            if stack:
                key = ';'.join(stack)
                folded[key] = folded.get(key, 0) + (1 if by_samples else period)
            stack, pname = [], None
            continue
        m = HEADER.match(line)
        if m:
            comm, p = m.group(1), ''
            pe = PERIOD_EVENT.search(line)
            if pe:
                p, event = pe.group(1) or '', pe.group(2)
                if event_filter == '':
                    event_filter = event
                elif event != event_filter:
                    continue
            period = int(p) if p else 1
            pname = comm.replace(' ', '_')
            continue
        m = FRAME.match(line)
        if m:
            if not pname:
                continue
            func = re.sub(r'\+0x[\da-f]+$', '', m.group(2))
            if func.startswith('('):
                continue
            # perf joins inlined functions with "->"; each becomes a frame
            stack[0:0] = [tidy(f, m.group(3)) for f in func.split('->')]
            continue
        bad.append(line)
    return folded, bad


def main(argv):
    by_samples = '--samples' in argv
    pname_root = '--no-pname' not in argv
    files = [a for a in argv if not a.startswith('--')]
    src = open(files[0], encoding='utf-8', errors='replace') if files else sys.stdin
    folded, bad = collapse(src, by_samples, pname_root)
    for k in sorted(folded):
        print(f'{k} {folded[k]}')
    for line in bad[:20]:
        print(f'Unrecognized line: {line}', file=sys.stderr)
    return 1 if bad else 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
