/*
 * doc.c - the document tree of doc.h: making, reading and changing nodes, deep
 * copy and equality, and duplicate-key detection for the readers. The
 * format-neutral entry points (doc_read, doc_write) are doc_io.c's.
 *
 * Maps are arrays of key and value pointers in document order; lookups are a
 * linear scan because the maps people edit are small. The one place that must
 * not be quadratic is duplicate detection while reading (a CloudFormation
 * template can hold 10,000 resources in one map), so doc_dup_key() switches
 * to a temporary hash set above DUP_LINEAR keys. Every change first tells the
 * journal (doc_journal.c), which keeps what the node was when one is on.
 */
#include "doc.h"

#include "htab.h"
#include "mem.h"

#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DUP_LINEAR 16

const struct doc_limits doc_default_limits = {
	.max_bytes = (size_t)64 << 20,
	.max_depth = 256,
	.max_nodes = (size_t)16 << 20,
};

/* ---- making ---- */

static struct doc_node *node_new(enum doc_type type)
{
	struct doc_node *n = mem_zalloc(sizeof(*n));

	n->type = type;
	return n;
}

struct doc_node *doc_map(void)
{
	return node_new(DOC_MAP);
}

struct doc_node *doc_seq(void)
{
	return node_new(DOC_SEQ);
}

struct doc_node *doc_scalar(enum doc_type type, const char *text, size_t len)
{
	struct doc_node *n;

	if (type == DOC_MAP || type == DOC_SEQ)
		DP_FATAL("doc_scalar called with a collection type");
	if (mem_arena_active()) {
		/* one allocation for the node and its text: nothing in an arena is freed one by one */
		n = mem_alloc(sizeof(*n) + len + 1);
		memset(n, 0, sizeof(*n));
		n->type = type;
		n->text = (char *)(n + 1);
	} else {
		n = node_new(type);
		n->text = mem_alloc(len + 1);
	}
	if (len)
		memcpy(n->text, text, len);
	n->text[len] = '\0';
	n->len = len;
	return n;
}

struct doc_node *doc_str(const char *s)
{
	return doc_scalar(DOC_STRING, s, strlen(s));
}

struct doc_node *doc_strn(const char *s, size_t len)
{
	return doc_scalar(DOC_STRING, s, len);
}

struct doc_node *doc_num(const char *lexeme)
{
	return doc_scalar(DOC_NUMBER, lexeme, strlen(lexeme));
}

struct doc_node *doc_int(long long v)
{
	char tmp[32];
	int k = snprintf(tmp, sizeof(tmp), "%lld", v);

	return doc_scalar(DOC_NUMBER, tmp, (size_t)k);
}

struct doc_node *doc_bool(bool v)
{
	return v ? doc_scalar(DOC_BOOL, "true", 4) : doc_scalar(DOC_BOOL, "false", 5);
}

struct doc_node *doc_null(void)
{
	return doc_scalar(DOC_NULL, "null", 4);
}

struct doc_node *doc_copy(const struct doc_node *n)
{
	struct doc_node *c;

	if (n == NULL)
		return NULL;
	if (n->text && mem_arena_active()) { /* as in doc_scalar: node and text together */
		c = mem_alloc(sizeof(*c) + n->len + 1);
		*c = *n;
		c->text = (char *)(c + 1);
	} else {
		c = mem_alloc(sizeof(*c));
		*c = *n;
		if (n->text)
			c->text = mem_alloc(n->len + 1);
	}
	if (n->text)
		memcpy(c->text, n->text, n->len + 1);
	c->tag = n->tag ? mem_strdup(n->tag) : NULL;
	c->anchor = NULL; /* a copy is what *X gives: it refers to the anchor, never defines one */
	c->alias = n->anchor ? mem_strdup(n->anchor) : n->alias ? mem_strdup(n->alias) : NULL;
	c->keys = c->vals = NULL;
	c->alloc = n->n;
	if (n->n == 0)
		return c;
	c->vals = mem_array(n->n, sizeof(*c->vals)); /* every slot is set below; mem_array checks the size */
	if (n->type == DOC_MAP)
		c->keys = mem_array(n->n, sizeof(*c->keys));
	for (size_t i = 0; i < n->n; i++) {
		if (c->keys)
			c->keys[i] = doc_copy(n->keys[i]);
		c->vals[i] = doc_copy(n->vals[i]);
	}
	return c;
}

