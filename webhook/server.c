/*
 * server.c - the webhook's HTTPS server (server.h).
 *
 * libmicrohttpd is reached through a table of function pointers filled by
 * dlopen/dlsym; the types come from microhttpd.h, so every call is checked by
 * the compiler as if it were linked. We own the listening socket and hand it
 * to each daemon (MHD_OPTION_LISTEN_SOCKET): a certificate reload starts a
 * new daemon on it with the new pair, then quiesces the old one (it stops
 * accepting) and stops it once its connections have closed, from a thread of
 * its own, so requests in flight finish on the old certificate.
 */
#include "server.h"

#include <arpa/inet.h>
#include <stdarg.h>
#include <errno.h>
#include <fcntl.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <poll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>
#include <malloc.h>

#include "budget.h"
#include "buf.h"
#include "clock.h"
#include "dynlib.h"
#include "log.h"
#include "mem.h"
#include "problem.h"
#include "review.h"
#include "injector/inj.h"

#define MAX_KEYPAIR (1 << 20)
#define GNUTLS_E_AGAIN_ (-28)       /* gnutls.h's values; GnuTLS is reached through libmicrohttpd */
#define GNUTLS_E_INTERRUPTED_ (-52)
#define TLS_PRIORITIES "NORMAL:-VERS-ALL:+VERS-TLS1.3:+VERS-TLS1.2"
#define DRAIN_MAX_MS 60000   /* a reload: the old pair serves what it has for up to this long */
#define SHUTDOWN_MAX_MS 10000 /* SIGTERM: well inside Kubernetes' 30 s grace period */

static struct {
	struct MHD_Daemon *(*start_daemon)(unsigned int, uint16_t, MHD_AcceptPolicyCallback, void *,
					   MHD_AccessHandlerCallback, void *, ...);
	void (*stop_daemon)(struct MHD_Daemon *);
	MHD_socket (*quiesce_daemon)(struct MHD_Daemon *);
	struct MHD_Response *(*response_from_buffer)(size_t, void *, enum MHD_ResponseMemoryMode);
	enum MHD_Result (*add_header)(struct MHD_Response *, const char *, const char *);
	enum MHD_Result (*queue)(struct MHD_Connection *, unsigned int, struct MHD_Response *);
	void (*destroy)(struct MHD_Response *);
	const char *(*lookup)(struct MHD_Connection *, enum MHD_ValueKind, const char *);
	const union MHD_ConnectionInfo *(*info)(struct MHD_Connection *, enum MHD_ConnectionInfoType, ...);
	/* GnuTLS's record corking (the library libmicrohttpd brought in): see cork() */
	void (*cork)(void *session);
	int (*uncork)(void *session, unsigned int flags);
} mhd;

static const struct dynlib_sym mhd_syms[] = {
	DYNLIB_SYM(MHD_start_daemon, mhd.start_daemon),
	DYNLIB_SYM(MHD_stop_daemon, mhd.stop_daemon),
	DYNLIB_SYM(MHD_quiesce_daemon, mhd.quiesce_daemon),
	DYNLIB_SYM(MHD_create_response_from_buffer, mhd.response_from_buffer),
	DYNLIB_SYM(MHD_add_response_header, mhd.add_header),
	DYNLIB_SYM(MHD_queue_response, mhd.queue),
	DYNLIB_SYM(MHD_destroy_response, mhd.destroy),
	DYNLIB_SYM(MHD_lookup_connection_value, mhd.lookup),
	DYNLIB_SYM(MHD_get_connection_info, mhd.info),
};
static const char *const mhd_sonames[] = { "libmicrohttpd.so.12", NULL };
static struct dynlib mhd_lib = DYNLIB_INIT("libmicrohttpd", mhd_sonames, mhd_syms);

/* GnuTLS as libmicrohttpd mapped it (never loaded on its own): without it, answers go out as two records */
static const struct dynlib_sym tls_syms[] = {
	DYNLIB_SYM(gnutls_record_cork, mhd.cork),
	DYNLIB_SYM(gnutls_record_uncork, mhd.uncork),
};
static const char *const tls_sonames[] = { "libgnutls.so.30", NULL };
static struct dynlib tls_lib = { .what = "GnuTLS", .sonames = tls_sonames, .syms = tls_syms, .n_syms = 2,
				 .noload = true, .once = PTHREAD_ONCE_INIT };

