/*
 * test_aspnet_req.c - ASP.NET Core's request events and dotnet-monitor's
 * ASP.NET triggers (launcher/trace/aspnet_req.h): the request events read from
 * DiagnosticSource payloads built byte by byte; IncludePaths/ExcludePaths
 * globs (the table in dotnet-monitor's collection-rule docs, dotnet-monitor's
 * own GlobMatcherTests, .NET regex's corners, and hostile patterns that must
 * stay linear); StatusCodes items; and the three triggers' state machines,
 * with dotnet-monitor's AspNetTriggerUnitTests and SlidingWindowTests ported
 * case for case, then what they do not cover: the heartbeat counting a hung
 * request once, a stop after it not counted again, the in-flight cap. And
 * a real .NET 10 trace (tests/fuzz/seeds-nettrace/aspnet.nettrace: the
 * webapp traced with exactly aspnet_req_provider's provider while / and a
 * missing page were asked for five times each; tests/integration/aspnet_req.sh
 * takes such a trace afresh).
 */
#include <fcntl.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "launcher/trace/aspnet_req.h"
#include "t.h"

/* ---- the events ---- */

static void u16(struct buf *b, uint16_t v)
{
	buf_append(b, &v, 2);
}

static void str16(struct buf *b, const char *s)
{
	for (; *s; s++)
		u16(b, (uint8_t)*s);
	u16(b, 0);
}

static const struct nettrace_field ds_fields[] = {
	{ "SourceName", NT_STRING, 0, 0 }, { "EventName", NT_STRING, 0, 0 }, { "Arguments", NT_ARRAY, NT_OBJECT, 2 },
	{ "Key", NT_STRING, 0, 0 },        { "Value", NT_STRING, 0, 0 },
};

/* A DiagnosticSource event: provider, name, SourceName, then key, value, ..., NULL. */
struct ev {
	struct nettrace_meta m;
	struct nettrace_event e;
	struct buf b;
	struct evpayload p;
};

static int make(struct ev *x, const char *provider, const char *name, const char *source, const char *const *kv)
{
	struct err_msg em;
	uint16_t n = 0;

	while (kv[2 * n])
		n++;
	buf_reset(&x->b);
	str16(&x->b, source);
	str16(&x->b, "Microsoft.AspNetCore.Hosting.HttpRequestIn.Start");
	u16(&x->b, n);
	for (const char *const *k = kv; *k; k++)
		str16(&x->b, *k);
	x->m = (struct nettrace_meta){ .provider = provider, .name = name, .fields = ds_fields, .n_fields = 5 };
	x->e = (struct nettrace_event){ .meta = &x->m, .timestamp = 123456789, .payload = (uint8_t *)x->b.data,
					.payload_len = x->b.len };
	return evpayload_decode(&x->p, &x->e, &em);
}

#define DS "Microsoft-Diagnostics-DiagnosticSource"

static void events(void)
{
	static const char *const start[] = { "Request.Scheme", "http", "ActivityId", "00-ab-cd-01", "Path", "/Home",
					     "ActivityStartTime", "638000000000000000", NULL };
	static const char *const stop[] = { "ActivityId", "00-ab-cd-01", "Path", "/Home", "StatusCode", "404",
					    "ActivityDuration", "52340", NULL };
	static const char *const cased[] = { "activityid", "x", "PATH", "/p", "statuscode", "503", "activityDURATION",
					     "1", "Path", "/later", NULL };
	static const char *const junk[] = { "StatusCode", "4o4", "ActivityDuration", "-5", NULL };
	struct ev x = { 0 };
	struct aspnet_req r;

	buf_init(&x.b, 0);
	T_CHECK(make(&x, DS, "Activity1Start", "Microsoft.AspNetCore", start) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 1);
	T_CHECK(r.kind == ASPNET_REQ_START && r.timestamp == 123456789 && r.status == 0 && r.duration_ticks == -1);
	T_STREQ(r.activity_id, "00-ab-cd-01");
	T_STREQ(r.path, "/Home");
	T_CHECK(make(&x, DS, "Activity1Stop", "Microsoft.AspNetCore", stop) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 1);
	T_CHECK(r.kind == ASPNET_REQ_STOP && r.status == 404 && r.duration_ticks == 52340);
	T_STREQ(r.path, "/Home");
	/* TraceEvent's spelling of the names, keys in any case, a later pair winning */
	T_CHECK(make(&x, DS, "Activity1/Stop", "Microsoft.AspNetCore", cased) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 1);
	T_CHECK(r.status == 503 && r.duration_ticks == 1);
	T_STREQ(r.activity_id, "x");
	T_STREQ(r.path, "/later");
	/* numbers that are not: absent */
	T_CHECK(make(&x, DS, "Activity1Stop", "Microsoft.AspNetCore", junk) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 1);
	T_CHECK(r.status == 0 && r.duration_ticks == -1);
	T_STREQ(r.activity_id, "");
	/* not a request event */
	T_CHECK(make(&x, DS, "Activity2Start", "Microsoft.AspNetCore", start) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 0);
	T_CHECK(make(&x, "Microsoft-Diagnostics-DiagnosticSourceX", "Activity1Start", "Microsoft.AspNetCore", start) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 0);
	T_CHECK(make(&x, DS, "Activity1Start", "HttpHandlerDiagnosticListener", start) == 0);
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 0);
	/* an event without a field list, or without Arguments */
	x.p.n = 0;
	x.m.name = "Activity1Start";
	T_CHECK(aspnet_req_event(&x.e, &x.p, &r) == 0);
	evpayload_free(&x.p);
	buf_free(&x.b);
}

