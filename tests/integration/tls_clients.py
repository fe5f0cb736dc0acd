#!/usr/bin/env python3
"""tls_clients.py - hostile and idle TLS clients for tests/integration/agent_tls.sh.

  tls_clients.py PORT stall-hello      opens TCP, sends the first 5 bytes of a TLS record (a ClientHello's record
                                       header) and nothing more; prints the seconds until the server closed
  tls_clients.py PORT stall-after N PID
                                       N connections that finish the TLS handshake and send no request; prints
                                       JSON {"opened", "rss_before_kib", "rss_held_kib", "closed_after_s"}: PID's
                                       RSS before and while they are held, and the seconds until the server has
                                       closed them all (each read sees the end)
"""
import json
import socket
import ssl
import sys
import time


def rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def wait_closed(s, limit):
    t0 = time.monotonic()
    s.settimeout(limit)
    try:
        while s.recv(4096):
            pass
    except (socket.timeout, TimeoutError):
        return None
    except (ConnectionError, ssl.SSLError, OSError):
        pass
    return time.monotonic() - t0


def stall_hello(port):
    s = socket.create_connection(("127.0.0.1", port))
    s.sendall(b"\x16\x03\x01\x02\x00")  # a handshake record of 512 bytes announced, none sent
    t = wait_closed(s, 30)
    print("never" if t is None else f"{t:.2f}")


def stall_after(port, n, pid):
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    before = rss_kib(pid)
    conns = []
    for _ in range(n):
        raw = socket.create_connection(("127.0.0.1", port))
        conns.append(ctx.wrap_socket(raw))
    time.sleep(0.3)
    held = rss_kib(pid)
    t0 = time.monotonic()
    for c in conns:
        wait_closed(c, 30)
    print(json.dumps({"opened": len(conns), "rss_before_kib": before, "rss_held_kib": held,
                      "closed_after_s": round(time.monotonic() - t0, 2)}))


if __name__ == "__main__":
    port = int(sys.argv[1])
    if sys.argv[2] == "stall-hello":
        stall_hello(port)
    else:
        stall_after(port, int(sys.argv[3]), int(sys.argv[4]))
