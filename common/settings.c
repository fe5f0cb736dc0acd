/*
 * settings.c - the settings tree (settings.h): colon paths as nodes, typed
 * getters that mark what they read, and the refusal of what nobody read.
 *
 * The getters began as the collection rules' binder (launcher/rules/
 * crules_parse.c); every consumer of the agent's settings now reads through
 * them, so one rule holds everywhere: a setting nobody read is refused by its
 * full path and its source, never silently ignored. A tree holds a few
 * thousand nodes (the sources are capped); a node's children are an array in
 * the order put, which is the order refused in, indexed by name in a hash
 * table (common/htab.h), as are the names asked under it: 20,000 variables
 * in one section must not cost a scan each.
 */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

#define MAX_PATH 512
#define MAX_DEPTH 32

struct settings_node *settings_new(void)
{
	return mem_zalloc(sizeof(struct settings_node));
}

void settings_free(struct settings_node *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->n; i++)
		settings_free(n->k[i]);
	for (size_t i = 0; i < n->n_asked; i++)
		free(n->asked[i]);
	free(n->asked);
	free(n->k);
	htab_free(&n->kix);
	htab_free(&n->aix);
	free(n->name);
	if (n->value)
		mem_wipe(n->value, strlen(n->value));
	free(n->value);
	free(n->where);
	free(n);
}

/* A name's hash, case folded (.NET configuration's keys are case-insensitive). */
static uint64_t fold_hash(const char *name, size_t len)
{
	uint64_t h = 0xcbf29ce484222325ull;

	for (size_t i = 0; i < len; i++)
		h = (h ^ (unsigned char)tolower((unsigned char)name[i])) * 0x100000001b3ull;
	return htab_u64(h);
}

struct name_key {
	const char *name;
	size_t len;
	char *const *names; /* or NULL: the children's names */
	const struct settings_node *p;
};

static bool same_name(const void *slot, const void *key)
{
	const struct name_key *q = key;
	size_t i = *(const size_t *)slot;
	const char *have = q->names ? q->names[i] : q->p->k[i]->name;

	return strlen(have) == q->len && strncasecmp(have, q->name, q->len) == 0;
}

static struct settings_node *child(const struct settings_node *p, const char *name, size_t len)
{
	struct name_key q = { name, len, NULL, p };
	const size_t *i;

	if (p == NULL || p->n == 0)
		return NULL;
	i = htab_find(&p->kix, fold_hash(name, len), same_name, &q);
	return i ? p->k[*i] : NULL;
}

int settings_put(struct settings_node *root, const char *path, const char *value, const char *where,
		 size_t max_nodes, struct err_msg *em)
{
	struct settings_node *n = root;
	const char *p = path;
	size_t depth = 0;

	if (*p == '\0')
		return err_set(em, DP_EINVAL, "%s: a setting's name is empty", where);
	while (*p) {
		const char *e = strchr(p, ':');
		size_t len = e ? (size_t)(e - p) : strlen(p);
		struct settings_node *c;

		if (len == 0 || (e && e[1] == '\0'))
			return err_set(em, DP_EINVAL, "%s: %s: a setting's name has an empty part", where, path);
		if (++depth > MAX_DEPTH)
			return err_set(em, DP_ETOOBIG, "%s: %s: more than %d levels", where, path, MAX_DEPTH);
		if ((c = child(n, p, len)) == NULL) {
			if (max_nodes && root->total + 1 >= max_nodes)
				return err_set(em, DP_ETOOBIG, "%s: more than %zu settings", where, max_nodes);
			c = mem_zalloc(sizeof(*c));
			c->name = mem_strndup(p, len);
			c->where = mem_strdup(where);
			c->up = n;
			MEM_GROW(n->k, n->cap, n->n + 1, 8);
			if (n->kix.size == 0)
				htab_init(&n->kix, sizeof(size_t));
			*(size_t *)htab_put(&n->kix, fold_hash(p, len)) = n->n;
			n->k[n->n++] = c;
			root->total++;
		}
		n = c;
		p += len + (e != NULL);
	}
	if (n->value)
		mem_wipe(n->value, strlen(n->value));
	free(n->value);
	free(n->where);
	n->value = mem_strdup(value);
	n->where = mem_strdup(where);
	return 0;
}

struct settings_node *settings_find(const struct settings_node *n, const char *name)
{
	return n ? child(n, name, strlen(name)) : NULL;
}