static void provider(void)
{
	struct trace_config c = { 0 };
	struct err_msg em;

	T_CHECK(aspnet_req_provider(&c, &em) == 0);
	T_CHECK(c.n == 1 && c.rundown == 0);
	T_STREQ(c.p[0].name, "Microsoft-Diagnostics-DiagnosticSource");
	T_CHECK(c.p[0].keywords == 0x3 && c.p[0].level == 5);
	T_CHECK(strncmp(c.p[0].args, "FilterAndPayloadSpecs=\"Microsoft.AspNetCore/Microsoft.AspNetCore.Hosting."
				     "HttpRequestIn.Start@Activity1Start:-", 93) == 0);
	T_CHECK(strstr(c.p[0].args, "HttpRequestIn.Stop@Activity1Stop:-ActivityId=*Activity.Id;Request.Path;"
				    "Response.StatusCode;ActivityDuration=*Activity.Duration.Ticks\r\n") != NULL);
	trace_config_free(&c);
	/* the Http profile's provider is the same one: both in one session merge */
	T_CHECK(trace_config_profile("Http", 1, &c, &em) == 0);
	T_CHECK(aspnet_req_provider(&c, &em) == 0);
	T_CHECK(c.n == 1);
	trace_config_free(&c);
}

struct seen {
	struct evpayload p;
	int starts, root_ok, missing_404, other;
	char ids[10][64];
	int paired;
};

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct seen *s = ctx;
	struct aspnet_req r;
	struct err_msg em;

	if (e->meta->n_fields == 0 || evpayload_decode(&s->p, e, &em) != 0 || !aspnet_req_event(e, &s->p, &r))
		return 0;
	if (r.kind == ASPNET_REQ_START) {
		if (s->starts < 10)
			snprintf(s->ids[s->starts], sizeof(s->ids[0]), "%s", r.activity_id);
		s->starts++;
		return 0;
	}
	if (strcmp(r.path, "/") == 0 && r.status == 200 && r.duration_ticks > 0)
		s->root_ok++;
	else if (strcmp(r.path, "/no/such/page-26845") == 0 && r.status == 404 && r.duration_ticks > 0)
		s->missing_404++;
	else
		s->other++;
	for (int i = 0; i < 10 && i < s->starts; i++)
		if (strcmp(s->ids[i], r.activity_id) == 0)
			s->paired++;
	return 0;
}

