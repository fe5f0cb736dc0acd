/*
 * test_rcache.c - the webhook's cache of answers (webhook/rcache.c) through
 * review_admit: every answer that comes from the cache must be byte for byte
 * the answer a full review (no cache) gives to the same request; requests
 * that differ anywhere but the uid and the token volume's generated name are
 * misses; what the cache cannot stand in for is never kept.
 */
#include <stdio.h>
#include <stdlib.h>

#include "t.h"
#include "common/buf.h"
#include "common/mem.h"
#include "webhook/rcache.h"
#include "webhook/review.h"

/* A replica's review: uid, the token volume's suffix (in the volume and the mount), an extra annotation. */
static char *review(const char *uid, const char *tok1, const char *tok2, const char *note)
{
	return mem_printf(
		"{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":%s,"
		"\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"namespace\":\"shop\",\"operation\":\"CREATE\","
		"\"object\":{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"generateName\":\"orders-7d9f8b6c5-\","
		"\"namespace\":\"shop\",\"annotations\":{\"diagport.dev/inject\":\"true\",\"note\":\"%s\"}},"
		"\"spec\":{\"containers\":[{\"name\":\"orders\",\"image\":\"r/orders:2\",\"volumeMounts\":[{\"name\":"
		"\"kube-api-access-%s\",\"mountPath\":\"/var/run/secrets/kubernetes.io/serviceaccount\",\"readOnly\":true}]}],"
		"\"volumes\":[{\"name\":\"kube-api-access-%s\",\"projected\":{\"sources\":[{\"serviceAccountToken\":"
		"{\"path\":\"token\"}}]}}]}}}}",
		uid, note, tok1, tok2);
}

static struct inj_opts opts;

/* Answer body with cfg (cache c, namespace flag ns); 0 or the error. *out gets the answer (after a prefix). */
static int admit(struct rcache *c, bool ns, const char *body, char **answer, enum review_outcome *o)
{
	struct review_config cfg = { .base = &opts, .max_body = 1 << 20, .cache = c, .namespace_enabled = ns };
	struct err_msg em;
	struct buf out;
	int rc;

	buf_init(&out, 1 << 24);
	buf_puts(&out, "PREFIX"); /* the answer is appended: the cache must not assume it starts at 0 */
	rc = review_admit(&cfg, body, strlen(body), &out, o, &em);
	*answer = rc == 0 ? mem_strdup(out.data + 6) : NULL;
	buf_free(&out);
	return rc;
}

static unsigned long long hits(struct rcache *c)
{
	unsigned long long h, m;

	rcache_stats(c, &h, &m);
	return h;
}

/*
 * The replica's review through the cache c and without a cache: 0 when both
 * answer the same bytes with the same outcome and the cache was hit exactly
 * when want_hit says; else 1 with why in t_why's words.
 */
static int replica(struct rcache *c, bool ns, const char *uid, const char *tok1, const char *tok2, const char *note,
		   bool want_hit, char *why, size_t n)
{
	char *body = review(uid, tok1, tok2, note), *a1 = NULL, *a2 = NULL;
	unsigned long long before = hits(c);
	enum review_outcome o1, o2;
	bool hit;
	int bad = 1;

	if (admit(c, ns, body, &a1, &o1) != 0 || admit(NULL, ns, body, &a2, &o2) != 0)
		snprintf(why, n, "uid %s: review failed", uid);
	else if ((hit = hits(c) > before) != want_hit)
		snprintf(why, n, "uid %s, tokens %s %s, note %s: cache %s, want %s", uid, tok1, tok2, note,
			 hit ? "hit" : "miss", want_hit ? "hit" : "miss");
	else if (strcmp(a1, a2) != 0 || o1 != o2)
		snprintf(why, n, "uid %s: cached %.300s\nfull   %.300s", uid, a1, a2);
	else
		bad = 0;
	mem_free(a1);
	mem_free(a2);
	mem_free(body);
	return bad;
}

#define HIT true
#define MISS false
/* One replica through the cache and without it; the case stops at the first that differs. */
#define REPLICA(c, ns, uid, t1, t2, note, want)                                       \
	do {                                                                          \
		char w_[800];                                                         \
		if (replica((c), (ns), (uid), (t1), (t2), (note), (want), w_, sizeof(w_))) \
			T_FAIL("%s", w_);                                             \
	} while (0)

static void replicas_hit_and_match(void)
{
	struct rcache *c = rcache_new();

	REPLICA(c, false, "\"0b1f-aaaa\"", "4xq2z", "4xq2z", "n", MISS);
	/* another replica: new uid (another length too), new generated token name */
	REPLICA(c, false, "\"7c2e9d41-5be0-4c1d-8a55-31f0e2d9c6b7\"", "b9k7m", "b9k7m", "n", HIT);
	T_CHECK(hits(c) == 1);
	rcache_free(c);
}

