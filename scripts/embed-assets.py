#!/usr/bin/env python3
# embed-assets.py OUT.c FILE... - the page of `diagport ui` (fleet/ui/assets/) as C arrays, so that the
# binary serves it with nothing to install or fetch: ui_assets[] of fleet/ui/ui_int.h, one entry per file,
# named by its base name, with the content type its extension says. Written to OUT.c.tmp, then renamed.
import os
import sys

TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".png": "image/png",
    ".ico": "image/x-icon",
    ".json": "application/json",
}

out, files = sys.argv[1], sys.argv[2:]
lines = ["/* made by scripts/embed-assets.py from fleet/ui/assets/; not edited by hand */",
         '#include "fleet/ui/ui_int.h"', ""]
entries = []
for i, path in enumerate(sorted(files)):
    name = os.path.basename(path)
    ext = os.path.splitext(name)[1]
    if ext not in TYPES:
        sys.exit(f"embed-assets.py: {path}: no content type for '{ext}' (add it to TYPES)")
    data = open(path, "rb").read()
    body = ",".join(str(b) for b in data) or "0"
    lines.append(f"static const unsigned char a{i}[] = {{{body}}};")
    entries.append(f'\t{{ "{name}", "{TYPES[ext]}", a{i}, {len(data)} }},')
lines.append("const struct ui_asset ui_assets[] = {")
lines += entries or ['\t{ "", "", (const unsigned char *)"", 0 },']
lines.append("};")
lines.append(f"const size_t ui_n_assets = {len(entries)};")
with open(out + ".tmp", "w") as f:
    f.write("\n".join(lines) + "\n")
os.replace(out + ".tmp", out)
