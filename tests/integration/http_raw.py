#!/usr/bin/python3
"""http_raw.py PORT CASE - send raw bytes to the agent's HTTP server and print
what came back, for tests/integration/agent_api.sh. Cases:
  garbage      a request line that is not HTTP          -> prints "STATUS CONTENT-TYPE"
  http2        HTTP/2.0 on the request line              -> "STATUS"
  head         HEAD /healthz                             -> "STATUS CONTENT-LENGTH BODYLEN"
  http10       GET /healthz HTTP/1.0                     -> "STATUS BODY"
  flood N      N idle connections held open while a      -> "served" or "refused"
               normal request is made, then closed (idle connections take no
               worker slot: it is served)
  bighead      a 40 KiB header                           -> "STATUS CONTENT-TYPE"
  detail KIND  longtarget, manyheaders, manyparams, badescape: a head the parser refuses;
               twolengths, lengthandchunked: a POST whose framing is in doubt; chunked: a chunked POST
                                                         -> "STATUS DETAIL" (the problem's detail)
  status411    a chunked POST                            -> the status line
  headtimeout  a head sent a byte every 0.3 s, never ended -> "STATUS SECONDS" (until the answer)
"""
import socket
import sys
import time

port = int(sys.argv[1])
case = sys.argv[2]


def talk(data, timeout=5.0):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout)
    s.sendall(data)
    out = b""
    try:
        while True:
            b = s.recv(65536)
            if not b:
                break
            out += b
    except socket.timeout:
        pass
    s.close()
    return out


def parse(resp):
    head, _, body = resp.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = lines[0].split(" ")[1] if lines and len(lines[0].split(" ")) > 1 else "none"
    hdrs = {}
    for l in lines[1:]:
        k, _, v = l.partition(":")
        hdrs[k.strip().lower()] = v.strip()
    return status, hdrs, body


if case == "garbage":
    st, h, _ = parse(talk(b"HELLO THERE\r\n\r\n"))
    print(st, h.get("content-type", "-").split(";")[0])
elif case == "http2":
    st, h, _ = parse(talk(b"GET /healthz HTTP/2.0\r\n\r\n"))
    print(st)
elif case == "head":
    st, h, body = parse(talk(b"HEAD /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
    print(st, h.get("content-length", "-"), len(body))
elif case == "http10":
    st, h, body = parse(talk(b"GET /healthz HTTP/1.0\r\n\r\n"))
    print(st, body.decode())
elif case == "bighead":
    st, h, _ = parse(talk(b"GET /healthz HTTP/1.1\r\nX-Big: " + b"a" * 40960 + b"\r\n\r\n"))
    print(st, h.get("content-type", "-").split(";")[0])
elif case == "detail":
    import json
    heads = {"longtarget": b"GET /processes?x=" + b"a" * 9000 + b" HTTP/1.1\r\n\r\n",
             "manyheaders": b"GET /healthz HTTP/1.1\r\n" + b"".join(b"X-%d: 1\r\n" % i for i in range(70)) + b"\r\n",
             "manyparams": b"GET /processes?" + b"&".join(b"p%d=1" % i for i in range(40)) + b" HTTP/1.1\r\n\r\n",
             "badescape": b"GET /processes?%ZZ HTTP/1.1\r\n\r\n",
             "twolengths": b"POST /trace HTTP/1.1\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
             "lengthandchunked": b"POST /trace HTTP/1.1\r\nContent-Length: 2\r\nTransfer-Encoding: chunked\r\n\r\n{}",
             "chunked": b"POST /trace HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n"}
    st, h, body = parse(talk(heads[sys.argv[3]]))
    try:
        print(st, json.loads(body).get("detail"))
    except ValueError:
        print(st, "no problem document")
elif case == "status411":
    r = talk(b"POST /trace HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
    print(r.split(b"\r\n", 1)[0].decode("latin-1"))
elif case == "flood":
    n = int(sys.argv[3])
    held = []
    for _ in range(n):
        try:
            held.append(socket.create_connection(("127.0.0.1", port), timeout=2))
        except OSError:
            break
    time.sleep(0.3)
    r = b""
    try:
        r = talk(b"GET /healthz HTTP/1.1\r\n\r\n", timeout=2)
    except OSError:
        pass
    for s in held:
        s.close()
    print("served" if r.startswith(b"HTTP/1.1 200") else "refused")
elif case == "headtimeout":
    s = socket.create_connection(("127.0.0.1", port), timeout=20)
    t0 = time.monotonic()
    s.sendall(b"G")
    s.settimeout(0.3)
    out = b""
    while time.monotonic() - t0 < 20:
        try:
            b = s.recv(65536)
            if not b:
                break
            out += b
        except socket.timeout:
            try:
                s.sendall(b"E")
            except OSError:
                break
    st = out.split(b" ", 2)[1].decode() if out.startswith(b"HTTP/1.") else "none"
    print(st, round(time.monotonic() - t0, 2))
