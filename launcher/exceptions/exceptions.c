/*
 * exceptions.c - the exception histories' sessions and their rundowns
 * (exceptions.h): a watcher thread gives each attached runtime a session
 * (started again after RETRY_MS when it ends while its runtime stays), whose
 * events go into the runtime's history; a runtime that goes away leaves its
 * history behind for a while (the last ENDED_KEPT), for the crash records.
 *
 * Names: the session carries no method events (they would cost a stack walk
 * per method the app compiles); a write that finds exceptions newer than the
 * last rundown runs one (a session of the runtime's Jit and Loader events
 * stopped at once: the rundown then lists every method and module), keeps
 * its tables for the next write, and names every frame with them.
 */
#include "exc_int.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"
#include "launcher/runtime/watcher.h"
#include "launcher/trace/trace.h"

#define WATCH_MS 500     /* how often the port's runtimes are looked at */
#define RETRY_MS 5000    /* a session that ended while its runtime stays is started again after this */
#define ENDED_KEPT 4     /* histories of runtimes gone, kept for the crash records */
#define SESSION_MB 16    /* the runtime's buffer for the session */
#define PAUSE_WAIT_MS 3000 /* exceptions_pause waits this long at most for the session to end */

struct collector {
	struct exceptions *x;
	uint8_t cookie[16];
	uint64_t pid;
	pthread_t th;
	bool started, seen;
	bool unsupported;        /* the runtime refused the session as a command it does not know: not asked again */
	unsigned paused;         /* exceptions_pause calls not yet resumed (under x->mu): no session meanwhile */
	atomic_bool stop, done;
	long long retry_at;
	struct nettrace_trace header;
	bool have_header;
	int first_fd;            /* the runtime's first connection, for the thread's session, or -1 */
	pthread_mutex_t mu;      /* the history */
	struct exc_history h;
	pthread_mutex_t names_mu; /* one rundown at a time; the tables */
	struct symbols *sym;
	uint64_t named_upto;     /* the newest id the tables were made after */
};

struct exceptions {
	struct port *port;
	size_t max_count;
	uint64_t max_bytes;
	pthread_mutex_t mu; /* the lists (the watcher changes them; writers look up) */
	pthread_cond_t session_ended; /* a session ended (exceptions_pause waits for it) */
	struct collector **c, *ended[ENDED_KEPT];
	size_t nc, cap_c;
	struct watcher *watcher;
};

static int on_header(void *ctx, const struct nettrace_trace *t)
{
	struct collector *c = ctx;

	c->header = *t;
	c->have_header = true;
	return 0;
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct collector *c = ctx;
	int64_t ts = c->have_header ? nettrace_wall_ms(&c->header, e->timestamp) : clock_unix_ms();

	pthread_mutex_lock(&c->mu);
	exc_history_event(&c->h, e, ts);
	pthread_mutex_unlock(&c->mu);
	return 0;
}

static struct trace_provider session_provider = { (char *)EXC_PROVIDER, EXC_KEYWORDS, EXC_LEVEL, NULL };
static const struct trace_config session = { .p = &session_provider, .n = 1, .buffer_mb = SESSION_MB };
static const struct nettrace_callbacks session_cb = { .trace = on_header, .event = on_event };

static void *collect_main(void *arg)
{
	struct collector *c = arg;
	struct trace_session *s;
	struct err_msg em;
	int rc, fd = c->first_fd;

	c->first_fd = -1;
	if (fd >= 0) { /* CollectTracing on the connection the runtime came with: it is resumed on its next one */
		if ((rc = trace_start_on(c->x->port, c->cookie, fd, &session, &c->stop, &session_cb, c, &s, &em)) == 0)
			rc = trace_run_session(s, NULL, &em);
	} else {
		rc = trace_run_cb(c->x->port, c->cookie, &session, -1, &c->stop, &session_cb, c, NULL, &em);
	}
	if (rc == DP_EUNSUPPORTED) { /* a runtime without EventPipe sessions of this kind: asked once */
		c->unsupported = true;
		log_info("no exception history for this runtime", LOG_STR("event", "exceptions-ended"),
			 LOG_UINT("pid", c->pid), LOG_STR("error", em.text));
	}

	if (!atomic_load(&c->stop) && rc != DP_EUNSUPPORTED)
		log_warn("exceptions session ended", LOG_STR("event", "exceptions-ended"), LOG_UINT("pid", c->pid),
			 LOG_STR("error", rc ? em.text : "the stream ended"),
			 LOG_UINT("retryInSeconds", RETRY_MS / 1000));
	pthread_mutex_lock(&c->x->mu);
	atomic_store(&c->done, true);
	pthread_cond_broadcast(&c->x->session_ended);
	pthread_mutex_unlock(&c->x->mu);
	return NULL;
}

