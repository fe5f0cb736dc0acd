/*
 * trace.h - EventPipe traces for /trace: what to collect (dotnet-monitor's
 * profiles, or a providers document), the CollectTracing request that asks a
 * runtime for it, and a session whose nettrace stream is relayed as it
 * arrives, checked for its end marker as it passes (nettrace.h), and stopped
 * on a fresh connection when its time is up, when it is asked to stop, or
 * when its reader goes away.
 */
#ifndef DP_TRACE_H
#define DP_TRACE_H

#include <jansson.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "launcher/runtime/port.h"

#define TRACE_DEFAULT_RUNDOWN 0x80020139ull /* the runtime's default rundown keywords (reference §3.5) */
#define TRACE_MAX_PROVIDERS 64
#define TRACE_MAX_BUFFER_MB 1024

struct trace_provider {
	char *name;
	uint64_t keywords;
	uint32_t level; /* 0 LogAlways .. 5 Verbose */
	char *args;     /* "key=value;key2=value2" (a value with ; or = in double quotes), or NULL */
};

struct trace_config {
	struct trace_provider *p; /* owned */
	size_t n;
	uint32_t buffer_mb;
	uint64_t rundown; /* rundown keywords; 0 = no rundown */
};

/*
 * The providers of dotnet-monitor's trace profiles, merged: a
 * comma-separated list of Cpu, Http, Logs, Metrics, GcCollect (case
 * insensitive; NULL = "Cpu,Http,Metrics"). metrics_interval_s is the
 * EventCounterIntervalSec of the Metrics profile. DP_EINVAL with em naming an
 * unknown profile. *out is new; free with trace_config_free.
 */
int trace_config_profile(const char *profiles, unsigned metrics_interval_s, struct trace_config *out,
			 struct err_msg *em);
/*
 * A providers document (POST /trace, dotnet-monitor's EventPipeConfiguration):
 * {"providers":[{"name","keywords":"0x..."|"123","eventLevel":"Verbose"|5,
 * "arguments":{"k":"v"}}], "requestRundown":true, "bufferSizeInMB":256}, keys
 * in any case. DP_ESYNTAX or DP_EINVAL with em naming the field.
 */
int trace_config_json(const char *body, size_t len, struct trace_config *out, struct err_msg *em);
void trace_config_free(struct trace_config *c); /* accepts a zeroed config */
/* A member of o by name, any case (ASP.NET Core reads JSON bodies that way), or NULL. Borrowed. */
json_t *trace_member(json_t *o, const char *name);
/* A name that can go into a provider's arguments: 1..256 printable ASCII characters, none of forbidden. */
bool trace_name_ok(const char *s, const char *forbidden);
/*
 * Add a provider (level 0 LogAlways .. 5 Verbose; args as in struct
 * trace_provider, or NULL). One already there by name (any case) takes the
 * union: keywords or-ed, the more verbose level; DP_EINVAL when both have
 * different arguments, DP_ETOOBIG past TRACE_MAX_PROVIDERS.
 */
int trace_config_add(struct trace_config *c, const char *name, uint64_t keywords, uint32_t level, const char *args,
		     struct err_msg *em);

/*
 * dotnet-monitor's provider for HTTP requests added to c (its Http profile
 * without the rundown; also the ASP.NET triggers' session, aspnet_req.h):
 * Microsoft-Diagnostics-DiagnosticSource, Messages | Events, Verbose, with
 * FilterAndPayloadSpecs mapping ASP.NET Core's HttpRequestIn.Start/Stop to
 * Activity1Start/Stop and HttpClient's to Activity2Start/Stop.
 * trace_config_add's errors.
 */
int trace_config_http(struct trace_config *c, struct err_msg *em);

/*
 * The CollectTracing request for c into req (reset): CollectTracing2 when the
 * rundown keywords are 0 or the default, else CollectTracing4 (.NET 9+), or
 * CollectTracing2 with the default rundown when v4 is false. DP_ETOOBIG when
 * it does not fit one IPC message, DP_EINVAL on a name that is not UTF-8.
 */
int trace_encode(const struct trace_config *c, bool v4, struct buf *req, struct err_msg *em);

struct trace_session;

/*
 * Start a session on runtime `cookie`: a connection from the port, the
 * CollectTracing request (falling back from 4 to 2 on a runtime that does
 * not know 4), the session id. The session ends by itself duration_ms after
 * it started (< 0: never), or when *stop becomes true (may be NULL).
 * DP_EREMOTE with em when the runtime refuses (its HRESULT named); other
 * codes from port_take and the IPC exchange.
 */
int trace_start(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		const atomic_bool *stop, struct trace_session **out, struct err_msg *em);
/* The same, with the stream's events also handed to cb (nettrace.h; borrowed, with ctx) as they are read. */
int trace_start_cb(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		   const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct trace_session **out,
		   struct err_msg *em);
/*
 * A whole session for its callbacks (/stacks, CPU profiles, counters, GC
 * heap snapshots): started as trace_start_cb, read to its end, its bytes
 * appended to keep (NULL: dropped). 0 when the stream ended whole; DP_EIO
 * with em when it did not; DP_ETOOBIG when keep's cap was reached (the
 * session is still read to its end); trace_start's errors.
 */
int trace_run_cb(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		 const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct buf *keep,
		 struct err_msg *em);
/*
 * trace_start_cb on fd, a connection of the runtime's the caller already has
 * (port_on_first's: the runtime not yet resumed, so the session sees it from
 * its first instruction). fd is the session's, closed by trace_free, also on
 * failure. CollectTracing2 or 4 as trace_encode chooses, no fallback (that
 * would need another connection). No duration: it runs until *stop.
 */
int trace_start_on(struct port *port, const uint8_t cookie[16], int fd, const struct trace_config *c,
		   const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct trace_session **out,
		   struct err_msg *em);
/* trace_run_cb's reading, for a session already started: read to its end, then freed (s is gone). */
int trace_run_session(struct trace_session *s, struct buf *keep, struct err_msg *em);

/*
 * The next bytes of the stream, as they come (blocks until some come, the
 * duration passes, or *stop is set; then stops the session and drains it to
 * its end). Returns the count, 0 at the end of a complete stream, -1 when the
 * stream ended without its end marker or failed (trace_error says why).
 */
long trace_read(struct trace_session *s, char *out, size_t max);
/* Why trace_read returned -1 (a sentence), or "" when it did not. Borrowed. */
const char *trace_error(const struct trace_session *s);
/* Bytes relayed so far, and the session id. */
uint64_t trace_bytes(const struct trace_session *s);
uint64_t trace_id(const struct trace_session *s);
/* Ask the session to stop as *stop would (from one of its own callbacks, say): the stream then ends whole. */
void trace_stop_soon(struct trace_session *s);

/*
 * An event that ends a trace (dotnet-monitor's TraceEventFilter: a
 * CollectTrace action's StoppingEvent): the provider and event names, and
 * payload fields that must hold these values (compared as text).
 */
struct trace_stop_event {
	char *provider, *event;
	char **keys, **values;
	size_t n;
};
void trace_stop_event_free(struct trace_stop_event *e); /* accepts NULL; frees e too */
/* Whether e (with its payload decoded into p, when it has a field list) is s's event. */
bool trace_stop_event_match(const struct trace_stop_event *s, const struct nettrace_event *e,
			    const struct evpayload *p);

/* Stop the session if it still runs (on a fresh connection), close it, free. Accepts NULL. */
void trace_free(struct trace_session *s);

#endif
