'use strict';
// DiagportAspect: what it adds to ECS task definitions at synthesis, which
// task definitions it picks, what it leaves alone, and that it agrees with
// `diagport inject cfn`. Run: cd cdk && node --test test/

const { test } = require('node:test');
const assert = require('node:assert/strict');
const childProcess = require('node:child_process');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const cdk = require('aws-cdk-lib');
const ecr = require('aws-cdk-lib/aws-ecr');
const ecs = require('aws-cdk-lib/aws-ecs');
const logs = require('aws-cdk-lib/aws-logs');
const s3 = require('aws-cdk-lib/aws-s3');
const secretsmanager = require('aws-cdk-lib/aws-secretsmanager');
const { Annotations, Match, Template } = require('aws-cdk-lib/assertions');

const { DiagportAspect } = require('@diagport/cdk');

const DIAGPORT = path.resolve(__dirname, '..', '..', 'diagport');
const TASKDEF = 'AWS::ECS::TaskDefinition';
const AGENT = 'diagport-agent';
const ENV = 'DOTNET_DiagnosticPorts';
// the crash-dump settings every app container gets after ENV (crash-dumps, default mini)
const CRASH = ['COMPlus_DbgEnableMiniDump', 'COMPlus_DbgMiniDumpType', 'COMPlus_DbgMiniDumpName', 'COMPlus_EnableCrashReport'];
const ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:diag-token-AbCdEf';

// ---------------------------------------------------------------- helpers

function tempDir(t, prefix) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return dir;
}

// an App whose cloud assembly goes to a fresh temp dir, removed after the test
function newApp(t) {
  return new cdk.App({ outdir: tempDir(t, 'diagport-cdk-test-') });
}

function addAspect(scope, props) {
  DiagportAspect.applyTo(scope, props);
}

function fargate(scope, id, containers = ['app']) {
  const td = new ecs.FargateTaskDefinition(scope, id, { cpu: 512, memoryLimitMiB: 1024 });
  for (const name of containers) {
    td.addContainer(name, { image: ecs.ContainerImage.fromRegistry(`example.com/${name}:1`) });
  }
  return td;
}

function ec2(scope, id, more = []) {
  const td = new ecs.Ec2TaskDefinition(scope, id);
  td.addContainer('web', {
    image: ecs.ContainerImage.fromRegistry('example.com/web:1'),
    memoryLimitMiB: 512,
    environment: { ASPNETCORE_URLS: 'http://+:8080' },
    portMappings: [{ containerPort: 8080 }],
  });
  for (const name of more) {
    td.addContainer(name, { image: ecs.ContainerImage.fromRegistry(`example.com/${name}:1`), memoryLimitMiB: 256 });
  }
  return td;
}

function logicalId(construct) {
  const cfn = construct.node.defaultChild ?? construct;
  return cdk.Stack.of(cfn).getLogicalId(cfn);
}

// the synthesized resource of a task definition (L2 or L1)
function resourceOf(template, construct) {
  const r = template.toJSON().Resources[logicalId(construct)];
  assert.ok(r, `no resource ${logicalId(construct)} in the template`);
  return r;
}

function containers(template, construct) {
  return resourceOf(template, construct).Properties.ContainerDefinitions;
}

function container(template, construct, name) {
  const c = containers(template, construct).find((x) => x.Name === name);
  assert.ok(c, `no container ${name} in ${construct.node.path}`);
  return c;
}

function hasAgent(template, construct) {
  return containers(template, construct).some((c) => c.Name === AGENT);
}

function envValue(c) {
  const e = (c.Environment ?? []).find((x) => x.Name === ENV);
  return e === undefined ? undefined : e.Value;
}

function taskDefinitions(template) {
  const out = {};
  for (const [id, r] of Object.entries(template.toJSON().Resources)) if (r.Type === TASKDEF) out[id] = r;
  return out;
}

// what an injected app container must carry (docs/INJECTION.md)
function assertInjectedApp(c, { mode = 'nosuspend' } = {}) {
  assert.equal(envValue(c), `/diag/port,${mode},connect`);
  assert.deepEqual(c.MountPoints.filter((m) => m.SourceVolume.startsWith('diagport-')), [
    { SourceVolume: 'diagport-diag', ContainerPath: '/diag' },
    { SourceVolume: 'diagport-dumps', ContainerPath: '/dumps' },
  ]);
  // ptrace defaults to false: no capability (docs/INJECTION.md "When SYS_PTRACE is needed")
  assert.equal(JSON.stringify(c).includes('SYS_PTRACE'), false, JSON.stringify(c.LinuxParameters));
  assert.deepEqual(c.DependsOn.filter((d) => d.ContainerName === AGENT), [
    { ContainerName: AGENT, Condition: mode === 'suspend' ? 'HEALTHY' : 'START' },
  ]);
}

