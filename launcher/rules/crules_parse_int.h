/*
 * crules_parse_int.h - what the collection rules' binder files share:
 * crules_parse.c (CollectionRuleDefaults, a rule's filters and limits, the
 * rule set), crules_parse_trig.c (a rule's trigger) and crules_parse_act.c
 * (a rule's actions and their settings).
 *
 * crules_parse.c calls the other two; they call nothing of it. Each binds
 * from the settings tree (common/settings.h), marking what it reads and
 * refusing what it does not take by full path; every refusal is 0 or a
 * negative DP_E* code with em set.
 */
#ifndef DP_CRULES_PARSE_INT_H
#define DP_CRULES_PARSE_INT_H

#include <stdbool.h>

#include "crules.h"
#include "errors.h"
#include "settings.h"

#define DAY_MS (24LL * 3600 * 1000)

/* CollectionRuleDefaults, as bound: what a rule's trigger and actions take when they do not say. */
struct defaults {
	const struct egress_provider *egress;
	bool has_window, has_requests, has_responses, has_count, has_count_window, has_duration;
	long long window_ms, count_window_ms, rule_duration_ms;
	unsigned requests, responses, action_count;
};

/* *out: env's egress provider called name (case-insensitive); else refused at at, naming it. */
int crules_find_egress(struct settings_node *at, const char *name, const struct crule_env *env,
		       const struct egress_provider **out, struct err_msg *em);

/* rule's Trigger (Type and Settings) into t, with d's defaults. On failure t may hold strings: rule_free's. */
int crules_bind_trigger(struct settings_node *rule, struct crule_trigger *t, const struct defaults *d,
			struct err_msg *em);

/* One item n of a rule's Actions into a, with d's defaults and env's providers. On failure a may hold
 * strings: rule_free's. */
int crules_bind_action(struct settings_node *n, struct crule_action *a, const struct defaults *d,
		       const struct crule_env *env, struct err_msg *em);

#endif
