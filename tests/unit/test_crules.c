/*
 * test_crules.c - the collection rules' settings (launcher/rules/crules_parse*.c)
 * and the counter trigger's run (crules_counter_step): dotnet-monitor's
 * documented example bound in full, defaults, TimeSpans, every refusal
 * naming the setting's full path and where it came from, and the run's
 * window, break and gap rules.
 */
#include <stdlib.h>
#include <string.h>

#include "../../launcher/config.h"
#include "../../launcher/rules/crules.h"
#include "mem.h"
#include "t.h"

static struct egress_provider providers[] = { { .name = (char *)"TmpDir", .dir = (char *)"/tmp" } };
static struct crule_env env = { .egress = providers, .n_egress = 1, .sandbox = true, .interval_s = 5 };

/* Settings text bound into *s; 0 or the code, with em. */
static int bind(const char *yaml, struct crule_set *s, struct err_msg *em)
{
	struct launch_config c = { 0 };
	int rc = config_load_text(&c, yaml, strlen(yaml), "rules.yaml", em);

	if (rc == 0)
		rc = crules_parse(&c, &env, s, em);
	config_free(&c);
	return rc;
}

static void documented_example(void)
{
	struct crule_set s = { 0 };
	struct err_msg em;
	const struct crule *r;

	T_CHECK(bind("CollectionRules:\n"
		     "  HighCpuRule:\n"
		     "    Filters:\n"
		     "      - Key: ProcessName\n"
		     "        Value: dotnet\n"
		     "        MatchType: Exact\n"
		     "    Trigger:\n"
		     "      Type: EventCounter\n"
		     "      Settings:\n"
		     "        ProviderName: System.Runtime\n"
		     "        CounterName: cpu-usage\n"
		     "        GreaterThan: 70\n"
		     "        SlidingWindowDuration: \"00:00:10\"\n"
		     "    Actions:\n"
		     "      - Type: CollectTrace\n"
		     "        Settings:\n"
		     "          Profile: Cpu\n"
		     "          Duration: \"00:01:00\"\n"
		     "          Egress: TmpDir\n"
		     "    Limits:\n"
		     "      ActionCount: 2\n"
		     "      ActionCountSlidingWindowDuration: \"1:00:00\"\n",
		     &s, &em) == 0);
	T_CHECK(s.n == 1);
	r = &s.r[0];
	T_STREQ(r->name, "HighCpuRule");
	T_CHECK(r->n_filters == 1 && r->filters[0].key == CRF_NAME && !r->filters[0].contains);
	T_STREQ(r->filters[0].value, "dotnet");
	T_CHECK(r->trig.type == CRT_EVENT_COUNTER && r->trig.has_gt && r->trig.gt == 70 && !r->trig.has_lt);
	T_STREQ(r->trig.provider, "System.Runtime");
	T_STREQ(r->trig.name, "cpu-usage");
	T_CHECK(r->trig.window_ms == 10000);
	T_CHECK(r->n_actions == 1 && r->actions[0].type == CRA_TRACE && r->actions[0].duration_ms == 60000);
	T_STREQ(r->actions[0].profile, "Cpu");
	T_CHECK(r->actions[0].egress == &providers[0] && r->actions[0].wait);
	T_CHECK(r->lim.action_count == 2 && r->lim.window_ms == 3600000 && r->lim.rule_duration_ms == 0);
	crule_set_free(&s);
}

static void shortcuts_and_defaults(void)
{
	struct crule_set s = { 0 };
	struct err_msg em;

	T_CHECK(bind("CollectionRuleDefaults:\n"
		     "  Actions: {Egress: tmpdir}\n"
		     "  Triggers: {SlidingWindowDuration: \"00:00:03\"}\n"
		     "  Limits: {ActionCount: 3}\n"
		     "collectionrules:\n"
		     "  a: {Trigger: {Type: CPUUsage}, Actions: [{Type: CollectDump}]}\n"
		     "  b: {Trigger: {Type: GCHeapSize, Settings: {LessThan: 5}}, Actions: [{Type: CollectGCDump}],\n"
		     "      Filters: [{CommandLine: app.dll, MatchType: Contains}]}\n",
		     &s, &em) == 0);
	T_CHECK(s.n == 2);
	T_CHECK(s.r[0].trig.has_gt && s.r[0].trig.gt == 50 && !s.r[0].trig.has_lt); /* CPUUsage's default */
	T_STREQ(s.r[0].trig.name, "cpu-usage");
	T_CHECK(s.r[0].trig.window_ms == 3000 && s.r[0].lim.action_count == 3);
	T_CHECK(s.r[0].actions[0].type == CRA_DUMP && s.r[0].actions[0].egress == &providers[0]);
	T_CHECK(!s.r[1].trig.has_gt && s.r[1].trig.has_lt && s.r[1].trig.lt == 5); /* LessThan drops the default */
	T_CHECK(s.r[1].n_filters == 1 && s.r[1].filters[0].key == CRF_CMDLINE && s.r[1].filters[0].contains);
	crule_set_free(&s);
}

