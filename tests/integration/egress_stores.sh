#!/usr/bin/env bash
# egress_stores.sh - the agent's captures sent to object stores through its egress process, end to
# end: `diagport launch` with an S3Storage provider from a key-per-file directory (as a mounted Secret
# gives it: --config-dir) pointing at s3rver, and an AzureBlobStorage provider from a settings document
# in DIAGPORT_SETTINGS (as ECS gives a Secrets Manager secret) pointing at azurite, a real .NET app
# attached. Each artifact is read back with the official SDK (@aws-sdk/client-s3, @azure/storage-blob):
#   dump     a WithHeap core to S3: an ELF core, its size within 10% of the same dump streamed to the
#            client, the operation's X-Diagport-Bytes-Sent equal to the object's size, searchable metadata
#            (pid, artifacttype, hostname)
#   trace    a CPU trace to Azure Blob: a nettrace `diagport nettrace stats` reads, with events
#   failure  a bucket that does not exist: the operation Failed with the store's NoSuchBucket; the
#            store killed mid-upload: Failed after the bounded retries, saying why
#   env      a provider from DOTNETMONITOR_/DIAGPORT_Egress__... variables; its secret wiped from the
#            agent's environment once read, its other values left
#   process  the egress process runs under its own seccomp filter, the agent under its own, the
#            store's secret is in neither's command line nor environment (DIAGPORT_SETTINGS is wiped
#            once read); killed mid-upload, the operation says the egress process is gone, and
#            /healthz says 503
set -u
cd "$(dirname "$0")/../.."
T_NAME=egress-stores
. tests/lib.sh
agent_setup estores
build_apps
V=tests/validate
for m in s3rver @aws-sdk/client-s3 azurite @azure/storage-blob; do
	[ -d "$V/node_modules/$m" ] || { fail prerequisites "$m is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done

# s3rver (bucket diag) and azurite (container diag), on free loopback ports
mkdir -p "$W/s3store"
node $V/s3rver-run.mjs "$W/s3store" "$W/s3rver.port" > "$W/s3rver.log" 2>&1 &
PIDS+=($!)
echo $! > "$W/s3rver.pid"
wait_for "$W/s3rver.port" . 30 || { fail start-s3rver "it did not start" "$W/s3rver.log"; exit 0; }
S3=http://127.0.0.1:$(cat "$W/s3rver.port")
$V/node_modules/.bin/azurite-blob --blobHost 127.0.0.1 --blobPort 0 --inMemoryPersistence --disableTelemetry \
	--skipApiVersionCheck --silent > "$W/azurite.log" 2>&1 &
PIDS+=($!)
AZP=$(logged_port "$W/azurite.log" "listens on http://127.0.0.1:" 30 "$!") ||
	{ fail start-azurite "it did not start" "$W/azurite.log"; exit 0; }
AZ=http://127.0.0.1:$AZP/devstoreaccount1
(cd $V && node azblob-read.mjs "$AZ" mkcontainer diag) > /dev/null 2>&1
AZKEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

# S3 as a Secret's files; a second S3 provider naming a bucket that does not exist; Azure as a document
mkdir -p "$W/egress"
for kv in Endpoint="$S3" BucketName=diag RegionName=us-east-1 AccessKeyId=S3RVER SecretAccessKey=S3RVER \
	ForcePathStyle=true KeyPrefix=shop; do
	printf '%s\n' "${kv#*=}" > "$W/egress/Egress__S3Storage__s3__${kv%%=*}"
done
for kv in Endpoint="$S3" BucketName=no-such-bucket RegionName=us-east-1 AccessKeyId=S3RVER \
	SecretAccessKey=S3RVER ForcePathStyle=true; do
	printf '%s\n' "${kv#*=}" > "$W/egress/Egress__S3Storage__nobucket__${kv%%=*}"
done
DOC=$(jq -cn --arg u "$AZ" --arg k "$AZKEY" \
	'{Egress: {AzureBlobStorage: {az: {AccountUri: $u, ContainerName: "diag", BlobPrefix: "shop", AccountKey: $k}}}}')
# a third S3 provider from variables, as dotnet-monitor's and diagport's hierarchical names give one
DIAGPORT_SETTINGS=$DOC DOTNETMONITOR_Egress__S3Storage__envs3__Endpoint="$S3" \
	DOTNETMONITOR_Egress__S3Storage__envs3__BucketName=diag DIAGPORT_Egress__S3Storage__envs3__AccessKeyId=S3RVER \
	DIAGPORT_Egress__S3Storage__envs3__SecretAccessKey=S3RVER DIAGPORT_Egress__S3Storage__envs3__KeyPrefix=env \
	start_agent --config-dir "$W/egress"
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" > "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/app.out" READY 15
wait_for "$W/agent.log" '"event":"attached"' 10 || { fail attached "$(tail -3 "$W/agent.log")"; exit 0; }
APID=$(curl -s "$U/processes" | jq -r '.[0].pid')
WHY="$(grep -c egress-started "$W/agent.log") egress-started lines: $(tail -3 "$W/agent.log")"
check egress-process-started grep -q '"event":"egress-started"' "$W/agent.log"

# a WithHeap dump to S3, beside the same dump streamed to the client
curl -s -o "$W/streamed" "$U/dump?type=WithHeap"
# sent URL: the operation's bytes delivered so far (its X-Diagport-Bytes-Sent header)
sent() { curl -s -D - -o /dev/null "$1" | tr -d '\r' | awk -F': ' 'tolower($1) == "x-diagport-bytes-sent" { print $2 }'; }
egressed dump "$U/dump?type=WithHeap&egressProvider=s3"
SENT=$(sent "$U$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/dump.hdr")")
WHY="HTTP $CODE: $(cat "$W/dump-op.json")"
check dump-succeeded jq -e '.status == "Succeeded" and (.resourceLocation | startswith("s3://diag/shop/core_"))' "$W/dump-op.json"
KEY=$(jq -r '.resourceLocation | sub("^s3://diag/"; "")' "$W/dump-op.json")
(cd $V && timeout 120 node s3-read.mjs "$S3" diag "$KEY") > "$W/s3.json" 2> "$W/s3.err"
(cd $V && timeout 120 node -e '
const { S3Client, GetObjectCommand } = require("@aws-sdk/client-s3");
const fs = require("fs");
const s3 = new S3Client({ endpoint: process.argv[1], region: "us-east-1", forcePathStyle: true,
  credentials: { accessKeyId: "S3RVER", secretAccessKey: "S3RVER" } });
s3.send(new GetObjectCommand({ Bucket: "diag", Key: process.argv[2] })).then(async (r) => {
  const out = fs.createWriteStream(process.argv[3]);
  for await (const c of r.Body) out.write(c);
  out.end();
});' "$S3" "$KEY" "$W/from-s3") 2>> "$W/s3.err" # node exits once the file is written whole
WHY="$(cat "$W/s3.json" "$W/s3.err" | head -c 400); $(file -b "$W/from-s3" 2>&1)"
check dump-is-core bash -c "file -b '$W/from-s3' | grep -q 'ELF 64-bit LSB core file'"
WHY="object $(jq .size "$W/s3.json") bytes, streamed $(stat -c %s "$W/streamed"), operation's X-Diagport-Bytes-Sent $SENT"
check dump-size python3 -c 'import json, os, sys
o = json.load(open(sys.argv[1])); s = os.path.getsize(sys.argv[2])
sys.exit(not (abs(o["size"] - s) <= s // 10 and o["size"] == os.path.getsize(sys.argv[3]) and sys.argv[4] == str(o["size"])))' \
	"$W/s3.json" "$W/streamed" "$W/from-s3" "$SENT"
WHY="$(jq -c .metadata "$W/s3.json")"
check dump-metadata jq -e --arg p "$APID" '.metadata.pid == $p and .metadata.artifacttype == "dump" and
	(.metadata.hostname | length > 0) and (.metadata.created | test("^[0-9]{4}-"))' "$W/s3.json"

# a CPU trace to Azure Blob, read back with the Azure SDK, a nettrace diagport reads
egressed trace "$U/trace?profile=Cpu&durationSeconds=2&egressProvider=az"
WHY="HTTP $CODE: $(cat "$W/trace-op.json")"
check trace-succeeded jq -e '.status == "Succeeded"' "$W/trace-op.json"
BLOB=$(jq -r '.resourceLocation' "$W/trace-op.json" | sed 's|.*/diag/||')
(cd $V && timeout 60 node -e '
const { BlobServiceClient, StorageSharedKeyCredential } = require("@azure/storage-blob");
const svc = new BlobServiceClient(process.argv[1], new StorageSharedKeyCredential("devstoreaccount1", process.argv[2]));
svc.getContainerClient("diag").getBlobClient(process.argv[3]).downloadToFile(process.argv[4]).then(() => {},
  (e) => { console.error(e.message); process.exit(1); });' "$AZ" "$AZKEY" "$BLOB" "$W/from-az.nettrace") 2> "$W/az.err"
"$D" nettrace stats "$W/from-az.nettrace" > "$W/stats.json" 2>> "$W/az.err"
WHY="blob $BLOB: $(head -c 300 "$W/az.err") $(head -c 200 "$W/stats.json")"
check trace-is-nettrace jq -e '.totalEvents > 0' "$W/stats.json"
WHY="blob $BLOB"
check trace-blob-prefix bash -c "[[ '$BLOB' == shop/*.nettrace ]]"

# the provider from variables; its secret is gone from the agent's environment once read
egressed envs3 "$U/stacks?egressProvider=envs3"
WHY="$(cat "$W/envs3-op.json")"
check env-provider-succeeded jq -e '.status == "Succeeded" and (.resourceLocation | startswith("s3://diag/env/"))' \
	"$W/envs3-op.json"
WHY="$(tr '\0' '\n' < "/proc/$AG/environ" | grep -a Egress__ | sed 's/=.*/=.../')"
check env-secret-wiped bash -c "tr '\0' '\n' < /proc/$AG/environ | grep -q -x 'DIAGPORT_Egress__S3Storage__envs3__SecretAccessKey=' &&
	tr '\0' '\n' < /proc/$AG/environ | grep -q -x 'DIAGPORT_Egress__S3Storage__envs3__KeyPrefix=env'"

# the store's own error
egressed nob "$U/stacks?egressProvider=nobucket"
WHY="$(cat "$W/nob-op.json")"
check missing-bucket-failed jq -e '.status == "Failed" and (.error.message | test("NoSuchBucket"))' "$W/nob-op.json"

# the store goes down mid-upload: the operation ends Failed (after the bounded retries), saying so
curl -s -D "$W/down.hdr" -o /dev/null "$U/dump?type=WithHeap&egressProvider=s3"
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/down.hdr")
for _ in $(seq 1 100); do [ "$(sent "$U$LOC")" -gt 0 ] 2>/dev/null && break; sleep 0.05; done
kill -9 "$(cat "$W/s3rver.pid")"
op_ended 90 "$U$LOC"
curl -s "$U$LOC" > "$W/down-op.json"
WHY="$(cat "$W/down-op.json")"
check store-down-failed jq -e '.status == "Failed" and (.error.message | test("S3 .*(refused|reset|no answer|connect)"; "i"))' \
	"$W/down-op.json"

# two processes, each under its own filter; no secret on a command line
EPID=$(cat "/proc/$AG/task/$AG/children" | tr ' ' '\n' | while read -r p; do
	[ -n "$p" ] && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = diagport-egress ] && echo "$p"; done | head -1)
WHY="egress process '$EPID': $(grep -E 'Seccomp:' "/proc/$EPID/status" 2>&1); agent: $(grep Seccomp: "/proc/$AG/status")"
check two-sandboxes bash -c "test -n '$EPID' && grep -q 'Seccomp:\s*2' /proc/$EPID/status && grep -q 'Seccomp:\s*2' /proc/$AG/status"
WHY="a command line or environment holds the account key"
check no-secret-on-command-lines bash -c "! grep -l -a -F '$AZKEY' /proc/$AG/cmdline /proc/$EPID/cmdline /proc/$AG/environ /proc/$EPID/environ"
WHY="the agent's log holds the account key"
check no-secret-in-log bash -c "! grep -q -F '$AZKEY' '$W/agent.log' && ! grep -q -F 'Eby8vdM02' '$W/agent.log'"
# the egress process killed mid-upload: the operation says so (not only that a pipe broke)
curl -s -D "$W/killed.hdr" -o /dev/null "$U/dump?type=WithHeap&egressProvider=az"
LOC=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/killed.hdr")
for _ in $(seq 1 100); do [ "$(sent "$U$LOC")" -gt 0 ] 2>/dev/null && break; sleep 0.05; done
kill -9 "$EPID"
op_ended 30 "$U$LOC"
curl -s "$U$LOC" > "$W/killed-op.json"
WHY="$(cat "$W/killed-op.json")"
check killed-mid-upload-says-why jq -e '.status == "Failed" and (.error.message | test("egress process"))' \
	"$W/killed-op.json"
for _ in $(seq 1 50); do [ "$(code "$U/healthz")" = 503 ] && break; sleep 0.1; done
WHY="/healthz $(code "$U/healthz"): $(cat "$W/body")"
check healthz-egress-gone test "$(code "$U/healthz")" = 503
egressed after "$U/stacks?egressProvider=s3"
WHY="$(cat "$W/after-op.json")"
check after-exit-fails jq -e '.status == "Failed" and (.error.message | test("egress process"))' "$W/after-op.json"
