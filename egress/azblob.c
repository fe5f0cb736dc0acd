/*
 * azblob.c - the Azure Blob Storage store client (azblob.h): one upload's
 * life: blocks filled by the egress process's reader, sent by sender
 * threads, committed with Put Block List (or one Put Blob for a small
 * artifact), or cleaned away on failure; and the metadata it carries. The
 * provider's settings are bound and checked in azblob_set.c, requests and
 * their signatures are azblob_req.c's, bearer tokens azblob_cred.c's.
 */
#include "azblob.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "azblob_int.h"
#include "base64.h"
#include "buf.h"
#include "log.h"
#include "mem.h"

#define BLOCK_ID_RAW 24 /* "dp-" + 12 hex of the upload's nonce + "-" + 8 digits: 32 base64 characters */

/* ---- metadata ---- */

void azblob_meta_name(const char *name, char *out, size_t n)
{
	static const char *const table[][2] = {
		{ "artifacttype", "ArtifactType" }, { "pid", "ProcessId" },     { "processname", "ProcessName" },
		{ "created", "Created" },           { "hostname", "HostName" }, { "namespace", "Namespace" },
		{ "container", "Container" },       { "pod", "Pod" },           { "uid", "RuntimeInstanceCookie" },
		{ "runtimeinstancecookie", "RuntimeInstanceCookie" },
	};
	size_t k;

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		if (strcasecmp(name, table[i][0]) == 0) {
			snprintf(out, n, "DotnetMonitor_%s", table[i][1]);
			return;
		}
	k = (size_t)snprintf(out, n, "DotnetMonitor_");
	for (const char *p = name; *p && k + 1 < n; p++, k++)
		out[k] = isalnum((unsigned char)*p) ? *p : '_';
	if (k > 14 && k < n && islower((unsigned char)out[14]))
		out[14] = (char)toupper((unsigned char)out[14]);
	if (k < n)
		out[k] = '\0';
}

/* "x-ms-meta-NAME: VALUE" with the value's bytes outside printable ASCII percent-encoded. */
static char *meta_header(const char *name, const char *value)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "x-ms-meta-%s: ", name);
	for (const unsigned char *p = (const unsigned char *)value; *p; p++)
		if (*p < 0x20 || *p > 0x7e || *p == '%')
			buf_printf(&b, "%%%02X", *p);
		else
			buf_putc(&b, (char)*p);
	return buf_steal(&b, NULL);
}

/* ---- the upload ---- */

enum blk_state { BLK_FREE, BLK_FILLING, BLK_READY, BLK_SENDING };

struct blk {
	char *data; /* AZBLOB_BLOCK bytes, allocated when first used */
	size_t len;
	unsigned idx;
	enum blk_state state;
};

struct az_up {
	struct az_target t;
	struct webc_conn *conn; /* the caller's thread: Put Blob, the blob's state, Put Block List, cleaning */
	char **meta;            /* x-ms-meta-* headers, NULL-terminated */
	char nonce[13];
	struct blk blks[AZBLOB_BUFFERS];
	struct blk *fill;
	unsigned n_blocks;      /* blocks handed to the senders */
	bool existed;           /* the blob was there before our first block */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	pthread_t senders[AZBLOB_BUFFERS - 1];
	bool threads, stop;     /* the senders are running; told to stop */
	bool multi;             /* blocks were (or may have been) put: the blob needs cleaning on failure */
	int err;                /* the first sender failure */
	struct err_msg err_em;
	uint64_t sent;
	int cancel_fd;          /* the egress process's: readable once the upload is given up on (t.web has it) */
};

static void block_id(const struct az_up *u, unsigned idx, char out[B64_LEN(BLOCK_ID_RAW) + 1])
{
	char raw[BLOCK_ID_RAW + 16];

	snprintf(raw, sizeof(raw), "dp-%.12s-%08u", u->nonce, idx % 100000000u); /* idx < AZBLOB_MAX_BLOCKS */
	out[b64_encode_to(raw, BLOCK_ID_RAW, out)] = '\0';
}

