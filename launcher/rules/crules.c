/*
 * crules.c - the collection rules' engine (crules.h).
 *
 * One instance per rule and attached runtime its filters match, made by a
 * watcher thread that looks at the port every 250 ms (which also ends
 * RuleDuration, lifts throttling and joins finished action lists). Readings
 * and events arrive on the counters sessions' threads (metrics.h's
 * listener) and go to the instances of their runtime under the one mutex.
 *
 * States and limits are dotnet-monitor's (CollectionRulePipelineState):
 * Running until the trigger is satisfied; then, unless ActionCount actions
 * lists ran within ActionCountSlidingWindowDuration (Throttled), the action
 * list runs (ActionExecuting) on a thread of its own, its captures through
 * capture_run to their egress providers, one after another, each waited for
 * unless WaitForCompletion is false; back to Running with a fresh trigger,
 * or Finished: after a Startup trigger's one run, when ActionCount is
 * reached without a sliding window, or at RuleDuration.
 *
 * What limits a rule outlives the agent: each runtime's history (action
 * lists run, when, and whether the rule finished) is written to
 * STATE_DIR/.diagport-rules-UID whenever it changes, before the actions
 * run, so an agent restarted under a live app (its container, in the same
 * pod, with the same dumps volume) neither repeats a Startup rule nor
 * exceeds an ActionCount the old agent reached: at most once, never twice.
 * A trigger's half-seen window is not kept (it starts again from fresh
 * readings). A runtime that goes away takes its file with it; files no
 * runtime claims within a minute of the start are removed.
 */
#include "crules.h"

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "launcher/capture/capture.h"
#include "buf.h"
#include "clock.h"
#include "launcher/fsutil.h"
#include "log.h"
#include "mem.h"
#include "launcher/capture/ops.h"
#include "launcher/runtime/port.h"
#include "launcher/runtime/proc.h"
#include "launcher/runtime/target.h"

#define WATCH_MS 250
#define SLOT_RETRY_MS 500     /* an action whose kind's slot is taken (someone else's dump) tries again */
#define SLOT_RETRY_FOR_MS 120000
#define WAIT_TICK_MS 250      /* an action list looks at its cancel flag this often while it waits */
#define MAX_EXEC_ARGS 64
#define MAX_OUTPUT 4096
#define MAX_ACTIONS_OUT 16 /* a rule's actions (crules_parse.c's cap) */
#define CMDLINE_ASK_MS 1000   /* a runtime whose command line is its host's path alone is asked again this often, */
#define CMDLINE_ASK_FOR_MS 15000 /* until Main runs (the whole line) or for this long */
#define MAX_SEEN 256
#define STATE_PREFIX ".diagport-rules-"
#define STATE_MAX_BYTES (256 << 10)
#define STATE_CLAIM_MS 60000 /* a history no runtime came back for within this is removed */
#define STATE_MAX_RUNS 1000  /* per rule: more than any ActionCount a window could need is dropped */

enum istate { IS_RUNNING, IS_EXECUTING, IS_THROTTLED, IS_FINISHED };

static const char *const state_names[] = { "Running", "ActionExecuting", "Throttled", "Finished" };

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
	pthread_t watcher;
	bool watching;
	pthread_mutex_t stop_mu;
	pthread_cond_t stop_cv;
	bool stopping;
};

static void state_save(struct crules *e, const struct inst *of);

/* ---- filters ---- */

static bool text_match(const char *have, size_t len, const struct crule_filter *f)
{
	if (f->contains) {
		size_t n = strlen(f->value);

		for (size_t i = 0; i + n <= len; i++)
			if (strncasecmp(have + i, f->value, n) == 0)
				return true;
		return n == 0;
	}
	return strlen(f->value) == len && strncasecmp(have, f->value, len) == 0;
}

/* Whether p (command line cmdline) matches every filter (dotnet-monitor's rule: all of them, case-insensitive). */
static bool filters_match(const struct crule *r, const struct port_runtime *p, const char *cmdline)
{
	for (size_t i = 0; i < r->n_filters; i++) {
		const struct crule_filter *f = &r->filters[i];
		const char *cl = cmdline ? cmdline : "";
		size_t len;
		const char *name;
		char pid[24];

		switch (f->key) {
		case CRF_PID:
			snprintf(pid, sizeof(pid), "%llu", (unsigned long long)p->pid);
			if (!text_match(pid, strlen(pid), f))
				return false;
			break;
		case CRF_NAME: { /* the name /processes shows, or the program's file name (what `ps` calls it) */
			const char *sp = strchr(cl, ' '), *sl = memrchr(cl, '/', sp ? (size_t)(sp - cl) : strlen(cl));
			const char *prog = sl ? sl + 1 : cl;

			name = target_name(p, &len);
			if (!text_match(name, len, f) && !text_match(prog, strcspn(prog, " "), f))
				return false;
			break;
		}
		case CRF_CMDLINE:
			if (!text_match(cl, strlen(cl), f))
				return false;
			break;
		case CRF_ENTRYPOINT:
			name = p->info.assembly ? p->info.assembly : "";
			if (!text_match(name, strlen(name), f))
				return false;
			break;
		}
	}
	return true;
}

/*
 * The command line filters see for runtime p: the port's copy, asked at
 * attach, is the host's path alone when Main had not run yet ("dotnet", no
 * webapp.dll); such a runtime is asked again every second for 15 s, and
 * filters that read the command line wait for that (*ready false) meanwhile.
 */
static struct seen_rt *seen_find(struct crules *e, const uint8_t cookie[16])
{
	for (size_t i = 0; i < e->n_rt; i++)
		if (memcmp(e->rt[i].cookie, cookie, 16) == 0)
			return &e->rt[i];
	return NULL;
}