void doc_free(struct doc_node *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->n; i++) {
		if (n->keys)
			doc_free(n->keys[i]);
		doc_free(n->vals[i]);
	}
	mem_free(n->keys);
	mem_free(n->vals);
	mem_free(n->tag);
	mem_free(n->anchor);
	mem_free(n->alias);
	mem_free(n->text);
	mem_free(n);
}

/* ---- reading ---- */

static bool key_is(const struct doc_node *key, const char *k, size_t klen)
{
	return key->text && key->len == klen && memcmp(key->text, k, klen) == 0;
}

static long find_n(const struct doc_node *m, const char *k, size_t klen)
{
	if (m == NULL || m->type != DOC_MAP)
		return -1;
	for (size_t i = 0; i < m->n; i++)
		if (key_is(m->keys[i], k, klen))
			return (long)i;
	return -1;
}

long doc_find(const struct doc_node *m, const char *k)
{
	return find_n(m, k, strlen(k));
}

struct doc_node *doc_get(const struct doc_node *m, const char *k)
{
	long i = doc_find(m, k);

	return i < 0 ? NULL : m->vals[i];
}

struct doc_node *doc_path(const struct doc_node *m, const char *path)
{
	const struct doc_node *cur = m;

	while (cur && *path) {
		const char *slash = strchr(path, '/');
		size_t klen = slash ? (size_t)(slash - path) : strlen(path);
		long i = find_n(cur, path, klen);

		cur = i < 0 ? NULL : cur->vals[i];
		path += klen;
		if (*path == '/')
			path++;
	}
	return (struct doc_node *)cur;
}

const char *doc_strval(const struct doc_node *n)
{
	return n && n->type == DOC_STRING ? n->text : NULL;
}

const char *doc_get_str(const struct doc_node *m, const char *k)
{
	return doc_strval(doc_get(m, k));
}

/* A "<<" key that a YAML 1.1 reader takes as a merge: plain (or made in memory), untagged or !!merge. */
static bool is_merge_key(const struct doc_node *k)
{
	return k->len == 2 && memcmp(k->text, "<<", 2) == 0 && k->type == DOC_STRING &&
	       k->style != DOC_STYLE_SINGLE && k->style != DOC_STYLE_DOUBLE &&
	       (k->tag == NULL || strcmp(k->tag, "tag:yaml.org,2002:merge") == 0);
}

struct doc_node *doc_get_merged(const struct doc_node *m, const char *k)
{
	struct doc_node *v = doc_get(m, k), *from, *got;

	if (v || m == NULL || m->type != DOC_MAP)
		return v;
	for (size_t i = 0; i < m->n; i++) {
		if (!is_merge_key(m->keys[i]))
			continue;
		from = m->vals[i];
		if (from->type == DOC_MAP)
			return doc_get_merged(from, k);
		for (size_t j = 0; from->type == DOC_SEQ && j < from->n; j++)
			if ((got = doc_get_merged(from->vals[j], k)) != NULL)
				return got;
		return NULL;
	}
	return NULL;
}

bool doc_is(const struct doc_node *n, enum doc_type t)
{
	return n && n->type == t;
}

static bool same_tag(const char *a, const char *b)
{
	if (a == NULL || b == NULL)
		return a == b;
	return strcmp(a, b) == 0;
}

bool doc_equal(const struct doc_node *a, const struct doc_node *b)
{
	if (a == b)
		return true; /* one node (a journal's before-tree shares what nothing touched) */
	if (a == NULL || b == NULL)
		return false;
	if (a->type != b->type || !same_tag(a->tag, b->tag))
		return false;
	if (a->type != DOC_MAP && a->type != DOC_SEQ)
		return a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
	if (a->n != b->n)
		return false;
	for (size_t i = 0; i < a->n; i++) {
		if (a->type == DOC_MAP && !doc_equal(a->keys[i], b->keys[i]))
			return false;
		if (!doc_equal(a->vals[i], b->vals[i]))
			return false;
	}
	return true;
}

