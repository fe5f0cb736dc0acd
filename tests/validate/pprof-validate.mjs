#!/usr/bin/env node
// pprof-validate.mjs FILE TYPES [NAME] - decode FILE (a gzip'd pprof profile, google/pprof's profile.proto)
// with Datadog's pprof-format decoder (npm) and check what a viewer relies on:
//   - the sample types are TYPES, "type/unit,type/unit" in order (e.g. "samples/count,cpu/nanoseconds");
//   - string_table[0] is "", and every string index used (types, functions, labels, period type, comments) is in it;
//   - every sample has one value per sample type, each positive, and at least one location;
//   - every location id a sample names exists, with at least one line, and every line's function exists;
//   - ids are unique and non-zero;
//   - NAME (optional): some function's name contains it, and a sample's leaf is it.
// Prints one JSON line: counts, and the function with the most of the last sample type (a sample's leaf).
// Exits 0 when all holds; else prints what does not, and exits 1. Usage errors: exit 2.

import { readFileSync } from "node:fs";
import { gunzipSync } from "node:zlib";
import { Profile } from "pprof-format";

const [file, types, name] = process.argv.slice(2);
if (!file || !types) {
  console.error("usage: pprof-validate.mjs FILE TYPE/UNIT[,TYPE/UNIT...] [FUNCTION-NAME]");
  process.exit(2);
}
const errors = [];
const bad = (msg) => { if (errors.length < 20) errors.push(msg); };
let p;
try {
  p = Profile.decode(gunzipSync(readFileSync(file)));
} catch (e) {
  console.log(`${file}: not a gzip'd pprof profile: ${e.message}`);
  process.exit(1);
}
const strs = p.stringTable.strings;
const str = (ix, what) => {
  const i = Number(ix);
  if (!(i >= 0 && i < strs.length)) {
    bad(`${what}: string index ${i} outside the table of ${strs.length}`);
    return undefined;
  }
  return strs[i];
};
if (strs[0] !== "") bad(`string_table[0] is ${JSON.stringify(strs[0])}, not ""`);
const got = p.sampleType.map((t, i) => `${str(t.type, `sample_type[${i}]`)}/${str(t.unit, `sample_type[${i}]`)}`).join(",");
if (got !== types) bad(`sample types are ${got}, not ${types}`);
if (p.periodType) {
  str(p.periodType.type, "period_type");
  str(p.periodType.unit, "period_type");
}
p.comment.forEach((c, i) => str(c, `comment[${i}]`));

const ids = (list, what) => {
  const m = new Map();
  for (const x of list) {
    const id = Number(x.id);
    if (id === 0) bad(`${what} with id 0`);
    if (m.has(id)) bad(`${what} id ${id} twice`);
    m.set(id, x);
  }
  return m;
};
const fns = ids(p.function, "function");
const locs = ids(p.location, "location");
for (const f of p.function) {
  str(f.name, `function ${f.id} name`);
  str(f.systemName, `function ${f.id} system_name`);
  str(f.filename, `function ${f.id} filename`);
}
for (const l of p.location) {
  if (l.line.length === 0) bad(`location ${l.id} has no line`);
  for (const ln of l.line) if (!fns.has(Number(ln.functionId))) bad(`location ${l.id}: function ${ln.functionId} does not exist`);
}
const leafTotal = new Map();
const last = p.sampleType.length - 1;
let found = false;
p.sample.forEach((s, i) => {
  if (s.value.length !== p.sampleType.length) bad(`sample ${i}: ${s.value.length} values for ${p.sampleType.length} types`);
  if (!s.value.every((v) => Number(v) > 0)) bad(`sample ${i}: values ${s.value.join(",")} not all positive`);
  if (s.locationId.length === 0) bad(`sample ${i}: no location`);
  for (const l of s.label) {
    str(l.key, `sample ${i} label key`);
    str(l.str, `sample ${i} label str`);
    str(l.numUnit, `sample ${i} label num_unit`);
  }
  s.locationId.forEach((id, k) => {
    const l = locs.get(Number(id));
    if (!l) {
      bad(`sample ${i}: location ${id} does not exist`);
      return;
    }
    const f = fns.get(Number(l.line[0]?.functionId));
    const fname = f ? strs[Number(f.name)] : undefined;
    if (name && fname && fname.includes(name)) found = true;
    if (k === 0 && fname !== undefined) leafTotal.set(fname, (leafTotal.get(fname) || 0) + Number(s.value[last]));
  });
});
if (p.sample.length === 0) bad("no samples");
const top = [...leafTotal.entries()].sort((a, b) => b[1] - a[1])[0];
if (name && !found) bad(`no function named like ${JSON.stringify(name)}`);
if (name && found && !(top && top[0].includes(name))) bad(`the top leaf is ${top && top[0]}, not ${name}`);
console.log(JSON.stringify({ samples: p.sample.length, locations: p.location.length, functions: p.function.length,
  strings: strs.length, types: got, period: Number(p.period), topLeaf: top ? top[0] : null, topValue: top ? top[1] : 0 }));
if (errors.length) {
  console.log(`${file}: ${errors.join("; ")}`);
  process.exit(1);
}
