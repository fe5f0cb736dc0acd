#!/usr/bin/python3
"""webhook_one_address.py PORT CA REVIEW --pid PID [--seconds S] [--slow N] [--fast N] [--small N] [--idle N]
                        [--flood N] [--keepalive N]

Attackers and ordinary reviews from ONE client address (127.0.0.1), as behind a sidecar proxy,
a node's SNAT or konnectivity, where the API server and everyone else reach the webhook from the
same address. For SECONDS (12), over TLS, to the webhook on 127.0.0.1:PORT:
  --slow N   (120) connections each declaring an 8 MiB body (the cap), sending 1 MiB at once and
             then 16 KiB a second (above the webhook's minimum rate for the whole run)
  --fast N   (4) connections sending 8 MiB bodies as fast as they go, one after another
  --small N  (100) connections declaring an ordinary-sized body (200,000 bytes), sending 150,000
             of it at once and then nothing: together more than the whole body budget
  --idle N   (100) connections that finish the TLS handshake, send half a request line and wait:
             with the others, more connections than the webhook has slots
  --flood N  (0) plain TCP connections that send nothing, each opened again at once when the webhook
             closes it: all at the start, a burst, and then as fast as the webhook sheds them
  --keepalive N  (0) TLS connections asking GET /healthz every 50 ms, kept alive: well-behaved
             clients that hold every slot
each starting again 0.2 s after the webhook ends it (a flood connection at once). After 2 s, while they hold, an ordinary review
(file REVIEW) is posted every 0.1 s on a new connection (`Connection: close`) and timed from the
request's first byte to the answer's last (the TLS handshake is timed apart); the webhook's VmRSS
(/proc/PID/status) is sampled every 20 ms throughout. Prints one JSON object:
  {"reviews": K, "ok": K_ok, "failed": [first few], "review_ms": {"p50","p99","max"},
   "handshake_ms": {"p50","p99","max"}, "rss_peak_kib": R, "attackers": {kind: {"requests", "answers", "cut"}}}
A review is ok when it is answered 200 with allowed true and a patch. Used by
tests/integration/webhook_one_address.sh (asserts) and bench/webhook_attack.sh (figures).
"""
import json
import multiprocessing
import os
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack_lib  # noqa: E402

pos, opts = attack_lib.parse({"--pid": None, "--seconds": "12", "--slow": "120", "--fast": "4", "--small": "100",
                              "--idle": "100", "--flood": "0", "--keepalive": "0"})
port, ca, review = int(pos[0]), pos[1], pos[2]
seconds = float(opts["--seconds"])
ADDR = "127.0.0.1"  # the attackers' address and the reviews': one and the same
BIG = 8 << 20  # the body cap: the most one request may declare
ctx = ssl.create_default_context(cafile=ca)
start = time.monotonic()
deadline = start + seconds


def connect(timeout):
    raw = socket.create_connection((ADDR, port), timeout=timeout, source_address=(ADDR, 0))
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ctx.wrap_socket(raw, server_hostname=ADDR)


def head(length):
    return b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n" % length


def answered(s, wait):
    """Whatever the server sent within wait seconds; None when it closed without a byte."""
    s.settimeout(wait)
    try:
        b = s.recv(65536)
        return b if b else None
    except (socket.timeout, ssl.SSLWantReadError):
        return b""


def hold(s, kind):
    """Send kind's request on s and keep it held until the server answers or closes, or the run ends."""
    if kind == "slow":
        s.sendall(head(BIG) + b" " * (1 << 20))
        sent, t0 = 1 << 20, time.monotonic()
        while time.monotonic() < deadline:
            got = answered(s, 0.1)
            if got != b"":
                return got
            due = (1 << 20) + int((time.monotonic() - t0) * 16384)
            if due > sent:
                s.sendall(b" " * (due - sent))
                sent = due
    elif kind == "fast":
        s.sendall(head(BIG))
        block = b" " * 65536
        s.settimeout(10)
        for _ in range(BIG // 65536):
            s.sendall(block)
        s.sendall(b" " * (BIG % 65536))
        return attack_lib.read_all(s)
    elif kind == "small":
        s.sendall(head(200000) + b" " * 150000)
    elif kind == "keepalive":
        while time.monotonic() < deadline:
            s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            got = answered(s, 2)
            if not got:
                return got
            time.sleep(0.05)
        return b""
    elif kind == "idle":
        s.sendall(b"POST /mut")
    while time.monotonic() < deadline:
        got = answered(s, 0.2)
        if got != b"":
            return got
    return b""


def attacker(kind, tally, lock):
    while time.monotonic() < deadline:
        try:
            if kind == "flood":
                s = socket.create_connection((ADDR, port), timeout=5, source_address=(ADDR, 0))
            else:
                s = connect(5)
        except OSError:
            time.sleep(0.2)
            continue
        try:
            got = hold(s, kind)
        except OSError:
            got = None
        with lock:
            t = tally[kind]
            t["requests"] += 1
            if got:
                st = attack_lib.status_of(got)
                t["answers"][st] = t["answers"].get(st, 0) + 1
            elif got is None and time.monotonic() < deadline:
                t["cut"] += 1
        try:
            s.close()
        except OSError:
            pass
        if kind != "flood":
            time.sleep(0.2)


def attackers(q):
    """Every attacker, in a process of its own, so the reviews below never wait for its GIL."""
    lock = threading.Lock()
    tally = {k: {"requests": 0, "answers": {}, "cut": 0} for k in ("slow", "fast", "small", "idle", "flood", "keepalive")}
    threads = [threading.Thread(target=attacker, args=(k, tally, lock), daemon=True)
               for k in tally for _ in range(int(opts["--" + k]))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic() + 15))
    with lock:
        q.put(tally)


rss_peak = [0]


def sampler():
    while time.monotonic() < deadline + 0.5:
        rss_peak[0] = max(rss_peak[0], attack_lib.rss(opts["--pid"]))
        time.sleep(0.02)


def pct(v):
    v = sorted(v)
    return {"p50": round(v[len(v) // 2], 2), "p99": round(v[min(len(v) - 1, int(len(v) * 0.99))], 2),
            "max": round(v[-1], 2)} if v else None


q = multiprocessing.Queue()
pool = multiprocessing.Process(target=attackers, args=(q,))
pool.start()
threading.Thread(target=sampler, daemon=True).start()
body = open(review, "rb").read()
times, shakes, failed, n = [], [], [], 0
time.sleep(2)  # the attackers take hold first
while time.monotonic() < deadline - 0.5:
    n += 1
    try:
        t0 = time.monotonic()
        s = connect(5)
        shakes.append((time.monotonic() - t0) * 1000)
        t0 = time.monotonic()
        s.sendall(head(len(body)).replace(b"\r\n\r\n", b"\r\nConnection: close\r\n\r\n") + body)
        s.settimeout(10)
        out = attack_lib.read_all(s)
        ms = (time.monotonic() - t0) * 1000
        s.close()
        if attack_lib.status_of(out) == "200" and b'"allowed":true' in out and b'"patch":' in out:
            times.append(ms)
        else:
            failed.append("%s in %.0f ms: %s" % (attack_lib.status_of(out), ms, out[-160:].decode(errors="replace")))
    except OSError as e:
        failed.append("%s: %s" % (type(e).__name__, e))
    time.sleep(0.1)
tally = q.get(timeout=60)
pool.join()
time.sleep(0.1)
print(json.dumps({"reviews": n, "ok": len(times), "failed": failed[:5], "review_ms": pct(times),
                  "handshake_ms": pct(shakes), "rss_peak_kib": rss_peak[0], "attackers": tally}))
