/*
 * served.h - which capture kinds this agent serves (--captures, the
 * `captures` setting): each kind its own permission, one bit each. The
 * names are the contract shared with the injector's `captures` option and
 * the fleet client: dump, gcdump, trace, cpuprofile, stacks, metrics, logs,
 * env, exceptions; `all` is every one of them (the default).
 */
#ifndef DP_LAUNCH_SERVED_H
#define DP_LAUNCH_SERVED_H

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

enum served_kind {
	SERVED_DUMP,
	SERVED_GCDUMP,
	SERVED_TRACE,
	SERVED_CPUPROFILE,
	SERVED_STACKS,
	SERVED_METRICS,
	SERVED_LOGS,
	SERVED_ENV,
	SERVED_EXCEPTIONS,
	SERVED_KINDS, /* not a kind: a route that is no capture (/processes, /info, ...) */
};
#define SERVED_ALL ((1u << SERVED_KINDS) - 1)

/*
 * Parse LIST ("stacks,metrics", "all"; names case-insensitive, blanks around
 * them allowed, repeats harmless) into *mask (set only on success). An
 * unknown or empty name is DP_EINVAL with em naming it, `where` (the flag,
 * variable or file position) and the kinds there are.
 */
int served_parse(const char *list, unsigned *mask, const char *where, struct err_msg *em);
/* The kind's contract name ("dump"). */
const char *served_name(enum served_kind k);
/* The kinds in mask as "stacks,metrics" (in the order of the enum), "all", or "none", into out. */
void served_text(unsigned mask, char *out, size_t n);

#endif
