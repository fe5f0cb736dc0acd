#!/usr/bin/env python3
"""fault_proxy.py UPSTREAM_PORT PORTFILE LOG MODE - a TCP proxy to a local store (azurite) that injects
faults into the first requests of a kind, then passes everything through untouched.

It reads the head of the first request on each connection. When the request matches (a PUT whose target
holds "comp=block&", i.e. a Put Block) and faults remain, it injects one; otherwise the connection is
relayed both ways byte for byte for the rest of its life.

  MODE busy:N   answer the first N Put Blocks 503 with the Blob service's ServerBusy error document
                (x-ms-error-code: ServerBusy, Connection: close) after reading their bodies
  MODE reset:N  relay the first N Put Blocks' heads and 1 MiB of their bodies upstream, then reset both
                connections (SO_LINGER 0): a connection reset in the middle of a block

Each fault is logged as one line ("busy TARGET" / "reset TARGET") to LOG.
"""
import os, socket, struct, sys, threading

from sockpipe import pipe  # beside this file (a script's own directory is on sys.path)

upstream, portfile, logfile, mode = int(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
kind, count = mode.split(":")
left = [int(count)]
lock = threading.Lock()


def log(line):
    with lock, open(logfile, "a") as f:
        f.write(line + "\n")


def reset(s):
    try:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        s.close()
    except OSError:
        pass


def take():
    with lock:
        if left[0] > 0:
            left[0] -= 1
            return True
    return False


def serve(c):
    head = b""
    while b"\r\n\r\n" not in head:
        d = c.recv(65536)
        if not d:
            c.close()
            return
        head += d
    line = head.split(b"\r\n", 1)[0].decode("latin-1")
    method, target = line.split(" ")[0], line.split(" ")[1]
    hit = method == "PUT" and "comp=block&" in target and take()
    if hit and kind == "busy":
        h, rest = head.split(b"\r\n\r\n", 1)
        n = 0
        for l in h.split(b"\r\n")[1:]:
            k, _, v = l.partition(b":")
            if k.strip().lower() == b"content-length":
                n = int(v.strip())
        n -= len(rest)
        while n > 0:
            d = c.recv(min(n, 65536))
            if not d:
                break
            n -= len(d)
        body = (b'<?xml version="1.0" encoding="utf-8"?><Error><Code>ServerBusy</Code>'
                b"<Message>The server is currently unable to receive requests. Please retry your request.</Message></Error>")
        c.sendall(b"HTTP/1.1 503 The server is currently unable to receive requests.\r\n"
                  b"Content-Type: application/xml\r\nx-ms-error-code: ServerBusy\r\nConnection: close\r\n"
                  b"Content-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
        log("busy " + target.split("&sig=")[0])
        c.close()
        return
    u = socket.create_connection(("127.0.0.1", upstream))
    if hit and kind == "reset":
        u.sendall(head)
        sent = 0
        while sent < (1 << 20):
            d = c.recv(65536)
            if not d:
                break
            u.sendall(d)
            sent += len(d)
        log("reset " + target.split("&sig=")[0])
        reset(c)
        reset(u)
        return
    u.sendall(head)
    threading.Thread(target=pipe, args=(u, c), daemon=True).start()
    pipe(c, u)


ls = socket.socket()
ls.bind(("127.0.0.1", 0))
ls.listen(64)
with open(portfile + ".tmp", "w") as f:
    f.write(str(ls.getsockname()[1]))
os.rename(portfile + ".tmp", portfile)
while True:
    conn, _ = ls.accept()
    threading.Thread(target=serve, args=(conn,), daemon=True).start()