/* One daemon generation: a key pair, and the connections it has open. */
struct gen {
	struct webhook *w;
	struct MHD_Daemon *d;
	int fd;               /* this daemon's own copy of the listening socket (MHD closes it on a failed start) */
	atomic_int conns;     /* connections open */
	atomic_int inflight;  /* requests begun and not yet completed */
	atomic_bool draining; /* answers carry Connection: close, so connections end after their request */
	struct buf cert, key; /* kept while the daemon lives; the key wiped when it goes */
};

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

#define N_OUTCOMES REVIEW_N_OUTCOMES
static const double buckets_ms[] = { 0.5, 1, 2, 5, 10, 25, 50, 100, 250 };
#define N_BUCKETS (sizeof(buckets_ms) / sizeof(buckets_ms[0]))

struct webhook {
	struct webhook_config cfg;
	int lfd;
	pthread_mutex_t mu; /* guards cur and the key pair's identity */
	struct gen *cur;
	struct stat cert_st, key_st;
	pthread_rwlock_t cfg_lock; /* readers: requests; writer: a configuration reload */
	struct inj_settings wc;
	struct stat cfg_st;
	atomic_ullong outcomes[2][N_OUTCOMES]; /* [namespace_enabled][outcome] */
	atomic_ullong malformed, too_big, reloads, reload_failures, cfg_reloads, cfg_failures;
	atomic_ullong hist[N_BUCKETS + 1];
	atomic_ullong sum_us;
	struct rcache *cache; /* answers to repeated reviews (rcache.h); cleared when the configuration changes */
	struct budget *budget;   /* bodies in flight and connection slots (budget.h) */
	atomic_size_t kept;      /* of KEEP_TOTAL */
	atomic_ullong busy;      /* requests refused for the budget */
	atomic_ullong slow;      /* connections closed for a body under REVIEW_BODY_MIN_RATE */
};

/*
 * A connection's request in hand. One per connection (its socket context),
 * used again by each request on it: a keep-alive connection that sends
 * 67 KB reviews (a pod with 1,500 env vars) reads each into the memory the
 * last one used, not a fresh allocation the kernel must fault in page by
 * page (ten page faults a request). Up to BODY_KEEP is kept between requests.
 */
#define BODY_KEEP (128u << 10)
#define KEEP_TOTAL ((size_t)8 << 20) /* what all connections together keep between requests */

/*
 * Bodies in flight share one budget (webhook_config.body_budget), so memory
 * stays bounded however many clients send, and connections share CONN_SLOTS;
 * budget.h says who holds them and who is shed when a review needs them. A
 * body must also keep coming at REVIEW_BODY_MIN_RATE after REVIEW_BODY_GRACE_MS (Kestrel's
 * MinRequestBodyDataRate, at a rate for the cluster network the API server
 * sends from), or its connection is closed and its share freed: to hold the
 * budget a client must keep sending.
 *
 * CONN_SLOTS is libmicrohttpd's connection limit. A connection costs ~40 KiB
 * (GnuTLS's session and buffers) and ~70 KiB once it has sent a request
 * (libmicrohttpd's 32 KiB pool filled), so 256 of them, the body budget, the
 * kept buffers and the process itself stay under the manifests' 64Mi limit.
 * No per-address limit (MHD_OPTION_PER_IP_CONNECTION_LIMIT): behind a sidecar
 * proxy or SNAT every client, the API server too, has one address.
 */
#define CONN_SLOTS 256
#define REVIEW_BODY_GRACE_MS 2000
#define REVIEW_BODY_MIN_RATE (64u << 10) /* bytes per second: an AdmissionReview from the API server, on the cluster network */