function assertInjectedTask(template, construct) {
  const r = resourceOf(template, construct);
  const agent = r.Properties.ContainerDefinitions.find((c) => c.Name === AGENT);
  assert.ok(agent, 'the agent container diagport-agent is there');
  assert.equal(agent.Essential, false);
  assert.deepEqual(agent.EntryPoint, ['/diagport']);
  assert.equal(agent.Command[0], 'launch');
  assert.deepEqual(r.Properties.Volumes.filter((v) => v.Name.startsWith('diagport-')), [
    { Name: 'diagport-diag' },
    { Name: 'diagport-dumps' },
  ]);
  assert.match(r.Metadata.diagport.status, /^v1 mode=\w+ flavour=diagport sidecar=container /);
  return agent;
}

function run(args, file) {
  return childProcess.execFileSync(DIAGPORT, args.concat(['-f', file]), { encoding: 'utf8' });
}

// ------------------------------------------------ 1. what is added, where

test('a Fargate task definition gets the agent, both volumes, the env var and DependsOn, no SYS_PTRACE', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app);
  const tpl = Template.fromStack(stack);
  const agent = assertInjectedTask(tpl, td);
  assertInjectedApp(container(tpl, td, 'app'));
  assert.deepEqual(agent.PortMappings, [{ ContainerPort: 52323, Protocol: 'tcp', Name: 'diag-http' }]);
  assert.deepEqual(agent.Command, ['launch', '--socket', '/diag/port', '--dumps', '/dumps',
    '--urls', 'http://127.0.0.1:52323']);
  assert.deepEqual(resourceOf(tpl, td).Properties.RequiresCompatibilities, ['FARGATE']);
});

test('an EC2 task definition gets the agent, both volumes, the env var (appended) and DependsOn, no SYS_PTRACE', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = ec2(stack, 'Web');
  addAspect(app);
  const tpl = Template.fromStack(stack);
  assertInjectedTask(tpl, td);
  const web = container(tpl, td, 'web');
  assertInjectedApp(web);
  // the container's own environment stays, ours comes after it
  assert.deepEqual(web.Environment.map((e) => e.Name), ['ASPNETCORE_URLS', ENV, ...CRASH]);
  assert.deepEqual(web.PortMappings, [{ ContainerPort: 8080, HostPort: 0, Protocol: 'tcp' }]);
  assert.deepEqual(resourceOf(tpl, td).Properties.RequiresCompatibilities, ['EC2']);
});

test('resources that are not task definitions are untouched, even one that looks like one', (t) => {
  const build = (withAspect) => {
    const app = newApp(t);
    const stack = new cdk.Stack(app, 'S');
    new s3.Bucket(stack, 'Bucket');
    new cdk.CfnResource(stack, 'Lookalike', {
      type: 'Custom::NotATaskDefinition',
      properties: { ContainerDefinitions: [{ Name: 'app', Image: 'x', Memory: 256 }] },
    });
    fargate(stack, 'Api');
    if (withAspect) addAspect(app);
    return Template.fromStack(stack).toJSON().Resources;
  };
  const plain = build(false);
  const injected = build(true);
  const others = (rs) => Object.fromEntries(Object.entries(rs).filter(([, r]) => r.Type !== TASKDEF));
  assert.equal(Object.keys(others(plain)).length, 3); // bucket, lookalike, task role
  assert.deepEqual(others(injected), others(plain));
  // and the task definition beside them was injected, so the Aspect did run
  const td = Object.values(injected).find((r) => r.Type === TASKDEF);
  assert.ok(td.Properties.ContainerDefinitions.some((c) => c.Name === AGENT));
});

// ------------------------------------------------------------- 2. options

test('mode suspend: the env value is /diag/port,suspend,connect and the app waits for a HEALTHY agent', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { mode: 'suspend' });
  const tpl = Template.fromStack(stack);
  assertInjectedApp(container(tpl, td, 'app'), { mode: 'suspend' });
  assert.match(resourceOf(tpl, td).Metadata.diagport.status, /^v1 mode=suspend /);
});

