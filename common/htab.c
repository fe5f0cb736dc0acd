/*
 * htab.c - open addressing with linear probing and backward-shift deletion
 * (see htab.h). The stored hashes make growth and deletion independent of the
 * caller's key: a slot's home is its hash masked by the capacity.
 */
#include "htab.h"

#include <string.h>

#include "mem.h"

#define HTAB_FIRST 16 /* slots at the first put */

void htab_init(struct htab *t, size_t size)
{
	*t = (struct htab){ .size = size };
}

void htab_free(struct htab *t)
{
	mem_free(t->slot);
	mem_free(t->hash);
	htab_init(t, t->size);
}

static unsigned char *at(const struct htab *t, size_t i)
{
	return t->slot + i * t->size;
}

void *htab_find(const struct htab *t, uint64_t h, bool (*eq)(const void *slot, const void *key), const void *key)
{
	size_t mask = t->cap - 1;

	if (t->cap == 0)
		return NULL;
	h = h ? h : 1;
	for (size_t i = (size_t)h & mask; t->hash[i] != 0; i = (i + 1) & mask)
		if (t->hash[i] == h && eq(at(t, i), key))
			return at(t, i);
	return NULL;
}

/* The first empty slot on h's probe, marked with h. */
static size_t place(struct htab *t, uint64_t h)
{
	size_t mask = t->cap - 1, i = (size_t)h & mask;

	while (t->hash[i] != 0)
		i = (i + 1) & mask;
	t->hash[i] = h;
	return i;
}

static void grow(struct htab *t)
{
	struct htab old = *t;

	t->cap = old.cap ? old.cap * 2 : HTAB_FIRST;
	t->slot = mem_array(t->cap, t->size);
	t->hash = mem_array(t->cap, sizeof(*t->hash));
	for (size_t i = 0; i < old.cap; i++)
		if (old.hash[i] != 0)
			memcpy(at(t, place(t, old.hash[i])), at(&old, i), t->size);
	mem_free(old.slot);
	mem_free(old.hash);
}

void *htab_put(struct htab *t, uint64_t h)
{
	unsigned char *s;

	if ((t->n + 1) * 2 > t->cap)
		grow(t);
	s = at(t, place(t, h ? h : 1));
	memset(s, 0, t->size);
	t->n++;
	return s;
}

void htab_del(struct htab *t, void *slot)
{
	size_t mask = t->cap - 1, i = (size_t)((unsigned char *)slot - t->slot) / t->size, j;

	/* Move up each later slot of the run that may live at the hole (its home is not between the hole and
	 * it), so that every probe still reaches its slot before an empty one. */
	for (j = (i + 1) & mask; t->hash[j] != 0; j = (j + 1) & mask) {
		size_t home = (size_t)t->hash[j] & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			memcpy(at(t, i), at(t, j), t->size);
			t->hash[i] = t->hash[j];
			i = j;
		}
	}
	t->hash[i] = 0;
	t->n--;
}

void *htab_next(const struct htab *t, size_t *pos)
{
	while (*pos < t->cap) {
		size_t i = (*pos)++;

		if (t->hash[i] != 0)
			return at(t, i);
	}
	return NULL;
}

/* A final mix (splitmix64's) so that the low bits, which pick the home slot, depend on every input bit. */
uint64_t htab_u64(uint64_t x)
{
	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	x ^= x >> 31;
	return x ? x : 1;
}

uint64_t htab_bytes(const void *p, size_t n)
{
	const unsigned char *b = p;
	uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a, then the mix: FNV's low bits alone spread poorly */

	for (size_t i = 0; i < n; i++)
		h = (h ^ b[i]) * 0x100000001b3ull;
	return htab_u64(h);
}
