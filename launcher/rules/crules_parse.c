/*
 * crules_parse.c - the collection rules' settings bound into a crule_set
 * (crules.h), once, at start.
 *
 * config.c keeps every CollectionRules:*, CollectionRuleDefaults:* and
 * Templates:* setting as text with where it came from (a file's line and
 * column, a variable, a key-per-file file), whichever source gave it. Here
 * those colon paths become a tree again (names case-insensitive, as .NET
 * configuration compares them; a list is the children 0, 1, ...), and each
 * rule is bound as dotnet-monitor's options classes bind it: required
 * settings, defaults (dotnet-monitor's, then CollectionRuleDefaults), ranges.
 * Every setting read is marked; one left unmarked is refused by its full
 * path, so a misspelt or unimplemented setting never passes unseen.
 *
 * The bodies of CollectTrace's Providers, CollectLiveMetrics and CollectLogs
 * are written as the HTTP API's request bodies and checked by the same
 * parsers (trace.h, metrics.h, logs.h) that will read them when the action
 * runs: one reading of each shape.
 */
#include "crules.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launcher/capture/capture.h"
#include "launcher/capture/dump.h"
#include "launcher/trace/logs.h"
#include "mem.h"
#include "launcher/trace/trace.h"

#define MAX_RULES 64
#define MAX_ACTIONS 16
#define MAX_FILTERS 16
#define MAX_LIST 64      /* items of one list setting (paths, status codes, providers, names) */
#define MAX_PATH 512
#define DAY_MS (24LL * 3600 * 1000)

struct cnode {
	char *name;        /* as first written */
	char *value;       /* a leaf's value, or NULL */
	const char *where; /* borrowed from the configuration */
	struct cnode *up;
	struct cnode **k;
	size_t n;
	bool used;
};

/* ---- the tree ---- */

static struct cnode *node_child(struct cnode *p, const char *name, size_t len, bool make, const char *where)
{
	struct cnode *c;

	for (size_t i = 0; i < p->n; i++)
		if (strlen(p->k[i]->name) == len && strncasecmp(p->k[i]->name, name, len) == 0)
			return p->k[i];
	if (!make)
		return NULL;
	c = mem_zalloc(sizeof(*c));
	c->name = mem_strndup(name, len);
	c->where = where;
	c->up = p;
	p->k = mem_realloc(p->k, (p->n + 1) * sizeof(*p->k));
	p->k[p->n++] = c;
	return c;
}

static void node_free(struct cnode *n)
{
	if (n == NULL)
		return;
	for (size_t i = 0; i < n->n; i++)
		node_free(n->k[i]);
	free(n->k);
	free(n->name);
	free(n->value);
	free(n);
}

static void node_path(const struct cnode *n, char *out, size_t cap)
{
	const struct cnode *chain[32] = { NULL };
	size_t depth = 0, o = 0;

	for (; n && n->up && depth < 32; n = n->up)
		chain[depth++] = n;
	out[0] = '\0';
	while (depth-- > 0 && o + 1 < cap) {
		int k = snprintf(out + o, cap - o, "%s%s", o ? ":" : "", chain[depth]->name);

		o = k < 0 || (size_t)k >= cap - o ? cap : o + (size_t)k;
	}
}

