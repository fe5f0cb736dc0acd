/*
 * azblob_set.c - an Azure Blob provider's settings bound and checked
 * (azblob_int.h): dotnet-monitor's Egress:AzureBlobStorage:NAME keys read
 * from the provider's node of the settings tree (every one marked read, the
 * rest refused by full path with the name it misspells), the account and
 * the credential resolved through Egress:Properties, the account URI and
 * container name checked, and, for one upload, where it goes and how it
 * signs (az_make_target).
 *
 * Apart from azblob.c (one upload's life: blocks, senders, commit, clean-up)
 * because the egress process checks every provider at start (az_check),
 * long before any upload, and the rules here are the service's and
 * dotnet-monitor's names, not the upload's.
 */
#include "azblob_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "azblob.h"
#include "base64.h"
#include "buf.h"
#include "mem.h"

#define MAX_KEY_BYTES 512
#define RETRY_BASE_MS 200

static const char *const csharp_keywords[] = {
	"abstract", "as", "base", "bool", "break", "byte", "case", "catch", "char", "checked", "class", "const",
	"continue", "decimal", "default", "delegate", "do", "double", "else", "enum", "event", "explicit",
	"extern", "false", "finally", "fixed", "float", "for", "foreach", "goto", "if", "implicit", "in", "int",
	"interface", "internal", "is", "lock", "long", "namespace", "new", "null", "object", "operator", "out",
	"override", "params", "private", "protected", "public", "readonly", "ref", "return", "sbyte", "sealed",
	"short", "sizeof", "stackalloc", "static", "string", "struct", "switch", "this", "throw", "true", "try",
	"typeof", "uint", "ulong", "unchecked", "unsafe", "ushort", "using", "virtual", "void", "volatile", "while",
};

/* Azure metadata names: C# identifiers (ASCII here), not keywords. */
static bool meta_name_ok(const char *s)
{
	if (!(isalpha((unsigned char)*s) || *s == '_'))
		return false;
	for (const char *p = s; *p; p++)
		if (!(isalnum((unsigned char)*p) || *p == '_'))
			return false;
	for (size_t i = 0; i < sizeof(csharp_keywords) / sizeof(csharp_keywords[0]); i++)
		if (strcmp(s, csharp_keywords[i]) == 0)
			return false;
	return strlen(s) <= 256;
}

/* A leaf the provider sets (marked read), or NULL; a section where a value belongs is refused. */
static int leaf(const struct egress_provider *p, const char *key, const struct settings_node **out, struct err_msg *em)
{
	const struct settings_node *n = settings_get(p->set, key);

	*out = NULL;
	if (n && (n->n || n->value == NULL))
		return settings_refuse(DP_EINVAL, n, em, "takes a value, not settings under it");
	*out = n;
	return 0;
}

/*
 * *out: the setting key itself, else the Egress:Properties value its ...Name setting names (read there, so
 * the agent does not refuse it). A name that is not there is refused, with the property it most likely
 * misspells.
 */
static int resolve(const struct egress_provider *p, const char *key, const struct settings_node **out, char *label,
		   size_t cap, struct err_msg *em)
{
	char name[64];
	const struct settings_node *n, *near;
	struct settings_node *props = egress_properties(p);
	int rc;

	snprintf(label, cap, "%s", key);
	snprintf(name, sizeof(name), "%sName", key);
	if ((rc = leaf(p, key, out, em)) != 0 || *out || (rc = leaf(p, name, &n, em)) != 0 || n == NULL)
		return rc;
	snprintf(label, cap, "Egress:Properties:%s", n->value);
	if ((*out = settings_get(props, n->value)) != NULL && (*out)->value && (*out)->n == 0)
		return 0;
	if (*out)
		return settings_refuse(DP_EINVAL, *out, em, "takes a value, not settings under it");
	if ((near = settings_nearest_child(props, n->value)) != NULL) {
		char path[320];

		settings_path(near, path, sizeof(path));
		return err_set(em, DP_EINVAL, "%s (%s): unknown setting; did you mean %s? (egress provider '%s': %s (%s) "
			       "names Egress:Properties:%s)", path, near->where, n->value, p->name, name, n->where, n->value);
	}
	return err_set(em, DP_EINVAL, "egress provider '%s': %s (%s) names Egress:Properties:%s, which is not set",
		       p->name, name, n->where, n->value);
}

