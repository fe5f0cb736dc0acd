/*
 * ps.c - `diagport ps` (run.h): the .NET processes behind the targets.
 *
 * Every agent that can be called is asked, in parallel, for /processes, for
 * /runtimes (diagport's: each runtime's version and when it attached) and
 * then /process?pid=N for each (command line, operating system); a target
 * without an agent is a row that says why. An agent older than /runtimes
 * (404) had those two fields in /process: they are taken from there. The rows
 * are printed as a table (wide adds the command line), or as one JSON or
 * YAML document (kind ProcessList) for scripts. What an agent says is taken
 * field by field (known names only, strings made safe for a terminal, at
 * most FLEET_MAX_PROCESSES processes and 64 KiB an answer).
 */
#include "run.h"

#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "call.h"
#include "mem.h"
#include "pool.h"
#include "utf8.h"

#define ANSWER_CAP ((size_t)1024 * 1024)
#define PROCESS_CAP ((size_t)64 * 1024)
#define TIMEOUT_MS 20000L
#define TEXT_CAP 4096      /* bytes of one string an agent gives */
#define MAX_CRASHES 64     /* records taken from one agent's /crashes (the agent keeps 32) */
#define MAX_FRAMES 256     /* of one crash's stack */
#define MAX_ARTIFACTS 8    /* of one crash (the agent has two: the report and the dump) */

struct ps {
	const struct fleet_set *s;
	json_t **procs;     /* per agent: the processes (an array), or NULL */
	char **errors;      /* per agent: why not, or NULL */
	json_t **crashes;   /* per agent: its crash records (an array), or NULL */
	char **crash_why;   /* per agent: why there are none to show, or NULL */
};

