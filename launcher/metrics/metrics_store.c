/*
 * metrics_store.c - the store behind /metrics (metrics.h): a watcher thread
 * starts one counters session per attached runtime, and each reading
 * replaces its series' value.
 *
 * The store keeps one entry per series (family, runtime, labels), sorted, so
 * that a scrape is one pass under the lock writing text; a new reading only
 * replaces a value. It holds at most MAX_SERIES; past that new series are
 * dropped (and counted) while known ones keep updating.
 */
#include "metrics.h"

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

#define MAX_SERIES 20000
#define MAX_QUANTILES 16
#define WATCH_MS 500      /* how often the port's runtimes are looked at */
#define RETRY_MS 5000     /* a session that ended while its runtime stays is started again after this */
#define REJOIN_MS 1000    /* our share refused: started again on the running session's terms after this */
#define PRIVATE_MS 10000  /* a private meter session holds the runtime: our session started again after this */

/* ---- the store ---- */

struct qline {
	char *labels; /* with the quantile */
	char value[32];
};

struct series {
	char *family, *help, *labels;
	uint8_t cookie[16];
	uint64_t pid;
	bool summary;
	char value[32];
	int64_t ts_ms;
	struct qline *q;
	size_t nq;
	char sum[32], count[32];
	bool has_sum;
};

struct collector {
	struct metrics *m;
	uint8_t cookie[16];
	uint64_t pid;
	pthread_t th;
	bool started, seen;
	atomic_bool stop, done;
	long long retry_at;
	long long due_ms;     /* when its session's first readings are due */
	struct nettrace_trace header;
	bool have_header;
	struct evpayload pl;
	struct buf name, labels; /* scratch */
	char client_id[48];   /* our share of the meter session: new for every session, so that the runtime's
			       * count of shares stays true (it counts a ClientId once, but each stop) */
	double meter_s;       /* the interval the runtime last aggregated meters over; 0 unknown */
	struct metrics_meter_opts join; /* the running session's settings, for the next session; "" = ours */
	atomic_llong restart_at;        /* the session is stopped and started again at this clock_ms; 0 never */
	bool told_private;
	unsigned long long readings;    /* this session's (its thread's own) */
};

struct metrics {
	struct port *port;
	unsigned interval_s;
	bool store;
	struct trace_provider *extra_p; /* added to each session */
	size_t n_extra_p;
	pthread_rwlock_t listen_lock; /* held to read while calling the listener, to write while changing it */
	metrics_reading_fn on_reading;
	metrics_event_fn on_event;
	void *listen_ctx;
	long long delay_ms; /* from attach to the first session */
	char client_id[40]; /* this store's prefix of its collectors' ClientIds */
	struct metrics_selection sel;
	pthread_mutex_t mu;
	struct series *s; /* sorted by family, pid, labels */
	size_t n, cap;
	uint64_t dropped;
	size_t runtimes; /* attached, as last seen by the watcher */
	long long first_due_ms; /* the soonest a collector's first readings are due (0: none is waiting) */
	struct watcher *watcher;
	struct collector **c;
	size_t nc;
};

static int series_cmp(const char *family, uint64_t pid, const char *labels, const struct series *s)
{
	int c = strcmp(family, s->family);

	if (c)
		return c;
	if (pid != s->pid)
		return pid < s->pid ? -1 : 1;
	return strcmp(labels, s->labels);
}

/* The index of the series, or where it would go (*found false). Under mu. */
static size_t series_find(struct metrics *m, const char *family, uint64_t pid, const char *labels, bool *found)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = series_cmp(family, pid, labels, &m->s[mid]);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = false;
	return lo;
}

static void series_clear(struct series *s)
{
	free(s->family);
	free(s->help);
	free(s->labels);
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].labels);
	free(s->q);
}

/* The quantiles "q=v;q=v" as labelled lines, sorted by q (Prometheus wants them smallest first). */
static void set_quantiles(struct series *s, const struct msample *r, struct buf *lab)
{
	struct {
		double q, v;
	} qs[MAX_QUANTILES];
	size_t n = 0;
	const char *p = r->quantiles;

	while (*p && n < MAX_QUANTILES) {
		char *end;
		double q = strtod(p, &end), v;

		if (end == p || *end != '=')
			break;
		p = end + 1;
		v = strtod(p, &end);
		if (end == p)
			break;
		qs[n].q = q;
		qs[n++].v = v;
		p = end + (*end == ';');
	}
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && qs[k - 1].q > qs[k].q; k--) {
			double tq = qs[k].q, tv = qs[k].v;

			qs[k] = qs[k - 1];
			qs[k - 1].q = tq;
			qs[k - 1].v = tv;
		}
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].labels);
	s->q = mem_realloc(s->q, (n ? n : 1) * sizeof(*s->q));
	s->nq = n;
	for (size_t i = 0; i < n; i++) {
		buf_reset(lab);
		metrics_prom_labels(lab, r->tags, r->tag_sep, qs[i].q);
		s->q[i].labels = mem_strdup(lab->data ? lab->data : "");
		metrics_prom_value(s->q[i].value, sizeof(s->q[i].value), r->unit, qs[i].v);
	}
	s->has_sum = r->has_sum;
	if (r->has_sum) {
		metrics_prom_value(s->sum, sizeof(s->sum), r->unit, r->sum);
		metrics_prom_value(s->count, sizeof(s->count), NULL, r->count);
	}
}

