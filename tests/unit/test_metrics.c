/*
 * test_metrics.c - counters and logs from EventPipe events: payloads read by
 * their field list (eventpipe/evpayload.h), dotnet-monitor's Prometheus names
 * (launcher/metrics/metrics.h; the cases are dotnet-monitor's own unit-test table for
 * PrometheusDataModel), the /livemetrics and /logs converters, and their
 * request documents. The events come from a real .NET 10 trace
 * (tests/fuzz/seeds-nettrace/meters.nettrace: System.Runtime and ASP.NET Core
 * EventCounters, the Meter API's shared session, and logging with a scope,
 * taken with /trace from the webapp).
 */
#include <fcntl.h>
#include <jansson.h>
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "eventpipe/evpayload.h"
#include "launcher/trace/logs.h"
#include "launcher/metrics/metrics.h"
#include "eventpipe/nettrace.h"
#include "settings.h"
#include "t.h"

static char *slurp(const char *path, size_t *n)
{
	struct buf b;
	char chunk[65536];
	ssize_t k;
	int fd = open(path, O_RDONLY);

	buf_init(&b, 0);
	if (fd < 0)
		return NULL;
	while ((k = read(fd, chunk, sizeof(chunk))) > 0)
		buf_append(&b, chunk, (size_t)k);
	close(fd);
	*n = b.len;
	return b.data;
}

/* Feed the fixture through callbacks; 0 when it read whole. */
static int feed_file(const char *path, const struct nettrace_callbacks *cb, void *ctx)
{
	size_t n = 0;
	char *data = slurp(path, &n);
	struct nettrace *t;
	struct err_msg em;
	int rc;

	if (data == NULL)
		return -1;
	t = nettrace_new(NULL, cb, ctx);
	rc = nettrace_feed(t, data, n, &em);
	if (rc == 0)
		rc = nettrace_finish(t, &em);
	nettrace_free(t);
	free(data);
	return rc;
}

static int feed(const struct nettrace_callbacks *cb, void *ctx)
{
	return feed_file("tests/fuzz/seeds-nettrace/meters.nettrace", cb, ctx);
}

static void names(void)
{
	static const struct {
		const char *provider, *metric, *unit, *want;
	} cases[] = {
		{ "System.Runtime", "cpu-usage", "%", "systemruntime_cpu_usage_ratio" },
		{ "System.Runtime", "working-set", "MB", "systemruntime_working_set_bytes" },
		{ "System.Runtime", "gc-heap-size", "MB", "systemruntime_gc_heap_size_bytes" },
		{ "System.Runtime", "gen-0-gc-count", "count", "systemruntime_gen_0_gc_count" },
		{ "System.Runtime", "threadpool-thread-count", "", "systemruntime_threadpool_thread_count" },
		{ "System.Runtime", "alloc-rate", "B", "systemruntime_alloc_rate_bytes" },
		{ "System.Runtime", "gc-fragmentation", "%", "systemruntime_gc_fragmentation_ratio" },
		{ "System.Runtime", "il-bytes-jitted", "B", "systemruntime_il_bytes_jitted_bytes" },
		{ "System.Runtime", "time-in-jit", "ms", "systemruntime_time_in_jit_ms" },
		{ "Microsoft.AspNetCore.Hosting", "requests-per-second", "count",
		  "microsoftaspnetcorehosting_requests_per_second" },
		{ "Microsoft.AspNetCore.Hosting", "total-requests", "", "microsoftaspnetcorehosting_total_requests" },
		{ "Test-Provider", "Test-Metric", "b", "testprovider_Test_Metric_bytes" },
		{ "!@#", "#@#", "b", "______bytes" },
		{ "Asp-Net-Provider", "Requests!Received", "0$customs", "aspnetprovider_Requests_Received___customs" },
		{ "a", "b", NULL, "a_b" },
		{ "Unicode\xce\xac\xce\xae\xce\xb0Letter", "Unicode\xe0\xaf\xaf" "Digit", NULL, "unicodeletter_Unicode_Digit" },
		/* the Meter API's instruments and UCUM units, by the same rule */
		{ "System.Runtime", "dotnet.gc.collections", "{collection}", "systemruntime_dotnet_gc_collections__collection_" },
		{ "System.Runtime", "dotnet.process.memory.working_set", "By", "systemruntime_dotnet_process_memory_working_set_By" },
	};
	struct buf b;

	buf_init(&b, 0);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		buf_reset(&b);
		metrics_prom_name(&b, cases[i].provider, cases[i].metric, cases[i].unit);
		if (strcmp(b.data, cases[i].want) != 0)
			T_FAIL("%s/%s/%s: %s, want %s", cases[i].provider, cases[i].metric, cases[i].unit ? cases[i].unit : "null",
			       b.data, cases[i].want);
	}
	buf_free(&b);
}

