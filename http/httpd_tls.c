/*
 * httpd_tls.c - the server side of TLS for the agent's https:// URLs
 * (httpd_tls.h), by OpenSSL's libssl.
 *
 * libssl, its start, its errors in words and the context's floor (TLS 1.2,
 * partial writes) are common/tlsbase.c's, shared with the egress client
 * (cloud/webc_tls.c): loaded by dlopen in the dynamic ./diagport, so an
 * agent serving only http:// never maps libssl, and linked in the static
 * image build. OpenSSL is there already for egress, so TLS adds little to
 * the image (docs/image.md).
 *
 * Settled once for every listener: TLS 1.2 or 1.3; TLS 1.2 with ECDHE and an
 * AEAD cipher only (Mozilla's "intermediate" list without DHE); no
 * renegotiation, no compression, no session cache or tickets (one request per
 * connection: nothing to resume); buffers released while empty
 * (SSL_MODE_RELEASE_BUFFERS), which is what keeps a connection that waits
 * within HTTPD_TLS_CONN_COST. OpenSSL's configuration file is not read, so
 * both builds behave the same.
 *
 * The certificate files are watched by their identity (device, inode, size,
 * time), checked at most once a second when a connection arrives: the
 * kubelet updates a mounted Secret by swapping the ..data symlink, which
 * gives every file a new inode. A pair that does not load leaves the one in
 * use in place.
 *
 * Or the chain and key come as PEM text (tlsPem: ECS gives a container a
 * secret only as a variable's value), read through a memory BIO into the
 * context once; the text is not kept, and there is nothing to reload.
 */
#include "httpd_tls.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "log.h"
#include "mem.h"
#include "tlsbase.h"

#define RECHECK_MS 1000
#define CIPHERS_TLS12                                                                                              \
	"ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-RSA-AES128-GCM-SHA256:ECDHE-ECDSA-AES256-GCM-SHA384:"                 \
	"ECDHE-RSA-AES256-GCM-SHA384:ECDHE-ECDSA-CHACHA20-POLY1305:ECDHE-RSA-CHACHA20-POLY1305"

static const struct tlsbase_fns *ossl; /* set by httpd_tls_new, before any session */

/* A file as it was when loaded: a change in any of these is a new file. */
struct ident {
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime;
	bool ok;
};

struct httpd_tls {
	char *cert, *key, *password, *cert_name, *key_name; /* cert NULL: from PEM text, never reloaded */
	char *pem_name;
	SSL_CTX *ctx;
	struct ident seen[2]; /* cert, key: as last tried (loaded or refused) */
	long long checked_ms;
};

struct httpd_tls_conn {
	SSL *ssl;
};

static void ident_of(const char *path, struct ident *id)
{
	struct stat st;

	memset(id, 0, sizeof(*id));
	if (stat(path, &st) != 0)
		return;
	*id = (struct ident){ st.st_dev, st.st_ino, st.st_size, st.st_mtim, true };
}

static bool ident_same(const struct ident *a, const struct ident *b)
{
	return a->ok == b->ok && a->dev == b->dev && a->ino == b->ino && a->size == b->size &&
	       a->mtime.tv_sec == b->mtime.tv_sec && a->mtime.tv_nsec == b->mtime.tv_nsec;
}

static int password_cb(char *buf, int size, int rwflag, void *u)
{
	const char *pw = u;
	size_t n = pw ? strlen(pw) : 0;

	(void)rwflag;
	if (n >= (size_t)size)
		return 0;
	memcpy(buf, pw ? pw : "", n);
	return (int)n;
}

/* Whether path can be opened for reading; else em says why, naming the setting. */
static int readable(const char *name, const char *path, struct err_msg *em)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;

	if (fd < 0)
		return err_set(em, DP_EINVAL, "%s %s: %s", name, path, strerror(errno));
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
		close(fd);
		return err_set(em, DP_EINVAL, "%s %s is not a regular file", name, path);
	}
	close(fd);
	return 0;
}

/* Whether path's first bytes are PEM's ("-----BEGIN"); a DER PKCS#12 file begins with a SEQUENCE (0x30). */
static bool is_pem(const char *path)
{
	char head[11] = "";
	FILE *fp = fopen(path, "rbe");
	size_t n = fp ? fread(head, 1, 10, fp) : 0;

	if (fp)
		fclose(fp);
	return n == 10 && memcmp(head, "-----BEGIN", 10) == 0;
}

