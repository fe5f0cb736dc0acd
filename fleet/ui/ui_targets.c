/*
 * ui_targets.c - the process list of `diagport ui`: the targets found as
 * the command line says (Kubernetes, ECS, static), every agent asked for its
 * processes as `ps` asks (ps.c's fleet_ps_list), again every UI_REFRESH_MS
 * or when the page asks, on a thread of its own. The page is answered from
 * the newest list at once, never made to wait for 200 agents.
 *
 * Each list is a snapshot that owns its set (the agents' tokens, the
 * port-forward dialer): a capture started on one keeps it, by reference,
 * until it ends, while newer lists replace it for everything else.
 */
#include "ui_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fleet/run.h"
#include "mem.h"

static void snap_free(struct ui_snap *s)
{
	fleet_set_free(&s->set);
	json_decref(s->doc);
	free(s);
}

void ui_snap_put(struct ui_snap *s)
{
	if (s && atomic_fetch_sub(&s->refs, 1) == 1)
		snap_free(s);
}

struct ui_snap *ui_snap_get(struct ui *u)
{
	struct ui_snap *s;

	pthread_mutex_lock(&u->mu);
	if ((s = u->snap) != NULL)
		atomic_fetch_add(&s->refs, 1);
	pthread_mutex_unlock(&u->mu);
	return s;
}

const struct fleet_agent *ui_snap_agent(struct ui_snap *s, const char *target, struct httpd_req *r)
{
	for (size_t i = 0; s && target && i < s->set.n; i++) {
		const struct fleet_agent *a = &s->set.v[i];

		if (strcmp(a->name, target) != 0)
			continue;
		if (a->why_not) {
			httpd_problem(r, 409, "Conflict", "%s has no agent to call: %s", a->name, a->why_not);
			return NULL;
		}
		return a;
	}
	httpd_problem(r, 404, "Not Found", "no target named '%.200s' (the list may have changed: reload it)",
		      target ? target : "");
	return NULL;
}

/* A new snapshot of set (stolen): every agent asked. */
static struct ui_snap *snap_make(const struct ui *u, struct fleet_set *set)
{
	struct ui_snap *s = mem_zalloc(sizeof(*s));

	atomic_init(&s->refs, 1);
	s->set = *set;
	memset(set, 0, sizeof(*set));
	s->doc = fleet_ps_list(&s->set, u->o->parallel);
	return s;
}

static void publish(struct ui *u, struct ui_snap *s, char *error)
{
	struct ui_snap *old;

	pthread_mutex_lock(&u->mu);
	old = u->snap;
	if (s)
		u->snap = s;
	free(u->refresh_error);
	u->refresh_error = error;
	clock_rfc3339(u->refreshed_at, 3);
	pthread_mutex_unlock(&u->mu);
	if (s)
		ui_snap_put(old);
}

static void *refresher_main(void *arg)
{
	struct ui *u = arg;

	for (;;) {
		struct timespec until;
		struct fleet_set set = { 0 };
		struct err_msg em;

		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_sec += UI_REFRESH_MS / 1000;
		pthread_mutex_lock(&u->mu);
		while (!u->stopping && !u->refresh_now)
			if (pthread_cond_timedwait(&u->cv, &u->mu, &until) == ETIMEDOUT)
				break;
		u->refresh_now = false;
		if (u->stopping) {
			pthread_mutex_unlock(&u->mu);
			return NULL;
		}
		pthread_mutex_unlock(&u->mu);
		em.text[0] = '\0';
		if (u->o->discover(u->o->discover_ctx, &set, &em) != 0) {
			fleet_set_free(&set);
			fleet_safe_text(em.text);
			fprintf(stderr, "diagport ui: finding the targets again failed (the last list is kept): %s\n", em.text);
			publish(u, NULL, mem_strdup(em.text[0] ? em.text : "the targets could not be found"));
			continue;
		}
		publish(u, snap_make(u, &set), NULL);
	}
}

void ui_targets_start(struct ui *u, struct fleet_set *first)
{
	publish(u, snap_make(u, first), NULL);
	if (pthread_create(&u->refresher, NULL, refresher_main, u) != 0)
		DP_FATAL("pthread_create failed");
}

void ui_targets_stop(struct ui *u)
{
	pthread_mutex_lock(&u->mu);
	u->stopping = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	pthread_join(u->refresher, NULL);
	ui_snap_put(u->snap);
	u->snap = NULL;
	free(u->refresh_error);
	u->refresh_error = NULL;
}

void ui_route_processes(struct ui *u, struct httpd_req *r)
{
	json_t *doc;

	pthread_mutex_lock(&u->mu);
	doc = u->snap ? json_deep_copy(u->snap->doc) : json_pack("{s:[]}", "items"); /* none yet: before the URL is given */
	json_object_set_new(doc, "refreshedAt", json_string(u->refreshed_at));
	if (u->refresh_error)
		json_object_set_new(doc, "refreshError", json_string(u->refresh_error));
	pthread_mutex_unlock(&u->mu);
	httpd_send_json(r, 200, doc);
}

void ui_route_refresh(struct ui *u, struct httpd_req *r)
{
	pthread_mutex_lock(&u->mu);
	u->refresh_now = true;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	httpd_send(r, 202, "application/json; charset=utf-8", "{}", 2);
}