/* Ask again where the line is not whole yet (the watcher's thread, without the lock: an IPC round trip). */
static void cmdline_refresh(struct crules *e, const struct port_runtime *p, long long now)
{
	struct seen_rt *s = seen_find(e, p->cookie);
	const char *cl = p->info.command_line ? p->info.command_line : "";

	if (!p->have_info)
		return;
	if (s == NULL) {
		if (e->n_rt == MAX_SEEN)
			return;
		e->rt = mem_realloc(e->rt, (e->n_rt + 1) * sizeof(*e->rt));
		s = &e->rt[e->n_rt++];
		*s = (struct seen_rt){ .first_ms = now, .cmdline = mem_strdup(cl), .final = strchr(cl, ' ') != NULL };
		memcpy(s->cookie, p->cookie, 16);
	}
	if (!s->final && now >= s->next_ms) {
		struct ipc_process_info fresh = { 0 };

		s->next_ms = now + CMDLINE_ASK_MS;
		if (proc_info(e->cfg.port, p->cookie, 500, &fresh) == 0 && fresh.command_line) {
			free(s->cmdline);
			s->cmdline = mem_strdup(fresh.command_line);
		}
		ipc_process_info_free(&fresh);
		s->final = strchr(s->cmdline, ' ') != NULL || now - s->first_ms >= CMDLINE_ASK_FOR_MS;
	}
}

static const char *cmdline_of(struct crules *e, const struct port_runtime *p, bool *ready)
{
	struct seen_rt *s = seen_find(e, p->cookie);

	*ready = s == NULL || s->final; /* past MAX_SEEN: the port's copy */
	return s ? s->cmdline : p->info.command_line;
}

/* Filters other than ProcessId need the runtime's ProcessInfo. */
static bool needs_info(const struct crule *r)
{
	for (size_t i = 0; i < r->n_filters; i++)
		if (r->filters[i].key != CRF_PID)
			return true;
	return false;
}

/* ---- state, under mu ---- */

static void log_inst(const char *msg, const char *event, const struct inst *in, const char *k, const char *v)
{
	log_info(msg, LOG_STR("event", event), LOG_STR("rule", in->r->name), LOG_UINT("pid", in->pid),
		 LOG_STR("uid", in->uid), LOG_STR(k ? k : "reason", v));
}

static void set_state(struct inst *in, enum istate s, const char *reason)
{
	in->state = s;
	in->reason = reason;
}

static void finish(struct inst *in, const char *reason)
{
	set_state(in, IS_FINISHED, reason);
	state_save(in->e, in);
	log_inst("collection rule finished", "rule-finished", in, "reason", reason);
}

/* Executions older than the sliding window forgotten; whether the window holds ActionCount of them. */
static bool throttled(struct inst *in, long long now)
{
	const struct crule_limits *l = &in->r->lim;
	size_t k = 0;

	if (l->window_ms == 0)
		return false;
	while (k < in->n_exec && in->exec[k] < now - l->window_ms)
		k++;
	memmove(in->exec, in->exec + k, (in->n_exec - k) * sizeof(*in->exec));
	in->n_exec -= k;
	return in->n_exec >= l->action_count;
}

static void trigger_reset(struct inst *in)
{
	in->run.have = false;
	if (in->asp)
		aspnet_trig_reset(in->asp);
}

static void *run_actions(void *arg);

/* The trigger is satisfied: run the action list, or say why not. */
static void fire(struct inst *in)
{
	long long now = clock_ms();

	if (in->state == IS_FINISHED || in->state == IS_EXECUTING)
		return;
	if (in->th_started) { /* the last list's thread, past its last lock: it ends at once */
		pthread_join(in->th, NULL);
		in->th_started = false;
	}
	log_inst("collection rule triggered", "rule-triggered", in, "trigger", in->r->trig.type_name);
	if (throttled(in, now)) {
		if (in->state != IS_THROTTLED)
			log_inst("collection rule throttled", "rule-throttled", in, "reason", REASON_THROTTLED);
		set_state(in, IS_THROTTLED, REASON_THROTTLED);
		trigger_reset(in);
		return;
	}
	in->exec = mem_realloc(in->exec, (in->n_exec + 1) * sizeof(*in->exec));
	in->exec[in->n_exec++] = now;
	in->lifetime++;
	set_state(in, IS_EXECUTING, REASON_EXECUTING);
	state_save(in->e, in); /* before the actions: an agent that dies while they run does not run them again */
	atomic_store(&in->th_done, false);
	in->th_started = pthread_create(&in->th, NULL, run_actions, in) == 0;
	if (!in->th_started) {
		atomic_store(&in->th_done, true);
		log_inst("collection rule action failed", "rule-action-failed", in, "error", "cannot start a thread");
	}
}

/* The action list ended (its own thread, under mu): Running with a fresh trigger, or Finished. */
static void actions_ended(struct inst *in)
{
	if (in->finish_after) {
		finish(in, in->finish_reason);
		return;
	}
	if (in->r->lim.window_ms == 0 && in->n_exec >= in->r->lim.action_count) {
		finish(in, REASON_COUNT);
		return;
	}
	set_state(in, IS_RUNNING, REASON_RUNNING);
	trigger_reset(in);
}

/* ---- triggers ---- */