static void collector_join(struct collector *c)
{
	if (!c->started)
		return;
	atomic_store(&c->stop, true);
	pthread_join(c->th, NULL);
	c->started = false;
}

static void collector_free(struct collector *c)
{
	if (c == NULL)
		return;
	collector_join(c);
	pthread_mutex_lock(&c->names_mu); /* a write that found it before it ended is done with it */
	pthread_mutex_unlock(&c->names_mu);
	exc_history_free(&c->h);
	symbols_free(c->sym);
	pthread_mutex_destroy(&c->mu);
	pthread_mutex_destroy(&c->names_mu);
	free(c);
}

static void collector_start(struct collector *c)
{
	atomic_store(&c->stop, false);
	atomic_store(&c->done, false);
	c->have_header = false;
	c->started = pthread_create(&c->th, NULL, collect_main, c) == 0;
	if (!c->started) {
		if (c->first_fd >= 0)
			close(c->first_fd); /* the runtime comes again, and is resumed then */
		c->first_fd = -1;
		c->retry_at = clock_ms() + RETRY_MS;
	} else
		log_info("exceptions session started", LOG_STR("event", "exceptions-session"), LOG_UINT("pid", c->pid));
}

static struct collector *collector_new(struct exceptions *x, const struct port_runtime *rt)
{
	struct collector *c = mem_zalloc(sizeof(*c));

	c->x = x;
	c->first_fd = -1;
	memcpy(c->cookie, rt->cookie, 16);
	c->pid = rt->pid;
	pthread_mutex_init(&c->mu, NULL);
	pthread_mutex_init(&c->names_mu, NULL);
	exc_history_init(&c->h, x->max_count, x->max_bytes);
	return c;
}

/* A runtime gone: its session stopped, its history kept among the last ENDED_KEPT (under x->mu). */
static void collector_ended(struct exceptions *x, struct collector *c)
{
	collector_free(x->ended[0]);
	memmove(x->ended, x->ended + 1, (ENDED_KEPT - 1) * sizeof(x->ended[0]));
	x->ended[ENDED_KEPT - 1] = c;
}

/*
 * port_on_first's fn: the session started on the runtime's first connection, before it is resumed, so
 * that the history holds its exceptions from its first instruction. On the listener's thread with the
 * port's lock held: no port call here (the watcher, which calls the port, takes x->mu after it), and no
 * wait on the runtime (the collector's thread sends CollectTracing).
 */
bool exceptions_on_first(void *ctx, const uint8_t cookie[16], uint64_t pid, int fd)
{
	struct exceptions *x = ctx;
	struct port_runtime rt = { .pid = pid };
	struct collector *c = NULL;

	memcpy(rt.cookie, cookie, 16);
	pthread_mutex_lock(&x->mu);
	for (size_t j = 0; j < x->nc && !c; j++)
		if (memcmp(x->c[j]->cookie, cookie, 16) == 0)
			c = x->c[j];
	if (c && c->started) {
		pthread_mutex_unlock(&x->mu);
		return false;
	}
	if (c == NULL) {
		c = collector_new(x, &rt);
		MEM_GROW(x->c, x->cap_c, x->nc + 1, 8);
		x->c[x->nc++] = c;
	}
	c->first_fd = fd; /* the thread asks for the session: the listener waits on no runtime's answer */
	collector_start(c);
	pthread_mutex_unlock(&x->mu);
	return true; /* fd is the thread's, or closed */
}