static void store(struct collector *c, const struct msample *r, int64_t ts_ms)
{
	struct metrics *m = c->m;
	struct series *s;
	bool found;
	size_t i;
	const char *labels;

	buf_reset(&c->name);
	buf_reset(&c->labels);
	metrics_prom_name(&c->name, r->provider, r->name, r->unit);
	metrics_prom_labels(&c->labels, r->tags, r->tag_sep, -1);
	labels = c->labels.data ? c->labels.data : "";
	pthread_mutex_lock(&m->mu);
	i = series_find(m, c->name.data, c->pid, labels, &found);
	if (!found) {
		/* a family keeps the type it was first seen with */
		bool clash = (i > 0 && strcmp(m->s[i - 1].family, c->name.data) == 0 &&
			      m->s[i - 1].summary != (r->kind == MS_SUMMARY)) ||
			     (i < m->n && strcmp(m->s[i].family, c->name.data) == 0 &&
			      m->s[i].summary != (r->kind == MS_SUMMARY));

		if (clash || m->n >= MAX_SERIES) {
			m->dropped++;
			pthread_mutex_unlock(&m->mu);
			return;
		}
		if (m->n == m->cap) {
			m->cap = m->cap ? m->cap * 2 : 64;
			m->s = mem_realloc(m->s, m->cap * sizeof(*m->s));
		}
		memmove(&m->s[i + 1], &m->s[i], (m->n - i) * sizeof(*m->s));
		m->n++;
		s = &m->s[i];
		*s = (struct series){ .family = mem_strdup(c->name.data), .help = mem_strdup(*r->display ? r->display : r->name),
				      .labels = mem_strdup(labels), .pid = c->pid, .summary = r->kind == MS_SUMMARY };
		memcpy(s->cookie, c->cookie, 16);
	}
	s = &m->s[i];
	s->ts_ms = ts_ms;
	if (s->summary)
		set_quantiles(s, r, &c->labels);
	else
		metrics_prom_value(s->value, sizeof(s->value), r->unit, r->value);
	pthread_mutex_unlock(&m->mu);
}

/* Drop a runtime's series (it went away). */
static void forget(struct metrics *m, const uint8_t cookie[16])
{
	size_t k = 0;

	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n; i++) {
		if (memcmp(m->s[i].cookie, cookie, 16) == 0)
			series_clear(&m->s[i]);
		else
			m->s[k++] = m->s[i];
	}
	m->n = k;
	pthread_mutex_unlock(&m->mu);
}

static void help_text(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_puts(b, "\\\\");
		else if (*s == '\n')
			buf_puts(b, "\\n");
		else
			buf_putc(b, *s);
	}
}

/* name{pid="N", labels} or name{labels} or name */
static void sample_head(struct buf *b, const char *family, const char *suffix, bool with_pid, uint64_t pid,
			const char *labels)
{
	buf_puts(b, family);
	buf_puts(b, suffix);
	if (!with_pid && *labels == '\0')
		return;
	buf_putc(b, '{');
	if (with_pid)
		buf_printf(b, "pid=\"%llu\"%s", (unsigned long long)pid, *labels ? ", " : "");
	buf_puts(b, labels);
	buf_putc(b, '}');
}

void metrics_render(struct metrics *m, struct buf *out)
{
	bool with_pid;

	if (m == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	if (m->n == 0) { /* a scrape that finds nothing says why, and when to look again (a comment to Prometheus) */
		long long in_ms = m->first_due_ms - clock_ms();

		if (m->runtimes == 0)
			buf_printf(out, "# diagport: no .NET runtime is attached; counters come metricsStartDelay (%lld s) "
				   "and one metricsInterval (%u s) after one attaches\n", m->delay_ms / 1000, m->interval_s);
		else
			buf_printf(out, "# diagport: no readings yet; the first are due in %lld s (metricsStartDelay %lld s "
				   "after a runtime attaches, then one metricsInterval of %u s)\n",
				   in_ms > 0 ? (in_ms + 999) / 1000 : 0, m->delay_ms / 1000, m->interval_s);
	}
	with_pid = m->runtimes > 1;
	for (size_t i = 0; i < m->n; i++) {
		const struct series *s = &m->s[i];

		if (i == 0 || strcmp(m->s[i - 1].family, s->family) != 0) {
			buf_printf(out, "# HELP %s ", s->family);
			help_text(out, s->help);
			buf_printf(out, "\n# TYPE %s %s\n", s->family, s->summary ? "summary" : "gauge");
		}
		if (!s->summary) {
			sample_head(out, s->family, "", with_pid, s->pid, s->labels);
			buf_printf(out, " %s %lld\n", s->value, (long long)s->ts_ms);
			continue;
		}
		for (size_t k = 0; k < s->nq; k++) {
			sample_head(out, s->family, "", with_pid, s->pid, s->q[k].labels);
			buf_printf(out, " %s\n", s->q[k].value);
		}
		if (s->has_sum) {
			sample_head(out, s->family, "_sum", with_pid, s->pid, s->labels);
			buf_printf(out, " %s\n", s->sum);
			sample_head(out, s->family, "_count", with_pid, s->pid, s->labels);
			buf_printf(out, " %s\n", s->count);
		}
	}
	pthread_mutex_unlock(&m->mu);
}

size_t metrics_series(struct metrics *m)
{
	size_t n;

	if (m == NULL)
		return 0;
	pthread_mutex_lock(&m->mu);
	n = m->n;
	pthread_mutex_unlock(&m->mu);
	return n;
}

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
	ts = c->have_header ? metrics_event_ms(&c->header, e->timestamp) : metrics_wall_ms();
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
		store(c, &r, ts);
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
		forget(m, m->c[i]->cookie);
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
		series_clear(&m->s[i]);
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
