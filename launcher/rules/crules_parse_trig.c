/*
 * crules_parse_trig.c - a collection rule's Trigger bound (crules_parse_int.h):
 * its Type, one of dotnet-monitor's nine, and the Settings that type takes,
 * with CollectionRuleDefaults' window and counts where a rule gives none.
 *
 * Apart from crules_parse.c (the rule around it) and crules_parse_act.c (its
 * actions) because a trigger is one idea with its own tables: the
 * EventCounter shortcuts' counters and ranges, EventMeter's percentile, the
 * ASP.NET triggers' paths and status codes, the last checked by the very
 * code that will evaluate them (aspnet_req.h), so a trigger that binds is one
 * that runs. crules_asp_config is here for that check, and for the engine.
 */
#include "crules_parse_int.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"
#include "settings.h"

/* The EventCounter shortcuts: System.Runtime's counter, and GreaterThan's default and range. */
static const struct {
	const char *name, *counter;
	double gt_default, max_gt, max_lt;
} shortcuts[] = {
	{ "CPUUsage", "cpu-usage", 50, 100, 100 },
	{ "GCHeapSize", "gc-heap-size", 10, HUGE_VAL, HUGE_VAL },
	{ "ThreadpoolQueueLength", "threadpool-queue-length", 2, HUGE_VAL, HUGE_VAL },
};

static int thresholds(struct settings_node *s, struct crule_trigger *t, double max_gt, double max_lt, struct err_msg *em)
{
	int rc;

	if ((rc = settings_double(s, "GreaterThan", &t->has_gt, &t->gt, -HUGE_VAL, max_gt, em)) ||
	    (rc = settings_double(s, "LessThan", &t->has_lt, &t->lt, -HUGE_VAL, max_lt, em)))
		return rc;
	if (t->has_gt && t->has_lt && t->gt >= t->lt)
		return settings_refuse(DP_EINVAL, settings_get(s, "GreaterThan"), em, "GreaterThan (%g) must be less than LessThan (%g)",
			      t->gt, t->lt);
	return 0;
}

static int window(struct settings_node *s, const struct defaults *d, long long *out, struct err_msg *em)
{
	bool has = false;

	*out = d->has_window ? d->window_ms : 60000;
	return settings_timespan(s, "SlidingWindowDuration", &has, out, 1000, DAY_MS, em);
}

static int status_list(struct settings_node *s, struct crule_trigger *t, struct err_msg *em)
{
	char **codes = NULL;
	size_t n = 0;
	int rc = settings_strings(s, "StatusCodes", &codes, &n, em);

	if (rc == 0 && n == 0)
		rc = settings_refuse_missing(s, "StatusCodes", em, " (e.g. [\"500-599\"])");
	t->status = mem_zalloc((n ? n : 1) * sizeof(*t->status));
	for (size_t i = 0; i < n && rc == 0; i++) {
		struct err_msg why;

		if (aspnet_status_parse(codes[i], &t->status[t->n_status], &why) != 0)
			rc = settings_refuse(DP_EINVAL, settings_get(s, "StatusCodes")->k[i], em, "%s", why.text);
		else
			t->n_status++;
	}
	for (size_t i = 0; i < n; i++)
		free(codes[i]);
	free(codes);
	return rc;
}

static int bind_aspnet(struct settings_node *s, struct crule_trigger *t, const struct defaults *d, struct err_msg *em)
{
	bool has = false;
	int rc;

	if ((rc = window(s, d, &t->window_ms, em)) || (rc = settings_strings(s, "IncludePaths", &t->include, &t->n_include, em)) ||
	    (rc = settings_strings(s, "ExcludePaths", &t->exclude, &t->n_exclude, em)))
		return rc;
	if (t->type == CRT_ASP_STATUS) {
		if (settings_get(s, "RequestCount"))
			return settings_refuse(DP_EINVAL, settings_get(s, "RequestCount"), em, "AspNetResponseStatus counts responses with "
				      "ResponseCount (dotnet-monitor's options class binds ResponseCount, whatever its docs' "
				      "table says)");
		t->count = d->responses;
		has = d->has_responses;
		if ((rc = settings_uint(s, "ResponseCount", &has, &t->count, 1, 0x7fffffff, em)) || (rc = status_list(s, t, em)))
			return rc;
		if (!has)
			return settings_refuse_missing(s, "ResponseCount", em, "");
		return settings_unread(s, "StatusCodes, ResponseCount, SlidingWindowDuration, IncludePaths, ExcludePaths", em);
	}
	t->count = d->requests;
	has = d->has_requests;
	if ((rc = settings_uint(s, "RequestCount", &has, &t->count, 1, 0x7fffffff, em)))
		return rc;
	if (!has)
		return settings_refuse_missing(s, "RequestCount", em, "");
	if (t->type == CRT_ASP_DURATION) {
		bool hd = false;

		t->request_duration_ms = 5000;
		if ((rc = settings_timespan(s, "RequestDuration", &hd, &t->request_duration_ms, 0, 3600000, em)))
			return rc;
		return settings_unread(s, "RequestCount, RequestDuration, SlidingWindowDuration, IncludePaths, ExcludePaths", em);
	}
	return settings_unread(s, "RequestCount, SlidingWindowDuration, IncludePaths, ExcludePaths", em);
}

