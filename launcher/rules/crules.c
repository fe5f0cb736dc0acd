/*
 * crules.c - the collection rules' engine (crules.h).
 *
 * One instance per rule and attached runtime its filters match, made by a
 * watcher thread that looks at the port every 250 ms (which also ends
 * RuleDuration, lifts throttling and joins finished action lists). Readings
 * and events arrive on the counters sessions' threads (metrics.h's
 * listener) and go to the instances of their runtime under the one mutex.
 *
 * States and limits are dotnet-monitor's (CollectionRulePipelineState):
 * Running until the trigger is satisfied; then, unless ActionCount actions
 * lists ran within ActionCountSlidingWindowDuration (Throttled), the action
 * list runs (ActionExecuting) on a thread of its own, its captures through
 * capture_run to their egress providers, one after another, each waited for
 * unless WaitForCompletion is false; back to Running with a fresh trigger,
 * or Finished: after a Startup trigger's one run, when ActionCount is
 * reached without a sliding window, or at RuleDuration.
 *
 * What limits a rule outlives the agent is kept in a file per runtime
 * (crules_hist.c); a trigger's half-seen window is not kept (it starts
 * again from fresh readings). The filters are crules_match.c's, the action
 * list crules_act.c's, /collectionrules crules_api.c's (crules_int.h says
 * how they layer).
 */
#include "crules_int.h"

#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"
#include "launcher/runtime/target.h"
#include "launcher/runtime/watcher.h"

#define WATCH_MS 250

/* ---- state, under mu ---- */

static void log_inst(const char *msg, const char *event, const struct inst *in, const char *k, const char *v)
{
	log_info(msg, LOG_STR("event", event), LOG_STR("rule", in->r->name), LOG_UINT("pid", in->pid),
		 LOG_STR("uid", in->uid), LOG_STR(k ? k : "reason", v));
}

static void set_state(struct inst *in, enum istate s, const char *reason)
{
	in->state = s;
	in->reason = reason;
}

static void finish(struct inst *in, const char *reason)
{
	set_state(in, IS_FINISHED, reason);
	crules_hist_save(in->e, in);
	log_inst("collection rule finished", "rule-finished", in, "reason", reason);
}

/* Executions older than the sliding window forgotten; whether the window holds ActionCount of them. */
bool crules_throttled(struct inst *in, long long now)
{
	const struct crule_limits *l = &in->r->lim;
	size_t k = 0;

	if (l->window_ms == 0)
		return false;
	while (k < in->n_exec && in->exec[k] < now - l->window_ms)
		k++;
	memmove(in->exec, in->exec + k, (in->n_exec - k) * sizeof(*in->exec));
	in->n_exec -= k;
	return in->n_exec >= l->action_count;
}

static void trigger_reset(struct inst *in)
{
	in->run.have = false;
	if (in->asp)
		aspnet_trig_reset(in->asp);
}

static void *run_actions(void *arg);

/* The trigger is satisfied: run the action list, or say why not. */
static void fire(struct inst *in)
{
	long long now = clock_ms();

	if (in->state == IS_FINISHED || in->state == IS_EXECUTING)
		return;
	if (in->th_started) { /* the last list's thread, past its last lock: it ends at once */
		pthread_join(in->th, NULL);
		in->th_started = false;
	}
	log_inst("collection rule triggered", "rule-triggered", in, "trigger", in->r->trig.type_name);
	if (crules_throttled(in, now)) {
		if (in->state != IS_THROTTLED)
			log_inst("collection rule throttled", "rule-throttled", in, "reason", REASON_THROTTLED);
		set_state(in, IS_THROTTLED, REASON_THROTTLED);
		trigger_reset(in);
		return;
	}
	in->exec = mem_realloc(in->exec, (in->n_exec + 1) * sizeof(*in->exec));
	in->exec[in->n_exec++] = now;
	in->lifetime++;
	set_state(in, IS_EXECUTING, REASON_EXECUTING);
	crules_hist_save(in->e, in); /* before the actions: an agent that dies while they run does not run them again */
	atomic_store(&in->th_done, false);
	in->th_started = pthread_create(&in->th, NULL, run_actions, in) == 0;
	if (!in->th_started) {
		atomic_store(&in->th_done, true);
		log_inst("collection rule action failed", "rule-action-failed", in, "error", "cannot start a thread");
	}
}

/* The action list ended (its own thread, under mu): Running with a fresh trigger, or Finished. */
static void actions_ended(struct inst *in)
{
	if (in->finish_after) {
		finish(in, in->finish_reason);
		return;
	}
	if (in->r->lim.window_ms == 0 && in->n_exec >= in->r->lim.action_count) {
		finish(in, REASON_COUNT);
		return;
	}
	set_state(in, IS_RUNNING, REASON_RUNNING);
	trigger_reset(in);
}