static void timespans(void)
{
	char t[40];

	T_CHECK(crules_timespan("00:00:10") == 10000);
	T_CHECK(crules_timespan("1:00:00") == 3600000);
	T_CHECK(crules_timespan("1.00:00:00") == 86400000);
	T_CHECK(crules_timespan("00:00:00.5") == 500);
	T_CHECK(crules_timespan("2") == 2 * 86400000LL);
	T_CHECK(crules_timespan("00:01") == 60000);
	T_CHECK(crules_timespan("00:60:00") == -1);
	T_CHECK(crules_timespan("10s") == -1);
	T_CHECK(crules_timespan("-00:00:01") == -1);
	T_CHECK(crules_timespan("") == -1);
	crules_timespan_text(t, sizeof(t), 3600000);
	T_STREQ(t, "01:00:00");
	crules_timespan_text(t, sizeof(t), 86400000LL + 61000);
	T_STREQ(t, "1.00:01:01");
	crules_timespan_text(t, sizeof(t), 59999);
	T_STREQ(t, "00:00:59.9990000");
}

/* Each bad rule is refused with the setting's full path and where it is. */
static void refusals(void)
{
	static const struct {
		const char *yaml, *says;
	} cases[] = {
		{ "CollectionRules:\n  R:\n    Trigger: {Type: EventCounters}\n    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "rules.yaml:3:21: CollectionRules:R:Trigger:Type: 'EventCounters' is not a trigger" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: CollectHeap}]\n",
		  "CollectionRules:R:Actions:0:Type: 'CollectHeap' is not an action" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: EventCounter, Settings: {ProviderName: System.Runtime, GreaterThan: 1}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger:Settings:CounterName: is required" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: CPUUsage, Settings: {GreaterThan: lots}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "rules.yaml:3:55: CollectionRules:R:Trigger:Settings:GreaterThan: 'lots' is not a number" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: CPUUsage, Settings: {GreaterThen: 5}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger:Settings:GreaterThen: not a setting diagport knows here" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: CollectDump, Settings: {Egress: nowhere}}]\n",
		  "CollectionRules:R:Actions:0:Settings:Egress: there is no egress provider 'nowhere'" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: LoadProfiler, Settings: {Path: /p.so}}]\n",
		  "CollectionRules:R:Actions:0:Type: dotnet-monitor's LoadProfiler action is not implemented by diagport" },
		{ "Templates:\n  Triggers:\n    T: {Type: Startup}\n",
		  "Templates: dotnet-monitor's collection rule templates are not implemented" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: Execute, Settings: {Path: /bin/true}}]\n",
		  "CollectionRules:R:Actions:0: Execute runs a program, which the agent's sandbox" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: AspNetResponseStatus, Settings: {StatusCodes: [\"500-599\"], RequestCount: 5}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger:Settings:RequestCount: AspNetResponseStatus counts responses with ResponseCount" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: AspNetResponseStatus, Settings: {StatusCodes: [\"500-99\"], ResponseCount: 5}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger:Settings:StatusCodes:0: '500-99' is not a status code" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: EventCounter, Settings: {ProviderName: P, CounterName: c, GreaterThan: 5, LessThan: 5}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger:Settings:GreaterThan: GreaterThan (5) must be less than LessThan (5)" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n"
		  "    Actions: [{Type: CollectTrace, Settings: {Egress: TmpDir, Profile: Cpu, Providers: [{Name: X}]}}]\n",
		  "CollectionRules:R:Actions:0:Settings:Providers: Profile or Providers, not both" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n"
		  "    Actions: [{Type: CollectTrace, Settings: {Egress: TmpDir, Profile: Gpu}}]\n",
		  "CollectionRules:R:Actions:0:Settings:Profile:" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: CollectDump}]\n",
		  "CollectionRules:R:Actions:0:Settings:Egress: is required" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: CPUUsage, Settings: {SlidingWindowDuration: \"2.00:00:00\"}}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger:Settings:SlidingWindowDuration: '2.00:00:00' is outside 00:00:01..1.00:00:00" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n"
		  "    Limits: {ActionCount: 0}\n",
		  "CollectionRules:R:Limits:ActionCount: '0' is not a whole number" },
		{ "CollectionRules:\n  R:\n    Filters: [{Key: ProcessName}]\n    Trigger: {Type: Startup}\n"
		  "    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Filters:0: a filter needs a Value" },
		{ "CollectionRules:\n  R:\n    Actions: [{Type: CollectDump, Settings: {Egress: TmpDir}}]\n",
		  "CollectionRules:R:Trigger: is required" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n    Actions: [{Type: CollectDump, Settings: {Egres: TmpDir}}]\n",
		  "CollectionRules:R:Actions:0:Settings:Egress: is required (or CollectionRuleDefaults:Actions:Egress); "
		  "CollectionRules:R:Actions:0:Settings:Egres here is not a setting diagport knows (misspelt?)" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n"
		  "    Actions: [{Type: CollectLiveMetrics, Settings: {Egress: TmpDir, UseDefaultProviders: false}}]\n",
		  "CollectionRules:R:Actions:0:Settings:UseDefaultProviders: the setting is IncludeDefaultProviders" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n"
		  "    Actions: [{Name: d, Type: CollectDump, WaitForCompletion: false, Settings: {Egress: TmpDir}},\n"
		  "              {Type: Execute, Settings: {Path: /bin/echo, Arguments: \"$(Actions.d.EgressPath)\"}}]\n",
		  "CollectionRules:R:Actions:1:Settings: $(Actions.d.EgressPath) names no earlier action of this rule that waits" },
		{ "CollectionRules:\n  R:\n    Trigger: {Type: Startup}\n"
		  "    Actions: [{Name: d, Type: CollectDump, Settings: {Egress: TmpDir}},\n"
		  "              {Type: Execute, Settings: {Path: /bin/echo, Arguments: \"$(Actions.d.ExitCode)\"}}]\n",
		  "$(Actions.d.ExitCode): a CollectDump action's output is EgressPath" },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct crule_set s = { 0 };
		struct err_msg em = { "" };

		env.sandbox = strstr(cases[i].says, "sandbox") != NULL; /* Execute's checks, past the sandbox's */
		if (bind(cases[i].yaml, &s, &em) == 0)
			T_FAIL("case %zu was accepted", i);
		if (strstr(em.text, cases[i].says) == NULL)
			T_FAIL("case %zu says \"%s\", not \"%s\"", i, em.text, cases[i].says);
		T_CHECK(s.n == 0 && s.r == NULL);
	}
}

