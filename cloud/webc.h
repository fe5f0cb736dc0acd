/*
 * webc.h - the egress process's HTTP/1.1 client, and the one client of
 * every AWS call diagport makes (S3 egress, the credential chain, the fleet
 * client's ECS, Secrets Manager and STS calls): plain TCP or TLS, one
 * request at a time on a connection kept open between requests, request
 * bodies streamed from a callback, answers read under caps, optionally
 * through an http:// proxy.
 *
 * Why not hclient (libcurl): the agent's image is one static binary FROM
 * scratch, where libcurl and its twenty libraries cannot be loaded, and the
 * egress process must be able to say where it may connect before it does.
 * webc is small: getaddrinfo (static glibc resolves through /etc/hosts and
 * /etc/resolv.conf without shared libraries), a connect that every address is
 * checked against the caller's allowlist first, TLS by OpenSSL (libssl: the
 * server verified against a CA bundle and the host name, SNI, TLS 1.2+), and
 * an HTTP/1.1 reader for Content-Length and chunked answers.
 *
 * Ownership: everything passed in is borrowed for the call, but for
 * webc_open's options, which the connection copies (ca_file too) except
 * allow_ctx, which must outlive the connection; a webc_conn is the caller's
 * and is freed with webc_close. Not thread-safe per connection; use one
 * connection per thread.
 */
#ifndef DP_WEBC_H
#define DP_WEBC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

#include "buf.h"
#include "errors.h"

/*
 * Where the process may connect: called with every address getaddrinfo gave
 * for a URL's host, before connect. true: allowed. NULL: everything allowed.
 */
typedef bool (*webc_allow_fn)(void *ctx, const char *host, const struct sockaddr *addr, socklen_t len);

struct webc_opts {
	const char *ca_file;    /* PEM bundle to verify servers against; NULL: SSL_CERT_FILE, else the
				   system's (/etc/ssl/certs/ca-certificates.crt) */
	bool insecure;          /* do not verify the server (tests against a self-signed emulator only) */
	long connect_timeout_ms;/* connect and the TLS handshake, over all addresses; 0 = 10 s (getaddrinfo
				   itself is bounded by resolv.conf's timeout and attempts, not by this) */
	long io_timeout_ms;     /* any one read or write making no progress; 0 = 30 s */
	long answer_timeout_ms; /* the whole answer, from the request's last byte (a server sending it a byte at a
				   time gets no further); 0 = 10 minutes (S3 may take minutes to complete an upload) */
	webc_allow_fn allow;    /* may be NULL */
	void *allow_ctx;
	const int *cancel_fd;   /* NULL, or an fd (borrowed) that once readable ends every wait, and stops every
				   request before it starts, with DP_ECANCELED: an upload its agent gave up on */
	const char *proxy;      /* NULL, or an http:// proxy ("http://[user:password@]host[:port]", port 1080 by
				   default, as libcurl's): https goes through a CONNECT tunnel, http as an
				   absolute-form request; copied by webc_open. The egress process sets none */
};

struct webc_conn; /* one connection to one scheme://host:port, reopened as needed */

/*
 * A new connection object for base_url's scheme, host and port (no
 * connection is opened yet). For https, libssl is loaded and the CA bundle
 * read now, so that a process may enter its sandbox after this. DP_EINVAL
 * for a bad URL; for https also DP_ENOLIB (no libssl, dynamic builds) and
 * DP_EIO (the CA bundle does not load), with em.
 */
int webc_open(const char *base_url, const struct webc_opts *o, struct webc_conn **out, struct err_msg *em);
void webc_close(struct webc_conn *c); /* NULL-safe */

/*
 * A request body given piece by piece: fill up to max bytes into out and
 * return how many, 0 at the end, or a negative DP_E* code (the request is
 * abandoned, the connection closed). Called only when the server is ready
 * for more, so a slow store slows the producer rather than buffering.
 */
typedef long (*webc_body_fn)(void *ctx, char *out, size_t max);

struct webc_req {
	const char *method;         /* "PUT", "POST", "GET", "DELETE", "HEAD" */
	const char *target;         /* the path and query, "/bucket/key?partNumber=1&uploadId=..." (already encoded) */
	const char *const *headers; /* "Name: value" lines, NULL-terminated, or NULL; Host, Content-Length,
				       Connection and Transfer-Encoding are webc's (given here: DP_EINVAL) */
	const void *body;           /* a body in memory (body_len bytes), or NULL */
	size_t body_len;
	webc_body_fn body_fn;       /* or a streamed body of exactly body_len bytes (sent with Content-Length) */
	void *body_ctx;
	size_t max_resp;            /* the most of the answer's body kept in resp (more: DP_ETOOBIG); 0 = 1 MiB */
	const char *const *want_headers; /* answer headers to keep (names, case-insensitive, NULL-terminated) */
};

struct webc_resp {
	int status;                 /* HTTP status */
	struct buf body;            /* the answer's body (initialised by webc_request; free with webc_resp_free) */
	char **headers;             /* the kept headers as "name: value" (name lowercased), NULL-terminated; owned */
	size_t n_headers;
};
void webc_resp_free(struct webc_resp *r);
/* A kept header's value (borrowed), or NULL. */
const char *webc_resp_header(const struct webc_resp *r, const char *name);

/*
 * Send one request on c (opening the connection first if it is not open,
 * and once more if a kept-alive connection turns out closed before any of
 * the answer came, when the body can be sent again: a body in memory, or a
 * body_fn not called yet; a streamed body already partly taken gives
 * DP_EIO instead) and read the whole answer into resp, whatever its
 * status. 0 with resp filled; DP_EIO with em when no whole answer came
 * (resolution, refused or disallowed connect, TLS verification, reset,
 * timeout), DP_ETOOBIG when the answer's body passes max_resp, DP_EREMOTE
 * for an answer that is not HTTP/1.x, DP_ENOLIB when TLS is needed and
 * libssl is missing (dynamic builds), DP_EINVAL for a request that cannot
 * be sent (method, target, a header line), DP_ECANCELED once the options'
 * cancel_fd is readable, body_fn's own code when it fails. On failure resp is empty (webc_resp_free is still safe), and
 * after any failure but DP_EINVAL the connection is closed (the next
 * request opens a new one). em names the method, host and path, never a
 * header value or the query (which may hold a signature).
 */
int webc_request(struct webc_conn *c, const struct webc_req *req, struct webc_resp *resp, struct err_msg *em);

/*
 * o made for the cleanup after an upload failed or was cancelled (abort the
 * multipart upload, delete the blob): not cancellable, and short, so that a
 * dead store holds it for seconds, not minutes: at most 5 s to connect, 5 s
 * without progress, 10 s for the whole answer.
 */
void webc_opts_cleanup(struct webc_opts *o);

/*
 * The proxy for url as libcurl chooses it from the environment: http_proxy
 * (lowercase only) for http://, https_proxy or HTTPS_PROXY for https://,
 * else all_proxy or ALL_PROXY; none when no_proxy or NO_PROXY is "*" or
 * names url's host or a domain above it (".example.com" and "example.com"
 * alike). A new string, or NULL for none. For the fleet client's AWS calls,
 * which libcurl made before and which honour these variables as the AWS CLI
 * does.
 */
char *webc_proxy_env(const char *url);

/* Sleep ms (a retry's backoff), unless o's cancel_fd is or becomes readable first: 0, or DP_ECANCELED. */
int webc_pause(const struct webc_opts *o, long ms);

#endif
