/*
 * s3.c - the S3 uploader (s3.h): an artifact streamed into part buffers,
 * one PutObject when it fits in one part, else a multipart upload whose
 * parts are sent by worker threads while the caller fills the next buffer.
 *
 * The caller's thread owns the buffer being filled (cur) and sends the
 * upload's own requests (Create, Put, Complete, Abort) on its connection.
 * Full buffers go to a queue; part_buffers - 1 workers (at least one),
 * each with its own connection, take them, send them (s3_send retries), note
 * the ETag, and put the buffer back on the free list. At most part_buffers
 * buffers are ever allocated; s3_write waits for a free one. The first
 * failure is kept, stops the workers, and is what every later call returns;
 * a multipart upload that does not complete is aborted on the store.
 */
#include "s3.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/aws_xml.h"
#include "base64.h"
#include "buf.h"
#include "log.h"
#include "mem.h"
#include "s3_int.h"
#include "sha256.h"

#define MAX_META_BYTES 2048 /* S3's limit on user metadata (names and values) */

struct part {
	char *data; /* part_size bytes */
	size_t len;
	int number;
	struct part *next;
};

struct s3_upload {
	struct s3_conn_cfg c;
	size_t part_size;
	int max_buffers, n_buffers;
	const char **obj_headers; /* Content-Type, x-amz-meta-*, storage class, SSE; owned strings */
	size_t n_obj_headers;
	struct webc_conn *conn;   /* the caller's thread's */
	struct part *cur;         /* being filled (caller's thread only) */
	char *upload_id;          /* set once the multipart upload is created */
	char *upload_id_q;        /* percent-encoded */

	pthread_mutex_t mu;       /* guards everything below */
	pthread_cond_t cv;
	struct part *queue, *queue_tail, *free_list;
	pthread_t *threads;
	int n_threads;
	bool closing;             /* no more parts will come: workers stop when the queue is empty */
	int failed;               /* the first failure (0: none) */
	struct err_msg fail_em;
	int n_parts;              /* part numbers given out */
	char **etags;             /* [n_parts] */
	uint64_t bytes_in, bytes_sent;
	s3_progress_fn progress;
	void *progress_ctx;
};

/* ---- the object's headers ---- */

static bool meta_name_ok(const char *n)
{
	if (n == NULL || *n == '\0' || strlen(n) > 128)
		return false;
	for (; *n; n++)
		if (!((*n >= 'a' && *n <= 'z') || (*n >= '0' && *n <= '9') || *n == '-' || *n == '_'))
			return false;
	return true;
}

static bool printable(const char *v)
{
	for (; *v; v++)
		if ((unsigned char)*v < 0x20 || (unsigned char)*v > 0x7e)
			return false;
	return true;
}

static void add_header(struct s3_upload *u, char *line)
{
	u->obj_headers = mem_realloc(u->obj_headers, (u->n_obj_headers + 2) * sizeof(*u->obj_headers));
	u->obj_headers[u->n_obj_headers++] = line;
	u->obj_headers[u->n_obj_headers] = NULL;
}