static void real_trace(void)
{
	struct seen s = { 0 };
	struct nettrace_callbacks cb = { .event = on_event };
	struct nettrace *t = nettrace_new(NULL, &cb, &s);
	struct err_msg em;
	char buf[65536];
	ssize_t n;
	int fd = open("tests/fuzz/seeds-nettrace/aspnet.nettrace", O_RDONLY), rc = 0;

	T_CHECK(fd >= 0);
	while (rc == 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		rc = nettrace_feed(t, buf, (size_t)n, &em);
	close(fd);
	if (rc == 0)
		rc = nettrace_finish(t, &em);
	nettrace_free(t);
	evpayload_free(&s.p);
	T_CHECK(rc == 0);
	if (s.starts != 10 || s.root_ok != 5 || s.missing_404 != 5 || s.other != 0 || s.paired != 10)
		T_FAIL("starts %d, stops / 200 %d, missing 404 %d, others %d, paired %d", s.starts, s.root_ok,
		       s.missing_404, s.other, s.paired);
}

/* ---- globs ---- */

static bool glob1(const char *include, const char *path)
{
	char *inc[] = { (char *)include };
	struct aspnet_glob *g;
	bool m;

	if (aspnet_glob_new(inc, 1, NULL, 0, &g, NULL) != 0)
		return false;
	m = aspnet_glob_match(g, path);
	aspnet_glob_free(g);
	return m;
}

static void globs_docs(void)
{
	/* collection-rule-configuration.md, "ASP.NET Request Path Wildcards and Globbing" */
	static const struct {
		const char *pattern, *yes[3], *no[2];
	} table[] = {
		{ "**/*", { "/", "/a/b/c.txt", "/x" }, { NULL } },
		{ "/images/**/*", { "/images/logo.png", "/images/products/1.png" }, { "/index/header.png" } },
		{ "**/*.js", { "/script.js", "/path/script.js", "/path/sub/script.js" }, { "/script.js/page.html" } },
		{ "**/sub/*.html", { "/path/sub/page.html", "/sub/page.html" }, { "/sub/script.js", "/path/doc.txt" } },
	};

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
		for (size_t k = 0; k < 3 && table[i].yes[k]; k++)
			if (!glob1(table[i].pattern, table[i].yes[k]))
				T_FAIL("%s should match %s", table[i].pattern, table[i].yes[k]);
		for (size_t k = 0; k < 2 && table[i].no[k]; k++)
			if (glob1(table[i].pattern, table[i].no[k]))
				T_FAIL("%s should not match %s", table[i].pattern, table[i].no[k]);
	}
}

/* dotnet-monitor's GlobMatcherTests: each pattern against every path, and an include with two excludes. */
static void globs_dotnet(void)
{
	static const char *const paths[] = { "/", "/Home/Privacy", "/Home/test.js", "/Home/Sub/Path",
					     "/Home/Sub/Path/test.js", "/Privacy/Sub/Path/test.html",
					     "/About/style.css" };
	static const struct {
		const char *pattern;
		unsigned yes; /* bit i: paths[i] matches */
	} table[] = {
		{ "**/*", 0x7F }, { "**/*.j", 0 }, { "**/Sub/**/*", 0x38 }, { "/", 0x01 }, { "**/*.js", 0x14 },
		{ "/Home/**/*", 0x1E },
	};
	char *inc[] = { "**/*" }, *exc[] = { "**/*.js", "**/*.css" };
	struct aspnet_glob *g;

	for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++)
		for (unsigned k = 0; k < 7; k++)
			if (glob1(table[i].pattern, paths[k]) != !!(table[i].yes & (1u << k)))
				T_FAIL("%s against %s: want %s", table[i].pattern, paths[k],
				       table[i].yes & (1u << k) ? "a match" : "none");
	T_CHECK(aspnet_glob_new(inc, 1, exc, 2, &g, NULL) == 0);
	for (unsigned k = 0; k < 7; k++)
		if (aspnet_glob_match(g, paths[k]) != (k == 0 || k == 1 || k == 3 || k == 5))
			T_FAIL("**/* minus **/*.js and **/*.css against %s", paths[k]);
	aspnet_glob_free(g);
}

