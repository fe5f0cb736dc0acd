/*
 * profile.h - CPU profiles people can look at (/trace?profile=Cpu&format=),
 * from one of two engines: EventPipe's sample profiler (launcher/trace/symbols.h: the
 * samples of threads that were running managed code), or perf events
 * (perfev.h: every thread on CPU, with native, runtime and kernel frames,
 * named by natsym.h and the runtime's method rundown). Samples are counted
 * per stack, the stacks named, and written as folded stacks, a speedscope
 * document, a self-contained flame-graph SVG, a gzip'd pprof profile
 * (launcher/pprof.h), or (perf) `perf script` text.
 */
#ifndef DP_PROFILE_H
#define DP_PROFILE_H

#include <stdatomic.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "perfev.h"
#include "launcher/runtime/port.h"

struct profile;

enum profile_format { PROFILE_FOLDED, PROFILE_SPEEDSCOPE, PROFILE_FLAMEGRAPH, PROFILE_PERFSCRIPT, PROFILE_PPROF };
enum profile_engine { PROFILE_EVENTPIPE, PROFILE_PERF };
/* "folded", "speedscope", "flamegraph", "perfscript", "pprof" (any case) to the format, or -1. */
int profile_format(const char *name);

/* Sample runtime `cookie` for duration_ms (< 0: until *stop), then name the stacks. *out is new. */
int profile_capture(struct port *port, const uint8_t cookie[16], long long duration_ms, const atomic_bool *stop,
		    struct profile **out, struct err_msg *em);
/* The perf engine's settings. */
struct profile_perf {
	unsigned freq;
	enum perfev_event event;
	enum perfev_kernel kernel;
	bool keep_samples; /* each sample kept in order, for PROFILE_PERFSCRIPT */
};
/*
 * Sample the process of runtime `target` (its pid as it sees itself) with
 * perf events for duration_ms (< 0: until *stop): the runtime writes its perf
 * map meanwhile (EnablePerfMap, turned off after unless it was on before),
 * then a method rundown names managed code. *out is new. DP_EREFUSED (what
 * the kernel, the container or the pid namespace refuse, and the fix),
 * perfev_run's and port_take's codes.
 */
int profile_perf_capture(struct port *port, const uint8_t cookie[16], uint64_t target_pid,
			 const struct profile_perf *o, long long duration_ms, const atomic_bool *stop,
			 struct profile **out, struct err_msg *em);
/* Samples counted (of threads running managed code; with perf, of every thread on CPU). */
uint64_t profile_samples(const struct profile *p);
/*
 * Append the profile in format f; title names it (the flame graph's heading, speedscope's name, a
 * pprof comment). 0, or (pprof) DP_ETOOBIG past out's cap or DP_EINTERNAL when zlib fails.
 */
int profile_write(const struct profile *p, enum profile_format f, const char *title, struct buf *out,
		  struct err_msg *em);
void profile_free(struct profile *p); /* accepts NULL */

#endif
