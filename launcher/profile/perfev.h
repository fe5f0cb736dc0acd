/*
 * perfev.h - sampling every thread of a process with Linux perf events
 * (perf_event_open): a CPU clock or cycles at a frequency, each sample with
 * its thread, time and call chain (user, and kernel where permitted). What
 * the kernel needs is checked first, and a refusal names the setting and the
 * fix. Used by the perf engine of the CPU profiles (profile.h).
 */
#ifndef DP_PERFEV_H
#define DP_PERFEV_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

#define PERFEV_MAX_FREQ 10000
#define PERFEV_KERNEL_IP(ip) ((ip) >= 0x8000000000000000ull) /* x86-64 and arm64 keep the kernel in the top half */

enum perfev_event { PERFEV_CPU_CLOCK, PERFEV_CYCLES };
enum perfev_kernel { PERFEV_KERNEL_AUTO, PERFEV_KERNEL_ON, PERFEV_KERNEL_OFF };

struct perfev_opts {
	uint64_t pid; /* in the agent's pid namespace */
	unsigned freq; /* samples per second per thread on CPU, 1..PERFEV_MAX_FREQ */
	enum perfev_event event;
	enum perfev_kernel kernel;
};

/* One sample: ips leaf first, return addresses after the first; kernel ones satisfy PERFEV_KERNEL_IP. Borrowed. */
struct perfev_sample {
	uint32_t tid;
	uint64_t time_ns; /* CLOCK_MONOTONIC */
	uint64_t period;  /* ns of CPU for cpu-clock, cycles for cycles */
	size_t n;
	const uint64_t *ips;
};

/* What a run saw, for the profile's notes. */
struct perfev_stats {
	uint64_t samples, lost; /* lost: records the kernel dropped because a buffer was full */
	unsigned threads, cpus;  /* events opened: threads x cpus */
	bool kernel;             /* kernel call chains were taken */
	char no_kernel[200];     /* when not, why (a sentence), or "" when not asked for */
};

/* Names of the settings, for errors and docs: "cpu-clock", "cycles". */
const char *perfev_event_name(enum perfev_event e);
/* "cpu-clock" or "cycles" (any case) to the event, or -1. */
int perfev_event_parse(const char *name);

/*
 * Sample o->pid for duration_ms (< 0: until *stop), calling on_sample for
 * each sample as it is read (on this thread). 0 with *st filled;
 * DP_EREFUSED with em naming what the kernel or the container refuses and
 * the fix; DP_ENOTFOUND when the process is gone; DP_EIO otherwise.
 */
int perfev_run(const struct perfev_opts *o, long long duration_ms, const atomic_bool *stop,
	       void (*on_sample)(void *ctx, const struct perfev_sample *s), void *ctx, struct perfev_stats *st,
	       struct err_msg *em);

#endif