struct req {
	struct buf body;
	struct budget_conn *bc;
	bool too_big;
	bool busy;      /* the body did not fit in the budget: the answer is 503 */
	bool corked;    /* the answer's TLS records are held until completed_cb (cork()) */
	size_t kept;    /* bytes of KEEP_TOTAL its connection holds */
	long long t0;   /* when the request began (clock_ms) */
};

/* The daemon generation whose worker thread this is, and the request in hand (set at the top of access_cb). */
static __thread const struct gen *tl_gen;
static __thread struct req *tl_req;

/*
 * One TLS record for the answer, not two. libmicrohttpd 0.9.75 sends the
 * header and the body with one gnutls_record_send each under TLS (it has no
 * vectored send there): two records, two sendmsg calls, and two wake-ups of
 * the client, where nginx sends one. So the session is corked before the
 * answer is queued (GnuTLS then gathers what libmicrohttpd sends) and
 * uncorked in completed_cb, which libmicrohttpd calls on the same thread once
 * it has handed over the last byte: one record, one sendmsg. Only when the
 * socket's send queue is empty and the answer small (CORK_MAX): the kernel
 * then takes the whole record at once, so uncorking never has to wait for a
 * client that does not read (uncork() still bounds that wait).
 *
 * libmicrohttpd sets TCP_CORK on the socket before it sends and clears it
 * after its last send; with GnuTLS corked, that last send writes nothing,
 * so the record uncork() writes lands in a corked socket, and the kernel
 * would hold it for its cork timer, ~200 ms (the answers that were held so
 * until webhook_latency.sh caught it). uncork() clears TCP_CORK after the
 * record, which sends it at once. Bought, that setsockopt included: 9-11 us
 * of CPU per answer and 11-19 % more answers a second (docs/BENCHMARKS.md,
 * "Webhook clean-up").
 */
#define CORK_MAX (8u << 10)

static void cork(struct MHD_Connection *c, struct req *q, size_t len)
{
	const union MHD_ConnectionInfo *s, *f;
	int outq;

	if (mhd.cork == NULL || q == NULL || len > CORK_MAX ||
	    (s = mhd.info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION)) == NULL || s->tls_session == NULL ||
	    (f = mhd.info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) == NULL ||
	    ioctl(f->connect_fd, SIOCOUTQ, &outq) != 0 || outq != 0)
		return;
	mhd.cork(s->tls_session);
	q->corked = true;
}

/* Send what cork() held. A client that leaves the record unread for UNCORK_MAX_MS loses the connection. */
#define UNCORK_MAX_MS 1000
static void uncork(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *s = mhd.info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION),
				       *f = mhd.info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	long long deadline = clock_ms() + UNCORK_MAX_MS;
	int rc;

	if (s == NULL || s->tls_session == NULL || f == NULL)
		return;
	while ((rc = mhd.uncork(s->tls_session, 0)) == GNUTLS_E_AGAIN_ || rc == GNUTLS_E_INTERRUPTED_) {
		struct pollfd p = { .fd = f->connect_fd, .events = POLLOUT };
		long long now = clock_ms();

		if (now >= deadline || (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)) {
			shutdown(f->connect_fd, SHUT_RDWR); /* libmicrohttpd closes it at its next read */
			return;
		}
	}
	setsockopt(f->connect_fd, IPPROTO_TCP, TCP_CORK, &(int){ 0 }, sizeof(int)); /* out now, not in 200 ms */
}

/* The answer, with one more header hname: hval when hname is not NULL (a 405's Allow, a 503's Retry-After). */
static enum MHD_Result reply_with(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
				  size_t len, const char *hname, const char *hval)
{
	struct MHD_Response *r = mhd.response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	if (r == NULL)
		return MHD_NO;
	cork(c, tl_req, len);
	mhd.add_header(r, "Content-Type", ctype);
	mhd.add_header(r, "Cache-Control", "no-store");
	mhd.add_header(r, "X-Content-Type-Options", "nosniff");
	if (hname)
		mhd.add_header(r, hname, hval);
	if (tl_gen && atomic_load(&tl_gen->draining))
		mhd.add_header(r, "Connection", "close"); /* a reload or shutdown is waiting for this connection */
	rc = mhd.queue(c, status, r);
	mhd.destroy(r);
	return rc;
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
			     size_t len)
{
	return reply_with(c, status, ctype, body, len, NULL, NULL);
}