/* *t from an RFC 3339 UTC time ("2026-01-01T00:00:00.000Z", what follows the seconds ignored): true, or false. */
static bool rfc3339_time(const char *s, time_t *t)
{
	struct tm tm = { 0 };

	if (s == NULL || strptime(s, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return false;
	*t = timegm(&tm);
	return true;
}

/* Seconds from an RFC 3339 UTC time to now, or -1 when it is not one. */
static long long since_s(const char *rfc3339)
{
	time_t t;

	return rfc3339_time(rfc3339, &t) ? (long long)(time(NULL) - t) : -1;
}

/*
 * A process as ps shows it: pid, and the agent's known string fields made
 * safe, each from rt (its /runtimes entry, borrowed; NULL when there is none)
 * when there, else from p (its /process answer; stolen).
 */
static json_t *known_fields(json_t *p, const json_t *rt, json_int_t pid)
{
	static const char *const names[] = { "uid", "name", "commandLine", "operatingSystem", "processArchitecture",
					     "runtimeVersion", "attachedDateTime" };
	json_t *o = json_object();

	json_object_set_new(o, "pid", json_integer(pid));
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *v = json_string_value(json_object_get(rt, names[i]));
		char *safe;

		if (v == NULL)
			v = json_string_value(json_object_get(p, names[i]));
		if (v == NULL)
			continue;
		safe = mem_strndup(v, 4096);
		fleet_safe_text(safe);
		json_object_set_new(o, names[i], json_string(safe));
		free(safe);
	}
	json_decref(p);
	return o;
}

/* The agent's /runtimes (a new array), or NULL: an agent older than the route, or an answer not a list. */
static json_t *runtimes(const struct ps *ps, const struct fleet_agent *a)
{
	struct err_msg em;
	char *body = NULL;
	json_t *l;

	if (fleet_call_get(a, ps->s->caller, "/runtimes", ANSWER_CAP, TIMEOUT_MS, &body, &em) != 0)
		return NULL;
	l = json_loads(body, 0, NULL);
	free(body);
	if (!json_is_array(l)) {
		json_decref(l);
		return NULL;
	}
	return l;
}

/* The entry of runtimes (borrowed) for pid, or NULL. */
static const json_t *runtime_of(const json_t *runtimes, json_int_t pid)
{
	size_t i;
	json_t *r;

	json_array_foreach(runtimes, i, r)
		if (json_integer_value(json_object_get(r, "pid")) == pid)
			return r;
	return NULL;
}

/* v as a string made safe for a terminal (new), or NULL when v is not a string. */
static json_t *safe_str(const json_t *v)
{
	char *s;
	json_t *o;

	if (!json_is_string(v))
		return NULL;
	s = mem_strndup(json_string_value(v), TEXT_CAP);
	fleet_safe_text(s);
	o = utf8_json_str(s);
	free(s);
	return o;
}

/* o[k] = in[k] when it is a string (made safe), else null when null is allowed (may_null) and in[k] is null or absent. */
static void take_str(json_t *o, const json_t *in, const char *k, bool may_null)
{
	json_t *v = safe_str(json_object_get(in, k));

	if (v)
		json_object_set_new(o, k, v);
	else if (may_null)
		json_object_set_new(o, k, json_null());
}

/* o[k] = in[k] when it is an integer, else null. */
static void take_int(json_t *o, const json_t *in, const char *k)
{
	json_t *v = json_object_get(in, k);

	json_object_set_new(o, k, json_is_integer(v) ? json_integer(json_integer_value(v)) : json_null());
}

/* The crash's exception as the agent gives it (typeName, message, hresult, stack), its known fields only. */
static json_t *crash_exception(const json_t *in)
{
	json_t *o = json_object(), *stack = json_array(), *f;
	size_t i;

	take_str(o, in, "typeName", true);
	take_str(o, in, "message", true);
	take_str(o, in, "hresult", true);
	json_array_foreach(json_object_get(in, "stack"), i, f) {
		json_t *s = safe_str(f);

		if (i == MAX_FRAMES || s == NULL) {
			json_decref(s);
			break;
		}
		json_array_append_new(stack, s);
	}
	json_object_set_new(o, "stack", stack);
	return o;
}

/* A crash record of the agent's /crashes (borrowed), its known fields only (new), or NULL when it is not one. */
static json_t *crash_record(const json_t *in)
{
	static const char *const art_strs[] = { "kind", "state", "file", "location", "error" };
	json_t *o, *arts, *a;
	size_t i;

	if (!json_is_object(in) || !json_is_string(json_object_get(in, "time")))
		return NULL;
	o = json_object();
	take_int(o, in, "pid");
	take_str(o, in, "processName", true);
	take_str(o, in, "time", false);
	take_int(o, in, "exitSignal");
	take_int(o, in, "exitCode");
	json_object_set_new(o, "exception", crash_exception(json_object_get(in, "exception")));
	arts = json_array();
	json_array_foreach(json_object_get(in, "artifacts"), i, a) {
		json_t *x;

		if (i == MAX_ARTIFACTS || !json_is_object(a))
			break;
		x = json_object();
		for (size_t k = 0; k < sizeof(art_strs) / sizeof(art_strs[0]); k++)
			take_str(x, a, art_strs[k], true);
		take_int(x, a, "bytes");
		json_array_append_new(arts, x);
	}
	json_object_set_new(o, "artifacts", arts);
	return o;
}

/*
 * The agent's crash records into ps->crashes[i] (a new array), or why not
 * into ps->crash_why[i]: a refusal, an older agent or a failure of this one
 * call leaves the target's row as it is.
 */
static void ask_crashes(struct ps *ps, size_t i)
{
	const struct fleet_agent *a = &ps->s->v[i];
	struct err_msg em;
	char *body = NULL;
	json_t *l, *out, *r;
	size_t k;
	int rc;

	if ((rc = fleet_call_get(a, ps->s->caller, "/crashes", ANSWER_CAP, TIMEOUT_MS, &body, &em)) != 0) {
		ps->crash_why[i] = rc == DP_EAUTH     ? mem_printf("the agent does not serve crashes to us (%s): its "
								   "captures leave out exceptions", em.text) :
				   rc == DP_ENOTFOUND ? mem_printf("the agent has no /crashes (%s): older than crash "
								   "records, or not diagport's", em.text) :
							mem_strdup(em.text);
		return;
	}
	l = json_loads(body, 0, NULL);
	free(body);
	if (!json_is_array(l)) {
		ps->crash_why[i] = mem_strdup("the agent's /crashes answer is not a list");
		json_decref(l);
		return;
	}
	out = json_array();
	json_array_foreach(l, k, r) {
		json_t *c;

		if (k == MAX_CRASHES)
			break;
		if ((c = crash_record(r)) != NULL)
			json_array_append_new(out, c);
	}
	json_decref(l);
	ps->crashes[i] = out;
}

static void ask_one(void *ctx, size_t i)
{
	struct ps *ps = ctx;
	const struct fleet_agent *a = &ps->s->v[i];
	struct err_msg em;
	char *body = NULL;
	json_t *list, *out, *rts;

	if (a->why_not || fleet_cancelled())
		return;
	if (fleet_call_get(a, ps->s->caller, "/processes", ANSWER_CAP, TIMEOUT_MS, &body, &em) != 0) {
		ps->errors[i] = mem_strdup(em.text);
		return;
	}
	list = json_loads(body, 0, NULL);
	free(body);
	if (!json_is_array(list)) {
		ps->errors[i] = mem_strdup("the agent's /processes answer is not a list");
		json_decref(list);
		return;
	}
	if (json_array_size(list) > FLEET_MAX_PROCESSES) {
		ps->errors[i] = mem_printf("the agent lists %zu processes; more than %d is not taken", json_array_size(list),
					   FLEET_MAX_PROCESSES);
		json_decref(list);
		return;
	}
	rts = runtimes(ps, a);
	out = json_array();
	for (size_t k = 0; k < json_array_size(list); k++) {
		json_int_t pid = json_integer_value(json_object_get(json_array_get(list, k), "pid"));
		char path[64];
		json_t *p = NULL;
		long long up;

		if (pid <= 0 || pid > INT32_MAX)
			continue; /* not a process we could name to the agent */
		snprintf(path, sizeof(path), "/process?pid=%lld", (long long)pid);
		if (fleet_call_get(a, ps->s->caller, path, PROCESS_CAP, TIMEOUT_MS, &body, &em) == 0) {
			p = json_loads(body, 0, NULL);
			free(body);
		}
		if (!json_is_object(p)) { /* it went away in between, or an old agent: what the list said */
			json_decref(p);
			p = json_incref(json_array_get(list, k));
		}
		p = known_fields(p, runtime_of(rts, pid), pid);
		if ((up = since_s(json_string_value(json_object_get(p, "attachedDateTime")))) >= 0)
			json_object_set_new(p, "uptimeSeconds", json_integer(up));
		json_array_append_new(out, p);
	}
	json_decref(list);
	json_decref(rts);
	ps->procs[i] = out;
	ask_crashes(ps, i);
}

static void set_str(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

static json_t *process_list(const struct ps *ps)
{
	json_t *doc = json_object(), *items = json_array();

	json_object_set_new(doc, "apiVersion", json_string("diagport.dev/v1"));
	json_object_set_new(doc, "kind", json_string("ProcessList"));
	set_str(doc, "caller", ps->s->caller);
	for (size_t i = 0; i < ps->s->n; i++) {
		const struct fleet_agent *a = &ps->s->v[i];
		json_t *it = json_object();
		const char *why = a->why_not ? a->why_not : ps->errors[i];

		json_object_set_new(it, "target", json_string(a->name));
		fleet_agent_describe(it, a);
		set_str(it, "mode", a->mode);
		json_object_set_new(it, "state", json_string(why ? "unavailable" : "ready"));
		set_str(it, "reason", why);
		json_object_set_new(it, "processes", ps->procs[i] ? json_incref(ps->procs[i]) : json_array());
		if (ps->crashes[i])
			json_object_set(it, "crashes", ps->crashes[i]);
		else if (why == NULL)
			set_str(it, "crashesReason", ps->crash_why[i]);
		json_array_append_new(items, it);
	}
	json_object_set_new(doc, "items", items);
	return doc;
}

/* A key YAML reads back as the same string when written plain: letters and digits, not a word YAML 1.1 resolves. */
static bool plain_key(const char *k)
{
	static const char *const words[] = { "true", "false", "null", "yes", "no", "on", "off", "y", "n", "~" };

	if (*k == '\0' || strspn(k, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789") != strlen(k) ||
	    (*k >= '0' && *k <= '9'))
		return false;
	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasecmp(k, words[i]) == 0)
			return false;
	return true;
}

/* YAML for a JSON value: block mappings and sequences, every scalar in its JSON spelling (valid YAML). */
static void yaml_out(FILE *f, const json_t *v, int indent, bool in_seq)
{
	const char *k;
	json_t *x;
	size_t i;
	bool first = true;

	if (json_is_object(v) && json_object_size(v)) {
		json_object_foreach((json_t *)v, k, x) {
			json_t *ks = json_string(k);
			char *key = plain_key(k) ? mem_strdup(k) : json_dumps(ks, JSON_ENCODE_ANY);

			fprintf(f, "%*s%s:", first && in_seq ? 0 : indent, "", key);
			free(key);
			json_decref(ks);
			first = false;
			if ((json_is_object(x) && json_object_size(x)) || (json_is_array(x) && json_array_size(x))) {
				fputc('\n', f);
				yaml_out(f, x, json_is_array(x) ? indent : indent + 2, false);
			} else {
				char *s = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);

				fprintf(f, " %s\n", s);
				free(s);
			}
		}
	} else if (json_is_array(v) && json_array_size(v)) {
		json_array_foreach(v, i, x) {
			fprintf(f, "%*s- ", indent, "");
			if ((json_is_object(x) && json_object_size(x)) || (json_is_array(x) && json_array_size(x))) {
				yaml_out(f, x, indent + 2, true);
			} else {
				char *s = json_dumps(x, JSON_ENCODE_ANY | JSON_COMPACT);

				fprintf(f, "%s\n", s);
				free(s);
			}
		}
	} else {
		char *s = json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT);

		fprintf(f, "%*s%s\n", indent, "", s);
		free(s);
	}
}

