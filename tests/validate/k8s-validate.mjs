#!/usr/bin/env node
// k8s-validate.mjs FILE... - validate every Kubernetes object in each FILE
// (one JSON value, a JSON stream or multi-document YAML; `kind: List` items
// are validated one by one) against the Kubernetes OpenAPI schema, using the
// model class that kubernetes-models has for the object's apiVersion and kind.
//
// kubernetes-models checks types, enums, required fields and formats, but
// allows unknown fields and knows nothing of the API server's own rules
// (unique names, mounts that name a volume, ...). The few such rules that an
// injector can break are checked here too, on every pod spec, and reported as
// "api-server rule: ...".
//
// Exits 0 when every object is valid; otherwise prints one line per invalid
// object, "FILE: doc N (Kind name): errors", and exits 1. Kinds that
// kubernetes-models has no class for (custom resources) get a note and count
// as valid. Exit 2 on usage errors.

import { loadDocuments } from "./load.mjs";

const files = process.argv.slice(2);
if (files.length === 0 || files.some((f) => f.startsWith("-"))) {
	console.error("usage: k8s-validate.mjs FILE...");
	process.exit(2);
}

// Where each workload kind keeps its pod spec.
const podSpecPath = {
	Pod: ["spec"],
	PodTemplate: ["template", "spec"],
	ReplicationController: ["spec", "template", "spec"],
	Deployment: ["spec", "template", "spec"],
	StatefulSet: ["spec", "template", "spec"],
	DaemonSet: ["spec", "template", "spec"],
	ReplicaSet: ["spec", "template", "spec"],
	Job: ["spec", "template", "spec"],
	CronJob: ["spec", "jobTemplate", "spec", "template", "spec"],
};

const moduleCache = new Map();

// Returns the model class for apiVersion/kind, or null when kubernetes-models
// has none.
async function modelClass(apiVersion, kind) {
	if (typeof apiVersion !== "string" || typeof kind !== "string") return null;
	if (!/^([a-z0-9.-]+\/)?v[0-9a-z]+$/.test(apiVersion)) return null;
	let mod = moduleCache.get(apiVersion);
	if (mod === undefined) {
		try {
			mod = await import(`kubernetes-models/${apiVersion}`);
		} catch (e) {
			if (e.code !== "ERR_PACKAGE_PATH_NOT_EXPORTED" && e.code !== "ERR_MODULE_NOT_FOUND") throw e;
			mod = null;
		}
		moduleCache.set(apiVersion, mod);
	}
	const cls = mod && Object.hasOwn(mod, kind) ? mod[kind] : null;
	return cls && cls.apiVersion === apiVersion && cls.kind === kind ? cls : null;
}

const dns1123Label = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?$/;

function isPortName(s) {
	return typeof s === "string" && s.length <= 15 && /^[a-z0-9]([a-z0-9-]*[a-z0-9])?$/.test(s) &&
		!s.includes("--") && /[a-z]/.test(s);
}

const sidecarOnly = ["lifecycle", "livenessProbe", "readinessProbe", "startupProbe"];

const arr = (v) => (Array.isArray(v) ? v : []);

// API-server rules for one pod spec that the OpenAPI schema cannot express.
// claimNames: the volumeClaimTemplates of a StatefulSet, which mounts may name
// as if they were volumes.
function podSpecErrors(spec, at, claimNames) {
	const errs = [];
	if (spec === null || typeof spec !== "object") return errs;
	const volumes = new Set(claimNames);
	arr(spec.volumes).forEach((v, i) => {
		if (!v || typeof v.name !== "string") return;
		if (!dns1123Label.test(v.name) || v.name.length > 63) errs.push(`${at}.volumes[${i}].name: "${v.name}" is not a DNS-1123 label`);
		if (volumes.has(v.name)) errs.push(`${at}.volumes[${i}].name: duplicate volume "${v.name}"`);
		volumes.add(v.name);
	});
	const names = new Set();
	for (const field of ["initContainers", "containers", "ephemeralContainers"]) {
		arr(spec[field]).forEach((c, i) => {
			if (!c || typeof c !== "object") return;
			const p = `${at}.${field}[${i}]`;
			if (typeof c.name === "string") {
				if (!dns1123Label.test(c.name) || c.name.length > 63) errs.push(`${p}.name: "${c.name}" is not a DNS-1123 label`);
				if (names.has(c.name)) errs.push(`${p}.name: duplicate container name "${c.name}"`);
				names.add(c.name);
			}
			if (field === "initContainers") {
				if (c.restartPolicy !== undefined && c.restartPolicy !== "Always")
					errs.push(`${p}.restartPolicy: "${c.restartPolicy}" is not supported, only "Always"`);
				if (c.restartPolicy !== "Always")
					for (const k of sidecarOnly)
						if (c[k] !== undefined) errs.push(`${p}.${k}: may not be set on an init container unless restartPolicy is "Always"`);
			} else if (field === "containers" && c.restartPolicy !== undefined) {
				errs.push(`${p}.restartPolicy: may be set only on init containers`);
			}
			const portNames = new Set();
			arr(c.ports).forEach((port, j) => {
				if (!port || typeof port !== "object") return;
				if (typeof port.containerPort === "number" && (port.containerPort < 1 || port.containerPort > 65535))
					errs.push(`${p}.ports[${j}].containerPort: ${port.containerPort} is not between 1 and 65535`);
				if (port.name === undefined) return;
				if (!isPortName(port.name)) errs.push(`${p}.ports[${j}].name: "${port.name}" is not a valid port name (IANA_SVC_NAME)`);
				if (portNames.has(port.name)) errs.push(`${p}.ports[${j}].name: duplicate port name "${port.name}"`);
				portNames.add(port.name);
			});
			const mountPaths = new Set();
			arr(c.volumeMounts).forEach((m, j) => {
				if (!m || typeof m !== "object") return;
				if (typeof m.name === "string" && !volumes.has(m.name))
					errs.push(`${p}.volumeMounts[${j}].name: volume "${m.name}" not found`);
				if (typeof m.mountPath === "string") {
					if (mountPaths.has(m.mountPath)) errs.push(`${p}.volumeMounts[${j}].mountPath: "${m.mountPath}" must be unique`);
					mountPaths.add(m.mountPath);
				}
			});
			arr(c.env).forEach((e, j) => {
				if (e && typeof e === "object" && e.value !== undefined && e.value !== "" && e.valueFrom !== undefined)
					errs.push(`${p}.env[${j}]: may not have both value and valueFrom`);
			});
		});
	}
	return errs.map((e) => `api-server rule: ${e}`);
}

