/*
 * crules_asp.c - the ASP.NET triggers (crules_asp.h). Placeholder until the
 * request events' reader lands: never satisfied.
 */
#include "crules_asp.h"

#include <stdlib.h>

#include "mem.h"

struct crules_asp {
	const struct crule_trigger *t;
};

int crules_asp_provider(struct trace_config *c, struct err_msg *em)
{
	return err_set(em, DP_EUNSUPPORTED, "the ASP.NET request events are not read yet");
}

struct crules_asp *crules_asp_new(const struct crule_trigger *t)
{
	struct crules_asp *a = mem_zalloc(sizeof(*a));

	a->t = t;
	return a;
}

void crules_asp_free(struct crules_asp *a)
{
	free(a);
}

void crules_asp_reset(struct crules_asp *a)
{
}

bool crules_asp_feed(struct crules_asp *a, const struct nettrace_event *e, const struct evpayload *p, int64_t ts_ms)
{
	return false;
}

bool crules_asp_heartbeat(struct crules_asp *a, int64_t now_ms)
{
	return false;
}
