/*
 * s3.h - an artifact streamed to S3 (or an S3-compatible store) as it is
 * produced: s3_begin, s3_write as bytes come, s3_finish (or s3_abort).
 *
 * Settings are dotnet-monitor's Egress:S3Storage:NAME keys (its S3 egress
 * extension) plus a few of diagport's, named in the comments. Up to one
 * part of bytes the upload is one PutObject; past it a multipart upload
 * (CreateMultipartUpload, UploadPart per part_size bytes,
 * CompleteMultipartUpload) with at most part_buffers parts in memory: the
 * caller fills one while the others are sent, each by its own thread and
 * connection, and s3_write waits when all are full (a slow store slows the
 * producer; memory stays part_buffers x part_size). Every request is tried
 * again with exponential backoff and full jitter, a bounded number of
 * times, on no answer (reset, timeout, refused), 5xx, 429 and S3's
 * SlowDown / RequestTimeout / InternalError; a part is sent again from its
 * buffer. A multipart upload that fails or is aborted is aborted on the
 * store (AbortMultipartUpload), so no upload is left behind.
 *
 * Payload signing: over https the parts are sent as UNSIGNED-PAYLOAD (TLS
 * already protects them, and hashing every byte costs CPU the agent's
 * pod pays for); over plain http each part's SHA-256 is signed
 * (x-amz-content-sha256), so the store refuses a part changed on the way.
 *
 * Ownership: everything passed in is borrowed for the call (s3_begin copies
 * what it keeps); an s3_upload is the caller's until s3_finish or s3_abort,
 * which free it. One thread calls s3_write / s3_finish / s3_abort.
 */
#ifndef DP_EGRESS_S3_H
#define DP_EGRESS_S3_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define S3_PART_SIZE ((size_t)8 << 20)     /* the default part size */
#define S3_MIN_PART_SIZE ((size_t)5 << 20) /* S3's minimum, all parts but the last */
#define S3_MAX_PART_SIZE ((size_t)512 << 20) /* ours: a part is held in memory */
#define S3_PART_BUFFERS 2                  /* the default: one filled while one is sent */
#define S3_MAX_PART_BUFFERS 16
#define S3_MAX_PARTS 10000                 /* S3's limit */
#define S3_ATTEMPTS 5                      /* tries per request, the default */
#define S3_MAX_META 32

struct webc_opts;

struct s3_cfg {
	const char *endpoint;          /* Endpoint: an S3-compatible store ("http://127.0.0.1:9000"); NULL:
					  AWS_ENDPOINT_URL_S3, AWS_ENDPOINT_URL, else https://s3.REGION.amazonaws.com */
	const char *bucket;            /* BucketName (required) */
	const char *region;            /* RegionName: the signing region (and AWS's endpoint); NULL: AWS_REGION,
					  AWS_DEFAULT_REGION, the profile's, else us-east-1 */
	const char *access_key_id;     /* AccessKeyId; with a secret: these keys, the chain is not asked */
	const char *secret_access_key; /* SecretAccessKey */
	const char *secret_access_key_file; /* diagport's SecretAccessKeyFile: a file holding the secret */
	const char *session_token;     /* diagport's SessionToken, with the keys above */
	const char *profile;           /* AwsProfileName: a profile of the shared files */
	const char *profile_path;      /* AwsProfilePath: the shared credentials file */
	bool force_path_style;         /* ForcePathStyle: https://host/bucket/key, not https://bucket.host/key */
	size_t part_size;              /* CopyBufferSize: bytes per part; 0: S3_PART_SIZE; raised to S3_MIN_PART_SIZE */
	const char *key_prefix;        /* diagport's KeyPrefix: keys are PREFIX/NAME */
	const char *storage_class;     /* diagport's StorageClass (x-amz-storage-class), or NULL */
	bool use_kms;                  /* UseKmsEncryption: x-amz-server-side-encryption: aws:kms */
	const char *kms_key;           /* KmsEncryptionKey: the customer managed key's ARN, or NULL */
	int part_buffers;              /* parts in memory at most; 0: S3_PART_BUFFERS */
	int attempts;                  /* tries per request; 0: S3_ATTEMPTS */
	long retry_base_ms;            /* the first backoff's ceiling, doubled each time; 0: 200 ms */
	const struct webc_opts *web;   /* CA file, timeouts, where connects are allowed; NULL: webc's defaults */
	long refresh_before_s;         /* renew expiring credentials this long before (aws_creds.h); 0: 300 */
};

/* One piece of user metadata, sent as x-amz-meta-NAME (name: lowercase letters, digits, '-', '_'). */
struct s3_meta {
	const char *name;  /* "pod", "namespace", "container", "pid", "artifact-type", "time" */
	const char *value; /* any UTF-8; non-ASCII values are sent RFC 2047-encoded, as S3 asks */
};

/*
 * Bytes the store has taken so far (after each part it acknowledged, or the
 * PutObject), called from the upload's threads with its lock held: it must
 * be quick and must not call s3_* on the same upload.
 */
typedef void (*s3_progress_fn)(void *ctx, uint64_t bytes_sent);

struct s3_upload;

/*
 * Start the upload of the object NAME (KeyPrefix/NAME) with metadata
 * meta[0..n_meta) and content_type (NULL: application/octet-stream).
 * Finds credentials (the keys in cfg, else the chain) and checks the
 * settings; nothing is sent yet. 0 with *out; DP_EINVAL (a bad setting or
 * name), DP_EAUTH (no credentials) with em.
 */
int s3_begin(const struct s3_cfg *cfg, const char *name, const struct s3_meta *meta, size_t n_meta,
	     const char *content_type, s3_progress_fn progress, void *progress_ctx, struct s3_upload **out,
	     struct err_msg *em);

/*
 * Add data[0..len) to the object. May wait while every part buffer is
 * being sent. 0, or the upload's failure (the first part or request that
 * failed for good: DP_EIO no answer, DP_EAUTH refused, DP_ENOTFOUND no
 * such bucket, DP_EREMOTE another error from the store, with its Code and
 * Message in em); after a failure only s3_abort is useful.
 */
int s3_write(struct s3_upload *u, const void *data, size_t len, struct err_msg *em);

/*
 * Send what is left and complete the object; frees u. 0 with *bytes (may
 * be NULL) the object's size; on failure the multipart upload is aborted
 * on the store and the error is s3_write's.
 */
int s3_finish(struct s3_upload *u, uint64_t *bytes, struct err_msg *em);

/* Stop: abort the multipart upload on the store (if one was started) and free u. NULL-safe. */
void s3_abort(struct s3_upload *u);

/* ---- for tests ---- */

/* The request URL (no query) of the object at name for cfg's endpoint and style, as s3_begin would build it. */
int s3_object_url(const struct s3_cfg *cfg, const char *region, const char *name, char **url, struct err_msg *em);

#endif
