#!/usr/bin/env python3
"""webc_server.py - the HTTP/1.1 server tests/integration/webc.sh puts webc against: Python's own
http.server (ThreadingHTTPServer, protocol HTTP/1.1, keep-alive), over TLS with --cert/--key, with
routes that answer each way RFC 9112 lets an answer end and each way a server misbehaves.

  webc_server.py --ready PORTFILE --log LOG [--cert C --key K [--max-tls 1.1]] [--host 127.0.0.1]

LOG gets one line per event: "conn PEER" for each new connection (after the TLS handshake), "sni NAME"
for the name a TLS client sent (None without SNI), "req METHOD PATH" per request.
Routes (N a number of bytes):
  GET|HEAD /cl/N       N bytes with Content-Length          GET /chunked/N   N bytes, chunked, with an
  GET /close/N         N bytes, then close (no length)                       extension and a trailer
  GET /204             204, no body                         GET /interim     a 100, then 200 "ok"
  GET /headers         headers to keep (x-amz-request-id, etag) and one not to
  GET /echo            the request's head as the body       PUT|POST /sha    the body read, answered
  GET /stall           read, never answered                                  "LENGTH SHA256HEX"
  GET /drip            a 200 whose head comes one byte every 200 ms, for a minute (a slow-loris server)
  GET /drop-next       200; the next request on this connection is read and the connection closed unanswered
  GET /close-after     200 with keep-alive, then the connection closed while idle
  GET /early-403       403 at once without reading the body, then close
"""
import argparse, hashlib, http.server, os, ssl, threading, time

ap = argparse.ArgumentParser()
ap.add_argument("--ready", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--cert")
ap.add_argument("--key")
ap.add_argument("--max-tls")
ap.add_argument("--host", default="127.0.0.1")
args = ap.parse_args()
log_lock = threading.Lock()


def log(line):
    with log_lock, open(args.log, "a") as f:
        f.write(line + "\n")


def pattern(n):
    return bytes(i % 251 for i in range(n))


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True

    def setup(self):
        super().setup()
        self.drop_next = False
        log("conn %s:%d" % self.client_address[:2])

    def log_message(self, *a):
        pass

    def plain(self, code, body, extra=()):
        self.send_response(code)
        for k, v in extra:
            self.send_header(k, v)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(body)

    def route(self):
        log("req %s %s" % (self.command, self.path))
        if self.drop_next:
            n = int(self.headers.get("Content-Length") or 0)
            self.rfile.read(n)
            self.close_connection = True
            return
        p = self.path.split("?")[0].split("/")[1:]
        if p[0] not in ("sha", "early-403"):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if p[0] == "cl":
            return self.plain(200, pattern(int(p[1])))
        if p[0] == "chunked":
            n = int(p[1])
            self.send_response(200)
            self.send_header("Transfer-Encoding", "chunked")
            self.end_headers()
            body, i = pattern(n), 0
            while i < n:
                c = body[i:i + 1000]
                self.wfile.write(b"%x;ext=1\r\n" % len(c) + c + b"\r\n")
                i += len(c)
            self.wfile.write(b"0\r\nX-Trailer: t\r\n\r\n")
            return
        if p[0] == "close":
            self.send_response(200)
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(pattern(int(p[1])))
            self.close_connection = True
            return
        if p[0] == "204":
            self.send_response(204)
            self.end_headers()
            return
        if p[0] == "interim":
            self.wfile.write(b"HTTP/1.1 100 Continue\r\nX-Interim: yes\r\n\r\n")
            return self.plain(200, b"ok")
        if p[0] == "headers":
            return self.plain(200, b"h", [("x-amz-request-id", "REQ123"), ("ETag", '"etag-1"'),
                                          ("X-Not-Kept", "no")])
        if p[0] == "echo":
            return self.plain(200, (self.requestline + "\r\n" + str(self.headers)).encode())
        if p[0] == "sha":
            n, h, left = 0, hashlib.sha256(), int(self.headers.get("Content-Length") or 0)
            while left > 0:
                b = self.rfile.read(min(left, 1 << 20))
                if not b:
                    break
                h.update(b)
                n += len(b)
                left -= len(b)
            return self.plain(200, ("%d %s" % (n, h.hexdigest())).encode())
        if p[0] == "drip":
            head = b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: " + b"a" * 300 + b"\r\n\r\n"
            try:
                for c in head:
                    self.wfile.write(bytes([c]))
                    self.wfile.flush()
                    time.sleep(0.2)
            except OSError:
                pass
            self.close_connection = True
            return
        if p[0] == "stall":
            time.sleep(60)
            self.close_connection = True
            return
        if p[0] == "drop-next":
            self.drop_next = True
            return self.plain(200, b"first")
        if p[0] == "close-after":
            self.plain(200, b"then-close")
            self.close_connection = True
            return
        if p[0] == "early-403":
            self.plain(403, b"denied", [("Connection", "close")])
            self.close_connection = True
            return
        self.plain(404, b"no route")

    do_GET = do_HEAD = do_PUT = do_POST = do_DELETE = route


srv = http.server.ThreadingHTTPServer((args.host, 0), H)
srv.daemon_threads = True
if args.cert:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    if args.max_tls == "1.1":
        ctx.set_ciphers("DEFAULT:@SECLEVEL=0")
        ctx.minimum_version = ssl.TLSVersion.TLSv1
        ctx.maximum_version = ssl.TLSVersion.TLSv1_1

    def sni(sock, name, c):
        log("sni %s" % name)

    ctx.sni_callback = sni
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
with open(args.ready + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(args.ready + ".tmp", args.ready)
srv.serve_forever()
