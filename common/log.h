/*
 * log.h - the one logger of diagport's daemons (the agent, the webhook and
 * `webhook certs`): one JSON object per line on stderr, written with one
 * write(2), escaped by jansson (what needs no escaping is copied as jansson
 * would write it), so a value holding a quote, a backslash, a newline, a
 * control character or bytes that are not UTF-8 (repaired to U+FFFD,
 * utf8.h) never breaks a line. A key given twice is written once, with its
 * last value; numbers as jansson writes them (reals with 6 digits).
 *
 * Fields are named as Go's log/slog JSONHandler names them, a convention
 * log pipelines already read: "time" (RFC 3339, UTC, milliseconds), "level"
 * ("DEBUG", "INFO", "WARN", "ERROR"), "msg" (what happened, a short stable
 * phrase such as "runtime attached"), then the key/values of the event in
 * the order given.
 *
 *   log_info("runtime attached", LOG_UINT("pid", pid), LOG_STR("uid", uid));
 *   {"time":"2026-11-25T04:30:00.123Z","level":"INFO","msg":"runtime attached","pid":42,"uid":"..."}
 *
 * Secrets are never passed to it; as a second fence, a value whose key names
 * one (token, authorization, password, secret, apikey, private key: any case)
 * is written as "[redacted]".
 */
#ifndef DP_LOG_H
#define DP_LOG_H

#include <stdbool.h>
#include <stddef.h>

/* slog's levels and their numbers. */
enum log_level { LOG_DEBUG = -4, LOG_INFO = 0, LOG_WARN = 4, LOG_ERROR = 8 };

enum log_type { LOG_T_END, LOG_T_STR, LOG_T_STRN, LOG_T_INT, LOG_T_UINT, LOG_T_NUM, LOG_T_BOOL };

/* One key/value; made with the macros below. */
struct log_kv {
	const char *key;
	enum log_type type;
	union {
		const char *s;
		long long i;
		unsigned long long u;
		double d;
		bool b;
	} v;
	size_t n; /* LOG_T_STRN: the string's length */
};

#define LOG_STR(k, x) ((struct log_kv){ .key = (k), .type = LOG_T_STR, .v.s = (x) })
#define LOG_STRN(k, x, len) ((struct log_kv){ .key = (k), .type = LOG_T_STRN, .v.s = (x), .n = (len) })
#define LOG_INT(k, x) ((struct log_kv){ .key = (k), .type = LOG_T_INT, .v.i = (long long)(x) })
#define LOG_UINT(k, x) ((struct log_kv){ .key = (k), .type = LOG_T_UINT, .v.u = (unsigned long long)(x) })
#define LOG_NUM(k, x) ((struct log_kv){ .key = (k), .type = LOG_T_NUM, .v.d = (double)(x) })
#define LOG_BOOL(k, x) ((struct log_kv){ .key = (k), .type = LOG_T_BOOL, .v.b = (x) })
#define LOG_END_ ((struct log_kv){ .key = NULL, .type = LOG_T_END })

/* Write one line at lvl: msg, then the key/values up to the LOG_END_ the macros below add. */
void log_at(enum log_level lvl, const char *msg, ...);
#define log_debug(...) log_at(LOG_DEBUG, __VA_ARGS__, LOG_END_)
#define log_info(...) log_at(LOG_INFO, __VA_ARGS__, LOG_END_)
#define log_warn(...) log_at(LOG_WARN, __VA_ARGS__, LOG_END_)
#define log_error(...) log_at(LOG_ERROR, __VA_ARGS__, LOG_END_)

/* Lines below min are dropped (the default: LOG_INFO). Call before threads start. */
void log_set_level(enum log_level min);
bool log_enabled(enum log_level lvl);
/*
 * A level by name: debug, info, warn/warning, error (any case), or
 * .NET's names as dotnet-monitor's Logging:LogLevel takes them (Trace and
 * Debug as debug, Information, Warning, Error, Critical as error). 0, or
 * DP_EINVAL when the name is none of them.
 */
int log_level_parse(const char *name, enum log_level *out);
/*
 * From now on lines at info and below are queued and written by a thread of
 * the logger's own, many in one write under load, within about a millisecond
 * (log.c says why); warnings and errors still at once, after what is queued.
 * Call before a sandbox is entered. 0, or DP_EINTERNAL (no thread: lines
 * are written by their threads, as before).
 */
int log_async_start(void);
/* Write the queued lines now (at exit it happens by itself). */
void log_flush(void);
/* The lines go to fd (the default: 2) from now on. For tests. */
void log_set_fd(int fd);

#endif
