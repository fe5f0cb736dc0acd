"""attack_lib.py - what the attack tools share (slow_clients.py for the agent, webhook_slow.py for the
webhook): their command lines (positional arguments and --options with a value) and the target's VmRSS."""
import sys


def parse(defaults):
    """(positional arguments, options): options are the keys of defaults, each followed by its value."""
    args, opts, pos, i = sys.argv[1:], dict(defaults), [], 0
    while i < len(args):
        if args[i] in opts:
            opts[args[i]] = args[i + 1]
            i += 2
        else:
            pos.append(args[i])
            i += 1
    return pos, opts


def rss(pid):
    """VmRSS of process pid in KiB, 0 when there is none (or pid is None)."""
    try:
        with open("/proc/%s/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except (OSError, TypeError):
        pass
    return 0


def read_all(s):
    """Everything the server sends on socket s until it closes."""
    out = b""
    while True:
        b = s.recv(65536)
        if not b:
            return out
        out += b


def status_of(data):
    """The status code of an HTTP/1.x answer, as text, or "none"."""
    return data.split(b" ", 2)[1].decode() if data.startswith(b"HTTP/1.") else "none"
