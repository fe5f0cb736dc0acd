#!/usr/bin/env python3
"""tests/integration/deploy_list.py N OUT - a List of N Deployments as `kubectl get deploy -A -o json` writes
it (4-space indent, the API server's key order, status and the annotations kubectl adds; no
managedFields, which kubectl get leaves out). Each pod template opts in with diagport.dev/inject.
Used by tests/integration/list_stream.sh and bench/list_stream.sh; deterministic for a given N."""
import json
import sys


def deployment(i):
    ns = "team-%d" % (i % 40)
    name = "svc-%d" % i
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {
            "annotations": {"deployment.kubernetes.io/revision": str(1 + i % 7)},
            "creationTimestamp": "2026-11-%02dT10:%02d:00Z" % (1 + i % 28, i % 60),
            "generation": 1 + i % 5,
            "labels": labels,
            "name": name,
            "namespace": ns,
            "resourceVersion": str(1000000 + i * 13),
        },
        "spec": {
            "replicas": 2,
            "selector": {"matchLabels": {"app": name}},
            "template": {
                "metadata": {
                    "annotations": {"diagport.dev/inject": "true"},
                    "creationTimestamp": None,
                    "labels": labels,
                },
                "spec": {
                    "containers": [{
                        "image": "registry.example.com/%s/api:1.%d.0" % (ns, i % 50),
                        "imagePullPolicy": "IfNotPresent",
                        "name": "api",
                        "ports": [{"containerPort": 8080, "protocol": "TCP"}],
                    }],
                    "dnsPolicy": "ClusterFirst",
                    "restartPolicy": "Always",
                    "terminationGracePeriodSeconds": 30,
                },
            },
        },
        "status": {"availableReplicas": 2, "observedGeneration": 1 + i % 5, "replicas": 2},
    }


def main():
    n, out = int(sys.argv[1]), sys.argv[2]
    doc = {"apiVersion": "v1", "items": [deployment(i) for i in range(n)], "kind": "List",
           "metadata": {"resourceVersion": ""}}
    with open(out, "w") as f:
        json.dump(doc, f, indent=4, ensure_ascii=False)
        f.write("\n")


main()