static void *run_actions(void *arg)
{
	struct inst *in = arg;

	crules_act_run(in);
	pthread_mutex_lock(&in->e->mu); /* the state says so at once, not at the watcher's next look */
	actions_ended(in);
	pthread_mutex_unlock(&in->e->mu);
	atomic_store(&in->th_done, true);
	return NULL;
}

/* ---- triggers ---- */

bool crules_counter_step(struct crule_run *run, const struct crule_trigger *t, unsigned interval_s, double v,
			 int64_t ts_ms)
{
	int64_t interval = (int64_t)interval_s * 1000;

	if ((t->has_gt && !(v > t->gt)) || (t->has_lt && !(v < t->lt))) {
		run->have = false;
		return false;
	}
	if (!run->have || run->latest_ms + interval * 3 / 2 < ts_ms) {
		run->have = true;
		run->target_ms = ts_ms - interval + t->window_ms;
	}
	run->latest_ms = ts_ms;
	return run->latest_ms >= run->target_ms;
}

/* A histogram's percentile from "0.5=1.2;0.95=3;0.99=4"; false when it is not there. */
static bool quantile(const char *q, int pct, double *out)
{
	while (q && *q) {
		char *end;
		double k = strtod(q, &end), v;

		if (end == q || *end != '=')
			return false;
		q = end + 1;
		v = strtod(q, &end);
		if (end == q)
			return false;
		if ((int)(k * 100 + 0.5) == pct) {
			*out = v;
			return true;
		}
		q = end + (*end == ';');
	}
	return false;
}

void crules_reading(void *ctx, const uint8_t cookie[16], const struct msample *r, int64_t ts_ms)
{
	struct crules *e = ctx;

	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];
		const struct crule_trigger *t = &in->r->trig;
		double v = r->value;

		if (memcmp(in->cookie, cookie, 16) != 0 || (in->state != IS_RUNNING && in->state != IS_THROTTLED))
			continue;
		if (!((t->type == CRT_EVENT_COUNTER && !r->meter) || (t->type == CRT_EVENT_METER && r->meter)) ||
		    strcasecmp(t->provider, r->provider) != 0 || strcmp(t->name, r->name) != 0)
			continue;
		if (r->kind == MS_SUMMARY && (t->percentile < 0 || !quantile(r->quantiles, t->percentile, &v)))
			continue;
		if (r->kind != MS_SUMMARY && t->percentile >= 0)
			continue;
		if (crules_counter_step(&in->run, t, e->cfg.interval_s, v, ts_ms))
			fire(in);
	}
	pthread_mutex_unlock(&e->mu);
}

void crules_event(void *ctx, const uint8_t cookie[16], const struct nettrace_event *ev, const struct evpayload *p,
		  int64_t ts_ms)
{
	struct crules *e = ctx;
	struct aspnet_req req;

	if (aspnet_req_event(ev, p, &req) != 1)
		return;
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];

		if (in->asp == NULL || memcmp(in->cookie, cookie, 16) != 0 ||
		    (in->state != IS_RUNNING && in->state != IS_THROTTLED))
			continue;
		if (aspnet_trig_feed(in->asp, &req, ts_ms))
			fire(in);
	}
	pthread_mutex_unlock(&e->mu);
}

/* ---- instances ---- */

static struct inst *inst_new(struct crules *e, const struct crule *r, const struct port_runtime *p)
{
	struct inst *in = mem_zalloc(sizeof(*in));
	size_t len;
	const char *name = target_name(p, &len);

	in->e = e;
	in->r = r;
	memcpy(in->cookie, p->cookie, 16);
	in->pid = p->pid;
	target_uid(p, in->uid);
	in->pname = mem_strndup(name, len);
	in->start_ms = clock_ms();
	set_state(in, IS_RUNNING, REASON_RUNNING);
	crules_hist_load(e, in);
	if (r->trig.type == CRT_ASP_COUNT || r->trig.type == CRT_ASP_DURATION || r->trig.type == CRT_ASP_STATUS) {
		struct aspnet_trig_config tc;
		struct err_msg em;

		crules_asp_config(&r->trig, &tc);
		if (aspnet_trig_new(&tc, &in->asp, &em) != 0) /* checked when the rule was read */
			DP_FATAL("collection rule %s: %s", r->name, em.text);
	}
	return in;
}

static void inst_free(struct inst *in)
{
	if (in->th_started) {
		atomic_store(&in->cancel, true);
		pthread_join(in->th, NULL);
	}
	aspnet_trig_free(in->asp);
	free(in->exec);
	free(in->pname);
	free(in);
}

