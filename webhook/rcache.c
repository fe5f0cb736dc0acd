/*
 * rcache.c - reused answers for repeated AdmissionReviews (rcache.h).
 *
 * An entry holds the request, where its uid literal is, where the token
 * volume's generated name is (its windows), and the answer with where the
 * uid is in it. A lookup checks, per entry: the key, the bytes before the uid
 * (the envelope: short), the new uid literal, the length of the rest, and
 * then the rest byte for byte, window by window: the windows may hold any
 * generated name, the same in all of them. Pods differ early (metadata comes
 * first), so a miss is found in the first bytes compared. Entries are
 * replaced round-robin.
 */
#include "rcache.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "errors.h"
#include "mem.h"

#define TOKEN_PREFIX "\"kube-api-access-"
#define TOKEN_LEN 5      /* the generated suffix */
#define MAX_WINDOWS 64  /* token names in one request: one volume and a mount per container */

struct entry {
	bool used;
	unsigned key;
	int tag;
	char *body; /* the request, whole */
	size_t len, hole, hole_len;
	size_t win[MAX_WINDOWS]; /* offsets of the token names' suffixes, from the end of the uid literal */
	size_t n_win;
	char *ans; /* the answer, whole */
	size_t ans_len, ans_hole, ans_hole_len;
};

struct rcache {
	pthread_rwlock_t mu; /* readers: lookups; writers: put and clear */
	struct entry e[RCACHE_ENTRIES];
	size_t next;
	atomic_ullong hits, misses;
};

static bool plain(char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_' ||
	       c == '.' || c == ':';
}

/* The length of the plain literal at p (quotes included), or 0. */
static size_t literal(const char *p, size_t avail)
{
	size_t i = 1;

	if (avail < 3 || p[0] != '"')
		return 0;
	while (i < avail && plain(p[i]))
		i++;
	return i < avail && p[i] == '"' && i > 1 ? i + 1 : 0;
}

/* A generated suffix: TOKEN_LEN lower-case letters or digits, then the closing quote. */
static bool suffix_ok(const char *p, const char *end)
{
	if (end - p < TOKEN_LEN + 1 || p[TOKEN_LEN] != '"')
		return false;
	for (int i = 0; i < TOKEN_LEN; i++)
		if (!((p[i] >= 'a' && p[i] <= 'z') || (p[i] >= '0' && p[i] <= '9')))
			return false;
	return true;
}

/*
 * Find the token volume's name in t[0..n): every "kube-api-access-XXXXX"
 * literal, all with the same suffix. False when there are other ones (a
 * different suffix, another length, too many).
 */
static bool find_windows(const char *t, size_t n, size_t *win, size_t *n_win)
{
	const size_t plen = sizeof(TOKEN_PREFIX) - 1;
	const char *p = t, *end = t + n, *first = NULL;

	*n_win = 0;
	while ((p = memmem(p, (size_t)(end - p), TOKEN_PREFIX, plen)) != NULL) {
		p += plen;
		if (!suffix_ok(p, end) || *n_win == MAX_WINDOWS || (first && memcmp(first, p, TOKEN_LEN) != 0))
			return false;
		if (first == NULL)
			first = p;
		win[(*n_win)++] = (size_t)(p - t);
	}
	return true;
}

struct rcache *rcache_new(void)
{
	struct rcache *c = mem_zalloc(sizeof(*c));

	pthread_rwlock_init(&c->mu, NULL);
	return c;
}

static void entry_drop(struct entry *e)
{
	mem_free(e->body);
	mem_free(e->ans);
	memset(e, 0, sizeof(*e));
}

void rcache_clear(struct rcache *c)
{
	if (c == NULL)
		return;
	pthread_rwlock_wrlock(&c->mu);
	for (size_t i = 0; i < RCACHE_ENTRIES; i++)
		entry_drop(&c->e[i]);
	pthread_rwlock_unlock(&c->mu);
}

void rcache_free(struct rcache *c)
{
	if (c == NULL)
		return;
	rcache_clear(c);
	pthread_rwlock_destroy(&c->mu);
	mem_free(c);
}

