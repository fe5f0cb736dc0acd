#!/usr/bin/env bash
# s3.sh - S3 egress (egress/s3.c, common/aws_sigv4.c, cloud/aws_creds.c) through s3_driver.c against the
# S3 emulator s3rver (npm, tests/validate/s3rver-run.mjs), read back with the AWS SDK's own S3 client
# (tests/validate/s3-read.mjs) and compared byte for byte. s3rver 3.7.1 does not compute SigV4 signatures
# (only the access key must exist), so every request of the driver goes through s3_fault_proxy.py, which
# recomputes each signature with botocore's S3 signer and refuses mismatches as S3 does:
#   put/*        a small artifact as one PutObject: bytes, content type, x-amz-meta-* seen by HeadObject
#   multipart/*  40 MiB in 8 MiB parts (5 parts, 2 buffers), a key prefix, progress reported per part
#   auth/*       a wrong secret refused (SignatureDoesNotMatch: the signatures are checked), an unknown
#                access key refused by s3rver (InvalidAccessKeyId)
#   bucket/*     a bucket that does not exist: the store's NoSuchBucket in the error, no object
#   retry/*      through s3_fault_proxy.py: 503 SlowDown twice on a part, then a connection reset mid-part;
#                the parts sent again and the object whole
#   abort/*      a store that fails every part from the third on, and a producer that stops midway: the
#                multipart upload is aborted (AbortMultipartUpload sent, signed, for the upload's id; no
#                CompleteMultipartUpload), no object
#   creds/*      credentials from aws_creds_fake.py (the ECS container endpoint and STS
#                AssumeRoleWithWebIdentity, as published): the first expire 303 s after issue, so 3 s
#                into a slow upload they are within 5 minutes of lapsing and renewed; later parts are
#                signed with the new keys (s3rver knows both) and the object is whole; a wrong web
#                identity token is STS's InvalidIdentityToken in the error
#   secrets/*    no secret key or token in anything the driver printed
set -u
cd "$(dirname "$0")/../.." || exit 1
T_NAME=s3
. tests/lib.sh
agent_setup s3
PY=/usr/bin/python3
I=tests/integration
V=tests/validate

LIBS_PKG="$(pkg-config --libs jansson yaml-0.1 zlib libseccomp) -lpthread -ldl"
SAN=
case $(basename "$B") in build-*) SAN="-fsanitize=$(basename "$B" | sed 's/^build-//; s/-/,/g') -fno-sanitize-recover=all" ;; esac
# shellcheck disable=SC2086
cc -std=c11 -D_GNU_SOURCE $SAN -I. -Icommon $(pkg-config --cflags jansson) -o "$W/driver" $I/s3_driver.c \
	"$B/libdiagport.a" $LIBS_PKG 2> "$W/cc.log" || { fail build-driver "$(head -c 300 "$W/cc.log")"; exit 0; }
[ -d $V/node_modules/s3rver ] && [ -d $V/node_modules/@aws-sdk/client-s3 ] ||
	{ fail prereqs "s3rver or @aws-sdk/client-s3 missing: run scripts/prereqs.sh test"; exit 0; }

# start NAME CMD...: a server that writes its port to $W/NAME.port; its pid in PIDS
start() {
	local name=$1
	shift
	"$@" > "$W/$name.log" 2>&1 &
	PIDS+=($!)
	wait_for "$W/$name.port" . 30 || { fail "start-$name" "it did not start" "$W/$name.log"; exit 0; }
}
mkdir -p "$W/store"
start s3rver node $V/s3rver-run.mjs "$W/store" "$W/s3rver.port" AKROT1:rot-secret-1 AKROT2:rot-secret-2 \
	AKROT3:rot-secret-3 AKROT4:rot-secret-4
SP=$(cat "$W/s3rver.port")
EP=http://127.0.0.1:$SP
KEYS=S3RVER:S3RVER,AKROT1:rot-secret-1,AKROT2:rot-secret-2,AKROT3:rot-secret-3,AKROT4:rot-secret-4
start verify $PY $I/s3_fault_proxy.py "$W/verify.port" "$SP" "$W/verify-req.log" "$KEYS"
VEP=http://127.0.0.1:$(cat "$W/verify.port")

head -c 1000 /dev/urandom > "$W/small"
head -c $((40 << 20)) /dev/urandom > "$W/big"
SMALL_SHA=$(sha256sum < "$W/small" | cut -d' ' -f1)
BIG_SHA=$(sha256sum < "$W/big" | cut -d' ' -f1)

