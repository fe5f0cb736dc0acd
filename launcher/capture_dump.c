/*
 * capture_dump.c - a dump sent to the HTTP response through a staging file
 * (capture_int.h: capture_send_dump), the file and staged transports.
 *
 * A copier thread moves createdump's pipe into a staging file in the dumps
 * directory that never has a name (O_TMPFILE, or unlinked at once), under
 * the dumps limit; the app's freeze is bounded by that copy, never by the
 * client. The download reads the same file behind the copier:
 *  - file (the default): the head goes out once HOLD bytes are staged (or
 *    the dump ended), then the body follows the copier, chunked (each chunk
 *    sent with sendfile), so the download overlaps createdump. A failure after the head cuts the
 *    transfer: no last chunk, so the client sees an error, never a body that
 *    looks complete. A dump that ends within HOLD goes as staged does.
 *  - staged: the download begins once the dump is whole and the runtime has
 *    reported success, with Content-Length (sendfile).
 * Before the head, a failure still has its status (507 over the cap or on a
 * full volume, 500 the runtime's words), and a client that goes away is seen
 * by watching its socket; after it, by the send that fails. Either stops
 * createdump (the copier's cancel flag) and the app runs on. The file's space
 * is returned when the download ends, and by the kernel if the agent dies.
 */
#include "capture_int.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/*
 * Staged before the head is sent: enough that a small --dumps-limit or a
 * volume that is nearly full still gets its 507, small beside a heap dump
 * (a few ms of copying); a Mini or Triage dump is often whole by then.
 */
#define HOLD ((uint64_t)32 << 20)
#define TICK_MS 200 /* how often a waiter looks at the client's socket */
/*
 * The download's thread (the request's own, which ends with it) runs at
 * this nice: on a node short of cores, sending while createdump writes
 * would take CPU from createdump and lengthen the app's freeze.
 */
#define FOLLOW_NICE 10

struct follow {
	struct job *j;
	struct httpd_req *r;
	int fd;                /* the staging file; the response's once sent whole */
	pthread_t copier;
	pthread_mutex_t mu;
	pthread_cond_t moved;  /* staged grew, or the copy ended */
	uint64_t staged;       /* bytes in fd (under mu) */
	bool done;             /* the copy ended (under mu), with rc and em */
	int rc;
	struct err_msg em;
	atomic_bool stop;      /* the client went away: the copier stops createdump */
	uint64_t sent;         /* sent by the download (its thread's) */
	bool ended;            /* the download read the last byte of a dump that succeeded */
};

