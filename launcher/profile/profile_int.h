/*
 * profile_int.h - what profile.c (the two engines: sampling, and counting
 * per stack) and profile_out.c (naming the stacks, writing the formats)
 * share. Not for other files: they use profile.h.
 */
#ifndef DP_PROFILE_INT_H
#define DP_PROFILE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "htab.h"

#include "natsym.h"
#include "perfev.h"
#include "profile.h"
#include "launcher/trace/symbols.h"

#define MAX_DEPTH 512 /* frames kept of a stack */

struct entry {
	uint64_t thread, count;
	uint64_t ticks; /* EventPipe: the real time its samples stand for, in the trace's ticks */
	size_t at, n;   /* its addresses: ips[at..at+n) */
};

/* A sample kept in order (perfscript). */
struct kept {
	uint64_t time_ns, period;
	uint32_t tid;
	size_t at, n;
};

struct comm {
	uint32_t tid;
	char name[20];
};

struct profile {
	struct symbols *sym;
	struct htab stacks; /* of struct entry, by (thread, addresses) */
	uint64_t *ips;
	size_t n_ips, cap_ips;
	uint64_t samples, dropped_stacks;
	double ms_per_sample;
	long long unix_ms, took_ms; /* when sampling started (wall clock), and how long it ran */
	int64_t ticks_per_sec, period_ticks;
	int64_t tick_at, last_at; /* EventPipe: the sampler's tick now (its first sample), its last sample */
	uint64_t tick_ticks;       /* the time this tick's samples stand for */
	struct seen {
		uint64_t thread, tick; /* in the tick numbered p->tick when equal */
	} *seen;                   /* open addressing, MAX_SEEN slots */
	uint64_t tick;
	size_t n_seen;
	/* the perf engine */
	bool perf, keep;
	struct natsym *nat;
	uint64_t pid, nspid; /* in the agent's pid namespace, and as the process sees itself */
	enum perfev_event event;
	struct perfev_stats st;
	struct kept *kept;
	size_t n_kept, cap_kept;
	struct comm *comms;
	size_t n_comms;
	char proc_comm[20];
	char notes[512]; /* what the reader should know: kernel frames not sampled, samples lost */
};

#endif
