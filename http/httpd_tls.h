/*
 * httpd_tls.h - TLS for the HTTP server's https:// listeners (httpd_int.h's
 * users only): the certificate and key from files, reloaded when the files
 * change, or from PEM text in memory (an ECS secret's value), and one session
 * per connection on a non-blocking socket.
 *
 * Nothing here waits: the acceptor polls the sockets itself. A session is
 * used by one thread at a time (the acceptor while it reads the request, then
 * the worker that answers), never by two at once.
 */
#ifndef DP_HTTPD_TLS_H
#define DP_HTTPD_TLS_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "errors.h"

/* What a TLS connection costs the server while it reads its request (measured: docs/BENCHMARKS.md). */
#define HTTPD_TLS_CONN_COST ((size_t)48 * 1024)

struct httpd_tls;      /* the certificate, the key and the files they came from */
struct httpd_tls_conn; /* one session on one socket */

struct httpd_tls_files {
	const char *cert, *key, *password; /* PEM files (key NULL: in the cert's file, or cert is PKCS#12); password for an encrypted key or the PKCS#12 */
	const char *cert_name, *key_name;  /* the settings that named them, for messages */
	/* Instead of the files (cert NULL): PEM text holding the chain (leaf first) and an unencrypted key in any
	 * order, borrowed for the call only; pem_name says where it came from, in messages and the log. */
	const char *pem, *pem_name;
};

/*
 * Load the pair (TLS 1.2 at least, forward-secret AEAD ciphers only). DP_EINVAL
 * with em naming the setting and the file when a file cannot be read or does
 * not hold a certificate or key, or the key does not match the certificate;
 * for pem the same, naming pem_name and never a byte of the text. DP_ENOLIB
 * without libssl (dynamic builds). The names are copied.
 */
int httpd_tls_new(const struct httpd_tls_files *f, struct httpd_tls **out, struct err_msg *em);
void httpd_tls_free(struct httpd_tls *t); /* NULL-safe */
/*
 * The acceptor, before a new session (nothing for pem, whose text is gone): at most once a second, whether either
 * file changed (a new inode, size or time: cert-manager's and the kubelet's
 * symlink swap, or a rewrite); if so the pair is loaded again and used for
 * new connections, or, when it does not load, the old one kept and the reason
 * logged (once per change).
 */
void httpd_tls_refresh(struct httpd_tls *t, long long now_ms);

/* A session for a new connection on sock (NULL when OpenSSL cannot make one). */
struct httpd_tls_conn *httpd_tls_conn_new(struct httpd_tls *t, int sock);
/* Send close_notify (not waited for) and free the session; NULL-safe. The socket stays open. */
void httpd_tls_conn_free(struct httpd_tls_conn *c);
/* The handshake, again each time the socket is ready: 1 done, 0 wants the socket readable, 2 writable, -1 failed. */
int httpd_tls_handshake(struct httpd_tls_conn *c);
/* As recv(2) and send(2) on a non-blocking socket: a count, 0 at the end (read), -1 with errno (EAGAIN: poll). */
ssize_t httpd_tls_read(struct httpd_tls_conn *c, void *p, size_t n);
ssize_t httpd_tls_write(struct httpd_tls_conn *c, const void *p, size_t n);
/* Bytes already decrypted and waiting: a poll on the socket does not see them. */
bool httpd_tls_pending(struct httpd_tls_conn *c);

#endif
