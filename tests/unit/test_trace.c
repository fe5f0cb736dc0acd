/*
 * test_trace.c - what /trace asks a runtime for (launcher/trace/trace.h): the
 * profiles' providers as dotnet-monitor sends them, providers documents and
 * their errors, and the CollectTracing bytes (checked field by field against
 * the layout in docs/PROTOCOL.md §6).
 */
#include <stdint.h>
#include <stdlib.h>

#include "launcher/runtime/ipc.h"
#include "launcher/trace/trace.h"
#include "t.h"

static const struct trace_provider *find(const struct trace_config *c, const char *name)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->p[i].name, name) == 0)
			return &c->p[i];
	return NULL;
}

static void default_profiles(void)
{
	struct trace_config c;
	struct err_msg em;
	const struct trace_provider *p;

	T_CHECK(trace_config_profile(NULL, 5, &c, &em) == 0);
	T_CHECK(c.n == 6); /* SampleProfiler, DotNETRuntime, DiagnosticSource, 3 counters sources */
	T_CHECK(c.rundown == TRACE_DEFAULT_RUNDOWN);
	T_CHECK(c.buffer_mb == 256);
	T_CHECK((p = find(&c, "Microsoft-Windows-DotNETRuntime")) && p->keywords == 0x14C14FCCBDull && p->level == 4);
	T_CHECK((p = find(&c, "Microsoft-DotNETCore-SampleProfiler")) && p->keywords == 0 && p->level == 4);
	T_CHECK((p = find(&c, "Microsoft-Diagnostics-DiagnosticSource")) && p->keywords == 3 && p->level == 5);
	/* the filter holds ; and =, so the value is quoted as the .NET client quotes it */
	T_CHECK(p->args && strncmp(p->args, "FilterAndPayloadSpecs=\"Microsoft.AspNetCore/", 44) == 0);
	T_CHECK(p->args[strlen(p->args) - 1] == '"');
	T_CHECK((p = find(&c, "System.Runtime")) != NULL);
	T_STREQ(p->args, "EventCounterIntervalSec=5");
	T_CHECK(find(&c, "Grpc.AspNetCore.Server") && find(&c, "Microsoft.AspNetCore.Hosting"));
	trace_config_free(&c);
}

static void profiles_merge(void)
{
	struct trace_config c;
	struct err_msg em;
	const struct trace_provider *p;

	/* Cpu and GcCollect both ask for the runtime provider: once, keywords or-ed; rundown or-ed */
	T_CHECK(trace_config_profile(" cpu , GCCOLLECT", 5, &c, &em) == 0);
	T_CHECK(c.n == 3);
	T_CHECK((p = find(&c, "Microsoft-Windows-DotNETRuntime")) && p->keywords == (0x14C14FCCBDull | 1));
	T_CHECK(c.rundown == (TRACE_DEFAULT_RUNDOWN | 1));
	trace_config_free(&c);
	T_CHECK(trace_config_profile("GcCollect", 5, &c, &em) == 0);
	T_CHECK(c.rundown == 1 && c.n == 2 && find(&c, "Microsoft-Windows-DotNETRuntimePrivate"));
	trace_config_free(&c);
	T_CHECK(trace_config_profile("Logs", 5, &c, &em) == 0);
	T_CHECK(c.rundown == 0);
	T_CHECK((p = find(&c, "Microsoft-Extensions-Logging")) && p->level == 0 && p->keywords == 0xC);
	T_STREQ(p->args, "FilterSpecs=UseAppFilters");
	trace_config_free(&c);
	T_CHECK(trace_config_profile("Metrics", 1, &c, &em) == 0);
	T_STREQ(find(&c, "System.Runtime")->args, "EventCounterIntervalSec=1");
	trace_config_free(&c);
}

static void profiles_refused(void)
{
	struct trace_config c;
	struct err_msg em;

	T_CHECK(trace_config_profile("Cpu,Bogus", 5, &c, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "'Bogus'") != NULL);
	T_CHECK(trace_config_profile(" , ", 5, &c, &em) == DP_EINVAL);
}

static void document(void)
{
	static const char body[] =
		"{\"Providers\":[{\"Name\":\"System.Runtime\",\"EventLevel\":\"Informational\",\"Keywords\":\"0xffffffff\","
		"\"Arguments\":{\"EventCounterIntervalSec\":\"1\",\"a;b\":\"c=d\"}},"
		"{\"name\":\"Other\",\"keywords\":\"42\",\"eventLevel\":2},{\"name\":\"All\"}],"
		"\"requestRundown\":false,\"BUFFERSIZEINMB\":32}";
	struct trace_config c;
	struct err_msg em;
	const struct trace_provider *p;

	T_CHECK(trace_config_json(body, strlen(body), &c, &em) == 0);
	T_CHECK(c.n == 3 && c.rundown == 0 && c.buffer_mb == 32);
	T_CHECK((p = find(&c, "System.Runtime")) && p->keywords == 0xffffffffull && p->level == 4);
	T_STREQ(p->args, "EventCounterIntervalSec=1;\"a;b\"=\"c=d\"");
	T_CHECK((p = find(&c, "Other")) && p->keywords == 42 && p->level == 2 && p->args == NULL);
	/* dotnet-monitor's defaults: every keyword, Verbose */
	T_CHECK((p = find(&c, "All")) && p->keywords == UINT64_MAX && p->level == 5);
	trace_config_free(&c);
	T_CHECK(trace_config_json("{\"providers\":[{\"name\":\"X\"}]}", 28, &c, &em) == 0);
	T_CHECK(c.rundown == TRACE_DEFAULT_RUNDOWN && c.buffer_mb == 256);
	trace_config_free(&c);
}