static int object_headers(struct s3_upload *u, const struct s3_cfg *cfg, const struct s3_meta *meta, size_t n_meta,
			  const char *content_type, struct err_msg *em)
{
	size_t total = 0;

	if (content_type && !printable(content_type))
		return err_set(em, DP_EINVAL, "S3 egress: the content type has a byte a header cannot hold");
	add_header(u, mem_printf("Content-Type: %s", content_type && *content_type ? content_type
										     : "application/octet-stream"));
	if (n_meta > S3_MAX_META)
		return err_set(em, DP_EINVAL, "S3 egress: more than %d metadata entries", S3_MAX_META);
	for (size_t i = 0; i < n_meta; i++) {
		const char *v = meta[i].value ? meta[i].value : "";

		if (!meta_name_ok(meta[i].name))
			return err_set(em, DP_EINVAL, "S3 egress: metadata name %.64s is not lowercase letters, digits, "
						      "'-' and '_'", meta[i].name ? meta[i].name : "(null)");
		total += strlen(meta[i].name) + strlen(v);
		if (printable(v)) {
			add_header(u, mem_printf("x-amz-meta-%s: %s", meta[i].name, v));
		} else {
			char *b = b64_encode(v, strlen(v), NULL);

			add_header(u, mem_printf("x-amz-meta-%s: =?UTF-8?B?%s?=", meta[i].name, b)); /* RFC 2047 */
			free(b);
		}
	}
	if (total > MAX_META_BYTES)
		return err_set(em, DP_EINVAL, "S3 egress: the metadata is over S3's %d bytes", MAX_META_BYTES);
	if (cfg->storage_class && *cfg->storage_class) {
		for (const char *p = cfg->storage_class; *p; p++)
			if (!((*p >= 'A' && *p <= 'Z') || *p == '_'))
				return err_set(em, DP_EINVAL, "S3 egress: StorageClass %.40s is not an S3 storage class "
							      "(STANDARD, STANDARD_IA, ...)", cfg->storage_class);
		add_header(u, mem_printf("x-amz-storage-class: %s", cfg->storage_class));
	}
	if (cfg->use_kms) {
		add_header(u, mem_strdup("x-amz-server-side-encryption: aws:kms"));
		if (cfg->kms_key && *cfg->kms_key) {
			if (!printable(cfg->kms_key))
				return err_set(em, DP_EINVAL, "S3 egress: KmsEncryptionKey has a byte a header cannot hold");
			add_header(u, mem_printf("x-amz-server-side-encryption-aws-kms-key-id: %s", cfg->kms_key));
		}
	}
	return 0;
}

/* ---- failure and progress (under mu) ---- */

static void fail_locked(struct s3_upload *u, int rc, const struct err_msg *e)
{
	if (u->failed == 0) {
		u->failed = rc;
		u->fail_em = *e;
	}
	pthread_cond_broadcast(&u->cv);
}

