/*
 * tlsbase.h - what both ends of diagport's TLS share (the egress and AWS
 * client, cloud/webc_tls.c; the agent's https server, http/httpd_tls.c):
 * OpenSSL's libssl, reached through one table of its functions, started the
 * same way, its error queue put into words the same way, and a context with
 * the floor both ends hold (TLS 1.2, partial writes).
 *
 * How libssl gets in differs by build, and the table serves both. The
 * dynamic ./diagport loads libssl.so.3 with dlopen (dynlib.h) the first time
 * either end needs TLS, so an agent serving http:// and making no egress
 * never maps it. The static binary (the image's, FROM scratch) cannot
 * dlopen: the Makefile compiles tlsbase.c a second time with TLSBASE_LINKED,
 * which fills the table with the linked functions, and puts that object
 * before libdiagport.a, so the archive's dlopen variant is never pulled in.
 * The types come from OpenSSL's headers either way, so every call is checked
 * by the compiler. OpenSSL's configuration file is not read, so both builds
 * behave the same.
 *
 * Ownership: the table is the process's (borrowed, valid for the process);
 * a context made here is the caller's (SSL_CTX_free through the table).
 */
#ifndef DP_TLSBASE_H
#define DP_TLSBASE_H

#include <openssl/bio.h>
#include <openssl/bn.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/pkcs12.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <openssl/x509_vfy.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

/* Every OpenSSL function either end uses: X(name). libcrypto's are reached through libssl's handle (its dependency). */
#define TLSBASE_FUNCTIONS(X)                                                                                       \
	X(OPENSSL_init_ssl)                                                                                        \
	X(TLS_client_method)                                                                                       \
	X(TLS_server_method)                                                                                       \
	X(SSL_CTX_new)                                                                                             \
	X(SSL_CTX_free)                                                                                            \
	X(SSL_CTX_ctrl)                                                                                            \
	X(SSL_CTX_set_verify)                                                                                      \
	X(SSL_CTX_load_verify_locations)                                                                           \
	X(SSL_CTX_set_options)                                                                                     \
	X(SSL_CTX_set_cipher_list)                                                                                 \
	X(SSL_CTX_set_num_tickets)                                                                                 \
	X(SSL_CTX_set_default_passwd_cb)                                                                           \
	X(SSL_CTX_set_default_passwd_cb_userdata)                                                                  \
	X(SSL_CTX_use_certificate_chain_file)                                                                      \
	X(SSL_CTX_use_PrivateKey_file)                                                                             \
	X(SSL_CTX_check_private_key)                                                                               \
	X(SSL_CTX_get0_certificate)                                                                                \
	X(SSL_CTX_use_certificate)                                                                                 \
	X(SSL_CTX_use_PrivateKey)                                                                                  \
	X(SSL_new)                                                                                                 \
	X(SSL_free)                                                                                                \
	X(SSL_ctrl)                                                                                                \
	X(SSL_set_fd)                                                                                              \
	X(SSL_set1_host)                                                                                           \
	X(SSL_connect)                                                                                             \
	X(SSL_accept)                                                                                              \
	X(SSL_read)                                                                                                \
	X(SSL_write)                                                                                               \
	X(SSL_shutdown)                                                                                            \
	X(SSL_pending)                                                                                             \
	X(SSL_get_error)                                                                                           \
	X(SSL_get_verify_result)                                                                                   \
	X(BIO_new_mem_buf)                                                                                         \
	X(BIO_free)                                                                                                \
	X(PEM_read_bio_X509)                                                                                       \
	X(PEM_read_bio_PrivateKey)                                                                                 \
	X(d2i_PKCS12_fp)                                                                                           \
	X(PKCS12_parse)                                                                                            \
	X(PKCS12_free)                                                                                             \
	X(X509_free)                                                                                               \
	X(X509_verify_cert_error_string)                                                                           \
	X(X509_get_serialNumber)                                                                                   \
	X(EVP_PKEY_free)                                                                                           \
	X(OPENSSL_sk_shift)                                                                                        \
	X(OPENSSL_sk_free)                                                                                         \
	X(ASN1_INTEGER_to_BN)                                                                                      \
	X(BN_bn2hex)                                                                                               \
	X(BN_free)                                                                                                 \
	X(CRYPTO_free)                                                                                             \
	X(ERR_get_error)                                                                                           \
	X(ERR_peek_error)                                                                                          \
	X(ERR_peek_last_error)                                                                                     \
	X(ERR_error_string_n)                                                                                      \
	X(ERR_clear_error)

#define TLSBASE_FIELD(fn) __typeof__(fn) *fn; // NOLINT(bugprone-macro-parentheses): fn names a member
struct tlsbase_fns {
	TLSBASE_FUNCTIONS(TLSBASE_FIELD)
};

/*
 * libssl loaded (once per process) and started, its table in *out. 0;
 * DP_ENOLIB with em when libssl is missing (dynamic builds), DP_EIO when it
 * does not start.
 */
int tlsbase_load(const struct tlsbase_fns **out, struct err_msg *em);

/* OpenSSL's first queued error as text into out (n bytes), the queue emptied; out is returned. */
const char *tlsbase_error(char *out, size_t n);

/*
 * A new context for a server (TLS_server_method) or a client: TLS 1.2 at
 * least, partial writes and a moving write buffer (non-blocking sockets),
 * plus extra_mode (SSL_MODE_*). 0, or DP_EIO with em. tlsbase_load first.
 */
int tlsbase_ctx_new(bool server, long extra_mode, SSL_CTX **out, struct err_msg *em);

#endif