/* A refusal naming where n came from and its full path. */
static int refuse(int code, const struct cnode *n, struct err_msg *em, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
static int refuse(int code, const struct cnode *n, struct err_msg *em, const char *fmt, ...)
{
	char path[MAX_PATH], what[800];
	va_list ap;

	node_path(n, path, sizeof(path));
	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return err_set(em, code, "%s: %s: %s", n->where ? n->where : "settings", path, what);
}

/* A required setting NAME under n is absent: named by its full path, where n came from. */
static int refuse_missing(const struct cnode *n, const char *name, struct err_msg *em, const char *hint)
{
	char path[MAX_PATH];
	const struct cnode *stray = NULL;

	node_path(n, path, sizeof(path));
	for (size_t i = 0; i < n->n && !stray; i++) /* a setting nobody read beside it: a misspelling, most likely */
		if (!n->k[i]->used)
			stray = n->k[i];
	if (stray)
		return err_set(em, DP_EINVAL, "%s: %s%s%s: is required%s; %s:%s here is not a setting diagport knows "
			       "(misspelt?)", n->where ? n->where : "settings", path, *path ? ":" : "", name, hint, path,
			       stray->name);
	return err_set(em, DP_EINVAL, "%s: %s%s%s: is required%s", n->where ? n->where : "settings", path, *path ? ":" : "",
		       name, hint);
}

/* A child by name, marked as read; NULL when absent. */
static struct cnode *get(struct cnode *n, const char *name)
{
	struct cnode *c = n ? node_child(n, name, strlen(name), false, NULL) : NULL;

	if (c)
		c->used = true;
	return c;
}

/* A leaf's text: 0 with *out (borrowed) or NULL when absent; refused when it is a section. */
static int get_text(struct cnode *n, const char *name, bool required, const char **out, struct err_msg *em)
{
	struct cnode *c = get(n, name);

	*out = NULL;
	if (c == NULL || (c->value == NULL && c->n == 0)) {
		if (required)
			return refuse_missing(n, name, em, "");
		return 0;
	}
	if (c->n)
		return refuse(DP_EINVAL, c, em, "takes a value, not settings under it");
	*out = c->value;
	return 0;
}

static int get_str(struct cnode *n, const char *name, bool required, char **out, struct err_msg *em)
{
	const char *t;
	int rc = get_text(n, name, required, &t, em);

	if (rc == 0 && t) {
		if (*t == '\0' && required)
			return refuse(DP_EINVAL, get(n, name), em, "must not be empty");
		free(*out);
		*out = mem_strdup(t);
	}
	return rc;
}

static int get_double(struct cnode *n, const char *name, bool *has, double *out, double lo, double hi,
		      struct err_msg *em)
{
	const char *t;
	char *end;
	double v;
	int rc = get_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	errno = 0;
	v = strtod(t, &end);
	if (end == t || *end || errno || !isfinite(v) || isspace((unsigned char)*t))
		return refuse(DP_EINVAL, get(n, name), em, "'%.64s' is not a number", t);
	if (v < lo || v > hi)
		return refuse(DP_EINVAL, get(n, name), em, "%g is outside %g..%g", v, lo, hi);
	*has = true;
	*out = v;
	return 0;
}

static int get_uint(struct cnode *n, const char *name, bool *has, unsigned *out, unsigned lo, unsigned hi,
		    struct err_msg *em)
{
	const char *t;
	char *end;
	unsigned long v;
	int rc = get_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	errno = 0;
	v = strtoul(t, &end, 10);
	if (!isdigit((unsigned char)*t) || *end || errno || v < lo || v > hi)
		return refuse(DP_EINVAL, get(n, name), em, "'%.64s' is not a whole number in %u..%u", t, lo, hi);
	*has = true;
	*out = (unsigned)v;
	return 0;
}

static int get_bool(struct cnode *n, const char *name, bool *out, struct err_msg *em)
{
	const char *t;
	int rc = get_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	if (strcasecmp(t, "true") == 0)
		*out = true;
	else if (strcasecmp(t, "false") == 0)
		*out = false;
	else
		return refuse(DP_EINVAL, get(n, name), em, "'%.64s' is not true or false", t);
	return 0;
}

static int get_timespan(struct cnode *n, const char *name, bool *has, long long *out, long long lo, long long hi,
			struct err_msg *em)
{
	const char *t;
	char a[32], b[32];
	long long v;
	int rc = get_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	if ((v = crules_timespan(t)) < 0)
		return refuse(DP_EINVAL, get(n, name), em, "'%.64s' is not a TimeSpan ([d.]hh:mm:ss, e.g. 00:00:30)", t);
	if (v < lo || v > hi) {
		crules_timespan_text(a, sizeof(a), lo);
		crules_timespan_text(b, sizeof(b), hi);
		return refuse(DP_EINVAL, get(n, name), em, "'%.64s' is outside %s..%s", t, a, b);
	}
	*has = true;
	*out = v;
	return 0;
}

/* A list: the children 0, 1, ... in order of their numbers; *out new (strings borrowed), NULL when absent. */
static int get_list(struct cnode *n, const char *name, struct cnode ***out, size_t *count, struct err_msg *em)
{
	struct cnode *c = get(n, name), **items;
	size_t m;

	*out = NULL;
	*count = 0;
	if (c == NULL)
		return 0;
	if (c->value && c->n == 0) {
		if (*c->value == '\0') /* "Filters": "" - .NET binds an empty list */
			return 0;
		return refuse(DP_EINVAL, c, em, "takes a list (%s:0, %s:1, ...), not one value", c->name, c->name);
	}
	if ((m = c->n) > MAX_LIST)
		return refuse(DP_ETOOBIG, c, em, "more than %d items", MAX_LIST);
	items = mem_zalloc((m ? m : 1) * sizeof(*items));
	for (size_t i = 0; i < m; i++) {
		char *end;
		unsigned long idx = strtoul(c->k[i]->name, &end, 10);

		if (!isdigit((unsigned char)c->k[i]->name[0]) || *end || idx >= m || items[idx]) {
			free(items);
			return refuse(DP_EINVAL, c->k[i], em, "a list's items are numbered 0 to %zu", m - 1);
		}
		items[idx] = c->k[i];
		c->k[i]->used = true;
	}
	*out = items;
	*count = m;
	return 0;
}

/* A list of strings, each new. */
static int get_strings(struct cnode *n, const char *name, char ***out, size_t *count, struct err_msg *em)
{
	struct cnode **items;
	size_t m;
	int rc = get_list(n, name, &items, &m, em);

	if (rc != 0 || items == NULL)
		return rc;
	*out = mem_zalloc((m ? m : 1) * sizeof(**out));
	for (size_t i = 0; i < m && rc == 0; i++) {
		if (items[i]->value == NULL || items[i]->n)
			rc = refuse(DP_EINVAL, items[i], em, "must be a text value");
		else
			(*out)[(*count)++] = mem_strdup(items[i]->value);
	}
	free(items);
	return rc;
}

/* The first child nobody read, refused (hint: what the section takes). */
static int unread(struct cnode *n, const char *takes, struct err_msg *em)
{
	for (size_t i = 0; n && i < n->n; i++)
		if (!n->k[i]->used)
			return refuse(DP_EINVAL, n->k[i], em, "not a setting diagport knows here%s%s", takes ? "; this takes " : "",
				      takes ? takes : "");
	return 0;
}

/* ---- TimeSpan ---- */

long long crules_timespan(const char *s)
{
	long long d = 0, h, m, sec = 0, frac = 0, fdiv = 1;
	const char *p = s;
	char *end;

	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	h = strtoll(p, &end, 10);
	if (errno || end == p)
		return -1;
	if (*end == '\0') /* "2": days, as .NET reads a lone number */
		return h <= 3650 ? h * DAY_MS : -1;
	if (*end == '.') { /* d.hh:mm... */
		d = h;
		p = end + 1;
		h = strtoll(p, &end, 10);
		if (end == p || !isdigit((unsigned char)*p))
			return -1;
	}
	if (*end != ':')
		return -1;
	p = end + 1;
	m = strtoll(p, &end, 10);
	if (end == p || !isdigit((unsigned char)*p))
		return -1;
	if (*end == ':') {
		p = end + 1;
		sec = strtoll(p, &end, 10);
		if (end == p || !isdigit((unsigned char)*p))
			return -1;
		if (*end == '.') {
			p = end + 1;
			if (!isdigit((unsigned char)*p))
				return -1;
			for (; isdigit((unsigned char)*p) && fdiv < 10000000; p++) {
				frac = frac * 10 + (*p - '0');
				fdiv *= 10;
			}
			end = (char *)p;
		}
	}
	if (*end || d > 3650 || h > 23 || m > 59 || sec > 59)
		return -1;
	return ((d * 24 + h) * 60 + m) * 60000 + sec * 1000 + frac * 1000 / fdiv;
}

void crules_timespan_text(char *out, size_t n, long long ms)
{
	long long s = ms / 1000, d = s / 86400;

	if (d)
		snprintf(out, n, "%lld.%02lld:%02lld:%02lld", d, s / 3600 % 24, s / 60 % 60, s % 60);
	else
		snprintf(out, n, "%02lld:%02lld:%02lld", s / 3600 % 24, s / 60 % 60, s % 60);
	if (ms % 1000) {
		size_t l = strlen(out);

		snprintf(out + l, n - l, ".%03lld0000", ms % 1000);
	}
}

/* ---- defaults ---- */

struct defaults {
	const struct egress_provider *egress;
	bool has_window, has_requests, has_responses, has_count, has_count_window, has_duration;
	long long window_ms, count_window_ms, rule_duration_ms;
	unsigned requests, responses, action_count;
};

static int find_egress(struct cnode *at, const char *name, const struct crule_env *env,
		       const struct egress_provider **out, struct err_msg *em)
{
	for (size_t i = 0; i < env->n_egress; i++)
		if (strcasecmp(env->egress[i].name, name) == 0) {
			*out = &env->egress[i];
			return 0;
		}
	return refuse(DP_EINVAL, at, em, "there is no egress provider '%.64s'%s", name,
		      env->n_egress ? "" : " (none is configured: Egress:FileSystem:NAME:DirectoryPath, ...)");
}

static int bind_defaults(struct cnode *root, const struct crule_env *env, struct defaults *d, struct err_msg *em)
{
	struct cnode *top = get(root, "CollectionRuleDefaults"), *s;
	const char *eg;
	int rc = 0;

	if (top == NULL)
		return 0;
	if ((s = get(top, "Actions")) != NULL) {
		if ((rc = get_text(s, "Egress", false, &eg, em)) != 0 ||
		    (eg && (rc = find_egress(get(s, "Egress"), eg, env, &d->egress, em)) != 0) ||
		    (rc = unread(s, "Egress", em)) != 0)
			return rc;
	}
	if ((s = get(top, "Triggers")) != NULL) {
		if ((rc = get_timespan(s, "SlidingWindowDuration", &d->has_window, &d->window_ms, 1000, DAY_MS, em)) ||
		    (rc = get_uint(s, "RequestCount", &d->has_requests, &d->requests, 1, 0x7fffffff, em)) ||
		    (rc = get_uint(s, "ResponseCount", &d->has_responses, &d->responses, 1, 0x7fffffff, em)) ||
		    (rc = unread(s, "SlidingWindowDuration, RequestCount, ResponseCount", em)))
			return rc;
	}
	if ((s = get(top, "Limits")) != NULL) {
		if ((rc = get_uint(s, "ActionCount", &d->has_count, &d->action_count, 1, 0x7fffffff, em)) ||
		    (rc = get_timespan(s, "ActionCountSlidingWindowDuration", &d->has_count_window, &d->count_window_ms,
				       1000, DAY_MS, em)) ||
		    (rc = get_timespan(s, "RuleDuration", &d->has_duration, &d->rule_duration_ms, 1000, 365 * DAY_MS, em)) ||
		    (rc = unread(s, "ActionCount, ActionCountSlidingWindowDuration, RuleDuration", em)))
			return rc;
	}
	return unread(top, "Actions, Triggers, Limits", em);
}

/* ---- filters ---- */

static const struct {
	const char *name;
	enum crule_filter_key key;
} filter_keys[] = {
	{ "ProcessId", CRF_PID },
	{ "ProcessName", CRF_NAME },
	{ "CommandLine", CRF_CMDLINE },
	{ "ManagedEntryPointAssemblyName", CRF_ENTRYPOINT },
};
#define N_FILTER_KEYS (sizeof(filter_keys) / sizeof(filter_keys[0]))

static int filter_key(struct cnode *at, const char *name, enum crule_filter_key *out, struct err_msg *em)
{
	for (size_t i = 0; i < N_FILTER_KEYS; i++)
		if (strcasecmp(filter_keys[i].name, name) == 0) {
			*out = filter_keys[i].key;
			return 0;
		}
	return refuse(DP_EINVAL, at, em, "'%.64s' is not ProcessId, ProcessName, CommandLine or "
		      "ManagedEntryPointAssemblyName", name);
}

static int bind_filter(struct cnode *n, struct crule_filter *f, struct err_msg *em)
{
	const char *key = NULL, *value = NULL, *match = NULL;
	int rc;
	size_t shorthand = 0;

	if ((rc = get_text(n, "Key", false, &key, em)) || (rc = get_text(n, "Value", false, &value, em)) ||
	    (rc = get_text(n, "MatchType", false, &match, em)))
		return rc;
	f->key = CRF_PID; /* dotnet-monitor's default Key */
	if (key && (rc = filter_key(get(n, "Key"), key, &f->key, em)) != 0)
		return rc;
	for (size_t i = 0; i < N_FILTER_KEYS; i++) {
		const char *v;

		if ((rc = get_text(n, filter_keys[i].name, false, &v, em)) != 0)
			return rc;
		if (v == NULL)
			continue;
		if (key || value || shorthand++)
			return refuse(DP_EINVAL, get(n, filter_keys[i].name), em,
				      "a filter is either Key and Value or one of ProcessId, ProcessName, CommandLine, "
				      "ManagedEntryPointAssemblyName, not both");
		f->key = filter_keys[i].key;
		value = v;
	}
	if (value == NULL)
		return refuse(DP_EINVAL, n, em, "a filter needs a Value (or the shorthand ProcessName: NAME, ...)");
	if (match && strcasecmp(match, "Exact") != 0 && strcasecmp(match, "Contains") != 0)
		return refuse(DP_EINVAL, get(n, "MatchType"), em, "'%.64s' is not Exact or Contains", match);
	f->contains = match && strcasecmp(match, "Contains") == 0;
	if (f->key == CRF_PID) {
		char *end;

		errno = 0;
		(void)strtoull(value, &end, 10);
		if (!isdigit((unsigned char)*value) || *end || errno)
			return refuse(DP_EINVAL, n, em, "ProcessId '%.64s' is not a process id", value);
	}
	f->value = mem_strdup(value);
	return unread(n, "Key, Value, MatchType, or ProcessId/ProcessName/CommandLine/ManagedEntryPointAssemblyName", em);
}

/* ---- triggers ---- */

/* The EventCounter shortcuts: System.Runtime's counter, and GreaterThan's default and range. */
static const struct {
	const char *name, *counter;
	double gt_default, max_gt, max_lt;
} shortcuts[] = {
	{ "CPUUsage", "cpu-usage", 50, 100, 100 },
	{ "GCHeapSize", "gc-heap-size", 10, HUGE_VAL, HUGE_VAL },
	{ "ThreadpoolQueueLength", "threadpool-queue-length", 2, HUGE_VAL, HUGE_VAL },
};

static int thresholds(struct cnode *s, struct crule_trigger *t, double max_gt, double max_lt, struct err_msg *em)
{
	int rc;

	if ((rc = get_double(s, "GreaterThan", &t->has_gt, &t->gt, -HUGE_VAL, max_gt, em)) ||
	    (rc = get_double(s, "LessThan", &t->has_lt, &t->lt, -HUGE_VAL, max_lt, em)))
		return rc;
	if (t->has_gt && t->has_lt && t->gt >= t->lt)
		return refuse(DP_EINVAL, get(s, "GreaterThan"), em, "GreaterThan (%g) must be less than LessThan (%g)",
			      t->gt, t->lt);
	return 0;
}

static int window(struct cnode *s, const struct defaults *d, long long *out, struct err_msg *em)
{
	bool has = false;

	*out = d->has_window ? d->window_ms : 60000;
	return get_timespan(s, "SlidingWindowDuration", &has, out, 1000, DAY_MS, em);
}

static int status_list(struct cnode *s, struct crule_trigger *t, struct err_msg *em)
{
	char **codes = NULL;
	size_t n = 0;
	int rc = get_strings(s, "StatusCodes", &codes, &n, em);

	if (rc == 0 && n == 0)
		rc = refuse_missing(s, "StatusCodes", em, " (e.g. [\"500-599\"])");
	t->status = mem_zalloc((n ? n : 1) * sizeof(*t->status));
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct err_msg why;

		if (aspnet_status_parse(codes[i], &t->status[t->n_status], &why) != 0)
			rc = refuse(DP_EINVAL, get(s, "StatusCodes")->k[i], em, "%s", why.text);
		else
			t->n_status++;
	}
	for (size_t i = 0; i < n; i++)
		free(codes[i]);
	free(codes);
	return rc;
}

