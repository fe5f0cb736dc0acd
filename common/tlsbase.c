/*
 * tlsbase.c - OpenSSL's table, its start, its errors in words and the
 * contexts' common floor (tlsbase.h), for the TLS client (cloud/webc_tls.c)
 * and the TLS server (http/httpd_tls.c). Compiled twice: here with dlopen,
 * and with TLSBASE_LINKED for the static binary (the Makefile).
 */
#include "tlsbase.h"

#include <stdio.h>

#include "dynlib.h"

static struct tlsbase_fns ossl;

#ifdef TLSBASE_LINKED
#define ASSIGN(fn) ossl.fn = fn;
static int load(struct err_msg *em)
{
	(void)em;
	if (ossl.SSL_new == NULL) {
		TLSBASE_FUNCTIONS(ASSIGN)
	}
	return 0;
}
#else
static const char *const sonames[] = { "libssl.so.3", NULL };
#define SYM(fn) DYNLIB_SYM(fn, ossl.fn),
static const struct dynlib_sym syms[] = { TLSBASE_FUNCTIONS(SYM) };
static struct dynlib ssl_lib = DYNLIB_INIT("libssl (OpenSSL 3)", sonames, syms);
static int load(struct err_msg *em)
{
	return dynlib_load(&ssl_lib, em);
}
#endif

int tlsbase_load(const struct tlsbase_fns **out, struct err_msg *em)
{
	int rc = load(em);

	if (rc != 0)
		return rc;
	if (ossl.OPENSSL_init_ssl(OPENSSL_INIT_NO_LOAD_CONFIG, NULL) != 1)
		return err_set(em, DP_EIO, "OpenSSL could not start");
	*out = &ossl;
	return 0;
}

const char *tlsbase_error(char *out, size_t n)
{
	unsigned long e = ossl.ERR_get_error();

	if (e == 0)
		snprintf(out, n, "no detail from OpenSSL");
	else
		ossl.ERR_error_string_n(e, out, n);
	ossl.ERR_clear_error();
	return out;
}

int tlsbase_ctx_new(bool server, long extra_mode, SSL_CTX **out, struct err_msg *em)
{
	char why[256];
	SSL_CTX *ctx = ossl.SSL_CTX_new(server ? ossl.TLS_server_method() : ossl.TLS_client_method());

	if (ctx == NULL)
		return err_set(em, DP_EIO, "OpenSSL could not start: %s", tlsbase_error(why, sizeof(why)));
	ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, NULL);
	ossl.SSL_CTX_ctrl(ctx, SSL_CTRL_MODE, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER |
			  extra_mode, NULL);
	*out = ctx;
	return 0;
}
