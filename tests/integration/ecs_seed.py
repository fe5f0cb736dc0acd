#!/usr/bin/python3
"""ecs_seed.py - the world ecs_api_fake.py serves to fleet_ecs.sh: clusters, tasks in DescribeTasks'
shape, and task definitions injected by diagport itself (`diagport inject ecs`), so discovery reads
what the injector really writes.

Usage: ecs_seed.py DIAGPORT AGENT_PORT OUT.json [PORT1 PORT2 PORT3]
  prod    150 running tasks: 100 of service orders (suspend), 50 of service billing (nosuspend)
  mixed   one task per case: live (the real agent at 127.0.0.1:AGENT_PORT, token secret, public
          address), jsonkey (token under a JSON key), wrongtok (a secret that is not the agent's
          token), plain (no agent), bridge (EC2, bridge mode), unhealthy (agent UNHEALTHY),
          loopback (injected without a token), standalone (group family:batch), tls (tls-secret:
          an https URL), tlsloop (tls-secret without a token: https on loopback only),
          badregion (a token ARN whose region is not one: never fetched)
  tiny    one task without the agent (credential tests)
  hostile with HOSTILE_PORT in the environment: tasks whose DescribeTasks address was tampered with
          (link-local, unspecified, a host name, a URL fragment, multicast, broadcast, ...), their agent
          on HOSTILE_PORT with its own token secret; and 127.0.0.2 (loopback: accepted, as the endpoint is
          a local stand-in)
  loop, endless, flood  ListTasks pages that never end (ecs_api_fake.py's "pages"): the same
          nextToken each time; a new one each time and no tasks; a new one and 100 task ARNs each time
  shopc   with PORT1..3 (fleet_e2e.sh): service orders, three tasks at 127.0.0.1, each task's
          agent on its own port (so each its own task definition, orders-N:1), each with a token
          secret; PORT1's agent really needs its token, e2e-token-1-0123456789abcdef
"""
import json
import os
import subprocess
import sys

DIAGPORT, AGENT_PORT, OUT = sys.argv[1], int(sys.argv[2]), sys.argv[3]
REGION, ACCOUNT = "eu-west-1", "123456789012"
ARN = f"arn:aws:ecs:{REGION}:{ACCOUNT}"
SM = f"arn:aws:secretsmanager:{REGION}:{ACCOUNT}:secret"
TOKEN = "s3cr3t-agent-token"
ALL = ["ecs:*", "secretsmanager:GetSecretValue", "sts:GetCallerIdentity"]


def injected(family, *args, network="awsvpc", compat="FARGATE", revision=1):
    td = {"family": family, "networkMode": network, "requiresCompatibilities": [compat], "cpu": "512",
          "memory": "1024",
          "containerDefinitions": [{"name": "app", "image": "registry.example/app:1", "essential": True,
                                    "memory": 256}]}
    if args != ("none",):
        td = json.loads(subprocess.run([DIAGPORT, "inject", "ecs", *args, "-"], input=json.dumps(td).encode(),
                                       check=True, capture_output=True).stdout)
    arn = f"{ARN}:task-definition/{family}:{revision}"
    td.update(taskDefinitionArn=arn, revision=revision, status="ACTIVE", registeredAt=1700000000.0,
              compatibilities=["EC2", "FARGATE"] if compat == "FARGATE" else ["EC2"])
    return arn, td


