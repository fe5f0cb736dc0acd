/*
 * s3_store.c - the S3 uploader (s3.h) as the egress process's store for a
 * provider of type S3Storage: the provider's settings, as the agent kept
 * them (name, value, where), read into a struct s3_cfg, and the upload
 * calls in egress_store's shape.
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

/* One setting: its name (dotnet-monitor's, else diagport's own) and where it goes in s3_cfg. */
enum kind { K_STR, K_BOOL, K_SIZE, K_INT };
struct key {
	const char *name;
	enum kind kind;
	size_t off;
};
#define OFF(f) offsetof(struct s3_cfg, f)
static const struct key keys[] = {
	{ "Endpoint", K_STR, OFF(endpoint) },
	{ "BucketName", K_STR, OFF(bucket) },
	{ "RegionName", K_STR, OFF(region) },
	{ "AccessKeyId", K_STR, OFF(access_key_id) },
	{ "SecretAccessKey", K_STR, OFF(secret_access_key) },
	{ "SecretAccessKeyFile", K_STR, OFF(secret_access_key_file) },
	{ "SessionToken", K_STR, OFF(session_token) },
	{ "AwsProfileName", K_STR, OFF(profile) },
	{ "AwsProfilePath", K_STR, OFF(profile_path) },
	{ "ForcePathStyle", K_BOOL, OFF(force_path_style) },
	{ "CopyBufferSize", K_SIZE, OFF(part_size) },
	{ "KeyPrefix", K_STR, OFF(key_prefix) },
	{ "StorageClass", K_STR, OFF(storage_class) },
	{ "UseKmsEncryption", K_BOOL, OFF(use_kms) },
	{ "KmsEncryptionKey", K_STR, OFF(kms_key) },
	{ "PartBuffers", K_INT, OFF(part_buffers) },
};
#define N_KEYS (sizeof(keys) / sizeof(keys[0]))

/* Where the setting named key came from ("" when it is not set). */
static const char *where_of(const struct egress_provider *p, const char *key)
{
	for (size_t i = 0; i < p->n_set; i++)
		if (strcasecmp(p->set[i].key, key) == 0)
			return p->set[i].where;
	return "";
}

/* The provider's settings into cfg (strings borrowed from p). 0, or DP_EINVAL naming the setting and where. */
static int read_cfg(const struct egress_provider *p, struct s3_cfg *cfg, struct err_msg *em)
{
	memset(cfg, 0, sizeof(*cfg));
	for (size_t i = 0; i < p->n_set; i++) {
		const struct egress_setting *s = &p->set[i];
		const struct key *k = NULL;
		void *field;

		if (strncasecmp(s->key, "Properties:", 11) == 0)
			continue; /* Egress:Properties, shared with every provider: not S3's to judge */
		for (size_t j = 0; j < N_KEYS && k == NULL; j++)
			if (strcasecmp(keys[j].name, s->key) == 0)
				k = &keys[j];
		if (k == NULL && (strcasecmp(s->key, "GeneratePreSignedUrl") == 0 ||
				  strcasecmp(s->key, "PreSignedUrlExpiry") == 0))
			return err_set(em, DP_EINVAL, "%s: egress provider '%s': %s is dotnet-monitor's, not supported by "
				       "this agent yet (the operation's resource is s3://BUCKET/KEY; remove the setting)",
				       s->where, p->name, s->key);
		if (k == NULL)
			return err_set(em, DP_EINVAL, "%s: egress provider '%s': unknown S3Storage setting '%s' (BucketName, "
				       "Endpoint, RegionName, AccessKeyId, SecretAccessKey, SecretAccessKeyFile, SessionToken, "
				       "AwsProfileName, AwsProfilePath, ForcePathStyle, CopyBufferSize, KeyPrefix, "
				       "StorageClass, UseKmsEncryption, KmsEncryptionKey, PartBuffers)", s->where, p->name,
				       s->key);
		field = (char *)cfg + k->off;
		switch (k->kind) {
		case K_STR:
			*(const char **)field = s->value;
			break;
		case K_BOOL:
			if (strcasecmp(s->value, "true") != 0 && strcasecmp(s->value, "false") != 0)
				return err_set(em, DP_EINVAL, "%s: egress provider '%s': %s takes true or false, not '%s'",
					       s->where, p->name, k->name, s->value);
			*(bool *)field = strcasecmp(s->value, "true") == 0;
			break;
		case K_SIZE: {
			uint64_t v;

			if (size_parse(s->value, &v) != 0 || v > S3_MAX_PART_SIZE)
				return err_set(em, DP_EINVAL, "%s: egress provider '%s': %s takes a size such as 8Mi, "
					       "at most 512Mi (under 5Mi is raised to 5Mi, S3's least part), not '%s'",
					       s->where, p->name, k->name, s->value);
			*(size_t *)field = (size_t)v;
			break;
		}
		case K_INT: {
			char *end;
			long v = strtol(s->value, &end, 10);

			if (*end || v < 1 || v > S3_MAX_PART_BUFFERS)
				return err_set(em, DP_EINVAL, "%s: egress provider '%s': %s takes 1 to %d, not '%s'",
					       s->where, p->name, k->name, S3_MAX_PART_BUFFERS, s->value);
			*(int *)field = (int)v;
			break;
		}
		}
	}
	/* a setting that is missing has no place of its own: the provider's first setting's says where it is */
	if (cfg->bucket == NULL)
		return err_set(em, DP_EINVAL, "egress provider '%s' (%s): S3Storage needs BucketName", p->name,
			       p->n_set ? p->set[0].where : "");
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
