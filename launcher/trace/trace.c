/*
 * trace.c - EventPipe sessions (trace.h); what to collect is
 * trace_config.c's.
 *
 * The session is started with CollectTracing2 (or 4, when the rundown keywords
 * are neither none nor the default), and its stream is read on the caller's
 * thread as it comes: every byte goes through the nettrace reader, so the end
 * of the stream is known to be its end marker, not a cut.
 *
 * Stopping: StopTracing on a second connection. The runtime answers it only
 * once it has written the rundown and the end marker to the first, so the
 * request is sent and the first connection is drained while the answer is
 * awaited on the second (waiting for the answer first could deadlock on a
 * full socket).
 */
#include "trace.h"

#include <errno.h>
#include <jansson.h>
#include <limits.h>
#include <poll.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "launcher/runtime/ipc.h"
#include "mem.h"
#include "eventpipe/nettrace.h"

#define IPC_EVENTPIPE_STOP 0x01
#define TAKE_MS 5000      /* a connection from the port */
#define ANSWER_MS 10000   /* the runtime's answer to CollectTracing */
#define DRAIN_MS 60000    /* after StopTracing: the rundown and the end marker */
#define POLL_SLICE_MS 200 /* how often the stop flag is looked at */

/* ---- the session ---- */

struct trace_session {
	struct port *port;
	uint8_t cookie[16];
	int fd;      /* the stream */
	int stop_fd; /* StopTracing's connection, once sent; -1 */
	int takes;   /* connections taken from the port (each released at the end) */
	uint64_t id, bytes;
	long long deadline, drain_until;
	const atomic_bool *stop;
	atomic_bool stop_self; /* trace_stop_soon */
	bool stopping, done;
	struct nettrace *nt;
	char error[600];
};

static long fail(struct trace_session *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static long fail(struct trace_session *s, const char *fmt, ...)
{
	va_list ap;

	if (s->error[0] == '\0') {
		va_start(ap, fmt);
		vsnprintf(s->error, sizeof(s->error), fmt, ap);
		va_end(ap);
	}
	s->done = true;
	return -1;
}

/* The HRESULT of an Error answer, as a sentence. */
static int refused(const struct ipc_header *h, const struct buf *pl, const char *what, struct err_msg *em)
{
	uint32_t hr = 0;
	char *text = NULL;
	int rc;

	if (h->set != IPC_SET_SERVER || h->id != IPC_SERVER_ERROR ||
	    ipc_parse_error((const uint8_t *)pl->data, pl->len, &hr, &text) != 0)
		return err_set(em, DP_EREMOTE, "the runtime's answer to %s is not OK or Error (set 0x%02x id 0x%02x)",
			       what, h->set, h->id);
	rc = err_set(em, hr == IPC_E_UNKNOWN_COMMAND ? DP_EUNSUPPORTED : DP_EREMOTE,
		     "the runtime refused %s: 0x%08x (%s)%s%s", what, hr, ipc_hresult_str(hr), text ? ": " : "",
		     text ? text : "");
	free(text);
	return rc;
}

/* Send CollectTracing (4 or 2) on a new connection (or on given, >= 0: taken); the stream follows the answer. */
static int collect(struct trace_session *s, const struct trace_config *c, bool v4, int given, struct err_msg *em)
{
	struct ipc_header h;
	struct buf req, pl;
	struct ipc_reader rd;
	int fd, rc;

	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, IPC_MAX_MESSAGE);
	if ((rc = trace_encode(c, v4, &req, em)) != 0) {
		if (given >= 0)
			close(given);
		goto out;
	}
	if (given >= 0) {
		fd = given;
	} else if ((rc = port_take(s->port, s->cookie, TAKE_MS, &fd)) != 0) {
		err_set(em, rc, "no connection from the runtime within %d ms: %s", TAKE_MS, err_str(rc));
		goto out;
	} else {
		s->takes++;
	}
	rc = ipc_transact(fd, &req, &h, &pl, ANSWER_MS);
	rd = (struct ipc_reader){ (const uint8_t *)pl.data, (const uint8_t *)pl.data + pl.len };
	if (rc != 0)
		err_set(em, rc, "CollectTracing: no answer from the runtime: %s", err_str(rc));
	else if (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK)
		rc = refused(&h, &pl, "CollectTracing", em);
	else if (ipc_get_u64(&rd, &s->id) != 0)
		rc = err_set(em, DP_EREMOTE, "the runtime's answer to CollectTracing has no session id");
	if (rc != 0)
		close(fd);
	else
		s->fd = fd;
out:
	buf_free(&req);
	buf_free(&pl);
	return rc;
}

