/*
 * s3_store.c - the S3 uploader (s3.h) as the egress process's store for a
 * provider of type S3Storage: the provider's node of the agent's settings
 * tree read into a struct s3_cfg through the settings binder's getters
 * (common/settings.h), and the upload calls in egress_store's shape.
 */
#include "s3_store.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"
#include "s3.h"
#include "size.h"
#include "cloud/webc.h"

/* Where the setting named key came from ("" when it is not set). */
static const char *where_of(const struct egress_provider *p, const char *key)
{
	const struct settings_node *n = settings_find(p->set, key);

	return n && n->where ? n->where : "";
}

/* A text setting of the provider (borrowed), left as it is when absent. */
static int text(const struct egress_provider *p, const char *key, const char **out, struct err_msg *em)
{
	const char *t;
	int rc = settings_text(p->set, key, false, &t, em);

	if (rc == 0 && t)
		*out = t;
	return rc;
}

/*
 * The provider's settings into cfg (strings borrowed from p's settings node), each read through the
 * settings binder: one that no reader here takes is refused by its full path and source, with the name it
 * most likely misspells. 0, or DP_EINVAL naming the setting and where.
 */
static int read_cfg(const struct egress_provider *p, struct s3_cfg *cfg, struct err_msg *em)
{
	static const char *const unsupported[] = { "GeneratePreSignedUrl", "PreSignedUrlExpiry" };
	const char *part = NULL;
	bool has = false;
	unsigned buffers = 0;
	int rc;

	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < sizeof(unsupported) / sizeof(unsupported[0]); i++) {
		const struct settings_node *n = settings_find(p->set, unsupported[i]);

		if (n)
			return err_set(em, DP_EINVAL, "%s: egress provider '%s': %s is dotnet-monitor's, not supported by "
				       "this agent yet (the operation's resource is s3://BUCKET/KEY; remove the setting)",
				       n->where, p->name, n->name);
	}
	if ((rc = text(p, "Endpoint", &cfg->endpoint, em)) || (rc = text(p, "BucketName", &cfg->bucket, em)) ||
	    (rc = text(p, "RegionName", &cfg->region, em)) || (rc = text(p, "AccessKeyId", &cfg->access_key_id, em)) ||
	    (rc = text(p, "SecretAccessKey", &cfg->secret_access_key, em)) ||
	    (rc = text(p, "SecretAccessKeyFile", &cfg->secret_access_key_file, em)) ||
	    (rc = text(p, "SessionToken", &cfg->session_token, em)) || (rc = text(p, "AwsProfileName", &cfg->profile, em)) ||
	    (rc = text(p, "AwsProfilePath", &cfg->profile_path, em)) || (rc = text(p, "KeyPrefix", &cfg->key_prefix, em)) ||
	    (rc = text(p, "StorageClass", &cfg->storage_class, em)) || (rc = text(p, "KmsEncryptionKey", &cfg->kms_key, em)) ||
	    (rc = settings_bool(p->set, "ForcePathStyle", &cfg->force_path_style, em)) ||
	    (rc = settings_bool(p->set, "UseKmsEncryption", &cfg->use_kms, em)) ||
	    (rc = settings_uint(p->set, "PartBuffers", &has, &buffers, 1, S3_MAX_PART_BUFFERS, em)) ||
	    (rc = text(p, "CopyBufferSize", &part, em)))
		return rc;
	cfg->part_buffers = (int)buffers;
	if (part) {
		uint64_t v;

		if (size_parse(part, &v) != 0 || v > S3_MAX_PART_SIZE)
			return err_set(em, DP_EINVAL, "%s: egress provider '%s': CopyBufferSize takes a size such as 8Mi, "
				       "at most 512Mi (under 5Mi is raised to 5Mi, S3's least part), not '%s'",
				       where_of(p, "CopyBufferSize"), p->name, part);
		cfg->part_size = (size_t)v;
	}
	if ((rc = settings_check_unread(p->set, em)) != 0)
		return rc;
	/* a setting that is missing has no place of its own: the provider's first setting's says where it is */
	if (cfg->bucket == NULL)
		return err_set(em, DP_EINVAL, "egress provider '%s' (%s): S3Storage needs BucketName", p->name,
			       p->set && p->set->n ? p->set->k[0]->where : "");
	if ((cfg->access_key_id == NULL) != (cfg->secret_access_key == NULL && cfg->secret_access_key_file == NULL))
		return err_set(em, DP_EINVAL, "egress provider '%s' (%s): AccessKeyId and SecretAccessKey (or "
			       "SecretAccessKeyFile) go together; give both, or neither for the platform's credentials",
			       p->name, where_of(p, cfg->access_key_id ? "AccessKeyId" : "SecretAccessKey"));
	return 0;
}

