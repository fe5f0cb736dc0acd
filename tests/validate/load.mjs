// load.mjs - read a file holding one JSON value, a stream of JSON values, or
// a multi-document YAML stream, the three shapes `diagport inject` reads and
// writes. Shared by the validators in this directory.
//
// YAML is read as YAML 1.1, the dialect of the Go YAML library that kubectl
// and the API server use, so that an unquoted `on`, `yes` or `0755` means
// here what it would mean to Kubernetes. Duplicate keys are errors.

import fs from "node:fs";
import { parseAllDocuments } from "yaml";

// Split a stream of concatenated JSON values; returns null if `text` is not one.
function splitJsonStream(text) {
	const out = [];
	let i = 0;
	const n = text.length;
	while (i < n) {
		while (i < n && /\s/.test(text[i])) i++;
		if (i >= n) break;
		if (text[i] !== "{" && text[i] !== "[") return null;
		let depth = 0, inStr = false, j = i;
		for (; j < n; j++) {
			const c = text[j];
			if (inStr) {
				if (c === "\\") j++;
				else if (c === '"') inStr = false;
			} else if (c === '"') inStr = true;
			else if (c === "{" || c === "[") depth++;
			else if (c === "}" || c === "]") {
				if (--depth === 0) break;
			}
		}
		if (depth !== 0) return null;
		try {
			out.push(JSON.parse(text.slice(i, j + 1)));
		} catch {
			return null;
		}
		i = j + 1;
	}
	return out;
}

// Returns the documents in `file`, in order, as plain values; an empty YAML
// document (e.g. after a leading `---`) is kept as null so that positions
// match the file. Throws with a message naming the problem on a syntax error.
export function loadDocuments(file) {
	const text = fs.readFileSync(file, "utf8");
	const first = text.trimStart()[0];
	if (first === "{" || first === "[") {
		try {
			return [JSON.parse(text)];
		} catch {
			const docs = splitJsonStream(text);
			if (docs) return docs;
			// fall through: it may still be YAML in flow style
		}
	}
	const docs = [];
	for (const doc of parseAllDocuments(text, { version: "1.1", uniqueKeys: true, merge: true })) {
		if (doc.errors.length) throw new Error(`YAML document ${docs.length + 1}: ${doc.errors[0].message}`);
		docs.push(doc.toJS({ maxAliasCount: 100 }) ?? null);
	}
	return docs;
}
