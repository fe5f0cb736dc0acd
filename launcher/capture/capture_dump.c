/*
 * capture_dump.c - a dump sent to the HTTP response, straight from
 * createdump's pipe or through a staging file (capture_int.h:
 * capture_send_dump), the file and staged transports.
 *
 * A copier thread drains createdump's pipe; what it does not send straight
 * goes into a staging file in the dumps directory that never has a name
 * (O_TMPFILE, or unlinked at once), under the dumps limit. The app's freeze
 * is bounded by that copy and the local disk, never by the client:
 *  - file (the default): the head goes out at once (after HOLD bytes are
 *    staged when the volume or the cap is short of 64 MiB, so that a dump
 *    that cannot fit still gets its 507; a dump that ends within them goes as
 *    staged does), then the body is chunked. While the download has sent
 *    every staged byte, the copier splices the pipe onto the socket itself
 *    (follow_take), as far as the socket takes it; the rest goes into the
 *    file, which the download sends (sendfile) before anything newer. So a
 *    client that keeps up gets the dump without a write and a read of the
 *    disk, and a slow one gets the disk as its buffer. A failure after the
 *    head cuts the transfer: no last chunk, so the client sees an error,
 *    never a body that looks complete.
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
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"

/*
 * Staged before the head is sent when the volume or the cap has less than
 * twice this: enough that a small --dumps-limit or a volume that is nearly
 * full still gets its 507 (a few ms of copying); a Mini or Triage dump is
 * often whole by then. With more room the head goes out at once: bytes the
 * client takes straight never need the space.
 */
#define HOLD ((uint64_t)32 << 20)
#define TICK_MS 200 /* how often a waiter looks at the client's socket */
#define WAIT_STEP_NS (20LL * 1000000) /* the longest the copier waits for the client before it looks again */
#define HEAD_WAIT_NS (100LL * 1000000) /* the most the copier waits for the head to go out before it stages */
#define DISK_NS_PER_MIB_MAX (4000000ULL) /* the slowest staging credited to bytes sent straight: 250 MiB/s */
#define DISK_NS_PER_MIB_GUESS (1000000ULL) /* before the file has taken a MiB: 1 GiB/s, page cache on any disk */
/*
 * The download's thread (the request's own, which ends with it) runs at
 * this nice: on a node short of cores, sending while createdump writes
 * would take CPU from createdump and lengthen the app's freeze.
 */
#define FOLLOW_NICE 10

