/*
 * capture_parse.c - an HTTP request made into a capture (capture.h), once:
 * the query parameters, a POST's body and the Accept header are checked
 * here, each refusal naming its field the way dotnet-monitor's (ASP.NET's)
 * validation errors do, and everything after works on the value.
 *
 * Order, as clients see it: the parameters and the body first, then the
 * process (the selectors), so a bad request is a 400 whether or not a
 * process is attached.
 */
#include "capture.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <unistd.h>

#include "buf.h"
#include "dump.h"
#include "mem.h"
#include "problem.h"
#include "launcher/profile/profile.h"
#include "launcher/runtime/target.h"

#define DEFAULT_DURATION_MS 30000 /* dotnet-monitor's durationSeconds default */
#define MAX_TOP 1000000

void capture_free(struct capture *c)
{
	if (c == NULL)
		return;
	ipc_process_info_free(&c->target.info);
	trace_config_free(&c->session);
	trace_stop_event_free(c->stop_event);
	metrics_selection_free(&c->sel);
	logs_filter_free(&c->filter);
	exc_filters_free(&c->exc);
	free(c->src_path);
	free(c->name);
	free(c->file);
	free(c->tags);
	free(c->caller);
	memset(c, 0, sizeof(*c));
}

static int bad(struct capture_problem *p, const char *field, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int bad(struct capture_problem *p, const char *field, const char *fmt, ...)
{
	va_list ap;

	p->status = 400;
	p->title = "Bad Request";
	p->field = field;
	va_start(ap, fmt);
	vsnprintf(p->em.text, sizeof(p->em.text), fmt, ap);
	va_end(ap);
	return -1;
}

/* A refusal whose sentence is already in p->em (from a parser of ours): the field named, 400. */
static int bad_em(struct capture_problem *p, const char *field)
{
	p->status = 400;
	p->title = "Bad Request";
	p->field = field;
	return -1;
}

void capture_send_problem(struct httpd_req *r, const struct capture_problem *p)
{
	char *body = p->field && p->status == 400 ? problem_validation_body(p->field, p->em.text) :
		     problem_body(p->status, p->title, p->em.text);

	httpd_send(r, p->status, PROBLEM_CTYPE, body, strlen(body));
	free(body);
}

/* durationSeconds: 30 when absent, -1 (until stopped) or 0..2^31-1. */
static int duration(struct httpd_req *r, long long *ms, struct capture_problem *p)
{
	const char *d = httpd_query(r, "durationSeconds");
	char *end;
	long long v;

	if (d == NULL) {
		*ms = DEFAULT_DURATION_MS;
		return 0;
	}
	errno = 0;
	v = strtoll(d, &end, 10);
	if (!((*d >= '0' && *d <= '9') || strcmp(d, "-1") == 0) || *end != '\0' || errno != 0 || v < -1 ||
	    v > 2147483647LL) /* digits, or -1: no sign, space or "+" that strtoll would take */
		return bad(p, "durationSeconds", "durationSeconds '%.32s' is not -1 or a whole number of seconds", d);
	*ms = v < 0 ? -1 : v * 1000;
	return 0;
}

/* egressProvider: the provider it names (NULL when absent). */
static int egress(const struct capture_env *env, struct httpd_req *r, const struct egress_provider **out,
		  struct capture_problem *p)
{
	const char *eg = httpd_query(r, "egressProvider");
	struct buf names;

	*out = NULL;
	if (eg == NULL)
		return 0;
	for (size_t i = 0; i < env->n_egress; i++)
		if (strcasecmp(env->egress[i].name, eg) == 0) {
			*out = &env->egress[i];
			return 0;
		}
	buf_init(&names, 4096);
	for (size_t i = 0; i < env->n_egress; i++)
		buf_printf(&names, "%s%s", i ? ", " : "", env->egress[i].name);
	bad(p, "egressProvider", "there is no egress provider '%.64s'; %s%s", eg,
	    env->n_egress ? "configured: " : "none is configured (Egress:FileSystem:NAME:DirectoryPath)",
	    names.data ? names.data : "");
	buf_free(&names);
	return -1;
}

static bool accepts(struct httpd_req *r, const char *type)
{
	const char *a = httpd_header(r, "Accept");

	return a && strstr(a, type);
}

static bool is_post(struct httpd_req *r)
{
	return strcmp(httpd_method(r), "POST") == 0;
}

static int parse_dump(struct httpd_req *r, const struct capture_env *env, struct capture *c, struct capture_problem *p)
{
	const char *type = httpd_query(r, "type"), *tr = httpd_query(r, "transport");

	if ((c->format = dump_type(type)) < 0)
		return bad(p, "type", "type '%.32s' is not Mini, Triage, WithHeap or Full", type);
	c->transport = tr ? dump_transport(tr) : env->dump_transport;
	if (c->transport < 0)
		return bad(p, "transport", "transport '%.32s' is not file, staged or fifo", tr);
	return 0;
}

/* A perf profile's settings: frequency (1..PERFEV_MAX_FREQ and the kernel's cap, default 99), event, kernel. */
static int parse_perf(struct httpd_req *r, struct capture *c, struct capture_problem *p)
{
	const char *fq = httpd_query(r, "frequency"), *ev = httpd_query(r, "event"), *k = httpd_query(r, "kernel");
	long max_rate = PERFEV_MAX_FREQ;
	char rate[32] = "";
	int fd = open("/proc/sys/kernel/perf_event_max_sample_rate", O_RDONLY | O_CLOEXEC);

	if (fd >= 0) {
		ssize_t n = read(fd, rate, sizeof(rate) - 1);

		close(fd);
		max_rate = n > 0 ? strtol(rate, NULL, 10) : PERFEV_MAX_FREQ;
		if (max_rate <= 0 || max_rate > PERFEV_MAX_FREQ)
			max_rate = PERFEV_MAX_FREQ;
	}
	c->perf = (struct profile_perf){ 99, PERFEV_CPU_CLOCK, PERFEV_KERNEL_AUTO, c->format == PROFILE_PERFSCRIPT };
	if (fq) {
		char *end;
		unsigned long v = strtoul(fq, &end, 10);

		if (!*fq || *end || fq[0] == '-' || fq[0] == '+' || v < 1 || v > PERFEV_MAX_FREQ)
			return bad(p, "frequency", "frequency '%.32s' is not a number of samples per second from 1 to %d",
				   fq, PERFEV_MAX_FREQ);
		if ((long)v > max_rate)
			return bad(p, "frequency", "frequency %lu is over this kernel's limit of %ld samples per second "
				   "(kernel.perf_event_max_sample_rate)", v, max_rate);
		c->perf.freq = (unsigned)v;
	}
	if (ev && (int)(c->perf.event = (enum perfev_event)perfev_event_parse(ev)) < 0)
		return bad(p, "event", "event '%.32s' is not cpu-clock or cycles", ev);
	if (k == NULL || strcasecmp(k, "auto") == 0)
		c->perf.kernel = PERFEV_KERNEL_AUTO;
	else if (strcasecmp(k, "true") == 0)
		c->perf.kernel = PERFEV_KERNEL_ON;
	else if (strcasecmp(k, "false") == 0)
		c->perf.kernel = PERFEV_KERNEL_OFF;
	else
		return bad(p, "kernel", "kernel '%.32s' is not auto, true or false", k);
	return 0;
}

/*
 * GET with profile=..., or POST with a providers document. A profile format
 * (folded, speedscope, flamegraph, pprof; perfscript) or engine=perf makes it a
 * CPU profile.
 */
static int parse_trace(struct httpd_req *r, const struct capture_env *env, struct capture *c, struct capture_problem *p)
{
	const char *f = httpd_query(r, "format"), *profile = httpd_query(r, "profile"), *body;
	const char *engine = httpd_query(r, "engine");
	static const char *const perf_only[] = { "frequency", "event", "kernel" };
	bool perf = engine && strcasecmp(engine, "perf") == 0;
	size_t len;

	if (engine && !perf && strcasecmp(engine, "eventpipe") != 0)
		return bad(p, "engine", "engine '%.32s' is not eventpipe or perf", engine);
	for (size_t i = 0; i < 3 && !perf; i++)
		if (httpd_query(r, perf_only[i]))
			return bad(p, perf_only[i], "%s is a setting of CPU profiles with engine=perf", perf_only[i]);
	if (f || perf) {
		c->format = f ? profile_format(f) : PROFILE_FOLDED;
		if (!f && profile && strcasecmp(profile, "Cpu") != 0)
			return bad(p, "profile", "profile '%.32s': a CPU profile (engine=perf) is profile=Cpu or none",
				   profile);
		if (c->format < 0 || is_post(r) || (profile && strcasecmp(profile, "Cpu") != 0))
			return bad(p, "format", "format '%.32s': a CPU profile is folded, speedscope, flamegraph, pprof or "
				   "perfscript (engine=perf), from GET /trace with profile=Cpu (or none)", f ? f : "");
		if (c->format == PROFILE_PERFSCRIPT && !perf)
			return bad(p, "format", "format 'perfscript' is the perf engine's: add engine=perf");
		c->kind = CAPTURE_PROFILE;
		c->engine = perf ? PROFILE_PERF : PROFILE_EVENTPIPE;
		return perf ? parse_perf(r, c, p) : 0;
	}
	if (is_post(r)) {
		body = httpd_body(r, &len);
		return trace_config_json(body, len, &c->session, &p->em) ? bad_em(p, "$") : 0;
	}
	return trace_config_profile(profile, env->metrics_interval_s, &c->session, &p->em) ? bad_em(p, "profile") : 0;
}

/* GET (the default counters) or POST with an EventMetricsConfiguration. */
static int parse_livemetrics(struct httpd_req *r, const struct capture_env *env, struct capture *c,
			     struct capture_problem *p)
{
	char client[64];
	uint8_t id[8] = { 0 };
	size_t len;
	const char *body = httpd_body(r, &len);

	if (is_post(r)) {
		if (metrics_selection_json(body, len, &c->sel, &p->em) != 0)
			return bad_em(p, "$");
	} else {
		metrics_selection_defaults(&c->sel);
	}
	/* our share of the shared meter session is named apart from every other listener's */
	if (getrandom(id, sizeof(id), 0) != (ssize_t)sizeof(id))
		DP_FATAL("getrandom failed");
	snprintf(client, sizeof(client), "diagport-live-%02x%02x%02x%02x%02x%02x%02x%02x", id[0], id[1], id[2], id[3],
		 id[4], id[5], id[6], id[7]);
	return metrics_trace_config(&c->sel, env->metrics_interval_s, client, &c->session, &p->em) ? bad_em(p, "$") : 0;
}

/* GET ?level= (or the app's filters) or POST with a LogsConfiguration; the format by Accept. */
static int parse_logs(struct httpd_req *r, const struct capture_env *env, struct capture *c, struct capture_problem *p)
{
	const char *lv = httpd_query(r, "level"), *body;
	size_t len;

	c->format = accepts(r, "application/json-seq") ? LOGS_JSON_SEQ : accepts(r, "text/plain") ? LOGS_TEXT : LOGS_NDJSON;
	c->filter.level = -1;
	c->filter.use_app_filters = true;
	body = httpd_body(r, &len);
	if (is_post(r) && logs_filter_json(body, len, &c->filter, &p->em) != 0)
		return bad_em(p, "$");
	if (lv) {
		if ((c->filter.level = logs_level(lv)) < 0)
			return bad(p, "level", "level '%.32s' is not one of Trace, Debug, Information, Warning, Error, "
				   "Critical", lv);
		c->filter.use_app_filters = false; /* a level given overrides the app's filters (dotnet-monitor's rule) */
	}
	return logs_trace_config(&c->filter, &c->session, &p->em) ? bad_em(p, "$") : 0;
}

/* format=text|json|speedscope, or by Accept. */
static int parse_stacks(struct httpd_req *r, const struct capture_env *env, struct capture *c, struct capture_problem *p)
{
	const char *f = httpd_query(r, "format");

	if (f == NULL)
		c->format = accepts(r, "application/speedscope+json") ? CAPTURE_STACKS_SPEEDSCOPE :
			    accepts(r, "application/json")	      ? CAPTURE_STACKS_JSON :
								      CAPTURE_STACKS_TEXT;
	else if (strcasecmp(f, "json") == 0)
		c->format = CAPTURE_STACKS_JSON;
	else if (strcasecmp(f, "speedscope") == 0)
		c->format = CAPTURE_STACKS_SPEEDSCOPE;
	else if (strcasecmp(f, "text") == 0)
		c->format = CAPTURE_STACKS_TEXT;
	else
		return bad(p, "format", "format '%.32s' is not text, json or speedscope", f);
	return 0;
}

/* format=gcdump (the .gcdump file; the default) | stats (a table; JSON by Accept) | pprof | nettrace [&top=N]. */
static int parse_gcdump(struct httpd_req *r, const struct capture_env *env, struct capture *c, struct capture_problem *p)
{
	const char *f = httpd_query(r, "format"), *top = httpd_query(r, "top");

	if (top) {
		char *end;
		unsigned long v = strtoul(top, &end, 10);

		if (*top < '0' || *top > '9' || *end || v > MAX_TOP)
			return bad(p, "top", "top '%.32s' is not a count of types (0 = all)", top);
		c->top = v;
	}
	if (f == NULL || strcasecmp(f, "gcdump") == 0)
		c->format = CAPTURE_GCDUMP_FILE;
	else if (strcasecmp(f, "stats") == 0)
		c->format = accepts(r, "application/json") ? CAPTURE_GCDUMP_JSON : CAPTURE_GCDUMP_TEXT;
	else if (strcasecmp(f, "pprof") == 0)
		c->format = CAPTURE_GCDUMP_PPROF;
	else if (strcasecmp(f, "nettrace") == 0)
		c->format = CAPTURE_GCDUMP_NETTRACE;
	else
		return bad(p, "format", "format '%.32s' is not gcdump, stats, pprof or nettrace", f);
	return 0;
}

/* The format by Accept (newline-delimited JSON unless it asks for JSON sequences or text); POST: the filters. */
static int parse_exceptions(struct httpd_req *r, const struct capture_env *env, struct capture *c,
			    struct capture_problem *p)
{
	const char *body;
	size_t len;

	if (!env->exceptions) {
		p->status = 400;
		p->title = "Bad Request";
		p->field = NULL;
		err_set(&p->em, DP_EINVAL, "the exception history is turned off on this agent (exceptions: false)");
		return -1;
	}
	c->format = accepts(r, "application/json-seq") ? EXC_JSON_SEQ : accepts(r, "text/plain") ? EXC_TEXT : EXC_NDJSON;
	body = httpd_body(r, &len);
	if (is_post(r) && exc_filters_json(body, len, &c->exc, &p->em) != 0)
		return bad_em(p, "$");
	return 0;
}

static const struct {
	int (*parse)(struct httpd_req *r, const struct capture_env *env, struct capture *c, struct capture_problem *p);
	bool timed; /* takes durationSeconds */
} parsers[CAPTURE_KINDS] = {
	[CAPTURE_DUMP] = { parse_dump, false },
	[CAPTURE_TRACE] = { parse_trace, true },
	[CAPTURE_PROFILE] = { parse_trace, true },
	[CAPTURE_LIVEMETRICS] = { parse_livemetrics, true },
	[CAPTURE_LOGS] = { parse_logs, true },
	[CAPTURE_STACKS] = { parse_stacks, false },
	[CAPTURE_GCDUMP] = { parse_gcdump, false },
	[CAPTURE_EXCEPTIONS] = { parse_exceptions, false },
	[CAPTURE_FILE] = { NULL, false }, /* the agent's own (crashes.h), never a request */
};

/* The process the selectors name; a refusal is a 400 (a pid that is not a number names its field). */
static int process(const struct capture_env *env, struct httpd_req *r, struct capture *c, struct capture_problem *p)
{
	struct target_sel sel = { httpd_query(r, "pid"), httpd_query(r, "uid"), httpd_query(r, "name") };
	int rc = target_choose(env->port, &sel, &c->target, &p->em);

	return rc == 0 ? 0 : bad_em(p, rc == DP_EINVAL ? "pid" : NULL);
}

int capture_from_request(const struct capture_env *env, struct httpd_req *r, enum capture_kind kind,
			 struct capture *out, struct capture_problem *p)
{
	struct capture c = { .kind = kind };
	const char *tags = httpd_query(r, "tags");

	if ((parsers[kind].timed && duration(r, &c.duration_ms, p) != 0) || egress(env, r, &c.egress, p) != 0 ||
	    parsers[kind].parse(r, env, &c, p) != 0 || process(env, r, &c, p) != 0) {
		capture_free(&c);
		return -1;
	}
	c.tags = tags ? mem_strdup(tags) : NULL;
	*out = c;
	return 0;
}
