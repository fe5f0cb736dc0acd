#!/usr/bin/env bash
# egress_image.sh - the agent's image (the static binary: OpenSSL linked in, static glibc resolving
# names from /etc/hosts) sending a capture to Azure Blob Storage over TLS: azurite over https with a
# certificate for localhost from a test CA, the agent as a real container (read-only, every capability
# dropped, uid 1654, the host's network so that azurite's and the agent's loopback ports are the same),
# its settings as a document in DIAGPORT_SETTINGS (as ECS hands a Secrets Manager secret), the test CA
# through SSL_CERT_FILE (docs/image.md: a private CA). A .NET app on the host is attached through a
# shared directory; /stacks sent to the store is read back with @azure/storage-blob.
set -u
cd "$(dirname "$0")/../.."
T_NAME=e2e-egress-image
. tests/lib.sh
agent_setup e2eegress
. tests/e2e/lib.sh
e2e_setup
build_apps
V=tests/validate
[ -x "$V/node_modules/.bin/azurite-blob" ] || { fail prerequisites "azurite is not installed (scripts/prereqs.sh test)"; exit 0; }
IMAGE=localhost/diagport:e2e
build_agent_image "$IMAGE"
api_cert ca || { fail cert "$(head -c 300 "$W/openssl.err")"; exit 0; }
"$V/node_modules/.bin/azurite-blob" --blobHost 127.0.0.1 --blobPort 0 --inMemoryPersistence --disableTelemetry \
	--skipApiVersionCheck --silent --cert "$W/api.crt" --key "$W/api.key" > "$W/azurite.log" 2>&1 &
PIDS+=($!)
AZP=$(logged_port "$W/azurite.log" "listens on https://127.0.0.1:" 30 "$!") ||
	{ fail start-azurite "azurite did not start" "$W/azurite.log"; exit 0; }
AZ=https://localhost:$AZP/devstoreaccount1
export NODE_EXTRA_CA_CERTS=$W/ca.crt
(cd $V && node azblob-read.mjs "$AZ" mkcontainer diag) > "$W/mk.out" 2>&1
AZKEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='
DOC=$(jq -cn --arg u "$AZ" --arg k "$AZKEY" \
	'{Egress: {AzureBlobStorage: {az: {AccountUri: $u, ContainerName: "diag", BlobPrefix: "img", AccountKey: $k}}}}')
mkdir -p -m 0777 "$W/diag"
mkdir -p "$W/ca" && cp "$W/ca.crt" "$W/ca/ca.crt" && chmod 0755 "$W/ca" && chmod 0644 "$W/ca/ca.crt"
TOKEN=egress-image-token-0123456789
podman run -d --name dp-egress-agent --network host --read-only --cap-drop ALL --security-opt no-new-privileges \
	-v "$W/diag:/diag" -v "$W/ca:/ca:ro" -e SSL_CERT_FILE=/ca/ca.crt -e DIAGPORT_SETTINGS="$DOC" \
	-e DIAGPORT_AUTH_TOKEN="$TOKEN" "$IMAGE" launch --socket /diag/port --dumps /diag --urls http://127.0.0.1:0 \
	> "$W/run.out" 2>&1
rc=$?
WHY="podman run: exit $rc: $(cat "$W/run.out")"
check agent-starts test "$rc" = 0
# on the host's network, on a port it binds itself: the port from its listening line
agent_listening() { podman logs dp-egress-agent > "$W/agent.log" 2>&1; grep -q '"event":"listening"' "$W/agent.log"; }
eventually 30 agent_listening
AP=$(listening_port "$W/agent.log" urls 1)
U=http://127.0.0.1:$AP
AUTH=(-H "Authorization: Bearer $TOKEN")
if start_webapp "$W/app.log" "$W/diag/port" "$U" "${AUTH[@]}"; then pass app-attached; else
	fail app-attached "$(tail -3 "$W/app.log") $(podman logs dp-egress-agent 2>&1 | tail -3)"
fi
WHY="$(podman logs dp-egress-agent 2>&1 | grep -c egress-started) egress-started lines"
check egress-process-in-image bash -c "podman logs dp-egress-agent 2>&1 | grep -q '\"event\":\"egress-started\"'"
egressed stacks "$U/stacks?pid=$APID&egressProvider=az" "${AUTH[@]}"
WHY="HTTP $CODE: $(cat "$W/stacks-op.json"); agent: $(podman logs dp-egress-agent 2>&1 | tail -2)"
check stacks-over-tls jq -e '.status == "Succeeded" and (.resourceLocation | test("^https://localhost:[0-9]+/devstoreaccount1/diag/img/"))' \
	"$W/stacks-op.json"
BLOB=$(jq -r '.resourceLocation' "$W/stacks-op.json" | sed 's|.*/diag/||')
(cd $V && timeout 60 node azblob-read.mjs "$AZ" get diag "$BLOB") > "$W/get.json" 2> "$W/get.err"
(cd $V && timeout 60 node -e '
const { BlobServiceClient, StorageSharedKeyCredential } = require("@azure/storage-blob");
new BlobServiceClient(process.argv[1], new StorageSharedKeyCredential("devstoreaccount1", process.argv[2]))
  .getContainerClient("diag").getBlobClient(process.argv[3]).downloadToFile(process.argv[4]);' \
	"$AZ" "$AZKEY" "$BLOB" "$W/stacks.txt") 2>> "$W/get.err"
WHY="$(cat "$W/get.json" "$W/get.err" | head -c 300); $(head -c 100 "$W/stacks.txt" 2>&1)"
check stacks-read-back bash -c "grep -q '^Thread' '$W/stacks.txt' && jq -e '.size > 100' '$W/get.json'"
e2e_cleanup_check
