/*
 * metrics.c - counters from EventPipe (metrics.h): a reading from one event,
 * dotnet-monitor's Prometheus naming, and what to collect (selections and
 * the session that asks for them). The /livemetrics converter is
 * metrics_live.c's, the store behind /metrics metrics_store.c's.
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
#include "settings.h"

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
		out->interval_s = evpayload_num(p, "IntervalSec", 0);
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

void metrics_per_interval(struct msample *r, unsigned interval_s)
{
	double ratio;

	if (r->kind == MS_GAUGE || !(r->interval_s > 0) || interval_s == 0)
		return;
	ratio = (double)interval_s / r->interval_s;
	if (fabs(ratio - 1) <= 0.02)
		return;
	if (r->kind == MS_RATE && isfinite(r->value))
		r->value *= ratio;
	if (r->kind == MS_SUMMARY && r->has_sum) { /* the measurements' count and sum are the interval's too */
		r->count *= ratio;
		r->sum *= ratio;
	}
}

/* The i-th field of a payload as text when it is a string ("" else). */
static const char *field_str(const struct evpayload *p, size_t i)
{
	return i < p->n && p->v[i].s && p->v[i].depth == 0 ? p->v[i].s : "";
}

/* A setting the runtime printed (a number: digits, one '.'), copied; false when it is not one. */
static bool number_text(char *out, size_t n, const char *s)
{
	size_t len = strlen(s);

	if (len == 0 || len >= n || strspn(s, "0123456789.") != len || strchr(s, '.') != strrchr(s, '.'))
		return false;
	memcpy(out, s, len + 1);
	return true;
}

void metrics_note(const struct nettrace_event *e, const struct evpayload *p, const char *client_id,
		  struct metrics_note *out)
{
	const char *ev = e->meta->name;

	memset(out, 0, sizeof(*out));
	if (strcmp(e->meta->provider, METERS_PROVIDER) != 0)
		return;
	if (strcmp(ev, "CollectionStart") == 0 || strcmp(ev, "CollectionStop") == 0) {
		const struct evvalue *a = evpayload_get(p, "intervalStartTime"), *b = evpayload_get(p, "intervalEndTime");

		/* FILETIMEs: 100 ns ticks (Start comes before the interval's values, Stop after) */
		if (a && b && b->i > a->i && b->i - a->i < 86400LL * 10000000) {
			out->kind = MN_INTERVAL;
			out->interval_s = (double)(b->i - a->i) / 1e7;
		}
	} else if (strcmp(ev, "MultipleSessionsConfiguredIncorrectlyError") == 0) {
		/* (ClientId, expected MaxHistograms, actual, expected MaxTimeSeries, actual, expected RefreshInterval,
		 * actual): "expected" is the running session's */
		if (strcmp(field_str(p, 0), client_id) != 0)
			return;
		out->kind = MN_REFUSED_SHARE;
		if (!number_text(out->want.max_histograms, sizeof(out->want.max_histograms), field_str(p, 1)))
			out->want.max_histograms[0] = '\0';
		if (!number_text(out->want.max_time_series, sizeof(out->want.max_time_series), field_str(p, 3)))
			out->want.max_time_series[0] = '\0';
		if (!number_text(out->want.refresh, sizeof(out->want.refresh), field_str(p, 5)))
			out->want.refresh[0] = '\0';
	} else if (strcmp(ev, "MultipleSessionsNotSupportedError") == 0) {
		/* the running session's id: SHARED means someone else was refused beside ours */
		const char *running = field_str(p, 0);

		if (strcmp(running, "SHARED") == 0)
			return;
		out->kind = MN_REFUSED_PRIVATE;
		snprintf(out->running, sizeof(out->running), "%s", running);
	}
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

/* A child's name as a list index below cap (.NET's arrays may have gaps: they are kept in index order). */
static bool index_of(const struct settings_node *n, size_t cap, size_t *i)
{
	char *end;
	unsigned long v;

	if (n->name[0] < '0' || n->name[0] > '9')
		return false;
	errno = 0;
	v = strtoul(n->name, &end, 10);
	if (errno || *end || v >= cap)
		return false;
	*i = v;
	return true;
}

/* Metrics:Providers:N or Metrics:Meters:N (n): its name and its names list into sel. */
static int setting_source(struct settings_node *n, bool meter, struct metrics_selection *sel, struct err_msg *em)
{
	const char *name_key = meter ? "MeterName" : "ProviderName", *names_key = meter ? "InstrumentNames" : "CounterNames";
	struct settings_node *names[METRICS_MAX_NAMES] = { NULL }, *list;
	struct metrics_source *s;
	const char *name;
	int rc;

	if (n->value && n->n == 0)
		return settings_refuse(DP_EINVAL, n, em, "takes %s and %s under it, not one value", name_key, names_key);
	if ((rc = settings_text(n, name_key, false, &name, em)) != 0)
		return rc;
	list = settings_get(n, names_key);
	if (name == NULL && (rc = settings_unread(n, meter ? "MeterName, InstrumentNames" : "ProviderName, CounterNames",
						  em)) != 0)
		return rc; /* a misspelt name, most likely: refused as that, with the name it misspells */
	if (name == NULL)
		return settings_refuse(DP_EINVAL, n, em, "has no %s (an entry needs its name)", name_key);
	if (!trace_name_ok(name, ";,\"=\\"))
		return settings_refuse(DP_EINVAL, settings_find(n, name_key), em, "must be a name (printable, no ; , = \" \\), "
				       "not '%.64s'", name);
	for (size_t i = 0; list && i < list->n; i++) {
		size_t j;

		if (!index_of(list->k[i], METRICS_MAX_NAMES, &j) || list->k[i]->n || list->k[i]->value == NULL)
			return settings_refuse(DP_EINVAL, list->k[i], em, "is not Metrics:%s:N:%s:M (M from 0 to %d)",
					       meter ? "Meters" : "Providers", names_key, METRICS_MAX_NAMES - 1);
		if (!trace_name_ok(list->k[i]->value, ";,\"=\\"))
			return settings_refuse(DP_EINVAL, list->k[i], em, "must be a name (printable, no ; , = \" \\), "
					       "not '%.64s'", list->k[i]->value);
		list->k[i]->used = true;
		names[j] = list->k[i];
	}
	if (list && list->value && list->n == 0 && *list->value)
		return settings_refuse(DP_EINVAL, list, em, "takes a list (%s:0, %s:1, ...), not one value", names_key,
				       names_key);
	if ((rc = settings_unread(n, meter ? "MeterName, InstrumentNames" : "ProviderName, CounterNames", em)) != 0)
		return rc;
	source_add(sel, name, meter);
	s = &sel->s[sel->n - 1];
	for (size_t k = 0; k < METRICS_MAX_NAMES; k++) {
		if (names[k] == NULL)
			continue;
		s->names = mem_realloc(s->names, (s->n_names + 1) * sizeof(*s->names));
		s->names[s->n_names++] = mem_strdup(names[k]->value);
	}
	return 0;
}

int metrics_selection_settings(struct settings_node *metrics, bool include_defaults, struct metrics_selection *out,
			       struct err_msg *em)
{
	struct metrics_selection sel = { 0 };
	int rc = 0;

