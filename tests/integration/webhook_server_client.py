#!/usr/bin/python3
"""webhook_server_client.py - the client side of tests/integration/webhook_server.sh:
TLS clients the shell and curl cannot easily be. Run with /usr/bin/python3.
Every subcommand prints one line of JSON (a summary) on stdout; exit 0 unless
it could not run at all (bad arguments, unreadable files).

  load PORT CA PATH REQ [--count N] [--seconds S] [--workers W]
       [--reconnect-every K] [--expect patch|none]
        W threads (8) post the AdmissionReview REQ to PATH over keep-alive
        TLS connections verified with CA (K > 0: a new connection every K
        requests), each request with a fresh uid, until N requests in all were
        sent or S seconds passed. A request counts as ok when the answer is
        200 application/json, an admission.k8s.io/v1 AdmissionReview whose
        response echoes that request's uid, allowed, with a patch (or none).
        Prints {"sent","ok","failed","errors":[first few],"connects",
        "serials":[certificate serials seen, hex],"seconds"}
  slow PORT CA REQ N HOLD
        N connections post half of REQ (Content-Length says all of it) and
        stall; prints {"event":"stalled"} as soon as they have, then waits up
        to HOLD seconds for the server to close each. Prints
        {"closed":[seconds after stalling, or null when still open],
         "answers":[the status line the server sent before closing, or ""]}
  half-close PORT CA REQ
        one connection posts half of REQ, then closes. Prints {"sent":true}
  garbage PORT KIND
        KIND raw: bytes that are not a TLS record; http: a plaintext HTTP
        request; hello: the first bytes of a TLS ClientHello, then garbage.
        Waits up to 15 s for the server to close the connection. Prints
        {"closed":SECONDS or null,"got":BYTES received}
  unread PORT CA REQ N HOLD
        one keep-alive connection sends REQ as N pipelined POSTs without
        reading any answer, until sending blocks for 2 s (the server stopped
        reading: its answers fill the socket buffers); prints
        {"event":"unread","sent":K}, waits HOLD seconds, then reads every
        answer. Prints {"sent":K,"answers":200 answers read,"allowed":those
        with "allowed":true,"closed":the server closed the connection}
  idle PORT CA SECONDS
        one keep-alive connection makes one request (GET /healthz), prints
        {"event":"idle"} and holds the connection open for SECONDS.
"""
import http.client
import json
import socket
import ssl
import sys
import threading
import time
import uuid


def ctx_for(ca):
    c = ssl.create_default_context(cafile=ca)
    c.check_hostname = True
    return c


def say(obj):
    sys.stdout.write(json.dumps(obj) + "\n")
    sys.stdout.flush()


class Conn(http.client.HTTPSConnection):
    """An HTTPSConnection that counts its TCP connects and notes the peer's serial."""

    def __init__(self, port, ctx, stats, timeout=15):
        super().__init__("127.0.0.1", port, context=ctx, timeout=timeout)
        self.stats = stats

    def connect(self):
        super().connect()
        cert = self.sock.getpeercert()
        with self.stats["lock"]:
            self.stats["connects"] += 1
            if cert and "serialNumber" in cert:
                self.stats["serials"].add(cert["serialNumber"].upper().lstrip("0") or "0")


def check_answer(status, ctype, body, uid, expect):
    if status != 200:
        return "status %d: %s" % (status, body[:200].decode("utf-8", "replace"))
    if not (ctype or "").startswith("application/json"):
        return "Content-Type %r" % ctype
    try:
        doc = json.loads(body)
    except ValueError as e:
        return "the answer is not JSON: %s" % e
    if not isinstance(doc, dict) or doc.get("kind") != "AdmissionReview" or doc.get("apiVersion") != "admission.k8s.io/v1":
        return "the answer is not an admission.k8s.io/v1 AdmissionReview"
    r = doc.get("response")
    if not isinstance(r, dict):
        return "no response object"
    if r.get("uid") != uid:
        return "uid %r echoed for a request with uid %r" % (r.get("uid"), uid)
    if r.get("allowed") is not True:
        return "allowed is %r" % r.get("allowed")
    if expect == "patch" and not r.get("patch"):
        return "no patch"
    if expect == "none" and "patch" in r:
        return "a patch where none was expected"
    return None


