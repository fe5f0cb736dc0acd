'use strict';
// DiagportMacro (the Lambda function and the AWS::CloudFormation::Macro) and
// runMacro (the rules behind both the macro and the Aspect), called directly.
// Run: cd cdk && node --test test/

const { test } = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');

const { spawnSync } = require('node:child_process');

const cdk = require('aws-cdk-lib');
const { Template } = require('aws-cdk-lib/assertions');

const { DiagportMacro, runMacro } = require('@diagport/cdk');

const BOOTSTRAP = path.resolve(__dirname, '..', 'lambda', 'bootstrap');

function newApp(t) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'diagport-cdk-test-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  return new cdk.App({ outdir: dir });
}

function macroStack(t, props) {
  assert.ok(fs.existsSync(BOOTSTRAP), `${BOOTSTRAP} is missing: make -C ../ cdk/lambda/bootstrap`);
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'Macros');
  const macro = new DiagportMacro(stack, 'Diag', props);
  return { app, stack, macro, tpl: Template.fromStack(stack) };
}

function only(tpl, type) {
  const found = Object.entries(tpl.toJSON().Resources).filter(([, r]) => r.Type === type);
  assert.equal(found.length, 1, `one ${type}`);
  return { id: found[0][0], resource: found[0][1] };
}

// ------------------------------------------------------------ DiagportMacro

test('DiagportMacro: one Lambda function on provided.al2023, handler bootstrap, x86_64', (t) => {
  const { tpl } = macroStack(t);
  const fn = only(tpl, 'AWS::Lambda::Function').resource.Properties;
  assert.equal(fn.Runtime, 'provided.al2023');
  assert.equal(fn.Handler, 'bootstrap');
  assert.deepEqual(fn.Architectures, ['x86_64']);
  assert.equal(fn.MemorySize, 512);
  assert.equal(fn.Timeout, 30);
});

test('DiagportMacro: the macro is named diagport and its FunctionName is the function ARN', (t) => {
  const { tpl, macro } = macroStack(t);
  const fnId = only(tpl, 'AWS::Lambda::Function').id;
  const m = only(tpl, 'AWS::CloudFormation::Macro').resource.Properties;
  assert.equal(m.Name, 'diagport');
  assert.deepEqual(m.FunctionName, { 'Fn::GetAtt': [fnId, 'Arn'] });
  assert.equal(macro.macroName, 'diagport');
});

test('DiagportMacro: a custom macroName is the macro Name', (t) => {
  const { tpl, macro } = macroStack(t, { macroName: 'diagport-staging' });
  const fnId = only(tpl, 'AWS::Lambda::Function').id;
  const m = only(tpl, 'AWS::CloudFormation::Macro').resource.Properties;
  assert.equal(m.Name, 'diagport-staging');
  assert.deepEqual(m.FunctionName, { 'Fn::GetAtt': [fnId, 'Arn'] });
  assert.equal(macro.macroName, 'diagport-staging');
});

test('DiagportMacro: memorySize and timeout are passed to the function', (t) => {
  const { tpl } = macroStack(t, { memorySize: 512, timeout: cdk.Duration.seconds(10) });
  const fn = only(tpl, 'AWS::Lambda::Function').resource.Properties;
  assert.equal(fn.MemorySize, 512);
  assert.equal(fn.Timeout, 10);
});

test('DiagportMacro: the staged asset holds bootstrap, an executable ELF file', (t) => {
  const { app, tpl } = macroStack(t);
  const fn = only(tpl, 'AWS::Lambda::Function').resource.Properties;
  const hash = fn.Code.S3Key.replace(/\.zip$/, '');
  assert.match(hash, /^[0-9a-f]{64}$/);
  const staged = path.join(app.outdir, `asset.${hash}`, 'bootstrap');
  const st = fs.statSync(staged);
  assert.ok(st.isFile(), `${staged} is a file`);
  assert.notEqual(st.mode & 0o111, 0, `${staged} is executable (mode ${(st.mode & 0o777).toString(8)})`);
  const magic = Buffer.alloc(4);
  const fd = fs.openSync(staged, 'r');
  try {
    fs.readSync(fd, magic, 0, 4, 0);
  } finally {
    fs.closeSync(fd);
  }
  assert.deepEqual([...magic], [0x7f, 0x45, 0x4c, 0x46]); // \x7fELF
  // the very binary the package ships
  assert.equal(st.size, fs.statSync(BOOTSTRAP).size);
});

// ------------------------------------------------------------ DiagportMacro: policy

const POLICY = { mode: 'suspend', enforce: { auth: 'required', ptrace: false, captures: 'stacks,metrics,cpuprofile' } };

function policyVar(tpl) {
  const fn = only(tpl, 'AWS::Lambda::Function').resource.Properties;
  return ((fn.Environment || {}).Variables || {}).DIAGPORT_POLICY;
}