static enum MHD_Result problem_with(struct MHD_Connection *c, unsigned status, const char *title,
				    const char *detail, const char *hname, const char *hval)
{
	char *s = problem_body(status, title, detail);
	enum MHD_Result rc = reply_with(c, status, "application/problem+json", s, strlen(s), hname, hval);

	free(s);
	return rc;
}

static enum MHD_Result problem(struct MHD_Connection *c, unsigned status, const char *title, const char *detail)
{
	return problem_with(c, status, title, detail, NULL, NULL);
}

static enum MHD_Result metrics(struct webhook *w, struct MHD_Connection *c)
{
	struct buf b;
	unsigned long long cum = 0, hits, misses, shed_bytes, shed_slots;
	enum MHD_Result rc;

	buf_init(&b, 1 << 20);
	buf_puts(&b, "# HELP diagport_webhook_admissions_total AdmissionReviews answered, by path and outcome.\n"
		     "# TYPE diagport_webhook_admissions_total counter\n");
	for (int ns = 0; ns < 2; ns++)
		for (int o = 0; o < N_OUTCOMES; o++)
			buf_printf(&b, "diagport_webhook_admissions_total{path=\"%s\",outcome=\"%s\"} %llu\n",
				   ns ? "/mutate/namespace" : "/mutate", review_outcome_name((enum review_outcome)o),
				   atomic_load(&w->outcomes[ns][o]));
	buf_printf(&b, "# HELP diagport_webhook_rejected_requests_total Requests that were not a well-formed "
		       "AdmissionReview (400), too large (413), or whose body did not fit in the budget for bodies "
		       "in flight (503).\n# TYPE diagport_webhook_rejected_requests_total counter\n"
		       "diagport_webhook_rejected_requests_total{reason=\"malformed\"} %llu\n"
		       "diagport_webhook_rejected_requests_total{reason=\"too_big\"} %llu\n"
		       "diagport_webhook_rejected_requests_total{reason=\"busy\"} %llu\n",
		   atomic_load(&w->malformed), atomic_load(&w->too_big), atomic_load(&w->busy));
	budget_stats(w->budget, &shed_bytes, &shed_slots);
	buf_printf(&b, "# HELP diagport_webhook_closed_connections_total Connections the webhook closed while a request "
		       "came: shed for an ordinary review's body (the slowest uploads), shed for a connection slot (the "
		       "longest waiting), or a body under the minimum rate.\n"
		       "# TYPE diagport_webhook_closed_connections_total counter\n"
		       "diagport_webhook_closed_connections_total{reason=\"shed-for-body\"} %llu\n"
		       "diagport_webhook_closed_connections_total{reason=\"shed-for-slot\"} %llu\n"
		       "diagport_webhook_closed_connections_total{reason=\"slow-body\"} %llu\n",
		   shed_bytes, shed_slots, atomic_load(&w->slow));
	buf_printf(&b, "# HELP diagport_webhook_certificate_reloads_total Key pair reloads, by result.\n"
		       "# TYPE diagport_webhook_certificate_reloads_total counter\n"
		       "diagport_webhook_certificate_reloads_total{result=\"ok\"} %llu\n"
		       "diagport_webhook_certificate_reloads_total{result=\"failed\"} %llu\n",
		   atomic_load(&w->reloads), atomic_load(&w->reload_failures));
	buf_printf(&b, "# HELP diagport_webhook_config_reloads_total Configuration file reloads, by result.\n"
		       "# TYPE diagport_webhook_config_reloads_total counter\n"
		       "diagport_webhook_config_reloads_total{result=\"ok\"} %llu\n"
		       "diagport_webhook_config_reloads_total{result=\"failed\"} %llu\n",
		   atomic_load(&w->cfg_reloads), atomic_load(&w->cfg_failures));
	rcache_stats(w->cache, &hits, &misses);
	buf_printf(&b, "# HELP diagport_webhook_review_cache_lookups_total Reviews looked up among the answers kept for "
		       "repeated requests (a ReplicaSet's replicas), by result.\n"
		       "# TYPE diagport_webhook_review_cache_lookups_total counter\n"
		       "diagport_webhook_review_cache_lookups_total{result=\"hit\"} %llu\n"
		       "diagport_webhook_review_cache_lookups_total{result=\"miss\"} %llu\n",
		   hits, misses);
	buf_puts(&b, "# HELP diagport_webhook_admission_seconds Time to answer an AdmissionReview.\n"
		     "# TYPE diagport_webhook_admission_seconds histogram\n");
	for (size_t i = 0; i < N_BUCKETS; i++) {
		cum += atomic_load(&w->hist[i]);
		buf_printf(&b, "diagport_webhook_admission_seconds_bucket{le=\"%g\"} %llu\n", buckets_ms[i] / 1000, cum);
	}
	cum += atomic_load(&w->hist[N_BUCKETS]);
	buf_printf(&b, "diagport_webhook_admission_seconds_bucket{le=\"+Inf\"} %llu\n"
		       "diagport_webhook_admission_seconds_sum %.6f\ndiagport_webhook_admission_seconds_count %llu\n",
		   cum, (double)atomic_load(&w->sum_us) / 1e6, cum);
	rc = reply(c, 200, "text/plain; version=0.0.4", b.data, b.len);
	buf_free(&b);
	return rc;
}

