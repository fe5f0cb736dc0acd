#!/usr/bin/env python3
"""azure_identity_fake.py PORTFILE LOG [EXPIRES_IN] - a stand-in for Azure's token endpoints, which
cannot run here. It follows their published contracts:

  the instance metadata service's managed identity endpoint (IMDS, "How to use managed identities for
  Azure resources on an Azure VM to acquire an access token"):
      GET /metadata/identity/oauth2/token?api-version=2018-02-01&resource=R[&client_id=C]
      with the header Metadata: true; 200 {"access_token", "expires_in", "expires_on", "not_before",
      "resource", "token_type": "Bearer"} (numbers as strings, as IMDS gives them); 400 without the
      header; 400 {"error": "invalid_request", "error_description": "Identity not found"} for an
      unknown client_id.
  the App Service identity endpoint (IDENTITY_ENDPOINT, api-version 2019-08-01):
      GET /msi/token?api-version=2019-08-01&resource=R[&client_id=C] with X-IDENTITY-HEADER.
  the Microsoft identity platform's token endpoint, client credentials with a federated credential
  ("Microsoft identity platform and the OAuth 2.0 client credentials flow", certificate/assertion):
      POST /{tenant}/oauth2/v2.0/token, form: client_id, scope=https://storage.azure.com/.default,
      grant_type=client_credentials, client_assertion_type=urn:ietf:params:oauth:client-assertion-type:
      jwt-bearer, client_assertion; 200 {"token_type": "Bearer", "expires_in": N, "access_token"};
      400 {"error": "invalid_client", "error_description": "AADSTS700213: ..."} for a wrong assertion.

The tokens are unsigned JWTs with the claims azurite's --oauth basic checks (aud https://storage.azure.com,
iss https://sts.windows.net/TENANT/, nbf, exp). Known identities: client id "mi-client" (IMDS, App
Service; no client id: the system-assigned one), "wi-client" in tenant "wi-tenant" whose federated
token is "federated-token-v1" or "-v2" (the file may be rotated). EXPIRES_IN (default 3600) lets a test
make tokens that need refreshing. Every request is logged as one JSON line (path, client_id, which
endpoint) to LOG.
"""
import base64, http.server, json, sys, time, urllib.parse

portfile, logfile = sys.argv[1], sys.argv[2]
expires_in = int(sys.argv[3]) if len(sys.argv) > 3 else 3600
TENANT = "wi-tenant"
APP_HEADER = "app-service-secret-header"


def b64(d):
    return base64.urlsafe_b64encode(json.dumps(d).encode()).rstrip(b"=").decode()


def jwt(sub):
    now = int(time.time())
    return ".".join([b64({"alg": "none", "typ": "JWT"}),
                     b64({"aud": "https://storage.azure.com", "iss": f"https://sts.windows.net/{TENANT}/",
                          "nbf": now - 60, "iat": now - 60, "exp": now + expires_in, "sub": sub, "oid": sub}),
                     ""])


class H(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *a):
        pass

    def answer(self, code, obj):
        body = json.dumps(obj).encode()
        self.send_response(code)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log(self, **kw):
        with open(logfile, "a") as f:
            f.write(json.dumps(kw) + "\n")

    def do_GET(self):
        u = urllib.parse.urlsplit(self.path)
        q = dict(urllib.parse.parse_qsl(u.query))
        cid = q.get("client_id")
        if u.path == "/metadata/identity/oauth2/token":
            self.log(endpoint="imds", client_id=cid, resource=q.get("resource"), api=q.get("api-version"))
            if self.headers.get("Metadata") != "true":
                return self.answer(400, {"error": "invalid_request", "error_description": "Required metadata header not specified"})
            if q.get("api-version") != "2018-02-01" or q.get("resource") != "https://storage.azure.com/":
                return self.answer(400, {"error": "invalid_request", "error_description": "bad api-version or resource"})
        elif u.path == "/msi/token":
            self.log(endpoint="appservice", client_id=cid, resource=q.get("resource"), api=q.get("api-version"))
            if self.headers.get("X-IDENTITY-HEADER") != APP_HEADER:
                return self.answer(401, {"error": {"code": "Unauthorized", "message": "bad X-IDENTITY-HEADER"}})
            if q.get("api-version") != "2019-08-01" or q.get("resource") != "https://storage.azure.com/":
                return self.answer(400, {"error": {"code": "BadRequest", "message": "bad api-version or resource"}})
        else:
            return self.answer(404, {"error": "not_found"})
        if cid not in (None, "mi-client"):
            return self.answer(400, {"error": "invalid_request", "error_description": "Identity not found"})
        now = int(time.time())
        self.answer(200, {"access_token": jwt(cid or "system"), "expires_in": str(expires_in),
                          "expires_on": str(now + expires_in), "not_before": str(now - 60),
                          "resource": "https://storage.azure.com/", "token_type": "Bearer"})

    def do_POST(self):
        u = urllib.parse.urlsplit(self.path)
        n = int(self.headers.get("Content-Length", "0"))
        form = dict(urllib.parse.parse_qsl(self.rfile.read(n).decode()))
        self.log(endpoint="entra", path=u.path, client_id=form.get("client_id"), scope=form.get("scope"),
                 assertion=form.get("client_assertion"))
        if u.path != f"/{TENANT}/oauth2/v2.0/token":
            return self.answer(400, {"error": "invalid_tenant", "error_description": "AADSTS90002: Tenant not found."})
        if (form.get("grant_type") != "client_credentials" or form.get("scope") != "https://storage.azure.com/.default"
                or form.get("client_assertion_type") != "urn:ietf:params:oauth:client-assertion-type:jwt-bearer"):
            return self.answer(400, {"error": "invalid_request", "error_description": "AADSTS900144: bad request"})
        if form.get("client_id") != "wi-client" or form.get("client_assertion") not in ("federated-token-v1", "federated-token-v2"):
            return self.answer(401, {"error": "invalid_client", "error_description":
                                     "AADSTS700213: No matching federated identity record found for presented assertion."})
        self.answer(200, {"token_type": "Bearer", "expires_in": expires_in, "ext_expires_in": expires_in,
                          "access_token": jwt(form["client_id"])})


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), H)
with open(portfile + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
import os
os.rename(portfile + ".tmp", portfile)
srv.serve_forever()