/* A PKCS#12 (.pfx) file at t->cert, opened with t->password (dotnet-monitor's Path + Password without KeyPath):
 * its certificate, key and CA chain into ctx. */
static int use_pkcs12(const struct httpd_tls *t, SSL_CTX *ctx, struct err_msg *em)
{
	FILE *fp = fopen(t->cert, "rbe");
	PKCS12 *p12 = fp ? ossl->d2i_PKCS12_fp(fp, NULL) : NULL;
	EVP_PKEY *pkey = NULL;
	X509 *cert = NULL, *x;
	STACK_OF(X509) *ca = NULL;
	char why[256];
	int rc = 0;

	if (fp)
		fclose(fp);
	if (p12 == NULL)
		return err_set(em, DP_EINVAL, "%s %s holds neither a PEM certificate nor PKCS#12: %s", t->cert_name,
			       t->cert, tlsbase_error(why, sizeof(why)));
	if (ossl->PKCS12_parse(p12, t->password, &pkey, &cert, &ca) != 1 || cert == NULL || pkey == NULL) {
		rc = err_set(em, DP_EINVAL, "%s %s: the PKCS#12 file does not open with %s, or holds no certificate "
			     "and key: %s", t->cert_name, t->cert, t->password ? "the Password setting" : "no password",
			     tlsbase_error(why, sizeof(why)));
		goto out;
	}
	if (ossl->SSL_CTX_use_certificate(ctx, cert) != 1 || ossl->SSL_CTX_use_PrivateKey(ctx, pkey) != 1) {
		rc = err_set(em, DP_EINVAL, "%s %s: the PKCS#12 file's key does not match its certificate: %s",
			     t->cert_name, t->cert, tlsbase_error(why, sizeof(why)));
		goto out;
	}
	while (ca && (x = ossl->OPENSSL_sk_shift((OPENSSL_STACK *)ca)) != NULL)
		if (ossl->SSL_CTX_ctrl(ctx, SSL_CTRL_EXTRA_CHAIN_CERT, 0, x) != 1) /* takes x */
			ossl->X509_free(x);
out:
	ossl->OPENSSL_sk_free((OPENSSL_STACK *)ca);
	ossl->X509_free(cert);
	ossl->EVP_PKEY_free(pkey);
	ossl->PKCS12_free(p12);
	return rc;
}

/* A context with the settings above and no certificate yet. */
static int new_ctx(SSL_CTX **out, struct err_msg *em)
{
	char why[256];
	SSL_CTX *ctx;
	int rc;

	if ((rc = tlsbase_ctx_new(true, SSL_MODE_RELEASE_BUFFERS, &ctx, em)) != 0)
		return rc;
	ossl->SSL_CTX_ctrl(ctx, SSL_CTRL_SET_SESS_CACHE_MODE, SSL_SESS_CACHE_OFF, NULL);
	ossl->SSL_CTX_set_options(ctx, SSL_OP_NO_RENEGOTIATION | SSL_OP_NO_COMPRESSION | SSL_OP_NO_TICKET |
			       SSL_OP_CIPHER_SERVER_PREFERENCE);
	ossl->SSL_CTX_set_num_tickets(ctx, 0);
	if (ossl->SSL_CTX_set_cipher_list(ctx, CIPHERS_TLS12) != 1) {
		ossl->SSL_CTX_free(ctx);
		return err_set(em, DP_EIO, "OpenSSL refused the cipher list: %s", tlsbase_error(why, sizeof(why)));
	}
	*out = ctx;
	return 0;
}