static void observe(struct webhook *w, double ms)
{
	size_t i = 0;

	while (i < N_BUCKETS && ms > buckets_ms[i])
		i++;
	atomic_fetch_add(&w->hist[i], 1);
	atomic_fetch_add(&w->sum_us, (unsigned long long)(ms * 1000));
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1000 + (double)t.tv_nsec / 1e6;
}

static const char *mutate_path(bool ns_enabled, bool no_ptrace)
{
	static const char *const paths[2][2] = { { "/mutate", "/mutate/no-ptrace" },
						 { "/mutate/namespace", "/mutate/namespace/no-ptrace" } };

	return paths[ns_enabled][no_ptrace];
}

/*
 * A pod that asked for diagnostics is logged at info (warn when refused,
 * error when we failed); one that did not ask, at debug. With the annotation
 * default every pod created in the cluster reaches the webhook, so those are
 * most answers, and a line each would be most of the log and, at saturation,
 * a quarter of the CPU (docs/BENCHMARKS.md, "webhook clean-up").
 */
static enum log_level admission_level(enum review_outcome o)
{
	switch (o) {
	case REVIEW_SKIPPED_NOT_OPTED:
	case REVIEW_SKIPPED_NOT_POD_CREATE:
	case REVIEW_SKIPPED_EXCLUDED: return LOG_DEBUG;
	case REVIEW_REFUSED: return LOG_WARN;
	case REVIEW_ERROR: return LOG_ERROR;
	default: return LOG_INFO;
	}
}

/*
 * What an admission line says about the request: its uid (what the API
 * server's own logs and audit events carry), read from the answer review.c
 * wrote, which starts with a fixed prefix; and for a refused pod the reason,
 * the answer's first warning. Both only when the line will be written.
 */
#define ANSWER_PREFIX "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":"
static void answer_facts(const struct buf *out, bool reason, char uid[128], char why[512])
{
	size_t p = sizeof(ANSWER_PREFIX) - 1, n = 0;
	json_t *j = NULL;

	uid[0] = why[0] = '\0';
	if (out->len < p + 2 || memcmp(out->data, ANSWER_PREFIX, p) != 0)
		return;
	while (p + 1 + n < out->len && n < 127 && out->data[p + 1 + n] != '"' && out->data[p + 1 + n] != '\\')
		n++;
	if (p + 1 + n < out->len && out->data[p + 1 + n] == '"') {
		memcpy(uid, out->data + p + 1, n); /* a plain literal, as the API server's UUIDs are */
		uid[n] = '\0';
	} else {
		reason = true; /* escapes: let the JSON reader take it */
	}
	if (!reason || (j = json_loadb(out->data, out->len, 0, NULL)) == NULL)
		return;
	if (!uid[0])
		snprintf(uid, 128, "%s", json_string_value(json_object_get(json_object_get(j, "response"), "uid")) ?: "");
	snprintf(why, 512, "%s",
		 json_string_value(json_array_get(json_object_get(json_object_get(j, "response"), "warnings"), 0)) ?: "");
	json_decref(j);
}

