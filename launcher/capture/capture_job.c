/*
 * capture_job.c - what every way of sending a capture shares (capture_int.h):
 * the kinds' slots (one counter per kind under one mutex), the end of a job,
 * and a failure answered before a byte was sent. Below capture_run.c and
 * capture_dump.c, which both end jobs.
 */
#include "capture_int.h"

#include <pthread.h>
#include <stdlib.h>

#include "clock.h"
#include "log.h"

#define SLOT_WAIT_MS 100

/* ---- slots ---- */

/*
 * One of the kind's slots, waiting SLOT_WAIT_MS for one: a client that asks
 * again the moment its download ends can be quicker than the thread that
 * sent it is to give the slot back.
 */
bool capture_slot_take(struct captures *cs, const struct capture_kind_def *k)
{
	unsigned *n = &cs->running[k->group];
	struct timespec until;
	bool ok;

	clock_deadline(&until, SLOT_WAIT_MS);
	pthread_mutex_lock(&cs->mu);
	while (*n >= k->limit && pthread_cond_timedwait(&cs->freed, &cs->mu, &until) == 0)
		;
	ok = *n < k->limit;
	if (ok)
		(*n)++;
	pthread_mutex_unlock(&cs->mu);
	return ok;
}

static void slot_give(struct captures *cs, const struct capture_kind_def *k)
{
	pthread_mutex_lock(&cs->mu);
	cs->running[k->group]--;
	pthread_cond_broadcast(&cs->freed);
	pthread_mutex_unlock(&cs->mu);
}

/*
 * The end of a job: the source's state freed, the slot given back, then the
 * operation finished (rc 0: Succeeded at location; DP_ECANCELED when it was
 * cancelled; else Failed with why), and the job freed.
 */
void capture_job_end(struct job *j, int rc, const char *location, const char *why)
{
	j->k->end(j);
	slot_give(j->cs, j->k);
	if (rc != 0 && job_cancelled(j))
		rc = DP_ECANCELED;
	log_at(rc == 0 || rc == DP_ECANCELED ? LOG_INFO : LOG_WARN, "capture ended", LOG_STR("event", "capture-ended"),
	       LOG_STR("kind", j->k->what), LOG_UINT("pid", j->c.target.pid), LOG_STR("operation", j->op ? j->id : NULL),
	       LOG_STR("outcome", rc == 0 ? "Succeeded" : rc == DP_ECANCELED ? "Cancelled" : "Failed"),
	       LOG_UINT("bytes", j->bytes), LOG_STR("location", location),
	       LOG_STR("error", rc == 0 ? NULL : rc == DP_ECANCELED ? "cancelled" : why), LOG_END_);
	if (j->op)
		op_finish(j->cs->ops, j->op, rc, location, rc == DP_ECANCELED ? "cancelled" : why);
	capture_free(&j->c);
	free(j);
}

void capture_send_failure(struct httpd_req *r, const struct job *j, int rc, const struct err_msg *em)
{
	if (rc == DP_ETOOBIG && j->k->copy)
		httpd_problem(r, 507, "Insufficient Storage", "%s", em->text);
	else if (rc == DP_EREMOTE || rc == DP_EUNSUPPORTED)
		httpd_problem(r, 502, "Bad Gateway", "pid %llu: %s", (unsigned long long)j->c.target.pid, em->text);
	else if (rc == DP_EREFUSED && j->c.kind == CAPTURE_PROFILE) /* perf: the kernel, the container or the pid
									    namespace refuse; the text says which and the fix */
		httpd_problem(r, 403, "Forbidden", "pid %llu: %s", (unsigned long long)j->c.target.pid, em->text);
	else if (j->k->copy)
		httpd_problem(r, 500, "Internal Server Error", "%s", em->text);
	else
		httpd_problem(r, 500, "Internal Server Error", "pid %llu: %s", (unsigned long long)j->c.target.pid,
			      em->text);
}
