/*
 * aspnet_req.c - ASP.NET Core's request events and dotnet-monitor's ASP.NET
 * triggers (aspnet_req.h).
 *
 * The events: the runtime's DiagnosticSourceEventSource, given dotnet-monitor's
 * FilterAndPayloadSpecs, writes Activity1Start and Activity1Stop for each
 * request hosted by ASP.NET Core; their Arguments are {Key, Value} pairs that
 * evpayload.h lays out flat after the array's value.
 *
 * The triggers: AspNetRequestCountTrigger, AspNetRequestDurationTrigger and
 * AspNetRequestStatusTrigger over SlidingWindow, ported line for line where
 * they decide anything; where dotnet-monitor would throw (a second start with
 * the same activity ID, a stop without its numbers) this code goes on, and
 * says so where it does. Their IncludePaths / ExcludePaths are
 * aspnet_glob.c's.
 */
#include "aspnet_req.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "htab.h"
#include "mem.h"
#include "sha256.h"

#define DS_PROVIDER "Microsoft-Diagnostics-DiagnosticSource"
#define ASPNET_SOURCE "Microsoft.AspNetCore"
#define TICKS_PER_MS 10000

/* a - b, saturated: timestamps come from outside */
static int64_t diff(int64_t a, int64_t b)
{
	int64_t r;

	if (__builtin_sub_overflow(a, b, &r))
		return a > b ? INT64_MAX : INT64_MIN;
	return r;
}

/* ---- the events ---- */

int aspnet_req_provider(struct trace_config *c, struct err_msg *em)
{
	return trace_config_http(c, em);
}

/* A whole decimal integer in [lo, hi] (an optional sign, as int.Parse takes it), or def. */
static long long whole(const char *s, long long lo, long long hi, long long def)
{
	char *end;
	long long v;

	if (s == NULL || *s == '\0')
		return def;
	v = strtoll(s, &end, 10);
	return *end == '\0' && v >= lo && v <= hi ? v : def;
}

/* One Arguments pair: its key's first member and value's last, as dotnet-monitor takes them. */
static void argument(struct aspnet_req *r, const struct evvalue *key, const struct evvalue *val)
{
	if (key->type != NT_STRING || val->type != NT_STRING || key->s == NULL || val->s == NULL)
		return;
	if (strcasecmp(key->s, "ActivityId") == 0)
		r->activity_id = val->s;
	else if (strcasecmp(key->s, "Path") == 0)
		r->path = val->s;
	else if (strcasecmp(key->s, "StatusCode") == 0)
		r->status = (int)whole(val->s, 0, INT_MAX, 0);
	else if (strcasecmp(key->s, "ActivityDuration") == 0)
		r->duration_ticks = whole(val->s, 0, LLONG_MAX, -1);
}

int aspnet_req_event(const struct nettrace_event *e, const struct evpayload *p, struct aspnet_req *out)
{
	const char *name = e->meta->name;
	const struct evvalue *args, *key = NULL, *val = NULL;
	struct aspnet_req r = { .activity_id = "", .path = "", .duration_ticks = -1, .timestamp = e->timestamp };

	if (strcmp(e->meta->provider, DS_PROVIDER) != 0)
		return 0;
	/* the runtime names them as the EventSource's methods; TraceEvent as Task/Opcode */
	if (strcmp(name, "Activity1Start") == 0 || strcmp(name, "Activity1/Start") == 0)
		r.kind = ASPNET_REQ_START;
	else if (strcmp(name, "Activity1Stop") == 0 || strcmp(name, "Activity1/Stop") == 0)
		r.kind = ASPNET_REQ_STOP;
	else
		return 0;
	/* Activity1 is whatever the session's filter maps to it: ours maps ASP.NET Core's requests only */
	if (strcmp(evpayload_str(p, "SourceName"), ASPNET_SOURCE) != 0)
		return 0;
	args = evpayload_get(p, "Arguments");
	if (args == NULL || args->type != NT_ARRAY)
		return 0;
	/* the elements' members follow at depth + 1, each element's marked with its index */
	for (const struct evvalue *v = args + 1; v < p->v + p->n && v->depth > args->depth; v++) {
		if (v->depth != args->depth + 1)
			continue;
		if (key == NULL || v->index != key->index) {
			if (key)
				argument(&r, key, val);
			key = v;
		}
		val = v;
	}
	if (key)
		argument(&r, key, val);
	*out = r;
	return 1;
}

/* ---- status codes ---- */