static void values(void)
{
	static const struct {
		const char *unit;
		double v;
		const char *want;
	} cases[] = {
		{ "", 225, "225" },	   { "MB", 9, "9000000" },
		{ "mb", 112, "112000000" }, { "B", 178936, "178936" },
		{ "%", 0.691783039570667, "0.691783039570667" }, { "%", 0, "0" },
		{ "", 0.1, "0.1" },	   { "", -2.5, "-2.5" },
		{ "", 1e300, "1e+300" },   { "", INFINITY, "+Inf" },
		{ "", -INFINITY, "-Inf" }, { "", NAN, "NaN" },
	};
	char out[32];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		metrics_prom_value(out, sizeof(out), cases[i].unit, cases[i].v);
		if (strcmp(out, cases[i].want) != 0)
			T_FAIL("%s %g: %s, want %s", cases[i].unit, cases[i].v, out, cases[i].want);
	}
}

static void labels(void)
{
	struct buf b;

	buf_init(&b, 0);
	metrics_prom_labels(&b, "http.route=/a,status=2\"0\\0", '=', -1);
	T_STREQ(b.data, "http_route=\"/a\", status=\"2\\\"0\\\\0\"");
	buf_reset(&b);
	metrics_prom_labels(&b, "k:v,broken", ':', -1); /* one bad pair: none are used */
	T_CHECK(b.len == 0);
	buf_reset(&b);
	metrics_prom_labels(&b, "", '=', 0.95);
	T_STREQ(b.data, "quantile=\"0.95\"");
	buf_reset(&b);
	metrics_prom_labels(&b, "a=x\ny", '=', 0.5);
	T_STREQ(b.data, "a=\"x\\ny\", quantile=\"0.5\"");
	buf_free(&b);
}

/* ---- readings from the real trace ---- */

struct seen {
	struct evpayload pl;
	int counters, rates, meters, summaries, logs, bad;
	double cpu;
	char hist_unit[16];
	char logger[32];
};

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct seen *s = ctx;
	struct msample r;
	struct err_msg em;

	if (e->meta->n_fields == 0)
		return 0;
	if (evpayload_decode(&s->pl, e, &em) != 0) {
		s->bad++;
		return 0;
	}
	if (strcmp(e->meta->name, "MessageJson") == 0) {
		s->logs++;
		snprintf(s->logger, sizeof(s->logger), "%s", evpayload_str(&s->pl, "LoggerName"));
	}
	if (!metrics_sample(e, &s->pl, &r))
		return 0;
	if (!r.meter) {
		s->counters++;
		s->rates += r.kind == MS_RATE;
		if (strcmp(r.name, "cpu-usage") == 0 && strcmp(r.unit, "%") == 0 && r.kind == MS_GAUGE)
			s->cpu = r.value;
	} else {
		s->meters++;
	}
	if (r.kind == MS_SUMMARY) {
		s->summaries++;
		snprintf(s->hist_unit, sizeof(s->hist_unit), "%s", r.unit);
	}
	return 0;
}

