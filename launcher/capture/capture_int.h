/*
 * capture_int.h - what capture_run.c (the runner: limits, operations,
 * sinks) and capture_src.c (each kind's source of bytes) share. Not for
 * other files: they use capture.h.
 *
 * A running capture is a job. Its kind's source starts it (a dump
 * requested, a session started, or a whole artifact made in memory), hands
 * out its bytes, and ends it; the runner decides where the bytes go.
 */
#ifndef DP_CAPTURE_INT_H
#define DP_CAPTURE_INT_H

#include <pthread.h>
#include <stdatomic.h>

#include "buf.h"
#include "capture.h"
#include "dump.h"
#include "mem.h"

#include <unistd.h>

#define CAPTURE_STAGING_PREFIX ".diagport-dump-" /* what a killed agent left is removed at start */

struct captures {
	struct port *port;
	struct ops *ops;
	char *dumps_dir;
	uint64_t dumps_limit;
	struct eproc *eproc;
	struct exceptions *exceptions;
	pthread_mutex_t mu;
	pthread_cond_t freed;          /* a slot was given back */
	unsigned running[CAPTURE_KINDS]; /* per limit group, under mu */
	atomic_ulong seq;              /* names of dump pipes and staging files */
};

struct job {
	struct captures *cs;
	struct capture c;
	const struct capture_kind_def *k;
	struct op *op;   /* NULL for a capture sent back that no operation lists */
	char id[37];     /* the operation's */
	const atomic_bool *stop;   /* DELETE ?stop=true (NULL without an operation) */
	const atomic_bool *cancel; /* DELETE (NULL without an operation) */
	uint64_t bytes;  /* handed out so far */
	bool ended;      /* the source said its artifact ended whole */
	struct httpd_req *req; /* a dump's request sent whole, while its download runs */
	/* the artifact, as start describes it */
	const char *ctype;
	const char *ext; /* of its name YYYYMMDD_HHMMSS_PID.EXT; NULL: a dump's name */
	bool inline_;    /* for a browser to show rather than save */
	/* the source's state */
	struct dump_job *dump;
	char *fifo;
	struct trace_session *s;
	struct buf out;  /* a whole artifact, or what a converted session's events became */
	size_t out_off;
	char *scratch;   /* a converted session's nettrace bytes, dropped */
	bool conv_done;
	void *conv;      /* the converter (metrics_live, logs) */
	struct evpayload *stop_pl; /* a trace with a stopping event: its events' payloads */
	int src_fd;      /* a file capture's file, or -1 */
};

/* A kind of capture: its limit and its source. */
struct capture_kind_def {
	const char *what;             /* "dump", "trace", ...: messages, names of partial files */
	const char *busy;             /* the 429's sentence */
	unsigned limit;               /* at once (dotnet-monitor's defaults) */
	enum capture_kind group;      /* whose count it shares (a CPU profile is a trace) */
	bool stoppable;               /* DELETE ?stop=true ends it with what it has */
	bool whole;                   /* made whole in memory by start: sent with its length */
	/* begin; 0, or a DP_E* code with em */
	int (*start)(struct job *j, struct err_msg *em);
	/* the next bytes: a count, 0 at the end of a whole artifact, -1 when it failed (error says why) */
	long (*read)(struct job *j, char *out, size_t max);
	/* optional: the rest into fd in one go (a dump: spliced), under cap (0: none) and *cancel */
	int (*copy)(struct job *j, int fd, uint64_t cap, const atomic_bool *cancel, uint64_t *n, struct err_msg *em);
	/* why read failed ("" when it did not) */
	const char *(*error)(struct job *j);
	/* free what start made; safe after a failed start */
	void (*end)(struct job *j);
};
extern const struct capture_kind_def capture_kinds[CAPTURE_KINDS];

/*
 * capture_job.c: a slot of the kind's, waiting up to 100 ms for one (a client
 * that asks again the moment its download ends can be quicker than the
 * thread that sent it is to give the slot back); false when none came.
 */
bool capture_slot_take(struct captures *cs, const struct capture_kind_def *k);
/*
 * capture_job.c: the end of a job (its source's state freed, the slot given
 * back, the operation finished: rc 0 Succeeded at location, else Failed with
 * why; the job freed), and a failure answered before a byte was sent.
 */
void capture_job_end(struct job *j, int rc, const char *location, const char *why);
void capture_send_failure(struct httpd_req *r, const struct job *j, int rc, const struct err_msg *em);

/*
 * capture_dump.c: a started dump to the response through a staging file;
 * whole = the staged transport (sent once whole, with its length), else the
 * file transport (sent as it is staged). Answers r and ends j, now or when
 * the download ends.
 */
void capture_send_dump(struct httpd_req *r, struct job *j, const char *fname, bool whole);

/* Whether the capture's operation was cancelled. */
static inline bool job_cancelled(const struct job *j)
{
	return j->cancel && atomic_load(j->cancel);
}
/* A new path in the dumps directory for a dump's pipe or a staging file (a new string). */
static inline char *captures_staging_path(struct captures *cs, uint64_t pid)
{
	return mem_printf("%s/" CAPTURE_STAGING_PREFIX "%llu-%lu-%ld", cs->dumps_dir, (unsigned long long)pid,
			  atomic_fetch_add(&cs->seq, 1) + 1, (long)getpid());
}

#endif
