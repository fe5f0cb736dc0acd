#!/usr/bin/env bash
# azblob.sh - Azure Blob egress (egress/azblob*.c: the upload, settings, requests, credentials) through azblob_driver.c
# (the agent's config reader, the egress process with its seccomp profile, the artifact through its
# pipe) against azurite (npm: the Azure Storage emulator, in memory on free loopback ports; one over
# http, one over https with --oauth basic for bearer tokens), read back by the Azure SDK's own client
# (@azure/storage-blob: tests/validate/azblob-read.mjs) and compared by sha256.
# Token endpoints cannot run here: azure_identity_fake.py stands in for IMDS, App Service's identity
# endpoint and the Entra ID token endpoint, following their published contracts (its top says which).
# Faults come from fault_proxy.py, a TCP proxy in front of azurite.
#   key/*       AccountKeyName -> Egress:Properties (SharedKey): 100 KB (one Put Blob) and 40 MiB (10
#               blocks, none left uncommitted), sha256 as the SDK reads it, metadata (the egress
#               process's pairs as DotnetMonitor_*, Metadata:KEY from an environment variable)
#   sas/*       a container SAS made by the SDK: small and 40 MiB; a tampered one refused (403)
#   errors/*    a container that does not exist (ContainerNotFound), a wrong account key
#   check/*     settings refused at start, each naming the setting and where it came from
#   abort/*     an upload aborted after 3 blocks leaves no blob and no uncommitted block; an aborted
#               upload over an existing blob leaves that blob as it was
#   faults/*    Put Blocks answered 503 ServerBusy, then the store recovers: the upload completes; a
#               connection reset in the middle of a block: completes; 503 past the retries: fails with
#               ServerBusy and leaves nothing
#   identity/*  bearer tokens over https: IMDS with ManagedIdentityClientId, an unknown identity refused,
#               App Service's endpoint, workload identity (federated token file), tokens near expiry
#               fetched again during an upload, a wrong assertion refused (invalid_client)
#   secrets     no output holds the account key, the SAS signature, a token or the federated assertion
set -u
cd "$(dirname "$0")/../.."
T_NAME=azblob
. tests/lib.sh
agent_setup azblob
PY=/usr/bin/python3
I=tests/integration
V=tests/validate
AZURITE=$V/node_modules/.bin/azurite-blob
for tool in "$PY" /usr/bin/openssl node sha256sum "$AZURITE"; do
	[ -x "$tool" ] || command -v "$tool" > /dev/null ||
		{ fail prerequisites "$tool is not installed (scripts/prereqs.sh test installs it)"; exit 0; }
done
# shellcheck disable=SC2046
cc -std=c11 -D_GNU_SOURCE -Wall -Wextra -I. -Icommon -o "$W/driver" $I/azblob_driver.c "$B/libdiagport.a" \
	$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread 2> "$W/cc.log" ||
	{ fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }
api_cert ca || { fail cert "$(head -c 300 "$W/openssl.err")"; exit 0; }
KEY='Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=='

