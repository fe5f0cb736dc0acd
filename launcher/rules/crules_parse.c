/*
 * crules_parse.c - the collection rules' settings bound into a crule_set
 * (crules.h), once, at start.
 *
 * The agent's settings are one tree (common/settings.h) holding every source's
 * keys with where each came from (a file's line and column, a variable, a
 * key-per-file file). Here the CollectionRules, CollectionRuleDefaults and
 * Templates sections of it are bound as dotnet-monitor's options classes bind
 * a rule: required settings, defaults (dotnet-monitor's, then
 * CollectionRuleDefaults), ranges. The binder's getters mark every setting
 * read; a section's settings nobody read are refused here by full path, with
 * what the section takes, so a misspelt or unimplemented setting never passes.
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
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launcher/capture/capture.h"
#include "launcher/capture/dump.h"
#include "launcher/trace/logs.h"
#include "mem.h"
#include "settings.h"
#include "launcher/trace/trace.h"

#define MAX_RULES 64
#define MAX_ACTIONS 16
#define MAX_FILTERS 16
#define DAY_MS (24LL * 3600 * 1000)

/* ---- TimeSpan (the settings binder's; crules.h names them for the rules' own callers) ---- */

long long crules_timespan(const char *s)
{
	return settings_parse_timespan(s);
}

void crules_timespan_text(char *out, size_t n, long long ms)
{
	settings_timespan_text(out, n, ms);
}

/* ---- defaults ---- */

struct defaults {
	const struct egress_provider *egress;
	bool has_window, has_requests, has_responses, has_count, has_count_window, has_duration;
	long long window_ms, count_window_ms, rule_duration_ms;
	unsigned requests, responses, action_count;
};

static int find_egress(struct settings_node *at, const char *name, const struct crule_env *env,
		       const struct egress_provider **out, struct err_msg *em)
{
	for (size_t i = 0; i < env->n_egress; i++)
		if (strcasecmp(env->egress[i].name, name) == 0) {
			*out = &env->egress[i];
			return 0;
		}
	return settings_refuse(DP_EINVAL, at, em, "there is no egress provider '%.64s'%s", name,
		      env->n_egress ? "" : " (none is configured: Egress:FileSystem:NAME:DirectoryPath, ...)");
}

