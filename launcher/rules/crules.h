/*
 * crules.h - collection rules: captures that take themselves when a process
 * misbehaves, configured as dotnet-monitor configures them
 * (CollectionRules:NAME:{Filters,Trigger,Actions,Limits}, and
 * CollectionRuleDefaults), and the engine that runs them.
 *
 * Two halves:
 *  - the settings (crules_parse.c, with crules_parse_trig.c and
 *    crules_parse_act.c): the agent's collection-rule settings,
 *    kept as text by config.c with where each came from, bound into a
 *    crule_set once, at start. Anything wrong, and any setting dotnet-monitor
 *    has that diagport does not, is refused there by its full path
 *    (CollectionRules:HighCpu:Trigger:Settings:GreaterThan) and where it came
 *    from; nothing is ignored.
 *  - the engine (crules.c): per rule and matching runtime, an instance with
 *    dotnet-monitor's states (Running, ActionExecuting, Throttled, Finished);
 *    triggers fed by the agent's one counters session per runtime (metrics.h)
 *    and its request events (aspnet_req.h: the ASP.NET triggers); actions run through capture_run
 *    to an egress provider, one after another, each an operation.
 */
#ifndef DP_CRULES_H
#define DP_CRULES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/trace/aspnet_req.h"
#include "launcher/config.h"
#include "errors.h"
#include "http/httpd.h"
#include "launcher/metrics/metrics.h"

enum crule_trigger_type {
	CRT_STARTUP,
	CRT_EVENT_COUNTER, /* also CPUUsage, GCHeapSize, ThreadpoolQueueLength */
	CRT_EVENT_METER,
	CRT_ASP_COUNT,
	CRT_ASP_DURATION,
	CRT_ASP_STATUS,
};

enum crule_filter_key { CRF_PID, CRF_NAME, CRF_CMDLINE, CRF_ENTRYPOINT };

struct crule_filter {
	enum crule_filter_key key;
	char *value;
	bool contains; /* MatchType Contains; else Exact (both case-insensitive) */
};

struct crule_trigger {
	enum crule_trigger_type type;
	const char *type_name; /* as dotnet-monitor names it (static) */
	char *provider, *name; /* EventCounter: ProviderName, CounterName; EventMeter: MeterName, InstrumentName */
	bool has_gt, has_lt;
	double gt, lt;
	int percentile; /* EventMeter HistogramPercentile, or -1 */
	long long window_ms; /* SlidingWindowDuration */
	/* ASP.NET triggers */
	unsigned count;                 /* RequestCount / ResponseCount */
	long long request_duration_ms;  /* AspNetRequestDuration's RequestDuration */
	char **include, **exclude;
	size_t n_include, n_exclude;
	struct aspnet_status_range *status; /* StatusCodes */
	size_t n_status;
};

enum crule_action_type {
	CRA_DUMP,
	CRA_TRACE,
	CRA_GCDUMP,
	CRA_LOGS,
	CRA_STACKS,
	CRA_LIVEMETRICS,
	CRA_EXECUTE,
	CRA_EXCEPTIONS,
};

struct crule_kv {
	char *key, *value;
};

struct crule_action {
	enum crule_action_type type;
	const char *type_name; /* static */
	char *name;            /* Name, for $(Actions.NAME.EgressPath); NULL */
	bool wait;             /* WaitForCompletion */
	const struct egress_provider *egress; /* borrowed from the configuration */
	long long duration_ms;
	int format;                       /* dump type, logs or stacks format */
	char *profile;                    /* CollectTrace Profile */
	char *providers_json;             /* CollectTrace Providers (+RequestRundown, BufferSizeMegabytes) as /trace's body */
	char *stop_provider, *stop_event; /* CollectTrace StoppingEvent */
	struct crule_kv *stop_payload;    /* its PayloadFilter */
	size_t n_stop_payload;
	char *metrics_json;               /* CollectLiveMetrics as /livemetrics' body */
	char *logs_json;                  /* CollectLogs as /logs' body */
	char *exc_json;                   /* CollectExceptions' Filters as POST /exceptions' body, or NULL */
	char *path, *args;                /* Execute */
	bool ignore_exit;
};

