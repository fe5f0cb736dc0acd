#!/usr/bin/env node
// speedscope-validate.mjs FILE... - validate each FILE against the file-format
// schema that the speedscope viewer itself ships (speedscope's npm package,
// dist/release/file-format-schema.json), with Ajv. speedscope's schema does not
// say that a sample's frame indices must name frames, nor that a sampled
// profile has one weight per sample; the viewer relies on both, so they are
// checked here too.
//
// Exits 0 when every file is valid; otherwise prints "FILE: errors" for each
// invalid one and exits 1. Exit 2 on usage errors.

import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import Ajv from "ajv";

const require = createRequire(import.meta.url);
const files = process.argv.slice(2);
if (files.length === 0) {
  console.error("usage: speedscope-validate.mjs FILE...");
  process.exit(2);
}
const schema = JSON.parse(readFileSync(require.resolve("speedscope/dist/release/file-format-schema.json"), "utf8"));
const validate = new Ajv({ allErrors: true, strict: false }).compile(schema);
let bad = 0;
for (const f of files) {
  let doc;
  try {
    doc = JSON.parse(readFileSync(f, "utf8"));
  } catch (e) {
    console.log(`${f}: not JSON: ${e.message}`);
    bad++;
    continue;
  }
  const errors = [];
  if (!validate(doc))
    errors.push(...validate.errors.map((e) => `${e.instancePath || "/"} ${e.message}`));
  const n = doc?.shared?.frames?.length ?? 0;
  (doc.profiles ?? []).forEach((p, i) => {
    if (p.type !== "sampled") return;
    if (p.samples.length !== p.weights.length)
      errors.push(`/profiles/${i}: ${p.samples.length} samples but ${p.weights.length} weights`);
    p.samples.forEach((s, j) => s.forEach((ix) => {
      if (!Number.isInteger(ix) || ix < 0 || ix >= n) errors.push(`/profiles/${i}/samples/${j}: frame ${ix} of ${n}`);
    }));
  });
  if (errors.length) {
    console.log(`${f}: ${errors.slice(0, 10).join("; ")}`);
    bad++;
  }
}
process.exit(bad ? 1 : 0);
