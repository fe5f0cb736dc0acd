/*
 * logs.h - /logs: what an app logs through ILogger, read from the logging
 * EventSource (Microsoft-Extensions-Logging) over EventPipe, written as
 * dotnet-monitor writes it: newline-delimited JSON, JSON sequence (RFC 7464)
 * or text in the simple console format.
 *
 * Which categories and levels: the app's own filters (the default), one
 * level for every category (level=...), or per-category levels (a POST body,
 * dotnet-monitor's LogsConfiguration). The runtime filters; the converter
 * drops anything below the requested level as well.
 */
#ifndef DP_LOGS_H
#define DP_LOGS_H

#include <stdbool.h>

#include "buf.h"
#include "errors.h"
#include "eventpipe/nettrace.h"
#include "trace.h"

#define LOGS_MAX_FILTERS 64

enum logs_format { LOGS_NDJSON, LOGS_JSON_SEQ, LOGS_TEXT };

struct logs_filter {
	int level;           /* the least LogLevel kept, 0 Trace .. 5 Critical; -1 = the app's filters */
	bool use_app_filters;
	char **categories;   /* with levels[i] (-1: the category's default) */
	int *levels;
	size_t n;
};

/* "Trace", "Debug", "Information", "Warning", "Error", "Critical" (any case) -> 0..5; -1 when none of them. */
int logs_level(const char *name);
/* A LogsConfiguration body: {"filterSpecs":{"Cat":"Level"|null}, "logLevel":"Warning", "useAppFilters":true}. */
int logs_filter_json(const char *body, size_t len, struct logs_filter *out, struct err_msg *em);
void logs_filter_free(struct logs_filter *f);
/* The session: the logging provider with FilterSpecs from f, and TplEventSource's TasksFlowActivityIds. */
int logs_trace_config(const struct logs_filter *f, struct trace_config *out, struct err_msg *em);

struct logs;
/*
 * A converter of the session's events into entries appended to out, in
 * timestamp order. The runtime writes each thread's events in its own
 * buffer, so a scope's Start, a log line in it and its Stop (often on three
 * threads) can arrive out of order: logging events are held back until the
 * stream shows that nothing earlier can still come (an event marked sorted,
 * a sequence point), or until logs_flush.
 */
struct logs *logs_new(const struct logs_filter *f, enum logs_format fmt, struct buf *out);
extern const struct nettrace_callbacks logs_callbacks; /* ctx: the struct logs */
/* The stream has ended: write the entries of the events still held back. */
void logs_flush(struct logs *l);
uint64_t logs_entries(const struct logs *l);
void logs_free(struct logs *l); /* accepts NULL */

#endif