# start_azurite NAME [ARGS]: azurite on a port it binds itself (port 0, read from its log); its port in AP_NAME
start_azurite() {
	local name=$1 port scheme=http
	shift
	[[ " $* " == *" --cert "* ]] && scheme=https
	"$AZURITE" --blobHost 127.0.0.1 --blobPort 0 --inMemoryPersistence --disableTelemetry \
		--skipApiVersionCheck --silent "$@" > "$W/$name.log" 2>&1 &
	PIDS+=($!)
	port=$(logged_port "$W/$name.log" "listens on $scheme://127.0.0.1:" 30 "$!") ||
		{ fail "start-$name" "azurite did not start" "$W/$name.log"; exit 0; }
	printf -v "AP_$name" '%s' "$port"
}
# start_py NAME SCRIPT ARGS...: a Python helper writing its port to $W/NAME.port; the port in PP_NAME
start_py() {
	local name=$1 script=$2
	shift 2
	"$PY" "$script" "$@" 2> "$W/$name.err" &
	PIDS+=($!)
	disown $!
	wait_for "$W/$name.port" . 5
	[ -s "$W/$name.port" ] || { fail "start-$name" "$(head -c 300 "$W/$name.err")"; exit 0; }
	printf -v "PP_$name" '%s' "$(cat "$W/$name.port")"
}
start_azurite plain
start_azurite tls --cert "$W/api.crt" --key "$W/api.key" --oauth basic
export NODE_EXTRA_CA_CERTS=$W/ca.crt
PLAIN=http://127.0.0.1:$AP_plain/devstoreaccount1
TLS=https://127.0.0.1:$AP_tls/devstoreaccount1
sdk() { node $V/azblob-read.mjs "$@" 2>> "$W/sdk.err"; }
sdk "$PLAIN" mkcontainer diag > /dev/null && sdk "$TLS" mkcontainer diag > /dev/null ||
	{ fail containers "the SDK could not create them" "$W/sdk.err"; exit 0; }
SAS=$(sdk "$PLAIN" sas diag)
mkdir -p "$W"/key "$W"/sas "$W"/errors "$W"/check "$W"/abort "$W"/faults "$W"/identity

head -c 100000 /dev/urandom > "$W/small"
head -c $((40 << 20)) /dev/urandom > "$W/big"
head -c $((16 << 20)) /dev/urandom > "$W/mid"
SUM_small=$(sha256sum < "$W/small" | cut -d' ' -f1)
SUM_big=$(sha256sum < "$W/big" | cut -d' ' -f1)

# provider NAME URI [KEY: VALUE]...: a settings file $W/NAME.yaml with one AzureBlobStorage provider NAME
provider() {
	local name=$1 uri=$2 kv
	shift 2
	{
		printf 'Egress:\n  AzureBlobStorage:\n    %s:\n      AccountUri: "%s"\n' "$name" "$uri"
		for kv in "$@"; do
			case $kv in
			Properties:*) ;;
			*) printf '      %s\n' "$kv" ;;
			esac
		done
		printf '  Properties:\n    Unused: "x"\n'
		for kv in "$@"; do
			case $kv in Properties:*) printf '    %s\n' "${kv#Properties:}" ;; esac
		done
	} > "$W/$name.yaml"
}
OUTS=()
# up NAME PROVIDER MODE ARGS...: the driver's line in $W/NAME.out (all of its output kept for the secrets check)
up() {
	local name=$1 prov=$2
	shift 2
	"$W/driver" "$W/$prov.yaml" "$prov" "$@" > "$W/$name.out" 2> "$W/$name.err"
	OUTS+=("$W/$name.out" "$W/$name.err")
}
# same NAME URL BLOB FILE: the SDK reads the blob; its sha256 is FILE's
same() {
	local want
	want=$(sha256sum < "$4" | cut -d' ' -f1)
	sdk "$2" get diag "$3" > "$W/$1.json" && grep -q "\"sha256\":\"$want\"" "$W/$1.json"
}
blocks() { sdk "$1" blocks diag "$2"; }
ok_upload() { # NAME PROVIDER URL BLOB FILE [META...]: uploaded, and the SDK reads the same bytes
	local name=$1 prov=$2 url=$3 blob=$4 file=$5
	shift 5
	up "$name" "$prov" upload "${blob##*/}" "$file" "$@"
	if ! grep -q "^OK $url/diag/$blob $(stat -c %s "$file")\$" "$W/$name.out"; then
		fail "$name" "$(head -c 400 "$W/$name.out")" "$W/$name.err"
	elif ! same "$name" "$url" "$blob" "$file"; then
		fail "$name" "the SDK read other bytes: $(head -c 300 "$W/$name.json")" "$W/sdk.err"
	else
		pass "$name"
	fi
}