static int bind_aspnet(struct cnode *s, struct crule_trigger *t, const struct defaults *d, struct err_msg *em)
{
	bool has = false;
	int rc;

	if ((rc = window(s, d, &t->window_ms, em)) || (rc = get_strings(s, "IncludePaths", &t->include, &t->n_include, em)) ||
	    (rc = get_strings(s, "ExcludePaths", &t->exclude, &t->n_exclude, em)))
		return rc;
	if (t->type == CRT_ASP_STATUS) {
		if (get(s, "RequestCount"))
			return refuse(DP_EINVAL, get(s, "RequestCount"), em, "AspNetResponseStatus counts responses with "
				      "ResponseCount (dotnet-monitor's options class binds ResponseCount, whatever its docs' "
				      "table says)");
		t->count = d->responses;
		has = d->has_responses;
		if ((rc = get_uint(s, "ResponseCount", &has, &t->count, 1, 0x7fffffff, em)) || (rc = status_list(s, t, em)))
			return rc;
		if (!has)
			return refuse_missing(s, "ResponseCount", em, "");
		return unread(s, "StatusCodes, ResponseCount, SlidingWindowDuration, IncludePaths, ExcludePaths", em);
	}
	t->count = d->requests;
	has = d->has_requests;
	if ((rc = get_uint(s, "RequestCount", &has, &t->count, 1, 0x7fffffff, em)))
		return rc;
	if (!has)
		return refuse_missing(s, "RequestCount", em, "");
	if (t->type == CRT_ASP_DURATION) {
		bool hd = false;

		t->request_duration_ms = 5000;
		if ((rc = get_timespan(s, "RequestDuration", &hd, &t->request_duration_ms, 0, 3600000, em)))
			return rc;
		return unread(s, "RequestCount, RequestDuration, SlidingWindowDuration, IncludePaths, ExcludePaths", em);
	}
	return unread(s, "RequestCount, SlidingWindowDuration, IncludePaths, ExcludePaths", em);
}

