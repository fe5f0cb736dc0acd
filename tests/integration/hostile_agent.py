#!/usr/bin/python3
"""hostile_agent.py - an HTTP server that answers like a diagport agent gone bad, for
tests/integration/fleet_static.sh and ui.sh: what the fleet client and the page of `diagport ui` must survive without harm (terminal escapes
in names and errors, too many processes, processes without a pid, endless bodies). It is not a stand-in
for a real peer (the real agent is tested beside it); it is the attacker.

Usage: hostile_agent.py MODE PORTFILE [LOG]
MODE:
  escapes    /processes: one process named with an OSC title and a clear-screen sequence, its /runtimes
             version and time with escapes too, its /crashes record's exception type, message, stack and file
             too; every capture answers 500 with a problem+json whose detail holds ESC, CR and LF (a forged
             extra line)
  many       /processes lists 300 processes (over the 256 the client takes)
  nopid      /processes lists processes without a pid, with pid 0 and with pid -5
  endless    /processes one process; /stacks answers 200 and never stops sending bytes
  drip       /processes one process; every capture answers 200 and then sends one byte a second, for ever
  plain      /processes one process; every capture answers 200 with a short text (a look-alike that
             collects what is sent to it)
  wants-token  as plain, but a request without an Authorization header gets 401 (problem+json)
  markup     for tests/integration/ui.sh: what the page of `diagport ui` must show as text and never run or
             obey. /processes, /process, /runtimes: one process (pid 7) named with HTML; /crashes: a crash
             whose type, message, time and signal are HTML or strings, the message one long unbroken string;
             /exceptions (ndjson): HTML in type, message, time and frame names; /gcdump format=stats: counts,
             bytes and the GC count as HTML (a <meta> refresh among them), HTML type names; /trace
             format=folded: HTML in frame names, counts of Infinity, NaN and -4 beside a valid one (the
             profile ends at once, well before its duration); /livemetrics: 200, then 100 KiB without a
             record end, then nothing for a minute
Every mode but escapes answers /runtimes and /crashes 404, as an agent older than those routes did, and has
the runtime's version and attach time in /process, where such an agent had them.
Every request's headers are appended to LOG (one JSON object a line) when given.
"""
import json
import socket
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

