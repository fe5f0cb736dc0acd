/*
 * crules_api.c - /collectionrules and /collectionrules/NAME: the state of
 * each rule on one process, in dotnet-monitor's shape (state, stateReason;
 * with a name, its occurrences, limits and countdowns too).
 */
#include "crules_int.h"

#include <jansson.h>
#include <string.h>
#include <strings.h>

#include "clock.h"
#include "launcher/runtime/target.h"

static json_t *timespan_or_null(long long ms)
{
	char t[40];

	if (ms < 0)
		return json_null();
	crules_timespan_text(t, sizeof(t), ms);
	return json_string(t);
}

static json_t *describe(struct inst *in, bool detailed, long long now)
{
	json_t *o = json_object();
	const struct crule_limits *l = &in->r->lim;
	long long countdown = -1, left = -1;

	if (in->state != IS_FINISHED)
		(void)crules_throttled(in, now); /* the window as it is now */
	json_object_set_new(o, "state", json_string(crules_state_name(in->state)));
	json_object_set_new(o, "stateReason", json_string(in->reason));
	if (!detailed)
		return o;
	if (l->window_ms && in->n_exec >= l->action_count && in->state != IS_FINISHED)
		countdown = in->exec[in->n_exec - l->action_count] + l->window_ms - now;
	if (l->rule_duration_ms && in->state != IS_FINISHED)
		left = in->start_ms + l->rule_duration_ms - now;
	json_object_set_new(o, "lifetimeOccurrences", json_integer(in->lifetime));
	json_object_set_new(o, "slidingWindowOccurrences", json_integer((json_int_t)in->n_exec));
	json_object_set_new(o, "actionCountLimit", json_integer(l->action_count));
	json_object_set_new(o, "actionCountSlidingWindowDurationLimit", timespan_or_null(l->window_ms ? l->window_ms : -1));
	json_object_set_new(o, "slidingWindowDurationCountdown", timespan_or_null(countdown < 0 ? -1 : countdown));
	json_object_set_new(o, "ruleFinishedCountdown", timespan_or_null(left < 0 ? -1 : left));
	return o;
}

void crules_route(struct crules *e, struct httpd_req *r)
{
	struct target_sel sel = { httpd_query(r, "pid"), httpd_query(r, "uid"), httpd_query(r, "name") };
	const char *path = httpd_path(r), *name = path[strlen("/collectionrules")] == '/' ? path + 17 : NULL;
	struct port_runtime p;
	struct err_msg em;
	json_t *out = NULL;
	long long now = clock_ms();
	bool found = false;

	if (e == NULL) { /* no rules: an empty map, and every name unknown */
		if (name)
			httpd_problem(r, 404, "Not Found", "there is no collection rule '%.128s' (none is configured)", name);
		else
			httpd_send_json(r, 200, json_object());
		return;
	}
	if (target_choose(e->cfg.port, &sel, &p, &em) != 0) {
		httpd_problem(r, 400, "Bad Request", "%s", em.text);
		return;
	}
	pthread_mutex_lock(&e->mu);
	if (name == NULL)
		out = json_object();
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];

		if (memcmp(in->cookie, p.cookie, 16) != 0)
			continue;
		if (name == NULL)
			json_object_set_new(out, in->r->name, describe(in, false, now));
		else if (strcasecmp(in->r->name, name) == 0 && !found) {
			out = describe(in, true, now);
			found = true;
		}
	}
	pthread_mutex_unlock(&e->mu);
	ipc_process_info_free(&p.info);
	if (name && !found) {
		httpd_problem(r, 404, "Not Found", "there is no collection rule '%.128s' for process %llu", name,
			      (unsigned long long)p.pid);
		return;
	}
	httpd_send_json(r, 200, out);
}
