#!/usr/bin/python3
"""kubeapi_fake.py - a small stand-in for the Kubernetes API server, for
tests/integration/webhook_certs.sh.

It is a contract-following fake, not a Kubernetes: no kube-apiserver can run
on the test machine (it is not in Debian's archive, and the tests run
offline), so this serves the few resources `diagport webhook certs` uses, the
way the API conventions and the API server's own code say the real one does
(https://kubernetes.io/docs/reference/using-api/api-concepts/):

  GET/POST     /api/v1/namespaces/NS/secrets[/NAME]
  PUT          /api/v1/namespaces/NS/secrets/NAME
  GET/PATCH    /apis/admissionregistration.k8s.io/v1/mutatingwebhookconfigurations/NAME
  GET          /api/v1/namespaces/NS/pods/NAME/portforward?ports=P   (WebSocket; kube_portfwd.py)

- HTTPS only (the test makes the certificate with openssl); every request
  needs "Authorization: Bearer TOKEN", TOKEN being the token file's content
  now (re-read per request): else 401 with a metav1.Status, reason
  Unauthorized.
- Errors are metav1.Status bodies with the reasons and messages of
  k8s.io/apimachinery/pkg/api/errors: 404 NotFound ('secrets "x" not
  found'), 409 AlreadyExists on a create of an existing name, 409 Conflict
  on an update whose metadata.resourceVersion is not the stored one ("the
  object has been modified; please apply your changes to the latest version
  and try again"), 422 Invalid for a Secret that fails validation (data not
  base64, a kubernetes.io/tls Secret without tls.crt and tls.key, a changed
  type, which is immutable), 400 BadRequest for a name or namespace in the
  body that is not the URL's.
- PATCH takes application/json-patch+json only (others: 415), applied with
  python3-jsonpatch. Any patch that does not apply, including a failed
  "test" operation, is 422 with reason Invalid and the message "the server
  rejected our request due to an error in our request": that is what the
  API server's patch handler does (staging/src/k8s.io/apiserver/pkg/endpoints/
  handlers/patch.go: patchObj.Apply errors become
  NewGenericServerResponse(http.StatusUnprocessableEntity, ...)).
- Every write that changes an object gives it the next resourceVersion of
  one counter for the whole store (etcd's revision); an update that changes
  nothing is a no-op that keeps it.
- Every API request is logged as "METHOD PATH STATUS" to --log (a PATCH
  also with its operations: " test:/metadata/resourceVersion,add:/webhooks/2/...").

Test control, no token needed, not logged, under /__fake/:
  GET  /__fake/state          the store: {"secrets": {"NS/NAME": obj}, "mutatingwebhookconfigurations": {...}}
  POST /__fake/object         store this object as is (a new resourceVersion), as kubectl would
  POST /__fake/delete         {"kind": "Secret"|"MutatingWebhookConfiguration", "namespace": NS, "name": NAME}
  POST /__fake/fault          {"method": M, "path": P, "action": A, "times": N, ...} for the next N requests M P:
        action "status":        answer {"status": S, "message": ...} without doing anything
        action "bump":          first change the stored object as a concurrent writer would (an annotation,
                                a new resourceVersion), then handle the request: a PUT or a PATCH with a
                                `test` of the old resourceVersion then meets a newer version
        action "create-first":  first store {"object": ...} (another Job's Secret won the race), then
                                handle the request: a POST then gets 409 AlreadyExists
        action "rotate-token":  handle the request, then write {"token": ...} into the token file, as the
                                kubelet rotates a projected token: the next request needs the new one

  POST /__fake/forward         {"namespace", "pod", "port", "to": "127.0.0.1:N"[, "oversize": N]}: where a
                              pod's port leads for port-forward; a port with none is refused by the
                              kubelet (the message on the error channel, kube_portfwd.py)

Usage: kubeapi_fake.py --cert C --key K --token-file T --log L --ready R [--seed FILE]...
(the port it listens on, on 127.0.0.1, is written to R when it accepts connections).
"""
import argparse
import base64
import binascii
import copy
import datetime
import http.server
import json
import os
import re
import ssl
import sys
import threading
import uuid

import jsonpatch
import yaml

import kube_portfwd

