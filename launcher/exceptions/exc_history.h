/*
 * exc_history.h - one runtime's first-chance exceptions, as its own events
 * tell them (Microsoft-Windows-DotNETRuntime, the Exception keyword), kept in
 * a bounded history: the newest max_count, at most max_bytes together, the
 * oldest dropped first.
 *
 * An entry is what the events give: the type, the message, the throwing
 * thread, the time, and the thread's stack as code addresses (named later,
 * by a rundown: exceptions.h). The inner exception is not in the events;
 * it is inferred: an exception thrown with the HasInnerException flag takes
 * as its inner exception the last one thrown on the same thread (the pattern
 * `catch (E e) { throw new F(..., e); }`). Not thread-safe: the caller
 * locks.
 */
#ifndef DP_EXC_HISTORY_H
#define DP_EXC_HISTORY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "eventpipe/nettrace.h"
#include "htab.h"

#define EXC_PROVIDER "Microsoft-Windows-DotNETRuntime"
#define EXC_KEYWORDS 0x8000ull  /* Exception */
#define EXC_LEVEL 2             /* Error: ExceptionThrown_V1 alone (the catch, finally and stop events of the
				   keyword are Informational: four more events with stacks a round, for nothing we keep) */
#define EXC_MAX_MESSAGE 4096    /* bytes of a message kept (UTF-8); a longer one is cut with "..." */
#define EXC_MAX_IPS 256         /* addresses of a stack kept, innermost first */

struct exc_entry {
	uint64_t id;        /* 1, 2, ... for the runtime */
	int64_t wall_ms;    /* when it was thrown, Unix ms */
	uint64_t thread;    /* the OS thread id */
	char *type, *message;
	uint32_t hresult;
	uint16_t flags;     /* the event's: 0x1 has an inner exception, 0x4 rethrown, ... */
	uint64_t inner;     /* the inner exception's id, 0 when none is known */
	uint64_t *ips;      /* the stack when thrown */
	size_t n_ips;
	size_t bytes;       /* what it weighs in the history */
};

struct exc_history {
	struct exc_entry *ring; /* max_count entries, allocated with the first */
	size_t head, n;         /* the oldest, and how many */
	size_t max_count, max_bytes, bytes;
	uint64_t next_id;
	uint64_t seen, dropped; /* thrown since the session began; dropped for the caps */
	struct htab threads;    /* per thread: the last exception thrown */
};

void exc_history_init(struct exc_history *h, size_t max_count, size_t max_bytes);
void exc_history_free(struct exc_history *h); /* accepts a zeroed history */
/* Take an event of the session: ExceptionThrown_V1 (80) becomes an entry (wall_ms its time); true when it was one. */
bool exc_history_event(struct exc_history *h, const struct nettrace_event *e, int64_t wall_ms);
/* A copy of the entries, oldest first (new; free with exc_entries_free). */
size_t exc_history_copy(const struct exc_history *h, struct exc_entry **out);
void exc_entries_free(struct exc_entry *e, size_t n);

#endif