static int bind_trigger(struct cnode *rule, struct crule_trigger *t, const struct defaults *d, struct err_msg *em)
{
	static const struct {
		const char *name;
		enum crule_trigger_type type;
	} types[] = {
		{ "Startup", CRT_STARTUP },
		{ "EventCounter", CRT_EVENT_COUNTER },
		{ "CPUUsage", CRT_EVENT_COUNTER },
		{ "GCHeapSize", CRT_EVENT_COUNTER },
		{ "ThreadpoolQueueLength", CRT_EVENT_COUNTER },
		{ "EventMeter", CRT_EVENT_METER },
		{ "AspNetRequestCount", CRT_ASP_COUNT },
		{ "AspNetRequestDuration", CRT_ASP_DURATION },
		{ "AspNetResponseStatus", CRT_ASP_STATUS },
	};
	struct cnode *tn = get(rule, "Trigger"), *s;
	const char *type;
	size_t i;
	int rc;

	if (tn == NULL)
		return refuse_missing(rule, "Trigger", em, "");
	if ((rc = get_text(tn, "Type", true, &type, em)) != 0 || type == NULL)
		return rc ? rc : refuse_missing(tn, "Type", em, "");
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(types[i].name, type) == 0)
			break;
	if (i == sizeof(types) / sizeof(types[0]))
		return refuse(DP_EINVAL, get(tn, "Type"), em, "'%.64s' is not a trigger: Startup, EventCounter, "
			      "CPUUsage, GCHeapSize, ThreadpoolQueueLength, EventMeter, AspNetRequestCount, "
			      "AspNetRequestDuration, AspNetResponseStatus", type);
	t->type = types[i].type;
	t->type_name = types[i].name;
	t->percentile = -1;
	s = get(tn, "Settings");
	if ((rc = unread(tn, "Type, Settings", em)) != 0)
		return rc;
	if (s && s->value && *s->value == '\0' && s->n == 0)
		s = NULL;
	if (s && s->value && s->n == 0)
		return refuse(DP_EINVAL, s, em, "takes settings under it, not one value");
	switch (t->type) {
	case CRT_STARTUP:
		return s ? unread(s, "no settings (Startup)", em) : 0;
	case CRT_EVENT_COUNTER:
		for (size_t k = 0; k < sizeof(shortcuts) / sizeof(shortcuts[0]); k++) {
			if (strcmp(shortcuts[k].name, t->type_name) != 0)
				continue;
			t->provider = mem_strdup("System.Runtime");
			t->name = mem_strdup(shortcuts[k].counter);
			if ((rc = window(s, d, &t->window_ms, em)) || (rc = thresholds(s, t, shortcuts[k].max_gt, shortcuts[k].max_lt, em)))
				return rc;
			if (!t->has_gt && !t->has_lt) { /* GreaterThan's default, unless LessThan is given */
				t->has_gt = true;
				t->gt = shortcuts[k].gt_default;
			}
			if ((t->has_gt && t->gt < 0) || (t->has_lt && t->lt < 0))
				return refuse(DP_EINVAL, s ? s : tn, em, "thresholds of %s are at least 0", t->type_name);
			return unread(s, "GreaterThan, LessThan, SlidingWindowDuration", em);
		}
		if (s == NULL)
			return refuse_missing(tn, "Settings", em, " (ProviderName, CounterName, GreaterThan/LessThan)");
		if ((rc = get_str(s, "ProviderName", true, &t->provider, em)) ||
		    (rc = get_str(s, "CounterName", true, &t->name, em)) || (rc = window(s, d, &t->window_ms, em)) ||
		    (rc = thresholds(s, t, HUGE_VAL, HUGE_VAL, em)))
			return rc;
		if (!t->has_gt && !t->has_lt)
			return refuse_missing(s, "GreaterThan", em, " (or LessThan, or both)");
		return unread(s, "ProviderName, CounterName, GreaterThan, LessThan, SlidingWindowDuration", em);
	case CRT_EVENT_METER: {
		bool hp = false;
		unsigned pct = 0;

		if (s == NULL)
			return refuse_missing(tn, "Settings", em, " (MeterName, InstrumentName, GreaterThan/LessThan)");
		if ((rc = get_str(s, "MeterName", true, &t->provider, em)) ||
		    (rc = get_str(s, "InstrumentName", true, &t->name, em)) || (rc = window(s, d, &t->window_ms, em)) ||
		    (rc = thresholds(s, t, HUGE_VAL, HUGE_VAL, em)) ||
		    (rc = get_uint(s, "HistogramPercentile", &hp, &pct, 0, 100, em)))
			return rc;
		if (hp)
			t->percentile = (int)pct;
		if (!t->has_gt && !t->has_lt)
			return refuse_missing(s, "GreaterThan", em, " (or LessThan, or both)");
		return unread(s, "MeterName, InstrumentName, GreaterThan, LessThan, HistogramPercentile, "
			      "SlidingWindowDuration", em);
	}
	default: {
		struct aspnet_trig *check = NULL;
		struct aspnet_trig_config tc;
		struct err_msg why;

		if (s == NULL)
			return refuse_missing(tn, "Settings", em, "");
		if ((rc = bind_aspnet(s, t, d, em)) != 0)
			return rc;
		crules_asp_config(t, &tc);
		if (aspnet_trig_new(&tc, &check, &why) != 0) /* the globs' and ranges' own checks */
			return refuse(DP_EINVAL, s, em, "%s", why.text);
		aspnet_trig_free(check);
		return 0;
	}
	}
}

/* ---- actions ---- */

static int egress_of(struct cnode *s, struct crule_action *a, const struct defaults *d, const struct crule_env *env,
		     struct err_msg *em)
{
	const char *eg;
	int rc = get_text(s, "Egress", false, &eg, em);

