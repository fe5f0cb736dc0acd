/*
 * fuzz_nettrace.c - libFuzzer target for the nettrace reader: the bytes a
 * runtime (or anything at the diagnostic port) streams to /trace, and any
 * file given to `diagport nettrace stats`. The input is read twice, whole
 * and in pieces whose sizes the first byte picks; both readings must agree
 * on the result, the error and every count (the piece size comes from the
 * input's length, so a real trace as a seed is read as it is). The callbacks touch every
 * stack address and field so that ASan sees any bad pointer handed out.
 * Each event's payload is also read by its field list (evpayload.h) and
 * given to what reads counters and logs (metrics.h, logs.h: the /metrics
 * reading, the /livemetrics and /logs converters, the latter's scopes by
 * activity ID and its events held back until sequence points), whose output
 * is dropped. The decoded values must hold evpayload.h's layout (depth rises
 * by one only under an object or array, an element's index within its
 * array's count); a request event (aspnet_req.h) is fed to the three ASP.NET
 * triggers, with heartbeats, its path matched against globs. Seeds: small
 * real .NET 10 traces (tests/fuzz/seeds-nettrace/; aspnet.nettrace holds
 * DiagnosticSource's request events, whose Arguments are arrays of structs).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/buf.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "launcher/trace/aspnet_req.h"
#include "launcher/trace/logs.h"
#include "launcher/metrics/metrics.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t sink;

static int on_meta(void *ctx, const struct nettrace_meta *m)
{
	(void)ctx;
	sink += strlen(m->provider) + strlen(m->name) + m->n_fields;
	for (size_t i = 0; i < m->n_fields; i++)
		sink += strlen(m->fields[i].name) + m->fields[i].type;
	return 0;
}

struct readers {
	struct evpayload pl;
	struct logs *logs;
	struct metrics_live *live;
	struct buf out;
	struct aspnet_trig *trig[3];
};

/* evpayload.h's layout: each value's parent (the nearest earlier value one level up) is an object or array. */
static void check_layout(const struct evpayload *p)
{
	for (size_t i = 0; i < p->n; i++) {
		const struct evvalue *v = &p->v[i], *up = NULL;

		if (v->type == NT_STRING && v->s == NULL)
			abort();
		if (v->s)
			sink += strlen(v->s);
		if (v->depth == 0) {
			if (v->index != -1)
				abort();
			continue;
		}
		for (size_t k = i; k-- > 0;)
			if (p->v[k].depth == v->depth - 1) {
				up = &p->v[k];
				break;
			}
		if (up == NULL || (i > 0 && v->depth > p->v[i - 1].depth + 1))
			abort();
		if (up->type == NT_ARRAY ? v->index < 0 || v->index >= up->i : up->type != NT_OBJECT || v->index != up->index)
			abort();
	}
}

static void request(struct readers *r, const struct nettrace_event *e)
{
	struct aspnet_req q;
	int64_t ms = e->timestamp / 10000;

	if (!aspnet_req_event(e, &r->pl, &q))
		return;
	if (q.kind != ASPNET_REQ_START && q.kind != ASPNET_REQ_STOP)
		abort();
	sink += strlen(q.activity_id) + strlen(q.path) + (uint64_t)q.status + (uint64_t)q.duration_ticks;
	for (int i = 0; i < 3; i++) {
		sink += aspnet_trig_feed(r->trig[i], &q, ms);
		sink += aspnet_trig_heartbeat(r->trig[i], ms);
		if (aspnet_trig_count(r->trig[i]) < 0 || aspnet_trig_inflight(r->trig[i]) > ASPNET_TRIG_MAX_INFLIGHT)
			abort();
	}
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct readers *r = ctx;
	struct msample ms;
	struct err_msg em;

	for (size_t i = 0; i < e->stack_n; i++)
		sink += e->stack[i];
	for (size_t i = 0; i < e->payload_len; i++)
		sink += e->payload[i];
	sink += e->meta->id;
	if (r == NULL)
		return 0;
	if (evpayload_decode(&r->pl, e, &em) == 0) {
		check_layout(&r->pl);
		request(r, e);
		struct metrics_note mn;

		if (metrics_sample(e, &r->pl, &ms)) {
			sink += strlen(ms.provider) + strlen(ms.name) + strlen(ms.unit) + strlen(ms.tags);
			metrics_per_interval(&ms, 5);
		}
		metrics_note(e, &r->pl, "c", &mn); /* the shared session's own events: interval, refusals */
		sink += (unsigned)mn.kind + strlen(mn.running) + strlen(mn.want.refresh);
	}
	logs_callbacks.event(r->logs, e);
	metrics_live_callbacks.event(r->live, e);
	if (r->out.len > (1 << 20))
		buf_reset(&r->out);
	return 0;
}