// The shipped bootstrap answers one event with the function's variable as it was synthesized, as
// Lambda runs it (the variable read at cold start): status, fragment or errorMessage, and its log.
function invoke(policy, event) {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'diagport-cdk-policy-'));
  try {
    const ev = path.join(dir, 'event.json');
    fs.writeFileSync(ev, JSON.stringify(event));
    const env = { ...process.env };
    delete env.AWS_LAMBDA_RUNTIME_API;
    delete env.DIAGPORT_POLICY_FILE;
    if (policy === undefined) delete env.DIAGPORT_POLICY;
    else env.DIAGPORT_POLICY = policy;
    const r = spawnSync(BOOTSTRAP, ['--event', ev], { env, encoding: 'utf8' });
    return { status: r.status, response: JSON.parse(r.stdout), log: r.stderr };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

const ASKS = {
  requestId: 'req-p',
  fragment: { ContainerDefinitions: [{ Name: 'app', Image: 'example.com/app:1', Memory: 256 }] },
  params: { auth: 'none', ptrace: 'true', captures: 'all' },
};
const agentCommand = (r) => r.response.fragment.ContainerDefinitions.find((c) => c.Name === 'diagport-agent').Command;

test('DiagportMacro: without a policy the function has no DIAGPORT_POLICY and params win', (t) => {
  const { tpl } = macroStack(t);
  assert.equal(policyVar(tpl), undefined);
  const r = invoke(policyVar(tpl), ASKS);
  assert.equal(r.response.status, 'success', r.response.errorMessage);
  assert.ok(agentCommand(r).includes('--no-auth'));
});

test('DiagportMacro: a policy object is the function\'s DIAGPORT_POLICY, as JSON', (t) => {
  const { tpl } = macroStack(t, { policy: POLICY });
  assert.deepEqual(JSON.parse(policyVar(tpl)), POLICY);
});

test('DiagportMacro: the synthesized policy wins over params, with warnings in the function\'s log', (t) => {
  const { tpl } = macroStack(t, { policy: POLICY });
  const r = invoke(policyVar(tpl), ASKS);
  assert.equal(r.status, 0, r.log);
  assert.equal(r.response.status, 'success', r.response.errorMessage);
  const cmd = agentCommand(r);
  assert.ok(!cmd.includes('--no-auth'), cmd.join(' '));
  assert.equal(cmd[cmd.indexOf('--captures') + 1], 'cpuprofile,metrics,stacks');
  const app = r.response.fragment.ContainerDefinitions[0];
  assert.ok(!JSON.stringify(app.LinuxParameters || {}).includes('SYS_PTRACE'));
  assert.match(app.Environment.find((e) => e.Name === 'DOTNET_DiagnosticPorts').Value, /,suspend,connect$/);
  const warnings = r.log.split('\n').filter((l) => l.startsWith('{')).map((l) => JSON.parse(l))
    .filter((l) => l.level === 'WARN').map((l) => l.warning);
  assert.ok(warnings.some((w) => /enforces auth=required, the workload asked for auth=none/.test(w)), r.log);
  assert.ok(warnings.some((w) => /enforces ptrace=false, the workload asked for ptrace=true/.test(w)), r.log);
});

test('DiagportMacro: a policy file (YAML) is the variable as written', (t) => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'diagport-cdk-policy-'));
  t.after(() => fs.rmSync(dir, { recursive: true, force: true }));
  const file = path.join(dir, 'policy.yaml');
  const yaml = '# the platform\'s settings\nenforce:\n  auth: required\n  ptrace: false\n';
  fs.writeFileSync(file, yaml);
  const { tpl } = macroStack(t, { policy: file });
  assert.equal(policyVar(tpl), yaml);
  const r = invoke(policyVar(tpl), ASKS);
  assert.equal(r.response.status, 'success', r.response.errorMessage);
  assert.ok(!agentCommand(r).includes('--no-auth'));
});

test('DiagportMacro: a policy the macro cannot read fails every template, naming it', (t) => {
  const { tpl } = macroStack(t, { policy: { enforce: { auth: 'maybe' } } });
  const r = invoke(policyVar(tpl), ASKS);
  assert.equal(r.status, 1);
  assert.equal(r.response.status, 'failure');
  assert.equal(r.response.fragment, undefined);
  assert.match(r.response.errorMessage, /platform policy \(DIAGPORT_POLICY\).*option auth: 'maybe' is not required or none/);
});

test('DiagportMacro: a policy that is not an object or a readable file, or over 4 KB, is refused at synth', (t) => {
  const app = newApp(t);
  const stack = new cdk.Stack(app, 'Macros');
  assert.throws(() => new DiagportMacro(stack, 'A', { policy: ['auth'] }), /policy: an object of settings/);
  assert.throws(() => new DiagportMacro(stack, 'B', { policy: '/nonexistent/policy.yaml' }),
    /policy: cannot read \/nonexistent\/policy.yaml/);
  assert.throws(() => new DiagportMacro(stack, 'C', { policy: { mode: 'x'.repeat(5000) } }),
    /over Lambda's 4096 for a function's variables/);
});

