/*
 * aws_creds.h - AWS credentials as the SDKs find them, and what else a
 * process is told the same way (its region, service endpoints), for the
 * fleet client (fleet/ecs.c) and S3 egress (egress/s3.c).
 *
 * The chain, in the order the SDKs use: the environment (AWS_ACCESS_KEY_ID,
 * AWS_SECRET_ACCESS_KEY, AWS_SESSION_TOKEN); the shared credentials and
 * config files (AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials, or the
 * caller's path; AWS_CONFIG_FILE or ~/.aws/config; the profile from the
 * caller, else AWS_PROFILE, else "default"; static keys, credential_process,
 * or role_arn with web_identity_token_file); web identity
 * (AWS_WEB_IDENTITY_TOKEN_FILE and AWS_ROLE_ARN, AWS_ROLE_SESSION_NAME:
 * STS AssumeRoleWithWebIdentity, unsigned; EKS IRSA); the container
 * credentials endpoint (AWS_CONTAINER_CREDENTIALS_RELATIVE_URI or _FULL_URI,
 * with AWS_CONTAINER_AUTHORIZATION_TOKEN or _TOKEN_FILE: ECS tasks, EKS Pod
 * Identity); IMDSv2 (AWS_EC2_METADATA_SERVICE_ENDPOINT,
 * AWS_EC2_METADATA_DISABLED). As botocore does, a profile the caller names
 * explicitly skips the environment's keys. Every HTTP call goes through
 * webc (no libcurl: the egress process is static).
 *
 * Ownership: an aws_creds owns its strings and wipes the secret ones when
 * freed; every other pointer here is borrowed for the call.
 */
#ifndef DP_AWS_CREDS_H
#define DP_AWS_CREDS_H

#include <stdbool.h>
#include <time.h>

#include "errors.h"

struct aws_creds {
	char *access_key;
	char *secret_key; /* wiped when freed */
	char *token;      /* a session token, or NULL; wiped when freed */
	time_t expires;   /* when they lapse (the source's Expiration), or 0: never */
	char source[192]; /* where they came from, for messages ("profile dev in /home/a/.aws/credentials") */
};
void aws_creds_free(struct aws_creds *c); /* NULL-safe; c is zeroed */
/* A copy of c into out (new strings). */
void aws_creds_copy(struct aws_creds *out, const struct aws_creds *c);

struct webc_opts;
struct aws_creds_opts {
	const char *profile;      /* NULL: AWS_PROFILE, else "default" */
	const char *profile_path; /* the shared credentials file; NULL: AWS_SHARED_CREDENTIALS_FILE or ~/.aws/credentials */
	long timeout_ms;          /* a cap on each endpoint call (0: the SDKs' own, 1 s IMDS, 2 s container, 10 s STS) */
	const struct webc_opts *web; /* CA file and where connects are allowed; NULL: webc's defaults */
	long refresh_before_s;    /* aws_creds_fresh renews this long before they lapse; 0: 300 (5 minutes) */
};

/*
 * The first credentials the chain gives. DP_EAUTH when no source has any,
 * em naming each source and why it had none, or when a source that is
 * configured fails (em names it: "the container credentials endpoint
 * http://...: HTTP 500", "STS AssumeRoleWithWebIdentity: InvalidIdentityToken:
 * ..."); DP_EINVAL for a named profile that does not exist or a file that
 * does not read. Secrets never appear in em.
 */
int aws_creds_load(const struct aws_creds_opts *o, struct aws_creds *out, struct err_msg *em);

/*
 * Keep c usable: when c has an expiry less than refresh_before_s away, load
 * the chain again and replace c (renewed, may be NULL, set true). A failed
 * renewal is an error only once c has lapsed (the SDKs' advisory refresh).
 * 0, or aws_creds_load's errors.
 */
int aws_creds_fresh(const struct aws_creds_opts *o, struct aws_creds *c, bool *renewed, struct err_msg *em);

/* The region: region, else AWS_REGION, AWS_DEFAULT_REGION, the profile's region. New string, or DP_EINVAL. */
int aws_creds_region(const char *region, const char *profile, char **out, struct err_msg *em);

/*
 * The endpoint of a service: $AWS_ENDPOINT_URL_<env_id> (env_id as the SDKs
 * spell it: "ECS", "SECRETS_MANAGER", "STS", "S3"), else $AWS_ENDPOINT_URL,
 * else https://<host_prefix>.<region>.amazonaws.com. New string, no
 * trailing slash.
 */
char *aws_creds_endpoint(const char *env_id, const char *host_prefix, const char *region);

/* RFC 3339 / ISO 8601 UTC time ("2024-05-01T12:00:00Z", fractions and +hh:mm allowed) as time_t; 0 when unreadable. */
time_t aws_creds_parse_time(const char *s);

#endif
