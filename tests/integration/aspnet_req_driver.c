/*
 * aspnet_req_driver.c - launcher/trace/aspnet_req.h against a real runtime's
 * events (tests/integration/aspnet_req.sh builds and runs it):
 *
 *   aspnet_req_driver providers
 *       the providers document (POST /trace's body) holding exactly the
 *       provider aspnet_req_provider adds, checked to read back into the same
 *       session configuration (trace_config_json)
 *   aspnet_req_driver read FILE.nettrace
 *       every event decoded (evpayload_decode) and given to aspnet_req_event;
 *       one line per request event:
 *         START <activity id> <path>
 *         STOP <activity id> <path> <status> <duration ticks>
 *       then "decode-errors N" and, for each trigger run over the same events
 *       in order (their times from the trace's clock), "trigger NAME yes|no":
 *         count      AspNetRequestCount, IncludePaths "/", RequestCount 3
 *         status     AspNetResponseStatus, StatusCodes "400-499", ResponseCount 3
 *         duration   AspNetRequestDuration, RequestDuration 0, RequestCount 3
 *         none       AspNetRequestCount, ExcludePaths "**" "/" "*", RequestCount 1
 *       Exit 0 when the file read whole, else 1.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "launcher/trace/aspnet_req.h"
#include "launcher/metrics/metrics.h"
#include "launcher/trace/trace.h"

#define ARG_PREFIX "FilterAndPayloadSpecs=\""

static int providers(void)
{
	struct trace_config c = { 0 }, back = { 0 };
	struct err_msg em;
	const char *a;
	size_t n;
	json_t *doc;
	char *text;
	int rc = 1;

	if (aspnet_req_provider(&c, &em) != 0 || c.n != 1) {
		fprintf(stderr, "aspnet_req_provider: %s\n", em.text);
		return 1;
	}
	a = c.p[0].args;
	n = strlen(a);
	if (strncmp(a, ARG_PREFIX, strlen(ARG_PREFIX)) != 0 || a[n - 1] != '"') {
		fprintf(stderr, "unexpected arguments: %s\n", a);
		goto out;
	}
	doc = json_pack("{s:[{s:s, s:s, s:i, s:{s:s%}}], s:b}", "providers", "name", c.p[0].name, "keywords", "0x3",
			"eventLevel", (int)c.p[0].level, "arguments", "FilterAndPayloadSpecs", a + strlen(ARG_PREFIX),
			n - strlen(ARG_PREFIX) - 1, "requestRundown", 0);
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	/* the document reads back into exactly that provider */
	if (trace_config_json(text, strlen(text), &back, &em) != 0 || back.n != 1 ||
	    strcmp(back.p[0].name, c.p[0].name) != 0 || back.p[0].keywords != c.p[0].keywords ||
	    back.p[0].level != c.p[0].level || strcmp(back.p[0].args, c.p[0].args) != 0 || back.rundown != 0) {
		fprintf(stderr, "the document does not read back as the provider: %s\n", em.text);
	} else {
		puts(text);
		rc = 0;
	}
	free(text);
out:
	trace_config_free(&back);
	trace_config_free(&c);
	return rc;
}

struct reader {
	struct evpayload pl;
	struct nettrace_trace h;
	bool have_h;
	unsigned long errors;
	struct aspnet_trig *t[4];
	bool fired[4];
};

static int on_trace(void *ctx, const struct nettrace_trace *t)
{
	struct reader *r = ctx;

	r->h = *t;
	r->have_h = true;
	return 0;
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct reader *r = ctx;
	struct aspnet_req q;
	struct err_msg em;
	int64_t ms;

	if (e->meta->n_fields == 0)
		return 0;
	if (evpayload_decode(&r->pl, e, &em) != 0) {
		fprintf(stderr, "%s\n", em.text);
		r->errors++;
		return 0;
	}
	if (!aspnet_req_event(e, &r->pl, &q))
		return 0;
	if (q.kind == ASPNET_REQ_START)
		printf("START %s %s\n", q.activity_id, q.path);
	else
		printf("STOP %s %s %d %lld\n", q.activity_id, q.path, q.status, (long long)q.duration_ticks);
	ms = r->have_h ? nettrace_wall_ms(&r->h, q.timestamp) : 0;
	for (int i = 0; i < 4; i++)
		if (aspnet_trig_feed(r->t[i], &q, ms))
			r->fired[i] = true;
	return 0;
}

static int read_file(const char *path)
{
	static const char *const names[4] = { "count", "status", "duration", "none" };
	static const struct aspnet_status_range c4xx = { 400, 499 };
	char *root[] = { "/" }, *all[] = { "**/*" };
	const struct aspnet_trig_config cfg[4] = {
		{ .type = ASPNET_TRIG_COUNT, .count = 3, .window_ms = 60000, .include = root, .n_include = 1 },
		{ .type = ASPNET_TRIG_STATUS, .count = 3, .window_ms = 60000, .status = &c4xx, .n_status = 1 },
		{ .type = ASPNET_TRIG_DURATION, .count = 3, .window_ms = 60000, .duration_ms = 0 },
		{ .type = ASPNET_TRIG_COUNT, .count = 1, .window_ms = 60000, .exclude = all, .n_exclude = 1 },
	};
	struct reader r = { 0 };
	struct nettrace_callbacks cb = { .trace = on_trace, .event = on_event };
	struct nettrace *t = nettrace_new(NULL, &cb, &r);
	struct err_msg em;
	char buf[65536];
	ssize_t n;
	int fd = open(path, O_RDONLY), rc = 0;

	for (int i = 0; i < 4; i++)
		if (aspnet_trig_new(&cfg[i], &r.t[i], &em) != 0) {
			fprintf(stderr, "aspnet_trig_new: %s\n", em.text);
			return 1;
		}
	if (fd < 0) {
		perror(path);
		return 1;
	}
	while (rc == 0 && (n = read(fd, buf, sizeof(buf))) > 0)
		rc = nettrace_feed(t, buf, (size_t)n, &em);
	if (rc == 0)
		rc = nettrace_finish(t, &em);
	if (rc != 0)
		fprintf(stderr, "%s: %s\n", path, em.text);
	close(fd);
	printf("decode-errors %lu\n", r.errors);
	for (int i = 0; i < 4; i++) {
		printf("trigger %s %s\n", names[i], r.fired[i] ? "yes" : "no");
		aspnet_trig_free(r.t[i]);
	}
	evpayload_free(&r.pl);
	nettrace_free(t);
	return rc != 0 || fflush(stdout) != 0;
}

int main(int argc, char **argv)
{
	if (argc == 2 && strcmp(argv[1], "providers") == 0)
		return providers();
	if (argc == 3 && strcmp(argv[1], "read") == 0)
		return read_file(argv[2]);
	fprintf(stderr, "usage: aspnet_req_driver providers | read FILE.nettrace\n");
	return 2;
}