static void readings(void)
{
	struct seen s = { 0 };
	struct nettrace_callbacks cb = { .event = on_event };

	T_CHECK(feed(&cb, &s) == 0);
	evpayload_free(&s.pl);
	if (s.bad)
		T_FAIL("%d payloads did not match their field lists", s.bad);
	/* 120 EventCounters events (108 System.Runtime + 12 ASP.NET Core), Sum ones among them */
	if (s.counters != 120 || s.rates == 0)
		T_FAIL("EventCounters readings %d (rates %d), want 120", s.counters, s.rates);
	T_CHECK(s.cpu >= 0 && s.cpu <= 100);
	if (s.meters < 100 || s.summaries != 4)
		T_FAIL("meter readings %d, histograms %d", s.meters, s.summaries);
	T_STREQ(s.hist_unit, "s");
	T_CHECK(s.logs == 6);
	T_STREQ(s.logger, "Test.Logs");
}

static void bad_payloads(void)
{
	struct nettrace_field f[] = { { "Payload", NT_OBJECT, 0, 2 }, { "Name", NT_STRING, 0, 0 }, { "Mean", NT_DOUBLE, 0, 0 } };
	struct nettrace_meta m = { .provider = "P", .name = "EventCounters", .fields = f, .n_fields = 3 };
	uint8_t p[32] = { 'x', 0, 0, 0, 1, 2, 3 }; /* "x", then 3 bytes of an 8-byte double */
	struct nettrace_event e = { .meta = &m, .payload = p, .payload_len = 7 };
	struct evpayload pl = { 0 };
	struct err_msg em;

	T_CHECK(evpayload_decode(&pl, &e, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "ends inside a field") != NULL);
	e.payload_len = 1; /* inside the string */
	T_CHECK(evpayload_decode(&pl, &e, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "without its end") != NULL);
	f[2].type = 99;
	e.payload_len = 12;
	T_CHECK(evpayload_decode(&pl, &e, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "unknown type") != NULL);
	f[2].type = NT_DOUBLE;
	f[0].n_fields = 7; /* more members than the list holds */
	T_CHECK(evpayload_decode(&pl, &e, &em) == DP_ESYNTAX);
	f[0].n_fields = 2;
	T_CHECK(evpayload_decode(&pl, &e, &em) == 0);
	T_CHECK(pl.n == 3 && pl.v[1].depth == 1);
	T_STREQ(evpayload_str(&pl, "Name"), "x");
	evpayload_free(&pl);
}

/* ---- the converters ---- */

static void live(void)
{
	struct metrics_selection sel = { 0 };
	struct buf out;
	struct metrics_live *l;
	struct err_msg em;
	const char *doc = "{\"includeDefaultProviders\":false,\"providers\":[{\"providerName\":\"System.Runtime\","
			  "\"counterNames\":[\"cpu-usage\"]}],\"meters\":[{\"meterName\":\"Microsoft.AspNetCore.Hosting\"}]}";
	size_t records = 0, hist = 0;

	T_CHECK(metrics_selection_json(doc, strlen(doc), &sel, &em) == 0);
	buf_init(&out, 0);
	l = metrics_live_new(&sel, &out);
	T_CHECK(feed(&metrics_live_callbacks, l) == 0);
	for (char *p = out.data; p && *p;) {
		char *end = strchr(p, '\n');
		json_t *o;

		if (*p != 0x1e || end == NULL)
			T_FAIL("not a json-seq record at %zu", (size_t)(p - out.data));
		*end = '\0';
		o = json_loads(p + 1, 0, NULL);
		if (o == NULL)
			T_FAIL("not JSON: %.80s", p + 1);
		if (strcmp(json_string_value(json_object_get(o, "name")), "cpu-usage") != 0 &&
		    strcmp(json_string_value(json_object_get(o, "provider")), "Microsoft.AspNetCore.Hosting") != 0)
			T_FAIL("not selected: %.120s", p + 1);
		hist += json_is_object(json_object_get(o, "value")) &&
			json_object_get(json_object_get(o, "value"), "0.95") != NULL;
		json_decref(o);
		records++;
		p = end + 1;
	}
	T_CHECK(records == metrics_live_records(l));
	if (records < 5 || hist != 4)
		T_FAIL("%zu records, %zu histograms", records, hist);
	metrics_live_free(l);
	buf_free(&out);
}

