/*
 * trace_config.c - what a trace collects (trace.h): dotnet-monitor's
 * profiles, with the same providers, keywords, levels and arguments
 * (Microsoft.Diagnostics.Monitoring.EventPipe's *Configuration classes), or
 * a providers document; and the CollectTracing request that asks for it.
 */
#include "trace.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "launcher/runtime/ipc.h"
#include "mem.h"

#define IPC_EVENTPIPE_COLLECT2 0x03
#define IPC_EVENTPIPE_COLLECT4 0x05
#define FORMAT_NETTRACE 1

/* ---- what to collect ---- */

/* TraceEvent's ClrTraceEventParser.Keywords.Default (GC, Type, GCHeapSurvivalAndMovement, Binder, Loader, Jit,
 * NGen, SupressNGen, StopEnumeration, Security, AppDomainResourceManagement, Exception, Threading, Contention,
 * Stack, JittedMethodILToNativeMap, ThreadTransfer, GCHeapAndTypeNames, Codesymbols, Compilation). */
#define CLR_DEFAULT_KEYWORDS 0x14C14FCCBDull
#define CLR_GC_KEYWORD 0x1ull

/*
 * dotnet-monitor's HTTP profile: DiagnosticSource events for incoming and outgoing requests. Its ASP.NET
 * triggers ask for the very same text (dotnet/diagnostics#3425): the runtime's DiagnosticSourceEventSource
 * keeps one filter for all its sessions, the last one enabled, so a trace with another would change what a
 * rule's session sees, and not change it back.
 */
static const char http_filter[] =
	"Microsoft.AspNetCore/Microsoft.AspNetCore.Hosting.HttpRequestIn.Start@Activity1Start:-Request.Scheme"
	";Request.Host;Request.PathBase;Request.QueryString;Request.Path;Request.Method"
	";ActivityStartTime=*Activity.StartTimeUtc.Ticks;ActivityParentId=*Activity.ParentId;ActivityId=*Activity.Id"
	";ActivitySpanId=*Activity.SpanId;ActivityTraceId=*Activity.TraceId;ActivityParentSpanId=*Activity.ParentSpanId"
	";ActivityIdFormat=*Activity.IdFormat\r\n"
	"Microsoft.AspNetCore/Microsoft.AspNetCore.Hosting.HttpRequestIn.Stop@Activity1Stop:-ActivityId=*Activity.Id"
	";Request.Path;Response.StatusCode;ActivityDuration=*Activity.Duration.Ticks\r\n"
	"HttpHandlerDiagnosticListener/System.Net.Http.HttpRequestOut@Event:-\r\n"
	"HttpHandlerDiagnosticListener/System.Net.Http.HttpRequestOut.Start@Activity2Start:-Request.RequestUri"
	";Request.Method;Request.RequestUri.Host;Request.RequestUri.Port;ActivityStartTime=*Activity.StartTimeUtc.Ticks"
	";ActivityId=*Activity.Id;ActivitySpanId=*Activity.SpanId;ActivityTraceId=*Activity.TraceId"
	";ActivityParentSpanId=*Activity.ParentSpanId;ActivityIdFormat=*Activity.IdFormat;ActivityId=*Activity.Id\r\n"
	"HttpHandlerDiagnosticListener/System.Net.Http.HttpRequestOut.Stop@Activity2Stop:-"
	";ActivityDuration=*Activity.Duration.Ticks;ActivityId=*Activity.Id\r\n";

/* "key=value" as the .NET client writes an argument: key or value in double quotes when it holds ; or =. */
static void put_arg(struct buf *b, const char *k, const char *v)
{
	bool qk = strpbrk(k, ";=") != NULL, qv = strpbrk(v, ";=") != NULL;

	buf_printf(b, "%s%s%s%s=%s%s%s", b->len ? ";" : "", qk ? "\"" : "", k, qk ? "\"" : "", qv ? "\"" : "", v,
		   qv ? "\"" : "");
}

int trace_config_http(struct trace_config *c, struct err_msg *em)
{
	struct buf a;
	int rc;

	buf_init(&a, 0);
	put_arg(&a, "FilterAndPayloadSpecs", http_filter);
	rc = trace_config_add(c, "Microsoft-Diagnostics-DiagnosticSource", 0x3, 5, a.data, em); /* Messages | Events */
	buf_free(&a);
	return rc;
}

