/*
 * aws.h - what the fleet client needs of AWS besides the credentials and
 * the signature (cloud/aws_creds.h, cloud/aws_sigv4.h): endpoints, and
 * signed calls to JSON 1.1 APIs (ECS, Secrets Manager) and to STS's query
 * API.
 *
 * Ownership: an aws_client owns its credentials and region; every other
 * pointer here is borrowed for the call.
 */
#ifndef DP_FLEET_AWS_H
#define DP_FLEET_AWS_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "cloud/aws_creds.h"
#include "cloud/aws_xml.h"
#include "errors.h"

/* ---- calls ---- */
struct aws_client {
	struct aws_creds creds;
	char *region;
	long timeout_ms; /* each attempt */
};
void aws_client_free(struct aws_client *c); /* NULL-safe */

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
