#!/usr/bin/python3
"""slow_clients.py PORT N MODE SECONDS [--src ADDR] [--token T] [--pid PID] [--path P]

Opens N connections to the agent on 127.0.0.1:PORT from the source address
ADDR (default 127.0.0.2: another client than the probes, which come from
127.0.0.1; "many": each from an address of its own), behaving as MODE, for SECONDS; meanwhile, every 0.2 s, asks
GET /healthz (no token) and GET /processes (with the token, if given) on new
connections from 127.0.0.1, and samples the agent's VmRSS (/proc/PID/status).
Prints one JSON object:
  {"healthz_ms": [max, p50], "processes_ms": [max, p50] (of the answers that were 200),
   "failed": [...] (the first ten probes that got no 200), "n_failed": F, "probes": P,
   "rss_peak_kib": K, "opened": N, "closed_by_server": M, "answers": {status: count}}
Modes:
  idle      connect and send nothing
  trickle   send a request head one byte every 2 s (never finishing it)
  bighead   send 30 KiB of a head at once, then nothing
  slowbody  POST PATH with Content-Length 60000 and send the body one byte every 2 s (answers still
            coming when SECONDS are up are read for up to 10 s more)
  flood     connect, send a complete GET /healthz, never read the answer (new ones all the time)
Used by tests/integration/agent_limits.sh (which asserts on it) and
bench/agent_attack.sh (which records its figures).
"""
import json
import os
import select
import socket
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack_lib  # noqa: E402

pos, opts = attack_lib.parse({"--src": "127.0.0.2", "--token": None, "--pid": None, "--path": "/trace"})
port, n, mode, seconds = int(pos[0]), int(pos[1]), pos[2], float(pos[3])
HEAD = b"GET /processes HTTP/1.1\r\nHost: x\r\nX-Slow: " + b"a" * 200 + b"\r\n\r\n"


n_attackers = 0


def attacker():
    global n_attackers
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    src = opts["--src"]
    if src == "many":  # a different address for each connection: 127.0.1.1, 127.0.1.2, ...
        src = "127.0.%d.%d" % (1 + n_attackers // 250, 1 + n_attackers % 250)
    n_attackers += 1
    s.bind((src, 0))
    s.setblocking(False)
    try:
        s.connect(("127.0.0.1", port))
    except BlockingIOError:
        pass
    return s


def probe(path, token):
    t0 = time.monotonic()
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    req = "GET %s HTTP/1.1\r\nHost: x\r\n" % path
    if token:
        req += "Authorization: Bearer %s\r\n" % token
    s.sendall((req + "\r\n").encode())
    out = attack_lib.read_all(s)
    s.close()
    return (time.monotonic() - t0) * 1000, attack_lib.status_of(out)


conns = []
sent = {}
closed = 0
answers = {}
for k in range(n):
    conns.append(attacker())
# the connects complete (writable) before anything is sent: on a loaded machine the listen backlog
# overflows and a connect can take a SYN retry (1 s and more); a head sent before would be lost
pending, wait_end = list(conns), time.monotonic() + 15
while pending and time.monotonic() < wait_end:
    _, w, _ = select.select([], pending[:1000], [], 0.2)
    pending = [s for s in pending if s not in w]
deadline = time.monotonic() + seconds
for s in conns:
    sent[s] = 0
    try:
        if mode == "bighead":
            s.send(b"GET /processes HTTP/1.1\r\nHost: x\r\nX-Big: " + b"b" * 30000)
        elif mode == "slowbody":
            s.send(("POST %s HTTP/1.1\r\nHost: x\r\nContent-Length: 60000\r\n\r\n" % opts["--path"]).encode())
        elif mode == "flood":
            s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
    except OSError:
        pass

hz, pr, failed, peak = [], [], [], 0
next_byte = time.monotonic()
next_probe = time.monotonic()
while time.monotonic() < deadline:
    now = time.monotonic()
    if mode in ("trickle", "slowbody") and now >= next_byte:
        for s in conns:
            if s.fileno() < 0:
                continue
            try:
                if mode == "trickle":
                    s.send(HEAD[sent[s] % len(HEAD):sent[s] % len(HEAD) + 1] if sent[s] < len(HEAD) - 4 else b"x")
                else:
                    s.send(b"{")
                sent[s] += 1
            except OSError:
                pass
        next_byte = now + 2
    if mode == "flood":
        for k in range(20):
            try:
                s = attacker()
                time.sleep(0.001)
                s.send(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
                conns.append(s)
            except OSError:
                pass
        # keep the count near n: forget the oldest (left open, unread, until the end)
    if now >= next_probe:
        for path, token, times in (("/healthz", None, hz), ("/processes", opts["--token"], pr)):
            if path == "/processes" and not token:
                continue
            try:
                ms, st = probe(path, token)
                if st == "200":
                    times.append(ms)
                else:
                    failed.append("%s %s" % (path[1:], st))
            except OSError as e:
                failed.append("%s %s" % (path[1:], e))
        peak = max(peak, attack_lib.rss(opts["--pid"]))
        next_probe = now + 0.2
    # notice what the server closed or answered
    live = [s for s in conns if s.fileno() >= 0]
    r, _, _ = select.select(live[:1000], [], [], 0.05) if live else ([], [], [])
    for s in r:
        try:
            b = s.recv(65536)
        except OSError:
            b = b""
        if b.startswith(b"HTTP/1."):
            st = attack_lib.status_of(b)
            answers[st] = answers.get(st, 0) + 1
        if not b:
            closed += 1
            s.close()
        elif mode != "flood":
            pass

# slow uploads: the answers still on their way when the window closed (a loaded machine opens the 500
# connections slowly) are read for up to 10 s more; a server that waited for the bodies (a byte every
# 2 s) would still not have answered
if mode == "slowbody":
    drain_end = time.monotonic() + 10
    answered = set()
    while time.monotonic() < drain_end and sum(answers.values()) < len(conns):
        live = [s for s in conns if s.fileno() >= 0 and s not in answered]
        if not live:
            break
        r, _, _ = select.select(live[:1000], [], [], 0.2)
        for s in r:
            try:
                b = s.recv(65536)
            except OSError:
                b = b""
            if b.startswith(b"HTTP/1."):
                st = attack_lib.status_of(b)
                answers[st] = answers.get(st, 0) + 1
                answered.add(s)
            if not b:
                closed += 1
                s.close()

peak = max(peak, attack_lib.rss(opts["--pid"]))
for s in conns:
    if s.fileno() >= 0:
        s.close()


def stats(v):
    if not v:
        return [None, None]
    v = sorted(v)
    return [round(v[-1], 2), round(v[len(v) // 2], 2)]


print(json.dumps({"healthz_ms": stats(hz), "processes_ms": stats(pr), "failed": failed[:10],
                  "n_failed": len(failed), "probes": len(hz) + len(pr) + len(failed), "rss_peak_kib": peak, "opened": len(conns),
                  "closed_by_server": closed, "answers": answers}))
