/*
 * trace.c - EventPipe sessions for /trace (trace.h).
 *
 * What to collect comes from dotnet-monitor's profiles, with the same
 * providers, keywords, levels and arguments (Microsoft.Diagnostics.Monitoring
 * .EventPipe's *Configuration classes), or from a providers document. The
 * session is started with CollectTracing2 (or 4, when the rundown keywords
 * are neither none nor the default), and its stream is read on the caller's
 * thread as it comes: every byte goes through the nettrace reader, so the end
 * of the stream is known to be its end marker, not a cut.
 *
 * Stopping: StopTracing on a second connection. The runtime answers it only
 * once it has written the rundown and the end marker to the first, so the
 * request is sent and the first connection is drained while the answer is
 * awaited on the second (waiting for the answer first could deadlock on a
 * full socket).
 */
#include "trace.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "ipc.h"
#include "mem.h"
#include "eventpipe/nettrace.h"

#define IPC_EVENTPIPE_STOP 0x01
#define IPC_EVENTPIPE_COLLECT2 0x03
#define IPC_EVENTPIPE_COLLECT4 0x05
#define FORMAT_NETTRACE 1
#define TAKE_MS 5000      /* a connection from the port */
#define ANSWER_MS 10000   /* the runtime's answer to CollectTracing */
#define DRAIN_MS 60000    /* after StopTracing: the rundown and the end marker */
#define POLL_SLICE_MS 200 /* how often the stop flag is looked at */

/* ---- what to collect ---- */

/* TraceEvent's ClrTraceEventParser.Keywords.Default (GC, Type, GCHeapSurvivalAndMovement, Binder, Loader, Jit,
 * NGen, SupressNGen, StopEnumeration, Security, AppDomainResourceManagement, Exception, Threading, Contention,
 * Stack, JittedMethodILToNativeMap, ThreadTransfer, GCHeapAndTypeNames, Codesymbols, Compilation). */
#define CLR_DEFAULT_KEYWORDS 0x14C14FCCBDull
#define CLR_GC_KEYWORD 0x1ull

/* dotnet-monitor's HTTP profile: DiagnosticSource events for incoming and outgoing requests. */
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
		put_arg(&a, "FilterAndPayloadSpecs", http_filter);
		rc = trace_config_add(c, "Microsoft-Diagnostics-DiagnosticSource", 0x3, 5, a.data, em); /* Messages | Events */
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

/* ---- the session ---- */

struct trace_session {
	struct port *port;
	uint8_t cookie[16];
	int fd;      /* the stream */
	int stop_fd; /* StopTracing's connection, once sent; -1 */
	int takes;   /* connections taken from the port (each released at the end) */
	uint64_t id, bytes;
	long long deadline, drain_until;
	const atomic_bool *stop;
	bool stopping, done;
	struct nettrace *nt;
	char error[600];
};

static long fail(struct trace_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long fail(struct trace_session *s, const char *fmt, ...)
{
	va_list ap;

	if (s->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(s->error, sizeof(s->error), fmt, ap);
		va_end(ap);
	}
	s->done = true;
	return -1;
}

/* The HRESULT of an Error answer, as a sentence. */
static int refused(const struct ipc_header *h, const struct buf *pl, const char *what, struct err_msg *em)
{
	uint32_t hr = 0;
	char *text = NULL;
	int rc;

	if (h->set != IPC_SET_SERVER || h->id != IPC_SERVER_ERROR ||
	    ipc_parse_error((const uint8_t *)pl->data, pl->len, &hr, &text) != 0)
		return err_set(em, DP_EREMOTE, "the runtime's answer to %s is not OK or Error (set 0x%02x id 0x%02x)",
			       what, h->set, h->id);
	rc = err_set(em, hr == IPC_E_UNKNOWN_COMMAND ? DP_EUNSUPPORTED : DP_EREMOTE,
		     "the runtime refused %s: 0x%08x (%s)%s%s", what, hr, ipc_hresult_str(hr), text ? ": " : "",
		     text ? text : "");
	free(text);
	return rc;
}

/* Send CollectTracing (4 or 2) on a new connection; the stream follows the answer on *fd. */
static int collect(struct trace_session *s, const struct trace_config *c, bool v4, struct err_msg *em)
{
	struct ipc_header h;
	struct buf req, pl;
	struct ipc_reader rd;
	int fd, rc;

	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, IPC_MAX_MESSAGE);
	if ((rc = trace_encode(c, v4, &req, em)) != 0)
		goto out;
	if ((rc = port_take(s->port, s->cookie, TAKE_MS, &fd)) != 0) {
		err_set(em, rc, "no connection from the runtime within %d ms: %s", TAKE_MS, err_str(rc));
		goto out;
	}
	s->takes++;
	rc = ipc_transact(fd, &req, &h, &pl, ANSWER_MS);
	rd = (struct ipc_reader){ (const uint8_t *)pl.data, (const uint8_t *)pl.data + pl.len };
	if (rc != 0)
		err_set(em, rc, "CollectTracing: no answer from the runtime: %s", err_str(rc));
	else if (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK)
		rc = refused(&h, &pl, "CollectTracing", em);
	else if (ipc_get_u64(&rd, &s->id) != 0)
		rc = err_set(em, DP_EREMOTE, "the runtime's answer to CollectTracing has no session id");
	if (rc != 0)
		close(fd);
	else
		s->fd = fd;
out:
	buf_free(&req);
	buf_free(&pl);
	return rc;
}

int trace_start(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		const atomic_bool *stop, struct trace_session **out, struct err_msg *em)
{
	return trace_start_cb(port, cookie, c, duration_ms, stop, NULL, NULL, out, em);
}