int crules_bind_trigger(struct settings_node *rule, struct crule_trigger *t, const struct defaults *d, struct err_msg *em)
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
	struct settings_node *tn = settings_get(rule, "Trigger"), *s;
	const char *type;
	size_t i;
	int rc;

	if (tn == NULL)
		return settings_refuse_missing(rule, "Trigger", em, "");
	if ((rc = settings_text(tn, "Type", true, &type, em)) != 0 || type == NULL)
		return rc ? rc : settings_refuse_missing(tn, "Type", em, "");
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(types[i].name, type) == 0)
			break;
	if (i == sizeof(types) / sizeof(types[0]))
		return settings_refuse(DP_EINVAL, settings_get(tn, "Type"), em, "'%.64s' is not a trigger: Startup, EventCounter, "
			      "CPUUsage, GCHeapSize, ThreadpoolQueueLength, EventMeter, AspNetRequestCount, "
			      "AspNetRequestDuration, AspNetResponseStatus", type);
	t->type = types[i].type;
	t->type_name = types[i].name;
	t->percentile = -1;
	s = settings_get(tn, "Settings");
	if ((rc = settings_unread(tn, "Type, Settings", em)) != 0)
		return rc;
	if (s && s->value && *s->value == '\0' && s->n == 0)
		s = NULL;
	if (s && s->value && s->n == 0)
		return settings_refuse(DP_EINVAL, s, em, "takes settings under it, not one value");
	switch (t->type) {
	case CRT_STARTUP:
		return s ? settings_unread(s, "no settings (Startup)", em) : 0;
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
				return settings_refuse(DP_EINVAL, s ? s : tn, em, "thresholds of %s are at least 0", t->type_name);
			return settings_unread(s, "GreaterThan, LessThan, SlidingWindowDuration", em);
		}
		if (s == NULL)
			return settings_refuse_missing(tn, "Settings", em, " (ProviderName, CounterName, GreaterThan/LessThan)");
		if ((rc = settings_str(s, "ProviderName", true, &t->provider, em)) ||
		    (rc = settings_str(s, "CounterName", true, &t->name, em)) || (rc = window(s, d, &t->window_ms, em)) ||
		    (rc = thresholds(s, t, HUGE_VAL, HUGE_VAL, em)))
			return rc;
		if (!t->has_gt && !t->has_lt)
			return settings_refuse_missing(s, "GreaterThan", em, " (or LessThan, or both)");
		return settings_unread(s, "ProviderName, CounterName, GreaterThan, LessThan, SlidingWindowDuration", em);
	case CRT_EVENT_METER: {
		bool hp = false;
		unsigned pct = 0;

		if (s == NULL)
			return settings_refuse_missing(tn, "Settings", em, " (MeterName, InstrumentName, GreaterThan/LessThan)");
		if ((rc = settings_str(s, "MeterName", true, &t->provider, em)) ||
		    (rc = settings_str(s, "InstrumentName", true, &t->name, em)) || (rc = window(s, d, &t->window_ms, em)) ||
		    (rc = thresholds(s, t, HUGE_VAL, HUGE_VAL, em)) ||
		    (rc = settings_uint(s, "HistogramPercentile", &hp, &pct, 0, 100, em)))
			return rc;
		if (hp)
			t->percentile = (int)pct;
		if (!t->has_gt && !t->has_lt)
			return settings_refuse_missing(s, "GreaterThan", em, " (or LessThan, or both)");
		return settings_unread(s, "MeterName, InstrumentName, GreaterThan, LessThan, HistogramPercentile, "
			      "SlidingWindowDuration", em);
	}
	default: {
		struct aspnet_trig *check = NULL;
		struct aspnet_trig_config tc;
		struct err_msg why;

		if (s == NULL)
			return settings_refuse_missing(tn, "Settings", em, "");
		if ((rc = bind_aspnet(s, t, d, em)) != 0)
			return rc;
		crules_asp_config(t, &tc);
		if (aspnet_trig_new(&tc, &check, &why) != 0) /* the globs' and ranges' own checks */
			return settings_refuse(DP_EINVAL, s, em, "%s", why.text);
		aspnet_trig_free(check);
		return 0;
	}
	}
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