/* Timers and finished action lists of one instance. Under mu. */
static void tick(struct inst *in, long long now)
{
	const struct crule_limits *l = &in->r->lim;

	if (in->th_started && atomic_load(&in->th_done)) { /* it set the state itself */
		pthread_join(in->th, NULL);
		in->th_started = false;
	}
	if (in->state == IS_FINISHED)
		return;
	if (l->rule_duration_ms && now - in->start_ms >= l->rule_duration_ms) {
		if (in->state == IS_EXECUTING) {
			in->finish_after = true;
			in->finish_reason = REASON_DURATION;
		} else {
			finish(in, REASON_DURATION);
			return;
		}
	}
	if (in->state == IS_THROTTLED && !crules_throttled(in, now))
		set_state(in, IS_RUNNING, REASON_RUNNING);
	if (in->asp && in->state != IS_EXECUTING && aspnet_trig_heartbeat(in->asp, clock_unix_ms()))
		fire(in);
}

static void watch_once(void *arg)
{
	struct crules *e = arg;
	struct port_runtime *rt;
	size_t n = port_list(e->cfg.port, &rt), k = 0;
	long long now = clock_ms();
	struct inst **gone = NULL;
	size_t n_gone = 0;
	bool filters = false;

	for (size_t r = 0; r < e->cfg.set->n; r++)
		filters = filters || crules_needs_info(&e->cfg.set->r[r]);
	for (size_t i = 0; filters && i < n; i++)
		crules_cmdline_refresh(e, &rt[i], now);
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++)
		e->in[i]->seen = false;
	for (size_t i = 0; i < n; i++)
		for (size_t r = 0; r < e->cfg.set->n; r++) {
			const struct crule *rule = &e->cfg.set->r[r];
			struct inst *in = NULL;

			for (size_t j = 0; j < e->n && !in; j++)
				if (e->in[j]->r == rule && memcmp(e->in[j]->cookie, rt[i].cookie, 16) == 0)
					in = e->in[j];
			if (in) {
				in->seen = true;
				continue;
			}
			if (crules_needs_info(rule)) {
				bool ready = false;
				const char *cl;

				if (!rt[i].have_info)
					continue;
				cl = crules_cmdline_of(e, &rt[i], &ready);
				if (!ready || !crules_filters_match(rule, &rt[i], cl))
					continue;
			} else if (!crules_filters_match(rule, &rt[i], NULL)) {
				continue;
			}
			in = inst_new(e, rule, &rt[i]);
			in->seen = true;
			e->in = mem_realloc(e->in, (e->n + 1) * sizeof(*e->in));
			e->in[e->n++] = in;
			log_inst("collection rule started", "rule-started", in, "trigger", rule->trig.type_name);
			if (rule->trig.type == CRT_STARTUP && in->state != IS_FINISHED) {
				in->finish_after = true;
				in->finish_reason = REASON_STARTUP;
				fire(in);
			}
		}
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];

		if (!in->seen) { /* its runtime went away: its actions are cancelled, it is forgotten */
			if (e->cfg.state_dir) {
				char *path = crules_hist_path(e, in->uid);

				unlink(path);
				free(path);
			}
			atomic_store(&in->cancel, true);
			gone = mem_realloc(gone, (n_gone + 1) * sizeof(*gone));
			gone[n_gone++] = in;
			continue;
		}
		tick(in, now);
		e->in[k++] = in;
	}
	e->n = k;
	k = 0;
	for (size_t i = 0; i < e->n_rt; i++) { /* the command lines of runtimes still here */
		bool here = false;

		for (size_t j = 0; j < n && !here; j++)
			here = memcmp(rt[j].cookie, e->rt[i].cookie, 16) == 0;
		if (here)
			e->rt[k++] = e->rt[i];
		else
			free(e->rt[i].cmdline);
	}
	e->n_rt = k;
	if (e->unclaimed && now - e->started_ms >= STATE_CLAIM_MS)
		crules_hist_sweep(e);
	pthread_mutex_unlock(&e->mu);
	for (size_t i = 0; i < n_gone; i++) /* joined outside the lock: an action list may be waiting for it */
		inst_free(gone[i]);
	free(gone);
	port_list_free(rt, n);
}

struct crules *crules_start(const struct crules_config *cfg)
{
	struct crules *e;

	if (cfg->set == NULL || cfg->set->n == 0)
		return NULL;
	e = mem_zalloc(sizeof(*e));
	e->cfg = *cfg;
	if (e->cfg.interval_s == 0)
		e->cfg.interval_s = METRICS_DEFAULT_INTERVAL_S;
	e->started_ms = clock_ms();
	crules_hist_scan(e);
	pthread_mutex_init(&e->mu, NULL);
	e->watcher = watcher_start(WATCH_MS, watch_once, e);
	return e;
}

void crules_free(struct crules *e)
{
	if (e == NULL)
		return;
	watcher_stop(e->watcher);
	for (size_t i = 0; i < e->n; i++)
		inst_free(e->in[i]);
	free(e->in);
	for (size_t i = 0; i < e->n_unclaimed; i++)
		free(e->unclaimed[i]);
	free(e->unclaimed);
	for (size_t i = 0; i < e->n_rt; i++)
		free(e->rt[i].cmdline);
	free(e->rt);
	pthread_mutex_destroy(&e->mu);
	free(e);
}

