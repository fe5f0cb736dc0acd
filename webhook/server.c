/*
 * server.c - the webhook's HTTPS server (server.h).
 *
 * We own the listening socket and hand it
 * to each daemon (MHD_OPTION_LISTEN_SOCKET): a certificate reload starts a
 * new daemon on it with the new pair, then quiesces the old one (it stops
 * accepting) and stops it once its connections have closed, from a thread of
 * its own, so requests in flight finish on the old certificate.
 *
 * Each request's accounting is here too (in flight, its share of the body
 * budget, a body that comes too slowly); what it is answered is
 * server_routes.c's, through libmicrohttpd as server_mhd.c loads it. Every
 * limit is in limits.h.
 */
#include "server_int.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <malloc.h>

#include "clock.h"
#include "log.h"
#include "mem.h"

#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"

static void gen_free(struct gen *g)
{
	if (g->fd >= 0)
		close(g->fd);
	if (g->key.data)
		mem_wipe(g->key.data, g->key.len);
	buf_free(&g->key);
	buf_free(&g->cert);
	free(g);
}

/*
 * A request's first call: its accounting begins (in flight, the body budget), and a body larger than the
 * cap or than the budget can hold is refused before a byte of it is read.
 */
static enum MHD_Result begin_request(struct gen *g, struct MHD_Connection *c, void **con_cls)
{
	const union MHD_ConnectionInfo *ci = wh_mhd.info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
	struct webhook *w = g->w;
	unsigned long long n;
	const char *cl;
	struct req *q;

	if (ci == NULL || (q = ci->socket_context) == NULL)
		return MHD_NO; /* conn_cb had no memory for it: the connection is closed */
	atomic_fetch_add(&g->inflight, 1);
	q->body.len = 0;
	q->too_big = q->busy = q->corked = false;
	q->t0 = clock_ms();
	*con_cls = q;
	wh_tl_req = q;
	cl = wh_mhd.lookup(c, MHD_HEADER_KIND, "Content-Length");
	n = cl ? strtoull(cl, NULL, 10) : 0;
	if (n > w->cfg.max_body)
		return wh_too_big(w, c); /* refused before a byte of the body is read (the connection then closes) */
	switch (budget_begin(w->budget, q->bc, n)) {
	case BUDGET_SHED: return MHD_NO;
	case BUDGET_FULL: return wh_busy(w, c);
	case BUDGET_OK: break;
	}
	/* one allocation for the body, not a doubling series of copies; what a client only
	   claims costs no more than 1 MiB of address space until it sends it */
	if (n > 0)
		buf_reserve(&q->body, (size_t)(n < WH_BODY_PREALLOC ? n : WH_BODY_PREALLOC));
	return MHD_YES;
}

/*
 * A piece of the body: it must keep coming at WH_BODY_MIN_RATE after the grace, or the connection is
 * closed; it takes its share of the budget, or is read and dropped (the answer then 503, or 413 past the cap).
 */
static enum MHD_Result take_body(struct webhook *w, struct req *q, const char *upload, size_t len)
{
	long long late = clock_ms() - q->t0 - WH_BODY_GRACE_MS;
	size_t need = q->body.len + len;

	if (late > 0 && need < (unsigned long long)late * WH_BODY_MIN_RATE / 1000) {
		atomic_fetch_add(&w->slow, 1);
		log_warn("request rejected", LOG_STR("event", "rejected"), LOG_STR("reason", "the body came slower "
			 "than 64 KiB a second: connection closed"), LOG_INT("bytes", (long long)need));
		return MHD_NO;
	}
	if (!q->too_big && !q->busy) {
		enum budget_ans a = budget_take(w->budget, q->bc, need);

		if (a == BUDGET_SHED)
			return MHD_NO;
		if (a == BUDGET_FULL)
			q->busy = true; /* the rest is read and dropped; the answer is 503 */
		else if (buf_append(&q->body, upload, len) != 0)
			q->too_big = true; /* the rest is read and dropped; the answer is 413 */
	}
	return MHD_YES;
}

static enum MHD_Result access_cb(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				 const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
	struct gen *g = cls;
	struct webhook *w = g->w;
	struct req *q = *con_cls;

	(void)version;
	wh_tl_gen = g;
	wh_tl_req = q;
	if (q == NULL)
		return begin_request(g, c, con_cls);
	if (*upload_size) {
		enum MHD_Result r = take_body(w, q, upload, *upload_size);

		*upload_size = 0;
		return r;
	}
	if (budget_answer(w->budget, q->bc) == BUDGET_SHED)
		return MHD_NO; /* shed for a review while its last bytes came */
	return wh_route(w, c, q, url, method);
}