/* Three digits, the first 1-5 (dotnet-monitor's [1-5][0-9]{2}); the value, or -1. */
static int code3(const char *s)
{
	if (s[0] < '1' || s[0] > '5' || s[1] < '0' || s[1] > '9' || s[2] < '0' || s[2] > '9')
		return -1;
	return (s[0] - '0') * 100 + (s[1] - '0') * 10 + (s[2] - '0');
}

int aspnet_status_parse(const char *item, struct aspnet_status_range *out, struct err_msg *em)
{
	size_t n = strlen(item);
	int lo = n >= 3 ? code3(item) : -1, hi = lo;

	if (n == 7 && item[3] == '-')
		hi = code3(item + 4);
	else if (n != 3)
		lo = -1;
	if (lo < 0 || hi < 0)
		return err_set(em, DP_EINVAL, "'%.40s' is not a status code or a range of them (three digits from 100 to "
			       "599, or two joined by '-', as \"400-499\")", item);
	if (lo > hi)
		return err_set(em, DP_EINVAL, "'%s' is not a range of status codes: %d is greater than %d", item, lo, hi);
	*out = (struct aspnet_status_range){ lo, hi };
	return 0;
}

bool aspnet_status_in(const struct aspnet_status_range *r, size_t n, int status)
{
	for (size_t i = 0; i < n; i++)
		if (status >= r[i].lo && status <= r[i].hi)
			return true;
	return false;
}

/* ---- the sliding window (dotnet-monitor's SlidingWindow) ---- */

/*
 * Points less than a second after the newest bucket's first one join it; a
 * new bucket drops those older than the window. So buckets start at least a
 * second apart and all lie within the window of the newest: at most
 * window_ms / 1000 + 2 of them (86,402 for a day), whatever comes in.
 */
#define BUCKET_MS 1000

struct bucket {
	int64_t ts;
	long long n;
};

struct window {
	struct bucket *b; /* a ring: head, then len buckets */
	size_t cap, head, len;
	long long count, span_ms;
};

static struct bucket *bucket_at(const struct window *w, size_t i)
{
	return &w->b[(w->head + i) % w->cap];
}

static void window_add(struct window *w, int64_t ts)
{
	if (w->len && diff(ts, bucket_at(w, w->len - 1)->ts) < BUCKET_MS) {
		bucket_at(w, w->len - 1)->n++;
		w->count++;
		return;
	}
	if (w->len == w->cap) { /* a ring: grown by copying it out in order, not by MEM_GROW's realloc */
		size_t cap = w->cap ? w->cap * 2 : 8;
		struct bucket *b = mem_alloc(cap * sizeof(*b));

		for (size_t i = 0; i < w->len; i++)
			b[i] = *bucket_at(w, i);
		free(w->b);
		w->b = b;
		w->cap = cap;
		w->head = 0;
	}
	*bucket_at(w, w->len++) = (struct bucket){ ts, 1 };
	w->count++;
	while (w->len && diff(ts, bucket_at(w, 0)->ts) > w->span_ms) {
		w->count -= bucket_at(w, 0)->n;
		w->head = (w->head + 1) % w->cap;
		w->len--;
	}
}

static void window_clear(struct window *w)
{
	w->head = w->len = 0;
	w->count = 0;
}

/* ---- requests in flight (AspNetRequestDuration) ---- */

/*
 * dotnet-monitor keeps every started request in a Dictionary until its stop
 * or a heartbeat that finds it slow. Here at most max of them are followed:
 * past that, the oldest started is dropped unfinished (its stop, if it
 * comes, is then not counted, as a stop whose start was never seen), so a
 * flood of requests that never end costs a bounded table, not the agent's
 * memory. An entry is the activity ID's SHA-256 (16 bytes: IDs can be a
 * kilobyte long and come from the client's traceparent or Request-Id), in the
 * hash table (common/htab.h) by a hash seeded with what the client cannot
 * know, and on a list in the order they started.
 */
#define NIL UINT32_MAX

struct entry {
	uint8_t key[16];
	int64_t start;
	uint64_t hash;
	uint32_t prev, next; /* the started order; next is also the free list */
};

struct inflight {
	struct entry *e;
	uint32_t cap, max; /* entries allocated, and the most there may be */
	struct htab index; /* of uint32_t: entry numbers, by key */
	uint32_t head, tail, free, n;
	uint64_t seed, dropped;
};

static uint64_t key_hash(const struct inflight *f, const uint8_t key[16])
{
	uint64_t x;

	memcpy(&x, key, 8);
	return htab_u64(x ^ f->seed);
}

struct ikey {
	const struct inflight *f;
	const uint8_t *key;
};