/* The entry whose Message is msg in ndjson out, its Scopes as compact JSON text (new), or NULL. */
static char *scopes_of_message(const struct buf *out, const char *msg)
{
	char *found = NULL;

	for (const char *p = out->data, *nl; p && *p && found == NULL; p = nl ? nl + 1 : NULL) {
		json_t *o = json_loadb(p, (nl = strchr(p, '\n')) ? (size_t)(nl - p) : strlen(p), 0, NULL);
		json_t *m = json_object_get(o, "Message");

		if (json_is_string(m) && strcmp(json_string_value(m), msg) == 0)
			found = json_dumps(json_object_get(o, "Scopes") ? json_object_get(o, "Scopes") : json_array(),
					   JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENCODE_ANY);
		json_decref(o);
	}
	return found;
}

/* Each ...Id":"VALUE" in s (may be NULL) made ...Id":"*": connection and request ids differ per run. */
static void blank_ids(char *s)
{
	for (char *p = s; p && (p = strstr(p, "Id\":\"")) != NULL;) {
		char *end = strchr(p += 5, '"');

		if (end == NULL)
			return;
		*p++ = '*';
		memmove(p, end, strlen(end) + 1);
	}
}

/*
 * scopes.nettrace: /trace of the webapp with the logging provider and TplEventSource's TasksFlowActivityIds,
 * while it served /log (a scope RequestNumber=42) and three concurrent /scoped requests, whose scopes start,
 * log and stop on different threads. Each message's scopes as the app's JSON console printed them.
 */
static void logs_formats(void)
{
	static const char *const trace = "tests/fuzz/seeds-nettrace/scopes.nettrace";
	static const struct {
		const char *msg, *scopes;
	} cases[] = {
		{ "job 2 step 1", "[{\"ConnectionId\":\"*\"},{\"RequestId\":\"*\",\"RequestPath\":\"/scoped\"},"
				  "{\"Job\":\"2\",\"{OriginalFormat}\":\"job {Job}\"}]" },
		{ "job 2 step 2", "[{\"ConnectionId\":\"*\"},{\"RequestId\":\"*\",\"RequestPath\":\"/scoped\"},"
				  "{\"Job\":\"2\",\"{OriginalFormat}\":\"job {Job}\"},{\"Stage\":\"nested-2\"}]" },
		{ "job 3 step 3", "[{\"ConnectionId\":\"*\"},{\"RequestId\":\"*\",\"RequestPath\":\"/scoped\"},"
				  "{\"Job\":\"3\",\"{OriginalFormat}\":\"job {Job}\"}]" },
		{ "job 1 step 4", "[{\"ConnectionId\":\"*\"},{\"RequestId\":\"*\",\"RequestPath\":\"/scoped\"}]" },
		{ "test message 1 hello", "[{\"ConnectionId\":\"*\"},{\"RequestId\":\"*\",\"RequestPath\":\"/log\"},"
					  "{\"RequestNumber\":\"42\",\"{OriginalFormat}\":\"request {RequestNumber}\"}]" },
	};
	struct logs_filter f = { .level = -1, .use_app_filters = true };
	struct buf out;
	struct logs *l;

	buf_init(&out, 0);
	l = logs_new(&f, LOGS_NDJSON, &out);
	T_CHECK(feed_file(trace, &logs_callbacks, l) == 0);
	logs_flush(l);
	T_CHECK(logs_entries(l) == 78);
	T_CHECK(strstr(out.data, "\"LogLevel\":\"Warning\",\"EventId\":7,\"EventName\":\"TestEvent\",\"Category\":"
				 "\"Test.Logs\",\"Message\":\"test message 0 hello\"") != NULL);
	T_CHECK(strstr(out.data, "\"State\":{\"Message\":\"test message 0 hello\",\"Index\":\"0\",\"Text\":\"hello\"") !=
		NULL);
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = scopes_of_message(&out, cases[i].msg);

		blank_ids(got);
		if (got == NULL || strcmp(got, cases[i].scopes) != 0) {
			T_FAIL("%s: scopes %s, want %s", cases[i].msg, got ? got : "(no entry)", cases[i].scopes);
		}
		free(got);
	}
	logs_free(l);
	buf_reset(&out);
	l = logs_new(&f, LOGS_TEXT, &out);
	T_CHECK(feed_file(trace, &logs_callbacks, l) == 0);
	logs_flush(l);
	T_CHECK(strstr(out.data, "Z info: Test.Scopes[0]\n      => ConnectionId:") != NULL);
	T_CHECK(strstr(out.data, " => Job:2, {OriginalFormat}:job {Job} => Stage:nested-2\n      job 2 step 2\n") != NULL);
	T_CHECK(strstr(out.data, "\n      test message 1 hello\n") != NULL);
	logs_free(l);
	buf_reset(&out);
	f.level = 4; /* Error and above: none in the trace */
	l = logs_new(&f, LOGS_JSON_SEQ, &out);
	T_CHECK(feed_file(trace, &logs_callbacks, l) == 0);
	logs_flush(l);
	T_CHECK(logs_entries(l) == 0 && out.len == 0);
	logs_free(l);
	/* a session that ended before any event (a CollectLogs action whose runtime went away): nothing held, no
	   list at all (SANITIZER=undefined stopped the agent at memmove(NULL, NULL, 0)) */
	l = logs_new(&f, LOGS_NDJSON, &out);
	logs_flush(l);
	logs_flush(l);
	T_CHECK(logs_entries(l) == 0 && out.len == 0);
	logs_free(l);
	buf_free(&out);
}

