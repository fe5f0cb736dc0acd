#!/usr/bin/env bash
# ecs-validate.sh FILE - check an ECS task definition (RegisterTaskDefinition
# input, camelCase JSON) against the request model of Debian's AWS CLI v2,
# without AWS: the CLI validates every parameter (names, types, required
# fields) before it sends anything, and the request is sent to a closed port
# on loopback with dummy credentials, so a well-formed request fails only at
# the connection.
#
# A `describe-task-definition` result ({"taskDefinition": {...}, "tags": [...]})
# is accepted too: it is first turned into the register input it stands for
# (read-only fields dropped, tags moved in), as the injector does.
#
# Exit 0: valid (only the connection failed); 1: the CLI rejected the input
# (its message is printed); 2: anything else (usage, missing file, an
# unexpected answer from the CLI).
set -euo pipefail

if [ $# -ne 1 ]; then
	echo "usage: ecs-validate.sh FILE" >&2
	exit 2
fi
file=$1
if [ ! -f "$file" ] || [ ! -r "$file" ]; then
	echo "ecs-validate: $file: no such readable file" >&2
	exit 2
fi
aws=/usr/bin/aws
if [ ! -x "$aws" ]; then
	echo "ecs-validate: $aws not found (Debian package awscli; scripts/prereqs.sh test installs it)" >&2
	exit 2
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

input=$(realpath "$file")
if jq -e 'type == "object" and has("taskDefinition")' "$file" >/dev/null 2>&1; then
	jq '.tags as $tags
	    | .taskDefinition
	    | del(.taskDefinitionArn, .revision, .status, .requiresAttributes,
	          .compatibilities, .registeredAt, .registeredBy, .deregisteredAt)
	    | if $tags != null then . + {tags: $tags} else . end' \
		"$file" >"$tmp/input.json"
	input=$tmp/input.json
fi

# The CLI reads YAML as well (--cli-input-yaml); pick the flag by the first byte.
flag=--cli-input-json
if [ "$(tr -d ' \t\r\n' <"$input" | head -c 1)" != "{" ]; then
	flag=--cli-input-yaml
fi

# No profile, config, proxy or endpoint from the caller's environment may
# change where the request goes or which credentials sign it.
rc=0
env -u AWS_PROFILE -u AWS_DEFAULT_PROFILE -u AWS_SESSION_TOKEN -u AWS_ENDPOINT_URL \
	-u AWS_ENDPOINT_URL_ECS -u AWS_CA_BUNDLE -u AWS_RETRY_MODE -u AWS_CLI_AUTO_PROMPT \
	-u HTTP_PROXY -u HTTPS_PROXY -u http_proxy -u https_proxy -u ALL_PROXY -u all_proxy \
	-u PYTHONPATH -u PYTHONHOME -u PYTHONSTARTUP \
	AWS_ACCESS_KEY_ID=AKIDEXAMPLE AWS_SECRET_ACCESS_KEY=x AWS_EC2_METADATA_DISABLED=true \
	AWS_CONFIG_FILE=/dev/null AWS_SHARED_CREDENTIALS_FILE=/dev/null AWS_MAX_ATTEMPTS=1 \
	AWS_PAGER= NO_PROXY='*' \
	"$aws" ecs register-task-definition "$flag" "file://$input" \
	--region us-east-1 --endpoint-url http://127.0.0.1:9 \
	--cli-connect-timeout 2 --cli-read-timeout 2 \
	>"$tmp/out" 2>"$tmp/err" </dev/null || rc=$?

# The CLI exits 252 for input it rejects and 255 for a failed request.
if [ "$rc" -eq 252 ] && grep -qE '^(Parameter validation failed:|Error parsing parameter .cli-input-(json|yaml).: Invalid (JSON|YAML))' "$tmp/err"; then
	echo "ecs-validate: $file: invalid:" >&2
	cat "$tmp/err" >&2
	exit 1
fi
if [ "$rc" -eq 255 ] && grep -q '^Could not connect to the endpoint URL' "$tmp/err"; then
	echo "valid: the request was well-formed and only the connection failed"
	exit 0
fi
echo "ecs-validate: $file: unexpected result from the AWS CLI (exit $rc):" >&2
cat "$tmp/out" "$tmp/err" >&2
exit 2
