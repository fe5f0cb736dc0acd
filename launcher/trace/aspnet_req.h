/*
 * aspnet_req.h - ASP.NET Core's request events, and dotnet-monitor's three
 * ASP.NET triggers over them (AspNetRequestCount, AspNetRequestDuration,
 * AspNetResponseStatus), as a pure module: no threads, no I/O, no clock
 * (every time is the caller's, in milliseconds).
 *
 *  - the session's provider: DiagnosticSource with dotnet-monitor's
 *    FilterAndPayloadSpecs, so that the runtime writes an Activity1Start and
 *    an Activity1Stop event for each request (aspnet_req_provider);
 *  - such an event read into a request (aspnet_req_event);
 *  - the settings' IncludePaths / ExcludePaths (aspnet_glob_*, in aspnet_glob.c) and
 *    StatusCodes (aspnet_status_parse);
 *  - a trigger's state (aspnet_trig_*): fed requests and heartbeats, it says
 *    when its condition holds, as dotnet-monitor's AspNet*Trigger classes do
 *    over its SlidingWindow (dotnet/diagnostics,
 *    Microsoft.Diagnostics.Monitoring.EventPipe/Triggers).
 *
 * Not thread-safe: one caller at a time per trigger (the rules engine holds
 * its lock).
 */
#ifndef DP_ASPNET_REQ_H
#define DP_ASPNET_REQ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "trace.h"

/* ---- the events ---- */

/*
 * The provider the triggers need, added to c: trace_config_http's, as
 * dotnet-monitor's AspNetTriggerSourceConfiguration asks for the same
 * DiagnosticSource filter as its Http profile (the runtime keeps one for all
 * sessions). No rundown is asked for. trace_config_add's errors.
 */
int aspnet_req_provider(struct trace_config *c, struct err_msg *em);

enum aspnet_req_kind { ASPNET_REQ_START = 1, ASPNET_REQ_STOP = 2 };

struct aspnet_req {
	enum aspnet_req_kind kind;
	const char *activity_id; /* Activity.Id; "" when absent */
	const char *path;        /* Request.Path (decoded, UTF-8); "" when absent */
	int status;              /* STOP: Response.StatusCode; 0 when absent or not a number */
	int64_t duration_ticks;  /* STOP: Activity.Duration in 100 ns ticks; -1 when absent or not a number */
	int64_t timestamp;       /* the event's, in the trace's ticks (nettrace_event.timestamp), passed through */
};

/*
 * Whether e is a request's start or stop: 1 with *out filled (its strings
 * borrowed from p, valid until p's next decode), or 0 for any other event.
 * p is e's payload as evpayload_decode read it. A request event is an
 * Activity1Start or Activity1Stop of Microsoft-Diagnostics-DiagnosticSource
 * whose SourceName is Microsoft.AspNetCore; its Arguments ({Key, Value}
 * pairs) give ActivityId, Path, StatusCode and ActivityDuration, keys in any
 * case, a later pair winning over an earlier one, others ignored.
 */
int aspnet_req_event(const struct nettrace_event *e, const struct evpayload *p, struct aspnet_req *out);

/* ---- the settings ---- */

/* A status code range, both ends included (one code: lo == hi). */
struct aspnet_status_range {
	int lo, hi;
};

/*
 * One item of AspNetResponseStatus's StatusCodes, as dotnet-monitor takes
 * it: "500" or "500-599" (three digits each, the first 1-5; nothing else,
 * no spaces), 100..599, low <= high. 0 and *out, or DP_EINVAL with em
 * naming the item.
 */
int aspnet_status_parse(const char *item, struct aspnet_status_range *out, struct err_msg *em);
/* Whether status falls in one of the n ranges. */
bool aspnet_status_in(const struct aspnet_status_range *r, size_t n, int status);