/* What a regex built from an escaped pattern does, and how the two lists combine. */
static void globs_corners(void)
{
	char *exc[] = { "/health" }, *inc[] = { "/api/*", "/health" };
	struct aspnet_glob *g;
	struct err_msg em;

	/* case: IgnoreCase | CultureInvariant */
	T_CHECK(glob1("/API/**/*", "/api/v1/Orders"));
	T_CHECK(glob1("/caf\xc3\xa9", "/CAF\xc3\x89"));     /* é, É */
	T_CHECK(glob1("/\xd0\xb4\xce\xb1", "/\xd0\x94\xce\x91")); /* дα, ДΑ */
	T_CHECK(!glob1("/caf\xc3\xa9", "/cafe"));
	/* everything but the two wildcards is itself */
	T_CHECK(!glob1("/a.b", "/axb"));
	T_CHECK(glob1("/a.b", "/a.b"));
	T_CHECK(!glob1("/a?b", "/ab"));
	T_CHECK(glob1("/(x)+[y]|z$^", "/(x)+[y]|z$^"));
	T_CHECK(!glob1("/a|/b", "/b"));
	/* anchored at both ends; "$" also before one final newline */
	T_CHECK(!glob1("/a", "/ab"));
	T_CHECK(!glob1("/a", "x/a"));
	T_CHECK(glob1("/a", "/a\n"));
	T_CHECK(!glob1("/a", "/a\n\n"));
	T_CHECK(glob1("/a\n", "/a\n"));
	/* * stays inside a segment; ** without / is *; **\/ takes whole segments, empty ones too */
	T_CHECK(glob1("/*", "/"));
	T_CHECK(!glob1("/*", "/a/b"));
	T_CHECK(glob1("/**", "/abc"));
	T_CHECK(!glob1("/**", "/a/b"));
	T_CHECK(glob1("/**/x", "/x"));
	T_CHECK(glob1("/**/x", "//x"));
	T_CHECK(glob1("/**/x", "/a/b/c/x"));
	T_CHECK(!glob1("/**/x", "/a/bx"));
	T_CHECK(glob1("a**/b", "ab"));
	T_CHECK(glob1("a**/b", "ac/d/b"));
	T_CHECK(glob1("**/*", "")); /* the regex matches the empty path */
	T_CHECK(!glob1("/", ""));
	/* bytes that are not UTF-8 are themselves */
	T_CHECK(glob1("/\xff*", "/\xff\xfe"));
	T_CHECK(!glob1("/\xff", "/\xfe"));
	/* excludes win; no includes: everything else */
	T_CHECK(aspnet_glob_new(inc, 2, exc, 1, &g, NULL) == 0);
	T_CHECK(aspnet_glob_match(g, "/api/x"));
	T_CHECK(!aspnet_glob_match(g, "/health"));
	T_CHECK(!aspnet_glob_match(g, "/other"));
	aspnet_glob_free(g);
	T_CHECK(aspnet_glob_new(NULL, 0, exc, 1, &g, NULL) == 0);
	T_CHECK(aspnet_glob_match(g, "/other"));
	T_CHECK(!aspnet_glob_match(g, "/HEALTH"));
	aspnet_glob_free(g);
	/* *** is refused, by name */
	exc[0] = "/SomePath/***/*";
	T_CHECK(aspnet_glob_new(inc, 1, exc, 1, &g, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "ExcludePaths '/SomePath/***/*'") != NULL);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Patterns that make a backtracking matcher take exponential time: 4 KiB each way, at once. */
static void globs_hostile(void)
{
	size_t n = 4096;
	char *pat = malloc(n + 1), *path = malloc(n + 1), *inc[1] = { pat };
	struct aspnet_glob *g;
	double t0 = now_s(), took;
	bool m1, m2, m3;

	for (size_t i = 0; i < n; i++)
		pat[i] = i % 2 ? 'a' : '*'; /* *a*a*a... */
	pat[n] = '\0';
	memset(path, 'a', n);
	path[n - 1] = 'b';
	path[n] = '\0';
	T_CHECK(aspnet_glob_new(inc, 1, NULL, 0, &g, NULL) == 0);
	m1 = aspnet_glob_match(g, path);
	aspnet_glob_free(g);
	for (size_t i = 0; i < n; i++) /* **\/ **\/ ... against a deep path that ends wrong */
		pat[i] = "**/"[i % 3];
	pat[n - n % 3] = '\0';
	strcat(pat, "z");
	for (size_t i = 0; i < n; i++)
		path[i] = i % 2 ? '/' : 'a';
	T_CHECK(aspnet_glob_new(inc, 1, NULL, 0, &g, NULL) == 0);
	m2 = aspnet_glob_match(g, path);
	path[n - 2] = '/'; /* ".../a//z": an empty segment is one too */
	path[n - 1] = 'z';
	m3 = aspnet_glob_match(g, path);
	aspnet_glob_free(g);
	took = now_s() - t0;
	free(pat);
	free(path);
	T_CHECK(!m1 && !m2 && m3);
	if (took > 2.0)
		T_FAIL("three 4 KiB x 4 KiB matches took %.2f s", took);
}

/* ---- status codes ---- */

static void status(void)
{
	static const char *const bad[] = { "", "99", "600", "1000", "50x", "500-", "-500", " 500", "500 ", "500 - 599",
					   "500-600", "099", "+500", "500-5999", "5oo", "500,501", "0500" };
	struct aspnet_status_range r[3], x;
	struct err_msg em;

	T_CHECK(aspnet_status_parse("500", &r[0], &em) == 0 && r[0].lo == 500 && r[0].hi == 500);
	T_CHECK(aspnet_status_parse("400-499", &r[1], &em) == 0 && r[1].lo == 400 && r[1].hi == 499);
	T_CHECK(aspnet_status_parse("100-599", &x, &em) == 0 && x.lo == 100 && x.hi == 599);
	T_CHECK(aspnet_status_parse("200-200", &r[2], &em) == 0);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		x = (struct aspnet_status_range){ -1, -1 };
		if (aspnet_status_parse(bad[i], &x, &em) != DP_EINVAL)
			T_FAIL("'%s' was taken", bad[i]);
		T_CHECK(x.lo == -1); /* untouched */
		if (strstr(em.text, bad[i]) == NULL || em.text[0] != '\'')
			T_FAIL("the error does not name '%s': %s", bad[i], em.text);
	}
	T_CHECK(aspnet_status_parse("599-500", &x, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "'599-500'") != NULL && strstr(em.text, "599 is greater than 500") != NULL);
	T_CHECK(aspnet_status_in(r, 3, 500) && aspnet_status_in(r, 3, 404) && aspnet_status_in(r, 3, 200));
	T_CHECK(!aspnet_status_in(r, 3, 501) && !aspnet_status_in(r, 3, 0) && !aspnet_status_in(r, 0, 500));
}