test('port 9999 shows in the agent: its URL, port mapping and health check', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { port: 9999 });
  const agent = container(Template.fromStack(stack), td, AGENT);
  assert.ok(agent.Command.includes('http://127.0.0.1:9999'), agent.Command.join(' '));
  assert.deepEqual(agent.PortMappings, [{ ContainerPort: 9999, Protocol: 'tcp', Name: 'diag-http' }]);
  assert.deepEqual(agent.HealthCheck.Command, ['CMD', '/diagport', 'health', '--port', '9999']);
});

test("containers ['app'] injects app and leaves the container other as it was", (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api', ['app', 'other']);
  addAspect(app, { containers: ['app'] });
  const tpl = Template.fromStack(stack);
  assertInjectedApp(container(tpl, td, 'app'));
  assert.deepEqual(container(tpl, td, 'other'), {
    Essential: true,
    Image: 'example.com/other:1',
    Name: 'other',
  });
});

test('ptrace true: SYS_PTRACE on the app container, the rest injected as without it', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { ptrace: true });
  const tpl = Template.fromStack(stack);
  assertInjectedTask(tpl, td);
  const c = container(tpl, td, 'app');
  assert.equal(envValue(c), '/diag/port,nosuspend,connect');
  assert.deepEqual(c.LinuxParameters.Capabilities.Add, ['SYS_PTRACE']);
});

test("image: the agent runs the image given, not the default", (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { image: 'registry.example.com/tools/diagport:9.9.9' });
  const agent = container(Template.fromStack(stack), td, AGENT);
  assert.equal(agent.Image, 'registry.example.com/tools/diagport:9.9.9');
});

test('the default agent image is ghcr.io/diagport/diagport:VERSION', (t) => {
  const version = fs.readFileSync(path.resolve(__dirname, '..', '..', 'VERSION'), 'utf8').trim();
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app);
  assert.equal(container(Template.fromStack(stack), td, AGENT).Image, `ghcr.io/diagport/diagport:${version}`);
});

// --------------------------------------------------------- 3. optedInOnly

function optedInApp(t, withAspect, setup) {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const chosen = fargate(stack, 'Chosen');
  const other = fargate(stack, 'Other');
  if (setup) setup(chosen, stack);
  if (withAspect) addAspect(app, { optedInOnly: true });
  return { tpl: Template.fromStack(stack), chosen, other };
}

test('optedInOnly: only the task definition opted in with DiagportAspect.optIn is injected', (t) => {
  const optIn = (td) => DiagportAspect.optIn(td);
  const { tpl, chosen, other } = optedInApp(t, true, optIn);
  const plain = optedInApp(t, false, optIn);
  assertInjectedTask(tpl, chosen);
  assertInjectedApp(container(tpl, chosen, 'app'));
  assert.equal(resourceOf(tpl, chosen).Metadata.diagport.inject, true);
  assert.equal(hasAgent(tpl, other), false);
  assert.deepEqual(resourceOf(tpl, other), resourceOf(plain.tpl, plain.other));
});

test('optedInOnly: a task definition tagged diagport.dev/inject=true with Tags.of is injected', (t) => {
  const tag = (td) => cdk.Tags.of(td).add('diagport.dev/inject', 'true');
  const { tpl, chosen, other } = optedInApp(t, true, tag);
  const plain = optedInApp(t, false, tag);
  // the tag is in the template, so `diagport inject cfn` (no --all) would inject this one
  assert.deepEqual(resourceOf(tpl, chosen).Properties.Tags, [{ Key: 'diagport.dev/inject', Value: 'true' }]);
  assert.equal(hasAgent(tpl, chosen), true, 'the tagged task definition has the agent');
  assertInjectedApp(container(tpl, chosen, 'app'));
  assert.deepEqual(resourceOf(tpl, other), resourceOf(plain.tpl, plain.other));
});

test('optedInOnly: the L1 tag diagport.dev/inject=true (TagManager.setTag) opts in', (t) => {
  const tag = (td) => td.node.defaultChild.tags.setTag('diagport.dev/inject', 'true');
  const { tpl, chosen, other } = optedInApp(t, true, tag);
  assertInjectedTask(tpl, chosen);
  assert.equal(hasAgent(tpl, other), false);
});

test("optIn's own options win over the Aspect's (port 9100 over 9000)", (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const own = fargate(stack, 'Own');
  const dflt = fargate(stack, 'Default');
  DiagportAspect.optIn(own, { port: 9100 });
  addAspect(app, { port: 9000 });
  const tpl = Template.fromStack(stack);
  assert.deepEqual(container(tpl, own, AGENT).PortMappings[0].ContainerPort, 9100);
  assert.deepEqual(container(tpl, dflt, AGENT).PortMappings[0].ContainerPort, 9000);
});

