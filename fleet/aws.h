/*
 * aws.h - what the fleet client needs of AWS: credentials from the standard
 * chain, the region, SigV4 signatures, and signed calls to JSON 1.1 APIs
 * (ECS, Secrets Manager) and to STS's query API.
 *
 * The chain, in the order the SDKs use: the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); the shared credentials and
 * config files (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials,
 * AWS_CONFIG_FILE or ~/.aws/config, the profile from the caller, else
 * AWS_PROFILE, else "default"; static keys or credential_process); the
 * container credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or
 * _FULL_URI, with AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE: ECS
 * tasks, EKS Pod Identity); IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT,
 * AWS_EC2_METADATA_DISABLED). As botocore does, a profile the caller names
 * explicitly skips the environment's keys.
 *
 * Ownership: an aws_creds owns its strings and wipes the secret ones when
 * freed; every other pointer here is borrowed for the call.
 */
#ifndef DP_FLEET_AWS_H
#define DP_FLEET_AWS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

struct aws_creds {
	char *access_key;
	char *secret_key; /* wiped when freed */
	char *token;      /* a session token, or NULL; wiped when freed */
	char source[192]; /* where they came from, for messages ("profile dev in /home/a/.aws/credentials") */
};
void aws_creds_free(struct aws_creds *c); /* NULL-safe; c is zeroed */

/*
 * The first credentials the chain gives (profile: NULL for AWS_PROFILE or
 * "default"). DP_EAUTH when no source has any, em naming each source and
 * why it had none, or when a source that is configured fails (em names it:
 * "the container credentials endpoint http://...: HTTP 500"); DP_EINVAL for
 * a named profile that does not exist or a file that does not read.
 * Secrets never appear in em.
 */
int aws_creds_load(const char *profile, long timeout_ms, struct aws_creds *out, struct err_msg *em);

/* The region: region, else AWS_REGION, AWS_DEFAULT_REGION, the profile's region. New string, or DP_EINVAL. */
int aws_region(const char *region, const char *profile, char **out, struct err_msg *em);

/*
 * The endpoint of a service: $AWS_ENDPOINT_URL_<env_id> (env_id as the SDKs
 * spell it: "ECS", "SECRETS_MANAGER", "STS"), else $AWS_ENDPOINT_URL, else
 * https://<host_prefix>.<region>.amazonaws.com. New string, no trailing slash.
 */
char *aws_endpoint(const char *env_id, const char *host_prefix, const char *region);

/* ---- SigV4 (the published algorithm: canonical request, string to sign, derived key) ---- */
struct aws_sigv4_req {
	const char *method;
	const char *url;             /* scheme://host[:port][/path][?query] */
	const char *const *headers;  /* "Name: value" lines to sign, NULL-terminated, or NULL; Host comes from url */
	const void *body;            /* NULL: empty */
	size_t body_len;
	const char *service, *region; /* the signing name ("ecs", "secretsmanager", "sts") and region */
	const char *amz_date;        /* "YYYYMMDDTHHMMSSZ", or NULL: now */
};
#define AWS_SIGV4_MAX 5
/*
 * The headers to send with the request beside req->headers, as "Name: value"
 * lines in out (new strings, NULL-terminated): Host, X-Amz-Date,
 * X-Amz-Security-Token (with a session token), Authorization. 0, or
 * DP_EINVAL for a URL it cannot read. Free with aws_sigv4_free.
 */
int aws_sigv4_sign(const struct aws_sigv4_req *req, const struct aws_creds *c, char *out[AWS_SIGV4_MAX],
		   struct err_msg *em);
void aws_sigv4_free(char *out[AWS_SIGV4_MAX]); /* wipes (the token) and frees */

/* ---- calls ---- */
struct aws_client {
	struct aws_creds creds;
	char *region;
	long timeout_ms; /* each attempt */
};
void aws_client_free(struct aws_client *c); /* NULL-safe */

/* What an API error said (type without its namespace, "ClusterNotFoundException"). */
struct aws_error {
	long status;      /* HTTP status, 0 when no answer came */
	char type[96];
	char message[512];
};

/* One JSON 1.1 call: POST / with X-Amz-Target: target (e.g. "AmazonEC2ContainerServiceV20141113.ListTasks"). */
struct aws_json_call {
	const char *endpoint; /* aws_endpoint's */
	const char *service;  /* signing name */
	const char *region;   /* NULL: the client's */
	const char *target;
	const char *action;   /* for messages and IAM: "ecs:ListTasks" */
};
/*
 * Send in (borrowed) and give the answer's JSON in *out (new reference).
 * Throttling, 5xx and no answer are tried again with backoff (4 attempts).
 * An API error: ae (may be NULL) filled, em "ACTION: TYPE: message", and
 * DP_EAUTH (access denied, unknown key, bad signature, expired token),
 * DP_ENOTFOUND (*NotFoundException), else DP_EREMOTE; DP_EIO when no
 * answer came. Secrets are never in em.
 */
int aws_json(const struct aws_client *c, const struct aws_json_call *call, json_t *in, json_t **out,
	     struct aws_error *ae, struct err_msg *em);

/* STS GetCallerIdentity (query protocol, XML answer): the caller's ARN (new string), or an error as aws_json's. */
int aws_caller_arn(const struct aws_client *c, char **arn, struct err_msg *em);

#endif