static int fail(struct s3_upload *u, int rc, const struct err_msg *e)
{
	pthread_mutex_lock(&u->mu);
	fail_locked(u, rc, e);
	rc = u->failed;
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static int failed_now(struct s3_upload *u, struct err_msg *em)
{
	int rc;

	pthread_mutex_lock(&u->mu);
	rc = u->failed;
	if (rc && em)
		*em = u->fail_em;
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static void sent_locked(struct s3_upload *u, size_t n)
{
	u->bytes_sent += n;
	if (u->progress)
		u->progress(u->progress_ctx, u->bytes_sent);
}

/* ---- parts ---- */

static int upload_part(struct s3_upload *u, struct webc_conn **conn, const struct part *p, char **etag,
		       struct err_msg *em)
{
	static const char *const want[] = { "etag", NULL };
	char action[40], hash[SHA256_HEX_LEN] = "", *q;
	struct webc_resp r = { 0 };
	struct s3_call call = { .method = "PUT", .action = action, .body = p->data, .len = p->len, .want_headers = want };
	const char *e;
	int rc;

	if (!u->c.https) { /* hashed once, whatever the retries */
		uint8_t d[SHA256_LEN];

		sha256(p->data, p->len, d);
		sha256_hex(d, hash);
		call.payload_hash = hash;
	}
	snprintf(action, sizeof(action), "UploadPart %d", p->number);
	q = mem_printf("partNumber=%d&uploadId=%s", p->number, u->upload_id_q);
	call.query = q;
	rc = s3_send(&u->c, conn, &call, &r, em);
	if (rc == 0) {
		if ((e = webc_resp_header(&r, "etag")) != NULL && *e)
			*etag = mem_strdup(e);
		else
			rc = err_set(em, DP_EREMOTE, "S3 %s %s: the answer has no ETag", action, u->c.desc);
	}
	webc_resp_free(&r);
	free(q);
	return rc;
}

static void *worker(void *arg)
{
	struct s3_upload *u = arg;
	struct webc_conn *conn = NULL;

	pthread_mutex_lock(&u->mu);
	for (;;) {
		struct part *p;
		struct err_msg e = { "" };
		char *etag = NULL;
		int rc;

		while (u->queue == NULL && !u->closing && u->failed == 0)
			pthread_cond_wait(&u->cv, &u->mu);
		if (u->failed || u->queue == NULL)
			break;
		p = u->queue;
		u->queue = p->next;
		if (u->queue == NULL)
			u->queue_tail = NULL;
		pthread_mutex_unlock(&u->mu);
		rc = upload_part(u, &conn, p, &etag, &e);
		pthread_mutex_lock(&u->mu);
		if (rc == 0) {
			u->etags[p->number - 1] = etag;
			sent_locked(u, p->len);
		} else {
			fail_locked(u, rc, &e);
		}
		p->len = 0;
		p->next = u->free_list;
		u->free_list = p;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	webc_close(conn);
	return NULL;
}

/* A buffer to fill in *out: a free one, a new one while under max_buffers, else wait. 0, or the upload's failure. */
static int take_buffer(struct s3_upload *u, struct part **out, struct err_msg *em)
{
	int rc;

	pthread_mutex_lock(&u->mu);
	while (u->free_list == NULL && u->n_buffers >= u->max_buffers && u->failed == 0)
		pthread_cond_wait(&u->cv, &u->mu);
	if ((rc = u->failed) != 0) {
		*em = u->fail_em;
	} else if (u->free_list) {
		*out = u->free_list;
		u->free_list = u->free_list->next;
	} else {
		*out = mem_zalloc(sizeof(**out));
		(*out)->data = mem_alloc(u->part_size);
		u->n_buffers++;
	}
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static int create_upload(struct s3_upload *u, struct err_msg *em)
{
	static const char *const want[] = { NULL };
	struct webc_resp r = { 0 };
	struct s3_call call = { .method = "POST", .action = "CreateMultipartUpload", .query = "uploads",
				.headers = u->obj_headers, .want_headers = want };
	struct buf q;
	char *id = NULL;
	int rc;

	if ((rc = s3_send(&u->c, &u->conn, &call, &r, em)) == 0)
		id = aws_xml_text(r.body.data, r.body.len, "UploadId");
	webc_resp_free(&r);
	if (rc != 0)
		return rc;
	if (id == NULL || *id == '\0') {
		free(id);
		return err_set(em, DP_EREMOTE, "S3 CreateMultipartUpload %s: the answer has no UploadId", u->c.desc);
	}
	u->upload_id = id;
	buf_init(&q, 0);
	buf_pct_encode(&q, id, strlen(id), false);
	u->upload_id_q = buf_steal(&q, NULL);
	u->n_threads = u->max_buffers > 1 ? u->max_buffers - 1 : 1;
	u->threads = mem_array((size_t)u->n_threads, sizeof(*u->threads));
	for (int i = 0; i < u->n_threads; i++)
		if (pthread_create(&u->threads[i], NULL, worker, u) != 0)
			DP_FATAL("cannot start an S3 upload thread");
	return 0;
}

/* Queue the full buffer cur as the next part (creating the multipart upload first). */
static int submit(struct s3_upload *u, struct err_msg *em)
{
	int rc = 0;

	if (u->upload_id == NULL && (rc = create_upload(u, em)) != 0)
		return fail(u, rc, em);
	pthread_mutex_lock(&u->mu);
	if (u->failed) {
		rc = u->failed;
		*em = u->fail_em;
	} else if (u->n_parts == S3_MAX_PARTS) {
		rc = err_set(em, DP_ETOOBIG, "S3 egress %s: the artifact is over %d parts of %zu bytes", u->c.desc,
			     S3_MAX_PARTS, u->part_size);
		fail_locked(u, rc, em);
	} else {
		u->cur->number = ++u->n_parts;
		u->etags = mem_realloc(u->etags, (size_t)u->n_parts * sizeof(*u->etags));
		u->etags[u->n_parts - 1] = NULL;
		u->cur->next = NULL;
		if (u->queue_tail)
			u->queue_tail->next = u->cur;
		else
			u->queue = u->cur;
		u->queue_tail = u->cur;
		u->cur = NULL;
		pthread_cond_broadcast(&u->cv);
	}
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static void upload_free(struct s3_upload *u);

/* ---- the API ---- */

int s3_begin(const struct s3_cfg *cfg, const char *name, const struct s3_meta *meta, size_t n_meta,
	     const char *content_type, s3_progress_fn progress, void *progress_ctx, struct s3_upload **out,
	     struct err_msg *em)
{
	size_t part_size = cfg->part_size ? cfg->part_size : S3_PART_SIZE;
	int buffers = cfg->part_buffers > 0 ? cfg->part_buffers : S3_PART_BUFFERS, rc;
	struct s3_upload *u;

	if (part_size < S3_MIN_PART_SIZE)
		part_size = S3_MIN_PART_SIZE; /* as dotnet-monitor does with CopyBufferSize */
	if (part_size > S3_MAX_PART_SIZE)
		return err_set(em, DP_EINVAL, "S3 egress: CopyBufferSize %zu is over %zu", part_size, S3_MAX_PART_SIZE);
	if (buffers > S3_MAX_PART_BUFFERS)
		return err_set(em, DP_EINVAL, "S3 egress: more than %d part buffers", S3_MAX_PART_BUFFERS);
	u = mem_zalloc(sizeof(*u));
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	u->part_size = part_size;
	u->max_buffers = buffers;
	u->progress = progress;
	u->progress_ctx = progress_ctx;
	if ((rc = s3_conn_cfg_init(&u->c, cfg, name, em)) == 0)
		rc = object_headers(u, cfg, meta, n_meta, content_type, em);
	if (rc != 0) {
		upload_free(u);
		return rc;
	}
	*out = u;
	return 0;
}

int s3_write(struct s3_upload *u, const void *data, size_t len, struct err_msg *em)
{
	const char *p = data;
	int rc;

	while (len > 0) {
		struct part *cur;
		size_t n;

		if ((rc = failed_now(u, em)) != 0)
			return rc;
		if (u->cur && u->cur->len == u->part_size && (rc = submit(u, em)) != 0)
			return rc;
		if (u->cur == NULL) {
			if ((rc = take_buffer(u, &cur, em)) != 0)
				return rc;
			u->cur = cur;
		} else {
			cur = u->cur;
		}
		n = u->part_size - cur->len < len ? u->part_size - cur->len : len;
		memcpy(cur->data + cur->len, p, n);
		cur->len += n;
		u->bytes_in += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int put_object(struct s3_upload *u, struct err_msg *em)
{
	struct webc_resp r = { 0 };
	struct s3_call call = { .method = "PUT", .action = "PutObject", .headers = u->obj_headers,
				.body = u->cur ? u->cur->data : "", .len = u->cur ? u->cur->len : 0 };
	int rc = s3_send(&u->c, &u->conn, &call, &r, em);

	webc_resp_free(&r);
	if (rc == 0) {
		pthread_mutex_lock(&u->mu);
		sent_locked(u, call.len);
		pthread_mutex_unlock(&u->mu);
	}
	return rc;
}

static void xml_escape(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '&')
			buf_puts(b, "&amp;");
		else if (*s == '<')
			buf_puts(b, "&lt;");
		else if (*s == '>')
			buf_puts(b, "&gt;");
		else
			buf_putc(b, *s);
	}
}

static int complete_upload(struct s3_upload *u, struct err_msg *em)
{
	static const char *const headers[] = { "Content-Type: application/xml", NULL };
	struct webc_resp r = { 0 };
	struct s3_call call = { .method = "POST", .action = "CompleteMultipartUpload", .query = NULL,
				.headers = headers, .error_in_200 = true };
	struct buf x;
	char *q = mem_printf("uploadId=%s", u->upload_id_q);
	int rc;

	buf_init(&x, 0);
	buf_puts(&x, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
		     "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">");
	for (int i = 0; i < u->n_parts; i++) {
		buf_printf(&x, "<Part><PartNumber>%d</PartNumber><ETag>", i + 1);
		xml_escape(&x, u->etags[i]);
		buf_puts(&x, "</ETag></Part>");
	}
	buf_puts(&x, "</CompleteMultipartUpload>");
	call.query = q;
	call.body = x.data;
	call.len = x.len;
	rc = s3_send(&u->c, &u->conn, &call, &r, em);
	webc_resp_free(&r);
	buf_free(&x);
	free(q);
	return rc;
}

/* Stop the workers (they finish the part in hand) and wait for them. */
static void stop_workers(struct s3_upload *u)
{
	pthread_mutex_lock(&u->mu);
	u->closing = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (int i = 0; i < u->n_threads; i++)
		pthread_join(u->threads[i], NULL);
	u->n_threads = 0;
}

static void abort_upload(struct s3_upload *u)
{
	struct webc_resp r = { 0 };
	struct err_msg e = { "" };
	char *q;
	struct s3_call call = { .method = "DELETE", .action = "AbortMultipartUpload" };

	if (u->upload_id == NULL)
		return;
	q = mem_printf("uploadId=%s", u->upload_id_q);
	call.query = q;
	/* NoSuchUpload: it is gone already; anything else is left for the bucket's lifecycle rule, and said */
	if (s3_send(&u->c, &u->conn, &call, &r, &e) != 0 && strstr(e.text, "NoSuchUpload") == NULL)
		log_warn("multipart upload not aborted: its parts stay in the bucket until a lifecycle rule removes them",
			 LOG_STR("event", "egress-cleanup-failed"), LOG_STR("error", e.text));
	webc_resp_free(&r);
	free(q);
	free(u->upload_id);
	u->upload_id = NULL;
}

static void upload_free(struct s3_upload *u)
{
	struct part *lists[] = { u->cur, u->queue, u->free_list };

	u->cur = NULL;
	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		for (struct part *p = lists[i], *next; p; p = next) {
			next = i == 0 ? NULL : p->next;
			free(p->data);
			free(p);
		}
	}
	for (int i = 0; i < u->n_parts; i++)
		free(u->etags[i]);
	free(u->etags);
	for (size_t i = 0; i < u->n_obj_headers; i++)
		free((char *)u->obj_headers[i]);
	free(u->obj_headers);
	free(u->threads);
	free(u->upload_id);
	free(u->upload_id_q);
	webc_close(u->conn);
	s3_conn_cfg_free(&u->c);
	pthread_cond_destroy(&u->cv);
	pthread_mutex_destroy(&u->mu);
	free(u);
}

int s3_finish(struct s3_upload *u, uint64_t *bytes, struct err_msg *em)
{
	uint64_t total = u->bytes_in;
	int rc;

	if ((rc = failed_now(u, em)) == 0) {
		if (u->upload_id == NULL) {
			rc = put_object(u, em);
		} else {
			if (u->cur && u->cur->len > 0)
				rc = submit(u, em);
			stop_workers(u);
			if (rc == 0 && (rc = failed_now(u, em)) == 0)
				rc = complete_upload(u, em);
			if (rc == 0) {
				free(u->upload_id);
				u->upload_id = NULL; /* done: nothing to abort */
			}
		}
	}
	if (rc != 0) {
		s3_abort(u);
		return rc;
	}
	if (bytes)
		*bytes = total;
	upload_free(u);
	return 0;
}

void s3_abort(struct s3_upload *u)
{
	struct err_msg e = { "" };

	if (u == NULL)
		return;
	e.text[0] = '\0';
	(void)fail(u, DP_ECANCELED, &e); /* the workers stop after the part in hand */
	stop_workers(u);
	webc_opts_cleanup(&u->c.web); /* a store that is gone, or an upload given up on, holds it for seconds */
	u->c.co.web = &u->c.web;      /* credentials renewed for it too */
	webc_close(u->conn);          /* it copied the upload's options: reopened with these */
	u->conn = NULL;
	if (u->c.attempts > 2)
		u->c.attempts = 2;
	abort_upload(u);
	upload_free(u);
}