test('optIn refuses a construct that is not a task definition', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const bucket = new s3.Bucket(stack, 'Bucket');
  assert.throws(() => DiagportAspect.optIn(bucket.node.defaultChild), /S\/Bucket\/Resource is not an ECS task definition/);
});

// ---------------------------------------------------------- 4. authSecret

function secretGrantedTo(tpl, td, secret) {
  const resources = tpl.toJSON().Resources;
  const roleArn = resourceOf(tpl, td).Properties.ExecutionRoleArn;
  assert.ok(roleArn, 'the task definition names an execution role (ECS fetches Secrets with it)');
  const roleId = roleArn['Fn::GetAtt'][0];
  assert.equal(resources[roleId].Type, 'AWS::IAM::Role');
  const statements = Object.values(resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy' && r.Properties.Roles.some((x) => x.Ref === roleId))
    .flatMap((p) => p.Properties.PolicyDocument.Statement);
  return statements.some((s) => s.Effect === 'Allow'
    && [].concat(s.Action).includes('secretsmanager:GetSecretValue')
    && JSON.stringify(s.Resource) === JSON.stringify({ Ref: logicalId(secret) }));
}

test('authSecret as a Secret: the agent reads it as DIAGPORT_AUTH_TOKEN and the execution role may read it', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api'); // public image: no execution role until the Aspect needs one
  const secret = new secretsmanager.Secret(stack, 'Token');
  addAspect(app, { authSecret: secret });
  const tpl = Template.fromStack(stack);
  const agent = container(tpl, td, AGENT);
  assert.deepEqual(agent.Secrets, [{ Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: { Ref: logicalId(secret) } }]);
  assert.ok(agent.Command.includes('http://+:52323'), 'with a token the agent serves the task network');
  assert.equal(secretGrantedTo(tpl, td, secret), true);
});

test('authSecret as a Secret, the execution role already there (ECR image): the role may read it', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const repo = new ecr.Repository(stack, 'Repo');
  const td = new ecs.FargateTaskDefinition(stack, 'Api');
  td.addContainer('app', { image: ecs.ContainerImage.fromEcrRepository(repo, 'v1') });
  const secret = new secretsmanager.Secret(stack, 'Token');
  addAspect(app, { authSecret: secret });
  const tpl = Template.fromStack(stack);
  assert.deepEqual(container(tpl, td, AGENT).Secrets,
    [{ Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: { Ref: logicalId(secret) } }]);
  assert.equal(secretGrantedTo(tpl, td, secret), true);
});

test('authSecret as an ARN string appears verbatim in the agent and grants nothing', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { authSecret: ARN });
  const tpl = Template.fromStack(stack);
  assert.deepEqual(container(tpl, td, AGENT).Secrets, [{ Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: ARN }]);
  tpl.resourceCountIs('AWS::IAM::Policy', 0);
});

test('a diagport.dev/rules tag (Tags.of) gives the agent the SSM parameter as DIAGPORT_RULES', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  cdk.Tags.of(td).add('diagport.dev/rules', '/api/diagport-rules');
  addAspect(app);
  const tpl = Template.fromStack(stack);
  assertInjectedTask(tpl, td);
  assert.deepEqual(container(tpl, td, AGENT).Secrets, [{ Name: 'DIAGPORT_RULES', ValueFrom: '/api/diagport-rules' }]);
});

test('optIn with authSecret as a Secret injects that task definition with the secret', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  const secret = new secretsmanager.Secret(stack, 'Token');
  DiagportAspect.optIn(td, { authSecret: secret });
  addAspect(app, { optedInOnly: true });
  assert.deepEqual(Annotations.fromStack(stack).findError('*', Match.anyValue()).map((e) => e.entry.data), []);
  const tpl = Template.fromStack(stack);
  assert.deepEqual(container(tpl, td, AGENT).Secrets,
    [{ Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: { Ref: logicalId(secret) } }]);
  assert.equal(secretGrantedTo(tpl, td, secret), true);
});

test('authSecret as a Secret on an L1 task definition: a warning to grant the role by hand', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = new ecs.CfnTaskDefinition(stack, 'L1', {
    containerDefinitions: [{ name: 'app', image: 'example.com/app:1', memory: 256 }],
  });
  addAspect(app, { authSecret: new secretsmanager.Secret(stack, 'Token') });
  Annotations.fromStack(stack).hasWarning('/S/L1',
    Match.stringLikeRegexp('^diagport: an L1 task definition: grant its execution role'));
  assert.equal(hasAgent(Template.fromStack(stack), td), true);
});

