/*
 * metrics_sessions.c - the counters sessions behind /metrics and the
 * collection rules' triggers (metrics.h): a watcher thread starts one
 * counters session per attached runtime (started again when it ends while
 * its runtime stays), each session's readings go into the store
 * (metrics_store.c) and to the listener, and a runtime that goes away takes
 * its series with it.
 */
#include "metrics_int.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"
#include "launcher/runtime/watcher.h"


#define WATCH_MS 500      /* how often the port's runtimes are looked at */
#define RETRY_MS 5000     /* a session that ended while its runtime stays is started again after this */
#define REJOIN_MS 1000    /* our share refused: started again on the running session's terms after this */
#define PRIVATE_MS 10000  /* a private meter session holds the runtime: our session started again after this */

/* ---- the sessions ---- */

static int on_header(void *ctx, const struct nettrace_trace *t)
{
	struct collector *c = ctx;

	c->header = *t;
	c->have_header = true;
	return 0;
}

/* What the meter session's own events say: its interval, and whether the runtime refused our share. */
static void session_note(struct collector *c, const struct nettrace_event *e)
{
	struct metrics_note n;

	metrics_note(e, &c->pl, c->client_id, &n);
	switch (n.kind) {
	case MN_NONE:
		return;
	case MN_INTERVAL:
		if (c->meter_s > 0 && fabs(n.interval_s - c->meter_s) > 0.02 * c->meter_s)
			log_info("the runtime's meter interval changed", LOG_STR("event", "metrics-interval"),
				 LOG_UINT("pid", c->pid), LOG_NUM("seconds", n.interval_s),
				 LOG_NUM("was", c->meter_s), LOG_UINT("ours", c->m->interval_s));
		c->meter_s = n.interval_s;
		return;
	case MN_REFUSED_SHARE:
		c->join = n.want;
		/* settings it could not read (not numbers): asking again at once would be refused again */
		atomic_store(&c->restart_at, clock_ms() + (*n.want.refresh || *n.want.max_histograms ||
							   *n.want.max_time_series ? REJOIN_MS : PRIVATE_MS));
		log_warn("another tool's shared meter session runs with other settings; joining it on its terms",
			 LOG_STR("event", "metrics-rejoin"), LOG_UINT("pid", c->pid),
			 LOG_STR("refreshInterval", n.want.refresh), LOG_STR("maxHistograms", n.want.max_histograms),
			 LOG_STR("maxTimeSeries", n.want.max_time_series));
		return;
	case MN_REFUSED_PRIVATE:
		atomic_store(&c->restart_at, clock_ms() + PRIVATE_MS);
		if (!c->told_private)
			log_warn("another tool's private meter session holds the runtime; meters are retried every 10 s",
				 LOG_STR("event", "metrics-refused"), LOG_UINT("pid", c->pid),
				 LOG_STR("runningSession", n.running));
		c->told_private = true;
		return;
	}
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct collector *c = ctx;
	struct metrics *m = c->m;
	struct msample r;
	struct err_msg em;
	metrics_reading_fn reading;
	metrics_event_fn event;
	int64_t ts;

	if (e->meta->n_fields == 0 || evpayload_decode(&c->pl, e, &em) != 0)
		return 0; /* not a counter, or a payload this reader cannot read: skipped, the session goes on */
	ts = c->have_header ? nettrace_wall_ms(&c->header, e->timestamp) : clock_unix_ms();
	session_note(c, e);
	if (!metrics_sample(e, &c->pl, &r)) {
		pthread_rwlock_rdlock(&m->listen_lock);
		if ((event = m->on_event) != NULL)
			event(m->listen_ctx, c->cookie, e, &c->pl, ts);
		pthread_rwlock_unlock(&m->listen_lock);
		return 0;
	}
	if (!metrics_selected(&m->sel, &r))
		return 0;
	if (c->readings++ == 0) /* said once a session: when a runtime's counters began to flow (rules wait for them) */
		log_info("counters session reading", LOG_STR("event", "metrics-readings"), LOG_UINT("pid", c->pid),
			 LOG_STR("first", r.name));
	if (r.meter)
		r.interval_s = c->meter_s;
	metrics_per_interval(&r, m->interval_s);
	if (m->store)
		metrics_store_reading(c, &r, ts);
	pthread_rwlock_rdlock(&m->listen_lock);
	if ((reading = m->on_reading) != NULL)
		reading(m->listen_ctx, c->cookie, &r, ts);
	pthread_rwlock_unlock(&m->listen_lock);
	return 0;
}

void metrics_listen(struct metrics *m, metrics_reading_fn reading, metrics_event_fn event, void *ctx)
{
	if (m == NULL)
		return;
	pthread_rwlock_wrlock(&m->listen_lock); /* after this, no call to the old listener is under way */
	m->on_reading = reading;
	m->on_event = event;
	m->listen_ctx = ctx;
	pthread_rwlock_unlock(&m->listen_lock);
}