int trace_start_cb(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		   const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct trace_session **out,
		   struct err_msg *em)
{
	struct trace_session *s = mem_zalloc(sizeof(*s));
	int rc;

	s->port = port;
	memcpy(s->cookie, cookie, 16);
	s->fd = s->stop_fd = -1;
	s->stop = stop;
	rc = collect(s, c, true, em);
	if (rc == DP_EUNSUPPORTED && c->rundown != 0 && c->rundown != TRACE_DEFAULT_RUNDOWN)
		rc = collect(s, c, false, em); /* before .NET 9: CollectTracing2, with the default rundown */
	if (rc != 0) {
		trace_free(s);
		return rc;
	}
	s->deadline = duration_ms < 0 ? LLONG_MAX : clock_ms() + duration_ms;
	s->nt = nettrace_new(NULL, cb, ctx);
	*out = s;
	return 0;
}

/* StopTracing on a fresh connection; its answer is read later (read_stop_answer). */
static void begin_stop(struct trace_session *s)
{
	struct buf req;
	int fd;

	s->stopping = true;
	s->drain_until = clock_ms() + DRAIN_MS;
	buf_init(&req, IPC_MAX_MESSAGE);
	ipc_begin(&req, IPC_SET_EVENTPIPE, IPC_EVENTPIPE_STOP);
	ipc_put_u64(&req, s->id);
	ipc_end(&req);
	if (port_take(s->port, s->cookie, TAKE_MS, &fd) == 0) {
		s->takes++;
		if (ipc_write_full(fd, req.data, req.len, TAKE_MS) == 0)
			s->stop_fd = fd;
		else
			close(fd);
	}
	buf_free(&req);
	if (s->stop_fd < 0 && s->fd >= 0) {
		/* No way to ask: closing the stream makes the runtime end the session (without its rundown). */
		shutdown(s->fd, SHUT_RDWR);
	}
}

static void read_stop_answer(struct trace_session *s, int timeout_ms)
{
	uint8_t hdr[IPC_HEADER_SIZE], rest[64];
	struct ipc_header h;

	if (ipc_read_full(s->stop_fd, hdr, sizeof(hdr), timeout_ms) == 0 && ipc_parse_header(hdr, &h) == 0 &&
	    h.size > IPC_HEADER_SIZE && (size_t)h.size - IPC_HEADER_SIZE <= sizeof(rest))
		ipc_read_full(s->stop_fd, rest, (size_t)h.size - IPC_HEADER_SIZE, timeout_ms);
	close(s->stop_fd);
	s->stop_fd = -1;
}

long trace_read(struct trace_session *s, char *out, size_t max)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = s->fd, .events = POLLIN }, { .fd = s->stop_fd, .events = POLLIN } };
		long long now = clock_ms(), wait;
		struct err_msg em;
		ssize_t n;

		if (s->done)
			return s->error[0] ? -1 : 0;
		if (!s->stopping && (now >= s->deadline || (s->stop && atomic_load(s->stop))))
			begin_stop(s);
		if (s->stopping && now >= s->drain_until)
			return fail(s, "the runtime did not end the stream within %d s of StopTracing (%llu bytes relayed)",
				    DRAIN_MS / 1000, (unsigned long long)s->bytes);
		wait = s->stopping ? s->drain_until - now : s->deadline - now;
		if (wait > POLL_SLICE_MS)
			wait = POLL_SLICE_MS;
		if (poll(pf, s->stop_fd >= 0 ? 2 : 1, (int)wait) < 0 && errno != EINTR)
			return fail(s, "poll: %s", strerror(errno));
		if (s->stop_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			read_stop_answer(s, 2000);
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = read(s->fd, out, max);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return fail(s, "reading the stream from the runtime: %s (%llu bytes relayed)", strerror(errno),
				    (unsigned long long)s->bytes);
		if (n == 0) {
			s->done = true;
			if (nettrace_finish(s->nt, &em) != 0)
				return fail(s, "the stream ended without its end marker: truncated after %llu bytes (%s)",
					    (unsigned long long)s->bytes, em.text);
			return 0;
		}
		if (nettrace_feed(s->nt, out, (size_t)n, &em) != 0)
			return fail(s, "the runtime's stream does not read as nettrace: %s", em.text);
		s->bytes += (uint64_t)n;
		return (long)n;
	}
}

int trace_run_cb(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		 const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct buf *keep,
		 struct err_msg *em)
{
	struct trace_session *s;
	char *chunk;
	long n;
	int rc = trace_start_cb(port, cookie, c, duration_ms, stop, cb, ctx, &s, em);

	if (rc != 0)
		return rc;
	chunk = mem_alloc(1 << 16);
	while ((n = trace_read(s, chunk, 1 << 16)) > 0)
		if (keep && rc == 0 && buf_append(keep, chunk, (size_t)n) != 0)
			rc = err_set(em, DP_ETOOBIG, "the trace is larger than its cap of %zu MiB", keep->cap >> 20);
	if (n < 0 && rc == 0)
		rc = err_set(em, DP_EIO, "%s", trace_error(s));
	free(chunk);
	trace_free(s);
	return rc;
}

const char *trace_error(const struct trace_session *s)
{
	return s->error;
}

uint64_t trace_bytes(const struct trace_session *s)
{
	return s->bytes;
}

uint64_t trace_id(const struct trace_session *s)
{
	return s->id;
}

void trace_free(struct trace_session *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0 && !s->done && !s->stopping)
		begin_stop(s); /* the reader went away: end the session rather than let it run on */
	if (s->fd >= 0)
		close(s->fd);
	if (s->stop_fd >= 0)
		read_stop_answer(s, 2000);
	while (s->takes-- > 0)
		port_release(s->port, s->cookie);
	nettrace_free(s->nt);
	free(s);
}