// ----------------------------------------------------------- 4b. tlsSecret

const TLS_ARN = 'arn:aws:secretsmanager:us-east-1:123456789012:secret:diag-tls-MnOpQr';

test('tlsSecret as a Secret: the agent reads the PEM as DIAGPORT_TLS_PEM, serves https, and the execution role may read both secrets', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  const token = new secretsmanager.Secret(stack, 'Token');
  const pem = new secretsmanager.Secret(stack, 'Pem');
  addAspect(app, { authSecret: token, tlsSecret: pem });
  const tpl = Template.fromStack(stack);
  const agent = container(tpl, td, AGENT);
  assert.deepEqual(agent.Secrets, [
    { Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: { Ref: logicalId(token) } },
    { Name: 'DIAGPORT_TLS_PEM', ValueFrom: { Ref: logicalId(pem) } },
  ]);
  const i = agent.Command.indexOf('--urls');
  assert.equal(agent.Command[i + 1], 'https://+:52323', `the agent's command: ${JSON.stringify(agent.Command)}`);
  assert.equal(secretGrantedTo(tpl, td, pem), true, 'the execution role may read the TLS secret');
  assert.equal(secretGrantedTo(tpl, td, token), true, 'and the token, as before');
});

test('tlsSecret without a token: https on loopback, the TLS secret granted', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  const pem = new secretsmanager.Secret(stack, 'Pem');
  addAspect(app, { tlsSecret: pem });
  const tpl = Template.fromStack(stack);
  const agent = container(tpl, td, AGENT);
  assert.deepEqual(agent.Secrets, [{ Name: 'DIAGPORT_TLS_PEM', ValueFrom: { Ref: logicalId(pem) } }]);
  assert.ok(agent.Command.includes('https://127.0.0.1:52323'), JSON.stringify(agent.Command));
  assert.equal(secretGrantedTo(tpl, td, pem), true);
});

test('tlsSecret as an ARN string appears verbatim in the agent and grants nothing', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { authSecret: ARN, tlsSecret: TLS_ARN });
  const tpl = Template.fromStack(stack);
  assert.deepEqual(container(tpl, td, AGENT).Secrets, [
    { Name: 'DIAGPORT_AUTH_TOKEN', ValueFrom: ARN },
    { Name: 'DIAGPORT_TLS_PEM', ValueFrom: TLS_ARN },
  ]);
  tpl.resourceCountIs('AWS::IAM::Policy', 0);
});

test('tlsSecret imported by its complete ARN (Secret.fromSecretCompleteArn): the role may read exactly that ARN', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  const pem = secretsmanager.Secret.fromSecretCompleteArn(stack, 'Pem', TLS_ARN);
  addAspect(app, { authSecret: ARN, tlsSecret: pem });
  const tpl = Template.fromStack(stack);
  assert.deepEqual(container(tpl, td, AGENT).Secrets.map((s) => s.ValueFrom), [ARN, TLS_ARN]);
  const statements = Object.values(tpl.toJSON().Resources)
    .filter((r) => r.Type === 'AWS::IAM::Policy')
    .flatMap((p) => p.Properties.PolicyDocument.Statement);
  assert.ok(statements.some((s) => [].concat(s.Action).includes('secretsmanager:GetSecretValue') && s.Resource === TLS_ARN),
    JSON.stringify(statements));
});

test('optIn with tlsSecret as a Secret: https, DIAGPORT_TLS_PEM and the grant on that task definition only', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  const other = fargate(stack, 'Other');
  const token = new secretsmanager.Secret(stack, 'Token');
  const pem = new secretsmanager.Secret(stack, 'Pem');
  DiagportAspect.optIn(td, { authSecret: token, tlsSecret: pem });
  DiagportAspect.optIn(other, { authSecret: token });
  addAspect(app, { optedInOnly: true });
  assert.deepEqual(Annotations.fromStack(stack).findError('*', Match.anyValue()).map((e) => e.entry.data), []);
  const tpl = Template.fromStack(stack);
  const agent = container(tpl, td, AGENT);
  assert.deepEqual(agent.Secrets.map((s) => s.Name), ['DIAGPORT_AUTH_TOKEN', 'DIAGPORT_TLS_PEM']);
  assert.ok(agent.Command.includes('https://+:52323'), JSON.stringify(agent.Command));
  assert.equal(secretGrantedTo(tpl, td, pem), true);
  assert.ok(container(tpl, other, AGENT).Command.includes('http://+:52323'));
  assert.equal(secretGrantedTo(tpl, other, pem), false, 'a task definition without tlsSecret is not granted it');
});