# up OUT FILE NAME [META...]: the driver with the S3_* settings of the environment; stdout in OUT, stderr OUT.err
up() {
	local out=$1
	shift
	timeout 120 "$W/driver" "$@" > "$W/$out" 2> "$W/$out.err"
}
# read_back KEY: the SDK's view of the object in $W/read.json
read_back() { (cd $V && timeout 60 node s3-read.mjs "$EP" diag "$1") > "$W/read.json" 2> "$W/read.err"; }
jget() { $PY -c 'import json,sys; d=json.load(open(sys.argv[1])); print(eval("d" + sys.argv[2]))' "$W/read.json" "$1" 2>/dev/null; }
same_as() { read_back "$1" && [ "$(jget "['sha256']")" = "$2" ]; }
absent() { read_back "$1" && grep -q '"error":"NotFound"' "$W/read.json"; }

export S3_BUCKET=diag S3_ACCESS_KEY_ID=S3RVER S3_SECRET_ACCESS_KEY=S3RVER S3_ENDPOINT=$VEP

# ---- put ----
WHY="driver: $(cat "$W/put" 2>/dev/null)"
up put "$W/small" dumps/small.dmp pod=web-7d9f namespace=prod container=app pid=42 artifact-type=dump \
	time=2024-05-01T12:00:00Z
check put/ok grep -q '^ok 1000$' "$W/put"
check put/one-request grep -qx 'progress 1000' "$W/put.err"
WHY="read back: $(cat "$W/read.json" 2>/dev/null)"
check put/bytes same_as dumps/small.dmp "$SMALL_SHA"
WHY="metadata: $(cat "$W/read.json")"
check put/metadata $PY -c '
import json,sys; d=json.load(open(sys.argv[1]))
assert d["metadata"] == {"pod":"web-7d9f","namespace":"prod","container":"app","pid":"42","artifact-type":"dump",
                         "time":"2024-05-01T12:00:00Z"}, d
assert d["type"] == "application/octet-stream" and d["size"] == 1000, d' "$W/read.json"

# ---- multipart ----
S3_PREFIX=artifacts/ up mp "$W/big" big.dmp pod=web-7d9f
check multipart/ok grep -q "^ok $((40 << 20))\$" "$W/mp"
WHY="progress: $(tr '\n' ' ' < "$W/mp.err")"
check multipart/progress-per-part [ "$(grep -c '^progress' "$W/mp.err")" = 5 ]
WHY="read back: $(cat "$W/read.json" 2>/dev/null)"
check multipart/bytes same_as artifacts/big.dmp "$BIG_SHA"
check multipart/metadata grep -q '"metadata":{"pod":"web-7d9f"}' "$W/read.json"

# ---- auth ----
S3_SECRET_ACCESS_KEY=not-the-secret up auth "$W/small" auth.dmp
WHY="driver: $(cat "$W/auth")"
check auth/wrong-secret-refused grep -q '^error not authenticated or not authorized: S3 PutObject s3://diag/auth.dmp .*: SignatureDoesNotMatch: The request signature we calculated does not match' "$W/auth"
check auth/no-object absent auth.dmp
S3_ACCESS_KEY_ID=AKNOBODY up auth2 "$W/small" auth2.dmp
WHY="driver: $(cat "$W/auth2")"
check auth/unknown-key-refused grep -q '^error not authenticated or not authorized: S3 PutObject .*: InvalidAccessKeyId' "$W/auth2"
WHY="requests: $(tr '\n' ' ' < "$W/verify-req.log")"
check auth/every-request-verified bash -c "[ \$(grep -c ' 200\$' '$W/verify-req.log') = 8 ] && [ \$(grep ' 403\$' '$W/verify-req.log' | grep -c '/diag/auth2\\?.dmp ') = 2 ]"

# ---- bucket ----
S3_BUCKET=no-such-bucket up nb "$W/big" x.dmp
WHY="driver: $(cat "$W/nb")"
check bucket/nosuchbucket grep -q 'NoSuchBucket: The specified bucket does not exist (HTTP 404)' "$W/nb"
check bucket/names-it grep -q 's3://no-such-bucket/x.dmp' "$W/nb"

