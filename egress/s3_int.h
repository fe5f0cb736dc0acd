/*
 * s3_int.h - between egress/s3.c (the upload: parts, buffers, threads) and
 * egress/s3_req.c (one S3 request: URL, headers, signature, retries).
 */
#ifndef DP_EGRESS_S3_INT_H
#define DP_EGRESS_S3_INT_H

#include <pthread.h>
#include <stdbool.h>

#include "cloud/aws_creds.h"
#include "s3.h"
#include "cloud/webc.h"

/* The settings resolved once per upload; owned by the upload. */
struct s3_conn_cfg {
	char *base;       /* scheme://host[:port] to connect to (the bucket's host when virtual-hosted) */
	char *path;       /* the object's path, encoded: "/bucket/a/b.dmp" or "/a/b.dmp" */
	char *region;     /* the signing region */
	char *desc;       /* "s3://bucket/key at BASE", for messages */
	bool https;       /* UNSIGNED-PAYLOAD; else each body's SHA-256 is signed */
	int attempts;
	long retry_base_ms;
	struct webc_opts web;
	struct aws_creds_opts co;
	pthread_mutex_t creds_mu;
	struct aws_creds creds; /* renewed under creds_mu before they lapse */
	bool static_keys;       /* from the settings: never renewed */
};

struct s3_call {
	const char *method;
	const char *action;           /* "UploadPart 3": for messages */
	const char *query;            /* encoded, without '?', or NULL */
	const char *const *headers;   /* besides the signature's, NULL-terminated, or NULL */
	const void *body;
	size_t len;
	const char *payload_hash;     /* the body's SHA-256 in hex when computed already, or NULL */
	const char *const *want_headers;
	bool error_in_200;            /* CompleteMultipartUpload: a 200 can carry an <Error> */
};

/* Resolve cfg for the object at name into c (credentials included). 0, DP_EINVAL or DP_EAUTH with em. */
int s3_conn_cfg_init(struct s3_conn_cfg *c, const struct s3_cfg *cfg, const char *name, struct err_msg *em);
void s3_conn_cfg_free(struct s3_conn_cfg *c);

/*
 * Send call on *conn (opened, or opened again after a failure, as needed),
 * signed, tried again as s3.h says. 0 with a 2xx answer in resp; else the
 * error (em: "S3 ACTION s3://bucket/key at BASE: Code: Message (HTTP n)").
 */
int s3_send(struct s3_conn_cfg *c, struct webc_conn **conn, const struct s3_call *call, struct webc_resp *resp,
	    struct err_msg *em);

#endif