bool crules_counter_step(struct crule_run *run, const struct crule_trigger *t, unsigned interval_s, double v,
			 int64_t ts_ms)
{
	int64_t interval = (int64_t)interval_s * 1000;

	if ((t->has_gt && !(v > t->gt)) || (t->has_lt && !(v < t->lt))) {
		run->have = false;
		return false;
	}
	if (!run->have || run->latest_ms + interval * 3 / 2 < ts_ms) {
		run->have = true;
		run->target_ms = ts_ms - interval + t->window_ms;
	}
	run->latest_ms = ts_ms;
	return run->latest_ms >= run->target_ms;
}

/* A histogram's percentile from "0.5=1.2;0.95=3;0.99=4"; false when it is not there. */
static bool quantile(const char *q, int pct, double *out)
{
	while (q && *q) {
		char *end;
		double k = strtod(q, &end), v;

		if (end == q || *end != '=')
			return false;
		q = end + 1;
		v = strtod(q, &end);
		if (end == q)
			return false;
		if ((int)(k * 100 + 0.5) == pct) {
			*out = v;
			return true;
		}
		q = end + (*end == ';');
	}
	return false;
}

void crules_reading(void *ctx, const uint8_t cookie[16], const struct msample *r, int64_t ts_ms)
{
	struct crules *e = ctx;

	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];
		const struct crule_trigger *t = &in->r->trig;
		double v = r->value;

		if (memcmp(in->cookie, cookie, 16) != 0 || (in->state != IS_RUNNING && in->state != IS_THROTTLED))
			continue;
		if (!((t->type == CRT_EVENT_COUNTER && !r->meter) || (t->type == CRT_EVENT_METER && r->meter)) ||
		    strcasecmp(t->provider, r->provider) != 0 || strcmp(t->name, r->name) != 0)
			continue;
		if (r->kind == MS_SUMMARY && (t->percentile < 0 || !quantile(r->quantiles, t->percentile, &v)))
			continue;
		if (r->kind != MS_SUMMARY && t->percentile >= 0)
			continue;
		if (crules_counter_step(&in->run, t, e->cfg.interval_s, v, ts_ms))
			fire(in);
	}
	pthread_mutex_unlock(&e->mu);
}

void crules_event(void *ctx, const uint8_t cookie[16], const struct nettrace_event *ev, const struct evpayload *p,
		  int64_t ts_ms)
{
	struct crules *e = ctx;
	struct aspnet_req req;

	if (aspnet_req_event(ev, p, &req) != 1)
		return;
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];

		if (in->asp == NULL || memcmp(in->cookie, cookie, 16) != 0 ||
		    (in->state != IS_RUNNING && in->state != IS_THROTTLED))
			continue;
		if (aspnet_trig_feed(in->asp, &req, ts_ms))
			fire(in);
	}
	pthread_mutex_unlock(&e->mu);
}

/* ---- the action list ---- */

/* The runtime's snapshot now (info new), or DP_ENOTFOUND when it has gone. */
static int runtime_now(struct crules *e, const uint8_t cookie[16], struct port_runtime *out)
{
	struct port_runtime *rt;
	size_t n = port_list(e->cfg.port, &rt);
	int rc = DP_ENOTFOUND;

	for (size_t i = 0; i < n; i++)
		if (memcmp(rt[i].cookie, cookie, 16) == 0) {
			*out = rt[i];
			memset(&rt[i].info, 0, sizeof(rt[i].info)); /* moved out */
			rc = 0;
			break;
		}
	port_list_free(rt, n);
	return rc;
}

/* The capture an action takes, from the same parsers the HTTP API uses. */
static int action_capture(struct inst *in, const struct crule_action *a, struct capture *c, struct err_msg *em)
{
	unsigned interval = in->e->cfg.interval_s;
	int rc = 0;

	memset(c, 0, sizeof(*c));
	c->egress = a->egress;
	c->duration_ms = a->duration_ms;
	c->format = a->format;
	c->tags = mem_strdup(in->r->name);
	c->caller = mem_printf("collection rule %s", in->r->name);
	switch (a->type) {
	case CRA_DUMP:
		c->kind = CAPTURE_DUMP;
		break;
	case CRA_GCDUMP:
		c->kind = CAPTURE_GCDUMP;
		c->format = CAPTURE_GCDUMP_FILE; /* the .gcdump file, as dotnet-monitor's CollectGCDump */
		break;
	case CRA_STACKS:
		c->kind = CAPTURE_STACKS;
		break;
	case CRA_TRACE:
		c->kind = CAPTURE_TRACE;
		rc = a->profile ? trace_config_profile(a->profile, interval, &c->session, em) :
				  trace_config_json(a->providers_json, strlen(a->providers_json), &c->session, em);
		if (a->stop_provider) {
			struct trace_stop_event *se = mem_zalloc(sizeof(*se));

			se->provider = mem_strdup(a->stop_provider);
			se->event = mem_strdup(a->stop_event);
			se->keys = mem_zalloc((a->n_stop_payload ? a->n_stop_payload : 1) * sizeof(*se->keys));
			se->values = mem_zalloc((a->n_stop_payload ? a->n_stop_payload : 1) * sizeof(*se->values));
			for (size_t i = 0; i < a->n_stop_payload; i++) {
				se->keys[i] = mem_strdup(a->stop_payload[i].key);
				se->values[i] = mem_strdup(a->stop_payload[i].value);
			}
			se->n = a->n_stop_payload;
			c->stop_event = se;
		}
		break;
	case CRA_LOGS:
		c->kind = CAPTURE_LOGS;
		if ((rc = logs_filter_json(a->logs_json, strlen(a->logs_json), &c->filter, em)) == 0)
			rc = logs_trace_config(&c->filter, &c->session, em);
		break;
	case CRA_LIVEMETRICS: {
		uint8_t id[8] = { 0 };
		char client[64];

		c->kind = CAPTURE_LIVEMETRICS;
		if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
			DP_FATAL("getrandom failed");
		snprintf(client, sizeof(client), "diagport-rule-%02x%02x%02x%02x%02x%02x%02x%02x", id[0], id[1], id[2],
			 id[3], id[4], id[5], id[6], id[7]);
		if ((rc = metrics_selection_json(a->metrics_json, strlen(a->metrics_json), &c->sel, em)) == 0)
			rc = metrics_trace_config(&c->sel, interval, client, &c->session, em);
		break;
	}
	case CRA_EXECUTE:
		return DP_EINTERNAL;
	}
	if (rc == 0)
		rc = runtime_now(in->e, in->cookie, &c->target);
	if (rc == DP_ENOTFOUND)
		err_set(em, rc, "the process has gone");
	if (rc != 0)
		capture_free(c);
	return rc;
}

