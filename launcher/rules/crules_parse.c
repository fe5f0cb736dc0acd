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
 * This file holds the rule around its parts: the defaults, the filters, the
 * limits, the references between actions, the set and what its sessions
 * need. A rule's trigger is bound in crules_parse_trig.c and its actions in
 * crules_parse_act.c (crules_parse_int.h between them), each a shape with
 * tables of its own.
 */
#include "crules.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "crules_parse_int.h"
#include "mem.h"
#include "settings.h"

#define MAX_RULES 64
#define MAX_ACTIONS 16
#define MAX_FILTERS 16

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

static int bind_defaults(struct settings_node *root, const struct crule_env *env, struct defaults *d, struct err_msg *em)
{
	struct settings_node *top = settings_get(root, "CollectionRuleDefaults"), *s;
	const char *eg;
	int rc = 0;

	if (top == NULL)
		return 0;
	if ((s = settings_get(top, "Actions")) != NULL) {
		if ((rc = settings_text(s, "Egress", false, &eg, em)) != 0 ||
		    (eg && (rc = crules_find_egress(settings_get(s, "Egress"), eg, env, &d->egress, em)) != 0) ||
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
	if (rc != 0 || (rc = crules_bind_trigger(rn, &r->trig, d, em)) != 0)
		return rc;
	if ((rc = settings_list(rn, "Actions", &items, &n, em)) != 0)
		return rc;
	if (n > MAX_ACTIONS) {
		free(items);
		return settings_refuse(DP_ETOOBIG, settings_get(rn, "Actions"), em, "more than %d actions", MAX_ACTIONS);
	}
	r->actions = mem_zalloc((n ? n : 1) * sizeof(*r->actions));
	for (size_t i = 0; i < n && rc == 0; i++) /* counted even when refused: rule_free frees what it holds */
		rc = crules_bind_action(items[i], &r->actions[r->n_actions++], d, env, em);
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
		free(a->exc_json);
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