/* Between requests a connection keeps its body's memory, up to WH_BODY_KEEP, while all together keep under WH_KEEP_TOTAL. */
static void keep_body(struct webhook *w, struct req *q)
{
	atomic_fetch_sub(&w->kept, q->kept);
	q->kept = 0;
	q->body.len = 0;
	if (q->body.alloc > WH_BODY_KEEP || atomic_fetch_add(&w->kept, q->body.alloc) + q->body.alloc > WH_KEEP_TOTAL) {
		if (q->body.alloc <= WH_BODY_KEEP)
			atomic_fetch_sub(&w->kept, q->body.alloc);
		buf_free(&q->body);
		return;
	}
	q->kept = q->body.alloc;
}

static void completed_cb(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode toe)
{
	struct gen *g = cls;
	struct req *q = *con_cls;

	(void)toe;
	if (q) {
		if (q->corked)
			wh_uncork(c);
		atomic_fetch_sub(&g->inflight, 1);
		budget_end(g->w->budget, q->bc);
		keep_body(g->w, q);
		*con_cls = NULL;
	}
}

static void conn_cb(void *cls, struct MHD_Connection *c, void **socket_ctx, enum MHD_ConnectionNotificationCode toe)
{
	struct gen *g = cls;

	if (toe == MHD_CONNECTION_NOTIFY_STARTED) {
		struct req *q = calloc(1, sizeof(*q));
		const union MHD_ConnectionInfo *f = wh_mhd.info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

		if (q) {
			buf_init(&q->body, g->w->cfg.max_body);
			q->bc = budget_open(g->w->budget, f ? f->connect_fd : -1);
		}
		*socket_ctx = q;
		atomic_fetch_add(&g->conns, 1);
	} else {
		struct req *q = *socket_ctx;

		if (q) {
			atomic_fetch_sub(&g->w->kept, q->kept);
			budget_close(g->w->budget, q->bc);
			buf_free(&q->body);
			free(q);
			*socket_ctx = NULL;
		}
		atomic_fetch_sub(&g->conns, 1);
	}
}

static int read_file(const char *path, struct buf *b, struct stat *st, struct err_msg *em)
{
	int rc;

	buf_init(b, WH_MAX_KEYPAIR);
	if ((rc = buf_read_path(b, path, st, em)) == 0 && b->len == 0)
		rc = err_set(em, DP_EIO, "%s is empty", path);
	if (rc != 0)
		buf_free(b);
	return rc;
}

/* A new daemon generation on the listening socket with the key pair on disk now. */
/* libmicrohttpd's own messages, as log lines. */
static void mhd_logger(void *cls, const char *fmt, va_list ap)
{
	char msg[512];
	size_t n;

	vsnprintf(msg, sizeof(msg), fmt, ap);
	n = strlen(msg);
	while (n && (msg[n - 1] == '\n' || msg[n - 1] == '\r' || msg[n - 1] == ' '))
		msg[--n] = '\0';
	log_warn("http error", LOG_STR("event", "http-error"), LOG_STR("message", msg));
}

static int start_gen(struct webhook *w, struct gen **out, struct stat *cst, struct stat *kst, struct err_msg *em)
{
	struct gen *g = mem_zalloc(sizeof(*g));
	int rc;

	g->w = w;
	g->fd = -1;
	if ((rc = read_file(w->cfg.cert_file, &g->cert, cst, em)) != 0 ||
	    (rc = read_file(w->cfg.key_file, &g->key, kst, em)) != 0) {
		gen_free(g);
		return rc;
	}
	if ((g->fd = fcntl(w->lfd, F_DUPFD_CLOEXEC, 0)) < 0) {
		rc = err_set(em, DP_EIO, "cannot copy the listening socket: %s", strerror(errno));
		gen_free(g);
		return rc;
	}
	g->d = wh_mhd.start_daemon(MHD_USE_TLS | MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL,
				NULL, access_cb, g, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, w,
				MHD_OPTION_LISTEN_SOCKET, (MHD_socket)g->fd,
				MHD_OPTION_HTTPS_MEM_CERT, g->cert.data, MHD_OPTION_HTTPS_MEM_KEY, g->key.data,
				MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES, MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned int)w->cfg.timeout_s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)w->cfg.threads,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)WH_CONN_SLOTS, MHD_OPTION_NOTIFY_COMPLETED, completed_cb,
				g, MHD_OPTION_NOTIFY_CONNECTION, conn_cb, g, MHD_OPTION_END);
	if (g->d == NULL) {
		g->fd = -1; /* libmicrohttpd closed it */
		gen_free(g);
		return err_set(em, DP_EINVAL, "the HTTPS server did not start with %s and %s (not a PEM certificate and "
			       "matching key?)", w->cfg.cert_file, w->cfg.key_file);
	}
	*out = g;
	return 0;
}

