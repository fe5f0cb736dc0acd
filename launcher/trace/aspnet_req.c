/*
 * aspnet_req.c - ASP.NET Core's request events and dotnet-monitor's ASP.NET
 * triggers (aspnet_req.h).
 *
 * The events: the runtime's DiagnosticSourceEventSource, given dotnet-monitor's
 * FilterAndPayloadSpecs, writes Activity1Start and Activity1Stop for each
 * request hosted by ASP.NET Core; their Arguments are {Key, Value} pairs that
 * evpayload.h lays out flat after the array's value.
 *
 * The globs: dotnet-monitor's GlobMatcher turns each pattern into a regular
 * expression ("**" "/" into ([^/]*)/)*, "*" into [^/]*, the rest escaped,
 * anchored, case-insensitive, culture-invariant) and lets .NET's regex engine
 * run it, under a 2 s timeout. Both wildcards are regular, so here a pattern
 * is a list of tokens run as an automaton over the path, every state at once:
 * time is the path's length times the pattern's, whatever the pattern.
 *
 * The triggers: AspNetRequestCountTrigger, AspNetRequestDurationTrigger and
 * AspNetRequestStatusTrigger over SlidingWindow, ported line for line where
 * they decide anything; where dotnet-monitor would throw (a second start with
 * the same activity ID, a stop without its numbers) this code goes on, and
 * says so where it does.
 */
#include "aspnet_req.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

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

/* ---- globs ---- */

#define TOK_STAR 0xFFFFFFFEu     /* [^/]* */
#define TOK_GLOBSTAR 0xFFFFFFFFu /* ([^/]*)/)*: empty, or anything ending in '/' */
#define INVALID_BYTE 0x110000u   /* + the byte: a byte that is not UTF-8, equal only to itself */

struct pattern {
	uint32_t *tok; /* code points folded, and the two wildcards */
	size_t n;
};

struct aspnet_glob {
	struct pattern *inc, *exc;
	size_t n_inc, n_exc;
};

/*
 * Case-insensitive comparison, as .NET's regex does it culture-invariantly,
 * for the scripts a URL path is likely to hold: ASCII, Latin-1, Latin
 * Extended-A, basic Greek and Cyrillic, and the few letters Unicode folds
 * into those (long s, Kelvin and Angstrom signs, micro sign, final sigma).
 * Other letters compare as they are.
 */
static uint32_t fold(uint32_t c)
{
	if (c < 0x80)
		return c >= 'A' && c <= 'Z' ? c + 32 : c;
	if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) ||
	    (c >= 0x410 && c <= 0x42F))
		return c + 32;
	if (c >= 0x400 && c <= 0x40F)
		return c + 80;
	if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
		return c | 1; /* pairs: upper even, lower odd */
	if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
		return c + (c & 1); /* pairs: upper odd, lower even */
	switch (c) {
	case 0x178: return 0xFF;   /* Y with diaeresis */
	case 0x17F: return 's';    /* long s */
	case 0x212A: return 'k';   /* Kelvin sign */
	case 0x212B: return 0xE5;  /* Angstrom sign */
	case 0xB5: return 0x3BC;   /* micro sign */
	case 0x3C2: return 0x3C3;  /* final sigma */
	default: return c;
	}
}

/* The code point at *s (advanced past it); a byte that does not start valid UTF-8 is INVALID_BYTE + it. */
static uint32_t next_cp(const unsigned char **s)
{
	const unsigned char *p = *s;
	uint32_t c = p[0], min;
	int n;

	if (c < 0x80) {
		*s = p + 1;
		return c;
	}
	if (c >= 0xC2 && c <= 0xDF)
		n = 1, c &= 0x1F, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 2, c &= 0x0F, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 3, c &= 0x07, min = 0x10000;
	else
		n = 0, min = 0;
	for (int i = 1; i <= n; i++) {
		if ((p[i] & 0xC0) != 0x80) {
			n = 0;
			break;
		}
		c = (c << 6) | (p[i] & 0x3F);
	}
	if (n == 0 || c < min || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) {
		*s = p + 1;
		return INVALID_BYTE + p[0];
	}
	*s = p + 1 + n;
	return c;
}

