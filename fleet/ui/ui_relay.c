/*
 * ui_relay.c - an agent's answer passed through to the page as it comes:
 * the live counters (/livemetrics, a reading a second for a few minutes)
 * and the recent exceptions (/exceptions). A thread calls the agent (call.c,
 * the agent's own token) and writes what comes into a pipe; the page's
 * response reads the pipe. Nothing is held whole; when the page goes away
 * the pipe closes and the call to the agent is cancelled.
 *
 * The status is chosen once the agent has said something: an agent that
 * refuses (no such process, the kind not served) gives the page the same
 * 4xx with its sentence, one that cannot be reached a 502.
 */
#include "ui_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "fleet/call.h"
#include "mem.h"

#define FIRST_BYTE_MS 30000L          /* the agent's first byte, or its refusal, within this */
#define LIVE_SECONDS 300              /* one /livemetrics stream; the page opens the next */
#define EXCEPTIONS_CAP (8u << 20)     /* bytes of /exceptions passed on */

struct relay {
	atomic_int refs;
	int rd, wr;                 /* the pipe: the call writes, the response reads */
	atomic_bool cancel;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool started, ended;        /* a first byte came; the call returned */
	int rc;
	long status;
	struct err_msg em;
	struct ui_snap *snap;
	const struct fleet_agent *agent;
	char *path;
	const char *accept;
	uint64_t cap, bytes;        /* cap 0: none */
};

/* The pid query parameter of r (1 to INT32_MAX), or 0 after answering 400. */
static long query_pid(struct httpd_req *r)
{
	const char *p = httpd_query(r, "pid");
	char *end;
	long v;

	errno = 0;
	v = p ? strtol(p, &end, 10) : 0;
	if (p == NULL || errno || end == p || *end || v <= 0 || v > INT32_MAX) {
		httpd_problem(r, 400, "Bad Request", "pid: a process id (a positive number) is needed");
		return 0;
	}
	return v;
}

static void relay_put(struct relay *x)
{
	if (atomic_fetch_sub(&x->refs, 1) != 1)
		return;
	if (x->rd >= 0)
		close(x->rd);
	if (x->wr >= 0)
		close(x->wr);
	ui_snap_put(x->snap);
	pthread_mutex_destroy(&x->mu);
	pthread_cond_destroy(&x->cv);
	free(x->path);
	free(x);
}

static int to_pipe(void *ctx, const char *p, size_t n, struct err_msg *em)
{
	struct relay *x = ctx;

	if (x->cap && (x->bytes += n) > x->cap)
		return err_set(em, DP_ETOOBIG, "the answer passed %u MiB", (unsigned)(x->cap >> 20));
	pthread_mutex_lock(&x->mu);
	if (!x->started) {
		x->started = true;
		pthread_cond_broadcast(&x->cv);
	}
	pthread_mutex_unlock(&x->mu);
	while (n > 0) {
		ssize_t w = write(x->wr, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return err_set(em, DP_ECANCELED, "the page went away");
		p += w;
		n -= (size_t)w;
	}
	return 0;
}

static void *relay_main(void *arg)
{
	struct relay *x = arg;
	struct fleet_call c = { .agent = x->agent, .caller = x->snap->set.caller, .method = "GET", .path = x->path,
				.accept = x->accept, .timeout_ms = (LIVE_SECONDS + 60) * 1000L,
				.floor_after_ms = (LIVE_SECONDS + 60) * 1000L, .sink = to_pipe, .ctx = x,
				.cancel = &x->cancel };
	struct err_msg em = { .text = "" };
	int rc = fleet_call_run(&c, &em);

	fleet_safe_text(em.text);
	pthread_mutex_lock(&x->mu);
	x->rc = rc;
	x->status = c.status;
	x->em = em;
	x->ended = true;
	close(x->wr);
	x->wr = -1;
	pthread_cond_broadcast(&x->cv);
	pthread_mutex_unlock(&x->mu);
	relay_put(x);
	return NULL;
}

static long relay_read(void *ctx, char *out, size_t max)
{
	struct relay *x = ctx;

	for (;;) {
		ssize_t n = read(x->rd, out, max);

		if (n < 0 && errno == EINTR)
			continue;
		if (n > 0)
			return (long)n;
		if (n < 0)
			return -1;
		pthread_mutex_lock(&x->mu); /* the write end is closed once the call has returned */
		n = x->rc == 0 ? 0 : -1;    /* cut off, never a whole-looking body, when the agent's answer was */
		pthread_mutex_unlock(&x->mu);
		return (long)n;
	}
}

static void relay_done(void *ctx)
{
	struct relay *x = ctx;

	atomic_store(&x->cancel, true);
	close(x->rd); /* a write into the pipe now fails: the call ends */
	x->rd = -1;
	relay_put(x);
}

/* Call the agent of ?target= for path + pid, and pass its answer on as ctype. */
static void relay(struct ui *u, struct httpd_req *r, const char *route, const char *accept, const char *ctype,
		  uint64_t cap)
{
	long pid = query_pid(r);
	struct relay *x;
	int fds[2];
	struct timespec until;
	pthread_t th;
	pthread_attr_t attr;

	if (pid == 0)
		return;
	x = mem_zalloc(sizeof(*x));
	x->rd = x->wr = -1;
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->cv, NULL);
	atomic_init(&x->refs, 1);
	x->snap = ui_snap_get(u);
	if ((x->agent = ui_snap_agent(x->snap, httpd_query(r, "target"), r)) == NULL) {
		relay_put(x);
		return;
	}
	if (pipe2(fds, O_CLOEXEC) != 0)
		DP_FATAL("pipe2 failed");
	x->rd = fds[0];
	x->wr = fds[1];
	x->path = mem_printf("%s%spid=%ld", route, strchr(route, '?') ? "&" : "?", pid);
	x->accept = accept;
	x->cap = cap;
	atomic_fetch_add(&x->refs, 1); /* the thread's */
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, relay_main, x) != 0)
		DP_FATAL("pthread_create failed");
	pthread_attr_destroy(&attr);
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += FIRST_BYTE_MS / 1000;
	pthread_mutex_lock(&x->mu);
	while (!x->started && !x->ended)
		if (pthread_cond_timedwait(&x->cv, &x->mu, &until) == ETIMEDOUT)
			break;
	if (!x->started && x->ended && x->rc != 0) {
		/* the agent's own refusal keeps its 4xx, but never 401 or 403: those mean, to the page, that the UI
		 * itself refused it (its session is gone) */
		long st = x->status >= 400 && x->status < 500 && x->status != 401 && x->status != 403 ? x->status : 502;

		pthread_mutex_unlock(&x->mu);
		httpd_problem(r, (unsigned)st, st == 502 && x->status == 0 ? "Bad Gateway" : "Refused by the agent", "%s: %s",
			      x->agent->name, x->em.text);
		relay_done(x);
		return;
	}
	pthread_mutex_unlock(&x->mu);
	httpd_send_stream(r, 200, ctype, relay_read, relay_done, x, NULL);
}

void ui_route_live(struct ui *u, struct httpd_req *r)
{
	char route[64];

	snprintf(route, sizeof(route), "/livemetrics?durationSeconds=%d", LIVE_SECONDS);
	relay(u, r, route, NULL, "application/json-seq", 0);
}

void ui_route_exceptions(struct ui *u, struct httpd_req *r)
{
	relay(u, r, "/exceptions", "application/x-ndjson", "application/x-ndjson", EXCEPTIONS_CAP);
}