/*
 * Retire a generation: it stops accepting (quiesce; the listening socket stays
 * open for the others), its answers say Connection: close, and once no
 * request is in flight and its connections are gone (or max_ms passed with
 * none in flight: idle keep-alive connections) it is stopped.
 */
static void retire(struct gen *g, long long max_ms)
{
	long long start = clock_ms();

	atomic_store(&g->draining, true);
	wh_mhd.quiesce_daemon(g->d); /* returns g->fd, which gen_free closes */
	for (;;) {
		long long t = clock_ms() - start;

		if (atomic_load(&g->inflight) == 0 && (atomic_load(&g->conns) == 0 || t >= 2000))
			break; /* nothing in flight: what is left is idle */
		if (t >= max_ms)
			break;
		usleep(20000);
	}
	wh_mhd.stop_daemon(g->d);
	gen_free(g);
}

static void *retire_main(void *arg)
{
	retire(arg, WH_DRAIN_MAX_MS);
	return NULL;
}

static int listen_on(const char *spec, int *fd, struct err_msg *em)
{
	const char *colon = strrchr(spec, ':');
	struct sockaddr_in sa = { .sin_family = AF_INET };
	char host[64];
	long port;
	int s, one = 1;

	if (colon == NULL || (size_t)(colon - spec) >= sizeof(host))
		return err_set(em, DP_EINVAL, "--listen '%s' is not ADDR:PORT or :PORT", spec);
	memcpy(host, spec, (size_t)(colon - spec));
	host[colon - spec] = '\0';
	port = strtol(colon + 1, NULL, 10);
	if (port < 0 || port > 65535 || colon[1] == '\0')
		return err_set(em, DP_EINVAL, "--listen '%s': no valid port", spec);
	sa.sin_port = htons((uint16_t)port);
	if (host[0] == '\0' || strcmp(host, "0.0.0.0") == 0)
		sa.sin_addr.s_addr = htonl(INADDR_ANY);
	else if (inet_pton(AF_INET, host, &sa.sin_addr) != 1)
		return err_set(em, DP_EINVAL, "--listen '%s': '%s' is not an IPv4 address", spec, host);
	s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (s < 0 || setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) != 0 ||
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, WH_LISTEN_BACKLOG) != 0) {
		int e = errno;

		if (s >= 0)
			close(s);
		return err_set(em, DP_EIO, "cannot listen on %s: %s", spec, strerror(e));
	}
	*fd = s;
	return 0;
}