static void watch_once(void *arg)
{
	struct exceptions *x = arg;
	struct port_runtime *rt;
	size_t n = port_list(x->port, &rt), k = 0;
	long long now = clock_ms();
	struct collector *gone[64];
	size_t n_gone = 0;

	pthread_mutex_lock(&x->mu);
	for (size_t i = 0; i < x->nc; i++)
		x->c[i]->seen = false;
	for (size_t i = 0; i < n; i++) {
		struct collector *c = NULL;

		for (size_t j = 0; j < x->nc && !c; j++)
			if (memcmp(x->c[j]->cookie, rt[i].cookie, 16) == 0)
				c = x->c[j];
		if (c == NULL) {
			c = collector_new(x, &rt[i]);
			MEM_GROW(x->c, x->cap_c, x->nc + 1, 8);
			x->c[x->nc++] = c;
		}
		c->seen = true;
		if (c->started && atomic_load(&c->done)) {
			collector_join(c);
			c->retry_at = now + RETRY_MS;
		}
		if (!c->started && now >= c->retry_at && !c->paused && !c->unsupported)
			collector_start(c);
	}
	for (size_t i = 0; i < x->nc; i++) {
		if (x->c[i]->seen || n_gone == 64)
			x->c[k++] = x->c[i];
		else
			gone[n_gone++] = x->c[i];
	}
	x->nc = k;
	pthread_mutex_unlock(&x->mu);
	/* joined outside the lock: a writer in the middle of a rundown holds the collector's own locks only */
	for (size_t i = 0; i < n_gone; i++) {
		collector_join(gone[i]);
		pthread_mutex_lock(&x->mu);
		collector_ended(x, gone[i]);
		pthread_mutex_unlock(&x->mu);
	}
	port_list_free(rt, n);
}

struct exceptions *exceptions_start(const struct exceptions_config *cfg)
{
	struct exceptions *x = mem_zalloc(sizeof(*x));

	x->port = cfg->port;
	x->max_count = cfg->max_count ? cfg->max_count : EXC_DEFAULT_COUNT;
	x->max_bytes = cfg->max_bytes ? cfg->max_bytes : EXC_DEFAULT_BYTES;
	pthread_mutex_init(&x->mu, NULL);
	pthread_cond_init(&x->session_ended, NULL);
	log_info("exception histories kept", LOG_STR("event", "exceptions-history"), LOG_UINT("maxCount", x->max_count),
		 LOG_UINT("maxBytes", x->max_bytes));
	x->watcher = watcher_start(WATCH_MS, watch_once, x);
	return x;
}

void exceptions_free(struct exceptions *x)
{
	if (x == NULL)
		return;
	watcher_stop(x->watcher);
	for (size_t i = 0; i < x->nc; i++)
		collector_free(x->c[i]);
	for (size_t i = 0; i < ENDED_KEPT; i++)
		collector_free(x->ended[i]);
	free(x->c);
	pthread_mutex_destroy(&x->mu);
	pthread_cond_destroy(&x->session_ended);
	free(x);
}

static int on_method(void *ctx, const struct nettrace_event *e)
{
	symbols_event(ctx, e);
	return 0;
}

/* A rundown of the runtime's methods into new tables (c->names_mu held). */
static void rundown(struct collector *c, uint64_t newest)
{
	struct trace_config cfg;
	struct nettrace_callbacks cb = { 0 };
	struct symbols *sym = symbols_new_sigs();
	struct err_msg em;
	long long t0 = clock_ms();
	int rc;

	symbols_session_names(&cfg);
	cb.event = on_method;
	rc = trace_run_cb(c->x->port, c->cookie, &cfg, 0, NULL, &cb, sym, NULL, &em);
	if (rc != 0) {
		log_warn("exception stacks not named: the rundown failed", LOG_STR("event", "exceptions-rundown"),
			 LOG_UINT("pid", c->pid), LOG_STR("error", em.text));
		symbols_free(sym);
		return;
	}
	symbols_done(sym);
	symbols_free(c->sym);
	c->sym = sym;
	c->named_upto = newest;
	log_debug("exception stacks named", LOG_STR("event", "exceptions-rundown"), LOG_UINT("pid", c->pid),
		  LOG_UINT("methods", symbols_count(sym)), LOG_UINT("ms", (unsigned long long)(clock_ms() - t0)));
}