int trace_config_add(struct trace_config *c, const char *name, uint64_t kw, uint32_t level, const char *args,
	       struct err_msg *em)
{
	struct trace_provider *p;

	for (size_t i = 0; i < c->n; i++) {
		p = &c->p[i];
		if (strcasecmp(p->name, name) != 0)
			continue;
		if (args && *args && p->args && strcmp(p->args, args) != 0)
			return err_set(em, DP_EINVAL, "provider '%s' is given twice with different arguments", name);
		p->keywords |= kw;
		if (level > p->level)
			p->level = level;
		if (args && *args && !p->args)
			p->args = mem_strdup(args);
		return 0;
	}
	if (c->n == TRACE_MAX_PROVIDERS)
		return err_set(em, DP_ETOOBIG, "more than %d providers", TRACE_MAX_PROVIDERS);
	c->p = mem_realloc(c->p, (c->n + 1) * sizeof(*c->p));
	p = &c->p[c->n++];
	p->name = mem_strdup(name);
	p->keywords = kw;
	p->level = level;
	p->args = args && *args ? mem_strdup(args) : NULL;
	return 0;
}

void trace_config_free(struct trace_config *c)
{
	for (size_t i = 0; i < c->n; i++) {
		free(c->p[i].name);
		free(c->p[i].args);
	}
	free(c->p);
	memset(c, 0, sizeof(*c));
}

static int add_profile(struct trace_config *c, const char *name, size_t len, unsigned interval_s, struct err_msg *em)
{
	struct buf a;
	int rc = 0;

#define IS(w) (len == strlen(w) && strncasecmp(name, w, len) == 0)
	buf_init(&a, 0);
	if (IS("Cpu")) {
		rc = trace_config_add(c, "Microsoft-DotNETCore-SampleProfiler", 0, 4, NULL, em);
		if (rc == 0)
			rc = trace_config_add(c, "Microsoft-Windows-DotNETRuntime", CLR_DEFAULT_KEYWORDS, 4, NULL, em);
		c->rundown |= TRACE_DEFAULT_RUNDOWN;
	} else if (IS("Http")) {
		rc = trace_config_http(c, em);
		c->rundown |= TRACE_DEFAULT_RUNDOWN;
	} else if (IS("Logs")) {
		put_arg(&a, "FilterSpecs", "UseAppFilters");
		/* LogLevel.Trace is EventLevel.LogAlways; FormattedMessage | JsonMessage; scopes through the TPL's ids */
		rc = trace_config_add(c, "Microsoft-Extensions-Logging", 0xC, 0, a.data, em);
		if (rc == 0)
			rc = trace_config_add(c, "System.Threading.Tasks.TplEventSource", 0x80, 4, NULL, em);
	} else if (IS("Metrics")) {
		static const char *const sources[] = { "System.Runtime", "Microsoft.AspNetCore.Hosting",
						       "Grpc.AspNetCore.Server" };
		char iv[16];

		snprintf(iv, sizeof(iv), "%u", interval_s);
		put_arg(&a, "EventCounterIntervalSec", iv);
		for (size_t i = 0; rc == 0 && i < sizeof(sources) / sizeof(sources[0]); i++)
			rc = trace_config_add(c, sources[i], 0, 4, a.data, em);
	} else if (IS("GcCollect")) {
		rc = trace_config_add(c, "Microsoft-Windows-DotNETRuntime", CLR_GC_KEYWORD, 4, NULL, em);
		if (rc == 0)
			rc = trace_config_add(c, "Microsoft-Windows-DotNETRuntimePrivate", CLR_GC_KEYWORD, 4, NULL, em);
		c->rundown |= CLR_GC_KEYWORD;
	} else {
		rc = err_set(em, DP_EINVAL, "profile '%.*s' is not one of Cpu, Http, Logs, Metrics, GcCollect",
			     (int)(len > 64 ? 64 : len), name);
	}
#undef IS
	buf_free(&a);
	return rc;
}

int trace_config_profile(const char *profiles, unsigned metrics_interval_s, struct trace_config *out,
			 struct err_msg *em)
{
	struct trace_config c = { .buffer_mb = 256 };
	const char *s = profiles ? profiles : "Cpu,Http,Metrics";
	int rc = 0;