static void different_pods_miss(void)
{
	struct rcache *c = rcache_new();

	REPLICA(c, false, "\"u1\"", "4xq2z", "4xq2z", "n", MISS);
	REPLICA(c, false, "\"u2\"", "4xq2z", "4xq2z", "m", MISS);  /* one byte of the pod differs */
	REPLICA(c, true, "\"u3\"", "4xq2z", "4xq2z", "n", MISS);   /* the namespace-enabled path: another key */
	REPLICA(c, false, "\"u4\"", "4xq2z", "4xq2z", "nn", MISS); /* longer */
	rcache_free(c);
}

static void odd_uids_and_names_are_full_reviews(void)
{
	struct rcache *c = rcache_new();

	REPLICA(c, false, "\"u1\"", "4xq2z", "4xq2z", "n", MISS);
	/* a uid with an escape: a miss, answered in full, the uid echoed as the reader decoded it */
	REPLICA(c, false, "\"u\\u0041\"", "4xq2z", "4xq2z", "n", MISS);
	/* the volume and the mount with different names: not a replica of the same template */
	REPLICA(c, false, "\"u2\"", "4xq2z", "zzzzz", "n", MISS);
	/* a name that is not a generated one (upper case) */
	REPLICA(c, false, "\"u3\"", "4XQ2Z", "4XQ2Z", "n", MISS);
	/* and a body with two different token names was not kept: its replica misses too */
	REPLICA(c, false, "\"u4\"", "4xq2z", "zzzzz", "n", MISS);
	/* the first body's replica, another generated name: a hit */
	REPLICA(c, false, "\"u5\"", "abcde", "abcde", "n", HIT);
	/* with the cache empty: a body with two names is not kept, and does not stand in for one with one name */
	rcache_clear(c);
	REPLICA(c, false, "\"u6\"", "4xq2z", "zzzzz", "n", MISS);
	REPLICA(c, false, "\"u7\"", "abcde", "abcde", "n", MISS);
	rcache_free(c);
}

static void cleared_and_bounded(void)
{
	struct rcache *c = rcache_new();

	REPLICA(c, false, "\"u1\"", "4xq2z", "4xq2z", "n", MISS);
	rcache_clear(c);
	REPLICA(c, false, "\"u1\"", "4xq2z", "4xq2z", "n", MISS);
	REPLICA(c, false, "\"u1\"", "4xq2z", "4xq2z", "n", HIT);
	/* RCACHE_ENTRIES other pods push it out */
	for (int i = 0; i < RCACHE_ENTRIES; i++) {
		char note[16];

		snprintf(note, sizeof(note), "p%d", i);
		REPLICA(c, false, "\"v\"", "4xq2z", "4xq2z", note, MISS);
	}
	REPLICA(c, false, "\"u1\"", "4xq2z", "4xq2z", "n", MISS);
	rcache_free(c);
}

static void name_in_answer_not_kept(void)
{
	struct rcache *c = rcache_new();
	struct buf out;
	const char *body = "{\"request\":{\"uid\":\"a\"},\"v\":\"kube-api-access-4xq2z\"}";
	const char *body2 = "{\"request\":{\"uid\":\"b\"},\"v\":\"kube-api-access-8mmmm\"}";
	const char *ans = "{\"uid\":\"a\",\"x\":1}";
	int tag = -1;

	buf_init(&out, 1 << 20);
	rcache_put(c, 0, body, strlen(body), 18, 3, ans, strlen(ans), 7, 3, false, 5); /* names_free false */
	T_CHECK(rcache_get(c, 0, body2, strlen(body2), &out, &tag) == 0);
	rcache_put(c, 0, body, strlen(body), 18, 3, ans, strlen(ans), 7, 3, true, 5);
	T_CHECK(rcache_get(c, 0, body2, strlen(body2), &out, &tag) == 1);
	T_STREQ(out.data, "{\"uid\":\"b\",\"x\":1}");
	T_CHECK(tag == 5);
	T_CHECK(rcache_get(c, 1, body2, strlen(body2), &out, &tag) == 0); /* another key */
	buf_free(&out);
	rcache_free(c);
}

int main(void)
{
	t_file_name = "test_rcache";
	mem_install();
	inj_opts_init(&opts);
	T_RUN(replicas_hit_and_match);
	T_RUN(different_pods_miss);
	T_RUN(odd_uids_and_names_are_full_reviews);
	T_RUN(cleared_and_bounded);
	T_RUN(name_in_answer_not_kept);
	inj_opts_free(&opts);
	return t_failed_cases ? 1 : 0;
}
