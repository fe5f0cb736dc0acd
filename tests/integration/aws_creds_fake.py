#!/usr/bin/env python3
"""aws_creds_fake.py PORTFILE LOG KEYS FIRST_TTL TOKEN_FILE AUTH - a stand-in for the two AWS credential
endpoints a pod or task is given, following their published contracts (there is no AWS here):
  GET /v2/credentials/ID   the ECS container credentials endpoint (AWS_CONTAINER_CREDENTIALS_FULL_URI with
                           AWS_CONTAINER_AUTHORIZATION_TOKEN): JSON with AccessKeyId, SecretAccessKey,
                           Token, Expiration (RFC 3339), RoleArn; 401 unless Authorization is AUTH
  POST /                   STS AssumeRoleWithWebIdentity (query API, form body, unsigned): RoleArn,
                           RoleSessionName, WebIdentityToken (must equal TOKEN_FILE's content), Version
                           2011-06-15; answers AssumeRoleWithWebIdentityResponse XML, or an ErrorResponse
                           (InvalidIdentityToken, 400)
KEYS is "AK1:SK1,AK2:SK2,..." handed out in turn (s3rver knows them); the first expires FIRST_TTL seconds
from now, the others in an hour. Each issue is logged as "issue AK container|sts".
"""
import http.server, json, socketserver, sys, threading, time, urllib.parse

portfile, logpath, keys, first_ttl, token_file, auth = sys.argv[1:7]
keys = [k.split(":", 1) for k in keys.split(",")]
lock = threading.Lock()
issued = [0]


def issue(via):
    with lock:
        i = issued[0]
        issued[0] += 1
        with open(logpath, "a") as f:
            f.write(f"issue {keys[min(i, len(keys) - 1)][0]} {via}\n")
    ak, sk = keys[min(i, len(keys) - 1)]
    ttl = int(first_ttl) if i == 0 else 3600
    exp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() + ttl))
    return ak, sk, f"session-token-{i}", exp


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def send(self, status, ctype, body):
        b = body.encode()
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(b)))
        self.end_headers()
        self.wfile.write(b)

    def do_GET(self):
        if not self.path.startswith("/v2/credentials/"):
            return self.send(404, "text/plain", "not found")
        if self.headers.get("Authorization") != auth:
            return self.send(401, "application/json", '{"code":"AccessDenied"}')
        ak, sk, tok, exp = issue("container")
        self.send(200, "application/json", json.dumps({
            "AccessKeyId": ak, "SecretAccessKey": sk, "Token": tok, "Expiration": exp,
            "RoleArn": "arn:aws:iam::123456789012:role/diag-egress"}))

    def do_POST(self):
        n = int(self.headers.get("Content-Length", "0"))
        form = urllib.parse.parse_qs(self.rfile.read(n).decode())
        f = {k: v[0] for k, v in form.items()}
        with open(token_file) as t:
            want = t.read().strip()
        if f.get("Action") != "AssumeRoleWithWebIdentity" or f.get("Version") != "2011-06-15" \
                or not f.get("RoleArn") or not f.get("RoleSessionName"):
            return self.send(400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>InvalidAction"
                             "</Code><Message>bad request</Message></Error></ErrorResponse>")
        if f.get("WebIdentityToken") != want:
            return self.send(400, "text/xml", "<ErrorResponse><Error><Type>Sender</Type><Code>"
                             "InvalidIdentityToken</Code><Message>Incorrect token audience</Message></Error>"
                             "</ErrorResponse>")
        ak, sk, tok, exp = issue("sts")
        self.send(200, "text/xml", f"""<AssumeRoleWithWebIdentityResponse xmlns="https://sts.amazonaws.com/doc/2011-06-15/">
  <AssumeRoleWithWebIdentityResult>
    <SubjectFromWebIdentityToken>system:serviceaccount:default:diag</SubjectFromWebIdentityToken>
    <AssumedRoleUser><Arn>{f['RoleArn']}/{f['RoleSessionName']}</Arn><AssumedRoleId>AROA:x</AssumedRoleId></AssumedRoleUser>
    <Credentials><SessionToken>{tok}</SessionToken><SecretAccessKey>{sk}</SecretAccessKey>
      <Expiration>{exp}</Expiration><AccessKeyId>{ak}</AccessKeyId></Credentials>
  </AssumeRoleWithWebIdentityResult>
  <ResponseMetadata><RequestId>fake</RequestId></ResponseMetadata>
</AssumeRoleWithWebIdentityResponse>""")

    def log_message(self, *a):
        pass


class S(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


srv = S(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(f"{srv.server_address[1]}\n")
import os
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