// ------------------------------------------------------------------ runMacro

const PROPS = { ContainerDefinitions: [{ Name: 'app', Image: 'example.com/app:1', Memory: 256 }] };

test('runMacro: a snippet (a task definition\'s Properties) succeeds and gets the agent and volumes', () => {
  const r = runMacro({ requestId: 'req-1', fragment: PROPS, params: { mode: 'suspend' } });
  assert.equal(r.status, 'success', r.errorMessage);
  assert.equal(r.requestId, 'req-1');
  assert.equal(r.errorMessage, undefined);
  const names = r.fragment.ContainerDefinitions.map((c) => c.Name);
  assert.deepEqual(names, ['app', 'diagport-agent']);
  assert.deepEqual(r.fragment.ContainerDefinitions[0].Environment, [
    { Name: 'DOTNET_DiagnosticPorts', Value: '/diag/port,suspend,connect' },
    { Name: 'COMPlus_DbgEnableMiniDump', Value: '1' },
    { Name: 'COMPlus_DbgMiniDumpType', Value: '1' },
    { Name: 'COMPlus_DbgMiniDumpName', Value: '/dumps/crash-%p-%t-%e.dmp' },
    { Name: 'COMPlus_EnableCrashReport', Value: '1' },
  ]);
  assert.deepEqual(r.fragment.Volumes, [{ Name: 'diagport-diag' }, { Name: 'diagport-dumps' }]);
});

test('runMacro: params crash-dumps sets the dump type of the crash-dump settings; off adds none', () => {
  const env = (params) => {
    const r = runMacro({ requestId: 'r', fragment: PROPS, params });
    assert.equal(r.status, 'success', r.errorMessage);
    return Object.fromEntries(r.fragment.ContainerDefinitions[0].Environment.map((e) => [e.Name, e.Value]));
  };
  assert.equal(env({ 'crash-dumps': 'heap' }).COMPlus_DbgMiniDumpType, '2');
  assert.deepEqual(Object.keys(env({ 'crash-dumps': 'off' })), ['DOTNET_DiagnosticPorts']);
  const bad = runMacro({ requestId: 'r', fragment: PROPS, params: { 'crash-dumps': 'huge' } });
  assert.equal(bad.status, 'failure');
  assert.match(bad.errorMessage, /crash-dumps: 'huge' is not off, mini, heap, triage or full/);
});

test('runMacro: a template fragment injects only opted-in task definitions unless all=true', () => {
  const fragment = {
    Resources: {
      In: { Type: 'AWS::ECS::TaskDefinition', Metadata: { diagport: { inject: true } }, Properties: PROPS },
      Out: { Type: 'AWS::ECS::TaskDefinition', Properties: PROPS },
    },
  };
  const agentIn = (res, id) => res.fragment.Resources[id].Properties.ContainerDefinitions
    .some((c) => c.Name === 'diagport-agent');
  const some = runMacro({ requestId: 'r', fragment, params: {} });
  assert.equal(some.status, 'success', some.errorMessage);
  assert.equal(agentIn(some, 'In'), true);
  assert.equal(agentIn(some, 'Out'), false);
  const all = runMacro({ requestId: 'r', fragment, params: { all: 'true' } });
  assert.equal(agentIn(all, 'Out'), true);
});

test('runMacro: a fragment that is not a map is a failure with an errorMessage', () => {
  const r = runMacro({ requestId: 'req-2', fragment: 'not a template', params: {} });
  assert.equal(r.status, 'failure');
  assert.equal(r.requestId, 'req-2');
  assert.equal(r.fragment, undefined);
  assert.match(r.errorMessage, /fragment: not a map/);
});

test('runMacro: a bad param value is a failure naming it', () => {
  const r = runMacro({ requestId: 'req-3', fragment: PROPS, params: { port: '0' } });
  assert.equal(r.status, 'failure');
  assert.equal(r.errorMessage, "params.port: '0' is not a port number (1-65535)");
});

test('runMacro: an intrinsic where a list must be extended is a failure', () => {
  const fragment = {
    Resources: {
      Task: {
        Type: 'AWS::ECS::TaskDefinition',
        Properties: { ContainerDefinitions: { 'Fn::If': ['C', [], []] } },
      },
    },
  };
  const r = runMacro({ requestId: 'req-4', fragment, params: { all: 'true' } });
  assert.equal(r.status, 'failure');
  assert.match(r.errorMessage, /ContainerDefinitions is the intrinsic function Fn::If/);
});
