/*
 * wconfig.c - the webhook's configuration file (wconfig.h).
 *
 * Every key but excludedNamespaces goes through inj_opts_set, so the file
 * accepts exactly what an annotation accepts, with the injector's own
 * messages, prefixed with where the value is.
 */
#include "wconfig.h"

#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "doc.h"
#include "mem.h"

#define MAX_FILE (1 << 20)
#define MAX_EXCLUDED 1024

void wconfig_defaults(struct wconfig *c)
{
	memset(c, 0, sizeof(*c));
	inj_opts_init(&c->opts);
}

void wconfig_free(struct wconfig *c)
{
	inj_opts_free(&c->opts);
	for (size_t i = 0; i < c->n_excluded; i++)
		mem_free(c->excluded[i]);
	mem_free(c->excluded);
	memset(c, 0, sizeof(*c));
}

bool wconfig_excluded(const struct wconfig *c, const char *ns)
{
	for (size_t i = 0; ns && i < c->n_excluded; i++)
		if (strcmp(c->excluded[i], ns) == 0)
			return true;
	return false;
}

static int excluded(struct wconfig *c, const struct doc_node *v, const char *path, struct err_msg *em)
{
	if (!doc_is(v, DOC_SEQ))
		return err_set(em, DP_EINVAL, "%s:%u:%u: excludedNamespaces is a list of namespace names", path, v->line,
			       v->col);
	if (v->n > MAX_EXCLUDED)
		return err_set(em, DP_EINVAL, "%s:%u:%u: more than %d excluded namespaces", path, v->line, v->col,
			       MAX_EXCLUDED);
	for (size_t i = 0; i < v->n; i++) {
		const char *ns = doc_strval(v->vals[i]);

		if (ns == NULL || *ns == '\0')
			return err_set(em, DP_EINVAL, "%s:%u:%u: excludedNamespaces[%zu] is not a namespace name", path,
				       v->vals[i]->line, v->vals[i]->col, i);
		c->excluded = mem_realloc(c->excluded, (c->n_excluded + 1) * sizeof(char *));
		c->excluded[c->n_excluded++] = mem_strdup(ns);
	}
	return 0;
}

int wconfig_load(const char *path, struct wconfig *c, struct err_msg *em)
{
	struct doc_limits lim = { .max_bytes = MAX_FILE, .max_depth = 16, .max_nodes = 20000 };
	struct doc_stream s = { 0 };
	const struct doc_node *m;
	struct buf b;
	int rc;

	wconfig_defaults(c);
	buf_init(&b, MAX_FILE);
	rc = buf_read_path(&b, path, NULL, em);
	if (rc == 0)
		rc = doc_read(b.data ? b.data : "", b.len, path, &lim, &s, em);
	buf_free(&b);
	m = rc == 0 && s.n == 1 ? s.docs[0] : NULL;
	if (rc == 0 && s.n > 0 && !doc_is(m, DOC_MAP))
		rc = err_set(em, DP_ESYNTAX, "%s: the configuration is one map of settings", path);
	for (size_t i = 0; rc == 0 && m && i < m->n; i++) {
		const struct doc_node *k = m->keys[i], *v = m->vals[i];

		if (strcmp(k->text, "excludedNamespaces") == 0) {
			rc = excluded(c, v, path, em);
		} else if (v->type == DOC_MAP || v->type == DOC_SEQ || v->type == DOC_NULL) {
			rc = err_set(em, DP_EINVAL, "%s:%u:%u: %s takes one value", path, v->line, v->col, k->text);
		} else if ((rc = inj_opts_set(&c->opts, k->text, v->text, em)) != 0) {
			if (rc == DP_ENOTFOUND)
				rc = err_set(em, DP_EINVAL, "%s:%u:%u: unknown setting '%s' (settings: %s, excludedNamespaces)",
					     path, k->line, k->col, k->text, inj_opts_names());
			else
				err_prefix(em, "%s:%u:%u", path, v->line, v->col);
		}
	}
	doc_stream_free(&s);
	if (rc != 0)
		wconfig_free(c);
	return rc;
}
