/*
 * httpd.h - the agent's HTTP/1.1 server (our own, http_parse.c reads the
 * requests): one listening socket per URL, one request per connection.
 *
 * Requests are read by one acceptor thread that holds no thread per
 * connection, under a deadline for the whole head (Go's ReadHeaderTimeout,
 * Kestrel's RequestHeadersTimeout) and a minimum body rate (Kestrel's
 * MinRequestBodyDataRate), a cap per client address (nginx's limit_conn) and
 * one memory budget; a complete request gets a worker thread (a dump download
 * may take minutes), up to max_connections, plus a few slots that only probe
 * routes may use, so no client can starve the liveness probe.
 *
 * A handler is called once per request and must answer with exactly one
 * httpd_send* call. Request bodies: only a POST's to a route that takes one
 * (httpd_config.takes_body), with a Content-Length up to max_body; anything
 * else with a body gets 413 before a byte of it is read.
 */
#ifndef DP_HTTPD_H
#define DP_HTTPD_H

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"

struct httpd;
struct httpd_req;

typedef void (*httpd_handler)(void *ctx, struct httpd_req *r);

/* What httpd_config.admit decides about a request. */
enum httpd_admission {
	HTTPD_ADMIT,  /* go on: its body is read, a worker runs the handler */
	HTTPD_REFUSE, /* answered as set (httpd_problem), by the acceptor, with no worker */
	HTTPD_WAIT,   /* held until *until_ms (clock_ms), with no thread or slot of its own, then asked again */
};

struct httpd_config {
	const char *urls;          /* "http://+:52323;https://127.0.0.1:52323" (dotnet-monitor's --urls form); port 0: the
				      system picks one (httpd_bound_urls) */
	/*
	 * For https:// URLs, required then (httpd_tls.h): the certificate chain
	 * and key, PEM files reloaded when they change; an https listener also
	 * answers a plain request for a probe route (is_probe), and no other.
	 */
	const char *tls_cert, *tls_key, *tls_password;
	const char *tls_cert_name, *tls_key_name; /* the settings that name them, for messages */
	/* or the chain and an unencrypted key as PEM text (copied into OpenSSL's objects, not kept; never
	 * reloaded), and the setting it came from for messages, never its content */
	const char *tls_pem, *tls_pem_name;
	unsigned max_connections;  /* requests in progress (a worker each), 32; more get 503 */
	unsigned max_per_peer;     /* connections from one address, 64; over it the oldest still sending its head is closed */
	unsigned idle_timeout_s;   /* writing an answer: a client that reads nothing for this long is cut off, 30 */
	unsigned head_timeout_s;   /* the whole request head must come within this, 10; else 408 */
	size_t header_memory;      /* per-connection memory for headers, 32 KiB */
	size_t max_body;           /* a POST's body up to this many bytes (Content-Length); 0 = no bodies (413) */
	bool (*takes_body)(const char *path); /* the POST routes that take one; NULL = none */
	bool (*is_probe)(const char *path);   /* the routes that may use the probe slots; NULL = none */
	/*
	 * Before a body is read, on the acceptor's thread: false with an answer
	 * set (401) refuses it unread, so only a client that may use the route can
	 * make the server hold body memory; NULL = every body is read.
	 */
	bool (*admit_body)(void *ctx, struct httpd_req *r);
	/*
	 * Every request, once its head is parsed and its framing checked (400,
	 * 411, 413 come first) and before anything else is done with it (its
	 * body read, a worker given), on
	 * the acceptor's thread: it must not block. A request held (HTTPD_WAIT)
	 * costs a connection of its peer's max_per_peer and nothing else; a
	 * client that hangs up meanwhile is dropped. NULL = every request goes on.
	 */
	enum httpd_admission (*admit)(void *ctx, struct httpd_req *r, long long now_ms, long long *until_ms);
};

/* Parse the URLs and start listening. DP_EINVAL (a bad URL; an https URL without a certificate and key that
 * load, em naming the setting and the file), DP_ENOLIB (no libssl) or DP_EIO (bind) with em. */
int httpd_start(const struct httpd_config *cfg, httpd_handler h, void *ctx, struct httpd **out, struct err_msg *em);
void httpd_free(struct httpd *d); /* stops listening; accepts NULL */
/*
 * The addresses it listens on, as URLs separated by ';' ("http://127.0.0.1:41234;http://[::1]:41234"), with
 * the port the system chose where a URL asked for port 0; appended to out. Accepts NULL (nothing).
 */