/* A rule from variables (dotnet-monitor's names, any case of the prefix); a bad one names the variable. */
static void from_environment(void)
{
	struct launch_config c = { 0 };
	struct crule_set s = { 0 };
	struct err_msg em;
	char *good[] = { (char *)"DotnetMonitor_CollectionRules__R__Trigger__Type=Startup",
			 (char *)"DOTNETMONITOR_CollectionRules__R__Actions__0__Type=CollectStacks",
			 (char *)"DIAGPORT_CollectionRules__R__Actions__0__Settings__Egress=TmpDir", NULL };
	char *bad[] = { (char *)"DOTNETMONITOR_CollectionRules__R__Trigger__Type=Startup",
			(char *)"DOTNETMONITOR_CollectionRules__R__Actions__0__Type=CollectStacks",
			(char *)"DOTNETMONITOR_CollectionRules__R__Actions__0__Settings__Format=Yaml",
			(char *)"DOTNETMONITOR_CollectionRules__R__Actions__0__Settings__Egress=TmpDir", NULL };

	T_CHECK(config_load_env(&c, good, NULL, &em) == 0);
	T_CHECK(crules_parse(&c, &env, &s, &em) == 0);
	T_CHECK(s.n == 1 && s.r[0].trig.type == CRT_STARTUP && s.r[0].actions[0].type == CRA_STACKS);
	crule_set_free(&s);
	config_free(&c);
	T_CHECK(config_load_env(&c, bad, NULL, &em) == 0);
	T_CHECK(crules_parse(&c, &env, &s, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "environment variable DOTNETMONITOR_CollectionRules__R__Actions__0__Settings__Format: "
			       "CollectionRules:R:Actions:0:Settings:Format: 'Yaml' is not Json") != NULL);
	config_free(&c);
}

static void counter_run(void)
{
	struct crule_trigger t = { .type = CRT_EVENT_COUNTER, .has_gt = true, .gt = 50, .window_ms = 3000 };
	struct crule_run run = { 0 };

	/* 1 s interval: the first satisfying reading at 10 s covers 9..10 s; the window is met at 12 s */
	T_CHECK(!crules_counter_step(&run, &t, 1, 60, 10000));
	T_CHECK(!crules_counter_step(&run, &t, 1, 70, 11000));
	T_CHECK(crules_counter_step(&run, &t, 1, 80, 12000));
	/* a reading at the threshold breaks the run (GreaterThan is strict) */
	T_CHECK(!crules_counter_step(&run, &t, 1, 50, 13000));
	T_CHECK(!crules_counter_step(&run, &t, 1, 90, 14000));
	T_CHECK(!crules_counter_step(&run, &t, 1, 90, 15000));
	/* a gap of more than 1.5 intervals starts the run again */
	T_CHECK(!crules_counter_step(&run, &t, 1, 90, 17000));
	T_CHECK(!crules_counter_step(&run, &t, 1, 90, 18000));
	T_CHECK(crules_counter_step(&run, &t, 1, 90, 19000));
	/* both thresholds: inside the band only */
	t.has_lt = true;
	t.lt = 100;
	run = (struct crule_run){ 0 };
	T_CHECK(!crules_counter_step(&run, &t, 1, 100, 1000) && !run.have);
	T_CHECK(!crules_counter_step(&run, &t, 1, 99, 2000) && run.have);
}

int main(void)
{
	t_file_name = "crules";
	T_RUN(documented_example);
	T_RUN(shortcuts_and_defaults);
	T_RUN(timespans);
	T_RUN(refusals);
	T_RUN(from_environment);
	T_RUN(counter_run);
	return t_failed_cases ? 1 : 0;
}
