'use strict';
// DiagportAspect beside other writers of the same task definition: the
// user's own overrides (escape hatches), a second Aspect, a second
// synthesis, and references to other stacks whose logical IDs repeat. Every
// list in the result must be a list, and every value the user or the CDK
// put there must still be there. Run: cd cdk && node --test test/

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const cdk = require('aws-cdk-lib');
const ecs = require('aws-cdk-lib/aws-ecs');
const logs = require('aws-cdk-lib/aws-logs');
const secretsmanager = require('aws-cdk-lib/aws-secretsmanager');
const { Template } = require('aws-cdk-lib/assertions');

const { DiagportAspect } = require('@diagport/cdk');

function newApp(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'diagport-cdk-ov-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return new cdk.App({ outdir: dir });
}

function taskDef(tpl, td) {
  const cfn = td.node.defaultChild;
  return tpl.toJSON().Resources[cdk.Stack.of(cfn).getLogicalId(cfn)].Properties;
}

function byName(props, name) {
  const c = props.ContainerDefinitions.find((x) => x.Name === name);
  assert.ok(c, `no container ${name}`);
  return c;
}

test("the user's override of a list (Environment, Capabilities, Volumes) is kept, with diagport's entries added", (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = new ecs.FargateTaskDefinition(stack, 'T', { cpu: 512, memoryLimitMiB: 1024 });
  td.addContainer('web', { image: ecs.ContainerImage.fromRegistry('example.com/web:1'), environment: { FROM_L2: '1' } });
  const cfn = td.node.defaultChild;
  cfn.addPropertyOverride('ContainerDefinitions.0.Environment', [{ Name: 'FROM_OVERRIDE', Value: '1' }]);
  cfn.addPropertyOverride('ContainerDefinitions.0.LinuxParameters.Capabilities.Add', ['NET_ADMIN']);
  cfn.addPropertyOverride('Volumes', [{ Name: 'data' }]);
  DiagportAspect.applyTo(app, { ptrace: true });
  const p = taskDef(Template.fromStack(stack), td);
  const web = byName(p, 'web');
  assert.deepEqual(web.Environment.map((e) => e.Name), ['FROM_OVERRIDE', 'DOTNET_DiagnosticPorts',
    'COMPlus_DbgEnableMiniDump', 'COMPlus_DbgMiniDumpType', 'COMPlus_DbgMiniDumpName', 'COMPlus_EnableCrashReport']);
  assert.deepEqual(web.LinuxParameters.Capabilities.Add, ['NET_ADMIN', 'SYS_PTRACE']);
  assert.deepEqual(p.Volumes.map((v) => v.Name), ['data', 'diagport-diag', 'diagport-dumps']);
  assert.ok(Array.isArray(byName(p, 'diagport-agent').Command));
});

test('two Aspects with different options: the later one wins, and every list stays a list', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const secret = new secretsmanager.Secret(stack, 'Token');
  const td = new ecs.FargateTaskDefinition(stack, 'T', { cpu: 512, memoryLimitMiB: 1024 });
  td.addContainer('web', { image: ecs.ContainerImage.fromRegistry('example.com/web:1') });
  DiagportAspect.applyTo(app, { mode: 'suspend', port: 9000, authSecret: secret });
  DiagportAspect.applyTo(stack, { port: 9100, authSecret: secret });
  const p = taskDef(Template.fromStack(stack), td);
  const agent = byName(p, 'diagport-agent');
  for (const list of [agent.Command, agent.PortMappings, agent.HealthCheck.Command, agent.Secrets, byName(p, 'web').Environment]) {
    assert.ok(Array.isArray(list), JSON.stringify(list));
  }
  assert.ok(agent.Command.includes('http://+:9100'), agent.Command.join(' '));
  assert.deepEqual(agent.Secrets, [{ Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: { Ref: stack.getLogicalId(secret.node.defaultChild) } }]);
  assert.equal(p.ContainerDefinitions.filter((c) => c.Name === 'diagport-agent').length, 1);
});

test('a second synthesis of the same app gives the same template', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const secret = new secretsmanager.Secret(stack, 'Token');
  const td = new ecs.FargateTaskDefinition(stack, 'T', { cpu: 512, memoryLimitMiB: 1024 });
  td.addContainer('web', { image: ecs.ContainerImage.fromRegistry('example.com/web:1') });
  DiagportAspect.applyTo(app, { authSecret: secret });
  const first = app.synth().getStackByName('S').template;
  const second = app.synth({ force: true }).getStackByName('S').template;
  assert.deepEqual(second, first);
});

test('a log group in another stack whose logical ID repeats in a third: the agent logs to the app\'s', (t) => {
  const app = newApp(t);
  const a = new cdk.Stack(app, 'A');
  const b = new cdk.Stack(app, 'B');
  new logs.LogGroup(a, 'LG');
  const groupB = new logs.LogGroup(b, 'LG');
  const c = new cdk.Stack(app, 'C');
  const td = new ecs.FargateTaskDefinition(c, 'T', { cpu: 512, memoryLimitMiB: 1024 });
  td.addContainer('web', {
    image: ecs.ContainerImage.fromRegistry('example.com/web:1'),
    logging: ecs.LogDrivers.awsLogs({ streamPrefix: 'web', logGroup: groupB }),
  });
  DiagportAspect.applyTo(app);
  const p = taskDef(Template.fromStack(c), td);
  const appLogs = byName(p, 'web').LogConfiguration;
  assert.match(JSON.stringify(appLogs), /"Fn::ImportValue":"B:ExportsOutput/);
  assert.deepEqual(byName(p, 'diagport-agent').LogConfiguration, appLogs);
  assert.equal(Object.keys(Template.fromStack(a).toJSON().Outputs ?? {}).length, 0, 'stack A exports nothing');
});
