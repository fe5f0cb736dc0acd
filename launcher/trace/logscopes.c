/*
 * logscopes.c - the open logging scopes of one /logs stream, by activity ID
 * (logscopes.h).
 *
 * An open-addressing table with linear probing, grown by doubling while
 * under three quarters full and emptied by backward shifting (no
 * tombstones), so a stream that opens and closes scopes for hours never
 * slows down. A slot holds the ID, the parent's ID and the argument text;
 * a slot is empty when its text is NULL. The table starts empty and small:
 * a stream whose app opens no scope costs nothing.
 */
#include "logscopes.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

struct slot {
	uint8_t id[16], parent[16];
	char *json; /* owned; NULL: the slot is empty */
};

struct logscopes {
	struct slot *slot;
	size_t cap;   /* 0, or a power of two */
	size_t n;     /* scopes kept */
	size_t bytes; /* their argument text */
};

static const uint8_t zero_id[16];

/* Activity IDs are paths (a prefix shared by a whole process), not random: every byte counts. */
static size_t hash(const uint8_t id[16])
{
	uint64_t a, b;

	memcpy(&a, id, 8);
	memcpy(&b, id + 8, 8);
	a ^= b * 0x9e3779b97f4a7c15ull;
	a ^= a >> 32;
	a *= 0xd6e8feb86659fd93ull;
	a ^= a >> 32;
	return (size_t)a;
}

struct logscopes *logscopes_new(void)
{
	return mem_zalloc(sizeof(struct logscopes));
}

void logscopes_free(struct logscopes *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->cap; i++)
		free(s->slot[i].json);
	free(s->slot);
	free(s);
}

/* The slot holding id, or NULL. The table is never full, so a probe ends at an empty slot. */
static struct slot *find(const struct logscopes *s, const uint8_t id[16])
{
	size_t mask = s->cap - 1;

	if (s->cap == 0 || memcmp(id, zero_id, 16) == 0)
		return NULL;
	for (size_t i = hash(id) & mask;; i = (i + 1) & mask) {
		if (s->slot[i].json == NULL)
			return NULL;
		if (memcmp(s->slot[i].id, id, 16) == 0)
			return &s->slot[i];
	}
}

/* Put a slot whose id is not in the table into its first free place. */
static void place(struct logscopes *s, const struct slot *from)
{
	size_t mask = s->cap - 1, i = hash(from->id) & mask;

	while (s->slot[i].json != NULL)
		i = (i + 1) & mask;
	s->slot[i] = *from;
}

static void grow(struct logscopes *s)
{
	struct slot *old = s->slot;
	size_t old_cap = s->cap;

	s->cap = old_cap ? old_cap * 2 : 64;
	s->slot = mem_array(s->cap, sizeof(*s->slot));
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].json != NULL)
			place(s, &old[i]);
	free(old);
}

int logscopes_start(struct logscopes *s, const uint8_t id[16], const uint8_t parent[16], const char *json)
{
	size_t len = strlen(json);
	struct slot add;

	if (memcmp(id, zero_id, 16) == 0)
		return -1;
	logscopes_stop(s, id);
	if (s->n >= LOGSCOPES_MAX || len > LOGSCOPES_MAX_BYTES - s->bytes)
		return -1;
	if ((s->n + 1) * 4 > s->cap * 3)
		grow(s);
	memcpy(add.id, id, 16);
	memcpy(add.parent, parent, 16);
	add.json = mem_strdup(json);
	place(s, &add);
	s->n++;
	s->bytes += len;
	return 0;
}

void logscopes_stop(struct logscopes *s, const uint8_t id[16])
{
	struct slot *at = find(s, id);
	size_t mask = s->cap - 1, i, j;

	if (at == NULL)
		return;
	s->n--;
	s->bytes -= strlen(at->json);
	free(at->json);
	/* Backward shift: move up each later slot of the run that may live at the hole (its home is not
	 * between the hole and it), so that every probe still reaches its slot before an empty one. */
	i = (size_t)(at - s->slot);
	for (j = (i + 1) & mask; s->slot[j].json != NULL; j = (j + 1) & mask) {
		size_t home = hash(s->slot[j].id) & mask;

		if (((j - home) & mask) >= ((j - i) & mask)) {
			s->slot[i] = s->slot[j];
			i = j;
		}
	}
	s->slot[i].json = NULL;
}

size_t logscopes_chain(const struct logscopes *s, const uint8_t id[16], const char *out[LOGSCOPES_MAX_DEPTH])
{
	const struct slot *seen[LOGSCOPES_MAX_DEPTH], *at = find(s, id);
	size_t n = 0;

	while (at != NULL && n < LOGSCOPES_MAX_DEPTH) {
		for (size_t k = 0; k < n; k++)
			if (seen[k] == at)
				goto cycle;
		seen[n++] = at;
		at = find(s, at->parent);
	}
cycle:
	for (size_t k = 0; k < n; k++)
		out[k] = seen[n - 1 - k]->json;
	return n;
}
