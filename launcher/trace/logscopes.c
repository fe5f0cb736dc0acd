/*
 * logscopes.c - the open logging scopes of one /logs stream, by activity ID
 * (logscopes.h).
 *
 * A hash table (common/htab.h: it grows by doubling and deletes by backward
 * shift, no tombstones), so a stream that opens and closes scopes for hours
 * never slows down. A slot holds the ID, the parent's ID and the argument
 * text. The table starts empty: a stream whose app opens no scope costs
 * nothing.
 */
#include "logscopes.h"

#include <stdlib.h>
#include <string.h>

#include "htab.h"
#include "mem.h"

struct slot {
	uint8_t id[16], parent[16];
	char *json; /* owned */
};

struct logscopes {
	struct htab tab; /* of struct slot */
	size_t bytes;    /* their argument text */
};

static const uint8_t zero_id[16];

/* Activity IDs are paths (a prefix shared by a whole process), not random: every byte counts. */
static uint64_t hash(const uint8_t id[16])
{
	return htab_bytes(id, 16);
}

static bool same_id(const void *slot, const void *id)
{
	return memcmp(((const struct slot *)slot)->id, id, 16) == 0;
}

struct logscopes *logscopes_new(void)
{
	struct logscopes *s = mem_zalloc(sizeof(struct logscopes));

	htab_init(&s->tab, sizeof(struct slot));
	return s;
}

void logscopes_free(struct logscopes *s)
{
	struct slot *at;
	size_t pos = 0;

	if (s == NULL)
		return;
	while ((at = htab_next(&s->tab, &pos)) != NULL)
		free(at->json);
	htab_free(&s->tab);
	free(s);
}

/* The slot holding id, or NULL. */
static struct slot *find(const struct logscopes *s, const uint8_t id[16])
{
	if (memcmp(id, zero_id, 16) == 0)
		return NULL;
	return htab_find(&s->tab, hash(id), same_id, id);
}

int logscopes_start(struct logscopes *s, const uint8_t id[16], const uint8_t parent[16], const char *json)
{
	size_t len = strlen(json);
	struct slot *add;

	if (memcmp(id, zero_id, 16) == 0)
		return -1;
	logscopes_stop(s, id);
	if (s->tab.n >= LOGSCOPES_MAX || len > LOGSCOPES_MAX_BYTES - s->bytes)
		return -1;
	add = htab_put(&s->tab, hash(id));
	memcpy(add->id, id, 16);
	memcpy(add->parent, parent, 16);
	add->json = mem_strdup(json);
	s->bytes += len;
	return 0;
}

void logscopes_stop(struct logscopes *s, const uint8_t id[16])
{
	struct slot *at = find(s, id);

	if (at == NULL)
		return;
	s->bytes -= strlen(at->json);
	free(at->json);
	htab_del(&s->tab, at);
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
