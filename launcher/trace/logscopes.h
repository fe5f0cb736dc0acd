/*
 * logscopes.h - the logging scopes open in an app, keyed by activity ID, as
 * /logs follows them (logs.c).
 *
 * With TplEventSource's TasksFlowActivityIds on, each ActivityJsonStart of
 * the logging EventSource gets a new activity ID in its event header, with
 * the ID that was current (the enclosing scope's, or zero) as its related
 * activity ID; the ID flows with async code, so a scope may start, log and
 * stop on three different threads. A log event carries the ID of the
 * innermost scope that was current. The table maps each open scope's ID to
 * its arguments and its parent's ID; a log event's scopes are the walk from
 * its ID up through the parents.
 *
 * Everything is bounded: LOGSCOPES_MAX scopes and LOGSCOPES_MAX_BYTES of
 * argument text (a Start past either is not kept, as dotnet-monitor's
 * ScopeLimit), LOGSCOPES_MAX_DEPTH scopes in one walk (the innermost), and a
 * walk stops at an ID it has already visited.
 */
#ifndef DP_LOGSCOPES_H
#define DP_LOGSCOPES_H

#include <stddef.h>
#include <stdint.h>

#define LOGSCOPES_MAX 10000          /* dotnet-monitor's ScopeLimit */
#define LOGSCOPES_MAX_BYTES (4u << 20)
#define LOGSCOPES_MAX_DEPTH 32

struct logscopes;

struct logscopes *logscopes_new(void);  /* new, empty */
void logscopes_free(struct logscopes *s); /* accepts NULL */
/*
 * A scope opened: id (not zero) with arguments json (copied) inside parent
 * (zero: none). An id already open is replaced. 0; -1 when id is zero or the
 * scope does not fit (not kept).
 */
int logscopes_start(struct logscopes *s, const uint8_t id[16], const uint8_t parent[16], const char *json);
/* A scope closed: only the one with that id; an unknown id is ignored. */
void logscopes_stop(struct logscopes *s, const uint8_t id[16]);
/*
 * The scopes of a log event whose header has activity id: the scope with
 * that id and its parents, at most LOGSCOPES_MAX_DEPTH, into out (borrowed
 * argument texts, valid until the next start or stop), outermost first.
 * Returns how many. An id not open: none.
 */
size_t logscopes_chain(const struct logscopes *s, const uint8_t id[16], const char *out[LOGSCOPES_MAX_DEPTH]);

#endif
