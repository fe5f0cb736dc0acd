/*
 * webc_int.h - between webc's own files (webc.c above webc_conn.c and
 * webc_resp.c, webc_conn.c above webc_proxy.c and webc_tls.c; none calls
 * up). Not for other users: their contract is webc.h.
 */
#ifndef DP_WEBC_INT_H
#define DP_WEBC_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "webc.h"

#define WEBC_HEAD_OUT_MAX 65536 /* our request head (and a CONNECT) */
#define WEBC_READ_CHUNK 16384

/* Caps on an answer's head (status line and headers) and on a chunked body's framing lines and trailers. */
#define WEBC_HEAD_MAX 16384
#define WEBC_HEADERS_MAX 100
#define WEBC_CHUNK_LINE_MAX 1024

/*
 * The answer reader (webc_resp.c): push-based, so any split of the bytes
 * gives the same result. It skips 1xx answers, takes the body as HEAD,
 * 204/304, Content-Length, chunked or read-to-close prescribe (RFC 9112
 * 6.3), and keeps the wanted headers. Pure: no I/O.
 */
enum webc_framing { WEBC_NONE, WEBC_LENGTH, WEBC_CHUNKED, WEBC_TO_CLOSE };

struct webc_parse {
	/* set by webc_parse_init */
	bool head_request;
	size_t max_resp;
	const char *const *want;
	struct webc_resp *resp;
	/* the reader's state */
	int state;
	struct buf line;           /* the head, or one chunk-size line or trailer line, gathered */
	size_t trailer_bytes;
	enum webc_framing framing;
	uint64_t left;             /* body bytes (Content-Length) or bytes of the current chunk still to come */
	bool keep_alive;           /* the server may take another request on this connection */
	bool any;                  /* at least one byte of an answer came */
};

/* Start reading one answer into resp (which it initialises: status 0, an empty body capped at max_resp). */
void webc_parse_init(struct webc_parse *p, bool head_request, size_t max_resp, const char *const *want,
		     struct webc_resp *resp);
/*
 * Take n bytes. *used gets how many belong to the answer (the rest came after
 * its end). 1: the answer is complete; 0: more is needed; DP_EREMOTE (not
 * HTTP/1.x, a malformed head or chunk, a head over WEBC_HEAD_MAX or
 * WEBC_HEADERS_MAX headers) or DP_ETOOBIG (the body passes max_resp) with em
 * saying what.
 */
int webc_parse_feed(struct webc_parse *p, const char *data, size_t n, size_t *used, struct err_msg *em);
/* The server closed the connection: 1 when that ends the answer (read-to-close), else DP_EIO with em. */
int webc_parse_eof(struct webc_parse *p, struct err_msg *em);
/* Free the reader's own buffers (not resp). */
void webc_parse_free(struct webc_parse *p);

/*
 * An HTTP proxy (webc_proxy.c): its URL taken apart, and its answer to
 * CONNECT read. Pure.
 */
struct webc_proxy {
	char *host;  /* NULL: no proxy */
	char port[8];
	char *auth;  /* "Proxy-Authorization: Basic ..." from the URL's user and password, or NULL; wiped when freed */
};
/* proxy ("http://[user:password@]host[:port]", the scheme optional) into out. DP_EINVAL with em for another
 * scheme or a bad host or port. */
int webc_proxy_parse(const char *proxy, struct webc_proxy *out, struct err_msg *em);
void webc_proxy_free(struct webc_proxy *p); /* zeroes p */
/* The answer in data[0..n): 1 with its status and the length of its head once the head is whole, 0 when more
 * is needed, DP_EREMOTE with em (not HTTP/1.x, or a head over WEBC_HEAD_MAX). */
int webc_proxy_answer(const char *data, size_t n, size_t *head_len, int *status, struct err_msg *em);

/*
 * TLS over a connected non-blocking socket (webc_tls.c). Nothing here waits:
 * each call returns WEBC_WANT_READ or WEBC_WANT_WRITE when the socket must
 * become readable or writable first, and the caller polls.
 */
#define WEBC_WANT_READ (-1000)
#define WEBC_WANT_WRITE (-1001)
#define WEBC_EOF_UNCLEAN (-1002) /* the peer closed without close_notify */

struct webc_tls_ctx; /* the verification settings and CA bundle, kept across reconnections */
struct webc_tls;     /* one TLS session on one socket */

/*
 * A new context for o (ca_file, else SSL_CERT_FILE, else the system bundle;
 * or insecure), TLS 1.2 at least. DP_ENOLIB when libssl is missing (dynamic
 * builds), DP_EIO when the CA bundle does not load.
 */
int webc_tls_ctx_new(const struct webc_opts *o, struct webc_tls_ctx **out, struct err_msg *em);
void webc_tls_ctx_free(struct webc_tls_ctx *x); /* NULL-safe */
/* A session on fd for host (SNI unless host is an IP literal; the certificate checked against host). */
int webc_tls_new(struct webc_tls_ctx *x, int fd, const char *host, struct webc_tls **out, struct err_msg *em);
/* 0 when the handshake is done, WEBC_WANT_*, or DP_EIO with em (the verification failure in words). */
int webc_tls_handshake(struct webc_tls *t, struct err_msg *em);
/* Bytes read (> 0), 0 at close_notify, WEBC_WANT_*, WEBC_EOF_UNCLEAN, or DP_EIO with em. */
long webc_tls_read(struct webc_tls *t, void *p, size_t n, struct err_msg *em);
/* Bytes written (> 0), WEBC_WANT_*, or DP_EIO with em. */
long webc_tls_write(struct webc_tls *t, const void *p, size_t n, struct err_msg *em);
void webc_tls_free(struct webc_tls *t); /* NULL-safe; sends no close_notify (the socket is closed next) */

/*
 * A connection (webc_conn.c, below webc.c): the parsed base URL, the options,
 * the socket and its TLS session when open, the proxy.
 */
struct webc_conn {
	bool tls;
	char *host;     /* as in the URL, an IPv6 address without its brackets */
	char *host_hdr; /* the Host header's value */
	char port[8];
	char *ca_file;  /* o.ca_file points here */
	struct webc_opts o;
	int fd;         /* -1 when not open */
	struct webc_tls_ctx *tctx; /* https: made by webc_open, used by every connection */
	struct webc_tls *t;
	unsigned served; /* answers read on the open connection */
	struct webc_proxy px; /* px.host NULL: straight to host */
};

/* Close the socket (and TLS session) if open; the object stays. */
void webc_conn_drop(struct webc_conn *c);
/* Resolve, check, connect (through the proxy when there is one) and for https the handshake, all under
 * connect_timeout_ms. 0, DP_EIO or DP_ECANCELED with em; c->fd open on success. */
int webc_conn_connect(struct webc_conn *c, struct err_msg *em);
/* Has the server closed a kept-alive connection (or sent something unasked) while it was idle? */
bool webc_conn_stale(const struct webc_conn *c);
/* Whether o's cancel fd is readable. */
bool webc_cancelled(const struct webc_opts *o);
/* All n bytes out: 0, or DP_EIO / DP_ECANCELED with em (*gone when the server closed or reset it). */
int webc_conn_send(struct webc_conn *c, const char *p, size_t n, bool *gone, struct err_msg *em);
/* Some bytes in: > 0, 0 at the server's close, or an error with em (*gone for a reset or an unclean TLS close). */
long webc_conn_recv(struct webc_conn *c, char *p, size_t n, bool *gone, struct err_msg *em);

#endif
