/*
 * crules_act.c - a collection rule's action list, run on a thread of its own
 * once its trigger is satisfied (crules.c starts it and sets the state when
 * it returns).
 *
 * Actions run one after another: a capture through capture_run to its egress
 * provider (the same parsers the HTTP API uses; its kind's slot retried for a
 * while when someone else's capture holds it), waited for unless
 * WaitForCompletion is false; Execute runs a program. A later action's
 * settings may name an earlier one's outputs, $(Actions.NAME.EgressPath) and
 * $(Actions.NAME.ExitCode), as dotnet-monitor's do. A cancelled instance
 * (its runtime went away, the agent stops) stops waiting and kills what it ran.
 */
#include "crules_int.h"

#include <errno.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/capture/capture.h"
#include "buf.h"
#include "clock.h"
#include "log.h"
#include "mem.h"
#include "launcher/capture/ops.h"

#define SLOT_RETRY_MS 500     /* an action whose kind's slot is taken (someone else's dump) tries again */
#define SLOT_RETRY_FOR_MS 120000
#define WAIT_TICK_MS 250      /* an action list looks at its cancel flag this often while it waits */
#define MAX_EXEC_ARGS 64
#define MAX_OUTPUT 4096
#define MAX_ACTIONS_OUT 16 /* a rule's actions (crules_parse.c's cap) */

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
	case CRA_EXCEPTIONS:
		c->kind = CAPTURE_EXCEPTIONS;
		if (a->exc_json)
			rc = exc_filters_json(a->exc_json, strlen(a->exc_json), &c->exc, em);
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

void crules_act_run(struct inst *in)
{
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
}

