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

#define ANSWER_CAP ((size_t)1024 * 1024)
#define PROCESS_CAP ((size_t)64 * 1024)
#define TIMEOUT_MS 20000L

struct ps {
	const struct fleet_set *s;
	json_t **procs;  /* per agent: the processes (an array), or NULL */
	char **errors;   /* per agent: why not, or NULL */
};

static long long uptime_s(const char *rfc3339)
{
	struct tm tm = { 0 };

	if (rfc3339 == NULL || strptime(rfc3339, "%Y-%m-%dT%H:%M:%S", &tm) == NULL)
		return -1;
	return (long long)(time(NULL) - timegm(&tm));
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
		if ((up = uptime_s(json_string_value(json_object_get(p, "attachedDateTime")))) >= 0)
			json_object_set_new(p, "uptimeSeconds", json_integer(up));
		json_array_append_new(out, p);
	}
	json_decref(list);
	json_decref(rts);
	ps->procs[i] = out;
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
		json_object_set(it, "processes", ps->procs[i] ? ps->procs[i] : json_array());
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

static void table(const json_t *doc, bool wide)
{
	json_t *it, *p;
	size_t i, k;

	printf("%-28s %-36s %-12s %7s %-16s %-9s %6s %-9s %s%s\n", "WORKLOAD", "TARGET", "CONTAINER", "PID", "PROCESS",
	       "RUNTIME", "UPTIME", "MODE", "STATUS", wide ? "  COMMAND" : "");
	json_array_foreach(json_object_get(doc, "items"), i, it) {
		const char *target = json_string_value(json_object_get(it, "target"));
		const char *workload = json_string_value(json_object_get(it, "workload"));
		const char *container = json_string_value(json_object_get(it, "container"));
		const char *mode = json_string_value(json_object_get(it, "mode"));
		const char *reason = json_string_value(json_object_get(it, "reason"));
		json_t *procs = json_object_get(it, "processes");

		if (reason || json_array_size(procs) == 0) {
			printf("%-28s %-36s %-12s %7s %-16s %-9s %6s %-9s %s\n", or_dash(workload), target, or_dash(container),
			       "-", "-", "-", "-", or_dash(mode), reason ? reason : "no .NET process attached");
			continue;
		}
		json_array_foreach(procs, k, p) {
			char up[32];
			json_t *u = json_object_get(p, "uptimeSeconds");

			uptime_text(u ? (long long)json_integer_value(u) : -1, up, sizeof(up));
			printf("%-28s %-36s %-12s %7lld %-16s %-9s %6s %-9s %s%s%s\n", or_dash(workload), target,
			       or_dash(container), (long long)json_integer_value(json_object_get(p, "pid")),
			       or_dash(json_string_value(json_object_get(p, "name"))),
			       or_dash(json_string_value(json_object_get(p, "runtimeVersion"))), up, or_dash(mode), "ready",
			       wide ? "  " : "", wide ? or_dash(json_string_value(json_object_get(p, "commandLine"))) : "");
		}
	}
}

int fleet_ps(const struct fleet_set *s, const char *format, unsigned parallel)
{
	struct ps ps = { .s = s, .procs = mem_array(s->n ? s->n : 1, sizeof(json_t *)),
			 .errors = mem_array(s->n ? s->n : 1, sizeof(char *)) };
	json_t *doc;
	int rc = FLEET_EXIT_OK;

	pool_run(s->n, parallel, ask_one, &ps);
	doc = process_list(&ps);
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
	for (size_t i = 0; i < s->n; i++) {
		json_decref(ps.procs[i]);
		free(ps.errors[i]);
	}
	free(ps.procs);
	free(ps.errors);
	return fleet_cancelled() ? FLEET_EXIT_CANCELLED : rc;
}