static int bind_defaults(struct settings_node *root, const struct crule_env *env, struct defaults *d, struct err_msg *em)
{
	struct settings_node *top = settings_get(root, "CollectionRuleDefaults"), *s;
	const char *eg;
	int rc = 0;

	if (top == NULL)
		return 0;
	if ((s = settings_get(top, "Actions")) != NULL) {
		if ((rc = settings_text(s, "Egress", false, &eg, em)) != 0 ||
		    (eg && (rc = find_egress(settings_get(s, "Egress"), eg, env, &d->egress, em)) != 0) ||
		    (rc = settings_unread(s, "Egress", em)) != 0)
			return rc;
	}
	if ((s = settings_get(top, "Triggers")) != NULL) {
		if ((rc = settings_timespan(s, "SlidingWindowDuration", &d->has_window, &d->window_ms, 1000, DAY_MS, em)) ||
		    (rc = settings_uint(s, "RequestCount", &d->has_requests, &d->requests, 1, 0x7fffffff, em)) ||
		    (rc = settings_uint(s, "ResponseCount", &d->has_responses, &d->responses, 1, 0x7fffffff, em)) ||
		    (rc = settings_unread(s, "SlidingWindowDuration, RequestCount, ResponseCount", em)))
			return rc;
	}
	if ((s = settings_get(top, "Limits")) != NULL) {
		if ((rc = settings_uint(s, "ActionCount", &d->has_count, &d->action_count, 1, 0x7fffffff, em)) ||
		    (rc = settings_timespan(s, "ActionCountSlidingWindowDuration", &d->has_count_window, &d->count_window_ms,
				       1000, DAY_MS, em)) ||
		    (rc = settings_timespan(s, "RuleDuration", &d->has_duration, &d->rule_duration_ms, 1000, 365 * DAY_MS, em)) ||
		    (rc = settings_unread(s, "ActionCount, ActionCountSlidingWindowDuration, RuleDuration", em)))
			return rc;
	}
	return settings_unread(top, "Actions, Triggers, Limits", em);
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

static int filter_key(struct settings_node *at, const char *name, enum crule_filter_key *out, struct err_msg *em)
{
	for (size_t i = 0; i < N_FILTER_KEYS; i++)
		if (strcasecmp(filter_keys[i].name, name) == 0) {
			*out = filter_keys[i].key;
			return 0;
		}
	return settings_refuse(DP_EINVAL, at, em, "'%.64s' is not ProcessId, ProcessName, CommandLine or "
		      "ManagedEntryPointAssemblyName", name);
}

static int bind_filter(struct settings_node *n, struct crule_filter *f, struct err_msg *em)
{
	const char *key = NULL, *value = NULL, *match = NULL;
	int rc;
	size_t shorthand = 0;

	if ((rc = settings_text(n, "Key", false, &key, em)) || (rc = settings_text(n, "Value", false, &value, em)) ||
	    (rc = settings_text(n, "MatchType", false, &match, em)))
		return rc;
	f->key = CRF_PID; /* dotnet-monitor's default Key */
	if (key && (rc = filter_key(settings_get(n, "Key"), key, &f->key, em)) != 0)
		return rc;
	for (size_t i = 0; i < N_FILTER_KEYS; i++) {
		const char *v;

		if ((rc = settings_text(n, filter_keys[i].name, false, &v, em)) != 0)
			return rc;
		if (v == NULL)
			continue;
		if (key || value || shorthand++)
			return settings_refuse(DP_EINVAL, settings_get(n, filter_keys[i].name), em,
				      "a filter is either Key and Value or one of ProcessId, ProcessName, CommandLine, "
				      "ManagedEntryPointAssemblyName, not both");
		f->key = filter_keys[i].key;
		value = v;
	}
	if (value == NULL)
		return settings_refuse(DP_EINVAL, n, em, "a filter needs a Value (or the shorthand ProcessName: NAME, ...)");
	if (match && strcasecmp(match, "Exact") != 0 && strcasecmp(match, "Contains") != 0)
		return settings_refuse(DP_EINVAL, settings_get(n, "MatchType"), em, "'%.64s' is not Exact or Contains", match);
	f->contains = match && strcasecmp(match, "Contains") == 0;
	if (f->key == CRF_PID) {
		char *end;

		errno = 0;
		(void)strtoull(value, &end, 10);
		if (!isdigit((unsigned char)*value) || *end || errno)
			return settings_refuse(DP_EINVAL, n, em, "ProcessId '%.64s' is not a process id", value);
	}
	f->value = mem_strdup(value);
	return settings_unread(n, "Key, Value, MatchType, or ProcessId/ProcessName/CommandLine/ManagedEntryPointAssemblyName", em);
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

static int bind_trigger(struct settings_node *rule, struct crule_trigger *t, const struct defaults *d, struct err_msg *em)
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

/* ---- actions ---- */

static int egress_of(struct settings_node *s, struct crule_action *a, const struct defaults *d, const struct crule_env *env,
		     struct err_msg *em)
{
	const char *eg;
	int rc = settings_text(s, "Egress", false, &eg, em);

	if (rc != 0)
		return rc;
	if (eg)
		return find_egress(settings_get(s, "Egress"), eg, env, &a->egress, em);
	if ((a->egress = d->egress) == NULL)
		return settings_refuse_missing(s, "Egress", em, " (or CollectionRuleDefaults:Actions:Egress)");
	return 0;
}

static int duration_of(struct settings_node *s, struct crule_action *a, struct err_msg *em)
{
	bool has = false;

	a->duration_ms = 30000;
	return settings_timespan(s, "Duration", &has, &a->duration_ms, 1000, DAY_MS, em);
}

/* CollectTrace's Providers as /trace's body; checked by the parser that will read it. */
static int trace_providers(struct settings_node *s, struct crule_action *a, struct err_msg *em)
{
	struct settings_node **items;
	size_t n;
	json_t *doc = json_object(), *list = json_array();
	bool rundown = true, has_buf = false;
	unsigned buf_mb = 256;
	struct trace_config check = { 0 };
	int rc = settings_list(s, "Providers", &items, &n, em);

	json_object_set_new(doc, "providers", list);
	for (size_t i = 0; rc == 0 && i < n; i++) {
		json_t *p = json_object();
		const char *name, *kw, *lvl;
		struct settings_node *args;

		json_array_append_new(list, p);
		if ((rc = settings_text(items[i], "Name", true, &name, em)) || (rc = settings_text(items[i], "Keywords", false, &kw, em)) ||
		    (rc = settings_text(items[i], "EventLevel", false, &lvl, em)))
			break;
		json_object_set_new(p, "name", json_string(name));
		if (kw)
			json_object_set_new(p, "keywords", json_string(kw));
		if (lvl)
			json_object_set_new(p, "eventLevel", json_string(lvl));
		if ((args = settings_get(items[i], "Arguments")) != NULL) {
			json_t *ao = json_object();

			json_object_set_new(p, "arguments", ao);
			for (size_t k = 0; k < args->n; k++) {
				if (args->k[k]->value == NULL || args->k[k]->n) {
					rc = settings_refuse(DP_EINVAL, args->k[k], em, "an argument is a name and a text value");
					break;
				}
				args->k[k]->used = true;
				json_object_set_new(ao, args->k[k]->name, json_string(args->k[k]->value));
			}
		}
		if (rc == 0)
			rc = settings_unread(items[i], "Name, Keywords, EventLevel, Arguments", em);
	}
	free(items);
	if (rc == 0 && (rc = settings_bool(s, "RequestRundown", &rundown, em)) == 0 &&
	    (rc = settings_uint(s, "BufferSizeMegabytes", &has_buf, &buf_mb, 1, 1024, em)) == 0) {
		json_object_set_new(doc, "requestRundown", json_boolean(rundown));
		json_object_set_new(doc, "bufferSizeInMB", json_integer(buf_mb));
		a->providers_json = json_dumps(doc, JSON_COMPACT);
		if (trace_config_json(a->providers_json, strlen(a->providers_json), &check, em) != 0) {
			char why[sizeof(em->text)];

			snprintf(why, sizeof(why), "%s", em->text);
			rc = settings_refuse(DP_EINVAL, settings_get(s, "Providers"), em, "%s", why);
		}
		trace_config_free(&check);
	}
	json_decref(doc);
	return rc;
}

static int bind_trace(struct settings_node *s, struct crule_action *a, struct err_msg *em)
{
	struct settings_node *stop;
	struct trace_config check = { 0 };
	int rc;

	if ((rc = duration_of(s, a, em)) || (rc = settings_str(s, "Profile", false, &a->profile, em)))
		return rc;
	if (a->profile && settings_get(s, "Providers"))
		return settings_refuse(DP_EINVAL, settings_get(s, "Providers"), em, "Profile or Providers, not both");
	if (a->profile) {
		for (const char *x = "RequestRundown\0BufferSizeMegabytes\0StoppingEvent\0"; *x; x += strlen(x) + 1)
			if (settings_get(s, x))
				return settings_refuse(DP_EINVAL, settings_get(s, x), em, "applies only with Providers, not with a Profile");
		if (trace_config_profile(a->profile, 1, &check, em) != 0) {
			char why[sizeof(em->text)];

			snprintf(why, sizeof(why), "%s", em->text);
			trace_config_free(&check);
			return settings_refuse(DP_EINVAL, settings_get(s, "Profile"), em, "%s", why);
		}
		trace_config_free(&check);
		return 0;
	}
	if (settings_get(s, "Providers") == NULL)
		return settings_refuse_missing(s, "Profile", em, " (or Providers)");
	if ((rc = trace_providers(s, a, em)) != 0)
		return rc;
	if ((stop = settings_get(s, "StoppingEvent")) != NULL) {
		struct settings_node *pf;

		if ((rc = settings_str(stop, "ProviderName", true, &a->stop_provider, em)) ||
		    (rc = settings_str(stop, "EventName", true, &a->stop_event, em)))
			return rc;
		if ((pf = settings_get(stop, "PayloadFilter")) != NULL) {
			a->stop_payload = mem_zalloc((pf->n ? pf->n : 1) * sizeof(*a->stop_payload));
			for (size_t k = 0; k < pf->n; k++) {
				if (pf->k[k]->value == NULL || pf->k[k]->n)
					return settings_refuse(DP_EINVAL, pf->k[k], em, "a payload filter is a field name and its value");
				pf->k[k]->used = true;
				a->stop_payload[a->n_stop_payload++] =
					(struct crule_kv){ mem_strdup(pf->k[k]->name), mem_strdup(pf->k[k]->value) };
			}
		}
		if ((rc = settings_unread(stop, "ProviderName, EventName, PayloadFilter", em)) != 0)
			return rc;
	}
	return 0;
}

static int bind_livemetrics(struct settings_node *s, struct crule_action *a, struct err_msg *em)
{
	json_t *doc = json_object();
	bool defaults = true;
	struct metrics_selection check = { 0 };
	struct settings_node **items;
	size_t n;
	int rc;

	if (settings_get(s, "UseDefaultProviders")) { /* in dotnet-monitor's docs' example, which its binder ignores */
		rc = settings_refuse(DP_EINVAL, settings_get(s, "UseDefaultProviders"), em, "the setting is IncludeDefaultProviders "
			    "(dotnet-monitor's documentation shows UseDefaultProviders, which dotnet-monitor ignores)");
		goto out;
	}
	if ((rc = duration_of(s, a, em)) || (rc = settings_bool(s, "IncludeDefaultProviders", &defaults, em)))
		goto out;
	json_object_set_new(doc, "includeDefaultProviders", json_boolean(defaults));
	for (int meters = 0; meters < 2 && rc == 0; meters++) {
		json_t *list = json_array();

		json_object_set_new(doc, meters ? "meters" : "providers", list);
		if ((rc = settings_list(s, meters ? "Meters" : "Providers", &items, &n, em)) != 0)
			break;
		for (size_t i = 0; i < n && rc == 0; i++) {
			json_t *o = json_object(), *names = json_array();
			char **nm = NULL;
			size_t nn = 0;
			char *src = NULL;

			json_array_append_new(list, o);
			if ((rc = settings_str(items[i], meters ? "MeterName" : "ProviderName", true, &src, em)) == 0 &&
			    (rc = settings_strings(items[i], meters ? "InstrumentNames" : "CounterNames", &nm, &nn, em)) == 0)
				rc = settings_unread(items[i], meters ? "MeterName, InstrumentNames" : "ProviderName, CounterNames", em);
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
			rc = settings_refuse(DP_EINVAL, s, em, "%s", why);
		}
		metrics_selection_free(&check);
	}
out:
	json_decref(doc);
	return rc;
}

static int bind_logs(struct settings_node *s, struct crule_action *a, struct err_msg *em)
{
	json_t *doc = json_object();
	const char *lvl, *fmt;
	bool app = true;
	struct settings_node *specs;
	struct logs_filter check = { 0 };
	int rc;

	if ((rc = duration_of(s, a, em)) || (rc = settings_text(s, "DefaultLevel", false, &lvl, em)) ||
	    (rc = settings_bool(s, "UseAppFilters", &app, em)) || (rc = settings_text(s, "Format", false, &fmt, em)))
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
			rc = settings_refuse(DP_EINVAL, settings_get(s, "Format"), em, "'%.32s' is not PlainText, NewlineDelimitedJson or "
				    "JsonSequence", fmt);
			goto out;
		}
	}
	json_object_set_new(doc, "logLevel", json_string(lvl ? lvl : "Warning"));
	json_object_set_new(doc, "useAppFilters", json_boolean(app));
	if ((specs = settings_get(s, "FilterSpecs")) != NULL) {
		json_t *o = json_object();

		json_object_set_new(doc, "filterSpecs", o);
		for (size_t k = 0; k < specs->n; k++) {
			if (specs->k[k]->n) {
				rc = settings_refuse(DP_EINVAL, specs->k[k], em, "a filter spec is a category and a level");
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
		rc = settings_refuse(DP_EINVAL, s, em, "%s", why);
	}
	logs_filter_free(&check);
out:
	json_decref(doc);
	return rc;
}

static int bind_action_settings(struct settings_node *s, struct crule_action *a, const struct defaults *d,
				const struct crule_env *env, struct err_msg *em)
{
	const char *t;
	int rc = 0;

	if (a->type != CRA_EXECUTE && (rc = egress_of(s, a, d, env, em)) != 0)
		return rc;
	if (settings_get(s, "ArtifactName"))
		return settings_refuse(DP_EUNSUPPORTED, settings_get(s, "ArtifactName"), em, "dotnet-monitor's ArtifactName is not implemented "
			      "by diagport; artifacts keep dotnet-monitor's default names");
	switch (a->type) {
	case CRA_DUMP:
		if ((rc = settings_text(s, "Type", false, &t, em)) != 0)
			return rc;
		if ((a->format = dump_type(t ? t : "WithHeap")) < 0)
			return settings_refuse(DP_EINVAL, settings_get(s, "Type"), em, "'%.32s' is not Mini, Triage, WithHeap or Full", t);
		return settings_unread(s, "Type, Egress", em);
	case CRA_GCDUMP:
		return settings_unread(s, "Egress", em);
	case CRA_STACKS:
		if ((rc = settings_text(s, "Format", false, &t, em)) != 0)
			return rc;
		if (t == NULL || strcasecmp(t, "Json") == 0)
			a->format = CAPTURE_STACKS_JSON;
		else if (strcasecmp(t, "PlainText") == 0)
			a->format = CAPTURE_STACKS_TEXT;
		else if (strcasecmp(t, "Speedscope") == 0)
			a->format = CAPTURE_STACKS_SPEEDSCOPE;
		else
			return settings_refuse(DP_EINVAL, settings_get(s, "Format"), em, "'%.32s' is not Json, PlainText or Speedscope", t);
		return settings_unread(s, "Format, Egress", em);
	case CRA_TRACE:
		if ((rc = bind_trace(s, a, em)) != 0)
			return rc;
		return settings_unread(s, "Profile or Providers (RequestRundown, BufferSizeMegabytes, StoppingEvent), Duration, Egress",
			      em);
	case CRA_LIVEMETRICS:
		if ((rc = bind_livemetrics(s, a, em)) != 0)
			return rc;
		return settings_unread(s, "IncludeDefaultProviders, Providers, Meters, Duration, Egress", em);
	case CRA_LOGS:
		if ((rc = bind_logs(s, a, em)) != 0)
			return rc;
		return settings_unread(s, "DefaultLevel, FilterSpecs, UseAppFilters, Format, Duration, Egress", em);
	case CRA_EXECUTE:
		if ((rc = settings_str(s, "Path", true, &a->path, em)) || (rc = settings_str(s, "Arguments", false, &a->args, em)) ||
		    (rc = settings_bool(s, "IgnoreExitCode", &a->ignore_exit, em)))
			return rc;
		if (env->sandbox)
			return settings_refuse(DP_EUNSUPPORTED, s->up, em, "Execute runs a program, which the agent's sandbox (seccomp: "
				      "no execve) forbids; start the agent with --no-sandbox to allow it, or remove the action");
		if (a->path[0] != '/')
			return settings_refuse(DP_EINVAL, settings_get(s, "Path"), em, "'%.128s' is not an absolute path (the agent "
				      "searches no PATH)", a->path);
		return settings_unread(s, "Path, Arguments, IgnoreExitCode", em);
	}
	return 0;
}

static int bind_action(struct settings_node *n, struct crule_action *a, const struct defaults *d, const struct crule_env *env,
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
	struct settings_node *s, empty = { 0 };
	const char *type;
	size_t i;
	int rc;

	if ((rc = settings_text(n, "Type", true, &type, em)) || (rc = settings_str(n, "Name", false, &a->name, em)))
		return rc;
	if (type == NULL)
		return settings_refuse_missing(n, "Type", em, "");
	for (i = 0; i < sizeof(types) / sizeof(types[0]); i++)
		if (strcasecmp(types[i].name, type) == 0)
			break;
	if (i == sizeof(types) / sizeof(types[0]))
		return settings_refuse(DP_EINVAL, settings_get(n, "Type"), em, "'%.64s' is not an action: CollectDump, CollectTrace, "
			      "CollectGCDump, CollectLogs, CollectStacks, CollectLiveMetrics, Execute", type);
	if (types[i].type < 0)
		return settings_refuse(DP_EUNSUPPORTED, settings_get(n, "Type"), em, "dotnet-monitor's %s action is not implemented by diagport "
			      "(it has CollectDump, CollectTrace, CollectGCDump, CollectLogs, CollectStacks, "
			      "CollectLiveMetrics, Execute)", types[i].name);
	a->type = (enum crule_action_type)types[i].type;
	a->type_name = types[i].name;
	a->wait = true;
	if ((rc = settings_bool(n, "WaitForCompletion", &a->wait, em)) != 0)
		return rc;
	s = settings_get(n, "Settings");
	if (s && s->value && s->n == 0 && *s->value)
		return settings_refuse(DP_EINVAL, s, em, "takes settings under it, not one value");
	if (s == NULL) { /* no Settings: every setting from its default (CollectionRuleDefaults) */
		empty.up = n;
		empty.name = (char *)"Settings";
		empty.where = n->where;
		s = &empty;
	}
	if ((rc = bind_action_settings(s, a, d, env, em)) != 0)
		return rc;
	return settings_unread(n, "Name, Type, Settings, WaitForCompletion", em);
}

/* ---- rules ---- */

/* Every $(Actions.NAME.OUTPUT) in text names an earlier action of the list that is waited for, and an output
 * it has (EgressPath of a capture, ExitCode of Execute): refused otherwise, naming where. */
static int check_refs(struct settings_node *at, const struct crule *r, size_t upto, const char *text, struct err_msg *em)
{
	for (const char *p = text ? strstr(text, "$(") : NULL; p; p = strstr(p + 2, "$(")) {
		const char *end = strchr(p, ')'), *dot;
		size_t k;

		if (end == NULL || strncmp(p, "$(Actions.", 10) != 0 ||
		    (dot = memrchr(p + 10, '.', (size_t)(end - p - 10))) == NULL)
			return settings_refuse(DP_EINVAL, at, em, "'%.64s' is not $(Actions.NAME.OUTPUT)", p);
		for (k = 0; k < upto; k++)
			if (r->actions[k].name && strlen(r->actions[k].name) == (size_t)(dot - p - 10) &&
			    strncasecmp(r->actions[k].name, p + 10, (size_t)(dot - p - 10)) == 0)
				break;
		if (k == upto || !r->actions[k].wait)
			return settings_refuse(DP_EINVAL, at, em, "%.*s names no earlier action of this rule that waits for "
				      "completion (an action's Name; WaitForCompletion true)", (int)(end - p + 1), p);
		if (!((r->actions[k].type == CRA_EXECUTE && (size_t)(end - dot - 1) == 8 &&
		       strncasecmp(dot + 1, "ExitCode", 8) == 0) ||
		      (r->actions[k].type != CRA_EXECUTE && (size_t)(end - dot - 1) == 10 &&
		       strncasecmp(dot + 1, "EgressPath", 10) == 0)))
			return settings_refuse(DP_EINVAL, at, em, "%.*s: a %s action's output is %s", (int)(end - p + 1), p,
				      r->actions[k].type_name, r->actions[k].type == CRA_EXECUTE ? "ExitCode" : "EgressPath");
	}
	return 0;
}

static int bind_rule(struct settings_node *rn, struct crule *r, const struct defaults *d, const struct crule_env *env,
		     struct err_msg *em)
{
	struct settings_node **items, *lim;
	size_t n;
	bool has = false;
	int rc;

	r->name = mem_strdup(rn->name);
	if (rn->value && rn->n == 0)
		return settings_refuse(DP_EINVAL, rn, em, "a rule takes Filters, Trigger, Actions and Limits under it");
	if ((rc = settings_list(rn, "Filters", &items, &n, em)) != 0)
		return rc;
	if (n > MAX_FILTERS) {
		free(items);
		return settings_refuse(DP_ETOOBIG, settings_get(rn, "Filters"), em, "more than %d filters", MAX_FILTERS);
	}
	r->filters = mem_zalloc((n ? n : 1) * sizeof(*r->filters));
	for (size_t i = 0; i < n && rc == 0; i++)
		if ((rc = bind_filter(items[i], &r->filters[r->n_filters], em)) == 0)
			r->n_filters++;
	free(items);
	if (rc != 0 || (rc = bind_trigger(rn, &r->trig, d, em)) != 0)
		return rc;
	if ((rc = settings_list(rn, "Actions", &items, &n, em)) != 0)
		return rc;
	if (n > MAX_ACTIONS) {
		free(items);
		return settings_refuse(DP_ETOOBIG, settings_get(rn, "Actions"), em, "more than %d actions", MAX_ACTIONS);
	}
	r->actions = mem_zalloc((n ? n : 1) * sizeof(*r->actions));
	for (size_t i = 0; i < n && rc == 0; i++) /* counted even when refused: rule_free frees what it holds */
		rc = bind_action(items[i], &r->actions[r->n_actions++], d, env, em);
	free(items);
	if (rc != 0)
		return rc;
	for (size_t i = 0; i < r->n_actions; i++) {
		struct settings_node *an;
		char idx[24];

		if (r->actions[i].type != CRA_EXECUTE)
			continue;
		snprintf(idx, sizeof(idx), "%zu", i);
		an = settings_get(settings_get(settings_get(rn, "Actions"), idx), "Settings");
		if ((rc = check_refs(an ? an : rn, r, i, r->actions[i].path, em)) != 0 ||
		    (rc = check_refs(an ? an : rn, r, i, r->actions[i].args, em)) != 0)
			return rc;
	}
	for (size_t i = 0; i < r->n_actions; i++)
		for (size_t k = 0; k < i; k++)
			if (r->actions[i].name && r->actions[k].name && strcasecmp(r->actions[i].name, r->actions[k].name) == 0)
				return settings_refuse(DP_EINVAL, settings_get(rn, "Actions"), em, "two actions are named '%.64s'",
					      r->actions[i].name);
	r->lim.action_count = d->has_count ? d->action_count : 5;
	r->lim.window_ms = d->has_count_window ? d->count_window_ms : 0;
	r->lim.rule_duration_ms = d->has_duration ? d->rule_duration_ms : 0;
	if ((lim = settings_get(rn, "Limits")) != NULL) {
		if ((rc = settings_uint(lim, "ActionCount", &has, &r->lim.action_count, 1, 0x7fffffff, em)) ||
		    (rc = settings_timespan(lim, "ActionCountSlidingWindowDuration", &has, &r->lim.window_ms, 1000, DAY_MS, em)) ||
		    (rc = settings_timespan(lim, "RuleDuration", &has, &r->lim.rule_duration_ms, 1000, 365 * DAY_MS, em)) ||
		    (rc = settings_unread(lim, "ActionCount, ActionCountSlidingWindowDuration, RuleDuration", em)))
			return rc;
	}
	return settings_unread(rn, "Filters, Trigger, Actions, Limits", em);
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

int crules_parse(const struct launch_config *c, const struct crule_env *env, struct crule_set *out,
		 struct err_msg *em)
{
	struct settings_node *root = c->tree, *rules, *tpl;
	struct defaults d = { 0 };
	struct crule_set s = { 0 };
	int rc = 0;

	memset(out, 0, sizeof(*out));
	if ((tpl = settings_get(root, "Templates")) != NULL) {
		rc = settings_refuse(DP_EUNSUPPORTED, tpl, em, "dotnet-monitor's collection rule templates are not implemented by "
			    "diagport; write each rule's Filters, Trigger, Actions and Limits in full");
		goto out;
	}
	if ((rc = bind_defaults(root, env, &d, em)) != 0)
		goto out;
	rules = settings_get(root, "CollectionRules");
	if (rules && rules->n > MAX_RULES) {
		rc = settings_refuse(DP_ETOOBIG, rules, em, "more than %d rules", MAX_RULES);
		goto out;
	}
	if (rules && rules->value && rules->n == 0 && *rules->value) {
		rc = settings_refuse(DP_EINVAL, rules, em, "takes rules under it, by name");
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