int az_read_settings(const struct egress_provider *p, struct az_set *s, struct err_msg *em)
{
	static const char *const refused[] = { "QueueName", "QueueAccountUri", "QueueSharedAccessSignature",
					       "QueueSharedAccessSignatureName" };
	struct settings_node *md;
	int rc;

	memset(s, 0, sizeof(*s));
	s->prov = p->name;
	s->first_where = p->set && p->set->n ? p->set->k[0]->where : "no settings";
	for (size_t k = 0; k < sizeof(refused) / sizeof(refused[0]); k++) {
		const struct settings_node *q = settings_find(p->set, refused[k]);

		if (q)
			return err_set(em, DP_EINVAL, "egress provider '%s': %s (%s): this agent sends no queue "
				       "message; remove the Queue settings", p->name, q->name, q->where);
	}
	if ((md = settings_get(p->set, "Metadata")) != NULL) {
		if (md->n == 0)
			return settings_refuse(DP_EINVAL, md, em, "takes Metadata:NAME settings under it, not one value");
		for (size_t i = 0; i < md->n; i++) {
			const struct settings_node *e = md->k[i];

			if (!meta_name_ok(e->name))
				return err_set(em, DP_EINVAL, "egress provider '%s': Metadata:%s (%s): '%s' cannot be an "
					       "Azure metadata name (a C# identifier that is not a keyword)", p->name, e->name,
					       e->where, e->name);
			if (e->n || e->value == NULL)
				return settings_refuse(DP_EINVAL, e, em, "takes a value, not settings under it");
			if (s->n_meta == AZBLOB_MAX_META)
				return err_set(em, DP_ETOOBIG, "egress provider '%s': more than %d Metadata settings",
					       p->name, AZBLOB_MAX_META);
			md->k[i]->used = true;
			s->meta[s->n_meta++] = e;
		}
	}
	settings_get(p->set, "CopyBufferSize"); /* dotnet-monitor's tuning knob: not needed here */
	if ((rc = leaf(p, "AccountUri", &s->uri, em)) != 0 || (rc = leaf(p, "ContainerName", &s->container, em)) != 0 ||
	    (rc = leaf(p, "BlobPrefix", &s->prefix, em)) != 0 || (rc = leaf(p, "ManagedIdentityClientId", &s->mi, em)) != 0 ||
	    (rc = resolve(p, "SharedAccessSignature", &s->sas, s->sas_name, sizeof(s->sas_name), em)) != 0 ||
	    (rc = resolve(p, "AccountKey", &s->key, s->key_name, sizeof(s->key_name), em)) != 0)
		return rc;
	/* what is left is no setting of this store: refused by its path and source, with the name it misspells */
	return settings_check_unread(p->set, em);
}

void az_uri_free(struct az_uri *u)
{
	free(u->base);
	free(u->path);
	free(u->account);
}

static int parse_uri(const struct az_set *s, struct az_uri *u, struct err_msg *em)
{
	const char *v = s->uri->value, *h, *e;
	size_t n;

	memset(u, 0, sizeof(*u));
	if (strncasecmp(v, "https://", 8) == 0)
		u->https = true;
	else if (strncasecmp(v, "http://", 7) != 0)
		return err_set(em, DP_EINVAL, "egress provider '%s': AccountUri (%s) is not an http or https URL",
			       s->prov, s->uri->where);
	h = strstr(v, "://") + 3;
	e = h + strcspn(h, "/?#");
	if (e == h || strpbrk(v, "?# \t\r\n@"))
		return err_set(em, DP_EINVAL, "egress provider '%s': AccountUri (%s) must be scheme://host[:port][/account] "
			       "with no query (a shared access signature goes in SharedAccessSignature)", s->prov,
			       s->uri->where);
	u->base = mem_strndup(v, (size_t)(e - v));
	n = strlen(e);
	while (n > 0 && e[n - 1] == '/')
		n--;
	u->path = mem_strndup(e, n);
	if (u->path[0] == '/') /* an emulator's path-style URI: the first segment is the account */
		u->account = mem_strndup(u->path + 1, strcspn(u->path + 1, "/"));
	else if (!isdigit((unsigned char)*h) && *h != '[' && strcspn(h, ".") < (size_t)(e - h))
		u->account = mem_strndup(h, strcspn(h, "."));
	return 0;
}

/* Container names: $root, or 3-63 of a-z 0-9 '-', starting with a letter or digit, no "--", not ending in '-'. */
static bool container_ok(const char *c)
{
	size_t n = strlen(c);

	if (strcmp(c, "$root") == 0)
		return true;
	if (n < 3 || n > 63 || c[0] == '-' || c[n - 1] == '-' || strstr(c, "--"))
		return false;
	return strspn(c, "abcdefghijklmnopqrstuvwxyz0123456789-") == n;
}