static void documents(void)
{
	struct logs_filter f;
	struct trace_config c;
	struct metrics_selection s;
	struct err_msg em;
	const char *ok = "{\"filterSpecs\":{\"Test.Logs\":\"Debug\",\"Microsoft\":null},\"logLevel\":\"Warning\","
			 "\"useAppFilters\":false}";

	T_CHECK(logs_filter_json(ok, strlen(ok), &f, &em) == 0);
	T_CHECK(f.n == 2 && f.level == 3 && !f.use_app_filters);
	T_CHECK(logs_trace_config(&f, &c, &em) == 0);
	T_CHECK(c.n == 2 && c.p[0].keywords == 0x8 && c.p[0].level == 5); /* Debug for one category: Verbose */
	T_STREQ(c.p[1].name, "System.Threading.Tasks.TplEventSource");
	T_CHECK(c.p[1].keywords == 0x80 && c.p[1].level == 4); /* TasksFlowActivityIds, Informational */
	T_STREQ(c.p[0].args, "FilterSpecs=\"Test.Logs:Debug;Microsoft\"");
	trace_config_free(&c);
	logs_filter_free(&f);
	T_CHECK(logs_filter_json("{\"logLevel\":\"Loud\"}", 19, &f, &em) == DP_EINVAL && strstr(em.text, "logLevel"));
	T_CHECK(logs_filter_json("{\"filterSpecs\":{\"a;b\":\"Debug\"}}", 31, &f, &em) == DP_EINVAL &&
		strstr(em.text, "a;b"));
	T_CHECK(logs_filter_json("[1]", 3, &f, &em) == DP_EINVAL);
	T_CHECK(metrics_selection_json("{}", 2, &s, &em) == 0 && s.n == 5); /* the defaults */
	T_CHECK(metrics_trace_config(&s, 5, "c1", &c, &em) == 0);
	T_CHECK(c.n == 4); /* three EventCounter sources and the meters' provider */
	T_STREQ(c.p[0].args, "EventCounterIntervalSec=5");
	T_STREQ(c.p[3].name, "System.Diagnostics.Metrics");
	T_STREQ(c.p[3].args, "SessionId=SHARED;ClientId=c1;Metrics=System.Runtime,Microsoft.AspNetCore.Hosting;"
			     "RefreshInterval=5;MaxTimeSeries=1000;MaxHistograms=20");
	trace_config_free(&c);
	metrics_selection_free(&s);
	ok = "{\"meters\":[{\"meterName\":\"M\",\"instrumentNames\":[\"a\",\"b\"]}],\"includeDefaultProviders\":false}";
	T_CHECK(metrics_selection_json(ok, strlen(ok), &s, &em) == 0);
	T_CHECK(metrics_trace_config(&s, 1, "c", &c, &em) == 0);
	T_CHECK(strstr(c.p[0].args, "Metrics=M\\a,M\\b;") != NULL);
	trace_config_free(&c);
	metrics_selection_free(&s);
}