/* ---- the triggers ---- */

/* dotnet-monitor's tests feed the trigger its deconstructed events; so do these. */
static bool start(struct aspnet_trig *t, double s, const char *path, const char *id)
{
	struct aspnet_req r = { .kind = ASPNET_REQ_START, .activity_id = id, .path = path, .duration_ticks = -1 };

	return aspnet_trig_feed(t, &r, (int64_t)(s * 1000));
}

/* the stop of a request started at s that took d seconds */
static bool stop(struct aspnet_trig *t, double s, double d, int code, const char *path, const char *id)
{
	struct aspnet_req r = { .kind = ASPNET_REQ_STOP, .activity_id = id, .path = path, .status = code,
				.duration_ticks = (int64_t)(d * 1e7) };

	return aspnet_trig_feed(t, &r, (int64_t)((s + d) * 1000));
}

static struct aspnet_trig *trig(enum aspnet_trig_type type, long long count, char *include, char *exclude)
{
	static const struct aspnet_status_range codes[] = { { 520, 520 }, { 521, 521 }, { 400, 500 } };
	char *inc[1] = { include }, *exc[1] = { exclude };
	struct aspnet_trig_config c = { .type = type, .count = count, .window_ms = 60000, .duration_ms = 3000,
					.status = codes, .n_status = 3, .include = inc, .n_include = include != NULL,
					.exclude = exc, .n_exclude = exclude != NULL };
	struct aspnet_trig *t = NULL;
	struct err_msg em;

	if (aspnet_trig_new(&c, &t, &em) != 0)
		fprintf(stderr, "aspnet_trig_new: %s\n", em.text);
	return t;
}

/* SlidingWindowTests, through a count trigger: points merge within a second, drop out past the window. */
static void window(void)
{
	struct aspnet_trig_config c = { .type = ASPNET_TRIG_COUNT, .count = 1000, .window_ms = 30000 };
	static const double at[] = { 0, 0, 0, 10, 15, 20, 20.5, 25 };
	struct aspnet_trig *t;

	T_CHECK(aspnet_trig_new(&c, &t, NULL) == 0);
	T_CHECK(!start(t, 0, "/", "a"));
	T_CHECK(aspnet_trig_count(t) == 1);
	for (size_t i = 1; i < sizeof(at) / sizeof(at[0]); i++)
		start(t, at[i], "/", "a");
	T_CHECK(aspnet_trig_count(t) == 8);
	start(t, 42, "/", "a");
	T_CHECK(aspnet_trig_count(t) == 5);
	start(t, 52, "/", "a");
	T_CHECK(aspnet_trig_count(t) == 3);
	start(t, 100, "/", "a");
	T_CHECK(aspnet_trig_count(t) == 1);
	aspnet_trig_reset(t);
	T_CHECK(aspnet_trig_count(t) == 0);
	/* one request a second for an hour: the 31 s of the window (both ends) */
	for (int s = 0; s < 3600; s++)
		start(t, s, "/", "a");
	T_CHECK(aspnet_trig_count(t) == 31);
	aspnet_trig_free(t);
	/* a window of a day, one request a second for two days */
	c.window_ms = 86400000;
	T_CHECK(aspnet_trig_new(&c, &t, NULL) == 0);
	for (int s = 0; s < 2 * 86400; s++)
		start(t, s, "/", "a");
	T_CHECK(aspnet_trig_count(t) == 86401);
	aspnet_trig_free(t);
}