static int on_trace(void *ctx, const struct nettrace_trace *t)
{
	struct readers *r = ctx;

	if (r) {
		logs_callbacks.trace(r->logs, t);
		metrics_live_callbacks.trace(r->live, t);
	}
	return 0;
}

static int on_sequence_point(void *ctx, int64_t timestamp)
{
	struct readers *r = ctx;

	if (r)
		logs_callbacks.sequence_point(r->logs, timestamp);
	return 0;
}

static const struct nettrace_callbacks cbs = { on_trace, on_meta, on_event, on_sequence_point };

static int read_in(const uint8_t *p, size_t n, size_t piece, struct nettrace_stats *st, struct err_msg *em,
		   struct readers *r)
{
	struct nettrace_limits lim = nettrace_default_limits;
	struct nettrace *t;
	int rc = 0;

	lim.max_block = 1 << 16; /* small caps, so that the fuzzer reaches them */
	lim.max_metadata_bytes = 1 << 18;
	lim.max_stack_bytes = 1 << 18;
	lim.max_threads = 1024;
	t = nettrace_new(&lim, &cbs, r);
	for (size_t at = 0; rc == 0 && at < n; at += piece)
		rc = nettrace_feed(t, p + at, n - at < piece ? n - at : piece, em);
	if (rc == 0)
		rc = nettrace_finish(t, em);
	nettrace_stats(t, st);
	nettrace_free(t);
	return rc;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct nettrace_stats a, b;
	struct err_msg ea = { "" }, eb = { "" };
	size_t piece;
	int ra, rb;

	if (size < 1)
		return 0;
	piece = size % 17 + 1;
	{
		struct readers r = { 0 };
		struct logs_filter f = { .level = -1, .use_app_filters = true };
		struct metrics_selection sel = { 0 };
		static const struct aspnet_status_range codes = { 400, 599 };
		char *inc[] = { "/**/*", "/a*b/**/c" }, *exc[] = { "**/*.js" };
		const struct aspnet_trig_config tc[3] = {
			{ .type = ASPNET_TRIG_COUNT, .count = 5, .window_ms = 1000, .include = inc, .n_include = 2 },
			{ .type = ASPNET_TRIG_STATUS, .count = 5, .window_ms = 60000, .status = &codes, .n_status = 1,
			  .exclude = exc, .n_exclude = 1 },
			{ .type = ASPNET_TRIG_DURATION, .count = 5, .window_ms = 86400000, .duration_ms = 1, .max_inflight = 8 },
		};

		for (int i = 0; i < 3; i++)
			if (aspnet_trig_new(&tc[i], &r.trig[i], NULL) != 0)
				abort();
		buf_init(&r.out, 0);
		metrics_selection_defaults(&sel);
		r.logs = logs_new(&f, (enum logs_format)(size % 3), &r.out);
		r.live = metrics_live_new(&sel, &r.out);
		ra = read_in(data, size, size, &a, &ea, &r);
		logs_flush(r.logs);
		logs_free(r.logs);
		metrics_live_free(r.live);
		evpayload_free(&r.pl);
		buf_free(&r.out);
		for (int i = 0; i < 3; i++)
			aspnet_trig_free(r.trig[i]);
	}
	rb = read_in(data, size, piece, &b, &eb, NULL);
	if (ra != rb || strcmp(ea.text, eb.text) != 0 || a.events != b.events || a.metadata != b.metadata ||
	    a.stacks != b.stacks || a.dropped != b.dropped || a.blocks != b.blocks)
		abort();
	return 0;
}