struct outputs {
	char *name[MAX_ACTIONS_OUT];
	char *egress_path[MAX_ACTIONS_OUT];
	int exit_code[MAX_ACTIONS_OUT];
	bool has_exit[MAX_ACTIONS_OUT];
};

static void outputs_free(struct outputs *o)
{
	for (size_t i = 0; i < MAX_ACTIONS_OUT; i++) {
		free(o->egress_path[i]);
		o->egress_path[i] = NULL;
	}
}

/*
 * s with each $(Actions.NAME.EgressPath) / $(Actions.NAME.ExitCode) of an
 * earlier action replaced (dotnet-monitor's action outputs); new. NULL with
 * em when a reference names no output there is.
 */
static char *substitute(const struct crule *r, const struct outputs *o, size_t upto, const char *s,
			struct err_msg *em)
{
	struct buf b;
	const char *p = s;

	buf_init(&b, (size_t)MAX_OUTPUT * 4);
	while (*p) {
		const char *ref = strstr(p, "$(Actions."), *end, *dot;
		size_t i;

		if (ref == NULL) {
			buf_puts(&b, p);
			break;
		}
		buf_append(&b, p, (size_t)(ref - p));
		end = strchr(ref, ')');
		dot = end ? memrchr(ref + 10, '.', (size_t)(end - ref - 10)) : NULL;
		if (end == NULL || dot == NULL) {
			err_set(em, DP_EINVAL, "'%.64s' is not $(Actions.NAME.OUTPUT)", ref);
			goto bad;
		}
		for (i = 0; i < upto; i++)
			if (r->actions[i].name && strlen(r->actions[i].name) == (size_t)(dot - ref - 10) &&
			    strncasecmp(r->actions[i].name, ref + 10, (size_t)(dot - ref - 10)) == 0)
				break;
		if (i < upto && (size_t)(end - dot - 1) == 10 && strncasecmp(dot + 1, "EgressPath", 10) == 0 &&
		    o->egress_path[i])
			buf_puts(&b, o->egress_path[i]);
		else if (i < upto && (size_t)(end - dot - 1) == 8 && strncasecmp(dot + 1, "ExitCode", 8) == 0 &&
			 o->has_exit[i])
			buf_printf(&b, "%d", o->exit_code[i]);
		else {
			err_set(em, DP_EINVAL, "%.*s names no output of an earlier action that waited for completion",
				(int)(end - ref + 1), ref);
			goto bad;
		}
		p = end + 1;
	}
	if (b.len > MAX_OUTPUT) {
		err_set(em, DP_ETOOBIG, "longer than %d bytes once its $(Actions...) are replaced", MAX_OUTPUT);
		goto bad;
	}
	return b.data ? b.data : mem_strdup("");
bad:
	buf_free(&b);
	return NULL;
}

/* Arguments split as .NET splits ProcessStartInfo.Arguments: blanks apart, "double quotes" keep them, \" is a quote. */
static size_t split_args(char *s, char **argv, size_t cap)
{
	size_t n = 0;
	char *w = s;

	while (*s && n < cap) {
		bool quoted = false;

		while (*s == ' ' || *s == '\t')
			s++;
		if (*s == '\0')
			break;
		argv[n++] = w;
		for (; *s && (quoted || (*s != ' ' && *s != '\t')); s++) {
			if (*s == '\\' && s[1] == '"')
				*w++ = *++s;
			else if (*s == '"')
				quoted = !quoted;
			else
				*w++ = *s;
		}
		if (*s)
			s++;
		*w++ = '\0';
	}
	return n;
}

/* Execute: the program run with signals as a new process expects them, waited for; killed when cancelled. */
static int execute(struct inst *in, const struct crule_action *a, const char *path, const char *args, int *status,
		   struct err_msg *em)
{
	char *argbuf = mem_strdup(args ? args : ""), *argv[MAX_EXEC_ARGS + 2];
	size_t argc = 1 + split_args(argbuf, argv + 1, MAX_EXEC_ARGS);
	posix_spawnattr_t attr;
	sigset_t none, all;
	extern char **environ;
	pid_t pid;
	int rc, ws;

	argv[0] = (char *)path;
	argv[argc] = NULL;
	sigemptyset(&none);
	sigfillset(&all);
	posix_spawnattr_init(&attr);
	posix_spawnattr_setsigmask(&attr, &none);
	posix_spawnattr_setsigdefault(&attr, &all);
	posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
	rc = posix_spawn(&pid, path, NULL, &attr, argv, environ);
	posix_spawnattr_destroy(&attr);
	free(argbuf);
	if (rc != 0)
		return err_set(em, DP_EIO, "cannot run %s: %s", path, strerror(rc));
	for (;;) {
		pid_t w = waitpid(pid, &ws, WNOHANG);

		if (w == pid)
			break;
		if (w < 0 && errno != EINTR)
			return err_set(em, DP_EIO, "waiting for %s: %s", path, strerror(errno));
		if (atomic_load(&in->cancel)) {
			kill(pid, SIGKILL);
			waitpid(pid, &ws, 0);
			return err_set(em, DP_ECANCELED, "%s was killed: the rule stopped", path);
		}
		usleep(WAIT_TICK_MS * 1000 / 5);
	}
	*status = WIFEXITED(ws) ? WEXITSTATUS(ws) : 128 + WTERMSIG(ws);
	if (*status != 0 && !a->ignore_exit)
		return err_set(em, DP_EIO, "%s exited with %d", path, *status);
	return 0;
}