int az_check_settings(const struct az_set *s, struct az_uri *u, struct err_msg *em)
{
	int rc;

	if (s->uri == NULL || s->container == NULL)
		return err_set(em, DP_EINVAL, "egress provider '%s' (%s): %s is not set", s->prov, s->first_where,
			       s->uri ? "ContainerName" : "AccountUri");
	if ((rc = parse_uri(s, u, em)) != 0)
		return rc;
	if (!container_ok(s->container->value))
		return err_set(em, DP_EINVAL, "egress provider '%s': ContainerName (%s) '%s' is not a container name "
			       "(3-63 lowercase letters, digits and single hyphens, or $root)", s->prov,
			       s->container->where, s->container->value);
	if (s->sas) {
		if (strpbrk(s->sas->value, "# \t\r\n") || strstr(s->sas->value, "sig=") == NULL)
			return err_set(em, DP_EINVAL, "egress provider '%s': %s (%s) is not a shared access signature "
				       "(a query with sig=)", s->prov, s->sas_name, s->sas->where);
	} else if (s->key) {
		char *raw = NULL;
		size_t n = 0;

		if (b64_decode(s->key->value, strlen(s->key->value), MAX_KEY_BYTES, &raw, &n) != 0 || n == 0)
			return err_set(em, DP_EINVAL, "egress provider '%s': %s (%s) is not base64", s->prov, s->key_name,
				       s->key->where);
		mem_wipe(raw, n);
		free(raw);
		if (u->account == NULL)
			return err_set(em, DP_EINVAL, "egress provider '%s': AccountUri (%s) names no account (the host's "
				       "first label, or the first path segment for an emulator) to sign with %s",
				       s->prov, s->uri->where, s->key_name);
	} else if (!u->https) {
		return err_set(em, DP_EINVAL, "egress provider '%s': AccountUri (%s) is http, and without "
			       "SharedAccessSignature or AccountKey the credential is a bearer token, which is sent "
			       "over https only", s->prov, s->uri->where);
	}
	if (s->prefix && strpbrk(s->prefix->value, "\r\n"))
		return err_set(em, DP_EINVAL, "egress provider '%s': BlobPrefix (%s) holds a line break", s->prov,
			       s->prefix->where);
	return 0;
}

int az_check(const struct egress_provider *p, struct err_msg *em)
{
	struct az_set s;
	struct az_uri u = { 0 };
	int rc = az_read_settings(p, &s, em);

	if (rc == 0)
		rc = az_check_settings(&s, &u, em);
	az_uri_free(&u);
	return rc;
}

int az_make_target(const struct az_set *s, const struct az_uri *uri, const char *name, struct az_target *t,
		   struct err_msg *em)
{
	struct buf b;
	size_t plen = 0;
	const char *pre = s->prefix ? s->prefix->value : "";

	if (s->container == NULL || uri->path == NULL) /* check_settings saw to both */
		return DP_EINTERNAL;
	while (*pre == '/')
		pre++;
	plen = strlen(pre);
	while (plen > 0 && pre[plen - 1] == '/')
		plen--;
	buf_init(&b, 0);
	buf_printf(&b, "%s/%s/", uri->path, s->container->value);
	if (plen) {
		buf_pct_encode(&b, pre, plen, true);
		buf_putc(&b, '/');
	}
	buf_pct_encode(&b, name, strlen(name), true);
	t->path = buf_steal(&b, NULL);
	t->base = mem_strdup(uri->base);
	t->account = mem_strdup(uri->account ? uri->account : "");
	t->desc = mem_printf("%s%s", t->base, t->path);
	t->attempts = AZBLOB_ATTEMPTS;
	t->retry_base_ms = RETRY_BASE_MS;
	if (s->sas) {
		t->auth = AZ_SAS;
		t->sas = mem_strdup(s->sas->value + (s->sas->value[0] == '?'));
	} else if (s->key) {
		char *raw;

		t->auth = AZ_KEY;
		if (b64_decode(s->key->value, strlen(s->key->value), MAX_KEY_BYTES, &raw, &t->key_len) != 0)
			return err_set(em, DP_EINVAL, "egress provider '%s': %s is not base64", s->prov, s->key_name);
		t->key = (unsigned char *)raw;
	} else {
		t->auth = AZ_BEARER;
		t->tok = az_tok_new(s->mi ? s->mi->value : NULL, &t->web);
	}
	return 0;
}
