#!/usr/bin/env node
// cdk-synth-app.mjs OUTFILE - a small AWS CDK app whose synthesized template
// is the input of tests/integration/cdk.sh: what `diagport inject cfn` gets
// from a real CDK user. One stack with
//   - a FargateTaskDefinition (cpu 512, 1024 MiB) with one container `app`
//     (the ASP.NET sample image, an environment variable, port 8080, awslogs,
//     so the template also holds a log group, an execution role and policy);
//   - an Ec2TaskDefinition with one container `worker` that has only a
//     memory reservation.
// Synthesis is local: no AWS credentials and no network. The template JSON is
// written to OUTFILE (exit 0); an error is printed and exits 1.

import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { App, Stack } from "aws-cdk-lib";
import * as ecs from "aws-cdk-lib/aws-ecs";

if (process.argv.length !== 3) {
	console.error("usage: cdk-synth-app.mjs OUTFILE");
	process.exit(2);
}
const outfile = process.argv[2];
const outdir = fs.mkdtempSync(path.join(os.tmpdir(), "cdk-synth-"));
let status = 0;
try {
	const app = new App({ outdir });
	const stack = new Stack(app, "DiagportSample");

	const web = new ecs.FargateTaskDefinition(stack, "Web", { cpu: 512, memoryLimitMiB: 1024 });
	web.addContainer("app", {
		containerName: "app",
		image: ecs.ContainerImage.fromRegistry("mcr.microsoft.com/dotnet/samples:aspnetapp"),
		environment: { ASPNETCORE_HTTP_PORTS: "8080" },
		portMappings: [{ containerPort: 8080 }],
		logging: ecs.LogDrivers.awsLogs({ streamPrefix: "web" }),
	});

	const worker = new ecs.Ec2TaskDefinition(stack, "Worker");
	worker.addContainer("worker", {
		containerName: "worker",
		image: ecs.ContainerImage.fromRegistry("mcr.microsoft.com/dotnet/runtime:8.0"),
		memoryReservationMiB: 256,
		command: ["dotnet", "Worker.dll"],
	});

	const template = app.synth().getStackByName(stack.stackName).template;
	fs.writeFileSync(outfile, JSON.stringify(template, null, 1) + "\n");
} catch (e) {
	console.error(`cdk-synth-app: ${e && e.message ? e.message : e}`);
	status = 1;
} finally {
	fs.rmSync(outdir, { recursive: true, force: true });
}
process.exit(status);
