// openapi-validate.mjs SPEC METHOD PATH STATUS FILE - does FILE (a JSON answer) validate against the
// response schema an OpenAPI 3.0 document (SPEC: dotnet-monitor's documentation/openapi.json) gives
// METHOD PATH (a template as the document writes it: /operations/{operationId}) for STATUS, as
// application/json? Ajv (JSON Schema) with OpenAPI 3.0's `nullable` understood; formats and the
// document's own keywords (example, ...) not checked. Prints "ok" or the errors; exits 0 / 1, and 2 when
// the document has no such JSON answer (a drift the test must see too).
import { readFileSync } from 'node:fs';
import Ajv from 'ajv';

const [specPath, method, path, status, file] = process.argv.slice(2);
const spec = JSON.parse(readFileSync(specPath, 'utf8'));
const op = spec.paths?.[path]?.[method.toLowerCase()];
const schema = op?.responses?.[status]?.content?.['application/json']?.schema;
if (!schema) {
	console.log(`the document has no application/json answer for ${method} ${path} ${status}`);
	process.exit(2);
}
const ajv = new Ajv({ strict: false, validateFormats: false, allErrors: true });
// the document's components as one schema, its references pointed there
const rewrite = (s) => JSON.parse(JSON.stringify(s).replaceAll('"#/components/', '"spec#/components/'));
ajv.addSchema({ $id: 'spec', components: rewrite(spec.components ?? {}) });
const validate = ajv.compile(rewrite(schema));
const body = JSON.parse(readFileSync(file, 'utf8'));
if (validate(body)) {
	console.log('ok');
} else {
	console.log(ajv.errorsText(validate.errors, { separator: '; ' }));
	process.exit(1);
}
