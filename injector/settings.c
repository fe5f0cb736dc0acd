/*
 * settings.c - the platform's settings file (inj.h, struct inj_settings):
 * what the webhook reads as its --config and `diagport inject --policy`
 * reads for its enforce: map, so that the two agree on the policy.
 *
 * The same settings reach the CloudFormation macro (a Lambda function, with
 * no file of the platform's to read) through the environment: the document
 * itself in a variable, or a file shipped with the function named by
 * VAR_FILE (inj_settings_env).
 *
 * Every option goes through inj_opts_set or inj_policy_set, so the file
 * accepts exactly what an annotation accepts, with the injector's own
 * messages, prefixed with where the value is.
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "doc.h"
#include "mem.h"

#define MAX_FILE (1 << 20)
#define MAX_EXCLUDED 1024

void inj_settings_defaults(struct inj_settings *s)
{
	memset(s, 0, sizeof(*s));
	inj_opts_init(&s->opts);
	inj_policy_init(&s->enforce);
}

void inj_settings_free(struct inj_settings *s)
{
	inj_opts_free(&s->opts);
	inj_policy_free(&s->enforce);
	for (size_t i = 0; i < s->n_excluded; i++)
		mem_free(s->excluded[i]);
	mem_free(s->excluded);
	memset(s, 0, sizeof(*s));
}

static int excluded(struct inj_settings *s, const struct doc_node *v, const char *path, struct err_msg *em)
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
		s->excluded = mem_realloc(s->excluded, (s->n_excluded + 1) * sizeof(char *));
		s->excluded[s->n_excluded++] = mem_strdup(ns);
	}
	return 0;
}

/* One option's value (k: v) into opts, or into the policy (enforce); `in` names the map for messages. */
static int option(struct inj_settings *s, bool enforce, const struct doc_node *k, const struct doc_node *v,
		  const char *path, const char *in, struct err_msg *em)
{
	const char *text = inj_scalar_text(v);
	int rc;

	if (text == NULL || v->type == DOC_NULL)
		return err_set(em, DP_EINVAL, "%s:%u:%u: %s%s takes one value", path, v->line, v->col, in, k->text);
	if (strlen(v->text) != v->len) /* the text as written: a YAML 1.1 boolean, `off`, is read as "false" */
		return err_set(em, DP_EINVAL, "%s:%u:%u: %s%s holds a NUL character", path, v->line, v->col, in, k->text);
	rc = enforce ? inj_policy_set(&s->enforce, k->text, text, em) : inj_opts_set(&s->opts, k->text, text, em);
	if (rc == DP_ENOTFOUND)
		return err_set(em, DP_EINVAL, "%s:%u:%u: unknown setting '%s%s' (settings: %s%s)", path, k->line, k->col,
			       in, k->text, inj_opts_names(), enforce ? "" : ", enforce, excludedNamespaces");
	if (rc != 0)
		err_prefix(em, "%s:%u:%u", path, v->line, v->col);
	return rc;
}

static int enforce_map(struct inj_settings *s, const struct doc_node *v, const char *path, struct err_msg *em)
{
	int rc = 0;

	if (!doc_is(v, DOC_MAP))
		return err_set(em, DP_EINVAL, "%s:%u:%u: enforce is a map of option names and the values that win "
			       "over every pod's annotations", path, v->line, v->col);
	for (size_t i = 0; rc == 0 && i < v->n; i++)
		rc = option(s, true, v->keys[i], v->vals[i], path, "enforce.", em);
	return rc;
}

int inj_settings_parse(const char *bytes, size_t len, const char *name, struct inj_settings *s, struct err_msg *em)
{
	struct doc_limits lim = { .max_bytes = MAX_FILE, .max_depth = 16, .max_nodes = 20000 };
	struct doc_stream st = { 0 };
	const struct doc_node *m;
	int rc;

	inj_settings_defaults(s);
	rc = doc_read(bytes, len, name, &lim, &st, em);
	m = rc == 0 && st.n == 1 ? st.docs[0] : NULL;
	if (rc == 0 && st.n > 0 && !doc_is(m, DOC_MAP))
		rc = err_set(em, DP_ESYNTAX, "%s: the configuration is one map of settings", name);
	for (size_t i = 0; rc == 0 && m && i < m->n; i++) {
		const struct doc_node *k = m->keys[i], *v = m->vals[i];

		if (strcmp(k->text, "excludedNamespaces") == 0)
			rc = excluded(s, v, name, em);
		else if (strcmp(k->text, "enforce") == 0)
			rc = enforce_map(s, v, name, em);
		else if (v->type == DOC_MAP || v->type == DOC_SEQ || v->type == DOC_NULL)
			rc = err_set(em, DP_EINVAL, "%s:%u:%u: %s takes one value", name, v->line, v->col, k->text);
		else
			rc = option(s, false, k, v, name, "", em);
	}
	doc_stream_free(&st);
	if (rc != 0)
		inj_settings_free(s);
	return rc;
}

int inj_settings_load(const char *path, struct inj_settings *s, struct err_msg *em)
{
	struct buf b;
	int rc;

	buf_init(&b, MAX_FILE);
	rc = buf_read_path(&b, path, NULL, em);
	if (rc == 0)
		rc = inj_settings_parse(b.data ? b.data : "", b.len, path, s, em);
	else
		inj_settings_defaults(s); /* freeable, as after any failure */
	buf_free(&b);
	return rc;
}

int inj_settings_env(const char *var, struct inj_settings *s, struct err_msg *em)
{
	char file_var[128];
	const char *text = getenv(var), *path;
	int rc;

	snprintf(file_var, sizeof(file_var), "%s_FILE", var);
	path = getenv(file_var);
	inj_settings_defaults(s);
	if (text == NULL && path == NULL)
		return 1;
	if (text != NULL && path != NULL)
		return err_set(em, DP_EINVAL, "%s and %s are both set: give the settings once, as the document "
			       "(%s) or as a file (%s)", var, file_var, var, file_var);
	if (text != NULL && strspn(text, " \t\r\n") == strlen(text))
		return err_set(em, DP_EINVAL, "%s is set but empty: give the platform's settings document (YAML or "
			       "JSON, the webhook's configuration format), or remove the variable", var);
	if (text != NULL) {
		if (strlen(text) > MAX_FILE)
			return err_set(em, DP_ETOOBIG, "%s: over %d bytes", var, MAX_FILE);
		return inj_settings_parse(text, strlen(text), var, s, em);
	}
	if ((rc = inj_settings_load(path, s, em)) != 0)
		err_prefix(em, "%s", file_var);
	return rc;
}