static void uptime_text(long long s, char *out, size_t n)
{
	if (s < 0)
		snprintf(out, n, "-");
	else if (s < 120)
		snprintf(out, n, "%llds", s);
	else if (s < 7200)
		snprintf(out, n, "%lldm", s / 60);
	else if (s < 172800)
		snprintf(out, n, "%lldh", s / 3600);
	else
		snprintf(out, n, "%lldd", s / 86400);
}

static const char *or_dash(const char *s)
{
	return s && *s ? s : "-";
}

/* "InvalidOperationException" of "System.InvalidOperationException"; "MyError" of "Ns.MyError`1[[...]]". */
static void short_type(const char *t, char *out, size_t n)
{
	size_t len = strcspn(t, "`"), start = len;

	while (start > 0 && t[start - 1] != '.')
		start--;
	snprintf(out, n, "%.*s", (int)(len - start), t + start);
}

/*
 * The target's crash cells: count, "N (AGE ago)" of the newest record, or
 * "0", or "-" when the agent gave none; last, the newest one's exception
 * type, else its signal or exit code, else "-".
 */
static void crash_cells(const json_t *it, char *count, size_t cn, char *last, size_t ln)
{
	const json_t *l = json_object_get(it, "crashes"), *c, *newest = NULL;
	time_t t, newest_t = 0;
	const char *type;
	size_t i;
	json_int_t sig;
	char ago[32];

	snprintf(count, cn, "-");
	snprintf(last, ln, "-");
	if (!json_is_array(l))
		return;
	if (json_array_size(l) == 0) {
		snprintf(count, cn, "0");
		return;
	}
	json_array_foreach(l, i, c)
		if (rfc3339_time(json_string_value(json_object_get(c, "time")), &t) && (newest == NULL || t > newest_t)) {
			newest = c;
			newest_t = t;
		}
	if (newest) {
		/* a time ahead of ours: the clocks differ, and the crash is recent */
		uptime_text(time(NULL) > newest_t ? (long long)(time(NULL) - newest_t) : 0, ago, sizeof(ago));
		snprintf(count, cn, "%zu (%s ago)", json_array_size(l), ago);
	} else { /* no time we can read: the agent lists the newest first */
		newest = json_array_get(l, 0);
		snprintf(count, cn, "%zu", json_array_size(l));
	}
	type = json_string_value(json_object_get(json_object_get(newest, "exception"), "typeName"));
	sig = json_integer_value(json_object_get(newest, "exitSignal"));
	if (type && *type)
		short_type(type, last, ln);
	else if (sig > 0 && sig < 65 && sigabbrev_np((int)sig))
		snprintf(last, ln, "SIG%s", sigabbrev_np((int)sig));
	else if (json_is_integer(json_object_get(newest, "exitCode")))
		snprintf(last, ln, "exit %lld", (long long)json_integer_value(json_object_get(newest, "exitCode")));
}