	while (rc == 0 && *s) {
		size_t n = strcspn(s, ","), b = 0;

		while (b < n && s[b] == ' ')
			b++;
		while (n > b && s[n - 1] == ' ')
			n--;
		if (n > b)
			rc = add_profile(&c, s + b, n - b, metrics_interval_s ? metrics_interval_s : 5, em);
		s += strcspn(s, ",");
		s += *s == ',';
	}
	if (rc == 0 && c.n == 0)
		rc = err_set(em, DP_EINVAL, "no profile given (Cpu, Http, Logs, Metrics, GcCollect)");
	if (rc != 0) {
		trace_config_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

bool trace_name_ok(const char *s, const char *forbidden)
{
	if (*s == '\0' || strlen(s) > 256)
		return false;
	for (; *s; s++)
		if ((unsigned char)*s < 0x21 || (unsigned char)*s > 0x7e || strchr(forbidden, *s))
			return false;
	return true;
}

json_t *trace_member(json_t *o, const char *name)
{
	const char *k;
	json_t *v;

	json_object_foreach(o, k, v)
		if (strcasecmp(k, name) == 0)
			return v;
	return NULL;
}

static int parse_keywords(json_t *v, const char *where, uint64_t *out, struct err_msg *em)
{
	const char *s = json_string_value(v);
	char *end;
	bool hex;

	if (v == NULL) {
		*out = UINT64_MAX; /* dotnet-monitor's default: all keywords */
		return 0;
	}
	if (json_is_integer(v) && json_integer_value(v) >= 0) {
		*out = (uint64_t)json_integer_value(v);
		return 0;
	}
	if (s == NULL || *s == '\0')
		return err_set(em, DP_EINVAL, "%s.keywords must be a string of hex (0x...) or decimal digits", where);
	hex = strncasecmp(s, "0x", 2) == 0;
	errno = 0;
	*out = strtoull(hex ? s + 2 : s, &end, hex ? 16 : 10);
	if (errno != 0 || *end != '\0' || end == (hex ? s + 2 : s) || *(hex ? s + 2 : s) == '-' ||
	    *(hex ? s + 2 : s) == '+')
		return err_set(em, DP_EINVAL, "%s.keywords '%.40s' is not a %s number", where, s,
			       hex ? "hexadecimal" : "decimal");
	return 0;
}

static int parse_level(json_t *v, const char *where, uint32_t *out, struct err_msg *em)
{
	static const char *const names[] = { "LogAlways", "Critical", "Error", "Warning", "Informational", "Verbose" };
	const char *s = json_string_value(v);

	if (v == NULL) {
		*out = 5; /* Verbose */
		return 0;
	}
	if (json_is_integer(v) && json_integer_value(v) >= 0 && json_integer_value(v) <= 5) {
		*out = (uint32_t)json_integer_value(v);
		return 0;
	}
	for (uint32_t i = 0; s && i < 6; i++)
		if (strcasecmp(s, names[i]) == 0 || (s[0] == (char)('0' + i) && s[1] == '\0')) {
			*out = i;
			return 0;
		}
	return err_set(em, DP_EINVAL, "%s.eventLevel must be one of LogAlways, Critical, Error, Warning, "
		       "Informational, Verbose (or 0..5)", where);
}

static int parse_provider(struct trace_config *c, json_t *p, size_t i, struct err_msg *em)
{
	json_t *name = trace_member(p, "name"), *args = trace_member(p, "arguments");
	char where[32];
	uint64_t kw = 0;
	uint32_t level = 0;
	struct buf a;
	int rc;

	snprintf(where, sizeof(where), "providers[%zu]", i);
	if (!json_is_object(p))
		return err_set(em, DP_EINVAL, "%s must be an object", where);
	if (!json_is_string(name) || json_string_length(name) == 0)
		return err_set(em, DP_EINVAL, "%s.name must be a non-empty string", where);
	if ((rc = parse_keywords(trace_member(p, "keywords"), where, &kw, em)) != 0 ||
	    (rc = parse_level(trace_member(p, "eventLevel"), where, &level, em)) != 0)
		return rc;
	if (args && !json_is_object(args) && !json_is_null(args))
		return err_set(em, DP_EINVAL, "%s.arguments must be an object of strings", where);
	buf_init(&a, IPC_MAX_MESSAGE);
	if (json_is_object(args)) {
		const char *k;
		json_t *v;

		json_object_foreach(args, k, v) {
			if (!json_is_string(v)) {
				buf_free(&a);
				return err_set(em, DP_EINVAL, "%s.arguments.%.40s must be a string", where, k);
			}
			put_arg(&a, k, json_string_value(v));
		}
	}
	rc = trace_config_add(c, json_string_value(name), kw, level, a.data, em);
	buf_free(&a);
	return rc;
}

int trace_config_json(const char *body, size_t len, struct trace_config *out, struct err_msg *em)
{
	struct trace_config c = { .buffer_mb = 256, .rundown = TRACE_DEFAULT_RUNDOWN };
	json_error_t je;
	json_t *root = json_loadb(body ? body : "", len, JSON_REJECT_DUPLICATES, &je), *ps, *v;
	int rc = 0;

	if (root == NULL)
		return err_set(em, DP_ESYNTAX, "the body is not JSON: %s at line %d, column %d", je.text, je.line,
			       je.column);
	ps = trace_member(root, "providers");
	if (!json_is_object(root))
		rc = err_set(em, DP_EINVAL, "the body must be a JSON object with \"providers\"");
	else if (!json_is_array(ps) || json_array_size(ps) == 0)
		rc = err_set(em, DP_EINVAL, "\"providers\" must be a non-empty array");
	for (size_t i = 0; rc == 0 && i < json_array_size(ps); i++)
		rc = parse_provider(&c, json_array_get(ps, i), i, em);
	if (rc == 0 && (v = trace_member(root, "requestRundown")) != NULL) {
		if (!json_is_boolean(v))
			rc = err_set(em, DP_EINVAL, "\"requestRundown\" must be true or false");
		else if (!json_is_true(v))
			c.rundown = 0;
	}
	if (rc == 0 && (v = trace_member(root, "bufferSizeInMB")) != NULL) {
		if (!json_is_integer(v) || json_integer_value(v) < 1 || json_integer_value(v) > TRACE_MAX_BUFFER_MB)
			rc = err_set(em, DP_EINVAL, "\"bufferSizeInMB\" must be an integer from 1 to %d",
				     TRACE_MAX_BUFFER_MB);
		else
			c.buffer_mb = (uint32_t)json_integer_value(v);
	}
	json_decref(root);
	if (rc != 0) {
		trace_config_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

int trace_encode(const struct trace_config *c, bool v4, struct buf *req, struct err_msg *em)
{
	bool use4 = v4 && c->rundown != 0 && c->rundown != TRACE_DEFAULT_RUNDOWN;
	struct buf m;
	int rc = 0;

	buf_init(&m, 0); /* uncapped here, so that ipc_end sees a message over 64 KiB rather than a cut one */
	ipc_begin(&m, IPC_SET_EVENTPIPE, use4 ? IPC_EVENTPIPE_COLLECT4 : IPC_EVENTPIPE_COLLECT2);
	ipc_put_u32(&m, c->buffer_mb);
	ipc_put_u32(&m, FORMAT_NETTRACE);
	if (use4) {
		ipc_put_u64(&m, c->rundown);
		ipc_put_u8(&m, 1); /* stack walks on */
	} else {
		ipc_put_u8(&m, c->rundown != 0);
	}
	ipc_put_u32(&m, (uint32_t)c->n);
	for (size_t i = 0; rc == 0 && i < c->n; i++) {
		ipc_put_u64(&m, c->p[i].keywords);
		ipc_put_u32(&m, c->p[i].level);
		if (ipc_put_string(&m, c->p[i].name) != 0 || ipc_put_string(&m, c->p[i].args ? c->p[i].args : "") != 0)
			rc = err_set(em, DP_EINVAL, "provider '%s': its name or arguments are not UTF-8", c->p[i].name);
	}
	if (rc == 0 && ipc_end(&m) != 0)
		rc = err_set(em, DP_ETOOBIG, "the providers do not fit one diagnostics message (64 KiB)");
	if (rc == 0) {
		buf_reset(req);
		if (buf_append(req, m.data, m.len) != 0)
			rc = err_set(em, DP_ETOOBIG, "the request buffer is too small for %zu bytes", m.len);
	}
	buf_free(&m);
	return rc;
}
