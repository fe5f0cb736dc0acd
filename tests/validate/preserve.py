#!/usr/bin/python3
"""preserve.py INPUT OUTPUT [--allow-change REGEX]... - check that OUTPUT keeps
everything INPUT says: every leaf value of INPUT is at the same path in OUTPUT
with the same value (and type), and every map of INPUT keeps its keys' order
in OUTPUT (OUTPUT may add keys, list items and documents' worth of fields, but
must not drop, change or reorder what was there).

Both files may hold one JSON value, a JSON stream, or multi-document YAML
(YAML 1.1 as PyYAML reads it; any local tag such as CloudFormation's `!Ref`
becomes a one-key map {"!Ref": value}). When one file is JSON and the other
YAML, short-form CloudFormation tags are rewritten to their long form on both
sides first (`!Ref x` -> {"Ref": x}, `!GetAtt a.b` -> {"Fn::GetAtt": [a, b]},
`!Sub s` -> {"Fn::Sub": s}), since JSON has no short form. When INPUT is ECS
`describe-task-definition` output ({"taskDefinition": ..., "tags": ...}) and
OUTPUT is not, INPUT is first turned into the register input it stands for
(read-only fields dropped, tags moved in), as the injector does.

Paths read like `spec.template.spec.containers[app].env[DOTNET_DiagnosticPorts].value`:
a list item with a string `name` or `Name` is indexed by it (the second item
with the same name as `[name#2]`), any other item by its position. A path that
matches (re.search) an --allow-change REGEX is not checked, nor is anything
under it. Exits 0 when OUTPUT preserves INPUT, 1 with the first difference
printed, 2 on usage or load errors. Run with Debian's /usr/bin/python3, which
has python3-yaml.
"""

import json
import re
import sys

import yaml

_Base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


class _Loader(_Base):  # pylint: disable=too-many-ancestors
    """SafeLoader that turns any local `!Tag` into {"!Tag": value}."""


def _construct_tagged(loader, suffix, node):
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {"!" + suffix: value}


_Loader.add_multi_constructor("!", _construct_tagged)


class Difference(Exception):
    pass