static bool same_key(const struct doc_node *a, const struct doc_node *b)
{
	return a->text && b->text && a->len == b->len && memcmp(a->text, b->text, a->len) == 0;
}

struct dup_key {
	const struct doc_node *m;
	size_t j;
};

static bool same_index_key(const void *slot, const void *key)
{
	const struct dup_key *q = key;

	return same_key(q->m->keys[*(const size_t *)slot], q->m->keys[q->j]);
}

/* A map past DUP_LINEAR keys: each key looked up among those before it in the hash table. */
static bool dup_hashed(const struct doc_node *m, size_t *first, size_t *second)
{
	struct htab seen;
	bool found = false;

	htab_init(&seen, sizeof(size_t));
	for (size_t j = 0; j < m->n && !found; j++) {
		struct dup_key q = { m, j };
		uint64_t h = htab_bytes(m->keys[j]->text ? m->keys[j]->text : "", m->keys[j]->len);
		const size_t *at = htab_find(&seen, h, same_index_key, &q);

		if (at != NULL) {
			*first = *at;
			*second = j;
			found = true;
		} else {
			*(size_t *)htab_put(&seen, h) = j;
		}
	}
	htab_free(&seen);
	return found;
}

bool doc_dup_key(const struct doc_node *m, size_t *first, size_t *second)
{
	if (m == NULL || m->type != DOC_MAP || m->n < 2)
		return false;
	if (m->n > DUP_LINEAR)
		return dup_hashed(m, first, second);
	for (size_t j = 1; j < m->n; j++)
		for (size_t i = 0; i < j; i++)
			if (same_key(m->keys[i], m->keys[j])) {
				*first = i;
				*second = j;
				return true;
			}
	return false;
}

/* ---- changing ---- */

static void need_type(const struct doc_node *n, enum doc_type t, const char *fn)
{
	if (n == NULL || n->type != t)
		DP_FATAL("%s: node is not a %s", fn, t == DOC_MAP ? "map" : "sequence");
}

/* Room for one more item (and key, for maps). */
static void grow(struct doc_node *c)
{
	size_t a;

	if (c->n < c->alloc)
		return;
	a = c->alloc ? c->alloc * 2 : 4;
	c->vals = mem_realloc(c->vals, a * sizeof(*c->vals));
	if (c->type == DOC_MAP)
		c->keys = mem_realloc(c->keys, a * sizeof(*c->keys));
	c->alloc = a;
}

/* Put key node k (may be NULL for seqs) and v at index i, shifting the rest. */
static void put_at(struct doc_node *c, size_t i, struct doc_node *k, struct doc_node *v)
{
	if (i > c->n || v == NULL)
		DP_FATAL("doc: insert at %zu into a collection of %zu (value %p)", i, c->n, (void *)v);
	doc_journal_touch(c);
	grow(c);
	memmove(c->vals + i + 1, c->vals + i, (c->n - i) * sizeof(*c->vals));
	c->vals[i] = v;
	if (c->type == DOC_MAP) {
		memmove(c->keys + i + 1, c->keys + i, (c->n - i) * sizeof(*c->keys));
		c->keys[i] = k;
	}
	c->n++;
}

/* Take item i out without freeing it; frees the key node of a map. */
static struct doc_node *cut(struct doc_node *c, size_t i)
{
	struct doc_node *v = c->vals[i];

	doc_journal_touch(c);
	if (c->type == DOC_MAP) {
		doc_free(c->keys[i]);
		memmove(c->keys + i, c->keys + i + 1, (c->n - i - 1) * sizeof(*c->keys));
	}
	memmove(c->vals + i, c->vals + i + 1, (c->n - i - 1) * sizeof(*c->vals));
	c->n--;
	return v;
}

void doc_set(struct doc_node *m, const char *k, struct doc_node *v)
{
	long i;

	need_type(m, DOC_MAP, "doc_set");
	if (v == NULL)
		DP_FATAL("doc_set: NULL value for key %s", k);
	i = doc_find(m, k);
	if (i >= 0) {
		doc_journal_touch(m);
		doc_free(m->vals[i]);
		m->vals[i] = v;
		return;
	}
	put_at(m, m->n, doc_str(k), v);
}