def task(cluster, n, td_arn, group, ip=None, agent_health="HEALTHY", agent=True, launch="FARGATE",
         public=None):
    tid = f"{n:032x}"
    t = {"taskArn": f"{ARN}:task/{cluster}/{tid}", "clusterArn": f"{ARN}:cluster/{cluster}",
         "taskDefinitionArn": td_arn, "group": group, "launchType": launch, "lastStatus": "RUNNING",
         "desiredStatus": "RUNNING", "cpu": "512", "memory": "1024", "availabilityZone": f"{REGION}a",
         "createdAt": 1700000000.0, "startedAt": 1700000010.0, "connectivity": "CONNECTED",
         "attachments": [], "containers": []}
    names = ["app"] + (["diagport-agent"] if agent else [])
    if ip:
        details = [{"name": "subnetId", "value": "subnet-0abc"}, {"name": "networkInterfaceId", "value": f"eni-{tid[-8:]}"},
                   {"name": "macAddress", "value": "0a:00:00:00:00:01"}, {"name": "privateIPv4Address", "value": ip}]
        if public:
            details.append({"name": "publicIPv4Address", "value": public})
        t["attachments"].append({"id": f"att-{tid[-8:]}", "type": "ElasticNetworkInterface", "status": "ATTACHED",
                                 "details": details})
    for name in names:
        c = {"containerArn": f"{ARN}:container/{cluster}/{tid}/{name}", "taskArn": t["taskArn"], "name": name,
             "lastStatus": "RUNNING", "healthStatus": agent_health if name == "diagport-agent" else "UNKNOWN",
             "networkInterfaces": [{"attachmentId": f"att-{tid[-8:]}", "privateIpv4Address": ip}] if ip else []}
        t["containers"].append(c)
    return t


tds = {}


def td(*a, **k):
    arn, d = injected(*a, **k)
    tds[arn] = d
    return arn


orders = td("orders", "--mode", "suspend", "--auth-secret", f"{SM}:orders-token-AbCdEf", revision=3)
billing = td("billing", "--auth-secret", f"{SM}:billing-token-AbCdEf", revision=7)
prod = [task("prod", i, orders, "service:orders", ip=f"10.0.{i // 250}.{i % 250 + 1}") for i in range(100)]
prod += [task("prod", 1000 + i, billing, "service:billing", ip=f"10.1.0.{i + 1}") for i in range(50)]

live = td("live", "--port", str(AGENT_PORT), "--auth-secret", f"{SM}:live-token-AbCdEf")
jsonkey = td("jsonkey", "--port", str(AGENT_PORT), "--auth-secret", f"{SM}:json-token-AbCdEf:token::")
wrongtok = td("wrongtok", "--port", str(AGENT_PORT), "--auth-secret", f"{SM}:wrong-token-AbCdEf")
plain = td("plain", "none")
bridge = td("bridge", "--auth-secret", f"{SM}:live-token-AbCdEf", network="bridge", compat="EC2")
loop = td("loopback")
tls = td("tls", "--port", str(AGENT_PORT), "--auth-secret", f"{SM}:live-token-AbCdEf", "--tls-secret", f"{SM}:tls-AbCdEf")
tlsloop = td("tlsloop", "--tls-secret", f"{SM}:tls-AbCdEf")
# a token ARN whose region field would make secretsmanager.REGION.amazonaws.com another host
badregion = td("badregion", "--port", str(AGENT_PORT), "--auth-secret",
               f"arn:aws:secretsmanager:x@127.0.0.1#:{ACCOUNT}:secret:live-token-AbCdEf")
mixed = [
    task("mixed", 1, live, "service:web", ip="127.0.0.1", public="127.0.0.1"),
    task("mixed", 2, jsonkey, "service:web", ip="127.0.0.1"),
    task("mixed", 3, wrongtok, "service:web", ip="127.0.0.1"),
    task("mixed", 4, plain, "service:web", ip="10.2.0.4", agent=False),
    task("mixed", 5, bridge, "service:legacy", launch="EC2"),
    task("mixed", 6, live, "service:web", ip="10.2.0.6", agent_health="UNHEALTHY"),
    task("mixed", 7, loop, "service:web", ip="10.2.0.7"),
    task("mixed", 8, live, "family:batch", ip="127.0.0.1"),
    task("mixed", 9, tls, "service:web", ip="127.0.0.1"),
    task("mixed", 10, tlsloop, "service:web", ip="10.2.0.10"),
    task("mixed", 11, badregion, "service:web", ip="127.0.0.1"),
]