	if (rc != 0)
		return rc;
	if (eg)
		return find_egress(get(s, "Egress"), eg, env, &a->egress, em);
	if ((a->egress = d->egress) == NULL)
		return refuse_missing(s, "Egress", em, " (or CollectionRuleDefaults:Actions:Egress)");
	return 0;
}

static int duration_of(struct cnode *s, struct crule_action *a, struct err_msg *em)
{
	bool has = false;

	a->duration_ms = 30000;
	return get_timespan(s, "Duration", &has, &a->duration_ms, 1000, DAY_MS, em);
}

/* CollectTrace's Providers as /trace's body; checked by the parser that will read it. */
static int trace_providers(struct cnode *s, struct crule_action *a, struct err_msg *em)
{
	struct cnode **items;
	size_t n;
	json_t *doc = json_object(), *list = json_array();
	bool rundown = true, has_buf = false;
	unsigned buf_mb = 256;
	struct trace_config check = { 0 };
	int rc = get_list(s, "Providers", &items, &n, em);

	json_object_set_new(doc, "providers", list);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		json_t *p = json_object();
		const char *name, *kw, *lvl;
		struct cnode *args;

		json_array_append_new(list, p);
		if ((rc = get_text(items[i], "Name", true, &name, em)) || (rc = get_text(items[i], "Keywords", false, &kw, em)) ||
		    (rc = get_text(items[i], "EventLevel", false, &lvl, em)))
			break;
		json_object_set_new(p, "name", json_string(name));
		if (kw)
			json_object_set_new(p, "keywords", json_string(kw));
		if (lvl)
			json_object_set_new(p, "eventLevel", json_string(lvl));
		if ((args = get(items[i], "Arguments")) != NULL) {
			json_t *ao = json_object();

			json_object_set_new(p, "arguments", ao);
			for (size_t k = 0; k < args->n; k++) {
				if (args->k[k]->value == NULL || args->k[k]->n) {
					rc = refuse(DP_EINVAL, args->k[k], em, "an argument is a name and a text value");
					break;
				}
				args->k[k]->used = true;
				json_object_set_new(ao, args->k[k]->name, json_string(args->k[k]->value));
			}
		}
		if (rc == 0)
			rc = unread(items[i], "Name, Keywords, EventLevel, Arguments", em);
	}
	free(items);
	if (rc == 0 && (rc = get_bool(s, "RequestRundown", &rundown, em)) == 0 &&
	    (rc = get_uint(s, "BufferSizeMegabytes", &has_buf, &buf_mb, 1, 1024, em)) == 0) {
		json_object_set_new(doc, "requestRundown", json_boolean(rundown));
		json_object_set_new(doc, "bufferSizeInMB", json_integer(buf_mb));
		a->providers_json = json_dumps(doc, JSON_COMPACT);
		if (trace_config_json(a->providers_json, strlen(a->providers_json), &check, em) != 0) {
			char why[sizeof(em->text)];

			snprintf(why, sizeof(why), "%s", em->text);
			rc = refuse(DP_EINVAL, get(s, "Providers"), em, "%s", why);
		}
		trace_config_free(&check);
	}
	json_decref(doc);
	return rc;
}

static int bind_trace(struct cnode *s, struct crule_action *a, struct err_msg *em)
{
	struct cnode *stop;
	struct trace_config check = { 0 };
	int rc;

	if ((rc = duration_of(s, a, em)) || (rc = get_str(s, "Profile", false, &a->profile, em)))
		return rc;
	if (a->profile && get(s, "Providers"))
		return refuse(DP_EINVAL, get(s, "Providers"), em, "Profile or Providers, not both");
	if (a->profile) {
		for (const char *x = "RequestRundown\0BufferSizeMegabytes\0StoppingEvent\0"; *x; x += strlen(x) + 1)
			if (get(s, x))
				return refuse(DP_EINVAL, get(s, x), em, "applies only with Providers, not with a Profile");
		if (trace_config_profile(a->profile, 1, &check, em) != 0) {
			char why[sizeof(em->text)];

			snprintf(why, sizeof(why), "%s", em->text);
			trace_config_free(&check);
			return refuse(DP_EINVAL, get(s, "Profile"), em, "%s", why);
		}
		trace_config_free(&check);
		return 0;
	}
	if (get(s, "Providers") == NULL)
		return refuse_missing(s, "Profile", em, " (or Providers)");
	if ((rc = trace_providers(s, a, em)) != 0)
		return rc;
	if ((stop = get(s, "StoppingEvent")) != NULL) {
		struct cnode *pf;

		if ((rc = get_str(stop, "ProviderName", true, &a->stop_provider, em)) ||
		    (rc = get_str(stop, "EventName", true, &a->stop_event, em)))
			return rc;
		if ((pf = get(stop, "PayloadFilter")) != NULL) {
			a->stop_payload = mem_zalloc((pf->n ? pf->n : 1) * sizeof(*a->stop_payload));
			for (size_t k = 0; k < pf->n; k++) {
				if (pf->k[k]->value == NULL || pf->k[k]->n)
					return refuse(DP_EINVAL, pf->k[k], em, "a payload filter is a field name and its value");
				pf->k[k]->used = true;
				a->stop_payload[a->n_stop_payload++] =
					(struct crule_kv){ mem_strdup(pf->k[k]->name), mem_strdup(pf->k[k]->value) };
			}
		}
		if ((rc = unread(stop, "ProviderName, EventName, PayloadFilter", em)) != 0)
			return rc;
	}
	return 0;
}

static int bind_livemetrics(struct cnode *s, struct crule_action *a, struct err_msg *em)
{
	json_t *doc = json_object();
	bool defaults = true;
	struct metrics_selection check = { 0 };
	struct cnode **items;
	size_t n;
	int rc;

	if (get(s, "UseDefaultProviders")) { /* in dotnet-monitor's docs' example, which its binder ignores */
		rc = refuse(DP_EINVAL, get(s, "UseDefaultProviders"), em, "the setting is IncludeDefaultProviders "
			    "(dotnet-monitor's documentation shows UseDefaultProviders, which dotnet-monitor ignores)");
		goto out;
	}
	if ((rc = duration_of(s, a, em)) || (rc = get_bool(s, "IncludeDefaultProviders", &defaults, em)))
		goto out;
	json_object_set_new(doc, "includeDefaultProviders", json_boolean(defaults));
	for (int meters = 0; meters < 2 && rc == 0; meters++) {
		json_t *list = json_array();

		json_object_set_new(doc, meters ? "meters" : "providers", list);
		if ((rc = get_list(s, meters ? "Meters" : "Providers", &items, &n, em)) != 0)
			break;
		for (size_t i = 0; i < n && rc == 0; i++) {
			json_t *o = json_object(), *names = json_array();
			char **nm = NULL;
			size_t nn = 0;
			char *src = NULL;

			json_array_append_new(list, o);
			if ((rc = get_str(items[i], meters ? "MeterName" : "ProviderName", true, &src, em)) == 0 &&
			    (rc = get_strings(items[i], meters ? "InstrumentNames" : "CounterNames", &nm, &nn, em)) == 0)
				rc = unread(items[i], meters ? "MeterName, InstrumentNames" : "ProviderName, CounterNames", em);
			if (src)
				json_object_set_new(o, meters ? "meterName" : "providerName", json_string(src));
			for (size_t k = 0; k < nn; k++) {
				json_array_append_new(names, json_string(nm[k]));
				free(nm[k]);
			}
			free(nm);
			free(src);
			json_object_set_new(o, meters ? "instrumentNames" : "counterNames", names);
		}
		free(items);
	}
	if (rc == 0) {
		a->metrics_json = json_dumps(doc, JSON_COMPACT);
		if (metrics_selection_json(a->metrics_json, strlen(a->metrics_json), &check, em) != 0) {
			char why[sizeof(em->text)];

			snprintf(why, sizeof(why), "%s", em->text);
			rc = refuse(DP_EINVAL, s, em, "%s", why);
		}
		metrics_selection_free(&check);
	}
out:
	json_decref(doc);
	return rc;
}