int trace_start(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		const atomic_bool *stop, struct trace_session **out, struct err_msg *em)
{
	return trace_start_cb(port, cookie, c, duration_ms, stop, NULL, NULL, out, em);
}

/* A session on a connection of the port's (fd < 0) or the caller's (fd, taken: no fallback, it would need
 * another connection). */
static int start(struct port *port, const uint8_t cookie[16], int fd, const struct trace_config *c,
		 long long duration_ms, const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx,
		 struct trace_session **out, struct err_msg *em)
{
	struct trace_session *s = mem_zalloc(sizeof(*s));
	int rc;

	s->port = port;
	memcpy(s->cookie, cookie, 16);
	s->fd = s->stop_fd = -1;
	s->stop = stop;
	rc = collect(s, c, true, fd, em);
	if (fd < 0 && rc == DP_EUNSUPPORTED && c->rundown != 0 && c->rundown != TRACE_DEFAULT_RUNDOWN)
		rc = collect(s, c, false, -1, em); /* before .NET 9: CollectTracing2, with the default rundown */
	if (rc != 0) {
		trace_free(s);
		return rc;
	}
	s->deadline = duration_ms < 0 ? LLONG_MAX : clock_ms() + duration_ms;
	s->nt = nettrace_new(NULL, cb, ctx);
	*out = s;
	return 0;
}

int trace_start_cb(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		   const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct trace_session **out,
		   struct err_msg *em)
{
	return start(port, cookie, -1, c, duration_ms, stop, cb, ctx, out, em);
}

int trace_start_on(struct port *port, const uint8_t cookie[16], int fd, const struct trace_config *c,
		   const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct trace_session **out,
		   struct err_msg *em)
{
	return start(port, cookie, fd, c, -1, stop, cb, ctx, out, em);
}

/* StopTracing on a fresh connection; its answer is read later (read_stop_answer). */
static void begin_stop(struct trace_session *s)
{
	struct buf req;
	int fd;

	s->stopping = true;
	s->drain_until = clock_ms() + DRAIN_MS;
	buf_init(&req, IPC_MAX_MESSAGE);
	ipc_begin(&req, IPC_SET_EVENTPIPE, IPC_EVENTPIPE_STOP);
	ipc_put_u64(&req, s->id);
	ipc_end(&req);
	if (port_take(s->port, s->cookie, TAKE_MS, &fd) == 0) {
		s->takes++;
		if (ipc_write_full(fd, req.data, req.len, TAKE_MS) == 0)
			s->stop_fd = fd;
		else
			close(fd);
	}
	buf_free(&req);
	if (s->stop_fd < 0 && s->fd >= 0) {
		/* No way to ask: closing the stream makes the runtime end the session (without its rundown). */
		shutdown(s->fd, SHUT_RDWR);
	}
}

static void read_stop_answer(struct trace_session *s, int timeout_ms)
{
	uint8_t hdr[IPC_HEADER_SIZE], rest[64];
	struct ipc_header h;

	if (ipc_read_full(s->stop_fd, hdr, sizeof(hdr), timeout_ms) == 0 && ipc_parse_header(hdr, &h) == 0 &&
	    h.size > IPC_HEADER_SIZE && (size_t)h.size - IPC_HEADER_SIZE <= sizeof(rest))
		ipc_read_full(s->stop_fd, rest, (size_t)h.size - IPC_HEADER_SIZE, timeout_ms);
	close(s->stop_fd);
	s->stop_fd = -1;
}

void trace_stop_soon(struct trace_session *s)
{
	atomic_store(&s->stop_self, true);
}

void trace_stop_event_free(struct trace_stop_event *e)
{
	if (e == NULL)
		return;
	free(e->provider);
	free(e->event);
	for (size_t i = 0; i < e->n; i++) {
		free(e->keys[i]);
		free(e->values[i]);
	}
	free(e->keys);
	free(e->values);
	free(e);
}