static void document_refused(void)
{
	static const struct {
		const char *body, *says;
		int rc;
	} cases[] = {
		{ "{\"providers\":[", "line 1", DP_ESYNTAX },
		{ "[]", "JSON object", DP_EINVAL },
		{ "{\"providers\":[]}", "non-empty array", DP_EINVAL },
		{ "{\"providers\":[{}]}", "providers[0].name", DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\",\"keywords\":\"0xZZ\"}]}", "providers[0].keywords", DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\",\"keywords\":\"-1\"}]}", "providers[0].keywords", DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\"},{\"name\":\"Y\",\"eventLevel\":\"Loud\"}]}", "providers[1].eventLevel",
		  DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\",\"arguments\":{\"k\":1}}]}", "providers[0].arguments.k", DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\"}],\"bufferSizeInMB\":0}", "bufferSizeInMB", DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\"}],\"requestRundown\":\"yes\"}", "requestRundown", DP_EINVAL },
		{ "{\"providers\":[{\"name\":\"X\"}],\"providers\":[]}", "duplicate", DP_ESYNTAX },
		{ "{\"providers\":[{\"name\":\"X\",\"arguments\":{\"a\":\"1\"}},{\"name\":\"x\",\"arguments\":{\"a\":\"2\"}}]}",
		  "different arguments", DP_EINVAL },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct trace_config c;
		struct err_msg em = { "" };
		int rc = trace_config_json(cases[i].body, strlen(cases[i].body), &c, &em);

		if (rc != cases[i].rc || strstr(em.text, cases[i].says) == NULL)
			T_FAIL("case %zu (%s): rc %d, '%s' (want %d and '%s')", i, cases[i].body, rc, em.text, cases[i].rc,
			       cases[i].says);
	}
}

/* Read a CollectTracing message back, field by field. */
static void encode(void)
{
	struct trace_config c;
	struct err_msg em;
	struct buf req;
	struct ipc_header h;
	struct ipc_reader r;
	uint32_t v32;
	uint64_t v64;
	uint16_t u16;
	char *s;

	buf_init(&req, IPC_MAX_MESSAGE);
	T_CHECK(trace_config_profile("Metrics", 1, &c, &em) == 0);
	T_CHECK(trace_encode(&c, true, &req, &em) == 0);
	T_CHECK(ipc_parse_header((const uint8_t *)req.data, &h) == 0 && h.size == req.len);
	T_CHECK(h.set == IPC_SET_EVENTPIPE && h.id == 0x03); /* rundown none: CollectTracing2 */
	r = (struct ipc_reader){ (const uint8_t *)req.data + IPC_HEADER_SIZE, (const uint8_t *)req.data + req.len };
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && v32 == 256);
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && v32 == 1); /* nettrace */
	T_CHECK(r.p < r.end && *r.p == 0);               /* no rundown */
	r.p++;
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && v32 == 3);
	T_CHECK(ipc_get_u64(&r, &v64) == 0 && v64 == 0);
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && v32 == 4);
	T_CHECK(ipc_get_string(&r, &s) == 0);
	T_STREQ(s, "System.Runtime");
	free(s);
	T_CHECK(ipc_get_string(&r, &s) == 0);
	T_STREQ(s, "EventCounterIntervalSec=1");
	free(s);
	trace_config_free(&c);

	/* GcCollect: rundown keywords 0x1, so CollectTracing4 with them, or 2 when 4 is not known */
	T_CHECK(trace_config_profile("GcCollect", 5, &c, &em) == 0);
	T_CHECK(trace_encode(&c, true, &req, &em) == 0);
	T_CHECK(ipc_parse_header((const uint8_t *)req.data, &h) == 0 && h.id == 0x05);
	r = (struct ipc_reader){ (const uint8_t *)req.data + IPC_HEADER_SIZE, (const uint8_t *)req.data + req.len };
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && ipc_get_u32(&r, &v32) == 0);
	T_CHECK(ipc_get_u64(&r, &v64) == 0 && v64 == 1);
	T_CHECK(r.p < r.end && *r.p == 1); /* stack walks */
	r.p++;
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && v32 == 2);
	T_CHECK(trace_encode(&c, false, &req, &em) == 0);
	T_CHECK(ipc_parse_header((const uint8_t *)req.data, &h) == 0 && h.id == 0x03);
	T_CHECK(req.data[IPC_HEADER_SIZE + 8] == 1); /* with rundown */
	/* a provider without arguments sends the empty string (count 1, one NUL), as the .NET client does */
	r = (struct ipc_reader){ (const uint8_t *)req.data + req.len - 6, (const uint8_t *)req.data + req.len };
	T_CHECK(ipc_get_u32(&r, &v32) == 0 && v32 == 1);
	T_CHECK(ipc_get_u16(&r, &u16) == 0 && u16 == 0);
	trace_config_free(&c);
	buf_free(&req);
}

static void encode_too_big(void)
{
	struct trace_config c = { .buffer_mb = 1 };
	struct err_msg em;
	struct buf req;
	char *big = malloc(40000);
	struct trace_provider p = { .name = (char *)"P", .keywords = 1, .level = 4, .args = big };

	memset(big, 'a', 39999);
	big[39999] = '\0';
	c.p = &p;
	c.n = 1;
	buf_init(&req, IPC_MAX_MESSAGE);
	T_CHECK(trace_encode(&c, true, &req, &em) == DP_ETOOBIG);
	T_CHECK(strstr(em.text, "64 KiB") != NULL);
	buf_free(&req);
	free(big);
}

int main(void)
{
	t_file_name = "trace";
	T_RUN(default_profiles);
	T_RUN(profiles_merge);
	T_RUN(profiles_refused);
	T_RUN(document);
	T_RUN(document_refused);
	T_RUN(encode);
	T_RUN(encode_too_big);
	return t_failed_cases ? 1 : 0;
}