def load(path):
    """Returns (documents, is_json) for the file at path; empty documents dropped."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    stripped = text.lstrip()
    if stripped[:1] in ("{", "["):
        docs = _json_stream(stripped)
        if docs is not None:
            return docs, True
    docs = [d for d in yaml.load_all(text, Loader=_Loader) if d is not None]
    return docs, False


def _json_stream(text):
    decoder = json.JSONDecoder()
    docs, i = [], 0
    while i < len(text):
        try:
            value, end = decoder.raw_decode(text, i)
        except json.JSONDecodeError:
            return None
        docs.append(value)
        i = end
        while i < len(text) and text[i].isspace():
            i += 1
    return docs


def long_form(value):
    """Rewrites short-form CloudFormation tags ({"!Ref": x}) to the long form."""
    if isinstance(value, list):
        return [long_form(v) for v in value]
    if not isinstance(value, dict):
        return value
    if len(value) == 1:
        (key, inner), = value.items()
        if isinstance(key, str) and key.startswith("!"):
            name = key[1:]
            inner = long_form(inner)
            if name == "Ref":
                return {"Ref": inner}
            if name == "GetAtt" and isinstance(inner, str):
                return {"Fn::GetAtt": inner.split(".", 1)}
            return {"Fn::" + name: inner}
    out = {}
    for k, v in value.items():
        v = long_form(v)
        if k == "Fn::GetAtt" and isinstance(v, str):
            v = v.split(".", 1)
        out[k] = v
    return out


# What `aws ecs describe-task-definition` adds to register input; see
# docs/INJECTION.md: the injector turns describe output into register input.
ECS_READ_ONLY = ("taskDefinitionArn", "revision", "status", "requiresAttributes",
                 "compatibilities", "registeredAt", "registeredBy", "deregisteredAt")


def is_ecs_describe(doc):
    return (isinstance(doc, dict) and isinstance(doc.get("taskDefinition"), dict)
            and set(doc) <= {"taskDefinition", "tags"})


def ecs_register_input(doc):
    """describe-task-definition output -> the register input it stands for."""
    out = {k: v for k, v in doc["taskDefinition"].items() if k not in ECS_READ_ONLY}
    if "tags" in doc:
        out["tags"] = doc["tags"]
    return out


def item_keys(items):
    """Returns one path component per list item: its name, or its position."""
    keys, seen = [], {}
    for i, item in enumerate(items):
        name = None
        if isinstance(item, dict):
            for field in ("name", "Name"):
                if isinstance(item.get(field), str):
                    name = item[field]
                    break
        if name is None:
            keys.append(str(i))
        else:
            seen[name] = seen.get(name, 0) + 1
            keys.append(name if seen[name] == 1 else "%s#%d" % (name, seen[name]))
    return keys


def show(value):
    if isinstance(value, dict):
        return "a map" if value else "an empty map"
    if isinstance(value, list):
        return "a list" if value else "an empty list"
    return "%s %s" % (type(value).__name__, json.dumps(value, default=str))


class Checker:
    def __init__(self, allow):
        self.allow = [re.compile(a) for a in allow]

    def allowed(self, path):
        return any(a.search(path) for a in self.allow)

    def check(self, a, b, path):
        if path and self.allowed(path):
            return
        where = path or "(document)"
        if isinstance(a, dict):
            if not isinstance(b, dict):
                raise Difference("%s: input has %s, output has %s" % (where, show(a), show(b)))
            self.check_map(a, b, path)
        elif isinstance(a, list):
            if not isinstance(b, list):
                raise Difference("%s: input has %s, output has %s" % (where, show(a), show(b)))
            self.check_list(a, b, path)
        elif type(a) is not type(b) or a != b:
            raise Difference("%s: input has %s, output has %s" % (where, show(a), show(b)))

    def check_map(self, a, b, path):
        kept = []
        for key, value in a.items():
            sub = "%s.%s" % (path, key) if path else str(key)
            if self.allowed(sub):
                continue
            if key not in b:
                raise Difference("%s: missing from output (input has %s)" % (sub, show(value)))
            self.check(value, b[key], sub)
            kept.append(key)
        self.check_order(kept, list(b.keys()), path, "key")

    def check_list(self, a, b, path):
        ka, kb = item_keys(a), item_keys(b)
        index_b = {k: i for i, k in enumerate(kb)}
        kept = []
        for i, key in enumerate(ka):
            sub = "%s[%s]" % (path, key)
            if self.allowed(sub):
                continue
            if key not in index_b:
                raise Difference("%s: missing from output (input has %s)" % (sub, show(a[i])))
            self.check(a[i], b[index_b[key]], sub)
            kept.append(key)
        self.check_order(kept, kb, path, "item")

    @staticmethod
    def check_order(want, have, path, what):
        pos = {k: i for i, k in enumerate(have)}
        last = -1
        prev = None
        for key in want:
            if pos[key] < last:
                raise Difference("%s: %s order changed: input has '%s' before '%s', output the other way round"
                                 % (path or "(document)", what, prev, key))
            last, prev = pos[key], key


def main(argv):
    files, allow = [], []
    i = 0
    while i < len(argv):
        if argv[i] == "--allow-change" and i + 1 < len(argv):
            allow.append(argv[i + 1])
            i += 2
        elif argv[i].startswith("-"):
            files = []
            break
        else:
            files.append(argv[i])
            i += 1
    if len(files) != 2:
        print("usage: preserve.py INPUT OUTPUT [--allow-change REGEX]...", file=sys.stderr)
        return 2
    try:
        (ina, a_json), (outb, b_json) = load(files[0]), load(files[1])
        checker = Checker(allow)
    except (OSError, ValueError, yaml.YAMLError, re.error) as e:
        print("preserve: %s" % e, file=sys.stderr)
        return 2
    if a_json != b_json:
        ina, outb = long_form(ina), long_form(outb)
    ina = [ecs_register_input(a) if is_ecs_describe(a) and i < len(outb) and not is_ecs_describe(outb[i])
           else a for i, a in enumerate(ina)]
    if len(outb) < len(ina):
        print("preserve: %s has %d documents, %s only %d"
              % (files[0], len(ina), files[1], len(outb)))
        return 1
    for n, (a, b) in enumerate(zip(ina, outb), 1):
        try:
            checker.check(a, b, "")
        except Difference as e:
            prefix = "doc %d: " % n if len(ina) > 1 else ""
            print("preserve: %s%s" % (prefix, e))
            return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
