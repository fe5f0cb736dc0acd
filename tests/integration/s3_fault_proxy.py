#!/usr/bin/env python3
"""s3_fault_proxy.py PORTFILE UPSTREAM_PORT LOG KEYS [RULE...] - a TCP-level HTTP/1.1 relay between
egress/s3.c (through s3_driver) and s3rver that checks every request's signature and injects the faults
s3.sh needs. Not a stand-in for S3: every request it lets through is answered by s3rver.

The signature: s3rver 3.7.1 does not compute SigV4 (its authentication middleware says "Signature version
4 calculation is unimplemented" and checks only that the access key exists), so this relay does what S3
does, with botocore's own S3 signer (the copy Debian's awscli ships) as the judge: the canonical request
rebuilt from the request as received (its SignedHeaders, the path and query as sent, the
x-amz-content-sha256 value), the signature recomputed with the secret of the access key (KEYS:
"AK:SK,AK:SK"), and a mismatch answered 403 SignatureDoesNotMatch; a signed payload hash that is not
the body's SHA-256 is 400 XAmzContentSHA256Mismatch. A key not in KEYS goes on to s3rver as it is.

Faults (S3's error answers: the S3 API reference's Error document; SlowDown is 503, InternalError
500). Rules:
  503:PART:N     the first N UploadPart requests for part PART get 503 SlowDown (their body read first)
  reset:PART     the first UploadPart for part PART: half its body read, then the connection reset (RST)
  fail-from:PART every UploadPart for part PART or later gets 500 InternalError
Each request is logged as "METHOD TARGET ACCESS_KEY STATUS" (STATUS "reset" for a reset).
"""
import hashlib, re, socket, socketserver, sys, threading

import awscli  # noqa: F401  (makes its bundled botocore importable as botocore)
import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

portfile, upstream, logpath = sys.argv[1], int(sys.argv[2]), sys.argv[3]
KEYS = dict(k.split(":", 1) for k in sys.argv[4].split(",") if ":" in k)
rules = sys.argv[5:]
lock = threading.Lock()
seen = {}  # part number -> UploadPart requests so far


def log(line):
    with lock, open(logpath, "a") as f:
        f.write(line + "\n")


def error_body(code, msg):
    return (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{code}</Code><Message>{msg}</Message>'
            f'<RequestId>fault-proxy</RequestId></Error>').encode()


def check_signature(method, target, headers, body):
    """None when the request is signed right (or by a key we do not know), else (status, code, message)."""
    auth = headers.get("authorization", "")
    m = re.match(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                 r"SignedHeaders=([^,]+), Signature=([0-9a-f]{64})$", auth)
    if not m:
        return (403, "AccessDenied", "no SigV4 Authorization header")
    ak, _, region, service, signed, given = m.groups()
    if ak not in KEYS:
        return None
    sha = headers.get("x-amz-content-sha256", "")
    if sha != "UNSIGNED-PAYLOAD" and sha != hashlib.sha256(body).hexdigest():
        return (400, "XAmzContentSHA256Mismatch", "The provided 'x-amz-content-sha256' header does not match "
                "what was computed.")
    names = signed.split(";")
    req = AWSRequest(method=method, url="http://" + headers["host"] + target, data=body,
                     headers={n: headers.get(n, "") for n in names})
    req.context["timestamp"] = headers.get("x-amz-date", "")
    signer = botocore.auth.S3SigV4Auth(Credentials(ak, KEYS[ak], headers.get("x-amz-security-token")),
                                       service, region)
    cr = signer.canonical_request(req)
    want = signer.signature(signer.string_to_sign(req, cr), req)
    if want != given:
        return (403, "SignatureDoesNotMatch", "The request signature we calculated does not match the "
                "signature you provided. Check your key and signing method.")
    return None


def verdict(method, target):
    m = re.search(r"[?&]partNumber=(\d+)", target)
    if method != "PUT" or not m:
        return None
    part = int(m.group(1))
    with lock:
        seen[part] = seen.get(part, 0) + 1
        n = seen[part]
    for r in rules:
        f = r.split(":")
        if f[0] == "503" and int(f[1]) == part and n <= int(f[2]):
            return (503, "SlowDown", "Please reduce your request rate.")
        if f[0] == "reset" and int(f[1]) == part and n == 1:
            return "reset"
        if f[0] == "fail-from" and part >= int(f[1]):
            return (500, "InternalError", "We encountered an internal error. Please try again.")
    return None


class Relay(socketserver.BaseRequestHandler):
    def handle(self):
        c = self.request
        data = b""
        while True:
            while b"\r\n\r\n" not in data:
                chunk = c.recv(65536)
                if not chunk:
                    return
                data += chunk
            head, data = data.split(b"\r\n\r\n", 1)
            lines = head.decode("latin-1").split("\r\n")
            method, target = lines[0].split(" ")[:2]
            length = 0
            akid = "-"
            hdrs = {}
            for l in lines[1:]:
                k, _, v = l.partition(":")
                hdrs[k.strip().lower()] = v.strip()
                if k.strip().lower() == "content-length":
                    length = int(v.strip())
                if k.strip().lower() == "authorization":
                    m = re.search(r"Credential=([^/]+)/", v)
                    akid = m.group(1) if m else "?"
            v = verdict(method, target)
            if v == "reset":
                want = length // 2
                while len(data) < want:
                    chunk = c.recv(65536)
                    if not chunk:
                        break
                    data += chunk
                log(f"{method} {target} {akid} reset")
                c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                c.close()
                return
            while len(data) < length:
                chunk = c.recv(1 << 20)
                if not chunk:
                    return
                data += chunk
            body, data = data[:length], data[length:]
            v = check_signature(method, target, hdrs, body) or v
            if v:
                status, code, msg = v
                eb = error_body(code, msg)
                c.sendall(f"HTTP/1.1 {status} {code}\r\nContent-Type: application/xml\r\n"
                          f"Content-Length: {len(eb)}\r\n\r\n".encode() + eb)
                log(f"{method} {target} {akid} {status}")
                continue
            out = [l for l in lines if not l.lower().startswith("connection:")] + ["Connection: close"]
            u = socket.create_connection(("127.0.0.1", upstream))
            u.sendall("\r\n".join(out).encode("latin-1") + b"\r\n\r\n" + body)
            resp = b""
            while True:
                chunk = u.recv(1 << 20)
                if not chunk:
                    break
                resp += chunk
            u.close()
            status = resp.split(b" ", 2)[1].decode() if resp.startswith(b"HTTP/") else "?"
            log(f"{method} {target} {akid} {status}")
            c.sendall(resp)
            return  # s3rver said Connection: close


class Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True


srv = Server(("127.0.0.1", 0), Relay)
with open(portfile + ".tmp", "w") as f:
    f.write(f"{srv.server_address[1]}\n")
import os
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