/*
 * IncludePaths and ExcludePaths as dotnet-monitor's GlobMatcher reads them:
 * a pattern matches a whole path; "**" followed by "/" matches zero or more
 * segments with their '/' (any text that is empty or ends in '/'), "*" zero
 * or more characters other than '/', everything else itself, letters in
 * either case. A path matching an ExcludePaths pattern is out; otherwise it
 * is in when IncludePaths is empty or one of its patterns matches. As .NET's
 * "$" does, a pattern also matches the path with one final '\n' dropped.
 * Matching is linear in the path times the pattern (no backtracking).
 */
struct aspnet_glob;

/*
 * The matcher for the lists (either may be empty; copied), new. DP_EINVAL
 * with em naming the pattern when one holds "***", as dotnet-monitor
 * refuses it.
 */
int aspnet_glob_new(char *const *include, size_t n_include, char *const *exclude, size_t n_exclude,
		    struct aspnet_glob **out, struct err_msg *em);
bool aspnet_glob_match(const struct aspnet_glob *g, const char *path);
void aspnet_glob_free(struct aspnet_glob *g); /* accepts NULL */

/* ---- the triggers ---- */

#define ASPNET_TRIG_MAX_INFLIGHT 10000 /* requests an AspNetRequestDuration trigger follows at once */
#define ASPNET_TRIG_HEARTBEAT_MS 9000  /* dotnet-monitor's: a heartbeat looks at running requests at most this often */

enum aspnet_trig_type {
	ASPNET_TRIG_COUNT,    /* AspNetRequestCount: requests started */
	ASPNET_TRIG_DURATION, /* AspNetRequestDuration: requests that ran RequestDuration or longer */
	ASPNET_TRIG_STATUS,   /* AspNetResponseStatus: responses with one of StatusCodes */
};

struct aspnet_trig_config {
	enum aspnet_trig_type type;
	long long count;        /* RequestCount (ResponseCount for STATUS): satisfied at this many, >= 1 */
	long long window_ms;    /* SlidingWindowDuration, 1 s .. 1 day */
	long long duration_ms;  /* DURATION: RequestDuration, 0 .. 1 h */
	const struct aspnet_status_range *status; /* STATUS: one or more (copied) */
	size_t n_status;
	char *const *include;   /* IncludePaths (copied) */
	size_t n_include;
	char *const *exclude;   /* ExcludePaths (copied) */
	size_t n_exclude;
	size_t max_inflight;    /* DURATION: 0 = ASPNET_TRIG_MAX_INFLIGHT */
};

struct aspnet_trig;

/*
 * A trigger's state for c (new). DP_EINVAL with em naming the setting
 * (dotnet-monitor's name) when c is out of range.
 */
int aspnet_trig_new(const struct aspnet_trig_config *c, struct aspnet_trig **out, struct err_msg *em);
void aspnet_trig_free(struct aspnet_trig *t); /* accepts NULL */
/* Forget everything seen, as a new trigger (the rule's actions ran). */
void aspnet_trig_reset(struct aspnet_trig *t);
/*
 * A request event (aspnet_req_event's) at ts_ms (its timestamp on the
 * caller's clock): true when the condition holds now. Requests whose path
 * is not matched are not seen at all. COUNT counts starts; STATUS counts
 * stops with a matching status; DURATION follows each start by its
 * activity ID and counts its stop when the request took RequestDuration or
 * longer, unless a heartbeat counted it already (a stop whose start it did
 * not see is not counted).
 */
bool aspnet_trig_feed(struct aspnet_trig *t, const struct aspnet_req *r, int64_t ts_ms);
/*
 * Time passes (call it every second or so): DURATION counts each request
 * still running RequestDuration after it started, once, at now_ms, and stops
 * following it. Looks at most every ASPNET_TRIG_HEARTBEAT_MS (dotnet-monitor's
 * rhythm); false otherwise, and always for COUNT and STATUS.
 */
bool aspnet_trig_heartbeat(struct aspnet_trig *t, int64_t now_ms);
/* The requests counted in the sliding window now. */
long long aspnet_trig_count(const struct aspnet_trig *t);
/* DURATION: requests followed now, and requests dropped unfinished at the cap (the oldest go first). */
size_t aspnet_trig_inflight(const struct aspnet_trig *t);
uint64_t aspnet_trig_dropped(const struct aspnet_trig *t);

#endif
