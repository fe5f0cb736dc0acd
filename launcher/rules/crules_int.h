/*
 * crules_int.h - what the collection rules' engine files share (crules.c,
 * crules_match.c, crules_act.c, crules_hist.c, crules_api.c): an instance
 * (one rule on one runtime) and the engine, and who calls whom.
 *
 * The files are layered, none calls one above it: crules.c (instances,
 * triggers, the watcher) uses the others; crules_api.c (/collectionrules)
 * reads instances through crules.c; crules_match.c (filters),
 * crules_act.c (the action list) and crules_hist.c (history across
 * restarts) call nothing of the engine. Everything about an instance is
 * under the engine's mutex (mu) unless a prototype says otherwise.
 */
#ifndef DP_CRULES_INT_H
#define DP_CRULES_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "crules.h"
#include "launcher/runtime/port.h"

#define STATE_CLAIM_MS 60000 /* a history no runtime came back for within this is removed */

enum istate { IS_RUNNING, IS_EXECUTING, IS_THROTTLED, IS_FINISHED };

/* A state as dotnet-monitor names it. */
static inline const char *crules_state_name(enum istate s)
{
	static const char *const names[] = { "Running", "ActionExecuting", "Throttled", "Finished" };

	return names[s];
}

/* dotnet-monitor's stateReason sentences (Strings.resx), so clients that show them read the same. */
#define REASON_RUNNING "This collection rule is active and waiting for its triggering conditions to be satisfied."
#define REASON_EXECUTING                                                                                             \
	"This collection rule has had its triggering conditions satisfied and is currently executing its action list."
#define REASON_THROTTLED                                                                                             \
	"This collection rule is temporarily throttled because the ActionCountLimit has been reached within the "     \
	"ActionCountSlidingWindowDuration."
#define REASON_STARTUP "The collection rule will no longer trigger because the Startup trigger only executes once."
#define REASON_COUNT "The collection rule will no longer trigger because the ActionCount was reached."
#define REASON_DURATION "The collection rule will no longer trigger because the RuleDuration limit was reached."

struct inst {
	struct crules *e;
	const struct crule *r;
	uint8_t cookie[16];
	uint64_t pid;
	char uid[37];
	char *pname;
	enum istate state;
	const char *reason;
	long long start_ms;       /* monotonic: when the rule began on this runtime */
	long long *exec;          /* monotonic start of each action list within the window (oldest first) */
	size_t n_exec;
	unsigned lifetime;
	/* the trigger */
	struct crule_run run;             /* EventCounter/EventMeter: the run of satisfying readings */
	struct aspnet_trig *asp;          /* the ASP.NET triggers */
	/* the action list */
	pthread_t th;
	bool th_started;
	atomic_bool th_done, cancel;
	bool finish_after; /* Startup, or RuleDuration passed while the actions ran */
	const char *finish_reason;
	bool seen;
};

/* A runtime's command line as the rules' filters see it (asked again until Main has run). */
struct seen_rt {
	uint8_t cookie[16];
	char *cmdline;
	long long first_ms, next_ms;
	bool final;
	bool seen;
};

struct crules {
	struct crules_config cfg;
	struct seen_rt *rt;
	size_t n_rt;
	long long started_ms;
	char **unclaimed; /* history files found at the start, not yet claimed by a runtime */
	size_t n_unclaimed;
	pthread_mutex_t mu;
	struct inst **in;
	size_t n;
	struct watcher *watcher;
};

/* ---- crules_match.c: the filters ---- */

/* Whether p (command line cmdline, NULL for none) matches every filter of r. */
bool crules_filters_match(const struct crule *r, const struct port_runtime *p, const char *cmdline);
/* Filters other than ProcessId need the runtime's ProcessInfo. */
bool crules_needs_info(const struct crule *r);
/* Asks p's command line again where it is not whole yet (the watcher's thread, without mu: an IPC round trip). */
void crules_cmdline_refresh(struct crules *e, const struct port_runtime *p, long long now);
/* The command line the filters see for p (borrowed); *ready false while it is asked again. Under mu. */
const char *crules_cmdline_of(struct crules *e, const struct port_runtime *p, bool *ready);

/* ---- crules_act.c: the action list ---- */

/* Runs in's action list to its end, each action logged (in's own thread, without mu; looks at in->cancel). */
void crules_act_run(struct inst *in);

/* ---- crules_hist.c: history across restarts (under mu; nothing when no state directory is set) ---- */

/* The history file of runtime uid; new. */
char *crules_hist_path(const struct crules *e, const char *uid);
/* Writes the history of every rule on of's runtime (temporary file, renamed over the old one). */
void crules_hist_save(struct crules *e, const struct inst *of);
/* Loads the history of in's rule on its runtime, as an earlier agent left it, and claims its file. */
void crules_hist_load(struct crules *e, struct inst *in);
/* Notes the history files an earlier agent left (before the watcher starts). */
void crules_hist_scan(struct crules *e);
/* Removes the ones no runtime claimed. */
void crules_hist_sweep(struct crules *e);

/* ---- crules.c, for crules_api.c ---- */

/* Executions older than the sliding window forgotten; whether the window holds ActionCount of them. Under mu. */
bool crules_throttled(struct inst *in, long long now);

#endif