static bool same_key(const void *slot, const void *key)
{
	const struct ikey *q = key;

	return memcmp(q->f->e[*(const uint32_t *)slot].key, q->key, 16) == 0;
}

/* The index's slot holding key's entry number, or NULL. */
static uint32_t *find_slot(const struct inflight *f, const uint8_t key[16], uint64_t h)
{
	struct ikey q = { f, key };

	return htab_find(&f->index, h, same_key, &q);
}

/* Room for more entries: doubled up to max, the new ones on the free list. */
static void grow(struct inflight *f)
{
	uint32_t cap = f->cap ? (f->cap > f->max / 2 ? f->max : f->cap * 2) : (f->max < 64 ? f->max : 64);

	f->e = mem_realloc(f->e, cap * sizeof(*f->e));
	for (uint32_t i = cap; i-- > f->cap;) {
		f->e[i].next = f->free;
		f->free = i;
	}
	f->cap = cap;
}

static void unlink_entry(struct inflight *f, uint32_t k)
{
	htab_del(&f->index, find_slot(f, f->e[k].key, f->e[k].hash));
	if (f->e[k].prev != NIL)
		f->e[f->e[k].prev].next = f->e[k].next;
	else
		f->head = f->e[k].next;
	if (f->e[k].next != NIL)
		f->e[f->e[k].next].prev = f->e[k].prev;
	else
		f->tail = f->e[k].prev;
	f->e[k].next = f->free;
	f->free = k;
	f->n--;
}

static void id_key(const char *id, uint8_t key[16])
{
	uint8_t d[SHA256_LEN];

	sha256(id, strlen(id), d);
	memcpy(key, d, 16);
}

/* A request started; one already followed under that ID keeps its start (dotnet-monitor's Add would throw). */
static void inflight_add(struct inflight *f, const char *id, int64_t start)
{
	uint8_t key[16];
	uint64_t h;
	uint32_t k;

	id_key(id, key);
	h = key_hash(f, key);
	if (find_slot(f, key, h) != NULL)
		return;
	if (f->n == f->max) {
		unlink_entry(f, f->head);
		f->dropped++;
	}
	if (f->free == NIL)
		grow(f);
	k = f->free;
	f->free = f->e[k].next;
	memcpy(f->e[k].key, key, 16);
	f->e[k].start = start;
	f->e[k].hash = h;
	f->e[k].prev = f->tail;
	f->e[k].next = NIL;
	if (f->tail != NIL)
		f->e[f->tail].next = k;
	else
		f->head = k;
	f->tail = k;
	*(uint32_t *)htab_put(&f->index, h) = k;
	f->n++;
}

/* A request stopped: whether it was followed (and is no more). */
static bool inflight_take(struct inflight *f, const char *id)
{
	uint8_t key[16];
	uint32_t *k;

	if (f->n == 0)
		return false;
	id_key(id, key);
	if ((k = find_slot(f, key, key_hash(f, key))) == NULL)
		return false;
	unlink_entry(f, *k);
	return true;
}

static void inflight_clear(struct inflight *f)
{
	while (f->head != NIL)
		unlink_entry(f, f->head);
}

/* ---- the triggers ---- */

struct aspnet_trig {
	enum aspnet_trig_type type;
	long long need, duration_ms;
	struct aspnet_status_range *status;
	size_t n_status;
	struct aspnet_glob *glob;
	struct window w;
	struct inflight req;
	bool beat;          /* a heartbeat was looked at, at last_beat */
	int64_t last_beat;
};

