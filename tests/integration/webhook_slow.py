#!/usr/bin/python3
"""webhook_slow.py PORT CA N SECONDS RATE REVIEW [--pid PID] [--length BYTES] [--src ADDR] [--declare-only BYTES]

N TLS clients (a thread each) POST /mutate to the webhook on 127.0.0.1:PORT,
each declaring a body of BYTES (default 8 MiB) and sending it at RATE bytes a
second (0: the head, then nothing), from source address ADDR (default 127.0.0.2:
another client than the API server, whose reviews come from 127.0.0.1); a client whose request ends (answered or
closed) starts another a second later, for SECONDS. Meanwhile, every 0.2 s, the
ordinary review in file REVIEW is posted on a connection of its own (after
its TLS handshake, which is not timed) and the webhook's VmRSS
(/proc/PID/status) is sampled. Prints one JSON object:
  {"review_ms": [max, p50], "reviews": K, "failed": [...], "n_failed": F,
   "rss_peak_kib": R, "attacks": A, "answers": {status: count}, "closed": C}
--declare-only BYTES: one request that declares BYTES and sends one byte; prints
"STATUS SECONDS" (the answer's status, and how long it took).
Used by tests/integration/webhook_server.sh (asserts) and bench/webhook_attack.sh (figures).
"""
import json
import os
import multiprocessing
import socket
import ssl
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import attack_lib  # noqa: E402

pos, opts = attack_lib.parse({"--pid": None, "--length": str(8 << 20), "--declare-only": None, "--src": "127.0.0.2"})
port, ca, n, seconds, rate, review = int(pos[0]), pos[1], int(pos[2]), float(pos[3]), int(pos[4]), pos[5]
length = int(opts["--length"])
ctx = ssl.create_default_context(cafile=ca)
if opts["--declare-only"]:  # one request declaring that length, one byte sent: "STATUS SECONDS" until answered
    s = ctx.wrap_socket(socket.create_connection(("127.0.0.1", port), timeout=20), server_hostname="127.0.0.1")
    t0 = time.monotonic()
    s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %s\r\n\r\n{"
              % opts["--declare-only"].encode())
    out = attack_lib.read_all(s)
    print(attack_lib.status_of(out), round(time.monotonic() - t0, 2))
    sys.exit(0)
body = open(review, "rb").read()
deadline = time.monotonic() + seconds
lock = threading.Lock()
answers, closed, attacks = {}, [0], [0]


def connect(timeout, src=None):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0) if src else None)
    raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # as Go's client (the API server's) does
    return ctx.wrap_socket(raw, server_hostname="127.0.0.1")


def attacker():
    chunk = b"{" * 1024
    while time.monotonic() < deadline:
        try:
            s = connect(5, opts["--src"])
            s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                      b"Content-Length: %d\r\n\r\n" % length)
        except OSError:
            time.sleep(0.05)
            continue
        with lock:
            attacks[0] += 1
        sent, t0, got = 0, time.monotonic(), b""
        s.settimeout(0.05)
        while time.monotonic() < deadline:
            try:
                b = s.recv(65536)
                if not b:
                    break
                got += b
                if b"\r\n\r\n" in got:
                    break
            except (socket.timeout, ssl.SSLWantReadError):
                pass
            except OSError:
                break
            due = int((time.monotonic() - t0) * rate)
            try:
                while sent < min(due, length):
                    k = min(len(chunk), due - sent, length - sent)
                    s.sendall(chunk[:k])
                    sent += k
            except OSError:
                break
        with lock:
            if got:
                st = attack_lib.status_of(got)
                answers[st] = answers.get(st, 0) + 1
            elif time.monotonic() < deadline:
                closed[0] += 1
        try:
            s.close()
        except OSError:
            pass
        time.sleep(1)  # then another: the load is N clients at a time, not a flood of handshakes


def attackers(q):
    """The N clients, in a process of their own: the probes below do not wait for their GIL."""
    threads = [threading.Thread(target=attacker, daemon=True) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(max(0.1, deadline - time.monotonic() + 6))
    with lock:
        q.put((attacks[0], answers, closed[0]))


q = multiprocessing.Queue()
pool = multiprocessing.Process(target=attackers, args=(q,))
pool.start()
times, failed, peak = [], [], 0
while time.monotonic() < deadline:
    peak = max(peak, attack_lib.rss(opts["--pid"]))
    try:
        s = connect(10)
        t0 = time.monotonic()
        s.sendall(b"POST /mutate HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n" % len(body) + body)
        out = attack_lib.read_all(s)
        ms = (time.monotonic() - t0) * 1000
        s.close()
        if attack_lib.status_of(out) == "200" and b'"allowed":true' in out:
            times.append(ms)
        else:
            failed.append(attack_lib.status_of(out))
    except OSError as e:
        failed.append(str(e))
    time.sleep(0.2)
peak = max(peak, attack_lib.rss(opts["--pid"]))
attacks[0], answers, closed[0] = q.get(timeout=30)
pool.join()
times.sort()
print(json.dumps({"review_ms": [round(times[-1], 2), round(times[len(times) // 2], 2)] if times else [None, None],
                  "reviews": len(times), "failed": failed[:10], "n_failed": len(failed), "rss_peak_kib": peak,
                  "attacks": attacks[0], "answers": answers, "closed": closed[0]}))
