/*
 * metrics.c - counters from EventPipe, named for Prometheus (metrics.h).
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
#include "mem.h"

#define MAX_SERIES 20000
#define MAX_QUANTILES 16
#define WATCH_MS 500      /* how often the port's runtimes are looked at */
#define RETRY_MS 5000     /* a session that ended while its runtime stays is started again after this */
#define METERS_PROVIDER "System.Diagnostics.Metrics"
#define METERS_TIME_SERIES 0x2ull /* MetricsEventSource's TimeSeriesValues keyword */

/* ---- one reading from one event ---- */

int metrics_sample(const struct nettrace_event *e, const struct evpayload *p, struct msample *out)
{
	const char *ev = e->meta->name;

	memset(out, 0, sizeof(*out));
	if (strcmp(ev, "EventCounters") == 0) {
		const char *type = evpayload_str(p, "CounterType");

		out->provider = e->meta->provider;
		out->name = evpayload_str(p, "Name");
		out->display = evpayload_str(p, "DisplayName");
		out->unit = evpayload_str(p, "DisplayUnits");
		out->tags = evpayload_str(p, "Metadata");
		out->tag_sep = ':';
		if (strcmp(type, "Sum") == 0) {
			out->kind = MS_RATE;
			out->value = evpayload_num(p, "Increment", NAN);
		} else {
			out->kind = MS_GAUGE;
			out->value = evpayload_num(p, "Mean", NAN);
		}
		return *out->name && !isnan(out->value);
	}
	if (strcmp(e->meta->provider, METERS_PROVIDER) != 0)
		return 0;
	out->provider = evpayload_str(p, "meterName");
	out->name = evpayload_str(p, "instrumentName");
	out->display = out->name;
	out->unit = evpayload_str(p, "unit");
	out->tags = evpayload_str(p, "tags");
	out->tag_sep = '=';
	out->meter = true;
	if (strcmp(ev, "CounterRateValuePublished") == 0) {
		out->kind = MS_RATE;
		out->value = evpayload_num(p, "rate", NAN); /* "" when the instrument had no measurement: ended */
	} else if (strcmp(ev, "UpDownCounterRateValuePublished") == 0) {
		out->kind = MS_GAUGE;
		out->value = evpayload_num(p, "value", NAN);
	} else if (strcmp(ev, "GaugeValuePublished") == 0) {
		out->kind = MS_GAUGE;
		out->value = evpayload_num(p, "lastValue", NAN);
	} else if (strcmp(ev, "HistogramValuePublished") == 0) {
		out->kind = MS_SUMMARY;
		out->quantiles = evpayload_str(p, "quantiles");
		out->has_sum = evpayload_get(p, "count") != NULL && evpayload_get(p, "sum") != NULL;
		out->count = evpayload_num(p, "count", 0);
		out->sum = evpayload_num(p, "sum", 0);
		return *out->name && *out->quantiles; /* no quantiles: nothing was recorded */
	} else {
		return 0;
	}
	return *out->name && !isnan(out->value);
}

/* ---- Prometheus naming (dotnet-monitor's PrometheusDataModel) ---- */

/* One character of s at *i (a UTF-8 sequence counts as one, never valid); advances *i. */
static bool name_char(const char *s, size_t *i, bool first, char *c)
{
	unsigned char u = (unsigned char)s[*i];

	if (u >= 0x80) {
		(*i)++;
		while ((s[*i] & 0xC0) == 0x80)
			(*i)++;
		return false;
	}
	(*i)++;
	*c = (char)u;
	if (u == '_')
		return true;
	if ((u >= 'a' && u <= 'z') || (u >= 'A' && u <= 'Z'))
		return true;
	return !first && u >= '0' && u <= '9';
}

static void normalize(struct buf *b, const char *s, bool provider)
{
	bool any = false;
	size_t i = 0;
	char c = 0;

	while (s[i]) {
		bool first = i == 0;

		if (name_char(s, &i, first, &c)) {
			any = true;
			buf_putc(b, provider && c >= 'A' && c <= 'Z' ? (char)(c - 'A' + 'a') : c);
		} else if (!provider) {
			buf_putc(b, '_');
		}
	}
	if (!any && provider)
		buf_putc(b, '_');
}

static const char *base_unit(const char *unit)
{
	if (unit == NULL || *unit == '\0' || strcasecmp(unit, "count") == 0)
		return "";
	if (strcasecmp(unit, "B") == 0 || strcasecmp(unit, "MB") == 0)
		return "bytes";
	if (strcmp(unit, "%") == 0)
		return "ratio";
	return unit;
}

