#!/usr/bin/python3
"""ui_hostile_agent.py - an HTTP server that plays a HOSTILE agent for tests/integration/ui.sh: what the page
of `diagport ui` must show as text and never run or obey. No real agent is like it (a real agent's answers
are made by its own code: numbers are numbers, names are names); it is the attacker, answering the routes
the UI calls with markup in every string and strings (markup) where numbers belong:

  /processes, /process, /runtimes  one process (pid 7) named with HTML
  /crashes      a crash whose type, message, time and signal are HTML or strings, and whose message is one
                long unbroken string (the Crashes card must wrap it)
  /exceptions   exceptions (ndjson) with HTML in type, message, time and frame names
  /gcdump       format=stats: counts, bytes and the GC count as HTML (a <meta> refresh among them), HTML
                type names
  /trace        format=folded: HTML in frame names, counts of Infinity, NaN and -4, and a valid count
                (the profile ends at once, well before its duration)
  /livemetrics  200, then 100 KiB without a record end, then nothing for a minute

Usage: ui_hostile_agent.py PORTFILE (the port it listens on, 127.0.0.1, written there once it listens)
"""
import json
import os
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

PORTFILE = sys.argv[1]
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

    def do_GET(self):
        path = self.path.split("?")[0]
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


srv = ThreadingHTTPServer(("127.0.0.1", 0), H)
srv.daemon_threads = True
with open(PORTFILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORTFILE + ".tmp", PORTFILE)
srv.serve_forever()