static int bind_logs(struct cnode *s, struct crule_action *a, struct err_msg *em)
{
	json_t *doc = json_object();
	const char *lvl, *fmt;
	bool app = true;
	struct cnode *specs;
	struct logs_filter check = { 0 };
	int rc;

	if ((rc = duration_of(s, a, em)) || (rc = get_text(s, "DefaultLevel", false, &lvl, em)) ||
	    (rc = get_bool(s, "UseAppFilters", &app, em)) || (rc = get_text(s, "Format", false, &fmt, em)))
		goto out;
	a->format = LOGS_TEXT; /* dotnet-monitor's default for the action: PlainText */
	if (fmt) {
		if (strcasecmp(fmt, "PlainText") == 0)
			a->format = LOGS_TEXT;
		else if (strcasecmp(fmt, "NewlineDelimitedJson") == 0)
			a->format = LOGS_NDJSON;
		else if (strcasecmp(fmt, "JsonSequence") == 0)
			a->format = LOGS_JSON_SEQ;
		else {
			rc = refuse(DP_EINVAL, get(s, "Format"), em, "'%.32s' is not PlainText, NewlineDelimitedJson or "
				    "JsonSequence", fmt);
			goto out;
		}
	}
	json_object_set_new(doc, "logLevel", json_string(lvl ? lvl : "Warning"));
	json_object_set_new(doc, "useAppFilters", json_boolean(app));
	if ((specs = get(s, "FilterSpecs")) != NULL) {
		json_t *o = json_object();

		json_object_set_new(doc, "filterSpecs", o);
		for (size_t k = 0; k < specs->n; k++) {
			if (specs->k[k]->n) {
				rc = refuse(DP_EINVAL, specs->k[k], em, "a filter spec is a category and a level");
				goto out;
			}
			specs->k[k]->used = true;
			json_object_set_new(o, specs->k[k]->name, specs->k[k]->value && *specs->k[k]->value ?
									 json_string(specs->k[k]->value) : json_null());
		}
	}
	a->logs_json = json_dumps(doc, JSON_COMPACT);
	if (logs_filter_json(a->logs_json, strlen(a->logs_json), &check, em) != 0) {
		char why[sizeof(em->text)];

		snprintf(why, sizeof(why), "%s", em->text);
		rc = refuse(DP_EINVAL, s, em, "%s", why);
	}
	logs_filter_free(&check);
out:
	json_decref(doc);
	return rc;
}

static int bind_action_settings(struct cnode *s, struct crule_action *a, const struct defaults *d,
				const struct crule_env *env, struct err_msg *em)
{
	const char *t;
	int rc = 0;

	if (a->type != CRA_EXECUTE && (rc = egress_of(s, a, d, env, em)) != 0)
		return rc;
	if (get(s, "ArtifactName"))
		return refuse(DP_EUNSUPPORTED, get(s, "ArtifactName"), em, "dotnet-monitor's ArtifactName is not implemented "
			      "by diagport; artifacts keep dotnet-monitor's default names");
	switch (a->type) {
	case CRA_DUMP:
		if ((rc = get_text(s, "Type", false, &t, em)) != 0)
			return rc;
		if ((a->format = dump_type(t ? t : "WithHeap")) < 0)
			return refuse(DP_EINVAL, get(s, "Type"), em, "'%.32s' is not Mini, Triage, WithHeap or Full", t);
		return unread(s, "Type, Egress", em);
	case CRA_GCDUMP:
		return unread(s, "Egress", em);
	case CRA_STACKS:
		if ((rc = get_text(s, "Format", false, &t, em)) != 0)
			return rc;
		if (t == NULL || strcasecmp(t, "Json") == 0)
			a->format = CAPTURE_STACKS_JSON;
		else if (strcasecmp(t, "PlainText") == 0)
			a->format = CAPTURE_STACKS_TEXT;
		else if (strcasecmp(t, "Speedscope") == 0)
			a->format = CAPTURE_STACKS_SPEEDSCOPE;
		else
			return refuse(DP_EINVAL, get(s, "Format"), em, "'%.32s' is not Json, PlainText or Speedscope", t);
		return unread(s, "Format, Egress", em);
	case CRA_TRACE:
		if ((rc = bind_trace(s, a, em)) != 0)
			return rc;
		return unread(s, "Profile or Providers (RequestRundown, BufferSizeMegabytes, StoppingEvent), Duration, Egress",
			      em);
	case CRA_LIVEMETRICS:
		if ((rc = bind_livemetrics(s, a, em)) != 0)
			return rc;
		return unread(s, "IncludeDefaultProviders, Providers, Meters, Duration, Egress", em);
	case CRA_LOGS:
		if ((rc = bind_logs(s, a, em)) != 0)
			return rc;
		return unread(s, "DefaultLevel, FilterSpecs, UseAppFilters, Format, Duration, Egress", em);
	case CRA_EXECUTE:
		if ((rc = get_str(s, "Path", true, &a->path, em)) || (rc = get_str(s, "Arguments", false, &a->args, em)) ||
		    (rc = get_bool(s, "IgnoreExitCode", &a->ignore_exit, em)))
			return rc;
		if (env->sandbox)
			return refuse(DP_EUNSUPPORTED, s->up, em, "Execute runs a program, which the agent's sandbox (seccomp: "
				      "no execve) forbids; start the agent with --no-sandbox to allow it, or remove the action");
		if (a->path[0] != '/')
			return refuse(DP_EINVAL, get(s, "Path"), em, "'%.128s' is not an absolute path (the agent "
				      "searches no PATH)", a->path);
		return unread(s, "Path, Arguments, IgnoreExitCode", em);
	}
	return 0;
}

static int bind_action(struct cnode *n, struct crule_action *a, const struct defaults *d, const struct crule_env *env,
		       struct err_msg *em)
{
	static const struct {
		const char *name;
		int type; /* -1: dotnet-monitor has it, diagport does not */
	} types[] = {
		{ "CollectDump", CRA_DUMP },
		{ "CollectTrace", CRA_TRACE },
		{ "CollectGCDump", CRA_GCDUMP },
		{ "CollectLogs", CRA_LOGS },
		{ "CollectStacks", CRA_STACKS },
		{ "CollectLiveMetrics", CRA_LIVEMETRICS },
		{ "Execute", CRA_EXECUTE },
		{ "CollectExceptions", -1 },
		{ "LoadProfiler", -1 },
		{ "SetEnvironmentVariable", -1 },
		{ "GetEnvironmentVariable", -1 },
	};
	struct cnode *s, empty = { 0 };
	const char *type;
	size_t i;
	int rc;