static void *collect_main(void *arg)
{
	struct collector *c = arg;
	struct trace_config cfg;
	struct nettrace_callbacks cb = { .trace = on_header, .event = on_event };
	struct err_msg em;
	struct metrics_meter_opts join = c->join;

	memset(&c->join, 0, sizeof(c->join)); /* the running session's terms once: the next session tries ours */
	if (metrics_trace_config_as(&c->m->sel, c->m->interval_s, c->client_id, &join, &cfg, &em) == 0) {
		int rc = 0;

		for (size_t i = 0; i < c->m->n_extra_p && rc == 0; i++) {
			const struct trace_provider *p = &c->m->extra_p[i];

			rc = trace_config_add(&cfg, p->name, p->keywords, p->level, p->args, &em);
		}
		if (rc == 0)
			rc = trace_run_cb(c->m->port, c->cookie, &cfg, -1, &c->stop, &cb, c, NULL, &em);
		trace_config_free(&cfg);
		/* a session that ends while its runtime stays is started again (watch_once): said, with why, since the
		 * collection rules see no readings meanwhile */
		if (!atomic_load(&c->stop) && !atomic_load(&c->restart_at))
			log_warn("counters session ended", LOG_STR("event", "metrics-ended"), LOG_UINT("pid", c->pid),
				 LOG_UINT("readings", c->readings), LOG_STR("error", rc ? em.text : "the stream ended"),
				 LOG_UINT("retryInSeconds", RETRY_MS / 1000));
	}
	atomic_store(&c->done, true);
	return NULL;
}

static void collector_join(struct collector *c)
{
	if (!c->started)
		return;
	atomic_store(&c->stop, true);
	pthread_join(c->th, NULL);
	c->started = false;
}

static void collector_free(struct collector *c)
{
	collector_join(c);
	evpayload_free(&c->pl);
	buf_free(&c->name);
	buf_free(&c->labels);
	free(c);
}

static void collector_start(struct collector *c)
{
	static atomic_uint serial;

	snprintf(c->client_id, sizeof(c->client_id), "%s-%u", c->m->client_id, atomic_fetch_add(&serial, 1));
	c->meter_s = 0;
	atomic_store(&c->restart_at, 0);
	atomic_store(&c->stop, false);
	atomic_store(&c->done, false);
	c->have_header = false;
	c->readings = 0;
	c->due_ms = clock_ms() + (long long)c->m->interval_s * 1000;
	c->started = pthread_create(&c->th, NULL, collect_main, c) == 0;
	if (!c->started)
		c->retry_at = clock_ms() + RETRY_MS;
}

/* One look at the port: sessions for new runtimes, restarts, and the ones that went away dropped. */
static void watch_once(void *arg)
{
	struct metrics *m = arg;
	struct port_runtime *rt;
	size_t n = port_list(m->port, &rt), k = 0;
	long long now = clock_ms();

	for (size_t i = 0; i < m->nc; i++)
		m->c[i]->seen = false;
	for (size_t i = 0; i < n; i++) {
		struct collector *c = NULL;

		for (size_t j = 0; j < m->nc && !c; j++)
			if (memcmp(m->c[j]->cookie, rt[i].cookie, 16) == 0)
				c = m->c[j];
		if (c == NULL) {
			c = mem_zalloc(sizeof(*c));
			c->m = m;
			memcpy(c->cookie, rt[i].cookie, 16);
			c->pid = rt[i].pid;
			c->retry_at = now + m->delay_ms;
			c->due_ms = c->retry_at + (long long)m->interval_s * 1000;
			buf_init(&c->name, 0);
			buf_init(&c->labels, 0);
			m->c = mem_realloc(m->c, (m->nc + 1) * sizeof(*m->c));
			m->c[m->nc++] = c;
		}
		c->seen = true;
		if (c->started && atomic_load(&c->restart_at) && now >= atomic_load(&c->restart_at)) {
			collector_join(c); /* started again below, on the terms session_note chose */
			c->retry_at = now;
		}
		if (c->started && atomic_load(&c->done)) {
			collector_join(c);
			c->retry_at = now + RETRY_MS;
		}
		if (!c->started && now >= c->retry_at)
			collector_start(c);
	}
	for (size_t i = 0; i < m->nc; i++) {
		if (m->c[i]->seen) {
			m->c[k++] = m->c[i];
			continue;
		}
		metrics_store_forget(m, m->c[i]->cookie);
		collector_free(m->c[i]);
	}
	m->nc = k;
	pthread_mutex_lock(&m->mu);
	m->first_due_ms = 0;
	for (size_t i = 0; i < m->nc; i++)
		if (m->first_due_ms == 0 || m->c[i]->due_ms < m->first_due_ms)
			m->first_due_ms = m->c[i]->due_ms;
	m->runtimes = n;
	pthread_mutex_unlock(&m->mu);
	port_list_free(rt, n);
}