test('tlsSecret as a Secret on an L1 task definition: a warning to grant the role by hand, naming tls-secret', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = new ecs.CfnTaskDefinition(stack, 'L1', {
    containerDefinitions: [{ name: 'app', image: 'example.com/app:1', memory: 256 }],
  });
  addAspect(app, { authSecret: ARN, tlsSecret: new secretsmanager.Secret(stack, 'Pem') });
  Annotations.fromStack(stack).hasWarning('/S/L1', Match.stringLikeRegexp('grant its execution role .* of its tls-secret yourself'));
  assert.deepEqual(Annotations.fromStack(stack).findWarning('/S/L1', Match.stringLikeRegexp('auth-secret')), [],
    'an ARN string is not the Aspect\'s to grant');
  assert.equal(hasAgent(Template.fromStack(stack), td), true);
});

test('the Aspect gives what the CLI gives for tls-secret', (t) => {
  assertSameAsCli(t, { authSecret: ARN, tlsSecret: TLS_ARN }, ['--auth-secret', ARN, '--tls-secret', TLS_ARN]);
});

test('tlsSecret with flavour dotnet-monitor is the rules\' refusal, an error on the task definition', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  fargate(stack, 'Api');
  addAspect(app, { tlsSecret: TLS_ARN, flavour: 'dotnet-monitor', auth: false });
  Annotations.fromStack(stack).hasError('*', Match.stringLikeRegexp('tls-secret with flavour dotnet-monitor'));
});

// ------------------------------------------- tags given with Tags.of stay

test('tags added with Tags.of stay on an injected task definition', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  cdk.Tags.of(app).add('team', 'payments');
  addAspect(app);
  const tpl = Template.fromStack(stack);
  assertInjectedTask(tpl, td);
  // the task role, which the Aspect does not touch, has it: so must the task definition
  assert.deepEqual(tpl.toJSON().Resources[logicalId(td.taskRole)].Properties.Tags, [{ Key: 'team', Value: 'payments' }]);
  assert.deepEqual(resourceOf(tpl, td).Properties.Tags, [{ Key: 'team', Value: 'payments' }]);
});

// ---------------------------------------------- 5. late tokens still resolve

