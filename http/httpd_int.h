/*
 * httpd_int.h - what the HTTP server's four files share (not for users of
 * httpd.h): httpd.c describes and writes responses, httpd_conn.c reads
 * requests and runs the connections, httpd_accept.c accepts them and runs
 * the acceptor's poll loop, httpd_listen.c parses the URLs, listens, starts
 * and stops.
 */
#ifndef DP_HTTPD_INT_H
#define DP_HTTPD_INT_H

#include <pthread.h>
#include <sys/socket.h>

#include "http_parse.h"
#include "httpd.h"
#include "httpd_tls.h"

#define HTTPD_MAX_LISTENERS 8
#define HTTPD_MAX_EXTRA_HEADERS 8
#define HTTPD_PROBE_SLOTS 4     /* requests in progress only probes may use */
#define HTTPD_CONN_FIRST 1024   /* the first bytes of a request, inside struct conn: a probe needs no more */

enum body_kind { BODY_MEM, BODY_FD, BODY_STREAM, BODY_FOLLOW };

struct httpd_req {
	struct http_request rq;
	bool head_only;
	bool answered;
	bool sent_whole; /* the whole body went out (a file: every byte sendfile took) */
	unsigned status;
	char *ctype, *disposition;
	enum body_kind kind;
	char *mem;
	size_t mem_len;
	int fd;
	uint64_t fd_size;
	httpd_read_fn read_fn;
	httpd_avail_fn avail_fn; /* BODY_FOLLOW: fd is the stream's, borrowed */
	uint64_t open;           /* BODY_FOLLOW: bytes of the chunk whose size line went out still to send */
	unsigned long long chunks; /* BODY_FOLLOW: size lines sent */
	void (*free_fn)(void *);
	void *stream_ctx;
	char *extra[HTTPD_MAX_EXTRA_HEADERS][2];
	size_t n_extra;
	void (*done)(void *);
	void *done_ctx;
	char *body; /* a POST's body (httpd_config.max_body), NUL-terminated */
	size_t body_len;
};

/* A client's address without its port: what the per-peer cap counts. */
struct peer {
	sa_family_t family;
	unsigned char a[16];
};

enum conn_state {
	CONN_HELLO,  /* an https listener's: the first byte decides (a TLS record, or a plain request), then the handshake */
	CONN_HEAD,   /* reading the request head (the acceptor's) */
	CONN_BODY,   /* reading a POST's body (the acceptor's) */
	CONN_WAIT,   /* held by admit until deadline_ms, then asked again (the acceptor's; its input left unread) */
	CONN_WORK,   /* a worker thread runs the handler and writes the answer */
	CONN_LINGER, /* answered and shut for writing; the acceptor reads what the client still sends, then closes */
};

struct conn {
	struct httpd *d;
	int sock;
	size_t idx;            /* in httpd.pend, while the acceptor holds it */
	unsigned slot;         /* in httpd.work, while a worker holds it */
	bool probe_slot;       /* that slot is one of the probe slots */
	struct conn *next;     /* in httpd.done */
	unsigned long long seq; /* the order it was accepted (or handed back to linger) in: lower is older */
	enum conn_state state;
	struct peer peer;
	long long deadline_ms; /* CONN_HEAD, CONN_BODY, CONN_LINGER: closed (or 408) then; CONN_WAIT: admit asked again */
	size_t head_len;       /* the parsed head's bytes in buf (what follows is the body's start) */
	long long body_ms;     /* CONN_BODY: when the body began */
	char *buf;             /* the head as it comes: first, or a larger block from the budget */
	size_t len, cap;
	size_t want;           /* the body's Content-Length */
	size_t charged;        /* bytes of the budget this connection holds */
	bool probe;            /* a probe route (httpd_config.is_probe): may use the probe slots */
	struct httpd_tls_conn *tls; /* an https connection's session, until its answer is sent */
	bool plain_on_tls;     /* a plain request on an https listener: only a probe route is answered */
	short events;          /* what the acceptor polls for (the handshake may need POLLOUT) */
	struct httpd_req r;
	char first[HTTPD_CONN_FIRST];
};

struct httpd {
	int lfd[HTTPD_MAX_LISTENERS];
	bool lfd_tls[HTTPD_MAX_LISTENERS]; /* an https:// URL's */
	size_t n;
	struct httpd_tls *tls; /* the certificate for them (the acceptor's: it reloads it) */
	int wake[2];
	pthread_t acceptor;
	bool acceptor_started;
	httpd_handler h;
	void *ctx;
	unsigned max_conns, per_peer, idle_s;
	long long head_ms;
	size_t head_cap, max_body;
	bool (*takes_body)(const char *path);
	bool (*is_probe)(const char *path);
	bool (*admit_body)(void *ctx, struct httpd_req *r);
	enum httpd_admission (*admit)(void *ctx, struct httpd_req *r, long long now_ms, long long *until_ms);
	/* The acceptor's own: connections reading a request or lingering, and the bytes they buffer. */
	struct conn **pend;
	size_t n_pend, pend_cap;
	size_t budget, budget_used;
	long long accept_pause_until;
	unsigned long long seq;
	/* Shared with the workers, under mu. */
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct conn **work;     /* max_conns + HTTPD_PROBE_SLOTS slots, NULL = free */
	unsigned n_general, n_probe;
	struct conn *done;      /* answered connections handed back to the acceptor to linger */
	bool stopping;
};

/* The reason phrase of status ("Not Found"). */
const char *httpd_reason(unsigned status);
/* Write r's answer on its connection (head, then the body unless HEAD), through TLS on an https one. */
void httpd_transmit(struct httpd_req *r);
/* End c's TLS session, if any (close_notify, then freed): its answer is out. */
void httpd_conn_tls_end(struct conn *c);
/* Free what r holds and run its on_done. */
void httpd_req_clean(struct httpd_req *r);

/* The acceptor thread (httpd_accept.c): started by httpd_start, ended by a byte on wake[1]. */
void *httpd_acceptor_main(void *arg);

/* A connection's state machine (httpd_conn.c), for the acceptor (httpd_accept.c); all on its thread. */
/* Hold c (new, or back from a worker) in d's list of connections still reading or lingering. */
void httpd_conn_pend_add(struct httpd *d, struct conn *c);
/* Close c and free it: a connection that is not (or no longer) in the list. */
void httpd_conn_free(struct conn *c);
/* Close a connection the acceptor holds: out of the list, its budget given back, freed. */
void httpd_conn_drop(struct httpd *d, struct conn *c);
/* c's answer is out: end its TLS session, shut its write side and read what still comes until LINGER_MS. */
void httpd_conn_linger(struct conn *c, long long now);
/* Charge n more bytes to the budget for c; false when the budget is spent. */
bool httpd_conn_charge(struct httpd *d, struct conn *c, size_t n);
/* c has bytes (or a hang-up) to read: the next step of its state. */
void httpd_conn_readable(struct httpd *d, struct conn *c, long long now);
/* Connections past their deadline: 408 for a request that started and stalled, else closed. */
void httpd_conn_expire(struct httpd *d, long long now);

#endif