unsigned webhook_port(const struct webhook *w)
{
	struct sockaddr_in sa = { 0 };
	socklen_t len = sizeof(sa);

	if (getsockname(w->lfd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET)
		return 0;
	return ntohs(sa.sin_port);
}

int webhook_start(const struct webhook_config *cfg, struct webhook **out, struct err_msg *em)
{
	struct webhook *w;
	int rc;

	if ((rc = wh_mhd_load(em)) != 0)
		return rc;
	/*
	 * Bodies over 128 KiB in memory of their own (mmap), given back whole when
	 * freed. glibc raises this threshold to the size of each mmap'd block freed,
	 * after which bodies of up to 8 MiB came from the threads' heaps, which
	 * keep what is freed: a flood of 200 KB bodies left the webhook at 42 MiB
	 * resident, 57 at its peak; with the threshold fixed, 18 and 32.
	 */
	mallopt(M_MMAP_THRESHOLD, 128 << 10);
	w = mem_zalloc(sizeof(*w));
	w->cfg = *cfg;
	if (w->cfg.max_body == 0)
		w->cfg.max_body = WH_MAX_BODY_DEFAULT;
	if (w->cfg.body_budget == 0)
		w->cfg.body_budget = WH_BODY_BUDGET_DEFAULT;
	if (w->cfg.body_budget < w->cfg.max_body + BUDGET_RESERVE)
		w->cfg.body_budget = w->cfg.max_body + BUDGET_RESERVE; /* a request of the largest size can be taken */
	if (w->cfg.timeout_s == 0)
		w->cfg.timeout_s = WH_TIMEOUT_S_DEFAULT;
	if (w->cfg.threads == 0)
		w->cfg.threads = WH_THREADS_DEFAULT;
	pthread_mutex_init(&w->mu, NULL);
	w->budget = budget_new(w->cfg.body_budget, WH_CONN_SLOTS);
	pthread_rwlock_init(&w->cfg_lock, NULL);
	if (!cfg->no_review_cache)
		w->cache = rcache_new();
	if (cfg->config_file) {
		if ((rc = inj_settings_load(cfg->config_file, &w->wc, em)) != 0) {
			budget_free(w->budget);
			free(w);
			return rc;
		}
		stat(cfg->config_file, &w->cfg_st);
	} else {
		inj_settings_defaults(&w->wc);
	}
	if ((rc = listen_on(cfg->listen, &w->lfd, em)) != 0) {
		inj_settings_free(&w->wc);
		budget_free(w->budget);
		free(w);
		return rc;
	}
	if ((rc = start_gen(w, &w->cur, &w->cert_st, &w->key_st, em)) != 0) {
		close(w->lfd);
		inj_settings_free(&w->wc);
		budget_free(w->budget);
		free(w);
		return rc;
	}
	*out = w;
	return 0;
}

static bool changed(const struct stat *a, const char *path)
{
	struct stat b;

	if (stat(path, &b) != 0)
		return false; /* mid-swap: look again next time */
	return a->st_ino != b.st_ino || a->st_size != b.st_size || a->st_mtim.tv_sec != b.st_mtim.tv_sec ||
	       a->st_mtim.tv_nsec != b.st_mtim.tv_nsec;
}

static void poll_certs(struct webhook *w)
{
	struct gen *g = NULL, *old;
	struct stat cst = { 0 }, kst = { 0 };
	struct err_msg em;
	pthread_t t;

	pthread_mutex_lock(&w->mu);
	if (!changed(&w->cert_st, w->cfg.cert_file) && !changed(&w->key_st, w->cfg.key_file)) {
		pthread_mutex_unlock(&w->mu);
		return;
	}
	if (start_gen(w, &g, &cst, &kst, &em) != 0) {
		/* a half-written or mismatched pair: keep serving the old one; report this once, until the files change */
		stat(w->cfg.cert_file, &w->cert_st);
		stat(w->cfg.key_file, &w->key_st);
		atomic_fetch_add(&w->reload_failures, 1);
		pthread_mutex_unlock(&w->mu);
		log_warn("certificate reload failed", LOG_STR("event", "certificate-reload-failed"),
			 LOG_STR("reason", em.text));
		return;
	}
	old = w->cur;
	w->cur = g;
	w->cert_st = cst;
	w->key_st = kst;
	pthread_mutex_unlock(&w->mu);
	if (pthread_create(&t, NULL, retire_main, old) == 0) /* the new one already accepts */
		pthread_detach(t);
	else
		retire(old, WH_DRAIN_MAX_MS);
	atomic_fetch_add(&w->reloads, 1);
	log_info("certificate reloaded", LOG_STR("event", "certificate-reloaded"));
}

static void poll_config(struct webhook *w)
{
	struct inj_settings next;
	struct err_msg em;
	struct stat st;

	if (w->cfg.config_file == NULL || !changed(&w->cfg_st, w->cfg.config_file))
		return;
	stat(w->cfg.config_file, &st);
	w->cfg_st = st; /* a broken file is reported once, until it changes again */
	if (inj_settings_load(w->cfg.config_file, &next, &em) != 0) {
		atomic_fetch_add(&w->cfg_failures, 1);
		log_warn("configuration reload failed", LOG_STR("event", "config-reload-failed"), LOG_STR("reason", em.text));
		return;
	}
	pthread_rwlock_wrlock(&w->cfg_lock);
	inj_settings_free(&w->wc);
	w->wc = next;
	rcache_clear(w->cache); /* under the lock: no review of the old configuration can put an answer after this */
	pthread_rwlock_unlock(&w->cfg_lock);
	atomic_fetch_add(&w->cfg_reloads, 1);
	log_info("configuration reloaded", LOG_STR("event", "config-reloaded"));
}

void webhook_poll(struct webhook *w)
{
	poll_certs(w);
	poll_config(w);
}

void webhook_free(struct webhook *w)
{
	if (w == NULL)
		return;
	retire(w->cur, WH_SHUTDOWN_MAX_MS);
	close(w->lfd);
	inj_settings_free(&w->wc);
	rcache_free(w->cache);
	pthread_rwlock_destroy(&w->cfg_lock);
	pthread_mutex_destroy(&w->mu);
	budget_free(w->budget);
	free(w);
}