static void *sender_main(void *arg)
{
	struct az_up *u = arg;
	struct webc_conn *conn = NULL;

	pthread_mutex_lock(&u->mu);
	for (;;) {
		struct blk *b = NULL;

		while (!u->stop && u->err == 0) {
			for (size_t i = 0; i < AZBLOB_BUFFERS && b == NULL; i++)
				if (u->blks[i].state == BLK_READY)
					b = &u->blks[i];
			if (b)
				break;
			pthread_cond_wait(&u->cv, &u->mu);
		}
		if (b == NULL)
			break;
		b->state = BLK_SENDING;
		pthread_mutex_unlock(&u->mu);
		{
			char id[B64_LEN(BLOCK_ID_RAW) + 1], what[32];
			const char *q[] = { "comp", "block", "blockid", id, NULL };
			struct az_call call = { .method = "PUT", .what = what, .query = q, .body = b->data, .len = b->len };
			struct webc_resp r = { 0 };
			struct err_msg em = { "" };
			int rc;

			block_id(u, b->idx, id);
			snprintf(what, sizeof(what), "Put Block %u", b->idx);
			rc = az_send(&u->t, &conn, &call, &r, &em);
			webc_resp_free(&r);
			pthread_mutex_lock(&u->mu);
			if (rc != 0 && u->err == 0) {
				u->err = rc;
				u->err_em = em;
			}
			if (rc == 0)
				u->sent += b->len;
			b->state = BLK_FREE;
			b->len = 0;
			pthread_cond_broadcast(&u->cv);
		}
	}
	pthread_mutex_unlock(&u->mu);
	webc_close(conn);
	return NULL;
}

/* Stop the senders (after what they are sending) and wait for them. */
static void senders_join(struct az_up *u)
{
	if (!u->threads)
		return;
	pthread_mutex_lock(&u->mu);
	u->stop = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	for (size_t i = 0; i < AZBLOB_BUFFERS - 1; i++)
		pthread_join(u->senders[i], NULL);
	u->threads = false;
}

static void up_free(struct az_up *u)
{
	senders_join(u);
	webc_close(u->conn);
	for (size_t i = 0; u->meta && u->meta[i]; i++)
		free(u->meta[i]);
	free(u->meta);
	for (size_t i = 0; i < AZBLOB_BUFFERS; i++)
		free(u->blks[i].data);
	az_target_free(&u->t);
	pthread_mutex_destroy(&u->mu);
	pthread_cond_destroy(&u->cv);
	free(u);
}

static void make_meta(struct az_up *u, const struct az_set *s, const char *const *meta)
{
	size_t n = 0, cap = s->n_meta + 1;
	char mname[96];

	for (size_t i = 0; meta && meta[i] && meta[i + 1]; i += 2)
		cap++;
	u->meta = mem_array(cap, sizeof(char *));
	for (size_t i = 0; meta && meta[i] && meta[i + 1] && n < AZBLOB_MAX_META; i += 2) {
		azblob_meta_name(meta[i], mname, sizeof(mname));
		u->meta[n++] = meta_header(mname, meta[i + 1]);
	}
	for (size_t i = 0; i < s->n_meta; i++) { /* Metadata:KEY = the variable whose value it takes */
		const char *v = getenv(s->meta[i]->value);

		if (v)
			u->meta[n++] = meta_header(s->meta[i]->name, v);
	}
	u->meta[n] = NULL;
}

static int az_begin(const struct egress_provider *p, const char *name, const char *const *meta, int cancel_fd,
		    void **out, struct err_msg *em)
{
	struct az_set s;
	struct az_uri uri = { 0 };
	struct az_up *u;
	uint8_t rnd[6];
	int rc;

	if ((rc = az_read_settings(p, &s, em)) != 0)
		return rc;
	if ((rc = az_check_settings(&s, &uri, em)) != 0) {
		az_uri_free(&uri);
		return rc;
	}
	u = mem_zalloc(sizeof(*u));
	pthread_mutex_init(&u->mu, NULL);
	pthread_cond_init(&u->cv, NULL);
	rc = az_make_target(&s, &uri, name, &u->t, em);
	az_uri_free(&uri);
	if (rc != 0) {
		up_free(u);
		return rc;
	}
	u->cancel_fd = cancel_fd;
	if (cancel_fd >= 0)
		u->t.web.cancel_fd = &u->cancel_fd;
	make_meta(u, &s, meta);
	if (getrandom(rnd, sizeof(rnd), 0) != (ssize_t)sizeof(rnd)) {
		uint64_t x = (uint64_t)time(NULL) ^ ((uint64_t)(uintptr_t)u << 16);

		memcpy(rnd, &x, sizeof(rnd));
	}
	for (size_t i = 0; i < sizeof(rnd); i++)
		snprintf(u->nonce + 2 * i, 3, "%02x", rnd[i]);
	*out = u;
	return 0;
}