/* Wait for operation id to end, looking at the cancel flag; 0 and its location, or why it did not succeed. */
static int wait_op(struct inst *in, const char *id, char **location, struct err_msg *em)
{
	for (;;) {
		char *loc = NULL, *err = NULL;
		int rc = ops_wait(in->e->cfg.ops, id, WAIT_TICK_MS, &loc, &err);

		if (rc == DP_ETIMEDOUT && !atomic_load(&in->cancel)) {
			free(err);
			continue;
		}
		if (rc == 0)
			*location = loc;
		else {
			err_set(em, rc, "%s", rc == DP_ETIMEDOUT ? "the rule stopped while it ran" :
					      err ? err : err_str(rc));
			free(loc);
		}
		free(err);
		return rc;
	}
}

/* One capture action: started (its kind's slot retried for a while), then waited for unless it need not be. */
static int capture_action(struct inst *in, const struct crule_action *a, char op_id[37], char **location,
			  struct err_msg *em)
{
	long long give_up = clock_ms() + SLOT_RETRY_FOR_MS;
	int rc;

	for (;;) {
		struct capture c;

		if ((rc = action_capture(in, a, &c, em)) != 0)
			return rc;
		if ((rc = capture_run(in->e->cfg.captures, &c, NULL, op_id)) != DP_ETOOBIG)
			break;
		if (clock_ms() >= give_up || atomic_load(&in->cancel))
			return err_set(em, rc, "another %s is still being taken (the agent's limit for its kind)",
				       a->type_name);
		usleep(SLOT_RETRY_MS * 1000);
	}
	if (rc != 0)
		return err_set(em, rc, "the capture did not start: %s", err_str(rc));
	return a->wait ? wait_op(in, op_id, location, em) : 0;
}

static void *run_actions(void *arg)
{
	struct inst *in = arg;
	const struct crule *r = in->r;
	struct outputs o;
	char pending[MAX_ACTIONS_OUT][37];
	size_t n_pending = 0;
	struct err_msg em = { "" };
	int rc = 0;

	memset(&o, 0, sizeof(o));
	for (size_t i = 0; i < r->n_actions && rc == 0; i++) {
		const struct crule_action *a = &r->actions[i];
		char op_id[37] = "", *loc = NULL, idx[24];

		snprintf(idx, sizeof(idx), "%zu", i);
		log_info("collection rule action started", LOG_STR("event", "rule-action-started"), LOG_STR("rule", r->name),
			 LOG_UINT("pid", in->pid), LOG_STR("action", a->type_name), LOG_STR("index", idx));
		if (a->type == CRA_EXECUTE) {
			char *path = substitute(r, &o, i, a->path, &em), *args = NULL;
			int status = 0;

			if (path == NULL || (a->args && (args = substitute(r, &o, i, a->args, &em)) == NULL))
				rc = DP_EINVAL;
			else
				rc = execute(in, a, path, args, &status, &em);
			o.exit_code[i] = status;
			o.has_exit[i] = rc == 0;
			free(path);
			free(args);
		} else {
			rc = capture_action(in, a, op_id, &loc, &em);
			if (rc == 0 && !a->wait)
				snprintf(pending[n_pending++], 37, "%s", op_id);
			o.egress_path[i] = loc;
		}
		if (rc == 0)
			log_info("collection rule action completed", LOG_STR("event", "rule-action-completed"),
				 LOG_STR("rule", r->name), LOG_UINT("pid", in->pid), LOG_STR("action", a->type_name),
				 LOG_STR("index", idx), LOG_STR("operation", op_id[0] ? op_id : NULL),
				 LOG_STR("egressPath", loc));
		else
			log_warn("collection rule action failed", LOG_STR("event", "rule-action-failed"),
				 LOG_STR("rule", r->name), LOG_UINT("pid", in->pid), LOG_STR("action", a->type_name),
				 LOG_STR("index", idx), LOG_STR("error", em.text));
	}
	for (size_t i = 0; i < n_pending; i++) { /* the ones not waited for, before the list counts as done */
		char *loc = NULL;

		if (wait_op(in, pending[i], &loc, &em) != 0)
			log_warn("collection rule action failed", LOG_STR("event", "rule-action-failed"),
				 LOG_STR("rule", r->name), LOG_UINT("pid", in->pid), LOG_STR("operation", pending[i]),
				 LOG_STR("error", em.text));
		free(loc);
	}
	outputs_free(&o);
	pthread_mutex_lock(&in->e->mu); /* the state says so at once, not at the watcher's next look */
	actions_ended(in);
	pthread_mutex_unlock(&in->e->mu);
	atomic_store(&in->th_done, true);
	return NULL;
}

/* ---- history across restarts (under mu) ---- */

static char *state_path(const struct crules *e, const char *uid)
{
	return mem_printf("%s/" STATE_PREFIX "%s", e->cfg.state_dir, uid);
}