SECRETS = re.compile(r"^/api/v1/namespaces/([a-z0-9.-]+)/secrets(?:/([a-z0-9.-]+))?$")
MWCS = re.compile(r"^/apis/admissionregistration\.k8s\.io/v1/mutatingwebhookconfigurations/([a-z0-9.-]+)$")
PORTFWD = re.compile(r"^/api/v1/namespaces/([a-z0-9.-]+)/pods/([a-z0-9.-]+)/portforward$")
MAX_BODY = 3 << 20  # the API server's limit on a request body is 3 MiB

lock = threading.Lock()
store = {"secrets": {}, "mutatingwebhookconfigurations": {}}
faults = []
forwards = {}  # "NS/POD/PORT" -> {"to": "HOST:PORT", ...} (POST /__fake/forward)
revision = [1000]
args = None


def next_rv():
    revision[0] += 1
    return str(revision[0])


def status(code, reason, message, details=None):
    s = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure", "message": message,
         "reason": reason, "code": code}
    if details is not None:
        s["details"] = details
    return code, s


def not_found(resource, name, group=""):
    qual = resource + ("." + group if group else "")
    return status(404, "NotFound", f'{qual} "{name}" not found', {"name": name, "group": group, "kind": resource} if group else {"name": name, "kind": resource})


def conflict(resource, name, group=""):
    qual = resource + ("." + group if group else "")
    return status(409, "Conflict", f'Operation cannot be fulfilled on {qual} "{name}": the object has been modified; '
                  "please apply your changes to the latest version and try again", {"name": name, "kind": resource})


def invalid(kind, name, field, value, detail):
    return status(422, "Invalid", f'{kind} "{name}" is invalid: {field}: Invalid value: "{value}": {detail}',
                  {"name": name, "kind": kind, "causes": [{"reason": "FieldValueInvalid", "message": detail,
                                                           "field": field}]})


def stamp_new(obj):
    meta = obj.setdefault("metadata", {})
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
    meta["resourceVersion"] = next_rv()
    return obj


def strict_b64(s):
    if not isinstance(s, str) or len(s) % 4:
        return None
    try:
        return base64.b64decode(s, validate=True)
    except (binascii.Error, ValueError):
        return None


def validate_secret(obj, name):
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        return invalid("Secret", name, "data", "", "must be a map")
    for k, v in data.items():
        if strict_b64(v) is None:
            return status(400, "BadRequest", f"Secret in version \"v1\" cannot be handled as a Secret: illegal base64 data at data[{k}]")
    if obj.get("type") == "kubernetes.io/tls":
        for k in ("tls.crt", "tls.key"):
            if k not in data:
                return invalid("Secret", name, f"data[{k}]", "", "Required value")
    return None


def same_but_metadata(a, b):
    a, b = copy.deepcopy(a), copy.deepcopy(b)
    for o in (a, b):
        o.get("metadata", {}).pop("resourceVersion", None)
        o.get("metadata", {}).pop("managedFields", None)
    return a == b


def apply_fault(method, path):
    """The fault for this request, if any (consumed)."""
    for f in faults:
        if f["method"] == method and f["path"] == path and f["times"] > 0:
            f["times"] -= 1
            return f
    return None


def bump(path):
    m = SECRETS.match(path)
    if m and m.group(2):
        obj = store["secrets"].get(f"{m.group(1)}/{m.group(2)}")
    else:
        m = MWCS.match(path)
        obj = store["mutatingwebhookconfigurations"].get(m.group(1)) if m else None
    if obj is not None:
        ann = obj["metadata"].setdefault("annotations", {})
        ann["fake.diagport.dev/concurrent-writer"] = str(int(ann.get("fake.diagport.dev/concurrent-writer", "0")) + 1)
        obj["metadata"]["resourceVersion"] = next_rv()