# ---- key/*
export TEAM_NAME="payments team"
provider key "$PLAIN" "ContainerName: diag" "BlobPrefix: /artifacts/" "AccountKeyName: BlobKey" \
	"Metadata:Team: TEAM_NAME" "Metadata:Missing: NO_SUCH_VARIABLE" "Properties:BlobKey: \"$KEY\""
ok_upload key/small key "$PLAIN" artifacts/small.dmp "$W/small" artifacttype dump pid 42 namespace prod \
	hostname web-1 "bad name" $'caf\xc3\xa9'
WHY="metadata: $(cat "$W/key/small.json" 2>/dev/null)"
check key/metadata grep -q '"dotnetmonitor_artifacttype":"dump","dotnetmonitor_processid":"42","dotnetmonitor_namespace":"prod","dotnetmonitor_hostname":"web-1","dotnetmonitor_bad_name":"caf%C3%A9","team":"payments team"}' "$W/key/small.json"
ok_upload key/large key "$PLAIN" artifacts/big.dmp "$W/big" artifacttype dump
WHY="block list: $(blocks "$PLAIN" artifacts/big.dmp)"
check key/large-blocks test "$(blocks "$PLAIN" artifacts/big.dmp)" = '{"exists":true,"committed":10,"uncommitted":0}'

# ---- sas/*
provider sas "$PLAIN" "ContainerName: diag" "SharedAccessSignatureName: Sas" "Properties:Sas: \"?$SAS\""
ok_upload sas/small sas "$PLAIN" small-sas.dmp "$W/small"
ok_upload sas/large sas "$PLAIN" big-sas.dmp "$W/big"
BADSIG=$(printf '%s' "$SAS" | sed 's/sig=[^&]*/sig=AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA%3D/')
provider sasbad "$PLAIN" "ContainerName: diag" "SharedAccessSignature: \"$BADSIG\""
up sas/refused sasbad upload x.dmp "$W/small"
WHY=$(cat "$W/sas/refused.out")
check sas/refused grep -q "^ERR .*Put Blob $PLAIN/diag/x.dmp: \(AuthorizationFailure\|AuthenticationFailed\): .*(HTTP 403)" \
	"$W/sas/refused.out"

# ---- errors/*
provider nocont "$PLAIN" "ContainerName: nowhere" "AccountKey: \"$KEY\""
up errors/container nocont upload a.dmp "$W/small"
WHY=$(cat "$W/errors/container.out")
check errors/container grep -q "^ERR .*nowhere/a.dmp: ContainerNotFound: The specified container does not exist" "$W/errors/container.out"
provider wrongkey "$PLAIN" "ContainerName: diag" "AccountKey: \"${KEY/Eby8/Fby8}\""
up errors/wrong-key wrongkey upload a.dmp "$W/small"
WHY=$(cat "$W/errors/wrong-key.out")
check errors/wrong-key grep -q "^ERR .*AuthorizationFailure\|^ERR .*AuthenticationFailed" "$W/errors/wrong-key.out"

# ---- check/*: NAME EXPECTED-TEXT SETTINGS...
refused() {
	local name=$1 want=$2
	shift 2
	provider bad "$@"
	up "check/$name" bad check
	if grep -q -- "$want" "$W/check/$name.out" && grep -q "bad.yaml:" "$W/check/$name.out"; then
		pass "check/$name"
	else
		fail "check/$name" "wanted '$want' and where: $(head -c 300 "$W/check/$name.out")"
	fi
}
refused no-container "ContainerName is not set" "$PLAIN" "SharedAccessSignature: \"$SAS\"" "BlobPrefix: x"
refused container-name "ContainerName (.*) 'Diag_1' is not a container name" "$PLAIN" "ContainerName: Diag_1"
refused uri "AccountUri (.*) is not an http or https URL" "ftp://x/devstoreaccount1" "ContainerName: diag"
refused uri-query "AccountUri (.*) must be scheme://host" "$PLAIN?$SAS" "ContainerName: diag"
refused bearer-http "AccountUri (.*) is http, and without SharedAccessSignature" "$PLAIN" "ContainerName: diag"
refused key-base64 "AccountKey (.*) is not base64" "$PLAIN" "ContainerName: diag" "AccountKey: not*base64"
refused key-name "AccountKeyName (.*) names Egress:Properties:Nope, which is not set" "$PLAIN" "ContainerName: diag" \
	"AccountKeyName: Nope"