/* The fixture's meter session (RefreshInterval 1): CollectionStart/Stop give the runtime's interval. */
struct intervals {
	struct evpayload pl;
	int n;
	double min, max;
};

static int on_interval(void *ctx, const struct nettrace_event *e)
{
	struct intervals *iv = ctx;
	struct metrics_note n;
	struct err_msg em;

	if (e->meta->n_fields == 0 || evpayload_decode(&iv->pl, e, &em) != 0)
		return 0;
	metrics_note(e, &iv->pl, "c", &n);
	if (n.kind == MN_INTERVAL) {
		iv->min = iv->n == 0 || n.interval_s < iv->min ? n.interval_s : iv->min;
		iv->max = iv->n == 0 || n.interval_s > iv->max ? n.interval_s : iv->max;
		iv->n++;
	}
	return 0;
}

/* A MetricsEventSource event by hand: name and string fields in order. */
static void note_of(const char *event, const char *const *vals, size_t n, const char *client, struct metrics_note *out)
{
	struct nettrace_meta m = { .provider = "System.Diagnostics.Metrics", .name = event };
	struct nettrace_event e = { .meta = &m };
	static const char *const names[] = { "a", "b", "c", "d", "e", "f", "g" };
	struct evpayload p = { 0 };

	for (size_t i = 0; i < n && i < 7; i++)
		p.v[p.n++] = (struct evvalue){ .name = names[i], .type = NT_STRING, .index = -1, .s = vals[i] };
	metrics_note(&e, &p, client, out);
}

