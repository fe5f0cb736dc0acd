#!/usr/bin/env python3
"""webc_proxy.py - a forward HTTP proxy for tests/integration/webc.sh and fleet_ecs.sh: CONNECT
tunnels, and absolute-form requests passed on as origin-form, one request per connection (the
connection is piped to the origin after the first head).

  webc_proxy.py --ready PORTFILE --log LOG [--deny HOST]

LOG gets one line per request: "CONNECT HOST:PORT auth=VALUE" or "FORWARD METHOD URL auth=VALUE"
(VALUE the Proxy-Authorization header, or -). CONNECT to --deny's host is answered 403.
"""
import argparse, os, socket, socketserver, threading

from sockpipe import pipe  # beside this file (a script's own directory is on sys.path)

ap = argparse.ArgumentParser()
ap.add_argument("--ready", required=True)
ap.add_argument("--log", required=True)
ap.add_argument("--deny")
args = ap.parse_args()
lock = threading.Lock()


def log(line):
    with lock, open(args.log, "a") as f:
        f.write(line + "\n")


def split_hostport(hp, default):
    if hp.startswith("["):
        host, _, rest = hp[1:].partition("]")
        return host, int(rest[1:]) if rest.startswith(":") else default
    host, _, port = hp.partition(":")
    return host, int(port) if port else default


class H(socketserver.BaseRequestHandler):
    def handle(self):
        c = self.request
        head = b""
        while b"\r\n\r\n" not in head:
            d = c.recv(4096)
            if not d:
                return
            head += d
        head, _, rest = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ")
        auth = "-"
        kept = []
        for l in lines[1:]:
            name, _, value = l.partition(":")
            if name.strip().lower() == "proxy-authorization":
                auth = value.strip()
            else:
                kept.append(l)
        if method == "CONNECT":
            log("CONNECT %s auth=%s" % (target, auth))
            host, port = split_hostport(target, 443)
            if host == args.deny:
                c.sendall(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 0\r\n\r\n")
                return
            up = socket.create_connection((host, port))
            c.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            log("FORWARD %s %s auth=%s" % (method, target, auth))
            assert target.startswith("http://"), target
            hp, _, path = target[7:].partition("/")
            host, port = split_hostport(hp, 80)
            up = socket.create_connection((host, port))
            up.sendall(("%s /%s %s\r\n" % (method, path, version)).encode("latin-1") +
                       "\r\n".join(kept).encode("latin-1") + b"\r\n\r\n" + rest)
            rest = b""
        if rest:
            up.sendall(rest)
        t = threading.Thread(target=pipe, args=(up, c), daemon=True)
        t.start()
        pipe(c, up)
        t.join()


class S(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = S(("127.0.0.1", 0), H)
with open(args.ready + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(args.ready + ".tmp", args.ready)
srv.serve_forever()