/* Write the history of every rule on runtime cookie (temporary file, renamed over the old one). */
static void state_save(struct crules *e, const struct inst *of)
{
	json_t *doc, *rules;
	char *path, *tmp, *text;
	long long mono = clock_ms(), wall = metrics_wall_ms();
	int fd;

	if (e->cfg.state_dir == NULL)
		return;
	doc = json_object();
	rules = json_object();
	json_object_set_new(doc, "pid", json_integer((json_int_t)of->pid));
	json_object_set_new(doc, "rules", rules);
	for (size_t i = 0; i < e->n; i++) {
		const struct inst *in = e->in[i];
		json_t *r, *runs;

		if (memcmp(in->cookie, of->cookie, 16) != 0)
			continue;
		r = json_object();
		runs = json_array();
		for (size_t k = 0; k < in->n_exec; k++)
			json_array_append_new(runs, json_integer(wall - (mono - in->exec[k])));
		json_object_set_new(r, "lifetime", json_integer(in->lifetime));
		json_object_set_new(r, "runs", runs);
		json_object_set_new(r, "finished", in->state == IS_FINISHED ? json_string(in->reason) : json_null());
		json_object_set_new(rules, in->r->name, r);
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	path = state_path(e, of->uid);
	/*
	 * The dumps directory is the app's too: a name of our own that nothing can have put there first
	 * (mkostemp's O_EXCL), not a fixed PATH.tmp the app could have made a symlink (we would write through
	 * it, as root perhaps) or a FIFO (we would block, holding mu, for ever). Its prefix is STATE_PREFIX:
	 * one a killed agent left is swept at the next start.
	 */
	tmp = mem_printf("%s.XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		log_warn("cannot keep the rules' history", LOG_STR("event", "warning"), LOG_STR("file", path),
			 LOG_STR("error", strerror(errno)));
	} else {
		bool ok = fs_write_all(fd, text, strlen(text)) == 0;

		ok = close(fd) == 0 && ok;
		if (!ok || rename(tmp, path) != 0) {
			log_warn("cannot keep the rules' history", LOG_STR("event", "warning"), LOG_STR("file", path),
				 LOG_STR("error", strerror(errno)));
			unlink(tmp);
		}
	}
	free(text);
	free(tmp);
	free(path);
}

/* The history of in's rule on its runtime, as an earlier agent left it (a file that does not read is ignored). */
static void state_load(struct crules *e, struct inst *in)
{
	char *path;
	json_t *doc, *r, *runs, *v;
	json_error_t je;
	long long mono = clock_ms(), wall = metrics_wall_ms();
	size_t i;

	if (e->cfg.state_dir == NULL)
		return;
	path = state_path(e, in->uid);
	for (i = 0; i < e->n_unclaimed; i++) /* claimed: kept while the runtime lives */
		if (e->unclaimed[i] && strcmp(e->unclaimed[i], path) == 0) {
			free(e->unclaimed[i]);
			e->unclaimed[i] = NULL;
		}
	{ /* capped: the dumps volume is the app's too */
		struct buf b;

		/* a regular file only: not a symlink to elsewhere, not a FIFO that would block us (under mu) */
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;

		buf_init(&b, STATE_MAX_BYTES);
		doc = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && buf_read_fd(&b, fd) == 0 && b.data ?
			      json_loadb(b.data, b.len, JSON_REJECT_DUPLICATES, &je) : NULL;
		if (fd >= 0)
			close(fd);
		buf_free(&b);
	}
	free(path);
	if (doc == NULL || (r = json_object_get(json_object_get(doc, "rules"), in->r->name)) == NULL) {
		json_decref(doc);
		return;
	}
	if (json_is_integer(v = json_object_get(r, "lifetime")) && json_integer_value(v) >= 0)
		in->lifetime = (unsigned)json_integer_value(v);
	runs = json_object_get(r, "runs");
	json_array_foreach(runs, i, v) {
		/* forged times: none in the future (a rule throttled for ever), none before the epoch (overflow) */
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > wall ||
		    in->n_exec == STATE_MAX_RUNS)
			continue;
		in->exec = mem_realloc(in->exec, (in->n_exec + 1) * sizeof(*in->exec));
		in->exec[in->n_exec++] = mono - (wall - (long long)json_integer_value(v));
	}
	if (json_is_string(v = json_object_get(r, "finished"))) {
		static const char *const reasons[] = { REASON_STARTUP, REASON_COUNT, REASON_DURATION };

		for (size_t k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++)
			if (strcmp(json_string_value(v), reasons[k]) == 0)
				set_state(in, IS_FINISHED, reasons[k]);
	}
	if (in->lifetime || in->state == IS_FINISHED)
		log_info("collection rule history kept", LOG_STR("event", "rule-history"), LOG_STR("rule", in->r->name),
			 LOG_UINT("pid", in->pid), LOG_UINT("lifetimeOccurrences", in->lifetime),
			 LOG_STR("state", state_names[in->state]));
	json_decref(doc);
}