struct follow {
	struct job *j;
	struct httpd_req *r;
	pthread_t copier;
	pthread_mutex_t mu;
	pthread_cond_t moved;  /* staged grew, or the copy ended */
	uint64_t staged;       /* bytes in fd (under mu) */
	uint64_t sent;         /* of fd's bytes, sent by the download (under mu) */
	uint64_t direct;       /* bytes sent straight from the pipe (under mu) */
	uint64_t hold;         /* staged before the head (HOLD, or 0 when the space is ample) */
	long long waited_ns;   /* how long the copier has waited for the client (under mu) */
	long long head_ns;     /* when the head went out */
	long long start_ns;    /* when the copy began */
	long long disk_ns, file_t0; /* time spent moving disk_bytes into the file; when the move under way began */
	uint64_t disk_bytes;
	struct err_msg em;
	int fd;                /* the staging file; the response's once sent whole */
	int rc;
	atomic_bool stop;      /* the client went away: the copier stops createdump */
	bool done;             /* the copy ended (under mu), with rc and em */
	bool waiting;          /* the download waits in follow_avail: the socket is free (under mu) */
	bool busy;             /* the copier is sending straight from the pipe (under mu) */
	bool headed;           /* the head went out, the download waits for bytes: they may go straight (under mu) */
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

static long long now_ns(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (long long)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void on_progress(void *ctx, uint64_t total)
{
	struct follow *f = ctx;

	pthread_mutex_lock(&f->mu);
	if (f->file_t0) {
		f->disk_ns += now_ns() - f->file_t0;
		f->disk_bytes += total - f->staged;
		f->file_t0 = 0;
	}
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

/*
 * How long the copier may still wait for the client: the time writing every
 * byte of the dump so far to the staging file took (measured on this dump's
 * own moves into it; the bytes sent straight at the same rate per byte, or
 * at 1 GiB/s before a MiB was timed, so that a client that keeps up from
 * the start is not sent to the file by its first full socket), less what it
 * has waited. The caller holds mu.
 */
static long long credit_ns(const struct follow *f)
{
	uint64_t per_mib = DISK_NS_PER_MIB_GUESS; /* until a MiB has been timed: a few KiB say little */

	if (f->disk_bytes >= (1u << 20))
		per_mib = (uint64_t)f->disk_ns * (1u << 20) / f->disk_bytes;
	if (per_mib > DISK_NS_PER_MIB_MAX)
		per_mib = DISK_NS_PER_MIB_MAX;
	return f->disk_ns + (long long)(f->direct / (1u << 20) * per_mib) - f->waited_ns;
}

/* Wait on moved for ms at most; the caller holds mu. */
static void wait_ms(struct follow *f, long ms)
{
	struct timespec until;

	clock_deadline(&until, ms);
	pthread_cond_timedwait(&f->moved, &f->mu, &until);
}

/* Whether, at the pace the client has taken the body so far, it would send what the file holds on the credit left. */
static bool catch_up(const struct follow *f, long long now)
{
	uint64_t took = f->sent + f->direct;
	long long spent = now - f->head_ns;

	return took > 0 && (double)(f->staged - f->sent) * (double)spent / (double)took <= (double)credit_ns(f);
}

/*
 * Offered createdump's pipe by the copy before each move into the file. Once
 * the head is out and the download has sent every staged byte, what the pipe
 * holds goes straight to the client; what the client cannot take goes into
 * the file, and the download sends it from there before anything newer, so
 * the order holds. The copier may wait for the client (the pipe full, so the
 * app stays frozen) on credit only (credit_ns): in all, no longer than
 * createdump writing the dump to the local disk would have kept the app
 * frozen. A client slower than that gets the rest through the file.
 */
static long long follow_take(void *ctx, int rfd)
{
	struct follow *f = ctx;
	int avail = 0;
	long long n = 0, t0, step;

	if (ioctl(rfd, FIONREAD, &avail) != 0 || avail <= 0)
		return 0; /* the copy waits for createdump */
	pthread_mutex_lock(&f->mu);
	while (!atomic_load(&f->stop)) {
		if (!f->headed) {
			if (f->hold > 0 || now_ns() - f->start_ns > HEAD_WAIT_NS)
				break; /* staged first, for a status; or the head is late: the file */
			wait_ms(f, 1); /* the head is on its way; the body's first bytes are these */
			continue;
		}
		step = credit_ns(f);
		step = step < 0 ? 0 : step > WAIT_STEP_NS ? WAIT_STEP_NS : step;
		t0 = now_ns();
		if (f->sent != f->staged && step > 0 && !catch_up(f, t0))
			break; /* the download would not drain the file on the credit left: save it */
		if (!httpd_zero_copy(f->r))
			break; /* https: the pipe's bytes are filed, and the download encrypts them from the file */
		if (f->waiting && f->sent == f->staged) {
			f->busy = true;
			pthread_mutex_unlock(&f->mu);
			n = httpd_follow_splice(f->r, rfd, (uint64_t)avail, (int)((step + 999999) / 1000000));
			pthread_mutex_lock(&f->mu);
			f->busy = false; /* the download, woken by the next byte staged or the end, takes the socket back */
		} else if (step > 0) {
			wait_ms(f, (long)((step + 999999) / 1000000)); /* the download drains the file */
		}
		if (n > 0)
			f->direct += (uint64_t)n;
		else
			f->waited_ns += now_ns() - t0;
		if (n != 0 || step == 0)
			break;
	}
	if (n == 0)
		f->file_t0 = now_ns(); /* the copy moves the pipe into the file next: timed in on_progress */
	pthread_mutex_unlock(&f->mu);
	return n;
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

	pthread_mutex_lock(&f->mu);
	f->sent = sent;
	f->waiting = true;
	if (!f->headed) {
		f->headed = true;
		f->head_ns = now_ns();
	}
	if (sent == f->staged)
		pthread_cond_broadcast(&f->moved); /* a copier waiting for the download to catch up */
	while ((sent == f->staged && !f->done) || f->busy) {
		wait_tick(f);
		if (sent == f->staged && !f->done && !f->busy && client_left(f))
			break;
	}
	f->waiting = false;
	f->j->bytes = sent + f->direct;
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
	unsigned long long sent, all; /* what went to the connection, straight or from the file; of all read */

	atomic_store(&f->stop, true);
	pthread_join(f->copier, NULL);
	close(f->fd);
	sent = f->sent;
	sent += f->direct;
	all = f->staged;
	all += f->direct;
	if (f->ended) {
		capture_job_end(j, 0, NULL, NULL);
	} else if (f->rc != 0 && f->rc != DP_ECANCELED) {
		capture_job_end(j, f->rc, NULL, f->em.text);
	} else if (f->rc == DP_ECANCELED) { /* the client left while createdump wrote: stopped, as a cancel */
		snprintf(why, sizeof(why), "the client went away after %llu bytes; the dump was stopped", sent);
		capture_job_end(j, DP_ECANCELED, NULL, why);
	} else {
		/* the connection ended: the client left or stalled past the idle timeout, or the agent is stopping */
		snprintf(why, sizeof(why), "the download was cut off (the client went away or stopped reading, or the "
			 "agent is stopping) with %llu of %llu bytes handed to the connection", sent, all);
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
	struct statvfs vfs;
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
	f->hold = fstatvfs(fd, &vfs) != 0 || (uint64_t)vfs.f_bavail * vfs.f_frsize < 2 * HOLD ||
			  (j->cs->dumps_limit && j->cs->dumps_limit < 2 * HOLD) ? HOLD : 0;
	f->start_ns = now_ns();
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->moved, NULL);
	dump_on_progress(j->dump, on_progress, f);
	if (!whole)
		dump_on_pipe(j->dump, follow_take, f);
	if (pthread_create(&f->copier, NULL, copier_main, f) != 0)
		DP_FATAL("cannot start a thread to stage a dump");
	pthread_mutex_lock(&f->mu);
	while (!f->done && (whole || f->staged < f->hold)) {
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
