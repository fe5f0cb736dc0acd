/*
 * webc_tls.c - TLS for webc (webc_int.h) by OpenSSL's libssl, on a socket
 * webc has connected and polls itself: nothing here waits. libssl, its
 * start, its errors in words and the context's floor (TLS 1.2) are
 * common/tlsbase.c's, shared with the agent's https server: loaded on the
 * first https connection in the dynamic build, linked in the static one.
 *
 * Verification: the peer's chain against one PEM bundle (ca_file, else
 * SSL_CERT_FILE, else Debian's /etc/ssl/certs/ca-certificates.crt, which the
 * image carries), the host name or IP address against the certificate
 * (SSL_set1_host), SNI for names, TLS 1.2 or later; OpenSSL's configuration
 * file is not read, so both builds behave the same.
 */
#include "webc_int.h"

#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "tlsbase.h"

#define SYSTEM_BUNDLE "/etc/ssl/certs/ca-certificates.crt"

static const struct tlsbase_fns *ossl; /* set by webc_tls_ctx_new, before any session */

struct webc_tls_ctx {
	SSL_CTX *ctx;
};

struct webc_tls {
	SSL *ssl;
};

/*
 * OpenSSL writes to the socket with write(2), which raises SIGPIPE when the
 * server has gone: block it on this thread for the call and take a SIGPIPE
 * the call raised, as curl does (sigpipe.h), instead of touching the
 * process's disposition.
 */
struct sigpipe_guard {
	sigset_t old;
	bool was_pending;
};

static void sigpipe_block(struct sigpipe_guard *g)
{
	sigset_t pipe, pending;

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigpending(&pending);
	g->was_pending = sigismember(&pending, SIGPIPE);
	pthread_sigmask(SIG_BLOCK, &pipe, &g->old);
}

static void sigpipe_restore(struct sigpipe_guard *g)
{
	sigset_t pipe, pending;
	struct timespec zero = { 0, 0 };

	sigemptyset(&pipe);
	sigaddset(&pipe, SIGPIPE);
	sigpending(&pending);
	if (!g->was_pending && sigismember(&pending, SIGPIPE))
		(void)sigtimedwait(&pipe, NULL, &zero);
	pthread_sigmask(SIG_SETMASK, &g->old, NULL);
}

int webc_tls_ctx_new(const struct webc_opts *o, struct webc_tls_ctx **out, struct err_msg *em)
{
	const char *bundle = o->ca_file;
	char why[256];
	SSL_CTX *ctx;
	int rc;

	if ((rc = tlsbase_load(&ossl, em)) != 0 || (rc = tlsbase_ctx_new(false, 0, &ctx, em)) != 0)
		return rc;
	if (o->insecure) {
		ossl->SSL_CTX_set_verify(ctx, SSL_VERIFY_NONE, NULL);
	} else {
		if (bundle == NULL && (bundle = getenv("SSL_CERT_FILE")) == NULL)
			bundle = SYSTEM_BUNDLE;
		if (ossl->SSL_CTX_load_verify_locations(ctx, bundle, NULL) != 1) {
			ossl->SSL_CTX_free(ctx);
			return err_set(em, DP_EIO, "cannot load the CA bundle %s: %s", bundle,
				       tlsbase_error(why, sizeof(why)));
		}
		ossl->SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER, NULL);
	}
	*out = mem_zalloc(sizeof(**out));
	(*out)->ctx = ctx;
	return 0;
}

void webc_tls_ctx_free(struct webc_tls_ctx *x)
{
	if (x == NULL)
		return;
	ossl->SSL_CTX_free(x->ctx);
	mem_free(x);
}

static bool is_ip_literal(const char *host)
{
	unsigned char a[16];

	return inet_pton(AF_INET, host, a) == 1 || inet_pton(AF_INET6, host, a) == 1;
}