void metrics_prom_name(struct buf *b, const char *provider, const char *metric, const char *unit)
{
	const char *u = base_unit(unit);

	normalize(b, provider, true);
	buf_putc(b, '_');
	normalize(b, metric, false);
	if (*u) {
		buf_putc(b, '_');
		normalize(b, u, false);
	}
}

void metrics_prom_value(char *out, size_t n, const char *unit, double v)
{
	if (unit && strcasecmp(unit, "MB") == 0)
		v *= 1000000.0; /* the counters say MB and mean 10^6 bytes */
	if (isnan(v)) {
		snprintf(out, n, "NaN");
		return;
	}
	if (isinf(v)) {
		snprintf(out, n, v > 0 ? "+Inf" : "-Inf");
		return;
	}
	if (v == (double)(long long)v && fabs(v) < 1e17) { /* whole numbers in full, as .NET writes them */
		snprintf(out, n, "%lld", (long long)v);
		return;
	}
	for (int prec = 1; prec <= 17; prec++) {
		snprintf(out, n, "%.*g", prec, v);
		if (strtod(out, NULL) == v)
			return;
	}
}

static void escape_label(struct buf *b, const char *v, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		if (v[i] == '\\' || v[i] == '"')
			buf_putc(b, '\\');
		if (v[i] == '\n') {
			buf_puts(b, "\\n");
			continue;
		}
		buf_putc(b, v[i]);
	}
}

void metrics_prom_labels(struct buf *b, const char *tags, char sep, double quantile)
{
	size_t start = b->len;
	const char *s = tags ? tags : "";
	bool any = false;

	/* every pair must be k<sep>v, or none is used (dotnet-monitor's CounterUtilities.GetMetadata) */
	while (*s) {
		size_t n = strcspn(s, ","), k;
		char *key;

		k = strcspn(s, (char[]){ sep, '\0' });
		if (k >= n || k == 0) {
			b->len = start;
			if (b->data)
				b->data[start] = '\0';
			any = false;
			break;
		}
		if (any)
			buf_puts(b, ", ");
		key = mem_strndup(s, k);
		normalize(b, key, false);
		free(key);
		buf_puts(b, "=\"");
		escape_label(b, s + k + 1, n - k - 1);
		buf_putc(b, '"');
		any = true;
		s += n;
		s += *s == ',';
	}
	if (quantile >= 0) {
		char q[32];

		metrics_prom_value(q, sizeof(q), NULL, quantile);
		buf_printf(b, "%squantile=\"%s\"", any ? ", " : "", q);
	}
}

/* ---- what to collect ---- */

static void source_add(struct metrics_selection *sel, const char *name, bool meter)
{
	struct metrics_source *s;

	sel->s = mem_realloc(sel->s, (sel->n + 1) * sizeof(*sel->s));
	s = &sel->s[sel->n++];
	*s = (struct metrics_source){ .name = mem_strdup(name), .meter = meter };
}

void metrics_selection_defaults(struct metrics_selection *sel)
{
	static const char *const counters[] = { "System.Runtime", "Microsoft.AspNetCore.Hosting", "Grpc.AspNetCore.Server" };
	static const char *const meters[] = { "System.Runtime", "Microsoft.AspNetCore.Hosting" };

	for (size_t i = 0; i < sizeof(counters) / sizeof(counters[0]); i++)
		source_add(sel, counters[i], false);
	for (size_t i = 0; i < sizeof(meters) / sizeof(meters[0]); i++)
		source_add(sel, meters[i], true);
}

void metrics_selection_free(struct metrics_selection *sel)
{
	for (size_t i = 0; i < sel->n; i++) {
		for (size_t k = 0; k < sel->s[i].n_names; k++)
			free(sel->s[i].names[k]);
		free(sel->s[i].names);
		free(sel->s[i].name);
	}
	free(sel->s);
	memset(sel, 0, sizeof(*sel));
}


static int sources_json(json_t *arr, const char *what, const char *name_key, const char *names_key, bool meter,
			struct metrics_selection *sel, struct err_msg *em)
{
	size_t i;
	json_t *it;

