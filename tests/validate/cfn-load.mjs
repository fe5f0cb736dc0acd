#!/usr/bin/env node
// cfn-load.mjs FILE [--out DIR] - load a CloudFormation template (JSON, or
// YAML with short-form tags such as !Ref, !GetAtt a.b, !Sub, !If) the way the
// AWS CDK does: CfnInclude into a fresh App and Stack, then app.synth().
//
// That catches what CfnInclude catches (a resource without Type, a Ref or
// GetAtt to something undefined, a property of the wrong type or a missing
// required one for resource types the CDK models), and, because the CDK's
// built-in CloudFormation validation is turned from warnings into errors,
// what the bundled resource schemas catch (unknown properties, bad GetAtt
// attributes, ...). No AWS credentials or network are used.
//
// Exits 0 when the template loads and synthesizes cleanly, 1 (with the error
// on stderr) when it does not, 2 on usage errors. With --out DIR the cloud
// assembly is kept in DIR (the template is DIR/Included.template.json).

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { App, DefaultStackSynthesizer, Stack } from "aws-cdk-lib";
import { CfnInclude } from "aws-cdk-lib/cloudformation-include";

function usage() {
	console.error("usage: cfn-load.mjs FILE [--out DIR]");
	process.exit(2);
}

const args = process.argv.slice(2);
let file, out;
for (let i = 0; i < args.length; i++) {
	if (args[i] === "--out") {
		if (++i >= args.length) usage();
		out = args[i];
	} else if (args[i].startsWith("-") || file !== undefined) {
		usage();
	} else {
		file = args[i];
	}
}
if (file === undefined) usage();

// An environment that turned validation off must not make this pass.
delete process.env.CDK_VALIDATION;

const outdir = out ?? fs.mkdtempSync(path.join(os.tmpdir(), "cfn-load-"));
let status = 0;
try {
	if (!fs.statSync(file).isFile()) throw new Error("not a regular file");
	const app = new App({
		outdir,
		context: { "@aws-cdk/core:validateAgainstDefaultRules": true },
	});
	const stack = new Stack(app, "Included", {
		synthesizer: new DefaultStackSynthesizer({ generateBootstrapVersionRule: false }),
	});
	new CfnInclude(stack, "Template", { templateFile: file });
	app.synth();
} catch (e) {
	console.error(`cfn-load: ${file}: ${e && e.message ? e.message : e}`);
	status = 1;
} finally {
	if (out === undefined) fs.rmSync(outdir, { recursive: true, force: true });
}
process.exit(status);