/* The files of the runtimes an earlier agent saw: kept for STATE_CLAIM_MS for their runtimes to come back. */
static void state_scan(struct crules *e)
{
	DIR *d;
	struct dirent *de;

	if (e->cfg.state_dir == NULL || (d = opendir(e->cfg.state_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL && e->n_unclaimed < 4096)
		if (strncmp(de->d_name, STATE_PREFIX, strlen(STATE_PREFIX)) == 0) {
			e->unclaimed = mem_realloc(e->unclaimed, (e->n_unclaimed + 1) * sizeof(*e->unclaimed));
			e->unclaimed[e->n_unclaimed++] = mem_printf("%s/%s", e->cfg.state_dir, de->d_name);
		}
	closedir(d);
}

static void state_sweep(struct crules *e)
{
	for (size_t i = 0; i < e->n_unclaimed; i++)
		if (e->unclaimed[i]) {
			unlink(e->unclaimed[i]);
			free(e->unclaimed[i]);
		}
	free(e->unclaimed);
	e->unclaimed = NULL;
	e->n_unclaimed = 0;
}

/* ---- instances ---- */

static struct inst *inst_new(struct crules *e, const struct crule *r, const struct port_runtime *p)
{
	struct inst *in = mem_zalloc(sizeof(*in));
	size_t len;
	const char *name = target_name(p, &len);

	in->e = e;
	in->r = r;
	memcpy(in->cookie, p->cookie, 16);
	in->pid = p->pid;
	target_uid(p, in->uid);
	in->pname = mem_strndup(name, len);
	in->start_ms = clock_ms();
	set_state(in, IS_RUNNING, REASON_RUNNING);
	state_load(e, in);
	if (r->trig.type == CRT_ASP_COUNT || r->trig.type == CRT_ASP_DURATION || r->trig.type == CRT_ASP_STATUS) {
		struct aspnet_trig_config tc;
		struct err_msg em;

		crules_asp_config(&r->trig, &tc);
		if (aspnet_trig_new(&tc, &in->asp, &em) != 0) /* checked when the rule was read */
			DP_FATAL("collection rule %s: %s", r->name, em.text);
	}
	return in;
}

static void inst_free(struct inst *in)
{
	if (in->th_started) {
		atomic_store(&in->cancel, true);
		pthread_join(in->th, NULL);
	}
	aspnet_trig_free(in->asp);
	free(in->exec);
	free(in->pname);
	free(in);
}

/* Timers and finished action lists of one instance. Under mu. */
static void tick(struct inst *in, long long now)
{
	const struct crule_limits *l = &in->r->lim;

	if (in->th_started && atomic_load(&in->th_done)) { /* it set the state itself */
		pthread_join(in->th, NULL);
		in->th_started = false;
	}
	if (in->state == IS_FINISHED)
		return;
	if (l->rule_duration_ms && now - in->start_ms >= l->rule_duration_ms) {
		if (in->state == IS_EXECUTING) {
			in->finish_after = true;
			in->finish_reason = REASON_DURATION;
		} else {
			finish(in, REASON_DURATION);
			return;
		}
	}
	if (in->state == IS_THROTTLED && !throttled(in, now))
		set_state(in, IS_RUNNING, REASON_RUNNING);
	if (in->asp && in->state != IS_EXECUTING && aspnet_trig_heartbeat(in->asp, metrics_wall_ms()))
		fire(in);
}

static void watch_once(struct crules *e)
{
	struct port_runtime *rt;
	size_t n = port_list(e->cfg.port, &rt), k = 0;
	long long now = clock_ms();
	struct inst **gone = NULL;
	size_t n_gone = 0;
	bool filters = false;

	for (size_t r = 0; r < e->cfg.set->n; r++)
		filters = filters || needs_info(&e->cfg.set->r[r]);
	for (size_t i = 0; filters && i < n; i++)
		cmdline_refresh(e, &rt[i], now);
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < e->n; i++)
		e->in[i]->seen = false;
	for (size_t i = 0; i < n; i++)
		for (size_t r = 0; r < e->cfg.set->n; r++) {
			const struct crule *rule = &e->cfg.set->r[r];
			struct inst *in = NULL;

			for (size_t j = 0; j < e->n && !in; j++)
				if (e->in[j]->r == rule && memcmp(e->in[j]->cookie, rt[i].cookie, 16) == 0)
					in = e->in[j];
			if (in) {
				in->seen = true;
				continue;
			}
			if (needs_info(rule)) {
				bool ready = false;
				const char *cl;

				if (!rt[i].have_info)
					continue;
				cl = cmdline_of(e, &rt[i], &ready);
				if (!ready || !filters_match(rule, &rt[i], cl))
					continue;
			} else if (!filters_match(rule, &rt[i], NULL)) {
				continue;
			}
			in = inst_new(e, rule, &rt[i]);
			in->seen = true;
			e->in = mem_realloc(e->in, (e->n + 1) * sizeof(*e->in));
			e->in[e->n++] = in;
			log_inst("collection rule started", "rule-started", in, "trigger", rule->trig.type_name);
			if (rule->trig.type == CRT_STARTUP && in->state != IS_FINISHED) {
				in->finish_after = true;
				in->finish_reason = REASON_STARTUP;
				fire(in);
			}
		}
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];

		if (!in->seen) { /* its runtime went away: its actions are cancelled, it is forgotten */
			if (e->cfg.state_dir) {
				char *path = state_path(e, in->uid);

				unlink(path);
				free(path);
			}
			atomic_store(&in->cancel, true);
			gone = mem_realloc(gone, (n_gone + 1) * sizeof(*gone));
			gone[n_gone++] = in;
			continue;
		}
		tick(in, now);
		e->in[k++] = in;
	}
	e->n = k;
	k = 0;
	for (size_t i = 0; i < e->n_rt; i++) { /* the command lines of runtimes still here */
		bool here = false;

		for (size_t j = 0; j < n && !here; j++)
			here = memcmp(rt[j].cookie, e->rt[i].cookie, 16) == 0;
		if (here)
			e->rt[k++] = e->rt[i];
		else
			free(e->rt[i].cmdline);
	}
	e->n_rt = k;
	if (e->unclaimed && now - e->started_ms >= STATE_CLAIM_MS)
		state_sweep(e);
	pthread_mutex_unlock(&e->mu);
	for (size_t i = 0; i < n_gone; i++) /* joined outside the lock: an action list may be waiting for it */
		inst_free(gone[i]);
	free(gone);
	port_list_free(rt, n);
}

