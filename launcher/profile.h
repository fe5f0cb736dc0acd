/*
 * profile.h - CPU profiles people can look at (/trace?profile=Cpu&format=):
 * a sampled session (symbols.h), the samples of threads that were running
 * managed code counted per stack, the stacks named, and written as folded
 * stacks, a speedscope document or a self-contained flame-graph SVG.
 */
#ifndef DP_PROFILE_H
#define DP_PROFILE_H

#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "port.h"

struct profile;

enum profile_format { PROFILE_FOLDED, PROFILE_SPEEDSCOPE, PROFILE_FLAMEGRAPH };
/* "folded", "speedscope", "flamegraph" (any case) to the format, or -1. */
int profile_format(const char *name);

/* Sample runtime `cookie` for duration_ms (< 0: until *stop), then name the stacks. *out is new. */
int profile_capture(struct port *port, const uint8_t cookie[16], long long duration_ms, const atomic_bool *stop,
		    struct profile **out, struct err_msg *em);
/* Samples counted (of threads running managed code). */
uint64_t profile_samples(const struct profile *p);
/* Append the profile in format f; title names it (the flame graph's heading, speedscope's name). */
void profile_write(const struct profile *p, enum profile_format f, const char *title, struct buf *out);
void profile_free(struct profile *p); /* accepts NULL */

#endif