/* Whether the blob exists now (before our first block: then an abort must not delete it). */
static int blob_exists(struct az_up *u, bool *exists, struct err_msg *em)
{
	struct az_call call = { .method = "HEAD", .what = "Get Blob Properties" };
	struct webc_resp r = { 0 };
	int rc = az_send(&u->t, &u->conn, &call, &r, em);

	webc_resp_free(&r);
	if (rc == DP_ENOTFOUND && strstr(em->text, "BlobNotFound")) {
		*exists = false;
		return 0;
	}
	if (rc == 0)
		*exists = true;
	return rc;
}

/* Hand the filled block to the senders (started with the first) and take a free one; waits while none is. */
static int hand_over(struct az_up *u, struct err_msg *em)
{
	int rc = 0;

	if (!u->multi) {
		if ((rc = blob_exists(u, &u->existed, em)) != 0)
			return rc;
		for (size_t i = 0; i < AZBLOB_BUFFERS - 1; i++)
			if (pthread_create(&u->senders[i], NULL, sender_main, u) != 0)
				DP_FATAL("cannot start an Azure Blob sender thread");
		u->multi = u->threads = true;
	}
	if (u->n_blocks == AZBLOB_MAX_BLOCKS)
		return err_set(em, DP_ETOOBIG, "Azure Blob %s: the artifact passes %d blocks of %zu bytes", u->t.desc,
			       AZBLOB_MAX_BLOCKS, AZBLOB_BLOCK);
	pthread_mutex_lock(&u->mu);
	if (u->fill) {
		u->fill->idx = u->n_blocks++;
		u->fill->state = BLK_READY;
		u->fill = NULL;
		pthread_cond_broadcast(&u->cv);
	}
	while (u->err == 0 && u->fill == NULL) {
		for (size_t i = 0; i < AZBLOB_BUFFERS && u->fill == NULL; i++)
			if (u->blks[i].state == BLK_FREE)
				u->fill = &u->blks[i];
		if (u->fill == NULL)
			pthread_cond_wait(&u->cv, &u->mu);
	}
	if (u->err) {
		rc = u->err;
		*em = u->err_em;
	} else {
		u->fill->state = BLK_FILLING;
		u->fill->len = 0;
	}
	pthread_mutex_unlock(&u->mu);
	return rc;
}

static int az_write(void *h, const void *data, size_t len, struct err_msg *em)
{
	struct az_up *u = h;
	const char *p = data;
	int rc;

	while (len > 0) {
		size_t n;

		if (u->fill == NULL) {
			u->fill = &u->blks[0];
			u->fill->state = BLK_FILLING;
		}
		if (u->fill->len == AZBLOB_BLOCK && (rc = hand_over(u, em)) != 0)
			return rc;
		if (u->fill->data == NULL)
			u->fill->data = mem_alloc(AZBLOB_BLOCK);
		n = AZBLOB_BLOCK - u->fill->len;
		n = n < len ? n : len;
		memcpy(u->fill->data + u->fill->len, p, n);
		u->fill->len += n;
		p += n;
		len -= n;
	}
	return 0;
}

static int put_block_list(struct az_up *u, bool empty, struct err_msg *em)
{
	static const char *const q[] = { "comp", "blocklist", NULL };
	struct buf b;
	struct webc_resp r = { 0 };
	const char *hdrs[AZBLOB_MAX_META + 3];
	size_t n = 0;
	int rc;

	buf_init(&b, 0);
	buf_puts(&b, "<?xml version=\"1.0\" encoding=\"utf-8\"?><BlockList>");
	for (unsigned i = 0; !empty && i < u->n_blocks; i++) {
		char id[B64_LEN(BLOCK_ID_RAW) + 1];

		block_id(u, i, id);
		buf_printf(&b, "<Latest>%s</Latest>", id);
	}
	buf_puts(&b, "</BlockList>");
	hdrs[n++] = "Content-Type: application/xml; charset=utf-8";
	hdrs[n++] = "x-ms-blob-content-type: application/octet-stream";
	for (size_t i = 0; !empty && u->meta[i]; i++)
		hdrs[n++] = u->meta[i];
	hdrs[n] = NULL;
	{
		struct az_call call = { .method = "PUT", .what = empty ? "Put Block List (empty, to discard)" : "Put Block List",
					.query = q, .headers = hdrs, .body = b.data, .len = b.len };

		rc = az_send(&u->t, &u->conn, &call, &r, em);
	}
	webc_resp_free(&r);
	buf_free(&b);
	return rc;
}