/* An unnamed staging file in the dumps directory (O_TMPFILE where the filesystem allows, else unlinked at once). */
static int staging_open(struct captures *cs, struct err_msg *em)
{
	char *named;
	int fd = open(cs->dumps_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	named = captures_staging_path(cs, 0);
	fd = open(named, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0)
		unlink(named);
	else
		err_set(em, DP_EIO, "cannot create a staging file in %s: %s", cs->dumps_dir, strerror(errno));
	free(named);
	return fd;
}

static void on_progress(void *ctx, uint64_t total)
{
	struct follow *f = ctx;

	pthread_mutex_lock(&f->mu);
	f->staged = total;
	pthread_cond_broadcast(&f->moved);
	pthread_mutex_unlock(&f->mu);
}

static void *copier_main(void *arg)
{
	struct follow *f = arg;
	struct err_msg em = { "" };
	uint64_t n = 0;
	int rc = f->j->k->copy(f->j, f->fd, f->j->cs->dumps_limit, &f->stop, &n, &em);

	f->j->k->end(f->j); /* the runtime's connection given back: the app runs on from here */
	if (rc == DP_ECANCELED)
		err_set(&em, DP_ECANCELED, "the client went away; the dump was stopped");
	pthread_mutex_lock(&f->mu);
	f->done = true;
	f->rc = rc;
	f->em = em;
	if (rc == 0)
		f->staged = n;
	pthread_cond_broadcast(&f->moved);
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

/* Wait on moved for a tick at most; the caller holds mu. */
static void wait_tick(struct follow *f)
{
	struct timespec until;

	clock_deadline(&until, TICK_MS);
	pthread_cond_timedwait(&f->moved, &f->mu, &until);
}

/* Whether the client has gone; if so the copier is told to stop createdump. The caller holds mu. */
static bool client_left(struct follow *f)
{
	bool gone;

	pthread_mutex_unlock(&f->mu);
	gone = httpd_client_gone(f->r, 0);
	pthread_mutex_lock(&f->mu);
	if (gone)
		atomic_store(&f->stop, true);
	return gone;
}

static void follow_free(struct follow *f)
{
	pthread_join(f->copier, NULL);
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->moved);
	free(f);
}

/* How many bytes after `sent` the download may send now (waiting for some), 0 after the last of a dump that
 * succeeded, -1 to cut the transfer. */
static long long follow_avail(void *ctx, uint64_t sent)
{
	struct follow *f = ctx;
	long long n;

	f->sent = sent;
	f->j->bytes = sent;
	pthread_mutex_lock(&f->mu);
	while (sent == f->staged && !f->done) {
		wait_tick(f);
		if (sent == f->staged && !f->done && client_left(f))
			break;
	}
	n = atomic_load(&f->stop) || (f->done && f->rc != 0) ? -1 : (long long)(f->staged - sent);
	pthread_mutex_unlock(&f->mu);
	f->ended = n == 0;
	return n; /* -1: no last chunk, the client sees the body cut off */
}

/* The download ended, whole or not: createdump stopped if it still runs, the file's space returned, the job ended. */
static void follow_done(void *ctx)
{
	struct follow *f = ctx;
	struct job *j = f->j;
	char why[sizeof(f->em.text)];

	atomic_store(&f->stop, true);
	pthread_join(f->copier, NULL);
	close(f->fd);
	if (f->ended) {
		capture_job_end(j, 0, NULL, NULL);
	} else if (f->rc != 0 && f->rc != DP_ECANCELED) {
		capture_job_end(j, f->rc, NULL, f->em.text);
	} else if (f->rc == DP_ECANCELED) { /* the client left while createdump wrote: stopped, as a cancel */
		snprintf(why, sizeof(why), "the client went away after %llu bytes; the dump was stopped",
			 (unsigned long long)f->sent);
		capture_job_end(j, DP_ECANCELED, NULL, why);
	} else {
		/* the connection ended: the client left or stalled past the idle timeout, or the agent is stopping */
		snprintf(why, sizeof(why), "the download was cut off (the client went away or stopped reading, or the "
			 "agent is stopping) with %llu of %llu staged bytes handed to the connection",
			 (unsigned long long)f->sent, (unsigned long long)f->staged);
		capture_job_end(j, DP_EIO, NULL, why);
	}
	pthread_mutex_destroy(&f->mu);
	pthread_cond_destroy(&f->moved);
	free(f);
}

static void whole_done(void *ctx)
{
	struct job *j = ctx;

	if (httpd_sent_whole(j->req))
		capture_job_end(j, 0, NULL, NULL);
	else
		capture_job_end(j, DP_EIO, NULL, "the client went away before the whole dump was sent");
}

void capture_send_dump(struct httpd_req *r, struct job *j, const char *fname, bool whole)
{
	struct follow *f;
	struct err_msg em;
	uint64_t size;
	int fd = staging_open(j->cs, &em), rc;
	bool done;

	whole = whole || !httpd_chunked(r); /* HTTP/1.0 has no way to say a body was cut off */
	if (fd < 0) {
		capture_send_failure(r, j, DP_EIO, &em);
		capture_job_end(j, DP_EIO, NULL, em.text);
		return;
	}
	f = mem_zalloc(sizeof(*f));
	f->j = j;
	f->r = r;
	f->fd = fd;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->moved, NULL);
	dump_on_progress(j->dump, on_progress, f);
	if (pthread_create(&f->copier, NULL, copier_main, f) != 0)
		DP_FATAL("cannot start a thread to stage a dump");
	pthread_mutex_lock(&f->mu);
	while (!f->done && (whole || f->staged < HOLD)) {
		wait_tick(f);
		if (!f->done)
			(void)client_left(f); /* the copier stops and says so: done follows */
	}
	done = f->done;
	pthread_mutex_unlock(&f->mu);
	if (!done) {
		(void)setpriority(PRIO_PROCESS, (id_t)gettid(), FOLLOW_NICE); /* best effort */
		httpd_send_follow(r, 200, j->ctype, fd, follow_avail, follow_done, f, fname);
		return;
	}
	rc = f->rc;
	em = f->em;
	size = f->staged;
	follow_free(f);
	if (rc != 0) {
		close(fd); /* the space is freed with it: the file never had a name */
		capture_send_failure(r, j, rc, &em);
		capture_job_end(j, rc, NULL, em.text);
		return;
	}
	j->bytes = size;
	j->req = r;
	httpd_on_done(r, whole_done, j);
	httpd_send_fd(r, 200, j->ctype, fd, size, fname);
}