# ---- retry (through the fault proxy) ----
start proxy $PY $I/s3_fault_proxy.py "$W/proxy.port" "$SP" "$W/proxy-req.log" "$KEYS" 503:2:2 reset:3
PEP=http://127.0.0.1:$(cat "$W/proxy.port")
S3_ENDPOINT=$PEP S3_RETRY_MS=50 up retry "$W/big" retry.dmp
WHY="driver: $(cat "$W/retry")"
check retry/ok grep -q "^ok $((40 << 20))\$" "$W/retry"
WHY="requests: $(grep partNumber=2 "$W/proxy-req.log" | tr '\n' ' ')"
check retry/503-twice-then-sent [ "$(grep 'partNumber=2&' "$W/proxy-req.log" | awk '{print $4}' | tr '\n' ' ')" = "503 503 200 " ]
WHY="requests: $(grep partNumber=3 "$W/proxy-req.log" | tr '\n' ' ')"
check retry/reset-then-sent [ "$(grep 'partNumber=3&' "$W/proxy-req.log" | awk '{print $4}' | tr '\n' ' ')" = "reset 200 " ]
WHY="read back: $(cat "$W/read.json" 2>/dev/null)"
check retry/bytes same_as retry.dmp "$BIG_SHA"

# ---- abort ----
: > "$W/proxy-req.log"
kill "${PIDS[-1]}" 2>/dev/null
rm -f "$W/proxy.port"
start proxy $PY $I/s3_fault_proxy.py "$W/proxy.port" "$SP" "$W/proxy-req.log" "$KEYS" fail-from:3
PEP=http://127.0.0.1:$(cat "$W/proxy.port")
S3_ENDPOINT=$PEP S3_RETRY_MS=20 S3_ATTEMPTS=3 up ab "$W/big" abort.dmp
WHY="driver: $(cat "$W/ab")"
check abort/store-error-named grep -q '^error the remote API answered with an error: S3 UploadPart [3-5] s3://diag/abort.dmp .*InternalError: We encountered an internal error' "$W/ab"
upload_id=$(grep -o 'uploadId=[0-9a-f]*' "$W/proxy-req.log" | head -1)
WHY="requests: $(tr '\n' ' ' < "$W/proxy-req.log")"
check abort/parts-were-stored grep -q "PUT /diag/abort.dmp?partNumber=1&$upload_id S3RVER 200" "$W/proxy-req.log"
check abort/abort-sent grep -q "^DELETE /diag/abort.dmp?$upload_id S3RVER" "$W/proxy-req.log"
check abort/abort-last [ "$(tail -1 "$W/proxy-req.log" | cut -d' ' -f1)" = DELETE ]
check abort/no-complete bash -c "! grep -q '^POST /diag/abort.dmp?uploadId' '$W/proxy-req.log'"
check abort/no-object absent abort.dmp
: > "$W/proxy-req.log"
kill "${PIDS[-1]}" 2>/dev/null
rm -f "$W/proxy.port"
start proxy $PY $I/s3_fault_proxy.py "$W/proxy.port" "$SP" "$W/proxy-req.log" "$KEYS"
PEP=http://127.0.0.1:$(cat "$W/proxy.port")
S3_ENDPOINT=$PEP S3_ABORT_AFTER=$((20 << 20)) up ab2 "$W/big" stopped.dmp
WHY="driver: $(cat "$W/ab2"); requests: $(tr '\n' ' ' < "$W/proxy-req.log")"
check abort/producer-stopped grep -q '^aborted' "$W/ab2"
upload_id=$(grep -o 'uploadId=[0-9a-f]*' "$W/proxy-req.log" | head -1)
check abort/producer-abort-sent grep -q "^DELETE /diag/stopped.dmp?$upload_id S3RVER" "$W/proxy-req.log"
check abort/producer-no-object absent stopped.dmp

# ---- creds ----
mkdir -p "$W/home"
echo "eyJhbGciOiJSUzI1NiJ9.sa-token.sig" > "$W/sa-token"
start creds $PY $I/aws_creds_fake.py "$W/creds.port" "$W/creds-issue.log" \
	AKROT1:rot-secret-1,AKROT2:rot-secret-2,AKROT3:rot-secret-3,AKROT4:rot-secret-4 303 "$W/sa-token" "Bearer ecs-token"
