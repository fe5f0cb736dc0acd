/*
 * test_htab.c - the one hash table (common/htab.h) and the one array growth
 * (mem_grow): a table against a plain array through many puts, finds and
 * deletes (with colliding hashes, so probes and backward shifts run long),
 * iteration, and growth's doubling and first size.
 */
#include <stdlib.h>

#include "htab.h"
#include "mem.h"
#include "t.h"

struct ent {
	uint32_t key;
	uint32_t val;
};

static bool ent_eq(const void *slot, const void *key)
{
	return ((const struct ent *)slot)->key == *(const uint32_t *)key;
}

/* Few distinct hashes for many keys: runs of equal hashes, so deletions shift across them. */
static uint64_t weak_hash(uint32_t k)
{
	return htab_u64(k % 97);
}

static void against_array(void)
{
	enum { KEYS = 2000 };
	static uint32_t ref[KEYS]; /* 0: absent, else val */
	struct htab t;
	size_t n = 0;

	memset(ref, 0, sizeof(ref));
	htab_init(&t, sizeof(struct ent));
	srand(7);
	for (int step = 0; step < 200000; step++) {
		uint32_t k = (uint32_t)rand() % KEYS;
		struct ent *e = htab_find(&t, weak_hash(k), ent_eq, &k);

		T_CHECK((e != NULL) == (ref[k] != 0));
		if (e != NULL)
			T_CHECK(e->val == ref[k]);
		if (e == NULL && rand() % 3 != 0) {
			e = htab_put(&t, weak_hash(k));
			e->key = k;
			e->val = ref[k] = (uint32_t)step + 1;
			n++;
		} else if (e != NULL) {
			htab_del(&t, e);
			ref[k] = 0;
			n--;
		}
		T_CHECK(t.n == n);
	}
	/* every key present is found by iteration exactly once */
	size_t pos = 0, seen = 0;
	struct ent *e;

	while ((e = htab_next(&t, &pos)) != NULL) {
		T_CHECK(ref[e->key] == e->val);
		seen++;
	}
	T_CHECK(seen == n);
	T_CHECK(t.cap >= 16 && (t.cap & (t.cap - 1)) == 0 && n * 2 <= t.cap);
	htab_free(&t);
	T_CHECK(t.n == 0 && t.cap == 0 && t.size == sizeof(struct ent));
}

static bool str_eq(const void *slot, const void *key)
{
	return strcmp(*(char *const *)slot, key) == 0;
}

static void strings_and_zero_hash(void)
{
	struct htab t;
	const char *words[] = { "alpha", "beta", "gamma", "" };
	char **s;

	htab_init(&t, sizeof(char *));
	T_CHECK(htab_find(&t, 1, str_eq, "alpha") == NULL); /* empty table */
	for (size_t i = 0; i < 4; i++) {
		s = htab_put(&t, htab_bytes(words[i], strlen(words[i])));
		*s = (char *)words[i];
	}
	for (size_t i = 0; i < 4; i++) {
		s = htab_find(&t, htab_bytes(words[i], strlen(words[i])), str_eq, words[i]);
		T_CHECK(s != NULL && *s == words[i]);
	}
	T_CHECK(htab_find(&t, htab_bytes("delta", 5), str_eq, "delta") == NULL);
	/* a caller's own hash of 0 is stored and found as 1 (0 marks an empty slot) */
	s = htab_put(&t, 0);
	*s = "zero";
	T_CHECK(htab_find(&t, 0, str_eq, "zero") != NULL);
	T_CHECK(htab_bytes("", 0) != 0 && htab_u64(0) != 0);
	htab_free(&t);
}

static void growth(void)
{
	int *a = NULL;
	size_t cap = 0;

	MEM_GROW(a, cap, 1, 8);
	T_CHECK(cap == 8);
	MEM_GROW(a, cap, 8, 8);
	T_CHECK(cap == 8); /* enough: unchanged */
	MEM_GROW(a, cap, 9, 8);
	T_CHECK(cap == 16);
	MEM_GROW(a, cap, 100, 8);
	T_CHECK(cap == 128);
	for (int i = 0; i < 100; i++)
		a[i] = i;
	T_CHECK(a[99] == 99);
	mem_free(a);
	cap = 0;
	a = NULL;
	MEM_GROW(a, cap, 5, 0); /* no first size: from 1 */
	T_CHECK(cap == 8);
	mem_free(a);
}

int main(void)
{
	t_file_name = "test_htab";
	T_RUN(against_array);
	T_RUN(strings_and_zero_hash);
	T_RUN(growth);
	return t_failed_cases ? 1 : 0;
}