bool trace_stop_event_match(const struct trace_stop_event *s, const struct nettrace_event *e,
			    const struct evpayload *p)
{
	if (strcasecmp(e->meta->provider, s->provider) != 0 || strcmp(e->meta->name, s->event) != 0)
		return false;
	for (size_t i = 0; i < s->n; i++) {
		const struct evvalue *v = p ? evpayload_get(p, s->keys[i]) : NULL;
		char num[64];
		const char *have = NULL;

		if (v == NULL)
			return false;
		if (v->s)
			have = v->s;
		else {
			snprintf(num, sizeof(num), "%lld", (long long)v->i);
			if (v->d != (double)v->i)
				snprintf(num, sizeof(num), "%.17g", v->d);
			have = num;
		}
		if (strcmp(have, s->values[i]) != 0)
			return false;
	}
	return true;
}

long trace_read(struct trace_session *s, char *out, size_t max)
{
	for (;;) {
		struct pollfd pf[2] = { { .fd = s->fd, .events = POLLIN }, { .fd = s->stop_fd, .events = POLLIN } };
		long long now = clock_ms(), wait;
		struct err_msg em;
		ssize_t n;

		if (s->done)
			return s->error[0] ? -1 : 0;
		if (!s->stopping &&
		    (now >= s->deadline || (s->stop && atomic_load(s->stop)) || atomic_load(&s->stop_self)))
			begin_stop(s);
		if (s->stopping && now >= s->drain_until)
			return fail(s, "the runtime did not end the stream within %d s of StopTracing (%llu bytes relayed)",
				    DRAIN_MS / 1000, (unsigned long long)s->bytes);
		wait = s->stopping ? s->drain_until - now : s->deadline - now;
		if (wait > POLL_SLICE_MS)
			wait = POLL_SLICE_MS;
		if (poll(pf, s->stop_fd >= 0 ? 2 : 1, (int)wait) < 0 && errno != EINTR)
			return fail(s, "poll: %s", strerror(errno));
		if (s->stop_fd >= 0 && (pf[1].revents & (POLLIN | POLLHUP | POLLERR)))
			read_stop_answer(s, 2000);
		if (!(pf[0].revents & (POLLIN | POLLHUP | POLLERR)))
			continue;
		n = read(s->fd, out, max);
		if (n < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (n < 0)
			return fail(s, "reading the stream from the runtime: %s (%llu bytes relayed)", strerror(errno),
				    (unsigned long long)s->bytes);
		if (n == 0) {
			s->done = true;
			if (nettrace_finish(s->nt, &em) != 0)
				return fail(s, "the stream ended without its end marker: truncated after %llu bytes (%s)",
					    (unsigned long long)s->bytes, em.text);
			return 0;
		}
		if (nettrace_feed(s->nt, out, (size_t)n, &em) != 0)
			return fail(s, "the runtime's stream does not read as nettrace: %s", em.text);
		s->bytes += (uint64_t)n;
		return (long)n;
	}
}

int trace_run_cb(struct port *port, const uint8_t cookie[16], const struct trace_config *c, long long duration_ms,
		 const atomic_bool *stop, const struct nettrace_callbacks *cb, void *ctx, struct buf *keep,
		 struct err_msg *em)
{
	struct trace_session *s;
	int rc = trace_start_cb(port, cookie, c, duration_ms, stop, cb, ctx, &s, em);

	if (rc != 0)
		return rc;
	return trace_run_session(s, keep, em);
}

int trace_run_session(struct trace_session *s, struct buf *keep, struct err_msg *em)
{
	char *chunk;
	long n;
	int rc = 0;

	chunk = mem_alloc(1 << 16);
	while ((n = trace_read(s, chunk, 1 << 16)) > 0)
		if (keep && rc == 0 && buf_append(keep, chunk, (size_t)n) != 0)
			rc = err_set(em, DP_ETOOBIG, "the trace is larger than its cap of %zu MiB", keep->cap >> 20);
	if (n < 0 && rc == 0)
		rc = err_set(em, DP_EIO, "%s", trace_error(s));
	free(chunk);
	trace_free(s);
	return rc;
}

const char *trace_error(const struct trace_session *s)
{
	return s->error;
}

uint64_t trace_bytes(const struct trace_session *s)
{
	return s->bytes;
}

uint64_t trace_id(const struct trace_session *s)
{
	return s->id;
}

void trace_free(struct trace_session *s)
{
	if (s == NULL)
		return;
	if (s->fd >= 0 && !s->done && !s->stopping)
		begin_stop(s); /* the reader went away: end the session rather than let it run on */
	if (s->fd >= 0)
		close(s->fd);
	if (s->stop_fd >= 0)
		read_stop_answer(s, 2000);
	while (s->takes-- > 0)
		port_release(s->port, s->cookie);
	nettrace_free(s->nt);
	free(s);
}
