/*
 * run_int.h - what the files of a fleet capture (run.h) share: run.c plans
 * the jobs and runs the pool, run_capture.c makes one job's capture (and
 * holds the Ctrl-C flag every transfer checks), run_progress.c draws the
 * progress. Private to those three.
 */
#ifndef DP_FLEET_RUN_INT_H
#define DP_FLEET_RUN_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "clock.h"
#include "errors.h"
#include "run.h"
#include "sha256.h"

#define LIST_CAP ((size_t)1024 * 1024)
#define LIST_TIMEOUT_MS 20000L

enum job_state { J_QUEUED, J_RUNNING, J_DONE, J_FAILED, J_CANCELLED, J_UNAVAILABLE };
extern const char *const run_state_names[]; /* by enum job_state */

struct job {
	const struct fleet_agent *a;
	size_t ai, wi;           /* the agent's index in the set, its workload's (for the counters) */
	uint64_t pid;            /* 0: the agent as a whole (/metrics), or none found */
	char *pname;             /* the process's name, or NULL */
	enum job_state st;
	char *error;             /* why it failed or is unavailable */
	char *file;              /* the artifact's name in DIR once whole */
	char *location;          /* egress: the published resource */
	char sha[SHA256_HEX_LEN];
	_Atomic uint64_t bytes;
	long long t0, t1;        /* monotonic ms */
	char started[CLOCK_RFC3339_LEN];
};

struct run {
	const struct fleet_set *s;
	const struct fleet_capture *c;
	const struct fleet_run_opts *o;
	struct job *jobs;
	size_t n, cap;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t running;
	unsigned *agent_busy;    /* per agent: its captures running (at most one) */
	unsigned *wl_running;    /* per workload: its captures running */
	size_t first_queued;     /* no job before it is queued */
	long long t0;
	bool done;
	unsigned drawn;          /* lines of progress on the terminal now */
	char started[CLOCK_RFC3339_LEN];
	/* the output filesystem, when c->keep_free: its reserve, its free space at the start, and the bytes
	   being written to it now (not yet in its free count) */
	uint64_t reserve, free0;
	_Atomic uint64_t writing;
};

/* run_capture.c */
/* The path on the agent that captures j (new). */
char *run_job_path(const struct run *r, const struct job *j);
/* Capture j from path into a file of r->o->out_dir (published whole, or nothing left). 0, or a DP_E* code with em. */
int run_capture_to_file(struct run *r, struct job *j, const char *path, struct err_msg *em);
/* Capture j from path to the agent's egress provider: 202 and an operation, polled until it ends. */
int run_capture_to_egress(struct run *r, struct job *j, const char *path, struct err_msg *em);

/* run_progress.c */
/* n bytes as people read them ("12.3 MiB") into out. */
void run_human_bytes(uint64_t n, char *out, size_t len);
/* One line on stderr for an event of j (not a terminal). Called with r->mu held. */
void run_log_event(const struct run *r, const struct job *j);
/* The progress thread on a terminal: redraws until r->done. */
void *run_progress_main(void *arg);

#endif
