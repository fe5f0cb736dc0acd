#!/usr/bin/env bash
# manifests.sh - manifests/ as a platform team applies it (`kubectl apply -k`).
# For each of base, overlays/cert-manager, overlays/self-contained,
# overlays/label-selected, examples/dotnet-app, agent-certs and the agents' NetworkPolicy (networkpolicy and
# networkpolicy/default-deny, evaluated on sample connections): `kubectl kustomize`
# renders it (offline); every built-in object in the render validates with kubernetes-models
# (tests/validate/k8s-validate.mjs, with its API-server rules), and none is
# left unvalidated for want of a model. kubernetes-models has no classes for
# cert-manager's custom resources (cert-manager.io/v1), so those are checked
# by the small checker below instead: known kinds, required fields, enums,
# durations, no unknown spec fields (a structural CRD would silently drop
# them), the Issuer/Certificate chain the webhook relies on, and the agents'
# own CA (manifests/agent-certs: a ClusterIssuer whose CA Secret is in
# cert-manager's cluster resource namespace, distinct from the webhook's)
# with the example's agent Certificate issued from it into the Secret its
# diagport.dev/tls-secret names, for the names of its headless Service.
#
# Then the issue's invariants on the rendered output (issue 4, section 2):
# every webhook Ignore / None / timeout <= 10 / IfNeeded / [v1], CREATE of pods
# only, routed to the right path; the namespace and object selectors,
# evaluated on sample namespaces and pods (kube-system and diagport-system
# never reach a webhook, whatever their labels; which pods reach it with the
# annotation default and with components/label-selected); the Deployment
# (2 replicas, anti-affinity, PDB, probes, resources, command, mounts), the hardened security context on every pod
# spec, the configuration's defaults, least-privilege RBAC (none at all
# without the self-contained overlay; no wildcards; the ClusterRole limited
# by resourceNames), and the certificate Job. Finally `diagport inject` of the
# example succeeds and its output validates, and the "bites" section proves
# that the checks reject manifests that break each rule.
set -u
cd "$(dirname "$0")/../.."
T_NAME=manifests
. tests/lib.sh # every script runs from the repository root

D=$PWD/diagport
KUBECTL=/usr/bin/kubectl
PY=/usr/bin/python3
VALIDATE=tests/validate/k8s-validate.mjs
W=$(mktemp -d)
trap 'rm -rf "$W"' EXIT

# --- the checker: inv.py CHECK FILE [ARG] -----------------------------------
# Exit 0 when the check holds, else 1 with the reason on stdout.
cat >"$W/inv.py" <<'PYEOF'
import re
import sys

import yaml


class Bad(Exception):
    pass


def need(cond, msg):
    if not cond:
        raise Bad(msg)