/* A context holding t's files as they are now. */
static int load_pair(const struct httpd_tls *t, SSL_CTX **out, struct err_msg *em)
{
	const char *key = t->key ? t->key : t->cert, *key_name = t->key ? t->key_name : t->cert_name;
	char why[256];
	SSL_CTX *ctx = NULL;
	int rc;

	if ((rc = readable(t->cert_name, t->cert, em)) != 0 || (rc = readable(key_name, key, em)) != 0 ||
	    (rc = new_ctx(&ctx, em)) != 0)
		return rc;
	ossl->SSL_CTX_set_default_passwd_cb(ctx, password_cb);
	ossl->SSL_CTX_set_default_passwd_cb_userdata(ctx, t->password);
	if (t->key == NULL && !is_pem(t->cert)) {
		if ((rc = use_pkcs12(t, ctx, em)) != 0)
			goto fail;
		*out = ctx;
		return 0;
	}
	/* the key first: a certificate set after it drops a key that is not its own, quietly, and the check below
	 * says so; the other way round the key's own loading fails with OpenSSL's words for it */
	if (ossl->SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1) {
		rc = err_set(em, DP_EINVAL, "%s %s does not hold a PEM private key%s: %s", key_name, key,
			     t->password ? " that the password opens" : " (an encrypted one needs the Password setting)",
			     tlsbase_error(why, sizeof(why)));
		goto fail;
	}
	if (ossl->SSL_CTX_use_certificate_chain_file(ctx, t->cert) != 1) {
		rc = err_set(em, DP_EINVAL, "%s %s does not hold a PEM certificate: %s", t->cert_name, t->cert,
			     tlsbase_error(why, sizeof(why)));
		goto fail;
	}
	if (ossl->SSL_CTX_check_private_key(ctx) != 1) {
		ossl->ERR_clear_error();
		rc = err_set(em, DP_EINVAL, "the key in %s %s does not match the certificate in %s %s", key_name, key,
			     t->cert_name, t->cert);
		goto fail;
	}
	*out = ctx;
	return 0;
fail:
	ossl->SSL_CTX_free(ctx);
	return rc;
}

/* For PEM text: an encrypted key is not opened (and OpenSSL's own callback would ask the terminal). */
static int no_password_cb(char *buf, int size, int rwflag, void *u)
{
	(void)buf;
	(void)size;
	(void)rwflag;
	(void)u;
	return -1;
}

/* A memory BIO over text (read-only, not copied). */
static BIO *text_bio(const char *text)
{
	size_t n = strlen(text);

	return ossl->BIO_new_mem_buf(text, n > INT32_MAX ? INT32_MAX : (int)n);
}

/*
 * The certificates in text, in order, into certs (up to max; *n of them): the blocks that are not
 * certificates (the key) are passed over. DP_EINVAL when one of them does not parse.
 */
#define MAX_CHAIN 16
static int read_certs(const char *text, const char *name, X509 **certs, size_t *n, struct err_msg *em)
{
	BIO *b = text_bio(text);
	X509 *x;
	unsigned long e;
	char why[256];

	*n = 0;
	if (b == NULL)
		return err_set(em, DP_EIO, "OpenSSL could not read %s: %s", name, tlsbase_error(why, sizeof(why)));
	ossl->ERR_clear_error();
	while ((x = ossl->PEM_read_bio_X509(b, NULL, no_password_cb, NULL)) != NULL) {
		if (*n == MAX_CHAIN) {
			ossl->X509_free(x);
			ossl->BIO_free(b);
			return err_set(em, DP_EINVAL, "%s holds more than %d certificates; it takes the server's "
				       "certificate and the intermediates that lead to its CA", name, MAX_CHAIN);
		}
		certs[(*n)++] = x;
	}
	ossl->BIO_free(b);
	e = ossl->ERR_peek_last_error(); /* the end of the text, or a block that is not a certificate */
	if (e != 0 && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE))
		return err_set(em, DP_EINVAL, "%s: certificate %zu does not parse: %s", name, *n + 1,
			       tlsbase_error(why, sizeof(why)));
	ossl->ERR_clear_error();
	if (*n == 0)
		return err_set(em, DP_EINVAL, "%s holds no PEM certificate (-----BEGIN CERTIFICATE-----); it takes the "
			       "certificate chain, the server's first, and its unencrypted private key", name);
	return 0;
}

/*
 * PEM text (tlsPem) into ctx: the first certificate is the server's, the others its chain, sent in their
 * order; the first private key is its key. Neither OpenSSL's words nor ours quote the text.
 */
