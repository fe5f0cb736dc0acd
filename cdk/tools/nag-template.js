#!/usr/bin/env node
// nag-template.js TEMPLATE - cdk-nag's AWS Solutions checks over a
// synthesized CloudFormation template, loaded with CfnInclude: what the
// template holds after every override and Aspect (the checks on a live app
// see the constructs' own properties, not overrides, so they cannot see what
// DiagportAspect adds). Prints one JSON line per finding: {"rule", "resource"
// (logical ID), "type"}; exits 0 when the template loaded and was checked, 1
// otherwise.
"use strict";

const { App, Stack } = require("aws-cdk-lib");
const { CfnInclude } = require("aws-cdk-lib/cloudformation-include");
const { AwsSolutionsChecks } = require("cdk-nag");

if (process.argv.length !== 3) {
  console.error("usage: nag-template.js TEMPLATE");
  process.exit(2);
}
try {
  const app = new App();
  const stack = new Stack(app, "Checked");
  const tpl = new CfnInclude(stack, "T", { templateFile: process.argv[2] });
  const result = new AwsSolutionsChecks(app).validateScope(stack);
  for (const v of result.violations) {
    for (const r of v.violatingResources) {
      const id = r.resourceLogicalId ?? r.constructPath?.split("/").slice(-1)[0];
      const res = id && tpl.getResource(id);
      console.log(JSON.stringify({ rule: v.ruleName, resource: id, type: res ? res.cfnResourceType : null }));
    }
  }
} catch (e) {
  console.error(`nag-template: ${e && e.message ? e.message : e}`);
  process.exit(1);
}