test('an image from an ECR repository in another stack is still an Fn::ImportValue after the Aspect', (t) => {
  const build = (withAspect) => {
    const app = newApp(t);
    const repoStack = new cdk.Stack(app, 'Repos');
    const repo = new ecr.Repository(repoStack, 'Repo');
    const stack = new cdk.Stack(app, 'Service');
    const td = new ecs.FargateTaskDefinition(stack, 'Api');
    td.addContainer('app', { image: ecs.ContainerImage.fromEcrRepository(repo, 'v1') });
    if (withAspect) addAspect(app);
    return { tpl: Template.fromStack(stack), repoTpl: Template.fromStack(repoStack), td };
  };
  const plain = build(false);
  const { tpl, repoTpl, td } = build(true);
  const app = container(tpl, td, 'app');
  assertInjectedApp(app);
  assert.match(JSON.stringify(app.Image), /"Fn::ImportValue":"Repos:ExportsOutput/);
  assert.deepEqual(app.Image, container(plain.tpl, plain.td, 'app').Image);
  // and the producing stack still exports it
  const exports = Object.values(repoTpl.toJSON().Outputs ?? {}).map((o) => o.Export.Name);
  assert.ok(exports.some((n) => n.startsWith('Repos:ExportsOutput')), exports.join(', '));
});

// an app container logging to a log group in the task definition's stack or in another one
function agentLogs(t, otherStack) {
  const app = newApp(t);
  const shared = otherStack ? new cdk.Stack(app, 'Shared') : undefined;
  const stack = new cdk.Stack(app, 'Service');
  const group = new logs.LogGroup(shared ?? stack, 'Logs');
  const td = new ecs.FargateTaskDefinition(stack, 'Api');
  td.addContainer('app', {
    image: ecs.ContainerImage.fromRegistry('example.com/app:1'),
    logging: ecs.LogDrivers.awsLogs({ streamPrefix: 'api', logGroup: group }),
  });
  addAspect(app);
  const tpl = Template.fromStack(stack);
  return { group, app: container(tpl, td, 'app').LogConfiguration, agent: container(tpl, td, AGENT).LogConfiguration };
}

test('the agent logs where the app does, in the same stack: its LogConfiguration is the app\'s', (t) => {
  const { group, app, agent } = agentLogs(t, false);
  assert.deepEqual(app.Options['awslogs-group'], { Ref: logicalId(group) });
  assert.deepEqual(agent, app);
});

test('the agent logs where the app does, to a log group in another stack: an Fn::ImportValue too', (t) => {
  const { app, agent } = agentLogs(t, true);
  assert.match(JSON.stringify(app), /"Fn::ImportValue":"Shared:ExportsOutput/);
  // a Ref to the producing stack's logical ID would not deploy: no such resource in this template
  assert.deepEqual(agent, app);
});

// ------------------------------------------------------------- 6. refusals

test('an app container whose Environment is Fn::If is refused: an error annotation diagport: on the L1', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const flag = new cdk.CfnParameter(stack, 'Verbose', { type: 'String', default: 'no' });
  new cdk.CfnCondition(stack, 'IsVerbose', { expression: cdk.Fn.conditionEquals(flag.valueAsString, 'yes') });
  const td = new ecs.CfnTaskDefinition(stack, 'L1', {
    containerDefinitions: [{
      name: 'a',
      image: 'x',
      memory: 256,
      environment: cdk.Fn.conditionIf('IsVerbose', [{ Name: 'LOG', Value: 'debug' }], []),
    }],
  });
  addAspect(app);
  Annotations.fromStack(stack).hasError('/S/L1',
    Match.stringLikeRegexp('^diagport: .*container a: Environment is the intrinsic function Fn::If'));
  // and nothing was added
  assert.equal(hasAgent(Template.fromStack(stack), td), false);
});

for (const port of [0, 70000]) {
  test(`port ${port} is refused with an error annotation diagport: on the task definition`, (t) => {
    const app = newApp(t);
    const stack = new cdk.Stack(app, 'S');
    const td = fargate(stack, 'Api');
    addAspect(app, { port });
    Annotations.fromStack(stack).hasError('/S/Api/Resource',
      `diagport: params.port: '${port}' is not a port number (1-65535)`);
    assert.equal(hasAgent(Template.fromStack(stack), td), false);
  });
}

test('a diagport.dev/perf tag on a FargateTaskDefinition is refused: an error naming RequiresCompatibilities', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  cdk.Tags.of(td).add('diagport.dev/perf', 'true');
  addAspect(app);
  Annotations.fromStack(stack).hasError('/S/Api/Resource',
    Match.stringLikeRegexp('^diagport: .*tag diagport.dev/perf: RequiresCompatibilities holds FARGATE, and Fargate lets a container add no capability but SYS_PTRACE'));
  assert.equal(hasAgent(Template.fromStack(stack), td), false);
});

test('a captures prop that names no capture kind is refused: an error naming the kind, no agent', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  const td = fargate(stack, 'Api');
  addAspect(app, { captures: ['stacks', 'heap'] });
  Annotations.fromStack(stack).hasError('/S/Api/Resource',
    Match.stringLikeRegexp("^diagport: .*captures: 'heap' is not a capture kind"));
  assert.equal(hasAgent(Template.fromStack(stack), td), false);
});

test('an Aspect that refuses nothing leaves no error annotation', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  fargate(stack, 'Api');
  addAspect(app, { port: 65535 });
  assert.deepEqual(Annotations.fromStack(stack).findError('*', Match.anyValue()), []);
});

// ------------------------------------------------------------ 7. idempotence

test('adding the Aspect twice gives the same template as adding it once', (t) => {
  const build = (times) => {
    const app = newApp(t);
    const stack = new cdk.Stack(app, 'S');
    fargate(stack, 'Api', ['app', 'worker']);
    ec2(stack, 'Web');
    for (let i = 0; i < times; i++) addAspect(app, { mode: 'suspend', port: 9000 });
    return Template.fromStack(stack).toJSON();
  };
  const once = build(1);
  assert.equal(Object.values(once.Resources).filter((r) => JSON.stringify(r).includes(AGENT)).length, 2);
  assert.deepEqual(build(2), once);
});

// -------------------------------------------------- 8. the same as the CLI

function assertSameAsCli(t, props, cliArgs) {
  const build = (withAspect) => {
    const app = newApp(t);
    const stack = new cdk.Stack(app, 'S');
    fargate(stack, 'Api', ['app', 'worker']);
    ec2(stack, 'Web', ['app']);
    if (withAspect) addAspect(app, props);
    return Template.fromStack(stack);
  };
  const dir = tempDir(t, 'diagport-cli-');
  const file = path.join(dir, 'template.json');
  fs.writeFileSync(file, JSON.stringify(build(false).toJSON(), null, 2));
  const cli = JSON.parse(run(['inject', 'cfn', '--all', ...cliArgs], file));
  const cliTasks = Object.fromEntries(Object.entries(cli.Resources).filter(([, r]) => r.Type === TASKDEF));
  const aspectTasks = taskDefinitions(build(true));
  assert.equal(Object.keys(aspectTasks).length, 2);
  for (const r of Object.values(aspectTasks)) {
    assert.ok(r.Properties.ContainerDefinitions.some((c) => c.Name === AGENT), 'the CLI comparison has injected input');
  }
  assert.deepEqual(aspectTasks, cliTasks);
}