def load(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def dump(docs, path):
    with open(path, "w", encoding="utf-8") as f:
        yaml.safe_dump_all(docs, f, sort_keys=False)


def name_of(o):
    return (o.get("metadata") or {}).get("name")


def find(docs, kind, name=None):
    return [d for d in docs if d.get("kind") == kind and (name is None or name_of(d) == name)]


def one(docs, kind, name):
    found = find(docs, kind, name)
    need(len(found) == 1, f"expected one {kind} {name}, found {len(found)}")
    return found[0]


def dig(o, *path):
    for k in path:
        if isinstance(o, dict):
            o = o.get(k)
        elif isinstance(o, list) and isinstance(k, int) and k < len(o):
            o = o[k]
        else:
            return None
    return o


NS = "diagport-system"
MWC = "diagport"
SVC = "diagport-webhook"
DEPLOY = "diagport-webhook"
SA = "diagport-webhook"
TLS_SECRET = "diagport-webhook-tls"
CONFIG = "diagport-webhook-config"
IMAGE = "ghcr.io/diagport/diagport:0.1.0"  # the agent's, which the configuration injects
WEBHOOK_IMAGE = "ghcr.io/diagport/diagport-webhook:0.1.0"  # the webhook's and its certificate Job's
PATHS = {"pods.diagport.dev": "/mutate", "namespaces.diagport.dev": "/mutate/namespace",
         "pods-pss.diagport.dev": "/mutate/no-ptrace", "namespaces-pss.diagport.dev": "/mutate/namespace/no-ptrace"}
WEBHOOK_CMD = ["/diagport", "webhook", "--listen", ":8443",
               "--tls-cert", "/etc/diagport/tls/tls.crt", "--tls-key", "/etc/diagport/tls/tls.key",
               "--config", "/etc/diagport/config/config.yaml"]
CERTS_CMD = ["/diagport", "webhook", "certs", "--namespace", NS, "--secret", TLS_SECRET,
             "--service", SVC, "--webhook-configuration", MWC]
CLUSTER_RESOURCE_NS = "cert-manager"  # where a ClusterIssuer's CA Secret must be (cert-manager's default)
AGENTS_ISSUER = "diagport-agents"
CLUSTER_SCOPED = {"Namespace", "ClusterIssuer", "ClusterRole", "ClusterRoleBinding", "MutatingWebhookConfiguration",
                  "ValidatingWebhookConfiguration", "CustomResourceDefinition"}
RBAC_KINDS = ("Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding")


def is_builtin(o):
    api = o.get("apiVersion")
    if not isinstance(api, str) or "/" not in api:
        return True
    group = api.split("/", 1)[0]
    return "." not in group or group.endswith(".k8s.io")


# --- webhooks ---


def hooks(docs):
    mwc = one(docs, "MutatingWebhookConfiguration", MWC)
    hs = mwc.get("webhooks") or []
    names = [h.get("name") for h in hs]
    need(sorted(names) == sorted(PATHS), f"webhooks are {names}, expected {sorted(PATHS)}")
    return hs


def each_hook(docs, field, ok, want):
    for h in hooks(docs):
        need(ok(h.get(field)), f"webhook {h['name']}: {field} is {h.get(field)!r}, expected {want}")


def selector_matches(sel, labels):
    """A Kubernetes label selector on a label map (None or {} selects all)."""
    for k, v in ((sel or {}).get("matchLabels") or {}).items():
        if labels.get(k) != v:
            return False
    for e in (sel or {}).get("matchExpressions") or []:
        k, op, vals = e["key"], e["operator"], e.get("values") or []
        if op == "In" and labels.get(k) not in vals:
            return False
        if op == "NotIn" and k in labels and labels[k] in vals:
            return False
        if op == "Exists" and k not in labels:
            return False
        if op == "DoesNotExist" and k in labels:
            return False
        need(op in ("In", "NotIn", "Exists", "DoesNotExist"), f"unknown selector operator {op}")
    return True


def ns_labels(name, inject=None, pss=None):
    labels = {"kubernetes.io/metadata.name": name}
    if inject is not None:
        labels["diagport.dev/inject"] = inject
    if pss is not None:
        labels["pod-security.kubernetes.io/enforce"] = pss
    return labels


# (namespace labels, which webhook must see its pods: None for neither)
SELECTOR_CASES = [
    (ns_labels("default"), "pods.diagport.dev"),
    (ns_labels("shop", "true"), "pods.diagport.dev"),
    (ns_labels("shop", "enabled"), "namespaces.diagport.dev"),
    (ns_labels("shop", "disabled"), None),
    (ns_labels("kube-system"), None),
    (ns_labels("kube-system", "enabled"), None),
    (ns_labels("diagport-system"), None),
    (ns_labels("diagport-system", "enabled"), None),
    (ns_labels("shop", None, "privileged"), "pods.diagport.dev"),
    (ns_labels("shop", None, "baseline"), "pods-pss.diagport.dev"),
    (ns_labels("shop", "enabled", "restricted"), "namespaces-pss.diagport.dev"),
    (ns_labels("shop", "disabled", "restricted"), None),
    (ns_labels("kube-system", "enabled", "baseline"), None),
]


# (namespace labels, pod labels, which webhook must see the pod: None for
# neither), for each way of opting in: "annotation" (base: every pod of a
# namespace that did not opt in reaches the webhook, which reads the pod's
# annotation) and "label-selected" (components/label-selected: only pods
# labelled diagport.dev/inject=enabled do). Either way a pod labelled
# disabled reaches no webhook, and a namespace's opt-in sends all its pods.
POD_CASES = {
    "annotation": [
        (ns_labels("default"), {}, "pods.diagport.dev"),
        (ns_labels("default"), {"app": "x"}, "pods.diagport.dev"),
        (ns_labels("default"), {"diagport.dev/inject": "enabled"}, "pods.diagport.dev"),
        (ns_labels("default"), {"diagport.dev/inject": "disabled"}, None),
        (ns_labels("shop", None, "baseline"), {"diagport.dev/inject": "disabled"}, None),
        (ns_labels("shop", "enabled"), {}, "namespaces.diagport.dev"),
        (ns_labels("shop", "enabled"), {"diagport.dev/inject": "disabled"}, None),
        (ns_labels("kube-system"), {"diagport.dev/inject": "enabled"}, None),
    ],
    "label-selected": [
        (ns_labels("default"), {}, None),
        (ns_labels("default"), {"app": "x"}, None),
        (ns_labels("default"), {"diagport.dev/inject": "true"}, None),
        (ns_labels("default"), {"diagport.dev/inject": "enabled"}, "pods.diagport.dev"),
        (ns_labels("default"), {"diagport.dev/inject": "disabled"}, None),
        (ns_labels("shop", None, "baseline"), {}, None),
        (ns_labels("shop", None, "baseline"), {"diagport.dev/inject": "enabled"}, "pods-pss.diagport.dev"),
        (ns_labels("shop", "enabled"), {}, "namespaces.diagport.dev"),
        (ns_labels("shop", "enabled", "restricted"), {}, "namespaces-pss.diagport.dev"),
        (ns_labels("shop", "enabled"), {"diagport.dev/inject": "disabled"}, None),
        (ns_labels("kube-system"), {"diagport.dev/inject": "enabled"}, None),
    ],
}


def check_selectors(docs, mode="annotation"):
    need(mode in POD_CASES, f"unknown opt-in mode {mode}")
    hs = hooks(docs)
    for h in hs:
        exprs = dig(h, "namespaceSelector", "matchExpressions") or []
        need(any(e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "NotIn"
                 and {"kube-system", NS} <= set(e.get("values") or []) for e in exprs),
             f"webhook {h['name']}: namespaceSelector has no kubernetes.io/metadata.name NotIn [kube-system, {NS}]")
    for labels, want in SELECTOR_CASES:
        got = [h["name"] for h in hs if selector_matches(h.get("namespaceSelector"), labels)]
        need(got == ([want] if want else []),
             f"a namespace labelled {labels} reaches {got or 'no webhook'}, expected {want or 'none'}")
    for labels, pod, want in POD_CASES[mode]:
        got = [h["name"] for h in hs if selector_matches(h.get("namespaceSelector"), labels)
               and selector_matches(h.get("objectSelector"), pod)]
        need(got == ([want] if want else []),
             f"{mode}: a pod labelled {pod} in a namespace labelled {labels} reaches {got or 'no webhook'}, "
             f"expected {want or 'none'}")


def check_rules(docs):
    for h in hooks(docs):
        rules = h.get("rules") or []
        need(len(rules) == 1, f"webhook {h['name']}: {len(rules)} rules, expected 1")
        r = rules[0]
        got = {k: r.get(k) for k in ("operations", "apiGroups", "apiVersions", "resources")}
        want = {"operations": ["CREATE"], "apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]}
        need(got == want, f"webhook {h['name']}: rule {got}, expected {want}")
        need(r.get("scope") in (None, "Namespaced", "*"), f"webhook {h['name']}: scope {r.get('scope')}")
        need(h.get("matchPolicy") == "Equivalent", f"webhook {h['name']}: matchPolicy {h.get('matchPolicy')!r}")


def check_routes(docs):
    for h in hooks(docs):
        cc = h.get("clientConfig") or {}
        need("url" not in cc, f"webhook {h['name']}: clientConfig.url set")
        want = {"name": SVC, "namespace": NS, "path": PATHS[h["name"]], "port": 443}
        need(cc.get("service") == want, f"webhook {h['name']}: service {cc.get('service')}, expected {want}")
    svc = one(docs, "Service", SVC)
    need(dig(svc, "metadata", "namespace") == NS, f"Service {SVC} not in {NS}")


def check_timeout(docs):
    each_hook(docs, "timeoutSeconds", lambda t: type(t) is int and 1 <= t <= 10, "an integer in 1..10")


# --- the Deployment and what goes with it ---


def deployment(docs):
    d = one(docs, "Deployment", DEPLOY)
    need(dig(d, "metadata", "namespace") == NS, f"Deployment {DEPLOY} not in {NS}")
    return d


def pod_labels(d):
    return dig(d, "spec", "template", "metadata", "labels") or {}


def webhook_container(d):
    cs = dig(d, "spec", "template", "spec", "containers") or []
    need(len(cs) == 1, f"Deployment {DEPLOY}: {len(cs)} containers, expected 1")
    return cs[0]


def check_replicas(docs):
    r = dig(deployment(docs), "spec", "replicas")
    need(r == 2, f"replicas is {r!r}, expected 2")


def check_anti_affinity(docs):
    d = deployment(docs)
    terms = dig(d, "spec", "template", "spec", "affinity", "podAntiAffinity",
                "preferredDuringSchedulingIgnoredDuringExecution") or []
    ok = [t for t in terms if dig(t, "podAffinityTerm", "topologyKey") == "kubernetes.io/hostname"
          and dig(t, "podAffinityTerm", "labelSelector")
          and selector_matches(dig(t, "podAffinityTerm", "labelSelector"), pod_labels(d))
          and isinstance(t.get("weight"), int) and t["weight"] > 0]
    need(ok, "no preferred podAntiAffinity term on kubernetes.io/hostname that selects the webhook's pods")


def check_pdb(docs):
    d = deployment(docs)
    pdbs = [p for p in find(docs, "PodDisruptionBudget")
            if dig(p, "metadata", "namespace") == NS and selector_matches(dig(p, "spec", "selector"), pod_labels(d))
            and dig(p, "spec", "selector")]
    need(len(pdbs) == 1, f"{len(pdbs)} PodDisruptionBudgets select the webhook's pods, expected 1")
    need(dig(pdbs[0], "spec", "minAvailable") == 1, f"minAvailable is {dig(pdbs[0], 'spec', 'minAvailable')!r}, expected 1")
    need(dig(pdbs[0], "apiVersion") == "policy/v1", "PodDisruptionBudget is not policy/v1")


def container_port(c, port):
    if isinstance(port, int):
        return port
    for p in c.get("ports") or []:
        if p.get("name") == port:
            return p.get("containerPort")
    return None


def check_probes(docs):
    c = webhook_container(deployment(docs))
    for probe, path in (("readinessProbe", "/readyz"), ("livenessProbe", "/healthz")):
        g = dig(c, probe, "httpGet") or {}
        got = (g.get("scheme"), g.get("path"), container_port(c, g.get("port")))
        need(got == ("HTTPS", path, 8443), f"{probe}: {got}, expected ('HTTPS', '{path}', 8443)")


def check_resources(docs):
    r = webhook_container(deployment(docs)).get("resources")
    want = {"requests": {"cpu": "10m", "memory": "16Mi"}, "limits": {"memory": "64Mi"}}
    need(r == want, f"resources {r}, expected {want}")


def check_command(docs):
    c = webhook_container(deployment(docs))
    got = (c.get("command") or []) + (c.get("args") or [])
    need(got == WEBHOOK_CMD, f"command {got}, expected {WEBHOOK_CMD}")
    need(c.get("image") == WEBHOOK_IMAGE, f"image {c.get('image')}, expected {WEBHOOK_IMAGE}")


def check_mounts(docs):
    d = deployment(docs)
    c = webhook_container(d)
    vols = {v.get("name"): v for v in dig(d, "spec", "template", "spec", "volumes") or []}
    for path, source, key, ref in (("/etc/diagport/tls", "secret", "secretName", TLS_SECRET),
                                   ("/etc/diagport/config", "configMap", "name", CONFIG)):
        ms = [m for m in c.get("volumeMounts") or [] if m.get("mountPath") == path]
        need(len(ms) == 1, f"nothing mounted at {path}")
        m = ms[0]
        need(m.get("readOnly") is True, f"{path} is not mounted readOnly")
        need("subPath" not in m, f"{path} uses subPath (updates would never reach the server)")
        got = dig(vols.get(m.get("name")), source, key)
        need(got == ref, f"{path}: volume {m.get('name')} is not the {source} {ref} (it is {got!r})")
    cm = one(docs, "ConfigMap", CONFIG)
    need("config.yaml" in (cm.get("data") or {}), f"ConfigMap {CONFIG} has no config.yaml")


def check_service(docs):
    d = deployment(docs)
    svc = one(docs, "Service", SVC)
    need(dig(svc, "spec", "selector") and selector_matches({"matchLabels": dig(svc, "spec", "selector")}, pod_labels(d)),
         f"Service {SVC} does not select the webhook's pods")
    ports = dig(svc, "spec", "ports") or []
    ok = [p for p in ports if p.get("port") == 443
          and container_port(webhook_container(d), p.get("targetPort", 443)) == 8443]
    need(ok, f"Service {SVC} has no port 443 -> 8443")


def pod_specs(docs):
    out = []
    for o in docs:
        k = o.get("kind")
        path = {"Pod": ("spec",), "Deployment": ("spec", "template", "spec"),
                "StatefulSet": ("spec", "template", "spec"), "DaemonSet": ("spec", "template", "spec"),
                "ReplicaSet": ("spec", "template", "spec"), "Job": ("spec", "template", "spec"),
                "CronJob": ("spec", "jobTemplate", "spec", "template", "spec")}.get(k)
        if path:
            out.append((f"{k} {name_of(o)}", dig(o, *path) or {}))
    return out


def check_security(docs, count):
    specs = pod_specs(docs)
    need(len(specs) == int(count), f"{len(specs)} pod specs, expected {count}")
    for where, spec in specs:
        pod = spec.get("securityContext") or {}
        cs = (spec.get("initContainers") or []) + (spec.get("containers") or [])
        need(cs, f"{where}: no containers")
        for c in cs:
            at = f"{where} container {c.get('name')}"
            sc = c.get("securityContext") or {}

            def eff(k):
                return sc[k] if k in sc else pod.get(k)

            need(eff("runAsNonRoot") is True, f"{at}: runAsNonRoot is not true")
            need(eff("runAsUser") != 0, f"{at}: runAsUser 0")
            need(sc.get("readOnlyRootFilesystem") is True, f"{at}: readOnlyRootFilesystem is not true")
            need(sc.get("allowPrivilegeEscalation") is False, f"{at}: allowPrivilegeEscalation is not false")
            need(sc.get("privileged") is not True, f"{at}: privileged")
            caps = sc.get("capabilities") or {}
            need("ALL" in (caps.get("drop") or []), f"{at}: capabilities.drop lacks ALL")
            need(not caps.get("add"), f"{at}: capabilities.add {caps.get('add')}")
            need(dig(eff("seccompProfile"), "type") == "RuntimeDefault", f"{at}: seccompProfile is not RuntimeDefault")
        need(not spec.get("hostNetwork") and not spec.get("hostPID") and not spec.get("hostIPC"), f"{where}: host namespaces")


def check_namespace(docs):
    one(docs, "Namespace", NS)
    for o in docs:
        if o.get("kind") in CLUSTER_SCOPED:
            need(not dig(o, "metadata", "namespace"), f"{o.get('kind')} {name_of(o)} is cluster-scoped but has a namespace")
        elif o.get("kind") in ("Issuer", "Certificate") and (name_of(o) or "").startswith(AGENTS_ISSUER + "-"):
            # the agents' CA: where its ClusterIssuer reads the Secret
            need(dig(o, "metadata", "namespace") == CLUSTER_RESOURCE_NS,
                 f"{o.get('kind')} {name_of(o)} is not in {CLUSTER_RESOURCE_NS}")
        else:
            need(dig(o, "metadata", "namespace") == NS, f"{o.get('kind')} {name_of(o)} is not in {NS}")


def check_config(docs):
    cm = one(docs, "ConfigMap", CONFIG)
    text = (cm.get("data") or {}).get("config.yaml") or ""
    need(re.search(r"^\s*#", text, re.M), "config.yaml has no comments")
    cfg = yaml.safe_load(text)
    need(isinstance(cfg, dict), "config.yaml is not a map")
    want = {"mode": "nosuspend", "image": IMAGE, "resources": "cpu=10m,memory=16Mi,memory-limit=64Mi",
            "ptrace": False, "sidecar": "native", "perf": False}
    for k, v in want.items():
        need(cfg.get(k) == v, f"config.yaml: {k} is {cfg.get(k)!r}, expected {v!r}")
    ex = cfg.get("excludedNamespaces")
    need(isinstance(ex, list) and {"kube-system", NS} <= set(ex), f"config.yaml: excludedNamespaces {ex!r}")


# --- RBAC ---


def check_rbac(docs, mode):
    d = deployment(docs)
    need(dig(d, "spec", "template", "spec", "automountServiceAccountToken") is False,
         "the webhook's pods mount a service-account token (automountServiceAccountToken is not false)")
    need(dig(d, "spec", "template", "spec", "serviceAccountName") == SA, f"the webhook does not run as {SA}")
    one(docs, "ServiceAccount", SA)
    rbac = [o for o in docs if o.get("kind") in RBAC_KINDS]
    if mode == "none":
        need(not rbac, f"RBAC objects where none are needed: {[(o['kind'], name_of(o)) for o in rbac]}")
        return
    kinds = sorted(o["kind"] for o in rbac)
    need(kinds == sorted(RBAC_KINDS), f"RBAC objects {kinds}, expected one of each of {sorted(RBAC_KINDS)}")
    for o in rbac:
        for i, r in enumerate(o.get("rules") or []):
            at = f"{o['kind']} {name_of(o)} rule {i}"
            for f in ("apiGroups", "resources", "verbs", "resourceNames"):
                need("*" not in (r.get(f) or []) and not any("*" in str(x) for x in r.get(f) or []),
                     f"{at}: wildcard in {f}")
            need(not r.get("nonResourceURLs"), f"{at}: nonResourceURLs")
    role = find(docs, "Role")[0]
    need(dig(role, "metadata", "namespace") == NS, f"Role not in {NS}")
    granted = set()
    for i, r in enumerate(role.get("rules") or []):
        at = f"Role {name_of(role)} rule {i}"
        need(r.get("apiGroups") == [""] and r.get("resources") == ["secrets"], f"{at}: not Secrets only")
        verbs = set(r.get("verbs") or [])
        need(verbs <= {"get", "create", "update", "patch"}, f"{at}: verbs {sorted(verbs)}")
        if verbs - {"create"}:
            need(r.get("resourceNames") == [TLS_SECRET], f"{at}: {sorted(verbs)} not limited to resourceNames [{TLS_SECRET}]")
        granted |= verbs
    need({"get", "create", "update"} <= granted, f"Role grants {sorted(granted)}, the Job needs get, create, update")
    cr = find(docs, "ClusterRole")[0]
    granted = set()
    for i, r in enumerate(cr.get("rules") or []):
        at = f"ClusterRole {name_of(cr)} rule {i}"
        need(r.get("resourceNames") == [MWC], f"{at}: not limited by resourceNames [{MWC}] ({r.get('resourceNames')})")
        need(r.get("apiGroups") == ["admissionregistration.k8s.io"] and r.get("resources") == ["mutatingwebhookconfigurations"],
             f"{at}: not mutatingwebhookconfigurations only")
        verbs = set(r.get("verbs") or [])
        need(verbs <= {"get", "patch", "update"}, f"{at}: verbs {sorted(verbs)}")
        granted |= verbs
    need({"get", "patch"} <= granted, f"ClusterRole grants {sorted(granted)}, the Job needs get, patch")
    for kind, ref in (("RoleBinding", role), ("ClusterRoleBinding", cr)):
        b = find(docs, kind)[0]
        rr = b.get("roleRef") or {}
        need((rr.get("kind"), rr.get("name")) == (ref["kind"], name_of(ref)), f"{kind} binds {rr}, expected {ref['kind']} {name_of(ref)}")
        subs = b.get("subjects") or []
        need(subs == [{"kind": "ServiceAccount", "name": SA, "namespace": NS}], f"{kind} subjects {subs}")


# --- the certificate Job (self-contained) ---


def check_certs_job(docs):
    svc, mwc, d = one(docs, "Service", SVC), one(docs, "MutatingWebhookConfiguration", MWC), deployment(docs)
    tls = [v for v in dig(d, "spec", "template", "spec", "volumes") or [] if dig(v, "secret", "secretName")]
    need([dig(v, "secret", "secretName") for v in tls] == [TLS_SECRET], "the Deployment does not mount the TLS Secret")
    job = one(docs, "Job", "diagport-webhook-certs")
    cron = one(docs, "CronJob", "diagport-webhook-certs")
    for o, spec in ((job, dig(job, "spec", "template", "spec")),
                    (cron, dig(cron, "spec", "jobTemplate", "spec", "template", "spec"))):
        at = f"{o['kind']} {name_of(o)}"
        cs = (spec or {}).get("containers") or []
        need(len(cs) == 1, f"{at}: {len(cs)} containers")
        got = (cs[0].get("command") or []) + (cs[0].get("args") or [])
        need(got == CERTS_CMD, f"{at}: command {got}, expected {CERTS_CMD}")
        need(cs[0].get("image") == WEBHOOK_IMAGE, f"{at}: image {cs[0].get('image')}")
        # The command names the objects that the rest of the render has.
        words = dict(zip(got[3::2], got[4::2]))
        need(words["--namespace"] == NS and words["--service"] == name_of(svc)
             and words["--webhook-configuration"] == name_of(mwc) and words["--secret"] == TLS_SECRET,
             f"{at}: command names objects the render does not have")
        need(spec.get("serviceAccountName") == SA, f"{at}: serviceAccountName {spec.get('serviceAccountName')}")
        need(spec.get("automountServiceAccountToken") is not False, f"{at}: no service-account token")
        need(spec.get("restartPolicy") in ("OnFailure", "Never"), f"{at}: restartPolicy {spec.get('restartPolicy')}")
    f = str(dig(cron, "spec", "schedule") or "").split()
    need(len(f) == 5 and f[0].isdigit() and f[1].isdigit() and f[2].isdigit() and 1 <= int(f[2]) <= 28
         and f[3] == "*" and f[4] == "*", f"CronJob schedule {dig(cron, 'spec', 'schedule')!r} is not once a month")
    need(dig(cron, "spec", "concurrencyPolicy") == "Forbid", "CronJob concurrencyPolicy is not Forbid")


# --- cert-manager ---

DURATION = re.compile(r"^([0-9]+(\.[0-9]+)?(ns|us|µs|ms|s|m|h))+$")
USAGES = {"signing", "digital signature", "content commitment", "key encipherment", "key agreement",
          "data encipherment", "cert sign", "crl sign", "encipher only", "decipher only", "any",
          "server auth", "client auth", "code signing", "email protection", "s/mime", "ipsec end system",
          "ipsec tunnel", "ipsec user", "timestamping", "ocsp signing", "microsoft sgc", "netscape sgc"}
CERT_SPEC = {"secretName", "issuerRef", "dnsNames", "commonName", "duration", "renewBefore",
             "renewBeforePercentage", "privateKey", "usages", "isCA", "ipAddresses", "uris", "emailAddresses",
             "otherNames", "subject", "literalSubject", "secretTemplate", "keystores", "revisionHistoryLimit",
             "additionalOutputFormats", "encodeUsagesInRequest", "nameConstraints"}
ISSUER_TYPES = {"acme", "ca", "selfSigned", "vault", "venafi"}


def cm_errors(o):
    """Errors of one cert-manager.io/v1 object, per the v1 CRD schemas."""
    errs = []
    kind, md, spec = o.get("kind"), o.get("metadata") or {}, o.get("spec")
    if o.get("apiVersion") != "cert-manager.io/v1":
        return [f"apiVersion {o.get('apiVersion')!r} is not cert-manager.io/v1"]
    if kind not in ("Issuer", "ClusterIssuer", "Certificate"):
        return [f"unexpected kind {kind!r}"]
    if not isinstance(md.get("name"), str) or not md["name"]:
        errs.append("metadata.name missing")
    if kind != "ClusterIssuer" and not isinstance(md.get("namespace"), str):
        errs.append("metadata.namespace missing")
    if not isinstance(spec, dict):
        return errs + ["spec missing"]
    if kind in ("Issuer", "ClusterIssuer"):
        types = [k for k in spec if k in ISSUER_TYPES]
        if len(types) != 1:
            errs.append(f"spec must have exactly one of {sorted(ISSUER_TYPES)} (has {types})")
        if set(spec) - ISSUER_TYPES:
            errs.append(f"spec: unknown fields {sorted(set(spec) - ISSUER_TYPES)}")
        if "ca" in spec and not isinstance(dig(spec, "ca", "secretName"), str):
            errs.append("spec.ca.secretName missing")
        if "selfSigned" in spec and not isinstance(spec["selfSigned"], dict):
            errs.append("spec.selfSigned must be an object")
        return errs
    if set(spec) - CERT_SPEC:
        errs.append(f"spec: unknown fields {sorted(set(spec) - CERT_SPEC)}")
    if not isinstance(spec.get("secretName"), str) or not spec.get("secretName"):
        errs.append("spec.secretName missing")
    ref = spec.get("issuerRef")
    if not isinstance(ref, dict) or not isinstance(ref.get("name"), str):
        errs.append("spec.issuerRef.name missing")
    elif ref.get("group", "cert-manager.io") == "cert-manager.io" and ref.get("kind", "Issuer") not in ("Issuer", "ClusterIssuer"):
        errs.append(f"spec.issuerRef.kind {ref.get('kind')!r}")
    if not any(spec.get(k) for k in ("commonName", "dnsNames", "uris", "emailAddresses", "ipAddresses", "otherNames", "literalSubject")):
        errs.append("spec has no subject or subject alternative name")
    for k in ("dnsNames", "usages", "ipAddresses", "uris", "emailAddresses"):
        if k in spec and not (isinstance(spec[k], list) and all(isinstance(x, str) for x in spec[k])):
            errs.append(f"spec.{k} must be a list of strings")
    if not set(spec.get("usages") or []) <= USAGES:
        errs.append(f"spec.usages: unknown {sorted(set(spec['usages']) - USAGES)}")
    if len(spec.get("commonName") or "") > 64:
        errs.append("spec.commonName is longer than 64 characters")
    for k in ("duration", "renewBefore"):
        if k in spec and not (isinstance(spec[k], str) and DURATION.match(spec[k])):
            errs.append(f"spec.{k} {spec[k]!r} is not a duration")
    if "isCA" in spec and not isinstance(spec["isCA"], bool):
        errs.append("spec.isCA must be a boolean")
    pk = spec.get("privateKey")
    if pk is not None:
        if not isinstance(pk, dict):
            errs.append("spec.privateKey must be an object")
        else:
            if set(pk) - {"algorithm", "size", "encoding", "rotationPolicy"}:
                errs.append(f"spec.privateKey: unknown fields {sorted(set(pk) - {'algorithm', 'size', 'encoding', 'rotationPolicy'})}")
            if pk.get("algorithm", "RSA") not in ("RSA", "ECDSA", "Ed25519"):
                errs.append(f"spec.privateKey.algorithm {pk.get('algorithm')!r}")
            if pk.get("algorithm") == "ECDSA" and pk.get("size", 256) not in (256, 384, 521):
                errs.append(f"spec.privateKey.size {pk.get('size')!r} for ECDSA")
            if pk.get("rotationPolicy", "Never") not in ("Never", "Always"):
                errs.append(f"spec.privateKey.rotationPolicy {pk.get('rotationPolicy')!r}")
            if pk.get("encoding", "PKCS1") not in ("PKCS1", "PKCS8"):
                errs.append(f"spec.privateKey.encoding {pk.get('encoding')!r}")
    return errs


def check_cert_manager(docs, count):
    need(len(docs) == int(count), f"{len(docs)} cert-manager objects, expected {count}")
    for o in docs:
        errs = cm_errors(o)
        need(not errs, f"{o.get('kind')} {name_of(o)}: {'; '.join(errs)}")


def check_chain(docs):
    mwc = one(docs, "MutatingWebhookConfiguration", MWC)
    ann = dig(mwc, "metadata", "annotations", "cert-manager.io/inject-ca-from") or ""
    need(ann.startswith(NS + "/"), f"cert-manager.io/inject-ca-from is {ann!r}, expected {NS}/CERTIFICATE")

    def issuer_of(cert):
        ref = dig(cert, "spec", "issuerRef") or {}
        need(ref.get("kind", "Issuer") == "Issuer", f"Certificate {name_of(cert)} is not issued by an Issuer")
        iss = one(docs, "Issuer", ref.get("name"))
        need(dig(iss, "metadata", "namespace") == dig(cert, "metadata", "namespace"), f"Issuer {name_of(iss)} in another namespace")
        return iss

    serving = one(docs, "Certificate", ann.split("/", 1)[1])
    need(dig(serving, "metadata", "namespace") == NS, f"Certificate {name_of(serving)} not in {NS}")
    need(dig(serving, "spec", "secretName") == TLS_SECRET, f"serving certificate's secretName is not {TLS_SECRET}")
    dep_secrets = [dig(v, "secret", "secretName") for v in dig(deployment(docs), "spec", "template", "spec", "volumes") or []]
    need(TLS_SECRET in dep_secrets, "the Deployment does not mount the serving certificate's Secret")
    names = set(dig(serving, "spec", "dnsNames") or [])
    for h in hooks(docs):
        s = dig(h, "clientConfig", "service") or {}
        for dns in (f"{s.get('name')}.{s.get('namespace')}.svc", f"{s.get('name')}.{s.get('namespace')}.svc.cluster.local"):
            need(dns in names, f"serving certificate lacks dnsName {dns}")
    need("server auth" in (dig(serving, "spec", "usages") or ["server auth"]), "serving certificate without server auth")
    need(not dig(serving, "spec", "isCA"), "the serving certificate is a CA")
    ca_issuer = issuer_of(serving)
    ca_secret = dig(ca_issuer, "spec", "ca", "secretName")
    need(ca_secret, f"Issuer {name_of(ca_issuer)} is not a CA issuer")
    cas = [c for c in find(docs, "Certificate") if dig(c, "spec", "secretName") == ca_secret and dig(c, "metadata", "namespace") == NS]
    need(len(cas) == 1, f"{len(cas)} Certificates write the CA Secret {ca_secret}, expected 1")
    need(dig(cas[0], "spec", "isCA") is True, f"Certificate {name_of(cas[0])} is not isCA")
    root = issuer_of(cas[0])
    need(isinstance(dig(root, "spec", "selfSigned"), dict), f"Issuer {name_of(root)} is not selfSigned")


def check_agent_issuer(docs):
    """The ClusterIssuer diagport-agents: a CA issuer whose Secret one isCA Certificate writes in the cluster
    resource namespace, signed by a selfSigned Issuer there; a CA of its own (not the webhook's)."""
    ci = one(docs, "ClusterIssuer", AGENTS_ISSUER)
    need(not dig(ci, "metadata", "namespace"), f"ClusterIssuer {AGENTS_ISSUER} has a namespace")
    secret = dig(ci, "spec", "ca", "secretName")
    need(isinstance(secret, str) and secret, f"ClusterIssuer {AGENTS_ISSUER} is not a CA issuer")
    cas = [c for c in find(docs, "Certificate") if dig(c, "spec", "secretName") == secret]
    need(len(cas) == 1, f"{len(cas)} Certificates write the agents' CA Secret {secret}, expected 1")
    ca = cas[0]
    need(dig(ca, "metadata", "namespace") == CLUSTER_RESOURCE_NS,
         f"Certificate {name_of(ca)} writes {secret} in {dig(ca, 'metadata', 'namespace')}, but a ClusterIssuer reads "
         f"its CA Secret from the cluster resource namespace {CLUSTER_RESOURCE_NS}")
    need(dig(ca, "spec", "isCA") is True, f"Certificate {name_of(ca)} is not isCA")
    need(dig(ca, "spec", "privateKey", "rotationPolicy") == "Never",
         f"Certificate {name_of(ca)}: a renewal would change the CA's key (rotationPolicy is not Never)")
    ref = dig(ca, "spec", "issuerRef") or {}
    need(ref.get("kind", "Issuer") == "Issuer", f"Certificate {name_of(ca)} is not issued by an Issuer")
    root = one(docs, "Issuer", ref.get("name"))
    need(dig(root, "metadata", "namespace") == CLUSTER_RESOURCE_NS, f"Issuer {name_of(root)} not in {CLUSTER_RESOURCE_NS}")
    need(isinstance(dig(root, "spec", "selfSigned"), dict), f"Issuer {name_of(root)} is not selfSigned")
    webhook_cas = {dig(i, "spec", "ca", "secretName") for i in find(docs, "Issuer") if dig(i, "spec", "ca")}
    need(secret not in webhook_cas, f"the agents' CA Secret {secret} is also a webhook Issuer's CA")
    need(name_of(ca) != "diagport-ca" and secret != "diagport-ca", "the agents' CA is the webhook's")


def check_agent_cert(docs):
    """The example's Certificate: from the ClusterIssuer diagport-agents, into the Secret the Deployment's
    diagport.dev/tls-secret names, for the names of a headless Service that selects the pods on the agent's port."""
    d = one(docs, "Deployment", "aspnetapp")
    ns = dig(d, "metadata", "namespace")
    secret = dig(d, "spec", "template", "metadata", "annotations", "diagport.dev/tls-secret")
    need(secret, "the Deployment has no diagport.dev/tls-secret annotation")
    certs = [c for c in find(docs, "Certificate") if dig(c, "spec", "secretName") == secret]
    need(len(certs) == 1, f"{len(certs)} Certificates write the Secret {secret} that tls-secret names, expected 1")
    c = certs[0]
    need(dig(c, "metadata", "namespace") == ns, f"Certificate {name_of(c)} is not in the Deployment's namespace {ns}")
    ref = dig(c, "spec", "issuerRef") or {}
    need((ref.get("kind"), ref.get("name"), ref.get("group", "cert-manager.io")) == ("ClusterIssuer", AGENTS_ISSUER, "cert-manager.io"),
         f"Certificate {name_of(c)} is issued by {ref}, expected the ClusterIssuer {AGENTS_ISSUER}")
    need(not dig(c, "spec", "isCA"), f"Certificate {name_of(c)} is a CA")
    need("server auth" in (dig(c, "spec", "usages") or ["server auth"]), f"Certificate {name_of(c)} without server auth")
    need(dig(c, "spec", "privateKey", "rotationPolicy") == "Always", f"Certificate {name_of(c)}: renewals keep the key")
    names = set(dig(c, "spec", "dnsNames") or [])
    heads = [s for s in find(docs, "Service") if dig(s, "spec", "clusterIP") == "None"
             and dig(s, "metadata", "namespace") == ns and dig(s, "spec", "selector")
             and selector_matches({"matchLabels": dig(s, "spec", "selector")}, pod_labels(d))
             and any(p.get("port") == 52323 for p in dig(s, "spec", "ports") or [])]
    need(len(heads) == 1, f"{len(heads)} headless Services select the pods on the agent's port 52323, expected 1")
    svc = name_of(heads[0])
    for dns in (f"{svc}.{ns}.svc", f"{svc}.{ns}.svc.cluster.local", f"*.{svc}.{ns}.svc.cluster.local"):
        need(dns in names, f"Certificate {name_of(c)} lacks dnsName {dns}")
    for dns in names:
        need(dns.endswith(f".{ns}.svc") or dns.endswith(f".{ns}.svc.cluster.local"),
             f"Certificate {name_of(c)}: dnsName {dns} is not a name of namespace {ns}'s Services")


# --- the example ---


def check_example(docs):
    d = one(docs, "Deployment", "aspnetapp")
    need(dig(d, "metadata", "namespace") == "demo", "Deployment aspnetapp is not in demo")
    ann = dig(d, "spec", "template", "metadata", "annotations") or {}
    need(ann.get("diagport.dev/inject") == "true", f"pod template annotation diagport.dev/inject is {ann.get('diagport.dev/inject')!r}")
    need(ann.get("diagport.dev/tls-secret") == "aspnetapp-diag-tls",
         f"pod template annotation diagport.dev/tls-secret is {ann.get('diagport.dev/tls-secret')!r}")
    imgs = [c.get("image") for c in dig(d, "spec", "template", "spec", "containers") or []]
    need(imgs == ["mcr.microsoft.com/dotnet/samples:aspnetapp"], f"images {imgs}")
    ns = one(docs, "Namespace", "demo")
    labels = dig(ns, "metadata", "labels") or {}
    need(not any(k.startswith("diagport.dev/") for k in labels), f"namespace demo has diagport labels {labels}")


def check_injected(docs):
    d = one(docs, "Deployment", "aspnetapp")
    spec = dig(d, "spec", "template", "spec") or {}
    agent = [c for c in spec.get("initContainers") or [] if c.get("name") == "diagport-agent"]
    need(len(agent) == 1 and agent[0].get("restartPolicy") == "Always", "no native-sidecar diagport-agent")
    need(dig(d, "spec", "template", "metadata", "annotations", "diagport.dev/status"), "no diagport.dev/status")
    env = {e.get("name"): e.get("value") for c in spec.get("containers") or [] for e in c.get("env") or []}
    need(env.get("DOTNET_DiagnosticPorts") == "/diag/port,nosuspend,connect", f"DOTNET_DiagnosticPorts is {env.get('DOTNET_DiagnosticPorts')!r}")
    # tls-secret: the Secret cert-manager writes, mounted into the agent, and https://
    secret = dig(d, "spec", "template", "metadata", "annotations", "diagport.dev/tls-secret")
    vols = {v.get("name"): dig(v, "secret", "secretName") for v in spec.get("volumes") or []}
    mounted = {vols.get(m.get("name")): m for m in agent[0].get("volumeMounts") or []}
    need(secret in mounted and mounted[secret].get("mountPath") == "/etc/diagport/tls" and mounted[secret].get("readOnly") is True,
         f"the agent does not mount the Secret {secret} read-only at /etc/diagport/tls")
    args = (agent[0].get("command") or []) + (agent[0].get("args") or [])
    need(any(str(a).startswith("https://") for a in args), f"the agent does not serve https:// ({args})")


# --- split and mutate ---


def split(path, builtin_out, custom_out):
    docs = load(path)
    need(docs, f"{path}: no objects")
    need(all(isinstance(d, dict) and d.get("kind") for d in docs), f"{path}: a document without kind")
    dump([d for d in docs if is_builtin(d)], builtin_out)
    dump([d for d in docs if not is_builtin(d)], custom_out)
    print(f"{sum(map(is_builtin, docs))} built-in, {sum(not is_builtin(d) for d in docs)} custom")


def mutate(which, src, out):
    docs = load(src)
    d = find(docs, "Deployment", DEPLOY)
    c = webhook_container(d[0]) if d else None
    if which == "failure-fail":
        hooks(docs)[1]["failurePolicy"] = "Fail"
    elif which == "side-effects-unknown":
        hooks(docs)[0]["sideEffects"] = "Unknown"
    elif which == "timeout-30":
        hooks(docs)[0]["timeoutSeconds"] = 30
    elif which == "reinvocation-never":
        hooks(docs)[0]["reinvocationPolicy"] = "Never"
    elif which == "review-v1beta1":
        hooks(docs)[1]["admissionReviewVersions"] = ["v1", "v1beta1"]
    elif which == "selector-kube-system":
        hooks(docs)[1]["namespaceSelector"] = {"matchLabels": {"diagport.dev/inject": "enabled"}}
    elif which == "no-object-selector":
        for h in hooks(docs):
            h.pop("objectSelector", None)
    elif which == "schema-broken":
        hooks(docs)[0]["timeoutSeconds"] = "5"
        del hooks(docs)[1]["clientConfig"]
    elif which == "replicas-1":
        d[0]["spec"]["replicas"] = 1
    elif which == "no-anti-affinity":
        del d[0]["spec"]["template"]["spec"]["affinity"]
    elif which == "no-pdb":
        docs = [o for o in docs if o.get("kind") != "PodDisruptionBudget"]
    elif which == "rootfs-writable":
        c["securityContext"]["readOnlyRootFilesystem"] = False
    elif which == "no-seccomp":
        del c["securityContext"]["seccompProfile"]
        del d[0]["spec"]["template"]["spec"]["securityContext"]["seccompProfile"]
    elif which == "job-keeps-caps":
        job = one(docs, "Job", "diagport-webhook-certs")
        job["spec"]["template"]["spec"]["containers"][0]["securityContext"]["capabilities"] = {"drop": ["NET_RAW"]}
    elif which == "clusterrole-unnamed":
        for r in find(docs, "ClusterRole")[0]["rules"]:
            r.pop("resourceNames", None)
    elif which == "role-wildcard":
        find(docs, "Role")[0]["rules"][0]["verbs"] = ["*"]
    elif which == "netpol-agent-open":
        find(docs, "NetworkPolicy")[0]["spec"]["ingress"][1].pop("from")
    elif which == "cert-no-secret":
        del one(docs, "Certificate", "diagport-webhook")["spec"]["secretName"]
    elif which == "agent-ca-elsewhere":
        one(docs, "Certificate", "diagport-agents-ca")["metadata"]["namespace"] = NS
    elif which == "agent-ca-shared":
        one(docs, "ClusterIssuer", AGENTS_ISSUER)["spec"]["ca"]["secretName"] = "diagport-ca"
    elif which == "agent-cert-other-secret":
        one(docs, "Certificate", "aspnetapp-diag")["spec"]["secretName"] = "aspnetapp-tls"
    elif which == "agent-cert-no-wildcard":
        one(docs, "Certificate", "aspnetapp-diag")["spec"]["dnsNames"].pop()
    elif which == "agent-cert-webhook-issuer":
        one(docs, "Certificate", "aspnetapp-diag")["spec"]["issuerRef"] = {"name": "diagport-ca", "kind": "Issuer"}
    elif which == "cert-wrong-dns":
        one(docs, "Certificate", "diagport-webhook")["spec"]["dnsNames"] = ["diagport-webhook.default.svc"]
    else:
        raise SystemExit(f"unknown mutation {which}")
    dump(docs, out)


def netpol_allows(docs, src_ns, proto, port):
    """NetworkPolicy (networking.k8s.io/v1) semantics for a pod of the policies' namespace with no labels of its
    own: a connection from a pod of namespace src_ns to proto/port is allowed when no Ingress policy selects the
    pod, or some rule of one that does admits it (a rule: every peer list and port list empty or matching)."""
    pols = [p for p in find(docs, "NetworkPolicy") if "Ingress" in (p["spec"].get("policyTypes") or ["Ingress"])]
    selecting = [p for p in pols if selector_matches(p["spec"].get("podSelector"), {})]
    if not selecting:
        return True
    for p in selecting:
        for rule in p["spec"].get("ingress") or []:
            peers, ports = rule.get("from"), rule.get("ports")
            peer_ok = not peers or any("namespaceSelector" in q and "podSelector" not in q and "ipBlock" not in q
                                       and selector_matches(q["namespaceSelector"], ns_labels(src_ns)) for q in peers)
            port_ok = not ports or any(q.get("protocol", "TCP") == proto and
                                       (q.get("port") == port or q.get("port") <= port <= q.get("endPort", -1))
                                       for q in ports)
            if peer_ok and port_ok:
                return True
    return False


def check_netpol(docs, mode):
    """The agents' ports (TCP 52323, 52325) only from the named namespace (monitoring); with mode open every other
    port from anywhere, with mode default-deny nothing else."""
    need(len(find(docs, "NetworkPolicy")) == 1, "expected one NetworkPolicy")
    agent = {("TCP", 52323), ("TCP", 52325)}
    for src in ("monitoring", "shop", "other"):
        for proto, port in (("TCP", 52323), ("TCP", 52325), ("TCP", 1), ("TCP", 8080), ("TCP", 52322),
                            ("TCP", 52324), ("TCP", 52326), ("TCP", 65535), ("UDP", 53), ("UDP", 52323),
                            ("SCTP", 9)):
            if (proto, port) in agent:
                want = src == "monitoring"
            else:
                want = mode == "open"
            got = netpol_allows(docs, src, proto, port)
            need(got == want, f"{proto}/{port} from namespace {src}: {'allowed' if got else 'denied'}, "
                              f"expected {'allowed' if want else 'denied'}")


CHECKS = {
    "netpol": check_netpol,
    "failure-policy": lambda docs: each_hook(docs, "failurePolicy", lambda v: v == "Ignore", "Ignore"),
    "side-effects": lambda docs: each_hook(docs, "sideEffects", lambda v: v == "None", "None"),
    "timeout": check_timeout,
    "reinvocation": lambda docs: each_hook(docs, "reinvocationPolicy", lambda v: v == "IfNeeded", "IfNeeded"),
    "review-versions": lambda docs: each_hook(docs, "admissionReviewVersions", lambda v: v == ["v1"], "['v1']"),
    "rules": check_rules,
    "routes": check_routes,
    "selectors": check_selectors,
    "replicas": check_replicas,
    "anti-affinity": check_anti_affinity,
    "pdb": check_pdb,
    "probes": check_probes,
    "resources": check_resources,
    "command": check_command,
    "mounts": check_mounts,
    "service": check_service,
    "security": check_security,
    "namespace": check_namespace,
    "config": check_config,
    "rbac": check_rbac,
    "certs-job": check_certs_job,
    "cert-manager-fields": check_cert_manager,
    "cert-manager-chain": check_chain,
    "agent-issuer": check_agent_issuer,
    "agent-cert": check_agent_cert,
    "example": check_example,
    "injected": check_injected,
}


def main():
    cmd = sys.argv[1]
    try:
        if cmd == "split":
            split(*sys.argv[2:5])
        elif cmd == "mutate":
            mutate(*sys.argv[2:5])
        else:
            CHECKS[cmd](load(sys.argv[2]), *sys.argv[3:])
    except Bad as e:
        print(e)
        sys.exit(1)
    except (yaml.YAMLError, OSError) as e:
        print(f"{type(e).__name__}: {e}")
        sys.exit(1)


main()
PYEOF

# pycheck NAME CHECK FILE [ARG]: PASS when the checker's CHECK holds on FILE.
pycheck() {
	local name=$1
	shift
	if "$PY" "$W/inv.py" "$@" >"$W/why" 2>&1; then
		pass "$name"
	else
		fail "$name" "$(head -c 400 "$W/why" | tr '\n' ' ')"
	fi
}

# validate NAME FILE: k8s-validate.mjs accepts every object in FILE and has a
# model for each (a "note:" means an object went unvalidated).
validate() {
	local name=$1 file=$2 rc
	timeout 120 node "$VALIDATE" "$file" >"$W/val" 2>&1
	rc=$?
	if [ "$rc" -ne 0 ]; then
		fail "$name" "k8s-validate.mjs exit $rc: $(head -c 400 "$W/val" | tr '\n' ' ')"
	elif grep -q 'note:' "$W/val"; then
		fail "$name" "objects left unvalidated: $(grep 'note:' "$W/val" | head -c 300 | tr '\n' ' ')"
	else
		pass "$name"
	fi
}

# --- render and validate every directory -----------------------------------

DIRS="base overlays/cert-manager overlays/self-contained overlays/label-selected examples/dotnet-app"
for dir in $DIRS; do
	n=${dir##*/}
	r=$W/$n.yaml
	if ! "$KUBECTL" kustomize "manifests/$dir" >"$r" 2>"$W/$n.err" || [ ! -s "$r" ]; then
		fail "$n/render" "kubectl kustomize manifests/$dir: $(head -c 300 "$W/$n.err" | tr '\n' ' ')"
		continue
	fi
	pass "$n/render"
	if ! "$PY" "$W/inv.py" split "$r" "$W/$n.k8s.yaml" "$W/$n.crd.yaml" >"$W/why" 2>&1; then
		fail "$n/validate" "cannot split the render: $(head -c 300 "$W/why" | tr '\n' ' ')"
		continue
	fi
	validate "$n/validate" "$W/$n.k8s.yaml"
	# Custom resources escape k8s-validate.mjs: only cert-manager's are
	# expected, and only in its overlay, where the checker validates them.
	if [ "$n" = cert-manager ] || [ "$n" = label-selected ]; then
		pycheck "$n/cert-manager-fields" cert-manager-fields "$W/$n.crd.yaml" 7
		pycheck "$n/cert-manager-chain" cert-manager-chain "$r"
		pycheck "$n/agent-issuer" agent-issuer "$r"
	elif [ "$n" = dotnet-app ]; then
		pycheck "$n/cert-manager-fields" cert-manager-fields "$W/$n.crd.yaml" 1
		pycheck "$n/agent-cert" agent-cert "$r"
	else
		pycheck "$n/no-custom-resources" cert-manager-fields "$W/$n.crd.yaml" 0
	fi
done

# --- agent-certs on its own (for the self-contained overlay): only cert-manager's objects, the agents' CA ---

r=$W/agent-certs.yaml
if "$KUBECTL" kustomize manifests/agent-certs >"$r" 2>"$W/agent-certs.err" && [ -s "$r" ]; then
	pass agent-certs/render
	if "$PY" "$W/inv.py" split "$r" "$W/agent-certs.k8s.yaml" "$W/agent-certs.crd.yaml" >"$W/why" 2>&1; then
		pycheck agent-certs/no-built-in cert-manager-fields "$W/agent-certs.k8s.yaml" 0
		pycheck agent-certs/cert-manager-fields cert-manager-fields "$W/agent-certs.crd.yaml" 3
		pycheck agent-certs/agent-issuer agent-issuer "$r"
	else
		fail agent-certs/split "cannot split the render: $(head -c 300 "$W/why" | tr '\n' ' ')"
	fi
else
	fail agent-certs/render "kubectl kustomize manifests/agent-certs: $(head -c 300 "$W/agent-certs.err" | tr '\n' ' ')"
fi

# --- the agents' NetworkPolicy (both variants): renders, validates, admits what it says --------------------

for v in networkpolicy:open networkpolicy/default-deny:default-deny; do
	dir=${v%%:*} mode=${v##*:} n=netpol-${v##*:}
	r=$W/$n.yaml
	if ! "$KUBECTL" kustomize "manifests/$dir" >"$r" 2>"$W/$n.err" || [ ! -s "$r" ]; then
		fail "$n/render" "kubectl kustomize manifests/$dir: $(head -c 300 "$W/$n.err" | tr '\n' ' ')"
		continue
	fi
	pass "$n/render"
	validate "$n/validate" "$r"
	pycheck "$n/admits" netpol "$r" "$mode"
done

# --- the issue's invariants on each render that installs the webhook --------

for n in base cert-manager self-contained label-selected; do
	r=$W/$n.yaml
	[ -s "$r" ] || continue # its render already failed
	mode=annotation
	[ "$n" = label-selected ] && mode=label-selected
	pycheck "$n/selectors" selectors "$r" "$mode"
	for c in failure-policy side-effects timeout reinvocation review-versions rules routes \
		replicas anti-affinity pdb probes resources command mounts service namespace config; do
		pycheck "$n/$c" "$c" "$r"
	done
	if [ "$n" = self-contained ]; then
		pycheck "$n/security" security "$r" 3 # the Deployment, the Job, the CronJob
		pycheck "$n/rbac" rbac "$r" certs
		pycheck "$n/certs-job" certs-job "$r"
	else
		pycheck "$n/security" security "$r" 1
		pycheck "$n/rbac" rbac "$r" none
	fi
done

# --- the example: what it says, and what `diagport inject` makes of it -----

r=$W/dotnet-app.yaml
if [ -s "$r" ]; then
	pycheck example/opt-in example "$r"
	if [ ! -x "$D" ]; then
		fail example/inject "./diagport is not built"
	else
		# The render (what `kubectl apply -k` sends) and the file as written.
		for src in "$r" manifests/examples/dotnet-app/deployment.yaml; do
			k=$(basename "$src" .yaml)
			timeout 60 "$D" inject -f "$src" >"$W/$k.injected.yaml" 2>"$W/$k.inject.err"
			rc=$?
			if [ "$rc" -eq 0 ] && [ -s "$W/$k.injected.yaml" ]; then
				pass "example/inject-$k"
				# the Certificate passes through untouched: cert-manager's checker, the rest kubernetes-models
				"$PY" "$W/inv.py" split "$W/$k.injected.yaml" "$W/$k.injected.k8s.yaml" "$W/$k.injected.crd.yaml" >/dev/null 2>&1
				validate "example/inject-$k-validates" "$W/$k.injected.k8s.yaml"
				pycheck "example/inject-$k-certificate" cert-manager-fields "$W/$k.injected.crd.yaml" "$([ "$k" = dotnet-app ] && echo 1 || echo 0)"
				pycheck "example/inject-$k-agent" injected "$W/$k.injected.yaml"
			else
				fail "example/inject-$k" "diagport inject exit $rc: $(head -c 300 "$W/$k.inject.err" | tr '\n' ' ')"
			fi
		done
		# uninject gives back what uninject of the render gives (the faithful re-rendering).
		"$D" uninject -f "$r" >"$W/un-in" 2>/dev/null
		"$D" uninject -f "$W/dotnet-app.injected.yaml" >"$W/un-out" 2>/dev/null
		WHY="uninject of the injected example differs from the example"
		check example/uninject cmp -s "$W/un-in" "$W/un-out"
	fi
fi

# --- bites: each kind of check rejects manifests that break its rule --------

# bite NAME SOURCE MUTATION CHECK [ARG]: CHECK must fail on SOURCE mutated.
bite() {
	local name=$1 src=$2 mut=$3
	shift 3
	if [ ! -s "$src" ]; then
		fail "bites/$name" "no render to mutate"
	elif ! "$PY" "$W/inv.py" mutate "$mut" "$src" "$W/bite.yaml" >"$W/why" 2>&1; then
		fail "bites/$name" "mutation $mut failed: $(head -c 300 "$W/why" | tr '\n' ' ')"
	else
		"$PY" "$W/inv.py" "$1" "$W/bite.yaml" "${@:2}" >"$W/why" 2>&1
		case $?:$(grep -c Traceback "$W/why") in
		0:*) fail "bites/$name" "check $1 accepted the manifests after $mut" ;;
		1:0) pass "bites/$name" ;;
		*) fail "bites/$name" "check $1 crashed after $mut: $(tail -n 1 "$W/why")" ;;
		esac
	fi
}
B=$W/base.yaml
S=$W/self-contained.yaml
bite failure-policy "$B" failure-fail failure-policy
bite side-effects "$B" side-effects-unknown side-effects
bite timeout "$B" timeout-30 timeout
bite reinvocation "$B" reinvocation-never reinvocation
bite review-versions "$B" review-v1beta1 review-versions
bite selectors "$B" selector-kube-system selectors
bite object-selector "$B" no-object-selector selectors annotation
bite label-selected "$W/label-selected.yaml" no-object-selector selectors label-selected
bite replicas "$B" replicas-1 replicas
bite anti-affinity "$B" no-anti-affinity anti-affinity
bite pdb "$B" no-pdb pdb
bite read-only-root "$B" rootfs-writable security 1
bite seccomp "$B" no-seccomp security 1
bite job-capabilities "$S" job-keeps-caps security 3
bite clusterrole-resource-names "$S" clusterrole-unnamed rbac certs
bite rbac-wildcard "$S" role-wildcard rbac certs
bite netpol-agent-open "$W/netpol-open.yaml" netpol-agent-open netpol open
if [ -s "$W/cert-manager.crd.yaml" ]; then
	bite cert-manager-secret-name "$W/cert-manager.crd.yaml" cert-no-secret cert-manager-fields 7
fi
bite cert-manager-dns-names "$W/cert-manager.yaml" cert-wrong-dns cert-manager-chain
bite agent-ca-namespace "$W/cert-manager.yaml" agent-ca-elsewhere agent-issuer
bite agent-ca-namespace-check "$W/cert-manager.yaml" agent-ca-elsewhere namespace
bite agent-ca-shared "$W/cert-manager.yaml" agent-ca-shared agent-issuer
bite agent-cert-secret "$W/dotnet-app.yaml" agent-cert-other-secret agent-cert
bite agent-cert-dns-names "$W/dotnet-app.yaml" agent-cert-no-wildcard agent-cert
bite agent-cert-issuer "$W/dotnet-app.yaml" agent-cert-webhook-issuer agent-cert
# ... and k8s-validate.mjs knows the webhook configuration's schema.
if [ -s "$B" ] && "$PY" "$W/inv.py" mutate schema-broken "$B" "$W/bite.yaml" >/dev/null 2>&1; then
	timeout 120 node "$VALIDATE" "$W/bite.yaml" >"$W/val" 2>&1
	rc=$?
	WHY="k8s-validate.mjs exit $rc on a webhook without clientConfig and a string timeoutSeconds: $(head -c 300 "$W/val" | tr '\n' ' ')"
	check bites/validate-webhook-schema test "$rc" -eq 1 -a "$(grep -c 'webhooks\[1\] must have required property clientConfig' "$W/val")" -eq 1
else
	fail bites/validate-webhook-schema "no render to mutate"
fi
exit 0