	if (arr == NULL || json_is_null(arr))
		return 0;
	if (!json_is_array(arr))
		return err_set(em, DP_EINVAL, "'%s' must be an array", what);
	json_array_foreach(arr, i, it) {
		json_t *nm = json_is_object(it) ? trace_member(it, name_key) : NULL, *names;
		struct metrics_source *s;
		size_t k;
		json_t *n;

		if (!json_is_string(nm) || !trace_name_ok(json_string_value(nm), ";,\"=\\"))
			return err_set(em, DP_EINVAL, "%s[%zu].%s must be a name (printable, no ; , = \" \\)", what, i,
				       name_key);
		if (sel->n == METRICS_MAX_SOURCES)
			return err_set(em, DP_ETOOBIG, "more than %d providers and meters", METRICS_MAX_SOURCES);
		source_add(sel, json_string_value(nm), meter);
		s = &sel->s[sel->n - 1];
		names = trace_member(it, names_key);
		if (names == NULL || json_is_null(names))
			continue;
		if (!json_is_array(names))
			return err_set(em, DP_EINVAL, "%s[%zu].%s must be an array of names", what, i, names_key);
		if (json_array_size(names) > METRICS_MAX_NAMES)
			return err_set(em, DP_ETOOBIG, "%s[%zu].%s has more than %d names", what, i, names_key,
				       METRICS_MAX_NAMES);
		json_array_foreach(names, k, n) {
			if (!json_is_string(n) || !trace_name_ok(json_string_value(n), ";,\"=\\"))
				return err_set(em, DP_EINVAL, "%s[%zu].%s[%zu] must be a name", what, i, names_key, k);
			s->names = mem_realloc(s->names, (s->n_names + 1) * sizeof(*s->names));
			s->names[s->n_names++] = mem_strdup(json_string_value(n));
		}
	}
	return 0;
}

int metrics_selection_json(const char *body, size_t len, struct metrics_selection *out, struct err_msg *em)
{
	json_error_t je;
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *inc;
	struct metrics_selection sel = { 0 };
	int rc;

	if (doc == NULL)
		return err_set(em, DP_ESYNTAX, "the body is not JSON: line %d, column %d: %s", je.line, je.column, je.text);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return err_set(em, DP_EINVAL, "the body must be a JSON object");
	}
	inc = trace_member(doc, "includeDefaultProviders");
	if (inc && !json_is_boolean(inc)) {
		json_decref(doc);
		return err_set(em, DP_EINVAL, "'includeDefaultProviders' must be true or false");
	}
	rc = sources_json(trace_member(doc, "providers"), "providers", "providerName", "counterNames", false, &sel, em);
	if (rc == 0)
		rc = sources_json(trace_member(doc, "meters"), "meters", "meterName", "instrumentNames", true, &sel, em);
	if (rc == 0 && (inc == NULL || json_is_true(inc)))
		metrics_selection_defaults(&sel);
	if (rc == 0 && sel.n == 0)
		rc = err_set(em, DP_EINVAL, "nothing to collect: no providers or meters, and includeDefaultProviders false");
	json_decref(doc);
	if (rc != 0) {
		metrics_selection_free(&sel);
		return rc;
	}
	*out = sel;
	return 0;
}

bool metrics_selected(const struct metrics_selection *sel, const struct msample *s)
{
	for (size_t i = 0; i < sel->n; i++) {
		const struct metrics_source *src = &sel->s[i];

		if (src->meter != s->meter || strcmp(src->name, s->provider) != 0)
			continue;
		if (src->n_names == 0)
			return true;
		for (size_t k = 0; k < src->n_names; k++)
			if (strcmp(src->names[k], s->name) == 0)
				return true;
	}
	return false;
}

int metrics_trace_config(const struct metrics_selection *sel, unsigned interval_s, const char *client_id,
			 struct trace_config *out, struct err_msg *em)
{
	struct trace_config c = { .buffer_mb = 16 };
	struct buf args, meters;
	int rc = 0;

