/*
 * crules_parse_act.c - a collection rule's Actions bound (crules_parse_int.h):
 * each item's Type, Name and WaitForCompletion, and the Settings its type
 * takes, with CollectionRuleDefaults' egress provider where an action names
 * none.
 *
 * Apart from crules_parse.c (the rule around them) and crules_parse_trig.c
 * (its trigger) because each capture action's settings are a shape of their
 * own: the bodies of CollectTrace's Providers, CollectLiveMetrics and
 * CollectLogs are written as the HTTP API's request bodies and checked by
 * the same parsers (trace.h, metrics.h, logs.h) that will read them when the
 * action runs: one reading of each shape. Execute's program is refused under
 * the sandbox here, at start, not when the rule fires.
 */
#include "crules_parse_int.h"

#include <jansson.h>
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

int crules_find_egress(struct settings_node *at, const char *name, const struct crule_env *env,
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

static int egress_of(struct settings_node *s, struct crule_action *a, const struct defaults *d, const struct crule_env *env,
		     struct err_msg *em)
{
	const char *eg;
	int rc = settings_text(s, "Egress", false, &eg, em);

	if (rc != 0)
		return rc;
	if (eg)
		return crules_find_egress(settings_get(s, "Egress"), eg, env, &a->egress, em);
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

/* CollectExceptions: Format (PlainText), Filters (Include, Exclude: lists of ExceptionFilter). */
static int bind_exceptions(struct settings_node *s, struct crule_action *a, struct err_msg *em)
{
	static const char *const fields[] = { "MethodName", "TypeName", "ModuleName", "ExceptionType" };
	struct settings_node *fl = settings_get(s, "Filters");
	struct exc_filters check = { 0 };
	json_t *doc;
	const char *fmt;
	int rc;

	if ((rc = settings_text(s, "Format", false, &fmt, em)) != 0)
		return rc;
	a->format = EXC_TEXT; /* dotnet-monitor's default for the action: PlainText */
	if (fmt && strcasecmp(fmt, "NewlineDelimitedJson") == 0)
		a->format = EXC_NDJSON;
	else if (fmt && strcasecmp(fmt, "JsonSequence") == 0)
		a->format = EXC_JSON_SEQ;
	else if (fmt && strcasecmp(fmt, "PlainText") != 0)
		return settings_refuse(DP_EINVAL, settings_get(s, "Format"), em, "'%.32s' is not PlainText, NewlineDelimitedJson "
				       "or JsonSequence", fmt);
	if (fl == NULL)
		return 0;
	doc = json_object();
	for (int ex = 0; ex < 2 && rc == 0; ex++) {
		struct settings_node **items;
		size_t n;
		json_t *list = json_array();

		json_object_set_new(doc, ex ? "exclude" : "include", list);
		if ((rc = settings_list(fl, ex ? "Exclude" : "Include", &items, &n, em)) != 0)
			break;
		for (size_t i = 0; i < n && rc == 0; i++) {
			json_t *o = json_object();

			json_array_append_new(list, o);
			for (size_t k = 0; k < 4 && rc == 0; k++) {
				const char *v;

				if ((rc = settings_text(items[i], fields[k], false, &v, em)) == 0 && v)
					json_object_set_new(o, fields[k], json_string(v));
			}
			if (rc == 0)
				rc = settings_unread(items[i], "MethodName, TypeName, ModuleName, ExceptionType", em);
		}
		free(items);
	}
	if (rc == 0)
		rc = settings_unread(fl, "Include, Exclude", em);
	if (rc == 0) {
		a->exc_json = json_dumps(doc, JSON_COMPACT);
		if (exc_filters_json(a->exc_json, strlen(a->exc_json), &check, em) != 0) {
			char why[sizeof(em->text)];

			snprintf(why, sizeof(why), "%s", em->text);
			rc = settings_refuse(DP_EINVAL, fl, em, "%s", why);
		}
		exc_filters_free(&check);
	}
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
	case CRA_EXCEPTIONS:
		if ((rc = bind_exceptions(s, a, em)) != 0)
			return rc;
		return settings_unread(s, "Format, Filters, Egress", em);
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

int crules_bind_action(struct settings_node *n, struct crule_action *a, const struct defaults *d, const struct crule_env *env,
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
		{ "CollectExceptions", CRA_EXCEPTIONS },
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
			      "CollectGCDump, CollectLogs, CollectStacks, CollectLiveMetrics, CollectExceptions, Execute", type);
	if (types[i].type < 0)
		return settings_refuse(DP_EUNSUPPORTED, settings_get(n, "Type"), em, "dotnet-monitor's %s action is not implemented by diagport "
			      "(it has CollectDump, CollectTrace, CollectGCDump, CollectLogs, CollectStacks, "
			      "CollectLiveMetrics, CollectExceptions, Execute)", types[i].name);
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
