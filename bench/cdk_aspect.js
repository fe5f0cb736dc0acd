#!/usr/bin/env node
// cdk_aspect.js N - what the two ways for the CDK construct to run the C rules
// cost, side by side in one run, on the same N task definitions (an app
// container with a port, logs and an environment variable; Fargate-sized):
//   wasm     the rules compiled to WebAssembly, in process (what DiagportAspect does);
//   binary   `diagport inject cfn --all` spawned once per task definition (the
//            alternative: the native binary at synth time).
// Prints ms per task definition, the first call (the module's load) apart, and
// the process's RSS. Run by bench/cdk_aspect.sh.
"use strict";
const { execFileSync } = require("child_process");
const path = require("path");
const root = path.join(__dirname, "..");
const { runMacro } = require(path.join(root, "cdk", "lib", "rules.js"));

const n = Number(process.argv[2] || 200);
const td = (i) => ({
  Type: "AWS::ECS::TaskDefinition",
  Properties: {
    Cpu: "512", Memory: "1024", NetworkMode: "awsvpc", RequiresCompatibilities: ["FARGATE"],
    ContainerDefinitions: [{
      Name: "api", Image: `example.com/api:${i}`, Essential: true,
      PortMappings: [{ ContainerPort: 8080, Protocol: "tcp" }],
      Environment: [{ Name: "ASPNETCORE_HTTP_PORTS", Value: "8080" }],
      LogConfiguration: { LogDriver: "awslogs", Options: { "awslogs-group": "/ecs/api", "awslogs-region": "eu-west-1", "awslogs-stream-prefix": "api" } },
    }],
  },
});

let t = process.hrtime.bigint();
const first = runMacro({ requestId: "0", fragment: { Resources: { T: td(0) } }, params: { all: "true" } });
const load = Number(process.hrtime.bigint() - t) / 1e6;
if (first.status !== "success") throw new Error(first.errorMessage);
t = process.hrtime.bigint();
for (let i = 1; i <= n; i++) {
  const r = runMacro({ requestId: String(i), fragment: { Resources: { T: td(i) } }, params: { all: "true" } });
  if (r.status !== "success") throw new Error(r.errorMessage);
}
const wasm = Number(process.hrtime.bigint() - t) / 1e6 / n;
const rssWasm = process.memoryUsage().rss;

t = process.hrtime.bigint();
for (let i = 1; i <= n; i++) {
  execFileSync(path.join(root, "diagport"), ["inject", "cfn", "--all", "-f", "-"],
    { input: JSON.stringify({ Resources: { T: td(i) } }) });
}
const bin = Number(process.hrtime.bigint() - t) / 1e6 / n;

console.log(`task definitions: ${n}`);
console.log(`wasm   first call (loads the module): ${load.toFixed(1)} ms; then ${wasm.toFixed(3)} ms per task definition; node RSS ${(rssWasm / 1048576).toFixed(1)} MiB`);
console.log(`binary ${bin.toFixed(3)} ms per task definition (one diagport process each)`);
console.log(`ratio binary/wasm: ${(bin / wasm).toFixed(1)}x`);