def secrets(method, path, ns, name, body):
    key = f"{ns}/{name}"
    if method == "GET" and name:
        obj = store["secrets"].get(key)
        return (200, obj) if obj else not_found("secrets", name)
    if method == "POST" and not name:
        if not isinstance(body, dict) or body.get("kind") != "Secret":
            return status(400, "BadRequest", "the body is not a Secret")
        meta = body.setdefault("metadata", {})
        n = meta.get("name")
        if not n:
            return invalid("Secret", "", "metadata.name", "", "Required value: name or generateName is required")
        if meta.get("namespace", ns) != ns:
            return status(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
        if meta.get("resourceVersion"):
            return status(500, "InternalError", "resourceVersion should not be set on objects to be created")
        if f"{ns}/{n}" in store["secrets"]:
            return status(409, "AlreadyExists", f'secrets "{n}" already exists', {"name": n, "kind": "secrets"})
        bad = validate_secret(body, n)
        if bad:
            return bad
        meta["namespace"] = ns
        store["secrets"][f"{ns}/{n}"] = stamp_new(body)
        return 201, body
    if method == "PUT" and name:
        cur = store["secrets"].get(key)
        if cur is None:
            return not_found("secrets", name)
        if not isinstance(body, dict) or body.get("kind") != "Secret":
            return status(400, "BadRequest", "the body is not a Secret")
        meta = body.setdefault("metadata", {})
        if meta.get("name") != name:
            return status(400, "BadRequest", f"the name of the object ({meta.get('name')}) does not match the name on the URL ({name})")
        if meta.get("namespace", ns) != ns:
            return status(400, "BadRequest", "the namespace of the provided object does not match the namespace sent on the request")
        rv = meta.get("resourceVersion")
        if rv and rv != cur["metadata"]["resourceVersion"]:
            return conflict("secrets", name)
        if body.get("type", "Opaque") != cur.get("type", "Opaque"):
            return invalid("Secret", name, "type", body.get("type"), "field is immutable")
        bad = validate_secret(body, name)
        if bad:
            return bad
        meta["namespace"] = ns
        meta["uid"] = cur["metadata"]["uid"]
        meta["creationTimestamp"] = cur["metadata"]["creationTimestamp"]
        if same_but_metadata(body, cur):
            return 200, cur
        meta["resourceVersion"] = next_rv()
        store["secrets"][key] = body
        return 200, body
    return status(405, "MethodNotAllowed", f"{method} is not supported here")


def mwcs(method, name, body, ctype):
    group = "admissionregistration.k8s.io"
    cur = store["mutatingwebhookconfigurations"].get(name)
    if method not in ("GET", "PATCH"):
        return status(405, "MethodNotAllowed", f"{method} is not supported here")
    if cur is None:
        return not_found("mutatingwebhookconfigurations", name, group)
    if method == "GET":
        return 200, cur
    if ctype != "application/json-patch+json":
        return status(415, "UnsupportedMediaType", f"the body of the request was in an unknown format - accepted media types include: application/json-patch+json, ... (got {ctype})")
    try:
        patch = jsonpatch.JsonPatch(body)
    except Exception as e:  # noqa: BLE001 - any decoding problem is a 400
        return status(400, "BadRequest", str(e))
    try:
        new = patch.apply(copy.deepcopy(cur))
    except Exception:  # noqa: BLE001 - as the API server: every Apply error is a 422
        return status(422, "Invalid", "the server rejected our request due to an error in our request", {})
    for i, w in enumerate(new.get("webhooks") or []):
        cb = (w.get("clientConfig") or {}).get("caBundle")
        if cb is not None and strict_b64(cb) is None:
            return invalid("MutatingWebhookConfiguration", name, f"webhooks[{i}].clientConfig.caBundle", "", "illegal base64 data")
    new["metadata"]["name"] = name
    new["metadata"]["uid"] = cur["metadata"]["uid"]
    new["metadata"]["resourceVersion"] = cur["metadata"]["resourceVersion"]
    if new == cur:
        return 200, cur
    new["metadata"]["resourceVersion"] = next_rv()
    store["mutatingwebhookconfigurations"][name] = new
    return 200, new


def portforward_route(method, ns, pod):
    """The API server's side of pods/portforward: the upgrade itself happens after the store's lock."""
    if method not in ("GET", "POST"):
        return status(405, "MethodNotAllowed", f"{method} is not supported here")
    return 101, None


def forward_lookup(ns, pod, port):
    with lock:
        return forwards.get(f"{ns}/{pod}/{port}")


def forward_control(body):
    forwards[f"{body['namespace']}/{body['pod']}/{int(body['port'])}"] = body
    return 200, body


def portforward_serve(handler, path):
    m = PORTFWD.match(path)

    def log(line):
        with lock, open(args.log, "a") as f:
            f.write(line + "\n")
    kube_portfwd.serve(handler, m.group(1), m.group(2), forward_lookup, log)


def control(method, path, body):
    if path == "/__fake/forward" and method == "POST":
        return forward_control(body)
    if path == "/__fake/state" and method == "GET":
        return 200, store
    if path == "/__fake/object" and method == "POST":
        kind = body.get("kind")
        meta = body.setdefault("metadata", {})
        if kind == "Secret":
            key = f"{meta.get('namespace')}/{meta['name']}"
            old = store["secrets"].get(key)
            store["secrets"][key] = body
        elif kind == "MutatingWebhookConfiguration":
            old = store["mutatingwebhookconfigurations"].get(meta["name"])
            store["mutatingwebhookconfigurations"][meta["name"]] = body
        else:
            return 400, {"error": f"cannot store a {kind}"}
        if old:
            meta["uid"] = old["metadata"]["uid"]
            meta["creationTimestamp"] = old["metadata"]["creationTimestamp"]
            meta["resourceVersion"] = next_rv()
        else:
            stamp_new(body)
        return 200, body
    if path == "/__fake/delete" and method == "POST":
        if body["kind"] == "Secret":
            store["secrets"].pop(f"{body['namespace']}/{body['name']}", None)
        else:
            store["mutatingwebhookconfigurations"].pop(body["name"], None)
        return 200, {}
    if path == "/__fake/fault" and method == "POST":
        body.setdefault("times", 1)
        faults.append(body)
        return 200, body
    return 404, {"error": "no such control"}


class Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *a):  # quiet: the request log is ours
        pass

    def reply(self, code, obj):
        data = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def handle_any(self):
        method, path = self.command, self.path.split("?", 1)[0]
        n = int(self.headers.get("Content-Length") or 0)
        if n > MAX_BODY:
            self.reply(*status(413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"))
            return
        raw = self.rfile.read(n) if n else b""
        try:
            body = json.loads(raw) if raw else None
        except ValueError as e:
            body, bad_json = None, str(e)
        else:
            bad_json = None
        with lock:
            if path.startswith("/__fake/"):
                self.reply(*control(method, path, body))
                return
            code, obj = self.api(method, path, body, bad_json)
            ops = ""
            if method == "PATCH" and isinstance(body, list):
                ops = " " + ",".join(f"{o.get('op')}:{o.get('path')}" for o in body if isinstance(o, dict))
            with open(args.log, "a") as f:
                f.write(f"{method} {path} {code}{ops}\n")
        if code == 101:
            portforward_serve(self, path)
            return
        self.reply(code, obj)

    def api(self, method, path, body, bad_json):
        token = open(args.token_file).read().strip()
        if self.headers.get("Authorization") != f"Bearer {token}":
            return status(401, "Unauthorized", "Unauthorized")
        f = apply_fault(method, path)
        if f and f["action"] == "status":
            code = f["status"]
            reason = {500: "InternalError", 503: "ServiceUnavailable", 403: "Forbidden", 429: "TooManyRequests"}.get(code, "Unknown")
            return status(code, reason, f.get("message", f"injected {code}"))
        if f and f["action"] == "bump":
            bump(path)
        if f and f["action"] == "create-first":
            obj = copy.deepcopy(f["object"])
            meta = obj["metadata"]
            store["secrets"][f"{meta['namespace']}/{meta['name']}"] = stamp_new(obj)
        if f and f["action"] == "rotate-token":
            with open(args.token_file + ".tmp", "w") as t:
                t.write(f["token"] + "\n")
            os.rename(args.token_file + ".tmp", args.token_file)
        if bad_json is not None:
            return status(400, "BadRequest", f"the body is not JSON: {bad_json}")
        m = SECRETS.match(path)
        if m:
            return secrets(method, path, m.group(1), m.group(2), body)
        m = PORTFWD.match(path)
        if m:
            return portforward_route(method, m.group(1), m.group(2))
        m = MWCS.match(path)
        if m:
            return mwcs(method, m.group(1), body, (self.headers.get("Content-Type") or "").split(";")[0].strip())
        return status(404, "NotFound", "the server could not find the requested resource", {})

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = handle_any


def main():
    global args
    p = argparse.ArgumentParser()
    p.add_argument("--cert", required=True)
    p.add_argument("--key", required=True)
    p.add_argument("--token-file", required=True)
    p.add_argument("--log", required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--seed", action="append", default=[])
    args = p.parse_args()
    for path in args.seed:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc.get("kind") == "MutatingWebhookConfiguration":
                    store["mutatingwebhookconfigurations"][doc["metadata"]["name"]] = stamp_new(doc)
                elif doc.get("kind") == "Secret":
                    m = doc["metadata"]
                    store["secrets"][f"{m['namespace']}/{m['name']}"] = stamp_new(doc)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.ready + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(args.ready + ".tmp", args.ready)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