void settings_ask(struct settings_node *n, const char *name)
{
	struct name_key q = { name, strlen(name), NULL, NULL };
	uint64_t h = fold_hash(name, q.len);

	if (n == NULL)
		return;
	q.names = n->asked;
	if (n->n_asked && htab_find(&n->aix, h, same_name, &q) != NULL)
		return;
	if (n->aix.size == 0)
		htab_init(&n->aix, sizeof(size_t));
	MEM_GROW(n->asked, n->cap_asked, n->n_asked + 1, 8);
	*(size_t *)htab_put(&n->aix, h) = n->n_asked;
	n->asked[n->n_asked++] = mem_strdup(name);
}

struct settings_node *settings_get(struct settings_node *n, const char *name)
{
	struct settings_node *c = settings_find(n, name);

	settings_ask(n, name);
	if (c)
		c->used = true;
	return c;
}

/* The node at path under root; each level read (mark) or only remembered as known (ask), or neither. */
static struct settings_node *walk_path(struct settings_node *root, const char *path, bool mark, bool ask)
{
	struct settings_node *n = root;
	char part[MAX_PATH];

	while (n && *path) {
		size_t len = strcspn(path, ":");

		if (len >= sizeof(part))
			return NULL;
		memcpy(part, path, len);
		part[len] = '\0';
		if (mark)
			n = settings_get(n, part);
		else if (ask) {
			settings_ask(n, part);
			n = settings_find(n, part);
		} else {
			n = settings_find(n, part);
		}
		path += len + (path[len] == ':');
	}
	return n;
}

struct settings_node *settings_at(struct settings_node *root, const char *path, bool mark)
{
	return walk_path(root, path, mark, false);
}

void settings_ask_path(struct settings_node *root, const char *path)
{
	walk_path(root, path, false, true);
}

void settings_mark(struct settings_node *n)
{
	if (n == NULL)
		return;
	n->used = true;
	for (size_t i = 0; i < n->n; i++)
		settings_mark(n->k[i]);
}

void settings_wipe(struct settings_node *n)
{
	if (n == NULL)
		return;
	if (n->value)
		mem_wipe(n->value, strlen(n->value));
	for (size_t i = 0; i < n->n; i++)
		settings_wipe(n->k[i]);
}

void settings_path(const struct settings_node *n, char *out, size_t cap)
{
	const struct settings_node *chain[MAX_DEPTH + 1] = { NULL };
	size_t depth = 0, o = 0;

	for (; n && n->up && depth <= MAX_DEPTH; n = n->up)
		chain[depth++] = n;
	out[0] = '\0';
	while (depth-- > 0 && o + 1 < cap) {
		int k = snprintf(out + o, cap - o, "%s%s", o ? ":" : "", chain[depth]->name);

		o = k < 0 || (size_t)k >= cap - o ? cap : o + (size_t)k;
	}
}

int settings_refuse(int code, const struct settings_node *n, struct err_msg *em, const char *fmt, ...)
{
	char path[MAX_PATH], what[800];
	va_list ap;

	settings_path(n, path, sizeof(path));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(em, code, "%s: %s: %s", n->where ? n->where : "settings", path, what);
}

int settings_refuse_missing(const struct settings_node *n, const char *name, struct err_msg *em, const char *hint)
{
	char path[MAX_PATH];
	const struct settings_node *stray = NULL;

	settings_path(n, path, sizeof(path));
	for (size_t i = 0; i < n->n && !stray; i++) /* a setting nobody read beside it: a misspelling, most likely */
		if (!n->k[i]->used)
			stray = n->k[i];
	if (stray)
		return err_set(em, DP_EINVAL, "%s: %s%s%s: is required%s; %s:%s here is not a setting diagport knows "
			       "(misspelt?)", n->where ? n->where : "settings", path, *path ? ":" : "", name, hint, path,
			       stray->name);
	return err_set(em, DP_EINVAL, "%s: %s%s%s: is required%s", n->where ? n->where : "settings", path,
		       *path ? ":" : "", name, hint);
}

/* Edit distance, case-insensitive, a swap of two neighbours one edit (optimal string alignment); names longer
 * than 63 bytes are not compared (-1). */
