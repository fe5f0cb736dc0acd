#!/usr/bin/python3
"""hostile_store.py PORTFILE LOG - an object store gone bad, for tests/integration/egress_hostile.sh: what
the agent's egress process must survive and explain (an answer that is not HTTP, bodies past every cap,
a chunk size that overflows, a redirect towards the instance metadata service, an error document with
terminal escapes and an entity bomb). It is not a stand-in for a real store (s3rver and azurite are
tested in egress_stores.sh); it is the attacker. It speaks raw TCP so that it can break HTTP itself.

What it does is chosen by the first segment of the request's path (the bucket of a path-style S3
request, the account of an emulator-style Azure URI, the first segment of a credentials URL):
  garbage      "SSH-2.0-OpenSSH" and close           huge         Content-Length 10 GB, zeros, endless
  hugechunked  64 KiB chunks, endless                 chunkbomb    a chunk size of 20 hex digits
  redir        307 to http://169.254.169.254/         xmlbomb      403 with an entity bomb, ESC, BEL, CR LF
  silent       reads the request and never answers (a store that stopped: only a cancel ends the wait)
Each request's first line goes to LOG.
"""
import socketserver
import sys


def answer(mode):
    if mode == "garbage":
        return [b"SSH-2.0-OpenSSH_9.6\r\n\r\n"]
    if mode == "chunkbomb":
        return [b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nFFFFFFFFFFFFFFFFFFFF\r\n"]
    if mode == "redir":
        return [b"HTTP/1.1 307 Temporary Redirect\r\nLocation: http://169.254.169.254/latest/meta-data/\r\n"
                b"Content-Length: 0\r\n\r\n"]
    if mode == "xmlbomb":
        body = (b'<?xml version="1.0"?><!DOCTYPE l [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">'
                b'<!ENTITY c "&b;&b;&b;&b;&b;&b;&b;&b;">]><Error><Code>&c;</Code>'
                b'<Message>\x1b[31mred\x07\r\nInjected: yes</Message></Error>')
        return [b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\n\r\n" % len(body) + body]
    return []


class Handler(socketserver.BaseRequestHandler):
    def handle(self):
        s, data = self.request, b""
        while b"\r\n\r\n" not in data:
            d = s.recv(65536)
            if not d:
                return
            data += d
        line = data.split(b"\r\n", 1)[0].decode("latin1")
        mode = line.split(" ")[1].split("/")[1].split("?")[0] if line.count(" ") >= 2 else ""
        with open(sys.argv[2], "a") as log:
            log.write(line + "\n")
        try:
            if mode == "silent":
                while s.recv(65536):
                    pass
                return
            if mode == "huge":
                s.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 10000000000\r\n\r\n")
                while True:
                    s.sendall(b"\0" * 65536)
            if mode == "hugechunked":
                s.sendall(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n")
                while True:
                    s.sendall(b"10000\r\n" + b"\0" * 65536 + b"\r\n")
            for part in answer(mode):
                s.sendall(part)
        except OSError:
            pass


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", 0), Handler)
with open(sys.argv[1], "w") as f:
    f.write("%d\n" % srv.server_address[1])
srv.serve_forever()