CEP=http://127.0.0.1:$(cat "$W/creds.port")
chain() {
	env -u S3_ACCESS_KEY_ID -u S3_SECRET_ACCESS_KEY -u AWS_ACCESS_KEY_ID -u AWS_SECRET_ACCESS_KEY -u AWS_PROFILE \
		HOME="$W/home" AWS_SHARED_CREDENTIALS_FILE="$W/home/none" AWS_CONFIG_FILE="$W/home/none" \
		AWS_EC2_METADATA_DISABLED=true AWS_REGION=us-east-1 S3_ENDPOINT="$PEP" S3_CHUNK=1048576 "$@"
}
: > "$W/proxy-req.log"
chain AWS_CONTAINER_CREDENTIALS_FULL_URI="$CEP/v2/credentials/task-1" AWS_CONTAINER_AUTHORIZATION_TOKEN="Bearer ecs-token" \
	S3_DELAY_MS=150 timeout 120 "$W/driver" "$W/big" creds/container.dmp > "$W/cc" 2> "$W/cc.err"
WHY="driver: $(cat "$W/cc"); issued: $(tr '\n' ' ' < "$W/creds-issue.log")"
check creds/container-ok grep -q "^ok $((40 << 20))\$" "$W/cc"
check creds/container-renewed [ "$(cat "$W/creds-issue.log")" = "$(printf 'issue AKROT1 container\nissue AKROT2 container')" ]
WHY="keys per request: $(awk '{print $3}' "$W/proxy-req.log" | uniq -c | tr '\n' ' ')"
check creds/container-new-keys-used [ "$(awk '{print $3}' "$W/proxy-req.log" | uniq | tr '\n' ' ')" = "AKROT1 AKROT2 " ]
WHY="read back: $(cat "$W/read.json" 2>/dev/null)"
check creds/container-bytes same_as creds/container.dmp "$BIG_SHA"

: > "$W/proxy-req.log"
: > "$W/creds-issue.log"
kill "${PIDS[-1]}" 2>/dev/null
rm -f "$W/creds.port"
start creds $PY $I/aws_creds_fake.py "$W/creds.port" "$W/creds-issue.log" \
	AKROT3:rot-secret-3,AKROT4:rot-secret-4 303 "$W/sa-token" "Bearer ecs-token"
CEP=http://127.0.0.1:$(cat "$W/creds.port")
chain AWS_WEB_IDENTITY_TOKEN_FILE="$W/sa-token" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/diag-egress \
	AWS_ROLE_SESSION_NAME=diag-egress AWS_ENDPOINT_URL_STS="$CEP" S3_DELAY_MS=150 \
	timeout 120 "$W/driver" "$W/big" creds/irsa.dmp > "$W/wi" 2> "$W/wi.err"
WHY="driver: $(cat "$W/wi"); issued: $(tr '\n' ' ' < "$W/creds-issue.log")"
check creds/web-identity-ok grep -q "^ok $((40 << 20))\$" "$W/wi"
check creds/web-identity-renewed [ "$(cat "$W/creds-issue.log")" = "$(printf 'issue AKROT3 sts\nissue AKROT4 sts')" ]
WHY="keys per request: $(awk '{print $3}' "$W/proxy-req.log" | uniq -c | tr '\n' ' ')"
check creds/web-identity-new-keys-used [ "$(awk '{print $3}' "$W/proxy-req.log" | uniq | tr '\n' ' ')" = "AKROT3 AKROT4 " ]
WHY="read back: $(cat "$W/read.json" 2>/dev/null)"
check creds/web-identity-bytes same_as creds/irsa.dmp "$BIG_SHA"
echo "not-the-token" > "$W/bad-token"
chain AWS_WEB_IDENTITY_TOKEN_FILE="$W/bad-token" AWS_ROLE_ARN=arn:aws:iam::123456789012:role/diag-egress \
	AWS_ENDPOINT_URL_STS="$CEP" timeout 60 "$W/driver" "$W/small" creds/bad.dmp > "$W/wb" 2> "$W/wb.err"
WHY="driver: $(cat "$W/wb")"
check creds/web-identity-refused grep -q '^error not authenticated or not authorized: S3 egress: STS AssumeRoleWithWebIdentity (role arn:aws:iam::123456789012:role/diag-egress) at http://127.0.0.1:[0-9]*: InvalidIdentityToken: Incorrect token audience' "$W/wb"

# ---- secrets ----
WHY="a secret in the driver's output"
check secrets/never-printed bash -c "! cat '$W'/{put,mp,auth,auth2,nb,retry,ab,ab2,cc,wi,wb}{,.err} | grep -qE 'rot-secret|session-token|sa-token|not-the-secret|not-the-token|S3RVER:'"
