#!/usr/bin/python3
"""webhook_review.py - the JSON side of tests/integration/webhook_review.sh.

Run with /usr/bin/python3 (python3-yaml and python3-jsonpatch from Debian).
Every subcommand exits 0 when its check holds, else 1 with one line on stderr
saying why (the shell script prints that line as the FAIL reason).

  pods CASE_DIR OUT_DIR        the pods of a golden case's input: every object
                               with a pod template (and bare Pods, and List
                               items) as a bare Pod annotated
                               diagport.dev/inject: "true" (an explicit value
                               already there is kept). Prints one line per
                               pod: LABEL <tab> FILE <tab> NAMESPACE
  review OBJ NS [--operation OP] [--kind GROUP/VERSION/KIND/RESOURCE]
                               an AdmissionReview for OBJ with a random uid,
                               on stdout
  response REQ RESP PATCH_OUT  the response answers REQ: same uid, allowed
                               true, and when there is a patch, patchType
                               JSONPatch and a base64 RFC 6902 array (decoded
                               into PATCH_OUT). Prints "patch N" or "none",
                               then " warnings N"
  apply DOC PATCH OUT          python3-jsonpatch applies PATCH to DOC
  equal WANT GOT               JSON-equal (key order aside; types strict)
  minimal POD PATCH FINAL      no whole-map / whole-array replacement of a
                               map or array the pod had (a null may be
                               replaced), no no-op replace, RFC 6901
                               escaping of map keys
  kubectl-safe POD OUT         POD without the numbers kubectl cannot decode
                               (beyond float64); prints "same" or "changed"
  strip-inject POD OUT         POD without the diagport.dev/inject annotation
  set-annotation POD KEY VALUE OUT
  set-label POD KEY VALUE OUT
  drop POD OUT POINTER...      POD without the members at the JSON Pointers
"""
import base64
import binascii
import copy
import datetime
import decimal
import json
import math
import os
import re
import sys
import uuid

import jsonpatch
import jsonpointer
import yaml

D = decimal.Decimal


class Bad(Exception):
    pass


class Num(D):
    """A JSON number that remembers its text (1e400 is written back as 1e400)."""

    def __new__(cls, text):
        n = D.__new__(cls, text)
        n.text = text
        return n

    def __copy__(self):
        return self

    def __deepcopy__(self, memo):
        return self


# --- JSON in and out, numbers kept exactly -------------------------------------


def _pairs(pairs):
    out = {}
    for k, v in pairs:
        if k in out:
            raise Bad("duplicate key %r" % k)
        out[k] = v
    return out


def loads(text, what="input"):
    try:
        return json.loads(text, parse_float=Num, object_pairs_hook=_pairs)
    except Bad as e:
        raise Bad("%s: %s" % (what, e))
    except ValueError as e:
        raise Bad("%s is not JSON: %s" % (what, e))


def load(path, what=None):
    with open(path, "rb") as f:
        data = f.read()
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Bad("%s is not UTF-8: %s" % (what or path, e))
    return loads(text, what or path)


def dumps(v):
    if v is None:
        return "null"
    if v is True:
        return "true"
    if v is False:
        return "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, Num):
        return v.text
    if isinstance(v, D):
        return str(v)
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            raise Bad("a non-finite number")
        return repr(v)
    if isinstance(v, str):
        return json.dumps(v, ensure_ascii=False)
    if isinstance(v, list):
        return "[" + ",".join(dumps(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(str(k), ensure_ascii=False) + ":" + dumps(x) for k, x in v.items()) + "}"
    if isinstance(v, (datetime.datetime, datetime.date)):
        return json.dumps(v.isoformat())
    raise Bad("cannot write a %s as JSON" % type(v).__name__)


def save(path, v):
    with open(path, "w", encoding="utf-8") as f:
        f.write(dumps(v))
        f.write("\n")


# --- strict JSON equality -----------------------------------------------------------


def kind_of(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float, D)):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def num(v):
    return v if isinstance(v, D) else D(repr(v)) if isinstance(v, float) else D(v)


def short(v, n=160):
    try:
        s = dumps(v)
    except Bad:
        s = repr(v)
    return s if len(s) <= n else s[:n] + "..."


def diff(want, got, path=""):
    """The first difference as 'PATH: ...', or None when JSON-equal."""
    kw, kg = kind_of(want), kind_of(got)
    if kw != kg:
        return "%s: want %s %s, got %s %s" % (path or "/", kw, short(want), kg, short(got))
    if kw == "object":
        for k in want:
            if k not in got:
                return "%s: missing (want %s)" % (path + "/" + esc(k), short(want[k]))
        for k in got:
            if k not in want:
                return "%s: unexpected (got %s)" % (path + "/" + esc(k), short(got[k]))
        for k in want:
            d = diff(want[k], got[k], path + "/" + esc(k))
            if d:
                return d
        return None
    if kw == "array":
        for i in range(min(len(want), len(got))):
            d = diff(want[i], got[i], "%s/%d" % (path, i))
            if d:
                return d
        if len(want) != len(got):
            return "%s: want %d elements, got %d" % (path or "/", len(want), len(got))
        return None
    if kw == "number":
        if num(want) != num(got):
            return "%s: want %s, got %s" % (path or "/", short(want), short(got))
        return None
    if want != got:
        return "%s: want %s, got %s" % (path or "/", short(want), short(got))
    return None