refused queue "QueueName (.*): this agent sends no queue message" "$PLAIN" "ContainerName: diag" \
	"AccountKey: \"$KEY\"" "QueueName: q"
refused unknown "Egress:AzureBlobStorage:[a-z0-9-]*:AccountName (.*): unknown setting" "$PLAIN" "ContainerName: diag" "AccountName: x"
refused meta-keyword "'namespace' cannot be an Azure metadata name" "$PLAIN" "ContainerName: diag" \
	"AccountKey: \"$KEY\"" "Metadata:namespace: NS"
refused sas-shape "SharedAccessSignature (.*) is not a shared access signature" "$PLAIN" "ContainerName: diag" \
	"SharedAccessSignature: \"sv=2020&sp=r\""

# ---- abort/*
up abort/new key abort gone.dmp "$W/big" $((14 << 20))
WHY="$(cat "$W/abort/new.out") $(blocks "$PLAIN" artifacts/gone.dmp)"
check abort/new test "$(grep -c '^ABORTED' "$W/abort/new.out")/$(blocks "$PLAIN" artifacts/gone.dmp)" = \
	'1/{"exists":false,"committed":0,"uncommitted":0}'
printf 'keep me' > "$W/keep"
sdk "$PLAIN" put diag artifacts/kept.dmp "keep me" > /dev/null
up abort/existing key abort kept.dmp "$W/big" $((14 << 20))
WHY="$(cat "$W/abort/existing.out") $(cat "$W/abort/existing.json" 2>/dev/null)"
check abort/existing same abort/existing "$PLAIN" artifacts/kept.dmp "$W/keep"

# ---- faults/*
start_py busy $I/fault_proxy.py "$AP_plain" "$W/busy.port" "$W/busy.log" busy:2
provider busy "http://127.0.0.1:$PP_busy/devstoreaccount1" "ContainerName: diag" "AccountKey: \"$KEY\""
ok_upload faults/busy-then-ok busy "http://127.0.0.1:$PP_busy/devstoreaccount1" busy.dmp "$W/big"
WHY="$(cat "$W/busy.log" 2>/dev/null)"
check faults/busy-seen test "$(grep -c '^busy ' "$W/busy.log" 2>/dev/null)" = 2
start_py reset $I/fault_proxy.py "$AP_plain" "$W/reset.port" "$W/reset.log" reset:1
provider reset "http://127.0.0.1:$PP_reset/devstoreaccount1" "ContainerName: diag" "AccountKey: \"$KEY\""
ok_upload faults/reset-mid-block reset "http://127.0.0.1:$PP_reset/devstoreaccount1" reset.dmp "$W/big"
WHY="$(cat "$W/reset.log" 2>/dev/null)"
check faults/reset-seen test "$(grep -c '^reset ' "$W/reset.log" 2>/dev/null)" = 1
start_py down $I/fault_proxy.py "$AP_plain" "$W/down.port" "$W/down.log" busy:1000
provider down "http://127.0.0.1:$PP_down/devstoreaccount1" "ContainerName: diag" "AccountKey: \"$KEY\""
up faults/busy-past-retries down upload down.dmp "$W/mid"
WHY="$(cat "$W/faults/busy-past-retries.out") $(blocks "$PLAIN" down.dmp)"
check faults/busy-past-retries test "$(grep -c '^ERR .*after 5 tries.*ServerBusy.*(HTTP 503)' \
	"$W/faults/busy-past-retries.out")/$(blocks "$PLAIN" down.dmp)" = '1/{"exists":false,"committed":0,"uncommitted":0}'