void doc_insert_at(struct doc_node *m, size_t i, const char *k, struct doc_node *v)
{
	need_type(m, DOC_MAP, "doc_insert_at");
	if (doc_find(m, k) >= 0)
		DP_FATAL("doc_insert_at: key %s already exists", k);
	put_at(m, i, doc_str(k), v);
}

bool doc_del(struct doc_node *m, const char *k)
{
	long i = doc_find(m, k);

	if (i < 0)
		return false;
	doc_free(cut(m, (size_t)i));
	return true;
}

static struct doc_node *get_or_add(struct doc_node *m, const char *k, enum doc_type t,
				   bool *created)
{
	struct doc_node *v;

	need_type(m, DOC_MAP, "doc_get_or_add");
	v = doc_get(m, k);
	if (created)
		*created = v == NULL;
	if (v)
		return v->type == t ? v : NULL;
	v = node_new(t);
	put_at(m, m->n, doc_str(k), v);
	return v;
}

struct doc_node *doc_get_or_add_map(struct doc_node *m, const char *k, bool *created)
{
	return get_or_add(m, k, DOC_MAP, created);
}

struct doc_node *doc_get_or_add_seq(struct doc_node *m, const char *k, bool *created)
{
	return get_or_add(m, k, DOC_SEQ, created);
}

void doc_push(struct doc_node *s, struct doc_node *v)
{
	need_type(s, DOC_SEQ, "doc_push");
	put_at(s, s->n, NULL, v);
}

void doc_insert(struct doc_node *s, size_t i, struct doc_node *v)
{
	need_type(s, DOC_SEQ, "doc_insert");
	put_at(s, i, NULL, v);
}

struct doc_node *doc_take(struct doc_node *s, size_t i)
{
	need_type(s, DOC_SEQ, "doc_take");
	if (i >= s->n)
		DP_FATAL("doc_take: index %zu of %zu", i, s->n);
	return cut(s, i);
}

void doc_remove(struct doc_node *s, size_t i)
{
	doc_free(doc_take(s, i));
}

void doc_set_text(struct doc_node *n, const char *text)
{
	size_t len;

	if (n == NULL || n->type == DOC_MAP || n->type == DOC_SEQ)
		DP_FATAL("doc_set_text: not a scalar");
	len = strlen(text);
	doc_journal_touch(n);
	mem_free(n->text);
	n->text = mem_alloc(len + 1);
	memcpy(n->text, text, len + 1);
	n->len = len;
}

/* ---- streams ---- */

void doc_stream_free(struct doc_stream *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n; i++)
		doc_free(s->docs[i]);
	mem_free(s->docs);
	s->docs = NULL;
	s->n = 0;
}

int doc_dup_error(const struct doc_node *m, const char *name, struct err_msg *em)
{
	size_t a, b;
	const struct doc_node *k;

	if (!doc_dup_key(m, &a, &b))
		return 0;
	k = m->keys[b];
	return err_set(em, DP_ESYNTAX, "%s:%u:%u: duplicate key \"%s\" (lines %u and %u)", name, k->line, k->col,
		       k->text, m->keys[a]->line, k->line);
}

void doc_append_pair(struct doc_node *m, struct doc_node *k, struct doc_node *v)
{
	need_type(m, DOC_MAP, "doc_append_pair");
	doc_journal_touch(m);
	grow(m);
	m->keys[m->n] = k;
	m->vals[m->n++] = v;
}

size_t doc_count(const struct doc_node *n)
{
	size_t c = 1;

	if (n == NULL)
		return 0;
	for (size_t i = 0; i < n->n && (n->type == DOC_MAP || n->type == DOC_SEQ); i++)
		c += doc_count(n->vals[i]) + (n->type == DOC_MAP ? doc_count(n->keys[i]) : 0);
	return c;
}

void doc_name_message(struct err_msg *em, const char *name)
{
	char old[sizeof(em->text)];

	if (em == NULL)
		return;
	memcpy(old, em->text, sizeof(old));
	err_set(em, 0, "%s:%s%s", name ? name : "<input>", old[0] >= '0' && old[0] <= '9' ? "" : " ", old);
}
