#!/usr/bin/env bash
# egress_hostile.sh - the agent's egress process against a store gone bad (tests/integration/hostile_store.py,
# the attacker, not a stand-in: the real stores are in egress_stores.sh), through the real agent and a real
# .NET app, S3 and Azure providers and a container credentials endpoint all pointing at it:
#   answers/*  an answer that is not HTTP, a body past the cap (by length and chunked, endless), a chunk size
#              that overflows, a redirect to the metadata service, an error document with an entity bomb
#              and terminal escapes: each operation Failed within seconds, saying what the store did
#   creds/*    the container credentials endpoint answering garbage: Failed, naming the endpoint
#   cancel/*   a dump to a store that stopped answering (it reads the request, never answers), S3 and Azure:
#              DELETE ends the operation Cancelled within seconds, not after the store's timeouts (30 s
#              per read, retried), and the store is left at once
#   survives/* the agent healthy and its egress process alive afterwards
#   secrets/*  no secret key, signature or credentials token in the log, /operations or /info
set -u
cd "$(dirname "$0")/../.."
T_NAME=egress-hostile
. tests/lib.sh
agent_setup ehostile
build_apps
/usr/bin/python3 tests/integration/hostile_store.py "$W/store.port" "$W/store.log" > "$W/store.out" 2>&1 &
PIDS+=($!)
wait_for "$W/store.port" . 15 || { fail start-store "it did not start" "$W/store.out"; exit 0; }
HS=http://127.0.0.1:$(cat "$W/store.port")
SK=HOSTILE-SECRET-1 SIG=HOSTILE-SIG-2 TOK=HOSTILE-TOKEN-3
{
	echo "Egress:"
	echo "  S3Storage:"
	for m in garbage huge hugechunked chunkbomb redir xmlbomb silent; do
		printf '    s3%s:\n      Endpoint: %s\n      BucketName: %s\n      AccessKeyId: AKID\n      SecretAccessKey: %s\n' \
			"$m" "$HS" "$m" "$SK"
	done
	printf '    creds:\n      Endpoint: %s\n      BucketName: diag\n' "$HS"
	echo "  AzureBlobStorage:"
	for m in redir xmlbomb silent; do
		printf '    az%s:\n      AccountUri: %s/%s\n      ContainerName: diag\n      SharedAccessSignature: sv=2020&sig=%s\n' \
			"$m" "$HS" "$m" "$SIG"
	done
} > "$W/egress.yaml"
AWS_CONTAINER_CREDENTIALS_FULL_URI=$HS/garbage/creds AWS_CONTAINER_AUTHORIZATION_TOKEN=$TOK \
	start_agent --config "$W/egress.yaml"
DOTNET_DiagnosticPorts=$W/dumps/port,connect,nosuspend dotnet "$B/apps/console/console.dll" > "$W/app.out" 2>&1 &
PIDS+=($!)
wait_for "$W/app.out" READY 15
wait_for "$W/agent.log" '"event":"attached"' 10 || { fail attached "$(tail -3 "$W/agent.log")"; exit 0; }

# one /stacks per provider; each must end Failed, quickly, with PATTERN in its message
failed_with() {
	local prov=$1 pattern=$2 t0 t1
	t0=$(date +%s%N)
	egressed "$prov" "$U/stacks?egressProvider=$prov"
	t1=$(date +%s%N)
	WHY="$(( (t1 - t0) / 1000000 )) ms: $(cat "$W/$prov-op.json")"
	check "$3" jq -e --arg p "$pattern" --argjson ms "$(( (t1 - t0) / 1000000 ))" \
		'.status == "Failed" and (.error.message | test($p)) and ($ms < 15000) and
		 (.error.message | test("[[:cntrl:]]") | not)' "$W/$prov-op.json"
}
failed_with s3garbage 'not HTTP/1.x' answers/not-http
failed_with s3huge 'body \(10000000000 bytes\) is over the cap' answers/huge-length
failed_with s3hugechunked 'body is over the cap' answers/huge-chunked
failed_with s3chunkbomb 'chunk size over 15 hex digits' answers/chunk-size-overflow
failed_with s3redir 'a redirect, which is not followed' answers/redirect-s3
failed_with azredir 'a redirect, which is not followed' answers/redirect-azure
failed_with s3xmlbomb 'Injected: yes \(HTTP 403\)' answers/escapes-s3
failed_with azxmlbomb 'Injected: yes \(HTTP 403\)' answers/escapes-azure
failed_with creds 'container credentials endpoint .*not HTTP/1.x' creds/garbage
WHY="$(grep -c 169.254 "$W/store.log") requests named the metadata service"
check answers/redirect-not-followed bash -c "! grep -q '169.254' '$W/store.log'"

# a dump to a store that went silent, cancelled once the store holds its first request
cancelled_fast() {
	local prov=$1 loc t0 t1 st n
	n=$(wc -l < "$W/store.log")
	curl -s -D "$W/$prov.hdr" -o /dev/null "$U/dump?type=Mini&egressProvider=$prov"
	loc=$(sed -n 's/^[Ll]ocation: \(.*\)\r$/\1/p' "$W/$prov.hdr")
	for _ in $(seq 1 300); do [ "$(wc -l < "$W/store.log")" -gt "$n" ] && break; sleep 0.1; done
	sleep 1 # time passing: the request is out, and the egress process has waited on the answer a while
	t0=$(date +%s%N)
	curl -s -X DELETE -o /dev/null "$U$loc"
	for _ in $(seq 1 600); do st=$(curl -s "$U$loc" | jq -r .status); [ "$st" = Running ] || break; sleep 0.1; done
	t1=$(date +%s%N)
	curl -s "$U$loc" > "$W/$prov-op.json"
	WHY="$(( (t1 - t0) / 1000000 )) ms after DELETE: $(cat "$W/$prov-op.json"); store: $(tail -2 "$W/store.log")"
	check "cancel/$2" jq -e --argjson ms "$(( (t1 - t0) / 1000000 ))" \
		'.status == "Cancelled" and $ms < 10000' "$W/$prov-op.json"
}
cancelled_fast s3silent s3
cancelled_fast azsilent azure
WHY="$(ss -tn state established "( dport = :$(cat "$W/store.port") )" | tail -n +2)"
check cancel/connections-closed eventually 3 bash -c "test \$(ss -tn state established '( dport = :$(cat "$W/store.port") )' | tail -n +2 | wc -l) = 0"

WHY="/healthz $(code "$U/healthz"): $(grep egress-exited "$W/agent.log")"
check survives/healthy bash -c "test \"\$(curl -s -o /dev/null -w '%{http_code}' '$U/healthz')\" = 200 &&
	! grep -q egress-exited '$W/agent.log'"
egressed after "$U/stacks?egressProvider=s3garbage"
WHY="$(cat "$W/after-op.json")"
check survives/still-uploading jq -e '.status == "Failed" and (.error.message | test("not HTTP"))' "$W/after-op.json"

curl -s "$U/operations" > "$W/ops.json"
curl -s "$U/info" > "$W/info.json"
for s in "$SK" "$SIG" "$TOK"; do
	WHY="$s found"
	check "secrets/${s,,}-unsaid" bash -c "! grep -q -F '$s' '$W/agent.log' '$W/ops.json' '$W/info.json' $W/*-op.json"
done
