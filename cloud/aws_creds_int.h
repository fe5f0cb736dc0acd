/*
 * aws_creds_int.h - between the credential chain's own files: aws_creds.c
 * (the chain, the environment's keys, the profile files, credential_process)
 * above aws_creds_remote.c (the sources reached over HTTP: STS web identity,
 * the container endpoint, IMDSv2) above aws_creds_env.c (region, endpoints,
 * time; the environment read as the SDKs read it). Not for other users:
 * their contract is aws_creds.h.
 */
#ifndef DP_AWS_CREDS_INT_H
#define DP_AWS_CREDS_INT_H

#include <stddef.h>

#include "aws_creds.h"

#define AWS_CREDS_MAX_ANSWER ((size_t)64 << 10) /* a credentials endpoint's answer, credential_process's output */

/* getenv, with an empty value taken as unset (aws_creds_env.c). */
const char *aws_creds_env(const char *name);

/*
 * Keys from a JSON answer (the container endpoint's, IMDS's, credential_process's output:
 * AccessKeyId, SecretAccessKey, token_key, Expiration, and Code when there is one) into out,
 * what naming the source (aws_creds_remote.c). 0, or DP_EAUTH with em.
 */
int aws_creds_from_json(const char *text, size_t len, const char *token_key, const char *what, struct aws_creds *out,
			struct err_msg *em);

/*
 * STS AssumeRoleWithWebIdentity with the token in token_file, for role_arn (session NULL: one made
 * up), as a profile's web_identity_token_file asks (aws_creds_remote.c). 0, or DP_EAUTH with em.
 */
int aws_creds_web_identity(const struct aws_creds_opts *o, const char *token_file, const char *role_arn,
			   const char *session, struct aws_creds *out, struct err_msg *em);

/*
 * The sources the chain reaches over HTTP, in its order (aws_creds_remote.c): 1 when the source is not
 * configured (why, wn bytes, says so), 0 with out set, or an error with em when it is configured and fails.
 */
int aws_creds_from_web_identity_env(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
				    struct err_msg *em);
int aws_creds_from_container(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
			     struct err_msg *em);
int aws_creds_from_imds(const struct aws_creds_opts *o, struct aws_creds *out, char *why, size_t wn,
			struct err_msg *em);

#endif