static void table(const json_t *doc, bool wide)
{
	json_t *it, *p;
	size_t i, k;

	printf("%-28s %-36s %-12s %7s %-16s %-9s %6s %-12s %-26s %-9s %s%s\n", "WORKLOAD", "TARGET", "CONTAINER", "PID",
	       "PROCESS", "RUNTIME", "UPTIME", "CRASHES", "LAST CRASH", "MODE", "STATUS", wide ? "  COMMAND" : "");
	json_array_foreach(json_object_get(doc, "items"), i, it) {
		const char *target = json_string_value(json_object_get(it, "target"));
		const char *workload = json_string_value(json_object_get(it, "workload"));
		const char *container = json_string_value(json_object_get(it, "container"));
		const char *mode = json_string_value(json_object_get(it, "mode"));
		const char *reason = json_string_value(json_object_get(it, "reason"));
		json_t *procs = json_object_get(it, "processes");
		char crashes[48], last[128];

		crash_cells(it, crashes, sizeof(crashes), last, sizeof(last));
		if (reason || json_array_size(procs) == 0) {
			printf("%-28s %-36s %-12s %7s %-16s %-9s %6s %-12s %-26s %-9s %s\n", or_dash(workload), target,
			       or_dash(container), "-", "-", "-", "-", crashes, last, or_dash(mode),
			       reason ? reason : "no .NET process attached");
			continue;
		}
		json_array_foreach(procs, k, p) {
			char up[32];
			json_t *u = json_object_get(p, "uptimeSeconds");

			uptime_text(u ? (long long)json_integer_value(u) : -1, up, sizeof(up));
			printf("%-28s %-36s %-12s %7lld %-16s %-9s %6s %-12s %-26s %-9s %s%s%s\n", or_dash(workload), target,
			       or_dash(container), (long long)json_integer_value(json_object_get(p, "pid")),
			       or_dash(json_string_value(json_object_get(p, "name"))),
			       or_dash(json_string_value(json_object_get(p, "runtimeVersion"))), up, crashes, last, or_dash(mode),
			       "ready",
			       wide ? "  " : "", wide ? or_dash(json_string_value(json_object_get(p, "commandLine"))) : "");
		}
	}
}