e2e = [int(p) for p in sys.argv[4:7]]
shopc = [task("shopc", 0xe2e0 + n, td(f"orders-{n}", "--port", str(port), "--auth-secret", f"{SM}:e2e-token-{n}-AbCdEf"),
              "service:orders", ip="127.0.0.1") for n, port in enumerate(e2e, 1)]

HP = os.environ.get("HOSTILE_PORT")
HOSTILE = ["169.254.169.254", "0.0.0.0", "evil.example", f"127.0.0.2:{HP}/x?", "fe80::1", "224.0.0.1",
           "255.255.255.255", "::", "::ffff:169.254.169.254", "127.0.0.2"]
hostile = []
if HP:
    htd = td("hostile", "--port", HP, "--auth-secret", f"{SM}:hostile-token-AbCdEf")
    hostile = [task("hostile", 0x4000 + i, htd, "service:web", ip=ip) for i, ip in enumerate(HOSTILE)]

seed = {
    "region": REGION, "account": ACCOUNT,
    "keys": {
        "AKIDENV": {"secret": "env-secret-key", "arn": f"arn:aws:iam::{ACCOUNT}:user/alice", "allow": ALL},
        "AKIDNOSM": {"secret": "nosm-secret-key", "arn": f"arn:aws:iam::{ACCOUNT}:user/bob",
                     "allow": ["ecs:*", "sts:GetCallerIdentity"]},
        "AKIDNOLIST": {"secret": "nolist-secret-key", "arn": f"arn:aws:iam::{ACCOUNT}:user/carol",
                       "allow": ["ecs:DescribeTasks"]},
        "AKIDPROF": {"secret": "prof-secret-key", "arn": f"arn:aws:iam::{ACCOUNT}:user/prof", "allow": ALL},
        "AKIDPROC": {"secret": "proc-secret-key", "token": "proc-session-token",
                     "arn": f"arn:aws:iam::{ACCOUNT}:user/process", "allow": ALL},
        "ASIACONT": {"secret": "cont-secret-key", "token": "cont-session-token",
                     "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/task-role/0123", "allow": ALL},
        "ASIAIMDS": {"secret": "imds-secret-key", "token": "imds-session-token",
                     "arn": f"arn:aws:sts::{ACCOUNT}:assumed-role/ec2-role/i-0123", "allow": ALL},
    },
    "clusters": {
        "prod": {"services": ["orders", "billing"], "tasks": prod},
        "mixed": {"services": ["web", "legacy"], "tasks": mixed},
        "tiny": {"services": [], "tasks": [task("tiny", 1, plain, "family:x", ip="10.3.0.1", agent=False)]},
        **({"hostile": {"services": ["web"], "tasks": hostile}} if hostile else {}),
        "loop": {"services": [], "tasks": [], "pages": {"arns": 1, "token": "again"}},
        "endless": {"services": [], "tasks": [], "pages": {"arns": 0}},
        "flood": {"services": [], "tasks": [], "pages": {"arns": 100}},
        **({"shopc": {"services": ["orders"], "tasks": shopc}} if shopc else {}),
    },
    "taskDefinitions": tds,
    "secrets": {
        f"{SM}:orders-token-AbCdEf": "orders-" + TOKEN, f"{SM}:billing-token-AbCdEf": "billing-" + TOKEN,
        f"{SM}:live-token-AbCdEf": TOKEN, f"{SM}:json-token-AbCdEf": json.dumps({"token": TOKEN, "other": "x"}),
        f"{SM}:wrong-token-AbCdEf": "s3cr3t-not-the-agents", f"{SM}:hostile-token-AbCdEf": "s3cr3t-hostile-token",
        **{f"{SM}:e2e-token-{n}-AbCdEf": f"e2e-token-{n}-0123456789abcdef" for n in range(1, len(e2e) + 1)},
    },
    "container": {"path": "/v2/credentials/task-creds", "authorization": "s3cr3t-container-auth", "key": "ASIACONT"},
    "imds": {"role": "ec2-role", "key": "ASIAIMDS"},
}
with open(OUT, "w") as f:
    json.dump(seed, f)