static int s3s_check(const struct egress_provider *p, struct err_msg *em)
{
	static const char *const named[] = { "Endpoint", "BucketName", "KeyPrefix" };
	struct s3_cfg cfg;
	char *url = NULL;
	int rc = read_cfg(p, &cfg, em);

	/* the object's URL can be made (an Endpoint that is a URL, a bucket name the style allows); the
	 * message names the setting at fault and where it came from */
	if (rc == 0 && (rc = s3_object_url(&cfg, cfg.region ? cfg.region : "us-east-1", "x", &url, em)) != 0) {
		const char *where = "";

		if (strncmp(em->text, "S3 egress: ", 11) == 0)
			memmove(em->text, em->text + 11, strlen(em->text + 11) + 1);
		for (size_t i = 0; i < sizeof(named) / sizeof(named[0]) && !*where; i++)
			if (strncmp(em->text, named[i], strlen(named[i])) == 0)
				where = where_of(p, named[i]);
		err_prefix(em, "%s%segress provider '%s'", where, *where ? ": " : "", p->name);
		rc = DP_EINVAL;
	}
	mem_free(url);
	return rc;
}

struct s3s_up {
	struct s3_cfg cfg;
	struct webc_opts web; /* the upload's: its cancel fd */
	int cancel_fd;
	char *name;
	struct s3_upload *u;
	uint64_t sent; /* under the upload's lock (the progress callback) */
};

static void progress(void *ctx, uint64_t bytes)
{
	((struct s3s_up *)ctx)->sent = bytes;
}

static int s3s_begin(const struct egress_provider *p, const char *name, const char *const *meta, int cancel_fd,
		     void **out, struct err_msg *em)
{
	struct s3s_up *h = mem_zalloc(sizeof(*h));
	struct s3_meta m[S3_MAX_META];
	size_t n = 0;
	int rc;

	if ((rc = read_cfg(p, &h->cfg, em)) != 0) {
		free(h);
		return rc;
	}
	h->cancel_fd = cancel_fd;
	if (cancel_fd >= 0) {
		h->web.cancel_fd = &h->cancel_fd;
		h->cfg.web = &h->web;
	}
	for (size_t i = 0; meta && meta[i] && meta[i + 1] && n < S3_MAX_META; i += 2)
		m[n++] = (struct s3_meta){ meta[i], meta[i + 1] };
	if ((rc = s3_begin(&h->cfg, name, m, n, NULL, progress, h, &h->u, em)) != 0) {
		free(h);
		return rc;
	}
	h->name = mem_strdup(name);
	*out = h;
	return 0;
}

static int s3s_write(void *up, const void *data, size_t len, struct err_msg *em)
{
	return s3_write(((struct s3s_up *)up)->u, data, len, em);
}

static int s3s_finish(void *up, char **location, struct err_msg *em)
{
	struct s3s_up *h = up;
	int rc = s3_finish(h->u, NULL, em);

	/* the location: s3://BUCKET/KEY, as the AWS CLI names an object */
	if (rc == 0)
		*location = mem_printf("s3://%s/%s%s%s", h->cfg.bucket, h->cfg.key_prefix ? h->cfg.key_prefix : "",
				       h->cfg.key_prefix ? "/" : "", h->name);
	free(h->name);
	free(h);
	return rc;
}

static void s3s_abort(void *up)
{
	struct s3s_up *h = up;

	s3_abort(h->u);
	free(h->name);
	free(h);
}

static uint64_t s3s_sent(void *up)
{
	return __atomic_load_n(&((struct s3s_up *)up)->sent, __ATOMIC_RELAXED);
}

const struct egress_store s3_store = { "S3Storage", s3s_check, s3s_begin, s3s_write, s3s_finish, s3s_abort, s3s_sent };
