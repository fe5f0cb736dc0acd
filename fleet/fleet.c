/*
 * fleet.c - the set of agents a discovery found (fleet.h): growing it,
 * ordering it, and releasing it with every string it owns.
 */
#include "fleet.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

struct fleet_agent *fleet_set_add(struct fleet_set *s)
{
	struct fleet_agent *a;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = mem_realloc(s->v, s->cap * sizeof(*s->v));
	}
	a = &s->v[s->n++];
	memset(a, 0, sizeof(*a));
	a->port = FLEET_AGENT_PORT;
	return a;
}

static void agent_free(struct fleet_agent *a)
{
	char **strs[] = { &a->name, &a->url, &a->workload, &a->namespace_, &a->pod, &a->container,
			  &a->cluster, &a->task, &a->service, &a->mode, &a->why_not };

	if (a->token) {
		mem_wipe(a->token, strlen(a->token));
		free(a->token);
	}
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		free(*strs[i]);
}

void fleet_set_free(struct fleet_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		agent_free(&s->v[i]);
	free(s->v);
	if (s->dialer && s->dialer->free)
		s->dialer->free(s->dialer);
	free(s->caller);
	memset(s, 0, sizeof(*s));
}

static int by_workload_name(const void *x, const void *y)
{
	const struct fleet_agent *a = x, *b = y;
	int c = strcmp(a->workload ? a->workload : a->name, b->workload ? b->workload : b->name);

	return c ? c : strcmp(a->name, b->name);
}

void fleet_set_sort(struct fleet_set *s)
{
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), by_workload_name);
}