	buf_init(&args, 0);
	buf_init(&meters, 0);
	buf_printf(&args, "EventCounterIntervalSec=%u", interval_s);
	for (size_t i = 0; rc == 0 && i < sel->n; i++) {
		const struct metrics_source *s = &sel->s[i];

		if (!s->meter) {
			rc = trace_config_add(&c, s->name, 0, 4, args.data, em);
			continue;
		}
		if (s->n_names == 0)
			buf_printf(&meters, "%s%s", meters.len ? "," : "", s->name);
		for (size_t k = 0; k < s->n_names; k++)
			buf_printf(&meters, "%s%s\\%s", meters.len ? "," : "", s->name, s->names[k]);
	}
	if (rc == 0 && meters.len) {
		buf_reset(&args);
		buf_printf(&args, "SessionId=SHARED;ClientId=%s;Metrics=%s;RefreshInterval=%u;MaxTimeSeries=%d;MaxHistograms=%d",
			   client_id, meters.data, interval_s, METRICS_MAX_TIME_SERIES, METRICS_MAX_HISTOGRAMS);
		rc = trace_config_add(&c, METERS_PROVIDER, METERS_TIME_SERIES, 4, args.data, em);
	}
	buf_free(&args);
	buf_free(&meters);
	if (rc != 0) {
		trace_config_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

int64_t metrics_event_ms(const struct nettrace_trace *h, int64_t timestamp)
{
	struct tm tm = { .tm_year = h->year - 1900, .tm_mon = h->month - 1, .tm_mday = h->day, .tm_hour = h->hour,
			 .tm_min = h->minute, .tm_sec = h->second };
	int64_t start = (int64_t)timegm(&tm) * 1000 + h->millisecond;

	if (h->ticks_per_sec <= 0)
		return start;
	return start + (int64_t)((double)(timestamp - h->start_ticks) * 1000.0 / (double)h->ticks_per_sec);
}

/* ---- /livemetrics ---- */

int64_t metrics_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}


struct metrics_live {
	struct metrics_selection sel;
	struct buf *out;
	struct nettrace_trace header;
	bool have_header;
	struct evpayload pl;
	uint64_t records;
};

struct metrics_live *metrics_live_new(struct metrics_selection *sel, struct buf *out)
{
	struct metrics_live *l = mem_zalloc(sizeof(*l));

	l->sel = *sel;
	memset(sel, 0, sizeof(*sel));
	l->out = out;
	return l;
}

void metrics_live_free(struct metrics_live *l)
{
	if (l == NULL)
		return;
	metrics_selection_free(&l->sel);
	evpayload_free(&l->pl);
	free(l);
}

uint64_t metrics_live_records(const struct metrics_live *l)
{
	return l->records;
}

static int live_header(void *ctx, const struct nettrace_trace *t)
{
	struct metrics_live *l = ctx;

	l->header = *t;
	l->have_header = true;
	return 0;
}

/* ISO 8601 UTC with milliseconds. */
void metrics_iso_ms(char out[40], int64_t ms)
{
	time_t secs = (time_t)(ms < 0 ? 0 : ms / 1000);
	struct tm tm;

	gmtime_r(&secs, &tm);
	snprintf(out, 40, "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", (unsigned)(tm.tm_year + 1900) % 10000u,
		 (unsigned)(tm.tm_mon + 1) % 100u, (unsigned)tm.tm_mday % 100u, (unsigned)tm.tm_hour % 100u,
		 (unsigned)tm.tm_min % 100u, (unsigned)tm.tm_sec % 100u, (unsigned)(ms < 0 ? 0 : ms % 1000));
}

static int live_event(void *ctx, const struct nettrace_event *e)
{
	struct metrics_live *l = ctx;
	struct msample r;
	struct err_msg em;
	char ts[40];
	json_t *o;
	char *text;

	if (e->meta->n_fields == 0 || evpayload_decode(&l->pl, e, &em) != 0)
		return 0;
	if (!metrics_sample(e, &l->pl, &r) || !metrics_selected(&l->sel, &r))
		return 0;
	metrics_iso_ms(ts, l->have_header ? metrics_event_ms(&l->header, e->timestamp) : metrics_wall_ms());
	o = json_pack("{s:s, s:s, s:s, s:s, s:s, s:s, s:s}", "timestamp", ts, "provider", r.provider, "name", r.name,
		      "displayName", *r.display ? r.display : r.name, "unit", r.unit, "counterType",
		      r.kind == MS_RATE ? "Rate" : "Metric", "tags", r.tags);
	if (o == NULL)
		return 0; /* a string that is not UTF-8: skipped */
	if (r.kind == MS_SUMMARY) {
		json_t *q = json_object();
		const char *p = r.quantiles;

		while (*p) {
			size_t n = strcspn(p, ";"), k = strcspn(p, "=");
			char key[32];
			double v;

			if (k < n && k < sizeof(key)) {
				memcpy(key, p, k);
				key[k] = '\0';
				v = strtod(p + k + 1, NULL);
				json_object_set_new(q, key, json_real(isfinite(v) ? v : 0));
			}
			p += n;
			p += *p == ';';
		}
		json_object_set_new(o, "value", q);
	} else {
		json_object_set_new(o, "value", json_real(isfinite(r.value) ? r.value : 0));
	}
	text = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	if (text) {
		buf_putc(l->out, 0x1e);
		buf_puts(l->out, text);
		buf_putc(l->out, '\n');
		free(text);
		l->records++;
	}
	return 0;
}

const struct nettrace_callbacks metrics_live_callbacks = { .trace = live_header, .event = live_event };

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
	struct nettrace_trace header;
	bool have_header;
	struct evpayload pl;
	struct buf name, labels; /* scratch */
};