def esc(k):
    return str(k).replace("~", "~0").replace("/", "~1")


# --- pods out of a golden case -------------------------------------------------------


def read_docs(path):
    with open(path, "rb") as f:
        text = f.read().decode("utf-8")
    if path.endswith(".json"):
        return [loads(text, path)]
    docs = []
    for d in yaml.safe_load_all(text):
        if d is not None:
            docs.append(_plain(d))
    return docs


def _plain(v):
    """YAML values as JSON ones (timestamps become strings)."""
    if isinstance(v, dict):
        return {str(k) if not isinstance(k, str) else k: _plain(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_plain(x) for x in v]
    if isinstance(v, (datetime.datetime, datetime.date)):
        return v.isoformat()
    if isinstance(v, float):
        if math.isinf(v) or math.isnan(v):
            return str(v)
        return D(repr(v))
    return v


def templates(obj):
    """(kind, name, namespace, template) for each pod template in obj."""
    if not isinstance(obj, dict):
        return
    kind = obj.get("kind")
    meta = obj.get("metadata") if isinstance(obj.get("metadata"), dict) else {}
    name = meta.get("name") or "unnamed"
    ns = meta.get("namespace") or "default"
    if isinstance(kind, str) and kind.endswith("List"):
        # a typed List (DeploymentList, as the API returns it) may leave kind out of its items
        for item in obj.get("items") or []:
            if isinstance(item, dict) and kind != "List" and "kind" not in item:
                item = dict(item, kind=kind[:-len("List")])
            yield from templates(item)
        return
    if kind == "Pod":
        yield kind, name, ns, {"metadata": meta, "spec": obj.get("spec")}
        return
    spec = obj.get("spec") if isinstance(obj.get("spec"), dict) else {}
    if kind == "CronJob":
        jt = spec.get("jobTemplate") if isinstance(spec.get("jobTemplate"), dict) else {}
        jspec = jt.get("spec") if isinstance(jt.get("spec"), dict) else {}
        t = jspec.get("template")
    elif kind == "PodTemplate":
        t = obj.get("template")
    else:
        t = spec.get("template")
    if isinstance(t, dict) and isinstance(t.get("spec"), dict):
        yield kind, name, ns, t


def cmd_pods(case_dir, out_dir):
    inputs = [os.path.join(case_dir, f) for f in ("input.yaml", "input.json") if os.path.exists(os.path.join(case_dir, f))]
    if len(inputs) != 1:
        raise Bad("%s: needs exactly one of input.yaml, input.json" % case_dir)
    seen = {}
    n = 0
    for doc in read_docs(inputs[0]):
        for kind, name, ns, t in templates(doc):
            meta = copy.deepcopy(t.get("metadata")) if isinstance(t.get("metadata"), dict) else {}
            if not meta.get("name"):
                meta["name"] = name
            ann = meta.get("annotations")
            if not isinstance(ann, dict):
                ann = meta["annotations"] = {}
            ann.setdefault("diagport.dev/inject", "true")
            pod = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": copy.deepcopy(t["spec"])}
            label = "%s-%s-%s" % (kind, ns, name)
            seen[label] = seen.get(label, 0) + 1
            if seen[label] > 1:
                label += "-%d" % seen[label]
            n += 1
            f = os.path.join(out_dir, "pod%d.json" % n)
            save(f, pod)
            print("%s\t%s\t%s" % (label, f, ns))
    if n == 0:
        raise Bad("%s: no object with a pod template" % inputs[0])


# --- AdmissionReview in and out ----------------------------------------------------------


def cmd_review(args):
    obj_path, ns = args[0], args[1]
    op = "CREATE"
    gvkr = ("", "v1", "Pod", "pods")
    rest = args[2:]
    while rest:
        if rest[0] == "--operation":
            op = rest[1]
        elif rest[0] == "--kind":
            gvkr = tuple(rest[1].split("/"))
        else:
            raise Bad("review: unknown argument %s" % rest[0])
        rest = rest[2:]
    obj = load(obj_path)
    req = {
        "uid": str(uuid.uuid4()),
        "kind": {"group": gvkr[0], "version": gvkr[1], "kind": gvkr[2]},
        "resource": {"group": gvkr[0], "version": gvkr[1], "resource": gvkr[3]},
        "requestKind": {"group": gvkr[0], "version": gvkr[1], "kind": gvkr[2]},
        "requestResource": {"group": gvkr[0], "version": gvkr[1], "resource": gvkr[3]},
        "namespace": ns,
        "operation": op,
        "userInfo": {"username": "system:serviceaccount:kube-system:replicaset-controller", "groups": ["system:serviceaccounts", "system:authenticated"]},
        "object": obj,
        "oldObject": copy.deepcopy(obj) if op == "UPDATE" else None,
        "dryRun": False,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"} if op == "CREATE" else {"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"},
    }
    print(dumps({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}))


OPS = {"add", "remove", "replace", "move", "copy", "test"}


def cmd_response(req_path, resp_path, patch_out):
    req = load(req_path, "the request")
    with open(resp_path, "rb") as f:
        raw = f.read()
    if not raw.strip():
        raise Bad("no response on stdout")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise Bad("the response is not UTF-8: %s" % e)
    resp = loads(text, "the response")
    if not isinstance(resp, dict):
        raise Bad("the response is a %s, not an object" % kind_of(resp))
    if resp.get("apiVersion") != "admission.k8s.io/v1" or resp.get("kind") != "AdmissionReview":
        raise Bad("the response is not an admission.k8s.io/v1 AdmissionReview (apiVersion %s, kind %s)" % (short(resp.get("apiVersion")), short(resp.get("kind"))))
    r = resp.get("response")
    if not isinstance(r, dict):
        raise Bad("the response has no response object")
    if "request" in resp:
        raise Bad("the response carries the request back")
    if r.get("uid") != req["request"]["uid"]:
        raise Bad("response.uid %s is not the request's %s" % (short(r.get("uid")), req["request"]["uid"]))
    if r.get("allowed") is not True:
        raise Bad("response.allowed is %s, not true" % short(r.get("allowed")))
    warnings = r.get("warnings", [])
    if not isinstance(warnings, list) or not all(isinstance(w, str) and w for w in warnings):
        raise Bad("response.warnings is not an array of non-empty strings: %s" % short(warnings))
    if "patch" not in r:
        if "patchType" in r:
            raise Bad("patchType %s without a patch" % short(r["patchType"]))
        print("none warnings %d" % len(warnings))
        return
    if r.get("patchType") != "JSONPatch":
        raise Bad("patchType is %s, not \"JSONPatch\"" % short(r.get("patchType")))
    p = r["patch"]
    if not isinstance(p, str):
        raise Bad("patch is a %s, not a base64 string" % kind_of(p))
    try:
        text = base64.b64decode(p, validate=True).decode("utf-8")
    except (binascii.Error, ValueError) as e:
        raise Bad("patch is not standard base64 of UTF-8: %s" % e)
    ops = loads(text, "the decoded patch")
    if not isinstance(ops, list):
        raise Bad("the decoded patch is a %s, not an array" % kind_of(ops))
    if not ops:
        raise Bad("an empty patch: with nothing to change there must be no patch")
    for i, op in enumerate(ops):
        if not isinstance(op, dict) or op.get("op") not in OPS or not isinstance(op.get("path"), str):
            raise Bad("patch[%d] is not an RFC 6902 operation: %s" % (i, short(op)))
        if op["op"] in ("add", "replace", "test") and "value" not in op:
            raise Bad("patch[%d] (%s) has no value" % (i, op["op"]))
        if op["op"] in ("move", "copy") and not isinstance(op.get("from"), str):
            raise Bad("patch[%d] (%s) has no from" % (i, op["op"]))
    with open(patch_out, "w", encoding="utf-8") as f:
        f.write(text)
    print("patch %d warnings %d" % (len(ops), len(warnings)))


def cmd_apply(doc_path, patch_path, out):
    doc = load(doc_path)
    ops = load(patch_path, "the patch")
    try:
        res = jsonpatch.JsonPatch(ops).apply(doc)
    except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
        raise Bad("python3-jsonpatch cannot apply the patch: %s" % e)
    save(out, res)


def cmd_equal(want_path, got_path):
    d = diff(load(want_path), load(got_path))
    if d:
        raise Bad("differs at " + d)


WHOLE = ["", "/metadata", "/spec", "/metadata/annotations", "/metadata/labels", "/spec/containers", "/spec/initContainers", "/spec/volumes"]
MAPS = ("/metadata/annotations/", "/metadata/labels/")
BAD_TILDE = re.compile(r"~(?![01])")


def resolve(doc, ptr):
    try:
        return True, jsonpointer.resolve_pointer(doc, ptr)
    except (jsonpointer.JsonPointerException, TypeError, KeyError, IndexError):
        return False, None


def cmd_minimal(pod_path, patch_path, final_path):
    pod = load(pod_path)
    final = load(final_path)
    ops = load(patch_path, "the patch")
    cur = copy.deepcopy(pod)
    for i, op in enumerate(ops):
        path = op["path"]
        for p in [path] + ([op["from"]] if "from" in op else []):
            if p and not p.startswith("/"):
                raise Bad("patch[%d]: path %r does not start with /" % (i, p))
            if BAD_TILDE.search(p):
                raise Bad("patch[%d]: path %r has a ~ not escaped per RFC 6901" % (i, p))
        if op["op"] in ("add", "replace", "remove", "move", "copy"):
            for w in WHOLE:
                if path == w and isinstance(resolve(pod, w)[1], (dict, list)):
                    raise Bad("patch[%d] %s %r replaces the pod's whole %s instead of editing it member by member" % (i, op["op"], path, w or "document"))
        for m in MAPS:
            if path.startswith(m):
                toks = path[len(m):].split("/")
                key = toks[0].replace("~1", "/").replace("~0", "~")
                if len(toks) != 1:
                    raise Bad("patch[%d]: path %r goes below a %s value: a '/' in the key is not escaped as ~1" % (i, path, m.rstrip("/")))
                where = final if op["op"] in ("add", "replace") else pod
                ok, v = resolve(where, m.rstrip("/"))
                if not ok or not isinstance(v, dict) or key not in v:
                    raise Bad("patch[%d]: %r names key %r, which %s does not have" % (i, path, key, "the result" if where is final else "the pod"))
        if op["op"] == "replace":
            ok, old = resolve(cur, path)
            if ok and diff(old, op["value"]) is None:
                raise Bad("patch[%d] replaces %r with the value it already has" % (i, path))
        try:
            cur = jsonpatch.JsonPatch([op]).apply(cur)
        except (jsonpatch.JsonPatchException, jsonpointer.JsonPointerException) as e:
            raise Bad("patch[%d] %s %r does not apply: %s" % (i, op["op"], path, e))


def _finite(v):
    """v without the numbers float64 cannot hold; the second value says whether any went."""
    if isinstance(v, dict):
        out, ch = {}, False
        for k, x in v.items():
            if isinstance(x, (D, int)) and not isinstance(x, bool) and math.isinf(float(x)):
                ch = True
                continue
            out[k], c = _finite(x)
            ch = ch or c
        return out, ch
    if isinstance(v, list):
        out, ch = [], False
        for x in v:
            if isinstance(x, (D, int)) and not isinstance(x, bool) and math.isinf(float(x)):
                ch = True
                continue
            y, c = _finite(x)
            out.append(y)
            ch = ch or c
        return out, ch
    return v, False


def cmd_kubectl_safe(pod_path, out):
    v, ch = _finite(load(pod_path))
    save(out, v)
    print("changed" if ch else "same")


def cmd_strip_inject(pod_path, out):
    pod = load(pod_path)
    ann = pod.get("metadata", {}).get("annotations")
    if isinstance(ann, dict):
        ann.pop("diagport.dev/inject", None)
    save(out, pod)


def cmd_set_annotation(pod_path, key, value, out):
    pod = load(pod_path)
    pod.setdefault("metadata", {}).setdefault("annotations", {})[key] = value
    save(out, pod)


def cmd_set_label(pod_path, key, value, out):
    pod = load(pod_path)
    pod.setdefault("metadata", {}).setdefault("labels", {})[key] = value
    save(out, pod)


def cmd_drop(pod_path, out, *ptrs):
    pod = load(pod_path)
    for p in ptrs:
        parent, _, last = p.rpartition("/")
        ok, v = resolve(pod, parent)
        if ok and isinstance(v, dict):
            v.pop(last.replace("~1", "/").replace("~0", "~"), None)
    save(out, pod)


def main(argv):
    cmds = {
        "pods": (cmd_pods, 2),
        "review": (lambda *a: cmd_review(list(a)), None),
        "response": (cmd_response, 3),
        "apply": (cmd_apply, 3),
        "equal": (cmd_equal, 2),
        "minimal": (cmd_minimal, 3),
        "kubectl-safe": (cmd_kubectl_safe, 2),
        "strip-inject": (cmd_strip_inject, 2),
        "set-annotation": (cmd_set_annotation, 4),
        "set-label": (cmd_set_label, 4),
        "drop": (cmd_drop, None),
    }
    if len(argv) < 2 or argv[1] not in cmds:
        print(__doc__, file=sys.stderr)
        return 2
    fn, n = cmds[argv[1]]
    if n is not None and len(argv) - 2 != n:
        print("%s: %d arguments expected" % (argv[1], n), file=sys.stderr)
        return 2
    try:
        fn(*argv[2:])
    except Bad as e:
        print(str(e).replace("\n", " "), file=sys.stderr)
        return 1
    except OSError as e:
        print(str(e), file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