	if ((rc = get_text(n, "Type", true, &type, em)) || (rc = get_str(n, "Name", false, &a->name, em)))
		return rc;
	if (type == NULL)
		return refuse_missing(n, "Type", em, "");
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(types[i].name, type) == 0)
			break;
	if (i == sizeof(types) / sizeof(types[0]))
		return refuse(DP_EINVAL, get(n, "Type"), em, "'%.64s' is not an action: CollectDump, CollectTrace, "
			      "CollectGCDump, CollectLogs, CollectStacks, CollectLiveMetrics, Execute", type);
	if (types[i].type < 0)
		return refuse(DP_EUNSUPPORTED, get(n, "Type"), em, "dotnet-monitor's %s action is not implemented by diagport "
			      "(it has CollectDump, CollectTrace, CollectGCDump, CollectLogs, CollectStacks, "
			      "CollectLiveMetrics, Execute)", types[i].name);
	a->type = (enum crule_action_type)types[i].type;
	a->type_name = types[i].name;
	a->wait = true;
	if ((rc = get_bool(n, "WaitForCompletion", &a->wait, em)) != 0)
		return rc;
	s = get(n, "Settings");
	if (s && s->value && s->n == 0 && *s->value)
		return refuse(DP_EINVAL, s, em, "takes settings under it, not one value");
	if (s == NULL) { /* no Settings: every setting from its default (CollectionRuleDefaults) */
		empty.up = n;
		empty.name = (char *)"Settings";
		empty.where = n->where;
		s = &empty;
	}
	if ((rc = bind_action_settings(s, a, d, env, em)) != 0)
		return rc;
	return unread(n, "Name, Type, Settings, WaitForCompletion", em);
}

/* ---- rules ---- */

/* Every $(Actions.NAME.OUTPUT) in text names an earlier action of the list that is waited for, and an output
 * it has (EgressPath of a capture, ExitCode of Execute): refused otherwise, naming where. */
static int check_refs(struct cnode *at, const struct crule *r, size_t upto, const char *text, struct err_msg *em)
{
	for (const char *p = text ? strstr(text, "$(") : NULL; p; p = strstr(p + 2, "$(")) {
		const char *end = strchr(p, ')'), *dot;
		size_t k;

		if (end == NULL || strncmp(p, "$(Actions.", 10) != 0 ||
		    (dot = memrchr(p + 10, '.', (size_t)(end - p - 10))) == NULL)
			return refuse(DP_EINVAL, at, em, "'%.64s' is not $(Actions.NAME.OUTPUT)", p);
		for (k = 0; k < upto; k++)
			if (r->actions[k].name && strlen(r->actions[k].name) == (size_t)(dot - p - 10) &&
			    strncasecmp(r->actions[k].name, p + 10, (size_t)(dot - p - 10)) == 0)
				break;
		if (k == upto || !r->actions[k].wait)
			return refuse(DP_EINVAL, at, em, "%.*s names no earlier action of this rule that waits for "
				      "completion (an action's Name; WaitForCompletion true)", (int)(end - p + 1), p);
		if (!((r->actions[k].type == CRA_EXECUTE && (size_t)(end - dot - 1) == 8 &&
		       strncasecmp(dot + 1, "ExitCode", 8) == 0) ||
		      (r->actions[k].type != CRA_EXECUTE && (size_t)(end - dot - 1) == 10 &&
		       strncasecmp(dot + 1, "EgressPath", 10) == 0)))
			return refuse(DP_EINVAL, at, em, "%.*s: a %s action's output is %s", (int)(end - p + 1), p,
				      r->actions[k].type_name, r->actions[k].type == CRA_EXECUTE ? "ExitCode" : "EgressPath");
	}
	return 0;
}

static int bind_rule(struct cnode *rn, struct crule *r, const struct defaults *d, const struct crule_env *env,
		     struct err_msg *em)
{
	struct cnode **items, *lim;
	size_t n;
	bool has = false;
	int rc;

	r->name = mem_strdup(rn->name);
	if (rn->value && rn->n == 0)
		return refuse(DP_EINVAL, rn, em, "a rule takes Filters, Trigger, Actions and Limits under it");
	if ((rc = get_list(rn, "Filters", &items, &n, em)) != 0)
		return rc;
	if (n > MAX_FILTERS) {
		free(items);
		return refuse(DP_ETOOBIG, get(rn, "Filters"), em, "more than %d filters", MAX_FILTERS);
	}
	r->filters = mem_zalloc((n ? n : 1) * sizeof(*r->filters));
	for (size_t i = 0; i < n && rc == 0; i++)
		if ((rc = bind_filter(items[i], &r->filters[r->n_filters], em)) == 0)
			r->n_filters++;
	free(items);
	if (rc != 0 || (rc = bind_trigger(rn, &r->trig, d, em)) != 0)
		return rc;
	if ((rc = get_list(rn, "Actions", &items, &n, em)) != 0)
		return rc;
	if (n > MAX_ACTIONS) {
		free(items);
		return refuse(DP_ETOOBIG, get(rn, "Actions"), em, "more than %d actions", MAX_ACTIONS);
	}
	r->actions = mem_zalloc((n ? n : 1) * sizeof(*r->actions));
	for (size_t i = 0; i < n && rc == 0; i++) /* counted even when refused: rule_free frees what it holds */
		rc = bind_action(items[i], &r->actions[r->n_actions++], d, env, em);
	free(items);
	if (rc != 0)
		return rc;
	for (size_t i = 0; i < r->n_actions; i++) {
		struct cnode *an;
		char idx[24];

		if (r->actions[i].type != CRA_EXECUTE)
			continue;
		snprintf(idx, sizeof(idx), "%zu", i);
		an = get(get(get(rn, "Actions"), idx), "Settings");
		if ((rc = check_refs(an ? an : rn, r, i, r->actions[i].path, em)) != 0 ||
		    (rc = check_refs(an ? an : rn, r, i, r->actions[i].args, em)) != 0)
			return rc;
	}
	for (size_t i = 0; i < r->n_actions; i++)
		for (size_t k = 0; k < i; k++)
			if (r->actions[i].name && r->actions[k].name && strcasecmp(r->actions[i].name, r->actions[k].name) == 0)
				return refuse(DP_EINVAL, get(rn, "Actions"), em, "two actions are named '%.64s'",
					      r->actions[i].name);
	r->lim.action_count = d->has_count ? d->action_count : 5;
	r->lim.window_ms = d->has_count_window ? d->count_window_ms : 0;
	r->lim.rule_duration_ms = d->has_duration ? d->rule_duration_ms : 0;
	if ((lim = get(rn, "Limits")) != NULL) {
		if ((rc = get_uint(lim, "ActionCount", &has, &r->lim.action_count, 1, 0x7fffffff, em)) ||
		    (rc = get_timespan(lim, "ActionCountSlidingWindowDuration", &has, &r->lim.window_ms, 1000, DAY_MS, em)) ||
		    (rc = get_timespan(lim, "RuleDuration", &has, &r->lim.rule_duration_ms, 1000, 365 * DAY_MS, em)) ||
		    (rc = unread(lim, "ActionCount, ActionCountSlidingWindowDuration, RuleDuration", em)))
			return rc;
	}
	return unread(rn, "Filters, Trigger, Actions, Limits", em);
}