static void *watch_main(void *arg)
{
	struct crules *e = arg;

	pthread_mutex_lock(&e->stop_mu);
	while (!e->stopping) {
		struct timespec until;

		pthread_mutex_unlock(&e->stop_mu);
		watch_once(e);
		pthread_mutex_lock(&e->stop_mu);
		clock_deadline(&until, WATCH_MS);
		if (!e->stopping)
			pthread_cond_timedwait(&e->stop_cv, &e->stop_mu, &until);
	}
	pthread_mutex_unlock(&e->stop_mu);
	return NULL;
}

struct crules *crules_start(const struct crules_config *cfg)
{
	struct crules *e;

	if (cfg->set == NULL || cfg->set->n == 0)
		return NULL;
	e = mem_zalloc(sizeof(*e));
	e->cfg = *cfg;
	if (e->cfg.interval_s == 0)
		e->cfg.interval_s = METRICS_DEFAULT_INTERVAL_S;
	e->started_ms = clock_ms();
	state_scan(e);
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->stop_mu, NULL);
	pthread_cond_init(&e->stop_cv, NULL);
	e->watching = pthread_create(&e->watcher, NULL, watch_main, e) == 0;
	return e;
}

void crules_free(struct crules *e)
{
	if (e == NULL)
		return;
	if (e->watching) {
		pthread_mutex_lock(&e->stop_mu);
		e->stopping = true;
		pthread_cond_signal(&e->stop_cv);
		pthread_mutex_unlock(&e->stop_mu);
		pthread_join(e->watcher, NULL);
	}
	for (size_t i = 0; i < e->n; i++)
		inst_free(e->in[i]);
	free(e->in);
	for (size_t i = 0; i < e->n_unclaimed; i++)
		free(e->unclaimed[i]);
	free(e->unclaimed);
	for (size_t i = 0; i < e->n_rt; i++)
		free(e->rt[i].cmdline);
	free(e->rt);
	pthread_mutex_destroy(&e->mu);
	pthread_mutex_destroy(&e->stop_mu);
	pthread_cond_destroy(&e->stop_cv);
	free(e);
}

/* ---- /collectionrules ---- */

static json_t *timespan_or_null(long long ms)
{
	char t[40];

	if (ms < 0)
		return json_null();
	crules_timespan_text(t, sizeof(t), ms);
	return json_string(t);
}

static json_t *describe(struct inst *in, bool detailed, long long now)
{
	json_t *o = json_object();
	const struct crule_limits *l = &in->r->lim;
	long long countdown = -1, left = -1;

	if (in->state != IS_FINISHED)
		(void)throttled(in, now); /* the window as it is now */
	json_object_set_new(o, "state", json_string(state_names[in->state]));
	json_object_set_new(o, "stateReason", json_string(in->reason));
	if (!detailed)
		return o;
	if (l->window_ms && in->n_exec >= l->action_count && in->state != IS_FINISHED)
		countdown = in->exec[in->n_exec - l->action_count] + l->window_ms - now;
	if (l->rule_duration_ms && in->state != IS_FINISHED)
		left = in->start_ms + l->rule_duration_ms - now;
	json_object_set_new(o, "lifetimeOccurrences", json_integer(in->lifetime));
	json_object_set_new(o, "slidingWindowOccurrences", json_integer((json_int_t)in->n_exec));
	json_object_set_new(o, "actionCountLimit", json_integer(l->action_count));
	json_object_set_new(o, "actionCountSlidingWindowDurationLimit", timespan_or_null(l->window_ms ? l->window_ms : -1));
	json_object_set_new(o, "slidingWindowDurationCountdown", timespan_or_null(countdown < 0 ? -1 : countdown));
	json_object_set_new(o, "ruleFinishedCountdown", timespan_or_null(left < 0 ? -1 : left));
	return o;
}

void crules_route(struct crules *e, struct httpd_req *r)
{
	struct target_sel sel = { httpd_query(r, "pid"), httpd_query(r, "uid"), httpd_query(r, "name") };
	const char *path = httpd_path(r), *name = path[strlen("/collectionrules")] == '/' ? path + 17 : NULL;
	struct port_runtime p;
	struct err_msg em;
	json_t *out = NULL;
	long long now = clock_ms();
	bool found = false;

	if (e == NULL) { /* no rules: an empty map, and every name unknown */
		if (name)
			httpd_problem(r, 404, "Not Found", "there is no collection rule '%.128s' (none is configured)", name);
		else
			httpd_send_json(r, 200, json_object());
		return;
	}
	if (target_choose(e->cfg.port, &sel, &p, &em) != 0) {
		httpd_problem(r, 400, "Bad Request", "%s", em.text);
		return;
	}
	pthread_mutex_lock(&e->mu);
	if (name == NULL)
		out = json_object();
	for (size_t i = 0; i < e->n; i++) {
		struct inst *in = e->in[i];

		if (memcmp(in->cookie, p.cookie, 16) != 0)
			continue;
		if (name == NULL)
			json_object_set_new(out, in->r->name, describe(in, false, now));
		else if (strcasecmp(in->r->name, name) == 0 && !found) {
			out = describe(in, true, now);
			found = true;
		}
	}
	pthread_mutex_unlock(&e->mu);
	ipc_process_info_free(&p.info);
	if (name && !found) {
		httpd_problem(r, 404, "Not Found", "there is no collection rule '%.128s' for process %llu", name,
			      (unsigned long long)p.pid);
		return;
	}
	httpd_send_json(r, 200, out);
}