struct metrics {
	struct port *port;
	unsigned interval_s;
	long long delay_ms; /* from attach to the first session */
	char client_id[40];
	struct metrics_selection sel;
	pthread_mutex_t mu;
	struct series *s; /* sorted by family, pid, labels */
	size_t n, cap;
	uint64_t dropped;
	size_t runtimes; /* attached, as last seen by the watcher */
	pthread_t watcher;
	bool watching;
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	bool stopping;
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

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct collector *c = ctx;
	struct msample r;
	struct err_msg em;

	if (e->meta->n_fields == 0 || evpayload_decode(&c->pl, e, &em) != 0)
		return 0; /* not a counter, or a payload this reader cannot read: skipped, the session goes on */
	if (metrics_sample(e, &c->pl, &r) && metrics_selected(&c->m->sel, &r))
		store(c, &r, c->have_header ? metrics_event_ms(&c->header, e->timestamp) : metrics_wall_ms());
	return 0;
}

static void *collect_main(void *arg)
{
	struct collector *c = arg;
	struct trace_config cfg;
	struct nettrace_callbacks cb = { .trace = on_header, .event = on_event };
	struct err_msg em;

	if (metrics_trace_config(&c->m->sel, c->m->interval_s, c->m->client_id, &cfg, &em) == 0) {
		trace_run_cb(c->m->port, c->cookie, &cfg, -1, &c->stop, &cb, c, NULL, &em);
		trace_config_free(&cfg);
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
	atomic_store(&c->stop, false);
	atomic_store(&c->done, false);
	c->have_header = false;
	c->started = pthread_create(&c->th, NULL, collect_main, c) == 0;
	if (!c->started)
		c->retry_at = clock_ms() + RETRY_MS;
}

/* One look at the port: sessions for new runtimes, restarts, and the ones that went away dropped. */
static void watch_once(struct metrics *m)
{
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
			buf_init(&c->name, 0);
			buf_init(&c->labels, 0);
			m->c = mem_realloc(m->c, (m->nc + 1) * sizeof(*m->c));
			m->c[m->nc++] = c;
		}
		c->seen = true;
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
	m->runtimes = n;
	pthread_mutex_unlock(&m->mu);
	port_list_free(rt, n);
}

static void *watch_main(void *arg)
{
	struct metrics *m = arg;

	pthread_mutex_lock(&m->stop_mu);
	while (!m->stopping) {
		struct timespec until;

		pthread_mutex_unlock(&m->stop_mu);
		watch_once(m);
		pthread_mutex_lock(&m->stop_mu);
		clock_gettime(CLOCK_REALTIME, &until);
		until.tv_nsec += WATCH_MS * 1000000L;
		until.tv_sec += until.tv_nsec / 1000000000L;
		until.tv_nsec %= 1000000000L;
		if (!m->stopping)
			pthread_cond_timedwait(&m->stop_cv, &m->stop_mu, &until);
	}
	pthread_mutex_unlock(&m->stop_mu);
	return NULL;
}

struct metrics *metrics_start(struct port *port, unsigned interval_s, unsigned delay_s)
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
	m->port = port;
	m->interval_s = interval_s ? interval_s : METRICS_DEFAULT_INTERVAL_S;
	m->delay_ms = (long long)delay_s * 1000;
	metrics_selection_defaults(&m->sel);
	pthread_mutex_init(&m->mu, NULL);
	pthread_mutex_init(&m->stop_mu, NULL);
	pthread_cond_init(&m->stop_cv, NULL);
	if (port)
		m->watching = pthread_create(&m->watcher, NULL, watch_main, m) == 0;
	return m;
}

void metrics_free(struct metrics *m)
{
	if (m == NULL)
		return;
	if (m->watching) {
		pthread_mutex_lock(&m->stop_mu);
		m->stopping = true;
		pthread_cond_signal(&m->stop_cv);
		pthread_mutex_unlock(&m->stop_mu);
		pthread_join(m->watcher, NULL);
	}
	for (size_t i = 0; i < m->nc; i++)
		collector_free(m->c[i]);
	free(m->c);
	for (size_t i = 0; i < m->n; i++)
		series_clear(&m->s[i]);
	free(m->s);
	metrics_selection_free(&m->sel);
	pthread_mutex_destroy(&m->mu);
	pthread_mutex_destroy(&m->stop_mu);
	pthread_cond_destroy(&m->stop_cv);
	free(m);
}