# ---- identity/*
export SSL_CERT_FILE=$W/ca.crt
start_py ident $I/azure_identity_fake.py "$W/ident.port" "$W/ident.log"
start_py short $I/azure_identity_fake.py "$W/short.port" "$W/short.log" 300
IDP=http://127.0.0.1:$PP_ident
provider mi "$TLS" "ContainerName: diag" "ManagedIdentityClientId: mi-client"
AZURE_POD_IDENTITY_AUTHORITY_HOST=$IDP ok_upload identity/imds mi "$TLS" big-mi.dmp "$W/big"
WHY="$(cat "$W/ident.log")"
check identity/imds-asked grep -q '"endpoint": "imds", "client_id": "mi-client", "resource": "https://storage.azure.com/", "api": "2018-02-01"' "$W/ident.log"
provider miwrong "$TLS" "ContainerName: diag" "ManagedIdentityClientId: someone-else"
AZURE_POD_IDENTITY_AUTHORITY_HOST=$IDP up identity/imds-unknown miwrong upload x.dmp "$W/small"
WHY="$(cat "$W/identity/imds-unknown.out")"
check identity/imds-unknown grep -q "^ERR .*managed identity endpoint (IMDS) gave no token: invalid_request: Identity not found (HTTP 400)" \
	"$W/identity/imds-unknown.out"
provider app "$TLS" "ContainerName: diag"
IDENTITY_ENDPOINT=$IDP/msi/token IDENTITY_HEADER=app-service-secret-header ok_upload identity/appservice app "$TLS" small-app.dmp "$W/small"
printf 'federated-token-v1\n' > "$W/fedtoken"
provider wi "$TLS" "ContainerName: diag"
AZURE_FEDERATED_TOKEN_FILE=$W/fedtoken AZURE_CLIENT_ID=wi-client AZURE_TENANT_ID=wi-tenant AZURE_AUTHORITY_HOST=$IDP/ \
	ok_upload identity/workload wi "$TLS" big-wi.dmp "$W/big"
WHY="$(cat "$W/ident.log")"
check identity/workload-asked grep -q '"endpoint": "entra", "path": "/wi-tenant/oauth2/v2.0/token", "client_id": "wi-client", "scope": "https://storage.azure.com/.default", "assertion": "federated-token-v1"' "$W/ident.log"
AZURE_FEDERATED_TOKEN_FILE=$W/fedtoken AZURE_CLIENT_ID=wi-client AZURE_TENANT_ID=wi-tenant \
	AZURE_AUTHORITY_HOST=http://127.0.0.1:$PP_short/ ok_upload identity/refreshed wi "$TLS" big-refresh.dmp "$W/big"
WHY="token fetches: $(grep -c entra "$W/short.log")"
check identity/refreshed-fetches test "$(grep -c entra "$W/short.log")" -gt 2
printf 'stolen-token' > "$W/badtoken"
AZURE_FEDERATED_TOKEN_FILE=$W/badtoken AZURE_CLIENT_ID=wi-client AZURE_TENANT_ID=wi-tenant AZURE_AUTHORITY_HOST=$IDP/ \
	up identity/workload-refused wi upload x.dmp "$W/small"
WHY="$(cat "$W/identity/workload-refused.out")"
check identity/workload-refused grep -q "^ERR .*workload identity (AZURE_FEDERATED_TOKEN_FILE) gave no token: invalid_client: AADSTS700213" \
	"$W/identity/workload-refused.out"

# ---- secrets: nothing printed holds a secret (the key, the SAS's signature, a token's header, an assertion)
SIG=$(printf '%s' "$SAS" | sed 's/.*sig=\([^&]*\).*/\1/')
leaks=$(cat "${OUTS[@]}" | grep -c -F -e "$KEY" -e "$SIG" -e "stolen-token" -e "federated-token" -e "eyJhbGciOiAibm9uZSI" \
	-e "app-service-secret-header")
WHY="$leaks lines hold a secret"
check secrets test "$leaks" = 0