static enum MHD_Result busy(struct webhook *w, struct MHD_Connection *c)
{
	char detail[160];

	atomic_fetch_add(&w->busy, 1);
	snprintf(detail, sizeof(detail), "the request bodies in flight fill the webhook's %zu-byte budget; retry",
		 w->cfg.body_budget);
	log_warn("request rejected", LOG_STR("event", "rejected"), LOG_INT("status", 503), LOG_STR("reason", detail));
	return problem_with(c, 503, "Service Unavailable", detail, "Retry-After", "1");
}

static enum MHD_Result too_big(struct webhook *w, struct MHD_Connection *c)
{
	char detail[128];

	atomic_fetch_add(&w->too_big, 1);
	snprintf(detail, sizeof(detail), "the request body is over %zu bytes", w->cfg.max_body);
	log_warn("request rejected", LOG_STR("event", "rejected"), LOG_INT("status", 413), LOG_STR("reason", detail));
	return problem(c, 413, "Content Too Large", detail);
}

static enum MHD_Result mutate(struct webhook *w, struct MHD_Connection *c, struct req *q, bool ns_enabled,
				     bool no_ptrace)
{
	struct review_config rc_cfg = { .base = &w->wc.opts, .policy = &w->wc.enforce, .namespace_enabled = ns_enabled, .no_ptrace = no_ptrace,
					.max_body = w->cfg.max_body, .excluded = w->wc.excluded,
					.n_excluded = w->wc.n_excluded, .cache = w->cache };
	enum review_outcome o;
	struct err_msg em;
	struct buf out;
	double t0 = now_ms(), ms;
	enum MHD_Result r;
	int rc;

	if (q->busy)
		return busy(w, c);
	if (q->too_big)
		return too_big(w, c);
	buf_init(&out, (size_t)128 << 20);
	pthread_rwlock_rdlock(&w->cfg_lock);
	rc = review_admit(&rc_cfg, q->body.data ? q->body.data : "", q->body.len, &out, &o, &em);
	pthread_rwlock_unlock(&w->cfg_lock);
	ms = now_ms() - t0;
	if (rc != 0) {
		bool big = rc == DP_ETOOBIG; /* over a cap of the reader (nodes, depth) */

		atomic_fetch_add(big ? &w->too_big : &w->malformed, 1);
		buf_free(&out);
		log_warn("request rejected", LOG_STR("event", "rejected"), LOG_INT("status", big ? 413 : 400),
			 LOG_STR("reason", em.text), LOG_NUM("ms", ms));
		return problem(c, big ? 413 : 400, big ? "Content Too Large" : "Bad Request", em.text);
	}
	atomic_fetch_add(&w->outcomes[ns_enabled][o], 1);
	observe(w, ms);
	if (log_enabled(admission_level(o))) {
		char uid[128], why[512];

		answer_facts(&out, o == REVIEW_REFUSED || o == REVIEW_ERROR, uid, why);
		if (why[0])
			log_at(admission_level(o), "admission", LOG_STR("event", "admission"),
			       LOG_STR("path", mutate_path(ns_enabled, no_ptrace)),
			       LOG_STR("outcome", review_outcome_name(o)), LOG_STR("uid", uid), LOG_STR("reason", why),
			       LOG_NUM("ms", ms), LOG_END_);
		else
			log_at(admission_level(o), "admission", LOG_STR("event", "admission"),
			       LOG_STR("path", mutate_path(ns_enabled, no_ptrace)),
			       LOG_STR("outcome", review_outcome_name(o)), LOG_STR("uid", uid), LOG_NUM("ms", ms), LOG_END_);
	}
	r = reply(c, 200, "application/json", out.data, out.len);
	buf_free(&out);
	return r;
}