void httpd_bound_urls(const struct httpd *d, struct buf *out);
/* True when every URL binds a loopback address (127.0.0.0/8, ::1, localhost). */
bool httpd_urls_loopback_only(const char *urls);
/* Every byte of p on the socket fd (EINTR retried, no SIGPIPE); false on an error. Clients use it too. */
bool httpd_send_all(int fd, const void *p, size_t n);

const char *httpd_method(const struct httpd_req *r);
const char *httpd_path(const struct httpd_req *r);
const char *httpd_query(const struct httpd_req *r, const char *key);   /* borrowed, or NULL */
const char *httpd_header(const struct httpd_req *r, const char *name); /* borrowed, or NULL */
/* The body of a POST (borrowed, NUL-terminated), or NULL with *len 0 when there is none. */
const char *httpd_body(const struct httpd_req *r, size_t *len);
/* The client's address as text ("127.0.0.1", "fd00::5"), into out. */
void httpd_peer_text(const struct httpd_req *r, char *out, size_t n);
/* The connection's socket, borrowed: for getsockname and getpeername, never for I/O. */
int httpd_socket(const struct httpd_req *r);
/* In an on_done callback: whether the whole body of a memory or file answer was sent. */
bool httpd_sent_whole(const struct httpd_req *r);
/* Whether the client takes a chunked body (HTTP/1.1): without it, a body cut off looks whole. */
bool httpd_chunked(const struct httpd_req *r);
/* Whether the client has gone (closed its side or reset), waiting up to timeout_ms for it to. */
bool httpd_client_gone(const struct httpd_req *r, int timeout_ms);

/* Add a response header (copied) to the answer this request will send; at most 8. */
void httpd_set_header(struct httpd_req *r, const char *name, const char *value);
/*
 * Run fn(ctx) once when this request's response is finished: fully sent, or
 * abandoned by the client. Set before the httpd_send* call. A handler that
 * holds a resource for the life of its response (a dump slot) frees it here.
 */
void httpd_on_done(struct httpd_req *r, void (*fn)(void *), void *ctx);

int httpd_send(struct httpd_req *r, unsigned status, const char *ctype, const char *body, size_t len);
/* Send a JSON value (stolen) as application/json. */
int httpd_send_json(struct httpd_req *r, unsigned status, json_t *v);
/* application/problem+json: {"type","title","status","detail"}. */
int httpd_problem(struct httpd_req *r, unsigned status, const char *title, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* Send size bytes of fd (stolen; closed when the response is done) with sendfile where possible. */
int httpd_send_fd(struct httpd_req *r, unsigned status, const char *ctype, int fd, uint64_t size,
		  const char *attachment_name);

/*
 * Stream a body of unknown length (chunked). read_fn fills up to max bytes and
 * returns the count, 0 at the clean end, or -1 to abort the transfer (the
 * client sees it cut off, never a complete-looking body). free_fn(ctx) runs
 * once when the response is finished or abandoned.
 */
typedef long (*httpd_read_fn)(void *ctx, char *out, size_t max);
int httpd_send_stream(struct httpd_req *r, unsigned status, const char *ctype, httpd_read_fn read_fn,
		      void (*free_fn)(void *), void *ctx, const char *attachment_name);

/*
 * Stream a file another thread is still writing (chunked, each chunk with
 * sendfile). avail_fn(ctx, sent) waits until fd holds bytes beyond the
 * `sent` already sent and returns how many may go now, 0 at the clean end
 * (the last chunk), or -1 to cut the transfer off (no last chunk). fd is
 * borrowed: free_fn(ctx) runs once when the response is finished or
 * abandoned, and closes it.
 */
typedef long long (*httpd_avail_fn)(void *ctx, uint64_t sent);
int httpd_send_follow(struct httpd_req *r, unsigned status, const char *ctype, int fd, httpd_avail_fn avail_fn,
		      void (*free_fn)(void *), void *ctx, const char *attachment_name);

/*
 * Part of a followed body straight from the pipe `from`, which holds at
 * least n bytes, without a pass through the file: the bytes the socket takes
 * now, waiting up to wait_ms for room (none by then: 0). Only while r's body is
 * being sent and its thread waits in avail_fn with every byte of fd sent,
 * which makes the socket the caller's. The count, or -1 when the connection
 * failed. A chunk may end up part sent: its rest must be the next bytes of
 * fd, which the body's thread sends without a new size line.
 */
long long httpd_follow_splice(struct httpd_req *r, int from, uint64_t n, int wait_ms);
/* Whether httpd_follow_splice can move bytes on r's connection: false on https, where every byte is
 * encrypted on its way (the caller files the pipe's bytes instead of waiting for room). */
bool httpd_zero_copy(const struct httpd_req *r);

#endif
