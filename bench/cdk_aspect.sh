#!/usr/bin/env bash
# bench/cdk_aspect.sh - the CDK construct's cost (issue 16), measured, never gated:
#   1. the rules in WebAssembly in process vs the native binary spawned per task
#      definition (bench/cdk_aspect.js), on the same 200 task definitions;
#   2. `cdk synth` of the example app with and without DiagportAspect (hyperfine).
# Needs `make cdk`. Figures go to docs/BENCHMARKS.md by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
make -s cdk diagport >/dev/null
echo "== rules: WebAssembly in process vs the binary per task definition"
node bench/cdk_aspect.js "${N:-200}"
ls -l cdk/lib/rules-wasm.cjs | awk '{print "rules-wasm.cjs: " $5 " bytes"}'
echo
echo "== cdk synth of cdk/examples/fargate-api, with and without the Aspect (cdk-nag off in both)"
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
cd cdk/examples/fargate-api
export CDK_DISABLE_VERSION_CHECK=1 AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_EC2_METADATA_DISABLED=true
# the agents' TLS inputs, stand-ins (the example refuses to synthesize without them or agentTls=off)
tls="-c region=eu-west-1 -c agentCertificateArn=arn:aws:acm:eu-west-1:111122223333:certificate/0b5e1c2d -c agentTlsSecretArn=arn:aws:secretsmanager:eu-west-1:111122223333:secret:diagport-agent-tls-MnOpQr"
hyperfine -N --warmup 1 --runs "${RUNS:-5}" \
  -n "synth, no Aspect" "../../node_modules/.bin/cdk synth --no-notices -q --output $W/a -c nag=off -c diagport=off $tls" \
  -n "synth, DiagportAspect" "../../node_modules/.bin/cdk synth --no-notices -q --output $W/b -c nag=off $tls"