/* TestAspNetRequestCount and TestAspNetRequestCountExclusions. */
static void count(void)
{
	struct aspnet_trig *t = trig(ASPNET_TRIG_COUNT, 3, "/", NULL);

	T_CHECK(t != NULL);
	T_CHECK(!start(t, 0, "/", "1"));
	T_CHECK(!start(t, 30, "/notIncluded", "2"));
	T_CHECK(!start(t, 30, "/notIncluded", "3"));
	T_CHECK(!start(t, 30, "/notIncluded", "4"));
	T_CHECK(!start(t, 30, "/", "5"));
	T_CHECK(!start(t, 70, "/", "6")); /* the first one drops out */
	T_CHECK(start(t, 70.5, "/", "7"));
	T_CHECK(!stop(t, 70.5, 1, 200, "/", "7")); /* stops are not counted, and do not say it again */
	aspnet_trig_free(t);

	t = trig(ASPNET_TRIG_COUNT, 3, NULL, "/");
	T_CHECK(!start(t, 0, "/", "1"));
	T_CHECK(!start(t, 1, "/", "2"));
	T_CHECK(!start(t, 1, "/", "3"));
	T_CHECK(!start(t, 1, "/", "4"));
	T_CHECK(!start(t, 1, "/notExcluded", "5"));
	T_CHECK(!start(t, 1, "/notExcluded", "6"));
	T_CHECK(start(t, 11, "/notExcluded", "7"));
	aspnet_trig_free(t);
}

/* TestAspNetDuration: the events in the order they come (stops by when they end). */
static void duration(void)
{
	struct aspnet_trig *t = trig(ASPNET_TRIG_DURATION, 3, NULL, NULL);

	T_CHECK(t != NULL);
	T_CHECK(!start(t, 0, "/", "s1"));
	T_CHECK(!start(t, 1, "/", "s2"));
	T_CHECK(!start(t, 1, "/", "s3"));
	T_CHECK(!stop(t, 1, 1, 200, "/", "s3")); /* fast */
	T_CHECK(!stop(t, 0, 3.1, 200, "/", "s1"));
	T_CHECK(!stop(t, 1, 10, 200, "/", "s2"));
	T_CHECK(aspnet_trig_count(t) == 2);
	T_CHECK(!start(t, 300, "/", "s4")); /* pushes the window past them */
	T_CHECK(!start(t, 301, "/", "s5"));
	T_CHECK(!start(t, 301, "/", "s6"));
	T_CHECK(!stop(t, 301, 10, 200, "/", "s5"));
	T_CHECK(!stop(t, 300, 15, 200, "/", "s4"));
	T_CHECK(stop(t, 301, 20, 200, "/", "s6"));
	T_CHECK(aspnet_trig_inflight(t) == 0);
	/* exactly RequestDuration is slow; a stop never started, or excluded, is not counted */
	aspnet_trig_reset(t);
	T_CHECK(!start(t, 0, "/", "a"));
	T_CHECK(!stop(t, 0, 3, 200, "/", "a"));
	T_CHECK(!stop(t, 0, 30, 200, "/", "never-started"));
	T_CHECK(aspnet_trig_count(t) == 1);
	/* no activity ID: nothing to pair by */
	T_CHECK(!start(t, 0, "/", ""));
	T_CHECK(aspnet_trig_inflight(t) == 0);
	aspnet_trig_free(t);
}