/*
 * The routes, one row each. /mutate[/namespace][/no-ptrace]: what the API server's choice of webhook
 * tells us about the pod's namespace (namespace: opted in as a whole; no-ptrace: Pod Security baseline or
 * restricted). The probes answer any method.
 */
enum route_kind { ROUTE_PROBE, ROUTE_METRICS, ROUTE_MUTATE };
static const struct route {
	const char *path;
	enum route_kind kind;
	bool ns, no_ptrace; /* ROUTE_MUTATE: what the path says of the namespace */
	const char *allow;  /* the methods answered ("GET, HEAD"); NULL: any */
	const char *hint;   /* a 405's detail */
} routes[] = {
	{ "/healthz", ROUTE_PROBE, false, false, NULL, NULL },
	{ "/readyz", ROUTE_PROBE, false, false, NULL, NULL },
	{ "/metrics", ROUTE_METRICS, false, false, "GET, HEAD", "GET the metrics" },
	{ "/mutate", ROUTE_MUTATE, false, false, "POST", "POST an AdmissionReview here" },
	{ "/mutate/namespace", ROUTE_MUTATE, true, false, "POST", "POST an AdmissionReview here" },
	{ "/mutate/no-ptrace", ROUTE_MUTATE, false, true, "POST", "POST an AdmissionReview here" },
	{ "/mutate/namespace/no-ptrace", ROUTE_MUTATE, true, true, "POST", "POST an AdmissionReview here" },
};

/* Whether method is one of allow's comma-separated methods. */
static bool method_allowed(const char *allow, const char *method)
{
	size_t n = strlen(method);

	for (const char *p = allow; p && *p; p += strspn(p, ", ")) {
		size_t k = strcspn(p, ",");

		if (k == n && strncmp(p, method, n) == 0)
			return true;
		p += k;
	}
	return allow == NULL;
}

static enum MHD_Result route(struct webhook *w, struct MHD_Connection *c, struct req *q, const char *url,
			     const char *method)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *r = &routes[i];

		if (strcmp(url, r->path) != 0)
			continue;
		if (!method_allowed(r->allow, method))
			return problem_with(c, 405, "Method Not Allowed", r->hint, "Allow", r->allow);
		switch (r->kind) {
		case ROUTE_PROBE: return reply(c, 200, "text/plain", "ok", 2);
		case ROUTE_METRICS: return metrics(w, c);
		case ROUTE_MUTATE: return mutate(w, c, q, r->ns, r->no_ptrace);
		}
	}
	return problem(c, 404, "Not Found", "no such route: /mutate[/namespace][/no-ptrace], /healthz, /readyz, /metrics");
}

/*
 * A request's first call: its accounting begins (in flight, the body budget), and a body larger than the
 * cap or than the budget can hold is refused before a byte of it is read.
 */
static enum MHD_Result begin_request(struct gen *g, struct MHD_Connection *c, void **con_cls)
{
	const union MHD_ConnectionInfo *ci = mhd.info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
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
	tl_req = q;
	cl = mhd.lookup(c, MHD_HEADER_KIND, "Content-Length");
	n = cl ? strtoull(cl, NULL, 10) : 0;
	if (n > w->cfg.max_body)
		return too_big(w, c); /* refused before a byte of the body is read (the connection then closes) */
	switch (budget_begin(w->budget, q->bc, n)) {
	case BUDGET_SHED: return MHD_NO;
	case BUDGET_FULL: return busy(w, c);
	case BUDGET_OK: break;
	}
	/* one allocation for the body, not a doubling series of copies; what a client only
	   claims costs no more than 1 MiB of address space until it sends it */
	if (n > 0)
		buf_reserve(&q->body, (size_t)(n < (1u << 20) ? n : (1u << 20)));
	return MHD_YES;
}

/*
 * A piece of the body: it must keep coming at REVIEW_BODY_MIN_RATE after the grace, or the connection is
 * closed; it takes its share of the budget, or is read and dropped (the answer then 503, or 413 past the cap).
 */
static enum MHD_Result take_body(struct webhook *w, struct req *q, const char *upload, size_t len)
{
	long long late = clock_ms() - q->t0 - REVIEW_BODY_GRACE_MS;
	size_t need = q->body.len + len;

