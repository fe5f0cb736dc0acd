#!/usr/bin/python3
"""ecs_api_fake.py - a stand-in for the AWS APIs diagport's ECS discovery calls (no AWS here).

Published contracts it follows:
  - Amazon ECS API reference (API version 2014-11-13): ListTasks, DescribeTasks,
    DescribeTaskDefinition; the AWS JSON 1.1 protocol (POST /, X-Amz-Target
    "AmazonEC2ContainerServiceV20141113.<Op>", Content-Type application/x-amz-json-1.1,
    errors as HTTP 400/403 with {"__type": ..., "message": ...} and x-amzn-ErrorType).
  - AWS Secrets Manager API reference: GetSecretValue (JSON 1.1, X-Amz-Target
    "secretsmanager.GetSecretValue").
  - AWS STS API reference: GetCallerIdentity (query protocol, XML answer, ErrorResponse on error).
  - Signature Version 4 (AWS General Reference, "Create a signed AWS API request"): every
    signed request is verified by recomputing its signature with the seeded secret key; a
    wrong one gets InvalidSignatureException (403), an unknown key UnrecognizedClientException.
  - The ECS container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI with an
    Authorization header) and IMDSv2 (PUT /latest/api/token, then
    /latest/meta-data/iam/security-credentials/[ROLE] with X-aws-ec2-metadata-token), as the
    SDKs' credential providers read them.

The AWS CLI is run against it in tests/integration/fleet_ecs.sh, so it is itself checked by the
real client.

Usage: ecs_api_fake.py SEED.json PORT-FILE LOG-FILE
The seed: {"region", "account", "keys": {ACCESS_KEY: {"secret", "token"?, "arn", "allow": [glob of
"service:Action"]}}, "clusters": {NAME: {"services": [..], "tasks": [DescribeTasks task objects]}},
"taskDefinitions": {ARN: taskDefinition}, "secrets": {ARN: SecretString}, "container": {"path",
"authorization", "key"}, "imds": {"role", "key"}, "throttle": N (the first N ECS calls are throttled)}.
A cluster may also hold "pages": {"arns": N, "token": T}: a broken or hostile ListTasks whose pages
never end, each with N made-up task ARNs (DescribeTasks reports them MISSING) and the nextToken T
every time, or a new one each time without "token".
Each request is logged as one JSON line (op, access key, counts) to LOG-FILE.
"""
import base64
import fnmatch
import hashlib
import hmac
import json
import re
import sys
import threading
import urllib.parse
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

SEED = json.load(open(sys.argv[1]))
LOG = open(sys.argv[3], "a", buffering=1)
LOCK = threading.Lock()
STATE = {"throttle": SEED.get("throttle", 0), "imds_tokens": set()}
REGION = SEED["region"]
ACCOUNT = SEED["account"]
ECS_PREFIX = "AmazonEC2ContainerServiceV20141113."


class ApiError(Exception):
    def __init__(self, status, type_, message):
        super().__init__(message)
        self.status, self.type, self.message = status, type_, message


def log(**kw):
    with LOCK:
        LOG.write(json.dumps(kw) + "\n")


# ---- SigV4, recomputed as the General Reference describes it ----

def canonical_query(q):
    pairs = urllib.parse.parse_qsl(q, keep_blank_values=True)
    enc = sorted((urllib.parse.quote(k, safe="-_.~"), urllib.parse.quote(v, safe="-_.~")) for k, v in pairs)
    return "&".join(f"{k}={v}" for k, v in enc)