/* Does body match e around its holes? *lit gets the new uid literal's length. */
static bool matches(const struct entry *e, unsigned key, const char *body, size_t len, size_t *lit)
{
	const char *t, *et, *name;
	size_t tail_len, at = 0;

	if (!e->used || e->key != key || len <= e->hole || memcmp(body, e->body, e->hole) != 0)
		return false;
	if ((*lit = literal(body + e->hole, len - e->hole)) == 0)
		return false;
	t = body + e->hole + *lit;
	et = e->body + e->hole + e->hole_len;
	tail_len = len - e->hole - *lit;
	if (tail_len != e->len - e->hole - e->hole_len)
		return false;
	name = e->n_win ? t + e->win[0] : NULL;
	for (size_t i = 0; i < e->n_win; i++) {
		if (memcmp(t + at, et + at, e->win[i] - at) != 0 || !suffix_ok(t + e->win[i], t + tail_len) ||
		    memcmp(t + e->win[i], name, TOKEN_LEN) != 0)
			return false;
		at = e->win[i] + TOKEN_LEN;
	}
	return memcmp(t + at, et + at, tail_len - at) == 0;
}

int rcache_get(struct rcache *c, unsigned key, const char *body, size_t len, struct buf *out, int *tag)
{
	int hit = 0;

	if (c == NULL || len > RCACHE_MAX_BODY)
		return 0;
	pthread_rwlock_rdlock(&c->mu);
	for (size_t i = 0; i < RCACHE_ENTRIES && !hit; i++) {
		const struct entry *e = &c->e[i];
		size_t lit;

		if (!matches(e, key, body, len, &lit))
			continue;
		buf_append(out, e->ans, e->ans_hole);
		buf_append(out, body + e->hole, lit);
		buf_append(out, e->ans + e->ans_hole + e->ans_hole_len, e->ans_len - e->ans_hole - e->ans_hole_len);
		*tag = e->tag;
		hit = 1;
	}
	pthread_rwlock_unlock(&c->mu);
	atomic_fetch_add(hit ? &c->hits : &c->misses, 1);
	return hit;
}

void rcache_put(struct rcache *c, unsigned key, const char *body, size_t len, size_t hole, size_t hole_len,
		const char *ans, size_t ans_len, size_t ans_hole, size_t ans_hole_len, bool names_free, int tag)
{
	size_t win[MAX_WINDOWS], n_win;
	struct entry *e;

	if (mem_arena_active()) /* what is kept must not come from a review's arena */
		DP_FATAL("rcache_put inside an arena scope");
	if (c == NULL || len > RCACHE_MAX_BODY || hole + hole_len > len || ans_hole + ans_hole_len > ans_len ||
	    literal(body + hole, len - hole) != hole_len || literal(ans + ans_hole, ans_len - ans_hole) != ans_hole_len ||
	    !find_windows(body + hole + hole_len, len - hole - hole_len, win, &n_win) || (n_win && !names_free))
		return;
	pthread_rwlock_wrlock(&c->mu);
	e = &c->e[c->next];
	c->next = (c->next + 1) % RCACHE_ENTRIES;
	entry_drop(e);
	e->used = true;
	e->key = key;
	e->tag = tag;
	e->body = mem_alloc(len);
	memcpy(e->body, body, len);
	e->len = len;
	e->hole = hole;
	e->hole_len = hole_len;
	memcpy(e->win, win, n_win * sizeof(win[0]));
	e->n_win = n_win;
	e->ans = mem_alloc(ans_len);
	memcpy(e->ans, ans, ans_len);
	e->ans_len = ans_len;
	e->ans_hole = ans_hole;
	e->ans_hole_len = ans_hole_len;
	pthread_rwlock_unlock(&c->mu);
}

void rcache_stats(const struct rcache *c, unsigned long long *hits, unsigned long long *misses)
{
	*hits = c ? atomic_load(&((struct rcache *)c)->hits) : 0;
	*misses = c ? atomic_load(&((struct rcache *)c)->misses) : 0;
}
