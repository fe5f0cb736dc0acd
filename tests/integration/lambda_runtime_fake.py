#!/usr/bin/python3
"""lambda_runtime_fake.py PORT EVENTS_DIR OUT_FILE - a stand-in for AWS Lambda's Runtime API (no Lambda
service runs here), following its published contract ("AWS Lambda runtime API", version 2018-06-01):

  GET  /2018-06-01/runtime/invocation/next            the next event (EVENTS_DIR/*.json, in name order),
                                                      200 with Lambda-Runtime-Aws-Request-Id,
                                                      -Deadline-Ms, -Invoked-Function-Arn, -Trace-Id;
                                                      when they run out, the call waits (as Lambda's does)
  POST /2018-06-01/runtime/invocation/ID/response     the answer: 202 {"status":"OK"}
  POST /2018-06-01/runtime/invocation/ID/error        an invocation error: 202
  POST /2018-06-01/runtime/init/error                 an init error: 202
  anything else                                       404 (an unknown ID: 400, as Lambda answers)

Every POST is appended to OUT_FILE as one JSON line {"kind", "id", "body"} (body parsed when JSON).
It prints "LISTENING 127.0.0.1:<port>" once it listens (PORT 0: a port the system chose).
"""
import json
import os
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

port, events_dir, out_file = int(sys.argv[1]), sys.argv[2], sys.argv[3]
events = sorted(f for f in os.listdir(events_dir) if f.endswith(".json"))
lock = threading.Lock()
given = {}  # request id -> event file


class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def reply(self, code, body=b""):
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        if self.path != "/2018-06-01/runtime/invocation/next":
            return self.reply(404, b'{"errorMessage":"no such route"}')
        with lock:
            name = events.pop(0) if events else None
        if name is None:
            time.sleep(3600)  # nothing more: the call waits, as Lambda's does until the sandbox ends
            return
        rid = "req-" + name[:-5]
        given[rid] = name
        body = open(os.path.join(events_dir, name), "rb").read()
        self.send_response(200)
        self.send_header("Lambda-Runtime-Aws-Request-Id", rid)
        self.send_header("Lambda-Runtime-Deadline-Ms", str(int(time.time() * 1000) + 30000))
        self.send_header("Lambda-Runtime-Invoked-Function-Arn",
                         "arn:aws:lambda:eu-west-1:123456789012:function:diagport-macro")
        self.send_header("Lambda-Runtime-Trace-Id", "Root=1-5bef4de7-ad49b0e87f6ef6c87fc2e700;Sampled=1")
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_POST(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n)
        parts = self.path.split("/")
        if self.path == "/2018-06-01/runtime/init/error":
            kind, rid = "init-error", None
        elif len(parts) == 6 and parts[3] == "invocation" and parts[5] in ("response", "error"):
            kind, rid = parts[5], parts[4]
            if rid not in given:
                return self.reply(400, b'{"errorMessage":"Invalid request ID","errorType":"InvalidRequestID"}')
        else:
            return self.reply(404, b'{"errorMessage":"no such route"}')
        try:
            parsed = json.loads(body)
        except ValueError:
            parsed = body.decode("latin-1")
        with lock, open(out_file, "a") as f:
            f.write(json.dumps({"kind": kind, "id": rid, "body": parsed}) + "\n")
        self.reply(202, b'{"status":"OK"}')


server = ThreadingHTTPServer(("127.0.0.1", port), H)
print(f"LISTENING 127.0.0.1:{server.server_address[1]}", flush=True)
server.serve_forever()