static void compile(const char *glob, struct pattern *out)
{
	const unsigned char *s = (const unsigned char *)glob;

	out->tok = mem_alloc((strlen(glob) + 1) * sizeof(*out->tok));
	out->n = 0;
	while (*s) {
		if (s[0] == '*' && s[1] == '*' && s[2] == '/') {
			out->tok[out->n++] = TOK_GLOBSTAR;
			s += 3;
		} else if (s[0] == '*') {
			out->tok[out->n++] = TOK_STAR;
			s++;
		} else {
			out->tok[out->n++] = fold(next_cp(&s));
		}
	}
}

/* After a step: a wildcard may match nothing, so the state before it is also the state after it. */
static void closure(const struct pattern *pt, uint8_t *at)
{
	for (size_t i = 0; i < pt->n; i++)
		if (at[i] && (pt->tok[i] == TOK_STAR || pt->tok[i] == TOK_GLOBSTAR))
			at[i + 1] = 1;
}

/*
 * Whether the pattern matches path[0..len) whole. The automaton's states:
 * at[i], the next token to match is i (at[n]: all matched); mid[i], inside a
 * globstar's segment (i a globstar), which must reach a '/' to end.
 */
static bool match_one(const struct pattern *pt, const char *path, size_t len)
{
	uint8_t small[4 * 64], *buf = pt->n < 63 ? small : mem_alloc(4 * (pt->n + 1));
	uint8_t *at = buf, *mid = buf + pt->n + 1, *nat = mid + pt->n + 1, *nmid = nat + pt->n + 1;
	const unsigned char *s = (const unsigned char *)path, *end = s + len;
	bool any = true, ok;

	memset(buf, 0, 4 * (pt->n + 1));
	at[0] = 1;
	closure(pt, at);
	while (s < end && any) {
		uint32_t c = fold(next_cp(&s));
		uint8_t *t;

		memset(nat, 0, pt->n + 1);
		memset(nmid, 0, pt->n + 1);
		any = false;
		for (size_t i = 0; i < pt->n; i++) {
			uint32_t k = pt->tok[i];

			if (at[i]) {
				if (k == TOK_STAR) {
					if (c != '/')
						nat[i] = 1;
				} else if (k == TOK_GLOBSTAR) {
					(c == '/' ? nat : nmid)[i] = 1;
				} else if (k == c) {
					nat[i + 1] = 1;
				}
			}
			if (mid[i])
				(c == '/' ? nat : nmid)[i] = 1;
		}
		closure(pt, nat);
		for (size_t i = 0; i <= pt->n && !any; i++)
			any = nat[i] || nmid[i];
		t = at, at = nat, nat = t;
		t = mid, mid = nmid, nmid = t;
	}
	ok = s == end && at[pt->n];
	if (buf != small)
		free(buf);
	return ok;
}

/* As .NET's "$" without Multiline: at the end, or before a final '\n'. */
static bool match_path(const struct pattern *pt, const char *path)
{
	size_t len = strlen(path);

	return match_one(pt, path, len) || (len > 0 && path[len - 1] == '\n' && match_one(pt, path, len - 1));
}

int aspnet_glob_new(char *const *include, size_t n_include, char *const *exclude, size_t n_exclude,
		    struct aspnet_glob **out, struct err_msg *em)
{
	struct aspnet_glob *g;

	for (size_t i = 0; i < n_include + n_exclude; i++) {
		const char *s = i < n_include ? include[i] : exclude[i - n_include];

		if (strstr(s, "***"))
			return err_set(em, DP_EINVAL, "%s '%.100s': only * or **/ wildcard characters are allowed",
				       i < n_include ? "IncludePaths" : "ExcludePaths", s);
	}
	g = mem_zalloc(sizeof(*g));
	g->inc = mem_zalloc((n_include ? n_include : 1) * sizeof(*g->inc));
	g->exc = mem_zalloc((n_exclude ? n_exclude : 1) * sizeof(*g->exc));
	for (; g->n_inc < n_include; g->n_inc++)
		compile(include[g->n_inc], &g->inc[g->n_inc]);
	for (; g->n_exc < n_exclude; g->n_exc++)
		compile(exclude[g->n_exc], &g->exc[g->n_exc]);
	*out = g;
	return 0;
}