int webc_tls_new(struct webc_tls_ctx *x, int fd, const char *host, struct webc_tls **out, struct err_msg *em)
{
	char why[256];
	SSL *s = ossl->SSL_new(x->ctx);

	if (s == NULL)
		return err_set(em, DP_EIO, "OpenSSL could not make a session: %s", tlsbase_error(why, sizeof(why)));
	/* SNI for a name only (RFC 6066 3); the name or the address checked against the certificate */
	if (ossl->SSL_set_fd(s, fd) != 1 || ossl->SSL_set1_host(s, host) != 1 ||
	    (!is_ip_literal(host) &&
	     ossl->SSL_ctrl(s, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name, (void *)host) != 1)) {
		ossl->SSL_free(s);
		return err_set(em, DP_EIO, "OpenSSL could not set up a session for %s: %s", host,
			       tlsbase_error(why, sizeof(why)));
	}
	*out = mem_zalloc(sizeof(**out));
	(*out)->ssl = s;
	return 0;
}

void webc_tls_free(struct webc_tls *t)
{
	if (t == NULL)
		return;
	ossl->SSL_free(t->ssl);
	mem_free(t);
}

/* What an SSL_* call's result r means for webc: a WEBC_* code, or DP_EIO with em. */
static long outcome(struct webc_tls *t, int r, const char *doing, struct err_msg *em)
{
	char why[256];
	long v;

	switch (ossl->SSL_get_error(t->ssl, r)) {
	case SSL_ERROR_WANT_READ:
		return WEBC_WANT_READ;
	case SSL_ERROR_WANT_WRITE:
		return WEBC_WANT_WRITE;
	case SSL_ERROR_ZERO_RETURN:
		return 0;
	case SSL_ERROR_SYSCALL:
		ossl->ERR_clear_error();
		return err_set(em, DP_EIO, "TLS %s failed: %s", doing, errno ? strerror(errno) : "connection closed");
	case SSL_ERROR_SSL:
		if (ERR_GET_REASON(ossl->ERR_peek_error()) == SSL_R_UNEXPECTED_EOF_WHILE_READING) {
			ossl->ERR_clear_error();
			return WEBC_EOF_UNCLEAN;
		}
		v = ossl->SSL_get_verify_result(t->ssl);
		if (v != X509_V_OK) {
			ossl->ERR_clear_error();
			return err_set(em, DP_EIO, "the server's certificate is not trusted: %s",
				       ossl->X509_verify_cert_error_string(v));
		}
		return err_set(em, DP_EIO, "TLS %s failed: %s", doing, tlsbase_error(why, sizeof(why)));
	default:
		return err_set(em, DP_EIO, "TLS %s failed: %s", doing, tlsbase_error(why, sizeof(why)));
	}
}

int webc_tls_handshake(struct webc_tls *t, struct err_msg *em)
{
	struct sigpipe_guard g;
	int r;

	ossl->ERR_clear_error();
	errno = 0;
	sigpipe_block(&g);
	r = ossl->SSL_connect(t->ssl);
	sigpipe_restore(&g);
	if (r == 1)
		return 0;
	r = (int)outcome(t, r, "handshake", em);
	return r == 0 || r == WEBC_EOF_UNCLEAN ? err_set(em, DP_EIO, "the server closed the connection in the TLS handshake")
					       : r;
}

long webc_tls_read(struct webc_tls *t, void *p, size_t n, struct err_msg *em)
{
	struct sigpipe_guard g;
	int r;

	ossl->ERR_clear_error();
	errno = 0;
	sigpipe_block(&g);
	r = ossl->SSL_read(t->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
	sigpipe_restore(&g);
	return r > 0 ? r : outcome(t, r, "read", em);
}

long webc_tls_write(struct webc_tls *t, const void *p, size_t n, struct err_msg *em)
{
	struct sigpipe_guard g;
	long r;

	ossl->ERR_clear_error();
	errno = 0;
	sigpipe_block(&g);
	r = ossl->SSL_write(t->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
	sigpipe_restore(&g);
	if (r > 0)
		return r;
	r = outcome(t, (int)r, "write", em);
	return r == 0 || r == WEBC_EOF_UNCLEAN ? err_set(em, DP_EIO, "TLS write failed: the connection was closed") : r;
}
