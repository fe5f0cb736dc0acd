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
#define DAY_MS (24LL * 3600 * 1000)

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

int settings_text(struct settings_node *n, const char *name, bool required, const char **out, struct err_msg *em)
{
	struct settings_node *c = settings_get(n, name);

	*out = NULL;
	if (c == NULL || (c->value == NULL && c->n == 0)) {
		if (required && n)
			return settings_refuse_missing(n, name, em, "");
		if (required)
			return err_set(em, DP_EINVAL, "settings: %s: is required", name);
		return 0;
	}
	if (c->n)
		return settings_refuse(DP_EINVAL, c, em, "takes a value, not settings under it");
	*out = c->value;
	return 0;
}

int settings_str(struct settings_node *n, const char *name, bool required, char **out, struct err_msg *em)
{
	const char *t;
	int rc = settings_text(n, name, required, &t, em);

	if (rc == 0 && t) {
		if (*t == '\0' && required)
			return settings_refuse(DP_EINVAL, settings_find(n, name), em, "must not be empty");
		free(*out);
		*out = mem_strdup(t);
	}
	return rc;
}

int settings_double(struct settings_node *n, const char *name, bool *has, double *out, double lo, double hi,
		    struct err_msg *em)
{
	const char *t;
	char *end;
	double v;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	errno = 0;
	v = strtod(t, &end);
	if (end == t || *end || errno || !isfinite(v) || isspace((unsigned char)*t))
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is not a number", t);
	if (v < lo || v > hi)
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "%g is outside %g..%g", v, lo, hi);
	*has = true;
	*out = v;
	return 0;
}

int settings_uint(struct settings_node *n, const char *name, bool *has, unsigned *out, unsigned lo, unsigned hi,
		  struct err_msg *em)
{
	const char *t;
	char *end;
	unsigned long v;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	errno = 0;
	v = strtoul(t, &end, 10);
	if (!isdigit((unsigned char)*t) || *end || errno || v < lo || v > hi)
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is not a whole number in %u..%u",
				       t, lo, hi);
	*has = true;
	*out = (unsigned)v;
	return 0;
}

int settings_bool(struct settings_node *n, const char *name, bool *out, struct err_msg *em)
{
	const char *t;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	if (strcasecmp(t, "true") == 0)
		*out = true;
	else if (strcasecmp(t, "false") == 0)
		*out = false;
	else
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is not true or false", t);
	return 0;
}

long long settings_parse_timespan(const char *s)
{
	long long d = 0, h, m, sec = 0, frac = 0, fdiv = 1;
	const char *p = s;
	char *end;

	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	h = strtoll(p, &end, 10);
	if (errno || end == p)
		return -1;
	if (*end == '\0') /* "2": days, as .NET reads a lone number */
		return h <= 3650 ? h * DAY_MS : -1;
	if (*end == '.') { /* d.hh:mm... */
		d = h;
		p = end + 1;
		h = strtoll(p, &end, 10);
		if (end == p || !isdigit((unsigned char)*p))
			return -1;
	}
	if (*end != ':')
		return -1;
	p = end + 1;
	m = strtoll(p, &end, 10);
	if (end == p || !isdigit((unsigned char)*p))
		return -1;
	if (*end == ':') {
		p = end + 1;
		sec = strtoll(p, &end, 10);
		if (end == p || !isdigit((unsigned char)*p))
			return -1;
		if (*end == '.') {
			p = end + 1;
			if (!isdigit((unsigned char)*p))
				return -1;
			for (; isdigit((unsigned char)*p) && fdiv < 10000000; p++) {
				frac = frac * 10 + (*p - '0');
				fdiv *= 10;
			}
			end = (char *)p;
		}
	}
	if (*end || d > 3650 || h > 23 || m > 59 || sec > 59)
		return -1;
	return ((d * 24 + h) * 60 + m) * 60000 + sec * 1000 + frac * 1000 / fdiv;
}

void settings_timespan_text(char *out, size_t n, long long ms)
{
	long long s = ms / 1000, d = s / 86400;

	if (d)
		snprintf(out, n, "%lld.%02lld:%02lld:%02lld", d, s / 3600 % 24, s / 60 % 60, s % 60);
	else
		snprintf(out, n, "%02lld:%02lld:%02lld", s / 3600 % 24, s / 60 % 60, s % 60);
	if (ms % 1000) {
		size_t l = strlen(out);

		snprintf(out + l, n - l, ".%03lld0000", ms % 1000);
	}
}

int settings_timespan(struct settings_node *n, const char *name, bool *has, long long *out, long long lo,
		      long long hi, struct err_msg *em)
{
	const char *t;
	char a[32], b[32];
	long long v;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	if ((v = settings_parse_timespan(t)) < 0)
		return settings_refuse(DP_EINVAL, settings_find(n, name), em,
				       "'%.64s' is not a TimeSpan ([d.]hh:mm:ss, e.g. 00:00:30)", t);
	if (v < lo || v > hi) {
		settings_timespan_text(a, sizeof(a), lo);
		settings_timespan_text(b, sizeof(b), hi);
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is outside %s..%s", t, a, b);
	}
	*has = true;
	*out = v;
	return 0;
}

int settings_list(struct settings_node *n, const char *name, struct settings_node ***out, size_t *count_out,
		  struct err_msg *em)
{
	struct settings_node *c = settings_get(n, name), **items;
	size_t m;

	*out = NULL;
	*count_out = 0;
	if (c == NULL)
		return 0;
	if (c->value && c->n == 0) {
		if (*c->value == '\0') /* "Filters": "" - .NET binds an empty list */
			return 0;
		return settings_refuse(DP_EINVAL, c, em, "takes a list (%s:0, %s:1, ...), not one value", c->name,
				       c->name);
	}
	if ((m = c->n) > SETTINGS_MAX_LIST)
		return settings_refuse(DP_ETOOBIG, c, em, "more than %d items", SETTINGS_MAX_LIST);
	items = mem_zalloc((m ? m : 1) * sizeof(*items));
	for (size_t i = 0; i < m; i++) {
		char *end;
		unsigned long idx = strtoul(c->k[i]->name, &end, 10);

		if (!isdigit((unsigned char)c->k[i]->name[0]) || *end || idx >= m || items[idx]) {
			free(items);
			return settings_refuse(DP_EINVAL, c->k[i], em, "a list's items are numbered 0 to %zu", m - 1);
		}
		items[idx] = c->k[i];
		c->k[i]->used = true;
	}
	*out = items;
	*count_out = m;
	return 0;
}

int settings_strings(struct settings_node *n, const char *name, char ***out, size_t *count_out, struct err_msg *em)
{
	struct settings_node **items;
	size_t m;
	int rc = settings_list(n, name, &items, &m, em);

	if (rc != 0 || items == NULL)
		return rc;
	*out = mem_zalloc((m ? m : 1) * sizeof(**out));
	for (size_t i = 0; i < m && rc == 0; i++) {
		if (items[i]->value == NULL || items[i]->n)
			rc = settings_refuse(DP_EINVAL, items[i], em, "must be a text value");
		else
			(*out)[(*count_out)++] = mem_strdup(items[i]->value);
	}
	free(items);
	return rc;
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
