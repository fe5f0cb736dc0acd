#!/usr/bin/env bash
# compose-validate.sh INPUT FILE - check an injected Compose file (FILE) made
# from INPUT, with the Compose tools themselves and with its data:
#   1. docker-compose (Debian's 1.29) accepts INPUT and FILE (`config -q`:
#      the Compose schema, references between services, volumes and secrets;
#      no daemon is asked);
#   2. podman-compose (1.0.3, which has no `config`) reads FILE: `--dry-run ps`
#      parses and resolves the whole project and prints, not runs, podman;
#   3. `diagport uninject compose FILE` holds exactly INPUT's data, as PyYAML
#      reads both (merge keys resolved, anchors expanded);
#   4. every top-level x-* extension of INPUT (where anchors live) is in FILE
#      unchanged: inject never edits a map that services merge.
# Exit 0: all hold; 1: one does not (what is printed); 2: usage.
set -euo pipefail

if [ $# -ne 2 ] || [ ! -r "$1" ] || [ ! -r "$2" ]; then
	echo "usage: compose-validate.sh INPUT FILE (both readable)" >&2
	exit 2
fi
input=$1 file=$2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
diagport=${DIAGPORT:-$root/diagport}
for tool in docker-compose podman-compose; do
	if ! command -v "$tool" >/dev/null 2>&1; then
		echo "compose-validate: $tool not found (scripts/prereqs.sh test installs it)" >&2
		exit 2
	fi
done
work=$(mktemp -d "${TMPDIR:-/tmp}/compose-validate.XXXXXX")
trap 'rm -rf "$work"' EXIT

# The files are read where they are (relative paths such as secrets' files resolve there); a fixed
# project name, so that nothing depends on the directory's name.
for f in "$input" "$file"; do
	if ! docker-compose -p diagport-validate -f "$f" config -q >"$work/dc.out" 2>&1; then
		echo "compose-validate: docker-compose rejects $f:"
		cat "$work/dc.out"
		exit 1
	fi
done
if ! podman-compose --dry-run -p diagport-validate -f "$file" ps >"$work/pc.out" 2>&1; then
	echo "compose-validate: podman-compose cannot read $file:"
	tail -n 20 "$work/pc.out"
	exit 1
fi
if ! "$diagport" uninject compose -f "$file" >"$work/un" 2>"$work/un.err"; then
	echo "compose-validate: uninject of $file failed:"
	cat "$work/un.err"
	exit 1
fi
/usr/bin/python3 - "$input" "$work/un" "$file" <<'PY'
import sys
import yaml

def load(path):
    with open(path, encoding="utf-8") as f:
        return yaml.safe_load(f)

inp, back, out = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
if inp != back:
    for k in sorted(set(inp) | set(back), key=str):
        if inp.get(k) != back.get(k):
            print("compose-validate: uninject does not give back the input's data at %s:\n  input:    %r\n  uninject: %r"
                  % (k, inp.get(k), back.get(k)))
            break
    sys.exit(1)
for k, v in inp.items():
    if isinstance(k, str) and k.startswith("x-") and out.get(k) != v:
        print("compose-validate: inject changed the extension %s (services may merge it)" % k)
        sys.exit(1)
PY