	if (include_defaults)
		metrics_selection_defaults(&sel);
	for (int meter = 0; meter < 2 && rc == 0; meter++) {
		struct settings_node *list = settings_get(metrics, meter ? "Meters" : "Providers");
		struct settings_node *at[METRICS_MAX_SOURCES] = { NULL };

		for (size_t i = 0; list && i < list->n && rc == 0; i++) {
			size_t j;

			if (!index_of(list->k[i], METRICS_MAX_SOURCES, &j))
				rc = settings_refuse(DP_EINVAL, list->k[i], em, "is not Metrics:%s:N (N from 0 to %d)",
						     meter ? "Meters" : "Providers", METRICS_MAX_SOURCES - 1);
			else
				at[j] = list->k[i];
		}
		for (size_t j = 0; j < METRICS_MAX_SOURCES && rc == 0; j++)
			if (at[j]) {
				at[j]->used = true;
				rc = setting_source(at[j], meter, &sel, em);
			}
	}
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

static atomic_uint max_histograms = METRICS_MAX_HISTOGRAMS, max_time_series = METRICS_MAX_TIME_SERIES;

void metrics_set_limits(unsigned histograms, unsigned time_series)
{
	atomic_store(&max_histograms, histograms ? histograms : METRICS_MAX_HISTOGRAMS);
	atomic_store(&max_time_series, time_series ? time_series : METRICS_MAX_TIME_SERIES);
}

int metrics_trace_config(struct metrics_selection *sel, unsigned interval_s, const char *client_id,
			 struct trace_config *out, struct err_msg *em)
{
	return metrics_trace_config_as(sel, interval_s, client_id, NULL, out, em);
}

int metrics_trace_config_as(struct metrics_selection *sel, unsigned interval_s, const char *client_id,
			    const struct metrics_meter_opts *mo, struct trace_config *out, struct err_msg *em)
{
	struct trace_config c = { .buffer_mb = 16 };
	char refresh[24], hist[16], ts[16];
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
	snprintf(refresh, sizeof(refresh), "%s", mo && *mo->refresh ? mo->refresh : "");
	if (!*refresh)
		snprintf(refresh, sizeof(refresh), "%u", interval_s);
	snprintf(hist, sizeof(hist), "%s", mo && *mo->max_histograms ? mo->max_histograms : "");
	if (!*hist)
		snprintf(hist, sizeof(hist), "%u", atomic_load(&max_histograms));
	snprintf(ts, sizeof(ts), "%s", mo && *mo->max_time_series ? mo->max_time_series : "");
	if (!*ts)
		snprintf(ts, sizeof(ts), "%u", atomic_load(&max_time_series));
	sel->interval_s = interval_s;
	if (rc == 0 && meters.len) {
		buf_reset(&args);
		buf_printf(&args, "SessionId=SHARED;ClientId=%s;Metrics=%s;RefreshInterval=%s;MaxTimeSeries=%s;MaxHistograms=%s",
			   client_id, meters.data, refresh, ts, hist);
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
