/*
 * metrics_live.c - /livemetrics (metrics.h): a counters session's readings
 * turned into json-seq records as its events arrive.
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

/* ---- /livemetrics ---- */

struct metrics_live {
	struct metrics_selection sel;
	struct buf *out;
	struct nettrace_trace header;
	bool have_header;
	struct evpayload pl;
	uint64_t records;
	double meter_s; /* the interval the runtime last aggregated meters over; 0 unknown */
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

static int live_event(void *ctx, const struct nettrace_event *e)
{
	struct metrics_live *l = ctx;
	struct msample r;
	struct err_msg em;
	char ts[40];
	json_t *o;
	char *text;
	struct metrics_note note;

	if (e->meta->n_fields == 0 || evpayload_decode(&l->pl, e, &em) != 0)
		return 0;
	metrics_note(e, &l->pl, "", &note);
	if (note.kind == MN_INTERVAL)
		l->meter_s = note.interval_s;
	if (!metrics_sample(e, &l->pl, &r) || !metrics_selected(&l->sel, &r))
		return 0;
	if (r.meter)
		r.interval_s = l->meter_s;
	metrics_per_interval(&r, l->sel.interval_s); /* a rate per the interval asked for, whatever the runtime used */
	clock_rfc3339_at(ts, l->have_header ? nettrace_wall_ms(&l->header, e->timestamp) : clock_unix_ms());
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