bool aspnet_glob_match(const struct aspnet_glob *g, const char *path)
{
	for (size_t i = 0; i < g->n_exc; i++)
		if (match_path(&g->exc[i], path))
			return false;
	if (g->n_inc == 0)
		return true;
	for (size_t i = 0; i < g->n_inc; i++)
		if (match_path(&g->inc[i], path))
			return true;
	return false;
}

void aspnet_glob_free(struct aspnet_glob *g)
{
	if (g == NULL)
		return;
	for (size_t i = 0; i < g->n_inc; i++)
		free(g->inc[i].tok);
	for (size_t i = 0; i < g->n_exc; i++)
		free(g->exc[i].tok);
	free(g->inc);
	free(g->exc);
	free(g);
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
	if (w->len == w->cap) {
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
 * kilobyte long and come from the client's traceparent or Request-Id), in an
 * open-addressing index (linear probing, backward-shift deletion) keyed by
 * a seed the client cannot know, and on a list in the order they started.
 */
#define NIL UINT32_MAX

struct entry {
	uint8_t key[16];
	int64_t start;
	uint32_t hash;
	uint32_t prev, next; /* the started order; next is also the free list */
};

struct inflight {
	struct entry *e;
	uint32_t cap, max; /* entries allocated, and the most there may be */
	uint32_t *slot;    /* the index: entry numbers, NIL when empty */
	uint32_t mask;     /* slots - 1; slots a power of two, at least twice cap */
	uint32_t head, tail, free, n;
	uint64_t seed, dropped;
};

static uint32_t key_hash(const struct inflight *f, const uint8_t key[16])
{
	uint64_t x;

	memcpy(&x, key, 8);
	x ^= f->seed;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
	return (uint32_t)(x ^ (x >> 31));
}

/* The slot holding key, or the empty slot where it would go. */
static uint32_t find_slot(const struct inflight *f, const uint8_t key[16], uint32_t h)
{
	uint32_t i = h & f->mask;

	while (f->slot[i] != NIL && memcmp(f->e[f->slot[i]].key, key, 16) != 0)
		i = (i + 1) & f->mask;
	return i;
}

static void grow(struct inflight *f)
{
	uint32_t cap = f->cap ? (f->cap > f->max / 2 ? f->max : f->cap * 2) : (f->max < 64 ? f->max : 64), nslot = 4;

	while (nslot < 2 * cap)
		nslot *= 2;
	f->e = mem_realloc(f->e, cap * sizeof(*f->e));
	for (uint32_t i = cap; i-- > f->cap;) {
		f->e[i].next = f->free;
		f->free = i;
	}
	f->cap = cap;
	free(f->slot);
	f->slot = mem_alloc(nslot * sizeof(*f->slot));
	memset(f->slot, 0xFF, nslot * sizeof(*f->slot));
	f->mask = nslot - 1;
	for (uint32_t k = f->head; k != NIL; k = f->e[k].next)
		f->slot[find_slot(f, f->e[k].key, f->e[k].hash)] = k;
}

static void unlink_entry(struct inflight *f, uint32_t k)
{
	uint32_t i = find_slot(f, f->e[k].key, f->e[k].hash), j = i;

	for (;;) { /* backward shift: no tombstones */
		uint32_t home;

		j = (j + 1) & f->mask;
		if (f->slot[j] == NIL)
			break;
		home = f->e[f->slot[j]].hash & f->mask;
		if (((j - home) & f->mask) >= ((j - i) & f->mask)) {
			f->slot[i] = f->slot[j];
			i = j;
		}
	}
	f->slot[i] = NIL;
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
	uint32_t h, k;

	id_key(id, key);
	h = key_hash(f, key);
	if (f->cap && f->slot[find_slot(f, key, h)] != NIL)
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
	f->slot[find_slot(f, key, h)] = k;
	f->n++;
}

/* A request stopped: whether it was followed (and is no more). */
static bool inflight_take(struct inflight *f, const char *id)
{
	uint8_t key[16];
	uint32_t k;

	if (f->n == 0)
		return false;
	id_key(id, key);
	k = f->slot[find_slot(f, key, key_hash(f, key))];
	if (k == NIL)
		return false;
	unlink_entry(f, k);
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
	free(t->req.slot);
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