static void rule_free(struct crule *r)
{
	free(r->name);
	for (size_t i = 0; i < r->n_filters; i++)
		free(r->filters[i].value);
	free(r->filters);
	free(r->trig.provider);
	free(r->trig.name);
	for (size_t i = 0; i < r->trig.n_include; i++)
		free(r->trig.include[i]);
	for (size_t i = 0; i < r->trig.n_exclude; i++)
		free(r->trig.exclude[i]);
	free(r->trig.include);
	free(r->trig.exclude);
	free(r->trig.status);
	for (size_t i = 0; i < r->n_actions; i++) {
		struct crule_action *a = &r->actions[i];

		free(a->name);
		free(a->profile);
		free(a->providers_json);
		free(a->stop_provider);
		free(a->stop_event);
		for (size_t k = 0; k < a->n_stop_payload; k++) {
			free(a->stop_payload[k].key);
			free(a->stop_payload[k].value);
		}
		free(a->stop_payload);
		free(a->metrics_json);
		free(a->logs_json);
		free(a->path);
		free(a->args);
	}
	free(r->actions);
}

void crule_set_free(struct crule_set *s)
{
	for (size_t i = 0; s && i < s->n; i++)
		rule_free(&s->r[i]);
	if (s) {
		free(s->r);
		memset(s, 0, sizeof(*s));
	}
}

void crule_set_keep(struct crule_set *s, bool (*keep)(const struct crule *r, void *ctx), void *ctx)
{
	size_t o = 0;

	for (size_t i = 0; i < s->n; i++) {
		if (keep(&s->r[i], ctx))
			s->r[o++] = s->r[i];
		else
			rule_free(&s->r[i]);
	}
	s->n = o;
}

/* The colon paths as a tree; a leaf and a section at one path are refused. */
static int build(const struct launch_config *c, struct cnode *root, struct err_msg *em)
{
	for (size_t i = 0; i < c->n_rule_kv; i++) {
		const struct egress_setting *kv = &c->rule_kv[i];
		struct cnode *n = root;
		const char *p = kv->key;

		while (*p) {
			const char *e = strchr(p, ':');
			size_t len = e ? (size_t)(e - p) : strlen(p);

			if (len == 0)
				return err_set(em, DP_EINVAL, "%s: %s: a setting's name has an empty part", kv->where, kv->key);
			n = node_child(n, p, len, true, kv->where);
			p += len + (e != NULL);
		}
		free(n->value);
		n->value = mem_strdup(kv->value);
		n->where = kv->where;
	}
	return 0;
}

int crules_parse(const struct launch_config *c, const struct crule_env *env, struct crule_set *out,
		 struct err_msg *em)
{
	struct cnode root = { .where = NULL }, *rules, *tpl;
	struct defaults d = { 0 };
	struct crule_set s = { 0 };
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = build(c, &root, em)) != 0)
		goto out;
	if ((tpl = get(&root, "Templates")) != NULL) {
		rc = refuse(DP_EUNSUPPORTED, tpl, em, "dotnet-monitor's collection rule templates are not implemented by "
			    "diagport; write each rule's Filters, Trigger, Actions and Limits in full");
		goto out;
	}
	if ((rc = bind_defaults(&root, env, &d, em)) != 0)
		goto out;
	rules = get(&root, "CollectionRules");
	if (rules && rules->n > MAX_RULES) {
		rc = refuse(DP_ETOOBIG, rules, em, "more than %d rules", MAX_RULES);
		goto out;
	}
	if (rules && rules->value && rules->n == 0 && *rules->value) {
		rc = refuse(DP_EINVAL, rules, em, "takes rules under it, by name");
		goto out;
	}
	s.r = mem_zalloc((rules && rules->n ? rules->n : 1) * sizeof(*s.r));
	for (size_t i = 0; rules && i < rules->n && rc == 0; i++) {
		rules->k[i]->used = true;
		if ((rc = bind_rule(rules->k[i], &s.r[s.n], &d, env, em)) == 0)
			s.n++;
		else
			rule_free(&s.r[s.n]);
	}
	if (rc == 0) {
		*out = s;
		memset(&s, 0, sizeof(s));
	}
out:
	crule_set_free(&s);
	for (size_t i = 0; i < root.n; i++)
		node_free(root.k[i]);
	free(root.k);
	return rc;
}

void crules_asp_config(const struct crule_trigger *t, struct aspnet_trig_config *out)
{
	*out = (struct aspnet_trig_config){
		.type = t->type == CRT_ASP_COUNT ? ASPNET_TRIG_COUNT :
			t->type == CRT_ASP_DURATION ? ASPNET_TRIG_DURATION : ASPNET_TRIG_STATUS,
		.count = t->count,
		.window_ms = t->window_ms,
		.duration_ms = t->request_duration_ms,
		.status = t->status,
		.n_status = t->n_status,
		.include = t->include,
		.n_include = t->n_include,
		.exclude = t->exclude,
		.n_exclude = t->n_exclude,
	};
}

/* ---- what the sessions need ---- */

static void need(struct metrics_selection *sel, const char *source, bool meter, const char *name)
{
	struct metrics_source *m = NULL;

	for (size_t i = 0; i < sel->n && !m; i++)
		if (sel->s[i].meter == meter && strcasecmp(sel->s[i].name, source) == 0)
			m = &sel->s[i];
	if (m == NULL) {
		sel->s = mem_realloc(sel->s, (sel->n + 1) * sizeof(*sel->s));
		m = &sel->s[sel->n++];
		*m = (struct metrics_source){ .name = mem_strdup(source), .meter = meter };
		m->names = mem_zalloc(sizeof(*m->names));
	} else if (m->n_names == 0) {
		return; /* already every name of it */
	}
	for (size_t i = 0; i < m->n_names; i++)
		if (strcmp(m->names[i], name) == 0)
			return;
	m->names = mem_realloc(m->names, (m->n_names + 1) * sizeof(*m->names));
	m->names[m->n_names++] = mem_strdup(name);
}

void crules_metrics_needs(const struct crule_set *s, struct metrics_selection *sel, bool *aspnet)
{
	*aspnet = false;
	for (size_t i = 0; s && i < s->n; i++) {
		const struct crule_trigger *t = &s->r[i].trig;

		if (t->type == CRT_EVENT_COUNTER || t->type == CRT_EVENT_METER)
			need(sel, t->provider, t->type == CRT_EVENT_METER, t->name);
		else if (t->type == CRT_ASP_COUNT || t->type == CRT_ASP_DURATION || t->type == CRT_ASP_STATUS)
			*aspnet = true;
	}
}