static void sharing(void)
{
	struct intervals iv = { 0 };
	struct nettrace_callbacks cb = { .event = on_interval };
	struct metrics_note n;
	static const char *const refused[] = { "me", "10", "20", "1000", "1000", "1", "5" };
	static const char *const other[] = { "someone", "10", "20", "1000", "1000", "1", "5" };
	static const char *const evil[] = { "me", "10;Metrics=x", "20", "1000", "1000", "1", "5" };
	static const char *const priv[] = { "e70f0630-56e8-4387-8b69-66fca1f0bb8b" };
	static const char *const shared[] = { "SHARED" };
	struct msample r = { .kind = MS_RATE, .value = 20, .interval_s = 1 };
	struct metrics_selection s = { 0 };
	struct trace_config c;
	struct metrics_meter_opts mo = { "1", "10", "1000" };
	struct err_msg em;

	T_CHECK(feed(&cb, &iv) == 0);
	evpayload_free(&iv.pl);
	if (iv.n < 2 || iv.min < 0.9 || iv.max > 1.1)
		T_FAIL("%d intervals from %.3f to %.3f s, want 1 s each", iv.n, iv.min, iv.max);
	/* the runtime refused our share: the running session's settings, to join on its terms */
	note_of("MultipleSessionsConfiguredIncorrectlyError", refused, 7, "me", &n);
	T_CHECK(n.kind == MN_REFUSED_SHARE);
	T_STREQ(n.want.max_histograms, "10");
	T_STREQ(n.want.max_time_series, "1000");
	T_STREQ(n.want.refresh, "1");
	note_of("MultipleSessionsConfiguredIncorrectlyError", other, 7, "me", &n);
	T_CHECK(n.kind == MN_NONE); /* another listener's refusal */
	note_of("MultipleSessionsConfiguredIncorrectlyError", evil, 7, "me", &n);
	T_CHECK(n.kind == MN_REFUSED_SHARE && n.want.max_histograms[0] == '\0'); /* not a number: ours kept */
	note_of("MultipleSessionsNotSupportedError", priv, 1, "me", &n);
	T_CHECK(n.kind == MN_REFUSED_PRIVATE);
	T_STREQ(n.running, priv[0]);
	note_of("MultipleSessionsNotSupportedError", shared, 1, "me", &n);
	T_CHECK(n.kind == MN_NONE); /* someone else refused beside our shared session */
	/* a rate made per 1 s is five times less than per 5 s */
	metrics_per_interval(&r, 5);
	T_CHECK(fabs(r.value - 100) < 1e-9);
	r = (struct msample){ .kind = MS_RATE, .value = 20, .interval_s = 5.01 };
	metrics_per_interval(&r, 5);
	T_CHECK(r.value == 20); /* within 2 %: as it came */
	r = (struct msample){ .kind = MS_GAUGE, .value = 20, .interval_s = 1 };
	metrics_per_interval(&r, 5);
	T_CHECK(r.value == 20);
	r = (struct msample){ .kind = MS_RATE, .value = 20 };
	metrics_per_interval(&r, 5);
	T_CHECK(r.value == 20); /* the interval unknown */
	r = (struct msample){ .kind = MS_SUMMARY, .quantiles = "0.5=1", .has_sum = true, .count = 3, .sum = 6,
			      .interval_s = 1 };
	metrics_per_interval(&r, 5);
	T_CHECK(r.count == 15 && r.sum == 30 && strcmp(r.quantiles, "0.5=1") == 0);
	/* joining on the running session's terms; the process's limits otherwise */
	T_CHECK(metrics_selection_json("{}", 2, &s, &em) == 0);
	T_CHECK(metrics_trace_config_as(&s, 5, "c1", &mo, &c, &em) == 0 && s.interval_s == 5);
	T_CHECK(strstr(c.p[3].args, ";RefreshInterval=1;MaxTimeSeries=1000;MaxHistograms=10") != NULL);
	T_STREQ(c.p[0].args, "EventCounterIntervalSec=5"); /* EventCounters keep ours */
	trace_config_free(&c);
	metrics_set_limits(10, 500);
	T_CHECK(metrics_trace_config(&s, 1, "c1", &c, &em) == 0);
	T_CHECK(strstr(c.p[3].args, ";RefreshInterval=1;MaxTimeSeries=500;MaxHistograms=10") != NULL);
	trace_config_free(&c);
	metrics_set_limits(0, 0);
	metrics_selection_free(&s);
}

/* One setting: its colon path, value and source. */
struct kv {
	const char *key, *value, *where;
};

/* The first n of kv as a settings tree (new). */
static struct settings_node *tree_of(const struct kv *kv, size_t n)
{
	struct settings_node *root = settings_new();
	struct err_msg em;

	for (size_t i = 0; i < n; i++)
		if (settings_put(root, kv[i].key, kv[i].value, kv[i].where, 0, &em) != 0)
			T_FAIL("%s", em.text);
	return root;
}

