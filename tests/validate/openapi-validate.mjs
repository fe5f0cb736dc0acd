// openapi-validate.mjs - an agent's JSON answers against an OpenAPI 3.0 document (SPEC: dotnet-monitor's
// documentation/openapi.json), with Ajv (JSON Schema); formats and the document's own keywords (example, ...) not
// checked. OpenAPI 3.0's `nullable: true` is read as its generator (ASP.NET's) means it: null, or what the rest of
// the schema allows. A nullable reference is written `type: object, oneOf: [$ref], nullable: true`, which Ajv's own
// `nullable` (null passes `type` only, then fails `oneOf`) would refuse for the `"error": null` dotnet-monitor sends.
//   openapi-validate.mjs SPEC METHOD PATH STATUS FILE
//       does FILE validate against the schema the document gives METHOD PATH (a template as the document writes
//       it: /operations/{operationId}) for STATUS, as application/json or application/problem+json (a response
//       given by reference, #/components/responses/..., followed)? Exits 2 when the document has no such JSON
//       answer (a drift the test must see too).
//   openapi-validate.mjs SPEC schema NAME FILE
//       does FILE validate against the document's components.schemas.NAME (a problem body for a status the
//       document gives no content for: 401, 404)? Exits 2 when there is no such schema.
//   openapi-validate.mjs SPEC routes
//       every METHOD PATH the document has, one a line.
// Prints "ok" or the errors; exits 0 / 1.
import { readFileSync } from 'node:fs';
import Ajv from 'ajv';

const [specPath, ...args] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specPath, 'utf8'));
const METHODS = ['get', 'put', 'post', 'delete', 'options', 'head', 'patch', 'trace'];

if (args[0] === 'routes') {
	for (const [path, item] of Object.entries(spec.paths ?? {}))
		for (const m of Object.keys(item).filter((k) => METHODS.includes(k)))
			console.log(`${m.toUpperCase()} ${path}`);
	process.exit(0);
}

// #/components/... within the document
const deref = (o) => {
	while (o?.$ref?.startsWith('#/')) o = o.$ref.slice(2).split('/').reduce((x, k) => x?.[k], spec);
	return o;
};
let schema, file, what;
if (args[0] === 'schema') {
	[, what, file] = args;
	schema = spec.components?.schemas?.[what] && { $ref: `#/components/schemas/${what}` };
} else {
	const [method, path, status] = args;
	file = args[3];
	what = `${method} ${path} ${status}`;
	const content = deref(spec.paths?.[path]?.[method.toLowerCase()]?.responses?.[status])?.content ?? {};
	schema = (content['application/json'] ?? content['application/problem+json'])?.schema;
}
if (!schema) {
	console.log(`the document has no JSON schema for ${what}`);
	process.exit(2);
}
const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
// nullable as null-or-the-rest, everywhere in a schema
const nullable = (s) => {
	if (Array.isArray(s)) return s.map(nullable);
	if (s === null || typeof s !== 'object') return s;
	const { nullable: n, ...rest } = s;
	const out = Object.fromEntries(Object.entries(rest).map(([k, v]) => [k, nullable(v)]));
	return n === true ? { anyOf: [{ type: 'null' }, out] } : out;
};
// the document's components as one schema, its references pointed there
const rewrite = (s) => nullable(JSON.parse(JSON.stringify(s).replaceAll('"#/components/', '"spec#/components/')));
ajv.addSchema({ $id: 'spec', components: rewrite(spec.components ?? {}) });
const validate = ajv.compile(rewrite(schema));
const body = JSON.parse(readFileSync(file, 'utf8'));
if (validate(body)) {
	console.log('ok');
} else {
	console.log(ajv.errorsText(validate.errors, { separator: '; ' }));
	process.exit(1);
}