def cmd_load(args):
    port, ca, path, reqf = int(args[0]), args[1], args[2], args[3]
    opts = {"--count": None, "--seconds": None, "--workers": "8", "--reconnect-every": "0", "--expect": "patch"}
    rest = args[4:]
    while rest:
        if rest[0] not in opts or len(rest) < 2:
            raise SystemExit("load: unexpected argument %s" % rest[0])
        opts[rest[0]] = rest[1]
        rest = rest[2:]
    count = int(opts["--count"]) if opts["--count"] else None
    seconds = float(opts["--seconds"]) if opts["--seconds"] else None
    if count is None and seconds is None:
        raise SystemExit("load: --count or --seconds is needed")
    workers = int(opts["--workers"])
    every = int(opts["--reconnect-every"])
    expect = opts["--expect"]
    with open(reqf, "rb") as f:
        req = json.loads(f.read())
    ctx = ctx_for(ca)
    stats = {"lock": threading.Lock(), "sent": 0, "ok": 0, "failed": 0, "errors": [], "connects": 0, "serials": set()}
    t0 = time.monotonic()
    deadline = t0 + seconds if seconds is not None else None

    def take():
        with stats["lock"]:
            if count is not None and stats["sent"] >= count:
                return False
            if deadline is not None and time.monotonic() >= deadline:
                return False
            stats["sent"] += 1
            return True

    def result(err):
        with stats["lock"]:
            if err is None:
                stats["ok"] += 1
            else:
                stats["failed"] += 1
                if len(stats["errors"]) < 5:
                    stats["errors"].append(err)

    def worker():
        conn = Conn(port, ctx, stats)
        n = 0
        while take():
            if every and n and n % every == 0:
                conn.close()
                conn = Conn(port, ctx, stats)
            n += 1
            uid = str(uuid.uuid4())
            body = json.dumps(dict(req, request=dict(req["request"], uid=uid))).encode()
            try:
                conn.request("POST", path, body=body, headers={"Content-Type": "application/json"})
                resp = conn.getresponse()
                data = resp.read()
                result(check_answer(resp.status, resp.getheader("Content-Type"), data, uid, expect))
            except (OSError, http.client.HTTPException, ssl.SSLError) as e:
                result("%s: %s" % (type(e).__name__, e))
                conn.close()
                conn = Conn(port, ctx, stats)
        conn.close()

    threads = [threading.Thread(target=worker) for _ in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    say({"sent": stats["sent"], "ok": stats["ok"], "failed": stats["failed"], "errors": stats["errors"],
         "connects": stats["connects"], "serials": sorted(stats["serials"]), "seconds": round(time.monotonic() - t0, 3)})


def tls_socket(port, ca, timeout=30):
    raw = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    return ctx_for(ca).wrap_socket(raw, server_hostname="localhost")


def post_head(body_len):
    return ("POST /mutate HTTP/1.1\r\nHost: localhost\r\nContent-Type: application/json\r\n"
            "Content-Length: %d\r\n\r\n" % body_len).encode()


def cmd_slow(args):
    port, ca, reqf, n, hold = int(args[0]), args[1], args[2], int(args[3]), float(args[4])
    with open(reqf, "rb") as f:
        body = f.read()
    socks = []
    for _ in range(n):
        s = tls_socket(port, ca)
        s.sendall(post_head(len(body)) + body[: len(body) // 2])
        socks.append(s)
    t0 = time.monotonic()
    say({"event": "stalled"})
    closed = [None] * n
    answers = [""] * n

    def watch(i, s):
        got = b""
        s.settimeout(hold)
        try:
            while True:
                b = s.recv(65536)
                if not b:
                    break
                got += b
        except socket.timeout:
            answers[i] = got.split(b"\r\n", 1)[0].decode("latin-1")
            return
        except (OSError, ssl.SSLError):
            pass
        closed[i] = round(time.monotonic() - t0, 2)
        answers[i] = got.split(b"\r\n", 1)[0].decode("latin-1")

    ts = [threading.Thread(target=watch, args=(i, s)) for i, s in enumerate(socks)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for s in socks:
        s.close()
    say({"closed": closed, "answers": answers})


def cmd_half_close(args):
    port, ca, reqf = int(args[0]), args[1], args[2]
    with open(reqf, "rb") as f:
        body = f.read()
    s = tls_socket(port, ca)
    s.sendall(post_head(len(body)) + body[: len(body) // 2])
    s.close()
    say({"sent": True})


def cmd_garbage(args):
    port, kind = int(args[0]), args[1]
    if kind == "raw":
        data = b"\x00\xff\x13\x37 this is not TLS \x00\x01\x02" * 64
    elif kind == "http":
        data = b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n"
    elif kind == "hello":
        # a TLS 1.0 record header announcing a handshake, a ClientHello type, then noise
        data = b"\x16\x03\x01\x00\x80\x01\x00\x00\x7c\x03\x03" + bytes(range(256))[:117] + b"\xde\xad\xbe\xef" * 32
    else:
        raise SystemExit("garbage: unknown kind %s" % kind)
    s = socket.create_connection(("127.0.0.1", port), timeout=15)
    t0 = time.monotonic()
    got = 0
    closed = None
    try:
        s.sendall(data)
        while True:
            b = s.recv(65536)
            if not b:
                closed = round(time.monotonic() - t0, 2)
                break
            got += len(b)
    except socket.timeout:
        pass
    except OSError:
        closed = round(time.monotonic() - t0, 2)
    s.close()
    say({"closed": closed, "got": got})


def cmd_unread(args):
    port, ca, reqf, n, hold = int(args[0]), args[1], args[2], int(args[3]), float(args[4])
    with open(reqf, "rb") as f:
        body = f.read()
    req = post_head(len(body)) + body
    s = tls_socket(port, ca)
    s.settimeout(2)
    sent = 0
    try:
        for _ in range(n):
            s.sendall(req)
            sent += 1
    except (socket.timeout, ssl.SSLError, OSError):
        pass  # the last request may be cut: its answer is not expected
    say({"event": "unread", "sent": sent})
    time.sleep(hold)
    s.settimeout(5)
    got = bytearray()
    closed = False
    try:
        while got.count(b'"allowed":true') < sent:
            b = s.recv(1 << 20)
            if not b:
                closed = True
                break
            got += b
    except (socket.timeout, ssl.SSLError, OSError):
        pass
    s.close()
    say({"sent": sent, "answers": got.count(b"HTTP/1.1 200 "), "allowed": got.count(b'"allowed":true'), "closed": closed})


def cmd_idle(args):
    port, ca, secs = int(args[0]), args[1], float(args[2])
    s = tls_socket(port, ca)
    s.sendall(b"GET /healthz HTTP/1.1\r\nHost: localhost\r\n\r\n")
    got = b""
    while b"\r\n\r\nok" not in got:
        b = s.recv(4096)
        if not b:
            break
        got += b
    say({"event": "idle", "status": got.split(b"\r\n", 1)[0].decode("latin-1")})
    s.settimeout(secs)
    try:
        s.recv(1)
    except (OSError, ssl.SSLError):
        pass
    s.close()


def main(argv):
    cmds = {"load": (cmd_load, None), "slow": (cmd_slow, 5), "half-close": (cmd_half_close, 3),
            "garbage": (cmd_garbage, 2), "idle": (cmd_idle, 3), "unread": (cmd_unread, 5)}
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    fn, n = cmds[argv[1]]
    if n is not None and len(argv) - 2 != n:
        print("%s: %d arguments expected" % (argv[1], n), file=sys.stderr)
        return 2
    fn(argv[2:])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
