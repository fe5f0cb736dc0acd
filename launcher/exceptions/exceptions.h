/*
 * exceptions.h - /exceptions: every attached runtime's first-chance
 * exceptions, from the runtime's own events (nothing is loaded into the
 * app), kept from the moment it attaches in a bounded history per runtime
 * (exc_history.h), and written out as dotnet-monitor writes them:
 * newline-delimited JSON, JSON sequences or its text layout, filtered by
 * dotnet-monitor's include/exclude lists (docs/agent/exceptions.md).
 *
 * One EventPipe session per runtime (the Exception keyword, catch events
 * included, a stack with each event), started again when it ends while its
 * runtime stays. The stacks are addresses; they are named when written, by a
 * rundown of the runtime's methods run then (only when exceptions came since
 * the last one), the same tables /stacks uses (symbols.h).
 */
#ifndef DP_EXCEPTIONS_H
#define DP_EXCEPTIONS_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "launcher/runtime/port.h"

#define EXC_DEFAULT_COUNT 1000          /* exceptionsMaxCount */
#define EXC_DEFAULT_BYTES (4ull << 20)  /* exceptionsMaxBytes, per runtime */
#define EXC_MAX_COUNT 100000
#define EXC_MAX_BYTES (256ull << 20)
#define EXC_MAX_FILTERS 64              /* include and exclude entries each */

struct exceptions;

struct exceptions_config {
	struct port *port;  /* borrowed */
	size_t max_count;   /* per runtime (0: EXC_DEFAULT_COUNT) */
	uint64_t max_bytes; /* per runtime (0: EXC_DEFAULT_BYTES) */
};
/* Start keeping histories of the port's runtimes (a watcher thread). */
struct exceptions *exceptions_start(const struct exceptions_config *cfg);
/* Stop every session and free. Accepts NULL. Unset port_on_first first. */
void exceptions_free(struct exceptions *x);
/* For port_on_first (ctx: the exceptions): a runtime's session started before it is resumed. */
bool exceptions_on_first(void *ctx, const uint8_t cookie[16], uint64_t pid, int fd);

enum exc_format { EXC_NDJSON, EXC_JSON_SEQ, EXC_TEXT };

/* dotnet-monitor's ExceptionFilter: the fields given must all match (ordinal); NULL = any. */
struct exc_filter {
	char *method, *type, *module; /* of the top frame */
	char *exception;              /* the exception's type */
};
/* ExceptionsConfiguration: kept when some include matches (or there is none) and no exclude does. */
struct exc_filters {
	struct exc_filter *include, *exclude;
	size_t n_include, n_exclude;
};
/*
 * An ExceptionsConfiguration document ({"include":[{"methodName",
 * "typeName", "moduleName", "exceptionType"}], "exclude":[...]}; names in any
 * case) into *out. DP_ESYNTAX or DP_EINVAL with em naming the field.
 */
int exc_filters_json(const char *body, size_t len, struct exc_filters *out, struct err_msg *em);
struct json_t;
/* The same from a parsed document (a collection rule's Filters). */
int exc_filters_from(struct json_t *doc, const char *where, struct exc_filters *out, struct err_msg *em);
void exc_filters_free(struct exc_filters *f); /* accepts a zeroed value */

/*
 * Runtime cookie's history, names resolved, filtered by f (NULL: none), in
 * fmt, appended to out. pid and command_line name the threads from /proc
 * when the agent shares the app's PID namespace (command_line may be NULL).
 * DP_ENOTFOUND with em when no history is kept for it (turned off, or it
 * ended); a failed rundown leaves frames unnamed, not the request failed.
 */
int exceptions_write(struct exceptions *x, const uint8_t cookie[16], uint64_t pid, const char *command_line,
		     const struct exc_filters *f, enum exc_format fmt, struct buf *out, struct err_msg *em);

/*
 * The runtime's session stopped for a while, and started again on resume
 * (the history kept; exceptions thrown between are not in it). A GC heap
 * snapshot needs it: the runtime names each type in a heap walk only once
 * while its provider stays enabled, so a second snapshot beside a session
 * that keeps the provider on would have no type names. Returns once the
 * session has ended (at most 3 s). Calls nest.
 */
void exceptions_pause(struct exceptions *x, const uint8_t cookie[16]);
void exceptions_resume(struct exceptions *x, const uint8_t cookie[16]);

/* An exception of a history, as a crash record tells it. */
struct exc_last {
	char *type, *message; /* new strings */
	int64_t wall_ms;
};
/*
 * The last exception process pid threw on thread tid (0: on any thread)
 * before when_ms (Unix ms; 0: any time), from its history (a runtime's
 * history is kept a while after it ended; the newest such runtime with that
 * pid is asked), when it is of type (NULL: any): an earlier exception of
 * another type is not the crash's. 0 with *out, or DP_ENOTFOUND.
 */
int exceptions_last(struct exceptions *x, uint64_t pid, uint64_t tid, int64_t when_ms, const char *type,
		    struct exc_last *out);

#endif
