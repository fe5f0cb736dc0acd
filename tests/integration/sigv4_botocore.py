#!/usr/bin/python3
"""sigv4_botocore.py - SigV4 headers as botocore computes them (the copy Debian's awscli ships),
for fleet_ecs.sh to compare byte for byte with fleet/aws.c's (ecs_driver sign).

Usage: sigv4_botocore.py METHOD URL SERVICE REGION AMZDATE BODY [HEADER...]
Keys from AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN. Prints Host (as
botocore signs it), X-Amz-Date, X-Amz-Security-Token (with a token) and Authorization.
"""
import datetime
import os
import sys

import awscli  # noqa: F401  (makes its bundled botocore importable as botocore)
import botocore.auth
from botocore.awsrequest import AWSRequest
from botocore.credentials import Credentials

method, url, service, region, amz_date, body = sys.argv[1:7]
fixed = datetime.datetime.strptime(amz_date, "%Y%m%dT%H%M%SZ")


class FrozenDatetime(datetime.datetime):
    @classmethod
    def utcnow(cls):
        return fixed


botocore.auth.datetime = type("m", (), {"datetime": FrozenDatetime})
headers = {}
for h in sys.argv[7:]:
    k, _, v = h.partition(":")
    headers[k] = v.strip()
req = AWSRequest(method=method, url=url, data=body.encode(), headers=headers)
creds = Credentials(os.environ["AWS_ACCESS_KEY_ID"], os.environ["AWS_SECRET_ACCESS_KEY"],
                    os.environ.get("AWS_SESSION_TOKEN") or None)
signer = botocore.auth.SigV4Auth(creds, service, region)
print("Host: " + signer.headers_to_sign(req)["host"])
signer.add_auth(req)
print("X-Amz-Date: " + req.headers["X-Amz-Date"])
if creds.token:
    print("X-Amz-Security-Token: " + req.headers["X-Amz-Security-Token"])
print("Authorization: " + req.headers["Authorization"])
