#!/usr/bin/env node
// app.ts - the example Fargate app (cdk/examples/fargate-api): a .NET API
// whose task definition gets diagport's agent from one line, the
// DiagportAspect below, and cdk-nag's AWS Solutions checks over everything.
//
//   cdk synth -c agentCertificateArn=ARN -c agentTlsSecretArn=ARN
//                                  the app as it deploys: the agents' load
//                                  balancer HTTPS end to end (stack.ts; without
//                                  the two ARNs synthesis fails, naming them)
//   cdk synth -c agentTls=off      the agents' path in clear text inside the VPC
//                                  (a warning at every synth)
//   cdk synth -c diagport=off      the same app without the Aspect (the tests
//                                  compare it, through `diagport inject cfn`)
//   cdk synth -c nag=off           without cdk-nag
//   cdk synth -c region=us-east-1  another region (default: the CLI's, else eu-west-1;
//                                  the load balancers' access logs need one)

import { App, Validations } from "aws-cdk-lib";
import { AwsSolutionsChecks } from "cdk-nag";

import { DiagportAspect } from "@diagport/cdk";

import { AGENT_PORT, FargateApiStack } from "./stack";

const app = new App();
const region = app.node.tryGetContext("region") ?? process.env.CDK_DEFAULT_REGION ?? "eu-west-1";
const stack = new FargateApiStack(app, "DiagportFargateApi", {
  env: { account: process.env.CDK_DEFAULT_ACCOUNT, region },
});

if (app.node.tryGetContext("diagport") !== "off") {
  // the one line: every task definition in the app gets the agent, which serves the task
  // network (the internal load balancer) because it has a token, with TLS because it has a
  // certificate (tlsSecret: the execution role may read both secrets)
  DiagportAspect.applyTo(app, { authSecret: stack.agentToken, tlsSecret: stack.agentTlsSecret, port: AGENT_PORT });
}
if (app.node.tryGetContext("nag") !== "off") {
  // the reasons go into the template's Metadata (cdk_nag), where a reviewer of the template sees them
  Validations.of(app).addPlugins(new AwsSolutionsChecks(app, { writeSuppressionsToCloudFormation: true }));
}