/* TestAspNetDurationHungRequests: three requests that have not ended, a heartbeat at 15 s; their stops after. */
static void hung(void)
{
	struct aspnet_trig *t = trig(ASPNET_TRIG_DURATION, 3, NULL, NULL);

	T_CHECK(t != NULL);
	T_CHECK(!start(t, 0, "/", "s1"));
	T_CHECK(!start(t, 1, "/", "s2"));
	T_CHECK(!start(t, 2, "/", "s3"));
	T_CHECK(aspnet_trig_heartbeat(t, 15000));
	T_CHECK(aspnet_trig_count(t) == 3 && aspnet_trig_inflight(t) == 0);
	aspnet_trig_reset(t);
	/* counted once: a later heartbeat and the request's own stop do not count it again */
	T_CHECK(!start(t, 100, "/", "h"));
	T_CHECK(!start(t, 101, "/", "fast"));
	T_CHECK(!aspnet_trig_heartbeat(t, 101500)); /* the first heartbeat is looked at: nothing slow yet */
	T_CHECK(!aspnet_trig_heartbeat(t, 110000)); /* within 9 s of it: not looked at */
	T_CHECK(aspnet_trig_count(t) == 0 && aspnet_trig_inflight(t) == 2);
	T_CHECK(!aspnet_trig_heartbeat(t, 110501)); /* 9.001 s on: both have run 3 s or more, both counted */
	T_CHECK(aspnet_trig_count(t) == 2 && aspnet_trig_inflight(t) == 0);
	T_CHECK(!stop(t, 100, 60, 200, "/", "h"));
	T_CHECK(!stop(t, 101, 12, 200, "/", "fast"));
	T_CHECK(!aspnet_trig_heartbeat(t, 130000));
	T_CHECK(aspnet_trig_count(t) == 2);
	/* the heartbeat's request counted at the heartbeat's time, then the window goes on from there */
	T_CHECK(!start(t, 131, "/", "x"));
	T_CHECK(stop(t, 131, 4, 500, "/", "x"));
	aspnet_trig_free(t);
	/* a request under RequestDuration at the heartbeat stays followed */
	t = trig(ASPNET_TRIG_DURATION, 1, NULL, NULL);
	T_CHECK(!start(t, 10, "/", "young"));
	T_CHECK(!aspnet_trig_heartbeat(t, 12000));
	T_CHECK(aspnet_trig_inflight(t) == 1);
	T_CHECK(aspnet_trig_heartbeat(t, 21001));
	T_CHECK(!stop(t, 10, 20, 200, "/", "young"));
	/* COUNT and STATUS take no heartbeat */
	aspnet_trig_free(t);
	t = trig(ASPNET_TRIG_COUNT, 1, NULL, NULL);
	T_CHECK(start(t, 0, "/", "a"));
	T_CHECK(!aspnet_trig_heartbeat(t, 1000));
	aspnet_trig_free(t);
}

/* TestAspNetStatus: 520, 521 and 400-500. */
static void status_trigger(void)
{
	struct aspnet_trig *t = trig(ASPNET_TRIG_STATUS, 3, NULL, NULL);

	T_CHECK(t != NULL);
	T_CHECK(!start(t, 0, "/", "s1"));
	T_CHECK(!start(t, 1, "/", "s2"));
	T_CHECK(!start(t, 1, "/", "s3"));
	T_CHECK(!stop(t, 1, 1, 200, "/", "s3"));
	T_CHECK(!stop(t, 0, 3.1, 404, "/", "s1"));
	T_CHECK(!stop(t, 1, 10, 420, "/", "s2"));
	T_CHECK(!start(t, 300, "/", "s4"));
	T_CHECK(!start(t, 301, "/", "s5"));
	T_CHECK(!start(t, 301, "/", "s6"));
	T_CHECK(!start(t, 301, "/", "s7"));
	T_CHECK(!stop(t, 301, 10, 521, "/", "s5"));
	T_CHECK(!stop(t, 300, 15, 520, "/", "s4"));
	T_CHECK(!stop(t, 301, 10, 200, "/", "s6"));
	T_CHECK(stop(t, 301, 20, 404, "/", "s7"));
	aspnet_trig_free(t);
	/* paths: an excluded one's 500s do not count */
	t = trig(ASPNET_TRIG_STATUS, 2, "/api/**/*", "/api/health");
	T_CHECK(!stop(t, 0, 0.1, 500, "/api/health", "a"));
	T_CHECK(!stop(t, 0, 0.1, 500, "/other", "b"));
	T_CHECK(!stop(t, 0, 0.1, 500, "/API/Orders", "c"));
	T_CHECK(stop(t, 0, 0.1, 499, "/api/v2/x", "d"));
	aspnet_trig_free(t);
}