#define CLEAN_ROUNDS 3
#define CLEAN_LOOK_MS 300 /* after a clean-up, before looking for a block staged late */

/* Leave no uncommitted block: commit none, then delete the blob, when it was not there before. */
static void clean(struct az_up *u)
{
	struct err_msg em = { "" };
	struct webc_resp r = { 0 };
	struct az_call del = { .method = "DELETE", .what = "Delete Blob" };

	senders_join(u);
	if (!u->multi)
		return; /* nothing was put, or one Put Blob that failed whole */
	webc_opts_cleanup(&u->t.web); /* a store that is gone, or an upload given up on, holds it for seconds */
	webc_close(u->conn);          /* it copied the upload's options: reopened with these */
	u->conn = NULL;
	if (u->t.attempts > 2)
		u->t.attempts = 2;
	if (u->existed)
		return; /* committing would replace it: the service discards the blocks itself */
	/*
	 * A Put Block whose body had all arrived when the upload was given up on is still staged by the
	 * service, possibly after our delete: so look again, a few times, and clean what came since.
	 */
	for (int round = 0; round < CLEAN_ROUNDS; round++) {
		static const char *const q[] = { "comp", "blocklist", "blocklisttype", "all", NULL };
		struct az_call look = { .method = "GET", .what = "Get Block List (after the clean-up)", .query = q };
		int rc;

		if (put_block_list(u, true, &em) != 0 || az_send(&u->t, &u->conn, &del, &r, &em) != 0) {
			log_warn("the failed upload was not cleaned up: uncommitted blocks (discarded by the service after 7 "
				 "days) or an empty blob may remain", LOG_STR("event", "egress-cleanup-failed"),
				 LOG_STR("error", em.text));
			break;
		}
		webc_resp_free(&r);
		webc_pause(&u->t.web, CLEAN_LOOK_MS);
		rc = az_send(&u->t, &u->conn, &look, &r, &em);
		webc_resp_free(&r);
		if (rc != 0) /* BlobNotFound: nothing staged, nothing committed: clean */
			break;
	}
	webc_resp_free(&r);
}

static int az_finish(void *h, char **location, struct err_msg *em)
{
	struct az_up *u = h;
	int rc = 0;

	if (!u->multi) { /* at most one block: one Put Blob */
		const char *hdrs[AZBLOB_MAX_META + 3];
		size_t n = 0;
		struct webc_resp r = { 0 };
		struct az_call call = { .method = "PUT", .what = "Put Blob", .headers = hdrs,
					.body = u->fill ? u->fill->data : NULL, .len = u->fill ? u->fill->len : 0 };

		hdrs[n++] = "x-ms-blob-type: BlockBlob";
		hdrs[n++] = "Content-Type: application/octet-stream";
		for (size_t i = 0; u->meta[i]; i++)
			hdrs[n++] = u->meta[i];
		hdrs[n] = NULL;
		if (call.body == NULL)
			call.body = "";
		rc = az_send(&u->t, &u->conn, &call, &r, em);
		webc_resp_free(&r);
		if (rc == 0)
			u->sent = call.len;
	} else {
		if (u->fill && u->fill->len > 0)
			rc = hand_over(u, em);
		if (rc == 0) { /* wait until every block is sent */
			pthread_mutex_lock(&u->mu);
			for (;;) {
				bool busy = false;

				for (size_t i = 0; i < AZBLOB_BUFFERS; i++)
					busy |= u->blks[i].state == BLK_READY || u->blks[i].state == BLK_SENDING;
				if (!busy || u->err)
					break;
				pthread_cond_wait(&u->cv, &u->mu);
			}
			if (u->err) {
				rc = u->err;
				*em = u->err_em;
			}
			pthread_mutex_unlock(&u->mu);
		}
		senders_join(u);
		if (rc == 0)
			rc = put_block_list(u, false, em);
	}
	if (rc == 0)
		*location = mem_strdup(u->t.desc);
	else
		clean(u);
	up_free(u);
	return rc;
}

static void az_abort(void *h)
{
	struct az_up *u = h;

	clean(u);
	up_free(u);
}

static uint64_t az_sent(void *h)
{
	struct az_up *u = h;
	uint64_t n;

	pthread_mutex_lock(&u->mu);
	n = u->sent;
	pthread_mutex_unlock(&u->mu);
	return n;
}

const struct egress_store azblob_store = { "AzureBlobStorage", az_check, az_begin, az_write, az_finish, az_abort,
					  az_sent };