/* Every source and name of from added to sel (a source already taking every name keeps doing so). */
static void selection_merge(struct metrics_selection *sel, const struct metrics_selection *from)
{
	for (size_t i = 0; from && i < from->n; i++) {
		const struct metrics_source *f = &from->s[i];
		struct metrics_source *m = NULL;

		for (size_t k = 0; k < sel->n && !m; k++)
			if (sel->s[k].meter == f->meter && strcasecmp(sel->s[k].name, f->name) == 0)
				m = &sel->s[k];
		if (m == NULL) {
			sel->s = mem_realloc(sel->s, (sel->n + 1) * sizeof(*sel->s));
			m = &sel->s[sel->n++];
			*m = (struct metrics_source){ .name = mem_strdup(f->name), .meter = f->meter };
			m->names = mem_zalloc((f->n_names ? f->n_names : 1) * sizeof(*m->names));
			for (size_t k = 0; k < f->n_names; k++)
				m->names[m->n_names++] = mem_strdup(f->names[k]);
			continue;
		}
		if (m->n_names == 0)
			continue;
		if (f->n_names == 0) { /* every name now */
			for (size_t k = 0; k < m->n_names; k++)
				free(m->names[k]);
			m->n_names = 0;
			continue;
		}
		for (size_t k = 0; k < f->n_names; k++) {
			bool have = false;

			for (size_t j = 0; j < m->n_names && !have; j++)
				have = strcmp(m->names[j], f->names[k]) == 0;
			if (!have) {
				m->names = mem_realloc(m->names, (m->n_names + 1) * sizeof(*m->names));
				m->names[m->n_names++] = mem_strdup(f->names[k]);
			}
		}
	}
}

/* What every runtime's session asks for, said once: "Name" or "Name[a,b]", comma-separated. */
static void log_selection(const struct metrics_selection *sel)
{
	struct buf list[2];

	for (int meter = 0; meter < 2; meter++) {
		buf_init(&list[meter], 0);
		buf_puts(&list[meter], "");
		for (size_t i = 0; i < sel->n; i++) {
			if (sel->s[i].meter != (meter == 1))
				continue;
			buf_printf(&list[meter], "%s%s", list[meter].len ? ", " : "", sel->s[i].name);
			for (size_t k = 0; k < sel->s[i].n_names; k++)
				buf_printf(&list[meter], "%s%s", k ? "," : "[", sel->s[i].names[k]);
			if (sel->s[i].n_names)
				buf_putc(&list[meter], ']');
		}
	}
	log_info("counters collected", LOG_STR("event", "metrics-selection"), LOG_STR("providers", list[0].data),
		 LOG_STR("meters", list[1].data));
	buf_free(&list[0]);
	buf_free(&list[1]);
}

struct metrics *metrics_start(const struct metrics_config *cfg)
{
	struct metrics *m = mem_zalloc(sizeof(*m));
	unsigned char r[8] = { 0 };
	FILE *f = fopen("/dev/urandom", "rb");

	if (f) {
		if (fread(r, 1, sizeof(r), f) != sizeof(r))
			memset(r, 0, sizeof(r));
		fclose(f);
	}
	snprintf(m->client_id, sizeof(m->client_id), "diagport-%02x%02x%02x%02x%02x%02x%02x%02x", r[0], r[1], r[2],
		 r[3], r[4], r[5], r[6], r[7]);
	m->port = cfg->port;
	m->interval_s = cfg->interval_s ? cfg->interval_s : METRICS_DEFAULT_INTERVAL_S;
	m->delay_ms = (long long)cfg->delay_s * 1000;
	m->store = cfg->store;
	if (cfg->store && cfg->selection)
		selection_merge(&m->sel, cfg->selection);
	else if (cfg->store)
		metrics_selection_defaults(&m->sel);
	selection_merge(&m->sel, cfg->extra);
	if (cfg->n_extra_providers) {
		m->extra_p = mem_zalloc(cfg->n_extra_providers * sizeof(*m->extra_p));
		for (size_t i = 0; i < cfg->n_extra_providers; i++) {
			m->extra_p[i] = cfg->extra_providers[i];
			m->extra_p[i].name = mem_strdup(cfg->extra_providers[i].name);
			m->extra_p[i].args = cfg->extra_providers[i].args ? mem_strdup(cfg->extra_providers[i].args) : NULL;
		}
		m->n_extra_p = cfg->n_extra_providers;
	}
	log_selection(&m->sel);
	pthread_mutex_init(&m->mu, NULL);
	pthread_rwlock_init(&m->listen_lock, NULL);
	if (m->port && (m->sel.n || m->n_extra_p))
		m->watcher = watcher_start(WATCH_MS, watch_once, m);
	return m;
}

void metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	watcher_stop(m->watcher);
	for (size_t i = 0; i < m->nc; i++)
		collector_free(m->c[i]);
	free(m->c);
	for (size_t i = 0; i < m->n; i++)
		metrics_series_clear(&m->s[i]);
	free(m->s);
	metrics_selection_free(&m->sel);
	for (size_t i = 0; i < m->n_extra_p; i++) {
		free(m->extra_p[i].name);
		free(m->extra_p[i].args);
	}
	free(m->extra_p);
	pthread_mutex_destroy(&m->mu);
	pthread_rwlock_destroy(&m->listen_lock);
	free(m);
}