static int distance(const char *a, const char *b)
{
	size_t la = strlen(a), lb = strlen(b);
	int d[64][64];

	if (la > 63 || lb > 63)
		return -1;
	for (size_t i = 0; i <= la; i++)
		d[i][0] = (int)i;
	for (size_t j = 0; j <= lb; j++)
		d[0][j] = (int)j;
	for (size_t i = 1; i <= la; i++)
		for (size_t j = 1; j <= lb; j++) {
			int ai = tolower((unsigned char)a[i - 1]), bj = tolower((unsigned char)b[j - 1]);
			int best = d[i - 1][j - 1] + (ai != bj);

			if (d[i - 1][j] + 1 < best)
				best = d[i - 1][j] + 1;
			if (d[i][j - 1] + 1 < best)
				best = d[i][j - 1] + 1;
			if (i > 1 && j > 1 && ai == tolower((unsigned char)b[j - 2]) &&
			    tolower((unsigned char)a[i - 2]) == bj && d[i - 2][j - 2] + 1 < best)
				best = d[i - 2][j - 2] + 1;
			d[i][j] = best;
		}
	return d[la][lb];
}

/* A third of the name's letters at most, and at least one edit: a misspelling rather than another name. */
static int near_limit(const char *name)
{
	int third = (int)strlen(name) / 3;

	return third > 1 ? third : 1;
}

const char *settings_suggest(const struct settings_node *n)
{
	const char *best = NULL;
	int best_d = 0, limit = near_limit(n->name);

	if (n->up == NULL)
		return NULL;
	for (size_t i = 0; i < n->up->n_asked; i++) {
		int d = distance(n->name, n->up->asked[i]);

		if (d > 0 && d <= limit && (best == NULL || d < best_d)) {
			best = n->up->asked[i];
			best_d = d;
		}
	}
	return best;
}

int settings_unread(const struct settings_node *n, const char *takes, struct err_msg *em)
{
	for (size_t i = 0; n && i < n->n; i++)
		if (!n->k[i]->used) {
			const char *near = settings_suggest(n->k[i]);

			if (near)
				return settings_refuse(DP_EINVAL, n->k[i], em, "not a setting diagport knows here; did "
						       "you mean %s?", near);
			return settings_refuse(DP_EINVAL, n->k[i], em, "not a setting diagport knows here%s%s",
					       takes ? "; this takes " : "", takes ? takes : "");
		}
	return 0;
}

const struct settings_node *settings_nearest_child(const struct settings_node *n, const char *name)
{
	const struct settings_node *best = NULL;
	int best_d = 0;

	for (size_t i = 0; n && i < n->n; i++) {
		int d = distance(name, n->k[i]->name);

		if (d > 0 && d <= near_limit(name) && (best == NULL || d < best_d)) {
			best = n->k[i];
			best_d = d;
		}
	}
	return best;
}

/* Whether name was asked for under n. */
static bool asked(const struct settings_node *n, const char *name)
{
	for (size_t i = 0; n && i < n->n_asked; i++)
		if (strcasecmp(n->asked[i], name) == 0)
			return true;
	return false;
}

/* refuse_unknown below top (a subtree being checked: its own path is a consumer's, not a misspelling) */
static int refuse_below(int code, const struct settings_node *n, const struct settings_node *top, struct err_msg *em)
{
	const struct settings_node *chain[MAX_DEPTH + 1], *at = n;
	const char *near;
	char path[MAX_PATH];
	size_t depth = 0;

	for (const struct settings_node *p = n; p && p->up && p != top && depth <= MAX_DEPTH; p = p->up)
		chain[depth++] = p;
	/* the first level, from the top, that no consumer knows: the misspelt part */
	while (depth-- > 0)
		if (!asked(chain[depth]->up, chain[depth]->name)) {
			at = chain[depth];
			break;
		}
	near = settings_suggest(at);
	settings_path(n, path, sizeof(path));
	return err_set(em, code, "%s (%s): unknown setting%s%s%s", path, n->where ? n->where : "settings",
		       near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
}

int settings_refuse_unknown(int code, const struct settings_node *n, struct err_msg *em)
{
	if (n == NULL)
		return err_set(em, code, "settings: unknown setting");
	return refuse_below(code, n, NULL, em);
}

/* The first node under n nobody read, refused (top: where the check began). */
static int check_under(const struct settings_node *n, const struct settings_node *top, struct err_msg *em)
{
	for (size_t i = 0; n && i < n->n; i++) {
		const struct settings_node *c = n->k[i];
		int rc;

		if (!c->used) {
			const struct settings_node *leaf = c;

			while (leaf->value == NULL && leaf->n) /* named by a full path: its first setting's */
				leaf = leaf->k[0];
			return refuse_below(DP_EINVAL, leaf, top, em);
		}
		if ((rc = check_under(c, top, em)) != 0)
			return rc;
	}
	return 0;
}

int settings_check_unread(const struct settings_node *root, struct err_msg *em)
{
	return check_under(root, root, em);
}