static int use_pem(SSL_CTX *ctx, const char *text, const char *name, struct err_msg *em)
{
	X509 *certs[MAX_CHAIN] = { NULL };
	EVP_PKEY *pkey = NULL;
	size_t n = 0;
	char why[256];
	BIO *b;
	int rc;

	if ((rc = read_certs(text, name, certs, &n, em)) != 0)
		goto out;
	if ((b = text_bio(text)) == NULL) {
		rc = err_set(em, DP_EIO, "OpenSSL could not read %s: %s", name, tlsbase_error(why, sizeof(why)));
		goto out;
	}
	pkey = ossl->PEM_read_bio_PrivateKey(b, NULL, no_password_cb, NULL);
	ossl->BIO_free(b);
	if (pkey == NULL && strstr(text, "PRIVATE KEY-----") == NULL)
		rc = err_set(em, DP_EINVAL, "%s holds no PEM private key (-----BEGIN PRIVATE KEY-----, or RSA or EC "
			     "PRIVATE KEY); it takes the server's unencrypted key beside its certificate", name);
	else if (pkey == NULL && (strstr(text, "ENCRYPTED PRIVATE KEY-----") || strstr(text, "Proc-Type: 4,ENCRYPTED")))
		rc = err_set(em, DP_EINVAL, "%s holds an encrypted private key; it takes an unencrypted one (the text "
			     "is the secret: there is no password to give)", name);
	else if (pkey == NULL)
		rc = err_set(em, DP_EINVAL, "the private key in %s does not parse: %s", name, tlsbase_error(why, sizeof(why)));
	if (pkey == NULL)
		goto out;
	/* the key first, as load_pair does: a certificate that is not the key's drops it, and the check says so */
	if (ossl->SSL_CTX_use_PrivateKey(ctx, pkey) != 1 || ossl->SSL_CTX_use_certificate(ctx, certs[0]) != 1) {
		rc = err_set(em, DP_EINVAL, "%s: OpenSSL does not take its certificate or key: %s", name,
			     tlsbase_error(why, sizeof(why)));
		goto out;
	}
	if (ossl->SSL_CTX_check_private_key(ctx) != 1) {
		ossl->ERR_clear_error();
		rc = err_set(em, DP_EINVAL, "the private key in %s does not match its first certificate (the server's, "
			     "which comes first of the certificates)", name);
		goto out;
	}
	for (size_t i = 1; i < n; i++)
		if (ossl->SSL_CTX_ctrl(ctx, SSL_CTRL_CHAIN_CERT, 1, certs[i]) != 1) { /* add1: a reference of its own */
			rc = err_set(em, DP_EINVAL, "%s: OpenSSL does not take certificate %zu into the chain: %s", name,
				     i + 1, tlsbase_error(why, sizeof(why)));
			goto out;
		}
out:
	for (size_t i = 0; i < n; i++)
		ossl->X509_free(certs[i]);
	ossl->EVP_PKEY_free(pkey); /* NULL-safe; the context holds its own reference */
	return rc;
}

/* The serial number of ctx's certificate in hex, into out. */
static void serial_of(SSL_CTX *ctx, char *out, size_t n)
{
	X509 *x = ossl->SSL_CTX_get0_certificate(ctx);
	BIGNUM *bn = x ? ossl->ASN1_INTEGER_to_BN(ossl->X509_get_serialNumber(x), NULL) : NULL;
	char *hex = bn ? ossl->BN_bn2hex(bn) : NULL;

	snprintf(out, n, "%s", hex ? hex : "?");
	if (hex)
		ossl->CRYPTO_free(hex, __FILE__, __LINE__);
	ossl->BN_free(bn);
}

int httpd_tls_new(const struct httpd_tls_files *f, struct httpd_tls **out, struct err_msg *em)
{
	struct httpd_tls *t;
	char serial[128];
	int rc;

	if ((rc = tlsbase_load(&ossl, em)) != 0)
		return rc;
	t = mem_zalloc(sizeof(*t));
	if (f->pem) {
		t->pem_name = mem_strdup(f->pem_name);
		if ((rc = new_ctx(&t->ctx, em)) != 0 || (rc = use_pem(t->ctx, f->pem, t->pem_name, em)) != 0) {
			httpd_tls_free(t);
			return rc;
		}
	} else {
		t->cert = mem_strdup(f->cert);
		t->key = f->key ? mem_strdup(f->key) : NULL;
		t->password = f->password ? mem_strdup(f->password) : NULL;
		t->cert_name = mem_strdup(f->cert_name);
		t->key_name = mem_strdup(f->key_name);
		ident_of(t->cert, &t->seen[0]);
		ident_of(t->key ? t->key : t->cert, &t->seen[1]);
		if ((rc = load_pair(t, &t->ctx, em)) != 0) {
			httpd_tls_free(t);
			return rc;
		}
	}
	serial_of(t->ctx, serial, sizeof(serial));
	log_info("tls certificate loaded", LOG_STR("event", "tls-certificate"),
		 LOG_STR("certificate", t->cert ? t->cert : t->pem_name), LOG_STR("serial", serial));
	*out = t;
	return 0;
}