/* The in-flight cap: the oldest started go first, their stops are then not counted; memory stays bounded. */
static void cap(void)
{
	struct aspnet_trig_config c = { .type = ASPNET_TRIG_DURATION, .count = 1000000, .window_ms = 60000,
					.duration_ms = 0, .max_inflight = 4 };
	struct aspnet_trig *t;
	char id[64];

	T_CHECK(aspnet_trig_new(&c, &t, NULL) == 0);
	for (int i = 0; i < 6; i++) {
		snprintf(id, sizeof(id), "r%d", i);
		start(t, i, "/", id);
	}
	T_CHECK(aspnet_trig_inflight(t) == 4 && aspnet_trig_dropped(t) == 2);
	for (int i = 0; i < 6; i++) {
		snprintf(id, sizeof(id), "r%d", i);
		stop(t, i, 100, 200, "/", id);
	}
	T_CHECK(aspnet_trig_count(t) == 4 && aspnet_trig_inflight(t) == 0);
	aspnet_trig_free(t);

	/* the default cap, 10,000, with 10,050 requests that never end, then all their stops */
	c.max_inflight = 0;
	T_CHECK(aspnet_trig_new(&c, &t, NULL) == 0);
	for (int i = 0; i < ASPNET_TRIG_MAX_INFLIGHT + 50; i++) {
		snprintf(id, sizeof(id), "00-%032d-%016d-01", i, i);
		start(t, i / 1000.0, "/", id);
	}
	T_CHECK(aspnet_trig_inflight(t) == ASPNET_TRIG_MAX_INFLIGHT && aspnet_trig_dropped(t) == 50);
	for (int i = 0; i < ASPNET_TRIG_MAX_INFLIGHT + 50; i++) {
		snprintf(id, sizeof(id), "00-%032d-%016d-01", i, i);
		stop(t, i / 1000.0, 1, 200, "/", id);
	}
	T_CHECK(aspnet_trig_inflight(t) == 0 && aspnet_trig_count(t) == ASPNET_TRIG_MAX_INFLIGHT);
	aspnet_trig_free(t);
}

/* Starts and stops in a random order against a plain list of what should be followed. */
static void table(void)
{
	struct aspnet_trig_config c = { .type = ASPNET_TRIG_DURATION, .count = 1 << 30, .window_ms = 60000,
					.duration_ms = 0, .max_inflight = 300 };
	static bool live[1000];
	struct aspnet_trig *t;
	unsigned seed = 7;
	size_t n = 0, counted = 0;
	char id[16];

	T_CHECK(aspnet_trig_new(&c, &t, NULL) == 0);
	for (int step = 0; step < 200000; step++) {
		int k;

		seed = seed * 1103515245u + 12345u;
		k = (int)((seed >> 8) % 1000);
		snprintf(id, sizeof(id), "id%d", k);
		if (!live[k] && n < 300) {
			start(t, 0, "/", id);
			live[k] = true;
			n++;
		} else if (live[k]) {
			stop(t, 0, 1, 200, "/", id);
			live[k] = false;
			n--;
			counted++;
		} else {
			stop(t, 0, 1, 200, "/", id); /* not followed: not counted */
		}
		if (aspnet_trig_inflight(t) != n || (long long)counted != aspnet_trig_count(t))
			T_FAIL("step %d: following %zu, want %zu; counted %lld, want %zu", step, aspnet_trig_inflight(t), n,
			       aspnet_trig_count(t), counted);
	}
	aspnet_trig_free(t);
}

static void config(void)
{
	struct aspnet_status_range bad = { 600, 601 };
	char *inc[] = { "/a/***" };
	struct aspnet_trig_config c = { .type = ASPNET_TRIG_STATUS, .count = 1, .window_ms = 1000 };
	struct aspnet_trig *t = NULL;
	struct err_msg em;

	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL && strstr(em.text, "StatusCodes") != NULL);
	c.status = &bad;
	c.n_status = 1;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL && strstr(em.text, "600-601") != NULL);
	c.type = ASPNET_TRIG_COUNT;
	c.count = 0;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL && strstr(em.text, "RequestCount") != NULL);
	c.count = 1;
	c.window_ms = 999;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL && strstr(em.text, "SlidingWindowDuration") != NULL);
	c.window_ms = 86400001;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL);
	c.window_ms = 86400000;
	c.type = ASPNET_TRIG_DURATION;
	c.duration_ms = 3600001;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL && strstr(em.text, "RequestDuration") != NULL);
	c.duration_ms = 3600000;
	c.include = inc;
	c.n_include = 1;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == DP_EINVAL && strstr(em.text, "IncludePaths '/a/***'") != NULL);
	T_CHECK(t == NULL);
	c.n_include = 0;
	T_CHECK(aspnet_trig_new(&c, &t, &em) == 0 && t != NULL);
	aspnet_trig_free(t);
	aspnet_trig_free(NULL);
	aspnet_glob_free(NULL);
}

int main(void)
{
	t_file_name = "aspnet_req";
	T_RUN(events);
	T_RUN(provider);
	T_RUN(real_trace);
	T_RUN(globs_docs);
	T_RUN(globs_dotnet);
	T_RUN(globs_corners);
	T_RUN(globs_hostile);
	T_RUN(status);
	T_RUN(window);
	T_RUN(count);
	T_RUN(duration);
	T_RUN(hung);
	T_RUN(status_trigger);
	T_RUN(cap);
	T_RUN(table);
	T_RUN(config);
	return t_failed_cases ? 1 : 0;
}