def verify(handler, body, service):
    """The access key of a correctly signed request; ApiError otherwise."""
    auth = handler.headers.get("Authorization", "")
    m = re.fullmatch(r"AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                     r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})", auth)
    if not m:
        raise ApiError(403, "MissingAuthenticationTokenException", "Missing Authentication Token")
    key, date, region, svc, signed, sig = m.groups()
    user = SEED["keys"].get(key)
    if user is None:
        raise ApiError(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    amz_date = handler.headers.get("X-Amz-Date", "")
    if svc != service or region != REGION or amz_date[:8] != date:
        raise ApiError(403, "InvalidSignatureException",
                       f"Credential should be scoped to a valid region and service ({region}/{svc}).")
    names = signed.split(";")
    if "host" not in names or "x-amz-date" not in names:
        raise ApiError(403, "InvalidSignatureException", "host and x-amz-date must be signed.")
    if user.get("token"):
        if handler.headers.get("X-Amz-Security-Token") != user["token"] or "x-amz-security-token" not in names:
            raise ApiError(403, "UnrecognizedClientException", "The security token included in the request is invalid.")
    path, _, query = handler.path.partition("?")
    canon_headers = ""
    for n in names:
        vals = handler.headers.get_all(n) or []
        canon_headers += n + ":" + ",".join(" ".join(v.split()) for v in vals) + "\n"
    creq = "\n".join([handler.command, urllib.parse.quote(path, safe="/~"), canonical_query(query),
                      canon_headers, signed, hashlib.sha256(body).hexdigest()])
    sts = "\n".join(["AWS4-HMAC-SHA256", amz_date, f"{date}/{region}/{svc}/aws4_request",
                     hashlib.sha256(creq.encode()).hexdigest()])
    k = ("AWS4" + user["secret"]).encode()
    for part in (date, region, svc, "aws4_request"):
        k = hmac.new(k, part.encode(), hashlib.sha256).digest()
    if not hmac.compare_digest(hmac.new(k, sts.encode(), hashlib.sha256).hexdigest(), sig):
        raise ApiError(403, "InvalidSignatureException",
                       "The request signature we calculated does not match the signature you provided. Check your "
                       "AWS Secret Access Key and signing method. Consult the service documentation for details.")
    return key, user


def authorize(user, action, resource):
    if not any(fnmatch.fnmatchcase(action, a) for a in user.get("allow", [])):
        raise ApiError(400, "AccessDeniedException",
                       f"User: {user['arn']} is not authorized to perform: {action} on resource: {resource} "
                       f"because no identity-based policy allows the {action} action")


# ---- ECS ----

def cluster_of(ref):
    name = (ref or "default").rsplit("/", 1)[-1]
    if name not in SEED["clusters"]:
        raise ApiError(400, "ClusterNotFoundException", "Cluster not found.")
    return name, f"arn:aws:ecs:{REGION}:{ACCOUNT}:cluster/{name}"


def list_tasks(user, req):
    name, arn = cluster_of(req.get("cluster"))
    authorize(user, "ecs:ListTasks", arn)
    c = SEED["clusters"][name]
    tasks = [t for t in c["tasks"] if t.get("desiredStatus", "RUNNING") == req.get("desiredStatus", "RUNNING")]
    svc = req.get("serviceName")
    if svc is not None:
        if svc not in c.get("services", []):
            raise ApiError(400, "ServiceNotFoundException", "Service not found.")
        tasks = [t for t in tasks if t.get("group") == "service:" + svc]
    size = min(int(req.get("maxResults", 100)), 100)
    pages = c.get("pages")
    if pages:  # a list that never ends (test control)
        n = int(base64.b64decode(req["nextToken"]).decode()) if req.get("nextToken") and "token" not in pages else 0
        arns = [f"arn:aws:ecs:{REGION}:{ACCOUNT}:task/{name}/{n * size + i:032x}" for i in range(pages.get("arns", 0))]
        token = pages.get("token") or base64.b64encode(str(n + 1).encode()).decode()
        return {"taskArns": arns, "nextToken": token}, {"returned": len(arns)}
    start = int(base64.b64decode(req["nextToken"]).decode()) if req.get("nextToken") else 0
    out = {"taskArns": [t["taskArn"] for t in tasks[start:start + size]]}
    if start + size < len(tasks):
        out["nextToken"] = base64.b64encode(str(start + size).encode()).decode()
    return out, {"returned": len(out["taskArns"])}


def describe_tasks(user, req):
    name, arn = cluster_of(req.get("cluster"))
    wanted = req.get("tasks", [])
    if len(wanted) > 100:
        raise ApiError(400, "InvalidParameterException", "Tasks cannot be longer than 100.")
    authorize(user, "ecs:DescribeTasks", arn)
    by = {}
    for t in SEED["clusters"][name]["tasks"]:
        by[t["taskArn"]] = t
        by[t["taskArn"].rsplit("/", 1)[-1]] = t
    out = {"tasks": [by[w] for w in wanted if w in by],
           "failures": [{"arn": w, "reason": "MISSING"} for w in wanted if w not in by]}
    return out, {"asked": len(wanted)}


def describe_task_definition(user, req):
    ref = req.get("taskDefinition", "")
    authorize(user, "ecs:DescribeTaskDefinition", "*")
    td = SEED["taskDefinitions"].get(ref)
    if td is None:
        raise ApiError(400, "ClientException", "Unable to describe task definition.")
    return {"taskDefinition": td, "tags": []}, {"arn": ref}


# ---- Secrets Manager ----

def get_secret_value(user, req):
    sid = req.get("SecretId", "")
    arn = next((a for a in SEED["secrets"] if a == sid or a.split(":")[6].rsplit("-", 1)[0] == sid), None)
    authorize(user, "secretsmanager:GetSecretValue", arn or sid)
    if arn is None:
        raise ApiError(400, "ResourceNotFoundException", "Secrets Manager can't find the specified secret.")
    return {"ARN": arn, "Name": arn.split(":")[6].rsplit("-", 1)[0], "VersionId": str(uuid.uuid4()),
            "SecretString": SEED["secrets"][arn], "VersionStages": ["AWSCURRENT"], "CreatedDate": 1700000000.0}, {}


OPS = {
    ECS_PREFIX + "ListTasks": ("ecs", list_tasks),
    ECS_PREFIX + "DescribeTasks": ("ecs", describe_tasks),
    ECS_PREFIX + "DescribeTaskDefinition": ("ecs", describe_task_definition),
    "secretsmanager.GetSecretValue": ("secretsmanager", get_secret_value),
}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def send(self, status, body, ctype="application/x-amz-json-1.1", extra=None):
        data = body if isinstance(body, bytes) else body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("x-amzn-RequestId", str(uuid.uuid4()))
        for k, v in (extra or {}).items():
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def body(self):
        n = int(self.headers.get("Content-Length") or 0)
        if n > 1 << 20:
            raise ApiError(413, "SerializationException", "request too large")
        return self.rfile.read(n) if n else b""

    def do_POST(self):
        body = self.body()
        target = self.headers.get("X-Amz-Target")
        if target is None:
            return self.sts(body)
        try:
            if target not in OPS:
                raise ApiError(400, "UnknownOperationException", "")
            if self.headers.get("Content-Type") != "application/x-amz-json-1.1":
                raise ApiError(400, "SerializationException", "wrong Content-Type")
            service, fn = OPS[target]
            key, user = verify(self, body, service)
            if service == "ecs":
                with LOCK:
                    throttled = STATE["throttle"] > 0
                    STATE["throttle"] -= 1 if throttled else 0
                if throttled:
                    log(op=target.split(".")[-1], key=key, throttled=True)
                    raise ApiError(400, "ThrottlingException", "Rate exceeded")
            out, extra = fn(user, json.loads(body or b"{}"))
            log(op=target.split(".")[-1], key=key, **extra)
            self.send(200, json.dumps(out))
        except ApiError as e:
            log(op=(target or "").split(".")[-1], error=e.type)
            self.send(e.status, json.dumps({"__type": e.type, "message": e.message}), extra={"x-amzn-ErrorType": e.type})

    def sts(self, body):
        form = urllib.parse.parse_qs(body.decode())
        try:
            if form.get("Action") != ["GetCallerIdentity"]:
                raise ApiError(400, "InvalidAction", "unknown action")
            key, user = verify(self, body, "sts")
            log(op="GetCallerIdentity", key=key)
            self.send(200, f'<GetCallerIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">'
                           f"<GetCallerIdentityResult><Arn>{user['arn']}</Arn><UserId>AIDA{key}</UserId>"
                           f"<Account>{ACCOUNT}</Account></GetCallerIdentityResult><ResponseMetadata><RequestId>"
                           f"{uuid.uuid4()}</RequestId></ResponseMetadata></GetCallerIdentityResponse>", "text/xml")
        except ApiError as e:
            code = {"InvalidSignatureException": "SignatureDoesNotMatch",
                    "UnrecognizedClientException": "InvalidClientTokenId"}.get(e.type, e.type)
            log(op="GetCallerIdentity", error=code)
            self.send(e.status, f"<ErrorResponse><Error><Type>Sender</Type><Code>{code}</Code><Message>{e.message}"
                                f"</Message></Error><RequestId>{uuid.uuid4()}</RequestId></ErrorResponse>", "text/xml")

    def creds(self, key):
        u = SEED["keys"][key]
        return {"AccessKeyId": key, "SecretAccessKey": u["secret"], "Token": u.get("token"),
                "Expiration": "2099-01-01T00:00:00Z"}

    def do_PUT(self):
        self.body()
        if self.path == "/latest/api/token" and self.headers.get("X-aws-ec2-metadata-token-ttl-seconds") \
                and "imds" in SEED:
            tok = uuid.uuid4().hex
            STATE["imds_tokens"].add(tok)
            log(op="imds-token")
            return self.send(200, tok, "text/plain")
        self.send(400 if "imds" in SEED else 404, "", "text/plain")

    def do_GET(self):
        c, i = SEED.get("container"), SEED.get("imds")
        if c and self.path == c["path"]:
            if self.headers.get("Authorization") != c["authorization"]:
                log(op="container-credentials", error="unauthorized")
                return self.send(401, json.dumps({"code": "Unauthorized"}), "application/json")
            log(op="container-credentials")
            return self.send(200, json.dumps(self.creds(c["key"])), "application/json")
        base = "/latest/meta-data/iam/security-credentials/"
        if i and self.path.startswith(base):
            if self.headers.get("X-aws-ec2-metadata-token") not in STATE["imds_tokens"]:
                return self.send(401, "", "text/plain")
            role = self.path[len(base):]
            log(op="imds-credentials", role=role)
            if role == "":
                return self.send(200, i["role"], "text/plain")
            if role != i["role"]:
                return self.send(404, "", "text/plain")
            return self.send(200, json.dumps(dict(self.creds(i["key"]), Code="Success", Type="AWS-HMAC",
                                                  LastUpdated="2024-01-01T00:00:00Z")), "application/json")
        self.send(404, "", "text/plain")


def main():
    srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with open(sys.argv[2] + ".tmp", "w") as f:
        f.write(str(srv.server_address[1]))
    import os
    os.rename(sys.argv[2] + ".tmp", sys.argv[2])
    srv.serve_forever()


if __name__ == "__main__":
    main()