json_t *fleet_ps_list(const struct fleet_set *s, unsigned parallel)
{
	size_t n = s->n ? s->n : 1;
	struct ps ps = { .s = s, .procs = mem_array(n, sizeof(json_t *)), .errors = mem_array(n, sizeof(char *)),
			 .crashes = mem_array(n, sizeof(json_t *)), .crash_why = mem_array(n, sizeof(char *)) };
	json_t *doc;

	pool_run(s->n, parallel, ask_one, &ps);
	doc = process_list(&ps);
	for (size_t i = 0; i < s->n; i++) {
		json_decref(ps.procs[i]);
		free(ps.errors[i]);
		json_decref(ps.crashes[i]);
		free(ps.crash_why[i]);
	}
	free(ps.procs);
	free(ps.errors);
	free(ps.crashes);
	free(ps.crash_why);
	return doc;
}

int fleet_ps(const struct fleet_set *s, const char *format, unsigned parallel)
{
	json_t *doc = fleet_ps_list(s, parallel);
	int rc = FLEET_EXIT_OK;

	if (strcmp(format, "json") == 0) {
		char *text = json_dumps(doc, JSON_INDENT(2) | JSON_PRESERVE_ORDER);

		puts(text);
		free(text);
	} else if (strcmp(format, "yaml") == 0) {
		yaml_out(stdout, doc, 0, false);
	} else if (s->n == 0) {
		fprintf(stderr, "No targets found.\n");
	} else {
		table(doc, strcmp(format, "wide") == 0);
	}
	if (fflush(stdout) != 0 || ferror(stdout))
		rc = FLEET_EXIT_SOME;
	json_decref(doc);
	return fleet_cancelled() ? FLEET_EXIT_CANCELLED : rc;
}