/* Metrics:Providers, Metrics:Meters and Metrics:IncludeDefaultProviders as dotnet-monitor has them. */
static void settings(void)
{
	static const struct kv ok[] = {
		{ "Metrics:Meters:1:MeterName", "Microsoft.AspNetCore.Routing", "f:3:5" },
		{ "Metrics:Meters:0:MeterName", "Microsoft.AspNetCore.Server.Kestrel", "f:2:5" },
		{ "Metrics:Meters:0:InstrumentNames:0", "kestrel.active_connections", "f:2:9" },
		{ "metrics:providers:0:providername", "Grpc.Net.Client", "env X" },
		{ "Metrics:Providers:0:CounterNames:1", "current-calls", "env Y" },
	};
	static const struct {
		struct kv kv;
		const char *want;
	} bad[] = {
		{ { "Metrics:Meters:x:MeterName", "M", "f:1:1" }, "f:1:1: Metrics:Meters:x: is not Metrics:Meters:N (N from 0" },
		{ { "Metrics:Meters:0:MeterName", "a;b", "env Z" }, "env Z: Metrics:Meters:0:MeterName: must be a name" },
		{ { "Metrics:Meters:0:Colour", "red", "f:2:2" }, "f:2:2: Metrics:Meters:0:Colour: not a setting diagport knows" },
		{ { "Metrics:Meters:0:MeterNme", "M", "f:3:3" },
		  "f:3:3: Metrics:Meters:0:MeterNme: not a setting diagport knows here; did you mean MeterName?" },
		{ { "Metrics:Meters:0:InstrumentNames:0", "a", "f:4:4" }, "f:4:4: Metrics:Meters:0: has no MeterName" },
		{ { "Metrics:Providers:99:ProviderName", "P", "d/Metrics__Providers__99__ProviderName" },
		  "d/Metrics__Providers__99__ProviderName: Metrics:Providers:99: is not Metrics:Providers:N" },
		{ { "Metrics:Sources:0:Name", "P", "f:9:9" }, "Metrics:Sources:0:Name (f:9:9): unknown setting" },
	};
	struct metrics_selection s;
	struct err_msg em;
	struct settings_node *t = tree_of(ok, 5);

	T_CHECK(metrics_selection_settings(settings_find(t, "Metrics"), false, &s, &em) == 0);
	T_CHECK(settings_check_unread(settings_find(t, "Metrics"), &em) == 0); /* every setting read */
	T_CHECK(s.n == 3);
	T_STREQ(s.s[0].name, "Grpc.Net.Client"); /* providers, then meters, each in index order */
	T_CHECK(!s.s[0].meter && s.s[0].n_names == 1);
	T_STREQ(s.s[0].names[0], "current-calls");
	T_STREQ(s.s[1].name, "Microsoft.AspNetCore.Server.Kestrel");
	T_CHECK(s.s[1].meter && s.s[1].n_names == 1);
	T_STREQ(s.s[2].name, "Microsoft.AspNetCore.Routing");
	T_CHECK(s.s[2].meter && s.s[2].n_names == 0);
	metrics_selection_free(&s);
	settings_free(t);
	t = tree_of(ok, 2);
	T_CHECK(metrics_selection_settings(settings_find(t, "Metrics"), true, &s, &em) == 0 && s.n == 7); /* the 5 defaults first */
	T_STREQ(s.s[5].name, "Microsoft.AspNetCore.Server.Kestrel");
	metrics_selection_free(&s);
	settings_free(t);
	T_CHECK(metrics_selection_settings(NULL, false, &s, &em) == 0 && s.n == 0);
	metrics_selection_free(&s);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct settings_node *b = tree_of(&bad[i].kv, 1), *m = settings_find(b, "Metrics");
		int rc = metrics_selection_settings(m, true, &s, &em);

		if (rc == 0) { /* what the binder does not take is the final check's to refuse */
			metrics_selection_free(&s);
			m->used = true;
			rc = settings_check_unread(b, &em);
		}
		if (rc == 0 || strstr(em.text, bad[i].want) == NULL)
			T_FAIL("%s: rc %d, '%s'", bad[i].kv.key, rc, rc ? em.text : "");
		settings_free(b);
	}
}

int main(void)
{
	t_file_name = "metrics";
	T_RUN(names);
	T_RUN(values);
	T_RUN(labels);
	T_RUN(readings);
	T_RUN(bad_payloads);
	T_RUN(live);
	T_RUN(logs_formats);
	T_RUN(documents);
	T_RUN(sharing);
	T_RUN(settings);
	return t_failed_cases ? 1 : 0;
}