// One ajv error as "spec.template.spec.containers[0].ports[0].containerPort must be integer".
function schemaError(err) {
	const path = err.instancePath
		.split("/")
		.slice(1)
		.map((k) => k.replace(/~1/g, "/").replace(/~0/g, "~"))
		.reduce((acc, k) => (/^\d+$/.test(k) ? `${acc}[${k}]` : acc ? `${acc}.${k}` : k), "");
	let msg = `${path || "(object)"} ${err.message}`;
	if (err.params && err.params.allowedValues) msg += ` (${err.params.allowedValues.join(", ")})`;
	return msg;
}

function dig(obj, path) {
	let v = obj;
	for (const k of path) {
		if (v === null || typeof v !== "object") return undefined;
		v = v[k];
	}
	return v;
}

// Returns a list of error strings for one object (empty when valid), or a
// string note when it could not be validated.
async function validateObject(obj) {
	if (obj === null || typeof obj !== "object" || Array.isArray(obj)) return ["not an object"];
	const { apiVersion, kind } = obj;
	if (typeof apiVersion !== "string" || typeof kind !== "string") return ["missing apiVersion or kind"];
	const cls = await modelClass(apiVersion, kind);
	if (!cls) return `note: kubernetes-models has no model for ${apiVersion} ${kind}; not validated`;
	const errs = [];
	try {
		new cls(obj).validate();
	} catch (e) {
		if (!e || !Array.isArray(e.errors)) throw e;
		errs.push(...e.errors.map(schemaError));
	}
	if (podSpecPath[kind] && /^(v1|apps\/v1|batch\/v1)$/.test(apiVersion)) {
		const path = podSpecPath[kind];
		const claims = kind === "StatefulSet"
			? arr(dig(obj, ["spec", "volumeClaimTemplates"])).map((t) => dig(t, ["metadata", "name"])).filter((n) => typeof n === "string")
			: [];
		errs.push(...podSpecErrors(dig(obj, path), path.join("."), claims));
	}
	return errs;
}

function label(obj) {
	const kind = obj && typeof obj.kind === "string" ? obj.kind : "?";
	const name = obj && obj.metadata && typeof obj.metadata.name === "string" ? obj.metadata.name : "?";
	return `${kind} ${name}`;
}

let bad = 0;
for (const file of files) {
	let docs;
	try {
		docs = loadDocuments(file);
	} catch (e) {
		console.log(`${file}: ${String(e.message).split("\n")[0]}`);
		bad++;
		continue;
	}
	let objects = 0;
	for (let d = 0; d < docs.length; d++) {
		const doc = docs[d];
		if (doc === null) continue;
		const isList = doc && typeof doc === "object" && (doc.kind === "List" || (/List$/.test(doc.kind ?? "") && Array.isArray(doc.items)));
		const targets = [];
		if (isList) {
			if (!Array.isArray(doc.items)) {
				console.log(`${file}: doc ${d + 1} (${label(doc)}): items must be an array`);
				bad++;
				continue;
			}
			// A typed list (PodList, ...) may leave apiVersion and kind off its items.
			const itemKind = doc.kind === "List" ? undefined : doc.kind.slice(0, -4);
			doc.items.forEach((it, i) => {
				if (itemKind && it && typeof it === "object" && !Array.isArray(it) && it.kind === undefined)
					it = { apiVersion: doc.apiVersion, kind: itemKind, ...it };
				targets.push([`doc ${d + 1} item ${i + 1}`, it]);
			});
		} else {
			targets.push([`doc ${d + 1}`, doc]);
		}
		for (const [where, obj] of targets) {
			objects++;
			const r = await validateObject(obj);
			if (typeof r === "string") {
				console.log(`${file}: ${where} (${label(obj)}): ${r}`);
			} else if (r.length) {
				console.log(`${file}: ${where} (${label(obj)}): ${r.join("; ")}`);
				bad++;
			}
		}
	}
	if (objects === 0) {
		console.log(`${file}: no Kubernetes objects found`);
		bad++;
	}
}
process.exit(bad ? 1 : 0);