int exceptions_write(struct exceptions *x, const uint8_t cookie[16], uint64_t pid, const char *command_line,
		     const struct exc_filters *f, enum exc_format fmt, struct buf *out, struct err_msg *em)
{
	struct collector *c = NULL;
	struct exc_entry *e;
	size_t n;

	pthread_mutex_lock(&x->mu);
	for (size_t i = 0; i < x->nc && !c; i++)
		if (memcmp(x->c[i]->cookie, cookie, 16) == 0)
			c = x->c[i];
	if (c)
		pthread_mutex_lock(&c->names_mu); /* keeps c: the watcher frees a collector only after it has ended */
	pthread_mutex_unlock(&x->mu);
	if (c == NULL)
		return err_set(em, DP_ENOTFOUND, "no exception history is kept for process %llu yet",
			       (unsigned long long)pid);
	pthread_mutex_lock(&c->mu);
	n = exc_history_copy(&c->h, &e);
	pthread_mutex_unlock(&c->mu);
	if (n && e[n - 1].id > c->named_upto)
		rundown(c, e[n - 1].id);
	exc_out_write(e, n, c->sym, f, fmt, pid, command_line, out);
	pthread_mutex_unlock(&c->names_mu);
	exc_entries_free(e, n);
	return 0;
}

static struct collector *find_live(struct exceptions *x, const uint8_t cookie[16])
{
	for (size_t i = 0; i < x->nc; i++)
		if (memcmp(x->c[i]->cookie, cookie, 16) == 0)
			return x->c[i];
	return NULL;
}

void exceptions_pause(struct exceptions *x, const uint8_t cookie[16])
{
	struct collector *c;
	struct timespec until;

	if (x == NULL)
		return;
	clock_deadline(&until, PAUSE_WAIT_MS);
	pthread_mutex_lock(&x->mu);
	if ((c = find_live(x, cookie)) != NULL) {
		c->paused++;
		if (c->started)
			atomic_store(&c->stop, true);
	}
	/* its session ends (StopTracing, the stream drained); the watcher joins it and starts none while paused */
	while (c && c->started && !atomic_load(&c->done) && pthread_cond_timedwait(&x->session_ended, &x->mu, &until) == 0)
		c = find_live(x, cookie);
	pthread_mutex_unlock(&x->mu);
}

void exceptions_resume(struct exceptions *x, const uint8_t cookie[16])
{
	struct collector *c;

	if (x == NULL)
		return;
	pthread_mutex_lock(&x->mu);
	if ((c = find_live(x, cookie)) != NULL && c->paused) {
		c->paused--;
		c->retry_at = 0; /* started again by the watcher's next look */
	}
	pthread_mutex_unlock(&x->mu);
}

static bool last_of(struct collector *c, uint64_t tid, int64_t when_ms, const char *type, struct exc_last *out)
{
	bool found = false;

	pthread_mutex_lock(&c->mu);
	for (size_t i = c->h.n; i-- > 0 && !found;) {
		const struct exc_entry *e = &c->h.ring[(c->h.head + i) % c->h.max_count];

		if ((tid && e->thread != tid) || (when_ms && e->wall_ms > when_ms))
			continue;
		if (type && strcmp(e->type, type) != 0)
			break; /* the thread's last exception is another: the crash's own never arrived */
		out->type = mem_strdup(e->type);
		out->message = mem_strdup(e->message);
		out->wall_ms = e->wall_ms;
		found = true;
	}
	pthread_mutex_unlock(&c->mu);
	return found;
}

int exceptions_last(struct exceptions *x, uint64_t pid, uint64_t tid, int64_t when_ms, const char *type,
		    struct exc_last *out)
{
	bool found = false;

	if (x == NULL)
		return DP_ENOTFOUND;
	pthread_mutex_lock(&x->mu); /* newest first: the runtimes still attached, then those ended */
	for (size_t i = x->nc; i-- > 0 && !found;)
		found = x->c[i]->pid == pid && last_of(x->c[i], tid, when_ms, type, out);
	for (size_t i = ENDED_KEPT; i-- > 0 && !found;)
		found = x->ended[i] && x->ended[i]->pid == pid && last_of(x->ended[i], tid, when_ms, type, out);
	pthread_mutex_unlock(&x->mu);
	return found ? 0 : DP_ENOTFOUND;
}