struct crule_limits {
	unsigned action_count;    /* ActionCount (5) */
	long long window_ms;      /* ActionCountSlidingWindowDuration; 0 = the rule's whole life */
	long long rule_duration_ms; /* RuleDuration; 0 = none */
};

struct crule {
	char *name;
	struct crule_filter *filters;
	size_t n_filters;
	struct crule_trigger trig;
	struct crule_action *actions;
	size_t n_actions;
	struct crule_limits lim;
};

struct crule_set {
	struct crule *r;
	size_t n;
};

/* What binding the settings needs to know of the agent. */
struct crule_env {
	const struct egress_provider *egress; /* the configured providers */
	size_t n_egress;
	bool sandbox;          /* the agent's seccomp sandbox is on: Execute cannot run */
	unsigned interval_s;   /* GlobalCounter:IntervalSeconds */
};

/*
 * Bind the CollectionRules, CollectionRuleDefaults and Templates sections of c->tree into *out (new; free with crule_set_free).
 * 0, or DP_EINVAL / DP_EUNSUPPORTED / DP_ETOOBIG with em naming the setting by its
 * full path and where it came from.
 */
int crules_parse(const struct launch_config *c, const struct crule_env *env, struct crule_set *out,
		 struct err_msg *em);
void crule_set_free(struct crule_set *s); /* accepts a zeroed set */
/* Keep only the rules keep(rule, ctx) says yes to (in order); the others are freed. */
void crule_set_keep(struct crule_set *s, bool (*keep)(const struct crule *r, void *ctx), void *ctx);

/* .NET's TimeSpan text ("00:00:10", "1:00:00", "1.00:00:00", "2" = days) in ms; -1 when it is not one. */
long long crules_timespan(const char *s);
/* A TimeSpan as .NET writes it ("00:01:00", "1.02:03:04", fraction when there is one). */
void crules_timespan_text(char *out, size_t n, long long ms);

/*
 * The counters a rule set needs from each runtime's session, added to sel
 * (EventCounter providers and meters by name), and whether the ASP.NET
 * request events are needed.
 */
void crules_metrics_needs(const struct crule_set *s, struct metrics_selection *sel, bool *aspnet);
/* An ASP.NET trigger's settings as aspnet_req.h's trigger takes them (borrowed from t). */
void crules_asp_config(const struct crule_trigger *t, struct aspnet_trig_config *out);

/*
 * An EventCounter/EventMeter trigger's run of readings (dotnet-monitor's
 * EventCounterTriggerImpl): a reading v at ts (ms) that satisfies t's
 * thresholds extends the run, one that does not breaks it, and so does a gap
 * of more than 1.5 intervals; the trigger is satisfied once the run covers
 * SlidingWindowDuration, counted from the start of its first interval.
 */
struct crule_run {
	bool have;
	int64_t latest_ms, target_ms;
};
bool crules_counter_step(struct crule_run *run, const struct crule_trigger *t, unsigned interval_s, double v,
			 int64_t ts_ms);

/* ---- the engine ---- */
struct crules;
struct port;
struct captures;
struct ops;

struct crules_config {
	struct port *port;           /* borrowed */
	struct captures *captures;   /* borrowed */
	struct ops *ops;             /* borrowed */
	const struct crule_set *set; /* borrowed: outlives the engine */
	unsigned interval_s;         /* counters' interval (EventCounter triggers' gap rule) */
	const char *state_dir;       /* where each runtime's rule history is kept across agent restarts (the
					dumps volume); NULL = not kept */
};

/* Start the engine (a thread watching the port); NULL when the set is empty. */
struct crules *crules_start(const struct crules_config *cfg);
/* Stop it: running action lists are cancelled (their operations too) and waited for. Accepts NULL. */
void crules_free(struct crules *e);
/* A counters reading of runtime cookie (metrics.h's listener; any thread). */
void crules_reading(void *ctx, const uint8_t cookie[16], const struct msample *r, int64_t ts_ms);
/* An event of runtime cookie's counters session that is not a reading (the ASP.NET request events). */
void crules_event(void *ctx, const uint8_t cookie[16], const struct nettrace_event *e, const struct evpayload *p,
		  int64_t ts_ms);
/* GET /collectionrules and /collectionrules/{name} for the process r selects (e NULL: no rules). */
void crules_route(struct crules *e, struct httpd_req *r);

#endif