test('the Aspect gives the task definitions `diagport inject cfn --all --mode suspend --port 9000` gives', (t) => {
  assertSameAsCli(t, { mode: 'suspend', port: 9000 }, ['--mode', 'suspend', '--port', '9000']);
});

test('the Aspect gives what the CLI gives for containers, ptrace, image, auth-secret, resources, dumps-size-limit', (t) => {
  assertSameAsCli(t, {
    containers: ['app'],
    ptrace: true,
    image: 'example.com/diagport:2',
    authSecret: ARN,
    resources: 'cpu=100m,memory=32Mi,memory-limit=128Mi',
    dumpsSizeLimit: '2Gi',
  }, [
    '--containers', 'app', '--ptrace', 'true', '--image', 'example.com/diagport:2', '--auth-secret', ARN,
    '--resources', 'cpu=100m,memory=32Mi,memory-limit=128Mi', '--dumps-size-limit', '2Gi',
  ]);
});

test('the Aspect gives what the CLI gives for captures: the agent\'s --captures, sorted and deduplicated', (t) => {
  assertSameAsCli(t, { captures: ['stacks', 'metrics', 'stacks'] }, ['--captures', 'stacks,metrics,stacks']);
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  fargate(stack, 'Api');
  addAspect(app, { captures: ['stacks', 'metrics', 'stacks'] });
  const [td] = Object.values(taskDefinitions(Template.fromStack(stack)));
  const agent = td.Properties.ContainerDefinitions.find((c) => c.Name === AGENT);
  const i = agent.Command.indexOf('--captures');
  assert.ok(i > 0, `the agent's command has --captures: ${JSON.stringify(agent.Command)}`);
  assert.equal(agent.Command[i + 1], 'metrics,stacks');
});

test('the Aspect gives what the CLI gives for crash-dumps: the crash-dump settings of that type on every app container', (t) => {
  assertSameAsCli(t, { crashDumps: 'heap' }, ['--crash-dumps', 'heap']);
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  fargate(stack, 'Api', ['app', 'worker']);
  addAspect(app, { crashDumps: 'heap' });
  const [td] = Object.values(taskDefinitions(Template.fromStack(stack)));
  for (const c of td.Properties.ContainerDefinitions) {
    const env = Object.fromEntries((c.Environment || []).map((e) => [e.Name, e.Value]));
    if (c.Name === AGENT) {
      assert.equal(env.COMPlus_DbgEnableMiniDump, undefined, 'the agent gets no crash-dump settings');
      continue;
    }
    assert.equal(env.COMPlus_DbgEnableMiniDump, '1', `${c.Name}: ${JSON.stringify(c.Environment)}`);
    assert.equal(env.COMPlus_DbgMiniDumpType, '2');
    assert.equal(env.COMPlus_DbgMiniDumpName, '/dumps/crash-%p-%t-%e.dmp');
    assert.equal(env.COMPlus_EnableCrashReport, '1');
  }
});

test('the Aspect with crashDumps off adds no crash-dump setting, as the CLI\'s --crash-dumps off', (t) => {
  assertSameAsCli(t, { crashDumps: 'off' }, ['--crash-dumps', 'off']);
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'S');
  fargate(stack, 'Api');
  addAspect(app, { crashDumps: 'off' });
  const [td] = Object.values(taskDefinitions(Template.fromStack(stack)));
  const names = td.Properties.ContainerDefinitions.flatMap((c) => (c.Environment || []).map((e) => e.Name));
  assert.ok(names.includes('DOTNET_DiagnosticPorts'), JSON.stringify(names));
  assert.deepEqual(names.filter((n) => /DbgEnableMiniDump|DbgMiniDump|EnableCrashReport/.test(n)), []);
});

test('the Aspect gives what the CLI gives for flavour dotnet-monitor without auth', (t) => {
  assertSameAsCli(t, { flavour: 'dotnet-monitor', auth: false }, ['--flavour', 'dotnet-monitor', '--no-auth']);
});
