/*
 * server_int.h - what the webhook server's files share: server.c (the
 * daemons, a request's accounting, start and reload), server_routes.c (the
 * route table and what each route answers) and server_mhd.c (libmicrohttpd
 * through dlopen, and the answers written with it). Each calls only the
 * ones after it in that list.
 */
#ifndef DP_WEBHOOK_SERVER_INT_H
#define DP_WEBHOOK_SERVER_INT_H

#include <microhttpd.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>

#include "budget.h"
#include "buf.h"
#include "errors.h"
#include "limits.h"
#include "rcache.h"
#include "review.h"
#include "server.h"
#include "injector/inj.h"

#define WH_N_BUCKETS 9 /* the admission-time histogram's finite buckets (server_routes.c) */

/* libmicrohttpd's functions (and GnuTLS's corking, NULL when not found), filled by wh_mhd_load. */
struct wh_mhd {
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
	/* GnuTLS's record corking (the library libmicrohttpd brought in): see server_mhd.c */
	void (*cork)(void *session);
	int (*uncork)(void *session, unsigned int flags);
};

extern struct wh_mhd wh_mhd;

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

struct webhook {
	struct webhook_config cfg;
	int lfd;
	pthread_mutex_t mu; /* guards cur and the key pair's identity */
	struct gen *cur;
	struct stat cert_st, key_st;
	pthread_rwlock_t cfg_lock; /* readers: requests; writer: a configuration reload */
	struct inj_settings wc;
	struct stat cfg_st;
	atomic_ullong outcomes[2][REVIEW_N_OUTCOMES]; /* [namespace_enabled][outcome] */
	atomic_ullong malformed, too_big, reloads, reload_failures, cfg_reloads, cfg_failures;
	atomic_ullong hist[WH_N_BUCKETS + 1];
	atomic_ullong sum_us;
	struct rcache *cache; /* answers to repeated reviews (rcache.h); cleared when the configuration changes */
	struct budget *budget;   /* bodies in flight and connection slots (budget.h) */
	atomic_size_t kept;      /* of WH_KEEP_TOTAL */
	atomic_ullong busy;      /* requests refused for the budget */
	atomic_ullong slow;      /* connections closed for a body under WH_BODY_MIN_RATE */
};

/*
 * Bodies in flight share one budget (webhook_config.body_budget), so memory
 * stays bounded however many clients send, and connections share WH_CONN_SLOTS;
 * budget.h says who holds them and who is shed when a review needs them. A
 * body must also keep coming at WH_BODY_MIN_RATE after WH_BODY_GRACE_MS (Kestrel's
 * MinRequestBodyDataRate, at a rate for the cluster network the API server
 * sends from), or its connection is closed and its share freed: to hold the
 * budget a client must keep sending.
 *
 * WH_CONN_SLOTS is libmicrohttpd's connection limit. A connection costs ~40 KiB
 * (GnuTLS's session and buffers) and ~70 KiB once it has sent a request
 * (libmicrohttpd's 32 KiB pool filled), so 256 of them, the body budget, the
 * kept buffers and the process itself stay under the manifests' 64Mi limit.
 * No per-address limit (MHD_OPTION_PER_IP_CONNECTION_LIMIT): behind a sidecar
 * proxy or SNAT every client, the API server too, has one address.
 */

/*
 * A connection's request in hand. One per connection (its socket context),
 * used again by each request on it: a keep-alive connection that sends
 * 67 KB reviews (a pod with 1,500 env vars) reads each into the memory the
 * last one used, not a fresh allocation the kernel must fault in page by
 * page (ten page faults a request). Up to WH_BODY_KEEP is kept between requests.
 */
struct req {
	struct buf body;
	struct budget_conn *bc;
	bool too_big;
	bool busy;      /* the body did not fit in the budget: the answer is 503 */
	bool corked;    /* the answer's TLS records are held until completed_cb (cork()) */
	size_t kept;    /* bytes of WH_KEEP_TOTAL its connection holds */
	long long t0;   /* when the request began (clock_ms) */
};

/* The daemon generation whose worker thread this is, and the request in hand (set at the top of access_cb). */
extern __thread const struct gen *wh_tl_gen;
extern __thread struct req *wh_tl_req;

/* ---- server_mhd.c ---- */

/* Loads libmicrohttpd (and finds GnuTLS's corking in what it brought); DP_EIO with em when it is missing. */
int wh_mhd_load(struct err_msg *em);
/* The answer, with one more header hname: hval when hname is not NULL (a 405's Allow, a 503's Retry-After). */
enum MHD_Result wh_reply_with(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
			      size_t len, const char *hname, const char *hval);
enum MHD_Result wh_reply(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body, size_t len);
/* An application/problem+json answer. */
enum MHD_Result wh_problem_with(struct MHD_Connection *c, unsigned status, const char *title, const char *detail,
				const char *hname, const char *hval);
enum MHD_Result wh_problem(struct MHD_Connection *c, unsigned status, const char *title, const char *detail);
/* Sends what the answer's corking held (completed_cb, on the connection's thread). */
void wh_uncork(struct MHD_Connection *c);

/* ---- server_routes.c ---- */

/* The answer to a request whose body is all in q (the route table). */
enum MHD_Result wh_route(struct webhook *w, struct MHD_Connection *c, struct req *q, const char *url,
			 const char *method);
/* 503: the body does not fit in the budget (counted and logged). */
enum MHD_Result wh_busy(struct webhook *w, struct MHD_Connection *c);
/* 413: the body is over max_body (counted and logged). */
enum MHD_Result wh_too_big(struct webhook *w, struct MHD_Connection *c);

#endif