void httpd_tls_free(struct httpd_tls *t)
{
	if (t == NULL)
		return;
	if (t->ctx)
		ossl->SSL_CTX_free(t->ctx);
	if (t->password)
		mem_wipe(t->password, strlen(t->password));
	free(t->cert);
	free(t->key);
	free(t->password);
	free(t->cert_name);
	free(t->key_name);
	free(t->pem_name);
	free(t);
}

void httpd_tls_refresh(struct httpd_tls *t, long long now_ms)
{
	struct ident now[2];
	struct err_msg em;
	char serial[128];
	SSL_CTX *ctx = NULL;

	if (t->cert == NULL || now_ms - t->checked_ms < RECHECK_MS) /* PEM text: an ECS task gets it once, at start */
		return;
	t->checked_ms = now_ms;
	ident_of(t->cert, &now[0]);
	ident_of(t->key ? t->key : t->cert, &now[1]);
	if (ident_same(&now[0], &t->seen[0]) && ident_same(&now[1], &t->seen[1]))
		return;
	t->seen[0] = now[0];
	t->seen[1] = now[1];
	if (load_pair(t, &ctx, &em) != 0) {
		log_warn("tls certificate not reloaded", LOG_STR("event", "tls-reload-failed"),
			 LOG_STR("reason", em.text), LOG_STR("kept", "the certificate in use"));
		return;
	}
	ossl->SSL_CTX_free(t->ctx); /* sessions still open hold their own reference */
	t->ctx = ctx;
	serial_of(ctx, serial, sizeof(serial));
	log_info("tls certificate reloaded", LOG_STR("event", "tls-reloaded"), LOG_STR("certificate", t->cert),
		 LOG_STR("serial", serial));
}

struct httpd_tls_conn *httpd_tls_conn_new(struct httpd_tls *t, int sock)
{
	SSL *s = ossl->SSL_new(t->ctx);
	struct httpd_tls_conn *c;

	if (s == NULL || ossl->SSL_set_fd(s, sock) != 1) {
		ossl->ERR_clear_error();
		if (s)
			ossl->SSL_free(s);
		return NULL;
	}
	c = mem_zalloc(sizeof(*c));
	c->ssl = s;
	return c;
}

void httpd_tls_conn_free(struct httpd_tls_conn *c)
{
	if (c == NULL)
		return;
	ossl->SSL_shutdown(c->ssl); /* close_notify, if the socket takes it now; the answer's end is already framed */
	ossl->ERR_clear_error();
	ossl->SSL_free(c->ssl);
	free(c);
}

/* What a failed SSL_* call means: -1 with errno EAGAIN (poll first), 0 (the peer closed), else -1 with EIO. */
static ssize_t outcome(struct httpd_tls_conn *c, int r)
{
	int e = ossl->SSL_get_error(c->ssl, r);

	ossl->ERR_clear_error();
	if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
		errno = EAGAIN;
		return -1;
	}
	if (e == SSL_ERROR_ZERO_RETURN)
		return 0;
	errno = EIO;
	return -1;
}

int httpd_tls_handshake(struct httpd_tls_conn *c)
{
	int r, e;

	ossl->ERR_clear_error();
	r = ossl->SSL_accept(c->ssl);
	if (r == 1)
		return 1;
	e = ossl->SSL_get_error(c->ssl, r);
	ossl->ERR_clear_error();
	return e == SSL_ERROR_WANT_READ ? 0 : e == SSL_ERROR_WANT_WRITE ? 2 : -1;
}

ssize_t httpd_tls_read(struct httpd_tls_conn *c, void *p, size_t n)
{
	int r;

	ossl->ERR_clear_error();
	r = ossl->SSL_read(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
	if (r > 0)
		return r;
	r = (int)outcome(c, r);
	return r == 0 || errno != EIO ? r : 0; /* an unclean close ends the request as a clean one does */
}

ssize_t httpd_tls_write(struct httpd_tls_conn *c, const void *p, size_t n)
{
	int r;

	if (n == 0)
		return 0;
	ossl->ERR_clear_error();
	r = ossl->SSL_write(c->ssl, p, n > INT32_MAX ? INT32_MAX : (int)n);
	if (r > 0)
		return r;
	if (outcome(c, r) == 0)
		errno = EPIPE;
	return -1;
}

bool httpd_tls_pending(struct httpd_tls_conn *c)
{
	return ossl->SSL_pending(c->ssl) > 0;
}