	if (late > 0 && need < (unsigned long long)late * REVIEW_BODY_MIN_RATE / 1000) {
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
	tl_gen = g;
	tl_req = q;
	if (q == NULL)
		return begin_request(g, c, con_cls);
	if (*upload_size) {
		enum MHD_Result r = take_body(w, q, upload, *upload_size);

		*upload_size = 0;
		return r;
	}
	if (budget_answer(w->budget, q->bc) == BUDGET_SHED)
		return MHD_NO; /* shed for a review while its last bytes came */
	return route(w, c, q, url, method);
}

/* Between requests a connection keeps its body's memory, up to BODY_KEEP, while all together keep under KEEP_TOTAL. */
static void keep_body(struct webhook *w, struct req *q)
{
	atomic_fetch_sub(&w->kept, q->kept);
	q->kept = 0;
	q->body.len = 0;
	if (q->body.alloc > BODY_KEEP || atomic_fetch_add(&w->kept, q->body.alloc) + q->body.alloc > KEEP_TOTAL) {
		if (q->body.alloc <= BODY_KEEP)
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
			uncork(c);
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
		const union MHD_ConnectionInfo *f = mhd.info(c, MHD_CONNECTION_INFO_CONNECTION_FD);

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

	buf_init(b, MAX_KEYPAIR);
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
	g->d = mhd.start_daemon(MHD_USE_TLS | MHD_USE_AUTO_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG, 0, NULL,
				NULL, access_cb, g, MHD_OPTION_EXTERNAL_LOGGER, mhd_logger, w,
				MHD_OPTION_LISTEN_SOCKET, (MHD_socket)g->fd,
				MHD_OPTION_HTTPS_MEM_CERT, g->cert.data, MHD_OPTION_HTTPS_MEM_KEY, g->key.data,
				MHD_OPTION_HTTPS_PRIORITIES, TLS_PRIORITIES, MHD_OPTION_CONNECTION_TIMEOUT,
				(unsigned int)w->cfg.timeout_s, MHD_OPTION_THREAD_POOL_SIZE, (unsigned int)w->cfg.threads,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned int)CONN_SLOTS, MHD_OPTION_NOTIFY_COMPLETED, completed_cb,
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
	mhd.quiesce_daemon(g->d); /* returns g->fd, which gen_free closes */
	for (;;) {
		long long t = clock_ms() - start;

		if (atomic_load(&g->inflight) == 0 && (atomic_load(&g->conns) == 0 || t >= 2000))
			break; /* nothing in flight: what is left is idle */
		if (t >= max_ms)
			break;
		usleep(20000);
	}
	mhd.stop_daemon(g->d);
	gen_free(g);
}

static void *retire_main(void *arg)
{
	retire(arg, DRAIN_MAX_MS);
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
	    bind(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(s, 256) != 0) {
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

	if ((rc = dynlib_load(&mhd_lib, em)) != 0)
		return rc;
	dynlib_load(&tls_lib, NULL);
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
		w->cfg.max_body = (size_t)8 << 20;
	if (w->cfg.body_budget == 0)
		w->cfg.body_budget = (size_t)16 << 20;
	if (w->cfg.body_budget < w->cfg.max_body + BUDGET_RESERVE)
		w->cfg.body_budget = w->cfg.max_body + BUDGET_RESERVE; /* a request of the largest size can be taken */
	if (w->cfg.timeout_s == 0)
		w->cfg.timeout_s = 10;
	if (w->cfg.threads == 0)
		w->cfg.threads = 2;
	pthread_mutex_init(&w->mu, NULL);
	w->budget = budget_new(w->cfg.body_budget, CONN_SLOTS);
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
		retire(old, DRAIN_MAX_MS);
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
	retire(w->cur, SHUTDOWN_MAX_MS);
	close(w->lfd);
	inj_settings_free(&w->wc);
	rcache_free(w->cache);
	pthread_rwlock_destroy(&w->cfg_lock);
	pthread_mutex_destroy(&w->mu);
	budget_free(w->budget);
	free(w);
}