int aspnet_trig_new(const struct aspnet_trig_config *c, struct aspnet_trig **out, struct err_msg *em)
{
	struct aspnet_trig *t;
	struct aspnet_glob *g = NULL;
	int rc;

	if (c->type != ASPNET_TRIG_COUNT && c->type != ASPNET_TRIG_DURATION && c->type != ASPNET_TRIG_STATUS)
		return err_set(em, DP_EINVAL, "unknown ASP.NET trigger type %d", (int)c->type);
	if (c->count < 1)
		return err_set(em, DP_EINVAL, "%s must be at least 1, not %lld",
			       c->type == ASPNET_TRIG_STATUS ? "ResponseCount" : "RequestCount", c->count);
	if (c->window_ms < 1000 || c->window_ms > 86400000)
		return err_set(em, DP_EINVAL, "SlidingWindowDuration must be from 00:00:01 to 1.00:00:00, not %lld ms",
			       c->window_ms);
	if (c->type == ASPNET_TRIG_DURATION && (c->duration_ms < 0 || c->duration_ms > 3600000))
		return err_set(em, DP_EINVAL, "RequestDuration must be from 00:00:00 to 01:00:00, not %lld ms",
			       c->duration_ms);
	if (c->type == ASPNET_TRIG_STATUS && c->n_status == 0)
		return err_set(em, DP_EINVAL, "StatusCodes must hold at least one code or range");
	for (size_t i = 0; c->type == ASPNET_TRIG_STATUS && i < c->n_status; i++)
		if (c->status[i].lo < 100 || c->status[i].hi > 599 || c->status[i].lo > c->status[i].hi)
			return err_set(em, DP_EINVAL, "StatusCodes %d-%d is not a range of status codes (100-599)",
				       c->status[i].lo, c->status[i].hi);
	if ((rc = aspnet_glob_new(c->include, c->n_include, c->exclude, c->n_exclude, &g, em)) != 0)
		return rc;
	t = mem_zalloc(sizeof(*t));
	t->type = c->type;
	t->need = c->count;
	t->duration_ms = c->duration_ms;
	t->glob = g;
	if (c->type == ASPNET_TRIG_STATUS) {
		t->status = mem_alloc(c->n_status * sizeof(*t->status));
		memcpy(t->status, c->status, c->n_status * sizeof(*t->status));
		t->n_status = c->n_status;
	}
	t->w.span_ms = c->window_ms;
	t->req.max = c->max_inflight && c->max_inflight < ASPNET_TRIG_MAX_INFLIGHT ? (uint32_t)c->max_inflight
										   : ASPNET_TRIG_MAX_INFLIGHT;
	t->req.head = t->req.tail = t->req.free = NIL;
	htab_init(&t->req.index, sizeof(uint32_t));
	t->req.seed = (uint64_t)(uintptr_t)t * 0x9e3779b97f4a7c15ull ^ (uint64_t)(uintptr_t)&t->req.seed;
	*out = t;
	return 0;
}

void aspnet_trig_free(struct aspnet_trig *t)
{
	if (t == NULL)
		return;
	aspnet_glob_free(t->glob);
	free(t->status);
	free(t->w.b);
	free(t->req.e);
	htab_free(&t->req.index);
	free(t);
}

void aspnet_trig_reset(struct aspnet_trig *t)
{
	window_clear(&t->w);
	inflight_clear(&t->req);
	t->beat = false;
}

bool aspnet_trig_feed(struct aspnet_trig *t, const struct aspnet_req *r, int64_t ts_ms)
{
	if (!aspnet_glob_match(t->glob, r->path))
		return false; /* no need to count what is not watched */
	switch (t->type) {
	case ASPNET_TRIG_COUNT:
		if (r->kind != ASPNET_REQ_START)
			return false;
		window_add(&t->w, ts_ms);
		break;
	case ASPNET_TRIG_STATUS:
		if (r->kind != ASPNET_REQ_STOP)
			return false;
		if (aspnet_status_in(t->status, t->n_status, r->status))
			window_add(&t->w, ts_ms);
		break;
	case ASPNET_TRIG_DURATION:
		if (r->activity_id[0] == '\0')
			return false; /* nothing to pair its start and stop by */
		if (r->kind == ASPNET_REQ_START) {
			inflight_add(&t->req, r->activity_id, ts_ms);
			return false;
		}
		/* not followed: never seen, dropped at the cap, or already counted slow by a heartbeat */
		if (!inflight_take(&t->req, r->activity_id))
			return false;
		if (r->duration_ticks >= t->duration_ms * TICKS_PER_MS)
			window_add(&t->w, ts_ms);
		break;
	}
	return t->w.count >= t->need;
}

bool aspnet_trig_heartbeat(struct aspnet_trig *t, int64_t now_ms)
{
	uint32_t k, next;

	if (t->type != ASPNET_TRIG_DURATION || (t->beat && diff(now_ms, t->last_beat) <= ASPNET_TRIG_HEARTBEAT_MS))
		return false;
	t->beat = true;
	t->last_beat = now_ms;
	for (k = t->req.head; k != NIL; k = next) {
		next = t->req.e[k].next;
		if (diff(now_ms, t->req.e[k].start) >= t->duration_ms) {
			/* slow already: counted now, and not again when it ends */
			window_add(&t->w, now_ms);
			unlink_entry(&t->req, k);
		}
	}
	return t->w.count >= t->need;
}

long long aspnet_trig_count(const struct aspnet_trig *t)
{
	return t->w.count;
}

size_t aspnet_trig_inflight(const struct aspnet_trig *t)
{
	return t->req.n;
}

uint64_t aspnet_trig_dropped(const struct aspnet_trig *t)
{
	return t->req.dropped;
}