MODE, PORTFILE = sys.argv[1], sys.argv[2]
LOG = sys.argv[3] if len(sys.argv) > 3 else None
ESC_NAME = "\x1b]0;PWNED\x07\x1b[2Jwebapp"
META = "<meta http-equiv=refresh content='0;url=http://example.invalid/'>"
B = '<b class="pwned">'
NAME = B + "evil</b>" + META


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, code, body, ctype="application/json"):
        b = body.encode() if isinstance(body, str) else body
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(b)

    def markup(self, path):
        """MODE markup: every string HTML, strings (HTML) where numbers belong."""
        if path == "/processes":
            return self.send(200, json.dumps([{"pid": 7, "uid": B, "name": NAME},
                                              {"pid": B + "8", "uid": "u", "name": NAME}]))
        if path == "/process":
            return self.send(200, json.dumps({"pid": 7, "uid": B, "name": NAME, "commandLine": NAME,
                                              "runtimeVersion": NAME, "attachedDateTime": NAME}))
        if path == "/runtimes":
            return self.send(200, json.dumps([{"pid": 7, "uid": B, "name": NAME, "runtimeVersion": NAME,
                                               "attachedDateTime": NAME}]))
        if path == "/crashes":
            return self.send(200, json.dumps([{
                "pid": B + "6", "processName": NAME, "time": NAME, "exitSignal": B + "6", "exitCode": META,
                "exception": {"typeName": NAME, "message": "x" * 400 + META, "hresult": B,
                              "stack": [NAME]}}]))
        if path == "/exceptions":
            lines = [json.dumps({"timestamp": NAME, "typeName": NAME, "message": META, "exceptionId": B,
                                 "stack": {"frames": [{"typeName": NAME, "methodName": META}]}})] * 3
            return self.send(200, "\n".join(lines) + "\n", "application/x-ndjson")
        if path == "/gcdump":
            return self.send(200, json.dumps({
                "objects": NAME, "bytes": META, "typeCount": NAME, "gcCount": META,
                "types": [{"type": NAME, "count": META, "bytes": NAME},
                          {"type": "Hostile.Plain", "count": 5, "bytes": 500},
                          {"type": META, "count": "Infinity", "bytes": -1}]}))
        if path == "/trace":
            folded = (f"a.dll!A.Main;x.dll!{NAME} 5\n"
                      f"a.dll!A.Main;y.dll!{META} 3\n"
                      "a.dll!A.Main;z.dll!Z.Inf Infinity\n"
                      "a.dll!A.Main;z.dll!Z.NaN NaN\n"
                      "a.dll!A.Main;z.dll!Z.Neg -4\n")
            return self.send(200, folded, "text/plain")
        if path == "/livemetrics":
            self.send_response(200)
            self.send_header("Content-Type", "application/json-seq")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                self.wfile.write(b"\x1e" + b"[" * (100 * 1024))
                self.wfile.flush()
                time.sleep(60)
            except OSError:
                pass
            return
        return self.send(404, json.dumps({"title": "Not Found", "status": 404, "detail": "no route " + path}),
                         "application/problem+json")

    def do_GET(self):
        if LOG:
            with open(LOG, "a") as f:
                f.write(json.dumps({"path": self.path, "headers": self.headers.items()}) + "\n")
        path = self.path.split("?")[0]
        if MODE == "markup":
            return self.markup(path)
        if MODE == "wants-token" and not self.headers.get("Authorization"):
            return self.send(401, json.dumps({"title": "Unauthorized", "status": 401,
                                              "detail": "a bearer token is required"}), "application/problem+json")
        if path == "/processes":
            if MODE == "many":
                procs = [{"pid": 1000 + i, "uid": "u", "name": "p"} for i in range(300)]
            elif MODE == "nopid":
                procs = [{"uid": "a", "name": "nopid"}, {"pid": 0, "name": "zero"}, {"pid": -5, "name": "neg"}]
            elif MODE == "escapes":
                procs = [{"pid": 7, "uid": "u", "name": ESC_NAME}]
            else:
                procs = [{"pid": 7, "uid": "u", "name": "webapp"}]
            return self.send(200, json.dumps(procs))
        if path == "/runtimes" and MODE == "escapes":
            return self.send(200, json.dumps([{"pid": 7, "uid": "u", "name": ESC_NAME,
                                               "runtimeVersion": "10.0.0\x1b[31m",
                                               "attachedDateTime": "2026-01-01T00:00:00\x1b[2JZ"}]))
        if path == "/crashes" and MODE == "escapes":
            return self.send(200, json.dumps([{
                "pid": 6, "processName": ESC_NAME, "time": "2026-01-01T00:00:00.000Z", "exitSignal": 6,
                "exitCode": None, "exception": {"typeName": "Evil.\x1b[2JBoomException", "message": "a\r\nFAKE line",
                                                "hresult": "0x80131509", "stack": ["x.dll!\x1b]0;PWNED\x07Main()"]},
                "artifacts": [{"kind": "dump", "state": "kept", "file": "/dumps/\x1b[2Jcrash.dmp", "bytes": 5,
                               "location": None, "error": None}]}]))
        if path in ("/runtimes", "/crashes"):  # an agent older than these: its /process had the runtime's fields
            return self.send(404, json.dumps({"title": "Not Found", "status": 404, "detail": "no route " + path}),
                             "application/problem+json")
        if path == "/process":
            if MODE == "escapes":
                return self.send(200, json.dumps({"pid": 7, "uid": "u", "name": ESC_NAME, "commandLine": ESC_NAME}))
            return self.send(200, json.dumps({"pid": 7, "uid": "u", "name": "webapp", "commandLine": "webapp",
                                              "runtimeVersion": "9.0.11", "attachedDateTime": "2026-01-01T00:00:00Z"}))
        if MODE == "escapes":
            detail = "bad thing\x1b[2J\r\nFAKE  999  succeeded  all fine"
            return self.send(500, json.dumps({"title": "x", "status": 500, "detail": detail}),
                             "application/problem+json")
        if MODE in ("plain", "wants-token"):
            return self.send(200, "stacks of 7: Main\n", "text/plain")
        if MODE == "drip":
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Connection", "close")
            self.end_headers()
            try:
                while True:
                    self.wfile.write(b"x")
                    self.wfile.flush()
                    time.sleep(1)
            except OSError:
                return
        if MODE == "endless":
            self.send_response(200)
            self.send_header("Content-Type", "text/plain")
            self.send_header("Connection", "close")
            self.end_headers()
            chunk = b"x" * 65536
            try:
                while True:
                    self.wfile.write(chunk)
            except OSError:
                return
        return self.send(404, "{}")


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
