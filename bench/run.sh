#!/usr/bin/env bash
# bench/run.sh - the injector's benchmarks (issue 2), then the other bench/*.sh that make bench runs (the last:
# bench/fleet_stacks.sh, the fleet client). Measures and prints; never gates.
# Runs diagport and the reference (jq doing one comparable edit of the same file)
# side by side in one run, and prints the ratio. Figures go to docs/BENCHMARKS.md by hand.
set -euo pipefail
cd "$(dirname "$0")/.."
B=${BUILD:-build}
W=$(mktemp -d); trap 'rm -rf "$W"' EXIT
mkdir -p "$B/bench"
cc -O2 -std=c11 -D_GNU_SOURCE -I. -Icommon -Iinjector -Ibench -o "$B/bench/bench_inject" bench/bench_inject.c "$B/libdiagport.a" \
   $(pkg-config --libs jansson yaml-0.1 zlib)

ENV_YAML=tests/golden/k8s/env-1500/input.yaml
./diagport inject k8s -o json -f "$ENV_YAML" >/dev/null
./diagport uninject k8s -o json -f "$ENV_YAML" > "$W/env1500.json"
/usr/bin/python3 bench/gen_cfn.py 10000 "$W/cfn10k.json"
echo "== inputs"; ls -l "$ENV_YAML" "$W/env1500.json" "$W/cfn10k.json" | awk '{print $5, $9}'

echo; echo "== in-process: parse + inject + render (target: 1,500 env vars <= 5 ms; 10,000 resources <= 1 s)"
"$B/bench/bench_inject" "$ENV_YAML" k8s 200
"$B/bench/bench_inject" "$W/env1500.json" k8s 200
"$B/bench/bench_inject" "$W/cfn10k.json" cfn 20 --all

echo; echo "== whole command, side by side with jq making one comparable edit (hyperfine)"
JQ_ENV='.spec.containers[0].env += [{"name":"DOTNET_DiagnosticPorts","value":"/diag/port,nosuspend,connect"}]'
JQ_CFN='.Resources |= with_entries(if .value.Type == "AWS::ECS::TaskDefinition" then .value.Properties.ContainerDefinitions[0].Environment += [{"Name":"DOTNET_DiagnosticPorts","Value":"/diag/port,nosuspend,connect"}] else . end)'
hyperfine -N --warmup 3 --runs 30 --export-json "$W/env.json" \
  -n "diagport inject (1,500 env, JSON)" "./diagport inject k8s -f $W/env1500.json" \
  -n "jq one edit (1,500 env, JSON)" "jq '$JQ_ENV' $W/env1500.json"
hyperfine -N --warmup 1 --runs 10 --export-json "$W/cfn.json" \
  -n "diagport inject --all (10,000 resources)" "./diagport inject cfn --all -f $W/cfn10k.json" \
  -n "jq one edit per task definition (10,000 resources)" "jq '$JQ_CFN' $W/cfn10k.json"
for f in env cfn; do
  jq -r '.results as $r | "ratio jq/diagport (\($r[0].command)): \(($r[1].mean / $r[0].mean) * 100 | round / 100)x  (diagport mean \($r[0].mean*1000|round) ms, jq mean \($r[1].mean*1000|round) ms)"' "$W/$f.json"
done
echo; echo "== peak memory (max RSS, KiB)"
for cmd in "./diagport inject k8s -f $W/env1500.json" "./diagport inject cfn --all -f $W/cfn10k.json"; do
  /usr/bin/time -f "%M KiB  $cmd" $cmd >/dev/null
done
/usr/bin/time -f "%M KiB  jq (cfn10k edit)" jq "$JQ_CFN" "$W/cfn10k.json" >/dev/null

echo; bash bench/agent.sh
echo; bash bench/transport.sh
echo; bash bench/webhook.sh
echo; bash bench/nettrace.sh
echo; bash bench/fleet_stacks.sh
