/*
 * aws_sigv4.h - AWS Signature Version 4 as AWS publishes it: a canonical
 * request, a string to sign, a key derived from the secret through the
 * date, region and service. The fleet client signs ECS, Secrets Manager and
 * STS calls with it, S3 egress every S3 request.
 *
 * Ownership: everything passed in is borrowed; the lines given back are
 * new and freed (wiped) with aws_sigv4_free.
 */
#ifndef DP_AWS_SIGV4_H
#define DP_AWS_SIGV4_H

#include <stdbool.h>
#include <stddef.h>

#include "aws_creds.h"
#include "errors.h"

struct aws_sigv4_req {
	const char *method;
	const char *url;             /* scheme://host[:port][/path][?query], path and query already
					percent-encoded once (every byte but A-Z a-z 0-9 - . _ ~ and '/') */
	const char *const *headers;  /* "Name: value" lines to sign, NULL-terminated, or NULL; Host comes from url */
	const void *body;            /* NULL: empty */
	size_t body_len;
	const char *payload_hash;    /* the payload's hash as sent in x-amz-content-sha256 (lowercase hex, or
					"UNSIGNED-PAYLOAD"); NULL: SHA-256 of body */
	bool s3;                     /* S3's canonical URI: the URL's path as it is; other services encode it again */
	const char *service, *region; /* the signing name ("ecs", "sts", "s3") and region */
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

#endif
