#!/usr/bin/python3
"""webhook_latency.py - the timing side of tests/integration/webhook_latency.sh.

  bodies POD DIR            the request bodies into DIR: typical.json (an AdmissionReview of POD,
                            annotated), plain.json (not opted in), big.json (annotated, about 150 KB:
                            2,600 env vars), bigplain.json (the same, not opted in), bad.json (not an
                            AdmissionReview)
  run CAFILE PORT DIR [N]   every kind of answer over Python's ssl: a new connection for each kind,
                            N times (3), then one kept-alive connection for every kind N times,
                            each followed by a small review. Each request is one write of the whole
                            request and a read of the whole answer, timed from that write to the
                            answer's last byte (a new connection's handshake is printed apart).
                            Prints "MODE KIND STATUS MS" per request
  stats FILE                p50, p99 and max per (mode, kind) of FILE (bench/webhook_latency.sh)
  judge FILE CLIENT LIMIT   one PASS or FAIL line per (mode, kind) of FILE: its status as expected,
                            its median under LIMIT ms
"""
import json
import os
import socket
import ssl
import statistics
import sys
import time

WANT = {"patched": 200, "not-patched": 200, "large-patched": 200, "large-not-patched": 200, "malformed-400": 400,
        "no-route-404": 404, "wrong-method-405": 405, "healthz": 200, "readyz": 200, "metrics": 200, "plain": 200}


def bodies(pod_file, d):
    pod = json.load(open(pod_file))
    review = {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
              "request": {"uid": "1c0a6c1e-5a4a-4c4b-9d4e-0d0c2f1b2a3c",
                          "kind": {"group": "", "version": "v1", "kind": "Pod"},
                          "resource": {"group": "", "version": "v1", "resource": "pods"},
                          "operation": "CREATE", "namespace": "shop", "object": pod}}

    def write(name, r):
        with open(os.path.join(d, name), "w") as f:
            json.dump(r, f, separators=(",", ":"))

    write("typical.json", review)
    plain = json.loads(json.dumps(review))
    plain["request"]["object"]["metadata"]["annotations"].pop("diagport.dev/inject", None)
    write("plain.json", plain)
    env = [{"name": "SETTING_%04d" % i, "value": "value-%04d-%s" % (i, "x" * 12)} for i in range(2600)]
    review["request"]["object"]["spec"]["containers"][0]["env"] = env
    write("big.json", review)
    plain["request"]["object"]["spec"]["containers"][0]["env"] = env
    write("bigplain.json", plain)
    with open(os.path.join(d, "bad.json"), "w") as f:
        f.write('{"kind": "not an AdmissionReview"')


def run(ca, port, d, reps=3):
    ctx = ssl.create_default_context(cafile=ca)

    def body(name):
        with open(os.path.join(d, name), "rb") as f:
            return f.read()

    kinds = [("patched", "POST", "/mutate", body("typical.json")), ("not-patched", "POST", "/mutate", body("plain.json")),
             ("large-patched", "POST", "/mutate", body("big.json")),
             ("large-not-patched", "POST", "/mutate", body("bigplain.json")),
             ("malformed-400", "POST", "/mutate", body("bad.json")), ("no-route-404", "GET", "/nope", b""),
             ("wrong-method-405", "GET", "/mutate", b""), ("healthz", "GET", "/healthz", b""),
             ("readyz", "GET", "/readyz", b""), ("metrics", "GET", "/metrics", b"")]
    plain = body("plain.json")

    def connect():
        t0 = time.monotonic()
        raw = socket.create_connection(("127.0.0.1", port), timeout=10)
        raw.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        s = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
        return s, (time.monotonic() - t0) * 1000

    def one(s, method, path, data):
        head = (f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(data)}\r\n\r\n").encode()
        t0 = time.monotonic()
        s.sendall(head + data)
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("the connection closed before the answer's head")
            buf += chunk
        h, _, rest = buf.partition(b"\r\n\r\n")
        lines = h.decode("latin-1").split("\r\n")
        length = 0
        for l in lines[1:]:
            k, _, v = l.partition(":")
            if k.strip().lower() == "content-length":
                length = int(v.strip())
        while len(rest) < length:
            chunk = s.recv(65536)
            if not chunk:
                raise RuntimeError("the connection closed mid-answer")
            rest += chunk
        return int(lines[0].split()[1]), (time.monotonic() - t0) * 1000

    for _ in range(reps):
        for name, m, p, b in kinds:
            s, hs = connect()
            st, ms = one(s, m, p, b)
            print(f"new {name} {st} {ms:.2f} handshake {hs:.2f}")
            s.close()
    s, _ = connect()
    mode = "first"
    for _ in range(reps):
        for name, m, p, b in kinds:
            st, ms = one(s, m, p, b)
            print(f"{mode} {name} {st} {ms:.2f}")
            mode = "kept"
            st, ms = one(s, "POST", "/mutate", plain)
            print(f"kept after-plain {st} {ms:.2f}")
    s.close()


def stats(path):
    groups = {}
    for line in open(path):
        f = line.split()
        groups.setdefault(f"{f[0]} {f[1]}", []).append(float(f[3]))
    for key, ms in sorted(groups.items()):
        ms.sort()
        q = lambda p: ms[min(len(ms) - 1, int(len(ms) * p))]
        print(f"   {key:<30} n {len(ms):4d}  p50 {q(.5):7.3f}  p99 {q(.99):7.3f}  max {ms[-1]:7.3f} ms")


def judge(path, client, limit):
    groups = {}
    for line in open(path):
        f = line.split()
        mode, kind, status, ms = f[0], f[1], int(f[2]), float(f[3])
        key = "first" if mode == "first" else "kept-after" if kind == "after-plain" else f"{mode}-{kind}"
        groups.setdefault(key, []).append((kind, status, ms))
    for key, rows in sorted(groups.items()):
        med = statistics.median(ms for _, _, ms in rows)
        bad = [f"{k} {s}" for k, s, _ in rows if s != WANT[k.replace("after-", "")]]
        slow = [f"{k} {ms:.1f} ms" for k, _, ms in rows if ms > limit]
        name = f"{client}/{key}"
        if bad:
            print(f"FAIL {name}: status {', '.join(bad[:3])}")
        elif med > limit:
            print(f"FAIL {name}: median {med:.1f} ms over {limit:.0f} ms (held by a timer?): {'; '.join(slow[:4])}")
        else:
            print(f"PASS {name} (median {med:.2f} ms of {len(rows)})")


if sys.argv[1] == "bodies":
    bodies(sys.argv[2], sys.argv[3])
elif sys.argv[1] == "run":
    run(sys.argv[2], int(sys.argv[3]), sys.argv[4], int(sys.argv[5]) if len(sys.argv) > 5 else 3)
elif sys.argv[1] == "stats":
    stats(sys.argv[2])
else:
    judge(sys.argv[2], sys.argv[3], float(sys.argv[4]))
