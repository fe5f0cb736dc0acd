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
        action "answer":        answer 200 with {"body": ...} as it is (a hostile or broken API server)
        action "pages":         answer a PodList page that never ends: {"items": N} pods per page (named
                                endless-PAGE-I, in {"namespace": NS}, not injected), metadata.continue a new
                                token each time, or {"token": T} every time (a list that loops)

  POST /__fake/forward         {"namespace", "pod", "port", "to": "127.0.0.1:N"[, "oversize": N, "tee": PATH,
                              "coalesce": true]} (kube_portfwd.py's knobs): where a
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
import urllib.parse
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


# ---- the cluster: workloads, pods, authentication, RBAC (tests/integration/fleet_kube.sh) ----------------
#
# On with --token-auth-file (what kube-apiserver's static token file says, CSV: token,user,uid,"group1,group2"),
# optionally --basic-auth-file (the same CSV with a password first; kube-apiserver dropped it in 1.19, clients
# still send it, proxies still take it) and --client-ca-file (a client certificate signed by it is the user
# named by its CN, its O values the groups: the API server's x509 authenticator). The --token-file token
# stays a system:masters user. Everyone authenticated is also in system:authenticated.
#
# Authorization is RBAC as pkg/registry/rbac/validation and plugin/pkg/auth/authorizer/rbac evaluate it:
# system:masters may do anything; else a ClusterRoleBinding or (in the request's namespace) a RoleBinding
# whose subjects name the user, one of its groups or its service account, bound to a ClusterRole or Role
# with a rule whose verbs, apiGroups, resources ("*", "res/sub", "*/sub") and resourceNames match, or
# whose nonResourceURLs match the path. The bootstrap roles every cluster has are seeded:
# system:basic-user (self reviews) and system:discovery (the discovery paths), bound to
# system:authenticated. A refusal is the API server's 403 ("pods is forbidden: User "bob" cannot list
# resource "pods" in API group "" in the namespace "shop"", responsewriters/errors.go forbiddenMessage).
#
# Served (api-concepts): discovery (/api, /apis, /api/v1, /apis/GROUP/VERSION, /version); get and list of
# pods, deployments, statefulsets, daemonsets, replicasets (apps/v1), jobs (batch/v1), namespaces, secrets
# and the RBAC objects; lists in a namespace or across all, with labelSelector (equality and set-based, as
# k8s.io/apimachinery/pkg/labels parses it), limit and continue (an opaque token; items in key order as
# etcd returns them); SelfSubjectAccessReview (authorization.k8s.io/v1) and SelfSubjectReview
# (authentication.k8s.io/v1); server-side printing (Accept: ...;as=Table) as a Table of NAME and AGE.

CLUSTER = {"on": False, "tokens": {}, "basic": {}}
KINDS = {  # kind: (group, version, plural, namespaced)
    "Pod": ("", "v1", "pods", True), "Secret": ("", "v1", "secrets", True), "Namespace": ("", "v1", "namespaces", False),
    "Deployment": ("apps", "v1", "deployments", True), "StatefulSet": ("apps", "v1", "statefulsets", True),
    "DaemonSet": ("apps", "v1", "daemonsets", True), "ReplicaSet": ("apps", "v1", "replicasets", True),
    "Job": ("batch", "v1", "jobs", True),
    "Role": ("rbac.authorization.k8s.io", "v1", "roles", True),
    "ClusterRole": ("rbac.authorization.k8s.io", "v1", "clusterroles", False),
    "RoleBinding": ("rbac.authorization.k8s.io", "v1", "rolebindings", True),
    "ClusterRoleBinding": ("rbac.authorization.k8s.io", "v1", "clusterrolebindings", False),
}
PLURALS = {v[2]: (k,) + v for k, v in KINDS.items()}
SHORT = {"pods": ["po"], "deployments": ["deploy"], "statefulsets": ["sts"], "daemonsets": ["ds"], "replicasets": ["rs"],
         "namespaces": ["ns"]}
SUBRESOURCES = {"pods": ["portforward", "exec", "log", "status"], "deployments": ["scale", "status"]}
BOOTSTRAP = [
    {"kind": "ClusterRole", "metadata": {"name": "system:basic-user"}, "rules": [
        {"apiGroups": ["authorization.k8s.io"], "resources": ["selfsubjectaccessreviews", "selfsubjectrulesreviews"], "verbs": ["create"]},
        {"apiGroups": ["authentication.k8s.io"], "resources": ["selfsubjectreviews"], "verbs": ["create"]}]},
    {"kind": "ClusterRole", "metadata": {"name": "system:discovery"}, "rules": [
        {"nonResourceURLs": ["/api", "/api/*", "/apis", "/apis/*", "/healthz", "/livez", "/openapi", "/openapi/*", "/readyz", "/version", "/version/"], "verbs": ["get"]}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "system:basic-user"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:basic-user"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]},
    {"kind": "ClusterRoleBinding", "metadata": {"name": "system:discovery"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "system:discovery"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "system:authenticated"}]},
]


def cluster_load_users(token_file, basic_file):
    import csv
    for path, table in ((token_file, "tokens"), (basic_file, "basic")):
        if not path:
            continue
        with open(path) as f:
            for row in csv.reader(f):
                if len(row) >= 3:
                    CLUSTER[table][row[0]] = {"name": row[1], "uid": row[2],
                                              "groups": [g for g in (row[3] if len(row) > 3 else "").split(",") if g]}
    CLUSTER["on"] = True
    for obj in BOOTSTRAP:
        cluster_store(dict(obj, apiVersion="rbac.authorization.k8s.io/v1"))


def cluster_store(doc):
    """Store a kubectl-style object (a List's items one by one); False for a kind we do not serve."""
    if doc.get("kind") == "List":
        return all(cluster_store(i) for i in doc.get("items") or [])
    k = KINDS.get(doc.get("kind"))
    if k is None:
        return False
    meta = doc.setdefault("metadata", {})
    if k[3]:
        meta.setdefault("namespace", "default")
    key = f"{meta['namespace']}/{meta['name']}" if k[3] else meta["name"]
    doc.setdefault("apiVersion", f"{k[0]}/{k[1]}" if k[0] else k[1])
    store.setdefault(k[2], {})[key] = stamp_new(doc)
    return True


def cluster_user(handler):
    """(name, groups) of the requester, or None: client certificate, bearer token, basic."""
    try:
        cert = handler.connection.getpeercert()
    except (AttributeError, ValueError):
        cert = None
    auth = handler.headers.get("Authorization") or ""
    if auth.startswith("Bearer "):
        tok = auth[7:]
        u = CLUSTER["tokens"].get(tok)
        if u:
            return u["name"], u["groups"] + ["system:authenticated"]
        if args.token_file and tok == open(args.token_file).read().strip():
            return "system:serviceaccount:diagport-system:diagport-webhook", ["system:masters", "system:authenticated"]
        return None
    if auth.startswith("Basic "):
        try:
            user, _, pw = base64.b64decode(auth[6:]).decode().partition(":")
        except (binascii.Error, UnicodeDecodeError):
            return None
        u = CLUSTER["basic"].get(pw)
        return (u["name"], u["groups"] + ["system:authenticated"]) if u and u["name"] == user else None
    if cert:
        cn = [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "commonName"]
        orgs = [v for rdn in cert.get("subject", ()) for k, v in rdn if k == "organizationName"]
        if cn:
            return cn[0], orgs + ["system:authenticated"]
    return None


def parse_request(method, path, query):
    """The request's attributes, as the API server's RequestInfoFactory makes them."""
    parts = [p for p in path.split("/") if p]
    attrs = {"path": path, "resource": None, "subresource": "", "namespace": "", "name": "", "group": ""}
    if parts[:1] == ["api"] and len(parts) >= 2:
        rest = parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 3:
        attrs["group"], rest = parts[1], parts[3:]
    else:
        rest = None
    if rest:
        if rest[0] == "namespaces" and len(rest) >= 3:
            attrs["namespace"], rest = rest[1], rest[2:]
        elif rest[0] == "namespaces" and len(rest) == 2:
            attrs["namespace"] = rest[1]
        attrs["resource"] = rest[0]
        attrs["name"] = rest[1] if len(rest) > 1 else ""
        attrs["subresource"] = rest[2] if len(rest) > 2 else ""
    if attrs["resource"] is None:
        attrs["verb"] = {"GET": "get", "POST": "post", "PUT": "put", "PATCH": "patch", "DELETE": "delete"}.get(method, method.lower())
    elif method == "GET":
        attrs["verb"] = "get" if attrs["name"] else ("watch" if query.get("watch") in ("true", "1") else "list")
    else:
        attrs["verb"] = {"POST": "create", "PUT": "update", "PATCH": "patch",
                         "DELETE": "delete" if attrs["name"] else "deletecollection"}.get(method, method.lower())
    return attrs


def rule_allows(rule, a):
    verbs = rule.get("verbs") or []
    if "*" not in verbs and a["verb"] not in verbs:
        return False
    if a["resource"] is None:
        return any(u == "*" or u == a["path"] or (u.endswith("*") and a["path"].startswith(u[:-1]))
                   for u in rule.get("nonResourceURLs") or [])
    groups = rule.get("apiGroups") or []
    if "*" not in groups and a["group"] not in groups:
        return False
    combined = a["resource"] + ("/" + a["subresource"] if a["subresource"] else "")
    if not any(r == "*" or r == combined or (a["subresource"] and r == "*/" + a["subresource"])
               for r in rule.get("resources") or []):
        return False
    names = rule.get("resourceNames") or []
    return not names or a["name"] in names


def subject_is(s, user, groups, binding_ns):
    if s.get("kind") == "User":
        return s.get("name") == user
    if s.get("kind") == "Group":
        return s.get("name") in groups
    if s.get("kind") == "ServiceAccount":
        return user == f"system:serviceaccount:{s.get('namespace') or binding_ns}:{s.get('name')}"
    return False


def authorize(user, groups, a):
    if "system:masters" in groups:
        return True
    bindings = [(b, "") for b in store.get("clusterrolebindings", {}).values()]
    if a["namespace"]:
        bindings += [(b, a["namespace"]) for k, b in store.get("rolebindings", {}).items()
                     if k.startswith(a["namespace"] + "/")]
    for b, ns in bindings:
        if not any(subject_is(s, user, groups, ns) for s in b.get("subjects") or []):
            continue
        ref = b.get("roleRef") or {}
        role = (store.get("clusterroles", {}).get(ref.get("name")) if ref.get("kind") == "ClusterRole"
                else store.get("roles", {}).get(f"{ns}/{ref.get('name')}") if ns else None)
        if role and any(rule_allows(r, a) for r in role.get("rules") or []):
            return True
    return False


def forbidden(user, a):
    if a["resource"] is None:
        return status(403, "Forbidden", f'forbidden: User "{user}" cannot {a["verb"]} path "{a["path"]}"', {})
    res = a["resource"] + ("/" + a["subresource"] if a["subresource"] else "")
    where = f'in the namespace "{a["namespace"]}"' if a["namespace"] else "at the cluster scope"
    qual = a["resource"] + ("." + a["group"] if a["group"] else "")
    what = f'{qual} "{a["name"]}"' if a["name"] else qual
    return status(403, "Forbidden", f'{what} is forbidden: User "{user}" cannot {a["verb"]} resource "{res}" in API group "{a["group"]}" {where}',
                  {"name": a["name"], "group": a["group"], "kind": a["resource"]} if a["name"] else {"group": a["group"], "kind": a["resource"]})


def parse_selector(text):
    """k8s.io/apimachinery/pkg/labels: a list of (key, op, values); ValueError when it does not parse."""
    reqs, depth, cur = [], 0, ""
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            reqs.append(cur)
            cur = ""
        else:
            cur += ch
    reqs.append(cur)
    out = []
    name = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
    for r in (r.strip() for r in reqs):
        if not r:
            if text.strip():
                raise ValueError("found '', expected: identifier")
            continue
        m = re.match(r"^(\S+)\s+(in|notin)\s*\(([^)]*)\)$", r)
        if m:
            key, op, vals = m.group(1), m.group(2), [v.strip() for v in m.group(3).split(",")]
        elif r.startswith("!"):
            key, op, vals = r[1:].strip(), "!", []
        elif "!=" in r:
            key, _, v = r.partition("!=")
            op, vals = "!=", [v.strip()]
        elif "==" in r or "=" in r:
            key, _, v = r.partition("==") if "==" in r else r.partition("=")
            op, vals = "=", [v.strip()]
        else:
            key, op, vals = r, "exists", []
        key = key.strip()
        if not name.match(key):
            raise ValueError(f"invalid label key \"{key}\"")
        out.append((key, op, vals))
    return out


def selector_matches(reqs, labels):
    for key, op, vals in reqs:
        has = key in labels
        if op == "in" and not (has and labels[key] in vals):
            return False
        if op == "notin" and has and labels[key] in vals:
            return False
        if op == "=" and labels.get(key) != vals[0]:
            return False
        if op == "!=" and has and labels[key] == vals[0]:
            return False
        if op == "exists" and not has:
            return False
        if op == "!" and has:
            return False
    return True


def discovery(path):
    groups = sorted({k[0] for k in KINDS.values() if k[0]} | {"authorization.k8s.io", "authentication.k8s.io"})
    if path == "/api":
        return 200, {"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": [
            {"clientCIDR": "0.0.0.0/0", "serverAddress": "127.0.0.1"}]}
    if path == "/apis":
        return 200, {"kind": "APIGroupList", "apiVersion": "v1", "groups": [
            {"name": g, "versions": [{"groupVersion": f"{g}/v1", "version": "v1"}],
             "preferredVersion": {"groupVersion": f"{g}/v1", "version": "v1"}} for g in groups]}
    if path == "/version":
        return 200, {"major": "1", "minor": "32", "gitVersion": "v1.32.0-diagport-fake", "platform": "linux/amd64"}
    m = re.match(r"^/api/v1$|^/apis/([^/]+)/v1$", path)
    if not m:
        return None
    group = m.group(1) or ""
    res = []
    for kind, (g, v, plural, nsd) in KINDS.items():
        if g == group:
            res.append({"name": plural, "singularName": kind.lower(), "namespaced": nsd, "kind": kind,
                        "verbs": ["get", "list", "create", "update", "patch", "delete"], "shortNames": SHORT.get(plural, [])})
            for sub in SUBRESOURCES.get(plural, []):
                res.append({"name": f"{plural}/{sub}", "singularName": "", "namespaced": nsd, "kind": kind,
                            "verbs": ["get", "create"]})
    if group == "authorization.k8s.io":
        res.append({"name": "selfsubjectaccessreviews", "singularName": "selfsubjectaccessreview", "namespaced": False,
                    "kind": "SelfSubjectAccessReview", "verbs": ["create"]})
    if group == "authentication.k8s.io":
        res.append({"name": "selfsubjectreviews", "singularName": "selfsubjectreview", "namespaced": False,
                    "kind": "SelfSubjectReview", "verbs": ["create"]})
    if not res:
        return None
    return 200, {"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": f"{group}/v1" if group else "v1",
                 "resources": res}


def as_table(obj, single):
    """Server-side printing (meta.k8s.io/v1 Table): NAME and AGE, the object in each row."""
    items = [obj] if single else obj.get("items", [])
    rows = [{"cells": [i["metadata"]["name"], "1m"], "object": {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1",
                                                               "metadata": i["metadata"]}} for i in items]
    return {"kind": "Table", "apiVersion": "meta.k8s.io/v1", "metadata": obj.get("metadata", {}),
            "columnDefinitions": [{"name": "Name", "type": "string", "format": "name", "description": "", "priority": 0},
                                  {"name": "Age", "type": "string", "format": "", "description": "", "priority": 0}],
            "rows": rows}


def cluster_list(plural, a, query):
    kind = PLURALS[plural][0]
    try:
        reqs = parse_selector(query.get("labelSelector", ""))
    except ValueError as e:
        return status(400, "BadRequest", f"unable to parse requirement: {e}")
    objs = store.get(plural, {})
    keys = sorted(k for k in objs if not a["namespace"] or k.startswith(a["namespace"] + "/"))
    keys = [k for k in keys if selector_matches(reqs, objs[k]["metadata"].get("labels") or {})]
    start = 0
    if query.get("continue"):
        try:
            after = json.loads(base64.b64decode(query["continue"]))["after"]
        except (ValueError, KeyError, binascii.Error):
            return status(400, "BadRequest", "continue key is not valid: illegal base64 data")
        start = next((i for i, k in enumerate(keys) if k > after), len(keys))
    limit = int(query.get("limit") or 0)
    page = keys[start:start + limit] if limit > 0 else keys[start:]
    meta = {"resourceVersion": str(revision[0])}
    if limit > 0 and start + limit < len(keys):
        meta["continue"] = base64.b64encode(json.dumps({"after": page[-1]}).encode()).decode()
        meta["remainingItemCount"] = len(keys) - start - limit
    g, v = PLURALS[plural][1], PLURALS[plural][2]
    return 200, {"kind": kind + "List", "apiVersion": f"{g}/{v}" if g else v, "metadata": meta,
                 "items": [objs[k] for k in page]}


def cluster_api(handler, user, method, path, query, body):
    """The cluster's answer to an authenticated request, or None to let the webhook-certs routes answer."""
    name, groups = user
    a = parse_request(method, path, query)
    if not authorize(name, groups, a):
        return forbidden(name, a)
    if a["resource"] is None:
        return discovery(path) or status(404, "NotFound", "the server could not find the requested resource", {})
    if a["resource"] == "selfsubjectaccessreviews" and method == "POST" and a["group"] == "authorization.k8s.io":
        spec = (body or {}).get("spec") or {}
        ra, nra = spec.get("resourceAttributes"), spec.get("nonResourceAttributes")
        if ra:
            q = {"verb": ra.get("verb", ""), "group": ra.get("group", ""), "resource": ra.get("resource", ""),
                 "subresource": ra.get("subresource", ""), "namespace": ra.get("namespace", ""), "name": ra.get("name", ""),
                 "path": ""}
        elif nra:
            q = {"verb": nra.get("verb", ""), "resource": None, "path": nra.get("path", "")}
        else:
            return invalid("SelfSubjectAccessReview", "", "spec.resourceAttributes", "", "exactly one of nonResourceAttributes or resourceAttributes must be specified")
        ok = authorize(name, groups, q)
        out = dict(body, status={"allowed": ok} if ok else {"allowed": False, "reason": ""})
        out.setdefault("metadata", {})["creationTimestamp"] = None
        return 201, out
    if a["resource"] == "selfsubjectreviews" and method == "POST" and a["group"] == "authentication.k8s.io":
        return 201, {"kind": "SelfSubjectReview", "apiVersion": "authentication.k8s.io/v1",
                     "metadata": {"creationTimestamp": None},
                     "status": {"userInfo": {"username": name, "groups": groups}}}
    if a["resource"] == "secrets" and method != "GET" or (a["resource"] == "secrets" and a["name"]):
        return None  # the webhook-certs routes
    if a["resource"] not in PLURALS or a["subresource"] or method != "GET":
        return None
    table = "as=Table" in (handler.headers.get("Accept") or "")
    if a["name"]:
        key = f"{a['namespace']}/{a['name']}" if PLURALS[a["resource"]][4] else a["name"]
        obj = store.get(a["resource"], {}).get(key)
        if obj is None:
            return not_found(a["resource"], a["name"], a["group"])
        return 200, as_table(obj, True) if table else obj
    code, obj = cluster_list(a["resource"], a, query)
    return code, as_table(obj, False) if table and code == 200 else obj


def pb_fields(data):
    """A protobuf message's fields: {number: [value]} (varints as ints, length-delimited as bytes)."""
    out, i = {}, 0

    def varint():
        nonlocal i
        v, shift = 0, 0
        while True:
            b = data[i]
            i += 1
            v |= (b & 0x7F) << shift
            shift += 7
            if not b & 0x80:
                return v
    while i < len(data):
        key = varint()
        num, wt = key >> 3, key & 7
        if wt == 0:
            val = varint()
        elif wt == 2:
            n = varint()
            val, i = data[i:i + n], i + n
        elif wt == 5:
            val, i = data[i:i + 4], i + 4
        elif wt == 1:
            val, i = data[i:i + 8], i + 8
        else:
            raise ValueError(f"wire type {wt}")
        out.setdefault(num, []).append(val)
    return out


def pb_str(f, n):
    return f[n][0].decode() if n in f else ""


def protobuf_review(raw):
    """kubectl sends SelfSubjectAccessReview and SelfSubjectReview as protobuf (the k8s\\0 envelope around a
    runtime.Unknown, generated.proto of k8s.io/api/authorization/v1 and authentication/v1): their JSON."""
    if raw[:4] != b"k8s\x00":
        raise ValueError("no k8s protobuf envelope")
    unknown = pb_fields(raw[4:])
    tm = pb_fields(unknown[1][0]) if 1 in unknown else {}
    kind, api = pb_str(tm, 2), pb_str(tm, 1)
    obj = pb_fields(unknown[2][0]) if 2 in unknown else {}
    if kind == "SelfSubjectReview":
        return {"kind": kind, "apiVersion": api}
    if kind != "SelfSubjectAccessReview":
        raise ValueError(f"the fake decodes no {kind} from protobuf")
    spec = pb_fields(obj[2][0]) if 2 in obj else {}
    out = {"kind": kind, "apiVersion": api, "metadata": {}, "spec": {}}
    if 1 in spec:
        ra = pb_fields(spec[1][0])
        out["spec"]["resourceAttributes"] = {k: pb_str(ra, n) for n, k in ((1, "namespace"), (2, "verb"), (3, "group"), (4, "version"), (5, "resource"), (6, "subresource"), (7, "name")) if n in ra}
    if 2 in spec:
        nra = pb_fields(spec[2][0])
        out["spec"]["nonResourceAttributes"] = {"path": pb_str(nra, 1), "verb": pb_str(nra, 2)}
    return out


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
            if CLUSTER["on"] and (self.headers.get("Content-Type") or "").startswith("application/vnd.kubernetes.protobuf"):
                body = protobuf_review(raw)
            else:
                body = json.loads(raw) if raw else None
        except (ValueError, IndexError, KeyError) as e:
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
        if CLUSTER["on"]:
            user = cluster_user(self)
            if user is None:
                return status(401, "Unauthorized", "Unauthorized")
        elif self.headers.get("Authorization") != f"Bearer {open(args.token_file).read().strip()}":
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
        if f and f["action"] == "answer":
            return 200, f["body"]
        if f and f["action"] == "pages":
            f["page"] = f.get("page", 0) + 1
            items = [{"apiVersion": "v1", "kind": "Pod", "metadata": {
                "name": f"endless-{f['page']}-{i}", "namespace": f.get("namespace", "default"),
                "uid": str(uuid.uuid4())}, "status": {"phase": "Running"}} for i in range(int(f.get("items", 0)))]
            token = f.get("token") or base64.b64encode(json.dumps({"after": f"endless-{f['page']}"}).encode()).decode()
            return 200, {"kind": "PodList", "apiVersion": "v1",
                         "metadata": {"resourceVersion": str(revision[0]), "continue": token}, "items": items}
        if f and f["action"] == "rotate-token":
            with open(args.token_file + ".tmp", "w") as t:
                t.write(f["token"] + "\n")
            os.rename(args.token_file + ".tmp", args.token_file)
        if bad_json is not None:
            return status(400, "BadRequest", f"the body is not JSON: {bad_json}")
        if CLUSTER["on"]:
            query = dict(urllib.parse.parse_qsl(self.path.partition("?")[2]))
            answer = cluster_api(self, user, method, path, query, body)
            if answer is not None:
                return answer
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
    p.add_argument("--token-file")
    p.add_argument("--token-auth-file")
    p.add_argument("--basic-auth-file")
    p.add_argument("--client-ca-file")
    p.add_argument("--log", required=True)
    p.add_argument("--ready", required=True)
    p.add_argument("--seed", action="append", default=[])
    args = p.parse_args()
    if args.token_auth_file:
        cluster_load_users(args.token_auth_file, args.basic_auth_file)
    for path in args.seed:
        with open(path) as f:
            for doc in yaml.safe_load_all(f):
                if not doc:
                    continue
                if doc.get("kind") == "MutatingWebhookConfiguration":
                    store["mutatingwebhookconfigurations"][doc["metadata"]["name"]] = stamp_new(doc)
                elif CLUSTER["on"] and cluster_store(doc):
                    pass
                elif doc.get("kind") == "Secret":
                    m = doc["metadata"]
                    store["secrets"][f"{m['namespace']}/{m['name']}"] = stamp_new(doc)
    srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(args.cert, args.key)
    if args.client_ca_file:
        ctx.verify_mode = ssl.CERT_OPTIONAL
        ctx.load_verify_locations(args.client_ca_file)
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    with open(args.ready + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    os.rename(args.ready + ".tmp", args.ready)
    srv.serve_forever()


if __name__ == "__main__":
    sys.exit(main())
