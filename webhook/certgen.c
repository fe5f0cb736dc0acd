/*
 * certgen.c - the webhook's CA and serving certificates, with GnuTLS (certgen.h).
 *
 * GnuTLS is loaded at run time (dynlib.h), as libmicrohttpd is in server_mhd.c,
 * into a table of function pointers whose types come from gnutls/x509.h
 * and gnutls/abstract.h (__typeof__ of each declaration), so every call is
 * checked by the compiler as if linked, and the Makefile keeps gnutls out of
 * the linked libraries. Exports go into buffers of the exact size GnuTLS
 * asks for, so a private key has one copy in our memory, wiped when freed;
 * GnuTLS wipes its own key structures in gnutls_x509_privkey_deinit().
 *
 * The checks are what `diagport webhook certs` decides on: each failing one
 * gives a sentence saying what is wrong, which becomes the reason printed
 * for a renewal.
 */
#include "certgen.h"

#include <gnutls/abstract.h>
#include <gnutls/crypto.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dynlib.h"
#include "mem.h"

#define SONAME "libgnutls.so.30"
#define BUNDLE_MAX 8     /* CA certificates kept from a bundle */
#define SKEW_S 3600      /* certificates are valid from an hour ago: nodes' clocks differ */
#define DAY_S 86400
#define NAME_MAX_LEN 253 /* a DNS name */

#define FUNCS(X)                                                                                                   \
	X(strerror)                                                                                                \
	X(rnd)                                                                                                     \
	X(x509_privkey_init)                                                                                       \
	X(x509_privkey_deinit)                                                                                     \
	X(x509_privkey_generate)                                                                                   \
	X(x509_privkey_import2)                                                                                    \
	X(x509_privkey_export_pkcs8)                                                                               \
	X(x509_privkey_get_key_id)                                                                                 \
	X(privkey_init)                                                                                            \
	X(privkey_deinit)                                                                                          \
	X(privkey_import_x509)                                                                                     \
	X(x509_crt_init)                                                                                           \
	X(x509_crt_deinit)                                                                                         \
	X(x509_crt_import)                                                                                         \
	X(x509_crt_list_import)                                                                                    \
	X(x509_crt_export)                                                                                         \
	X(x509_crt_set_version)                                                                                    \
	X(x509_crt_set_serial)                                                                                     \
	X(x509_crt_set_activation_time)                                                                            \
	X(x509_crt_set_expiration_time)                                                                            \
	X(x509_crt_set_dn)                                                                                         \
	X(x509_crt_set_key)                                                                                        \
	X(x509_crt_set_basic_constraints)                                                                          \
	X(x509_crt_set_key_usage)                                                                                  \
	X(x509_crt_set_subject_alt_name)                                                                           \
	X(x509_crt_set_key_purpose_oid)                                                                            \
	X(x509_crt_set_subject_key_id)                                                                             \
	X(x509_crt_set_authority_key_id)                                                                           \
	X(x509_crt_get_key_id)                                                                                     \
	X(x509_crt_get_subject_key_id)                                                                             \
	X(x509_crt_privkey_sign)                                                                                   \
	X(x509_crt_get_activation_time)                                                                            \
	X(x509_crt_get_expiration_time)                                                                            \
	X(x509_crt_get_basic_constraints)                                                                          \
	X(x509_crt_get_key_usage)                                                                                  \
	X(x509_crt_get_subject_alt_name)                                                                           \
	X(x509_crt_get_key_purpose_oid)                                                                            \
	X(x509_crt_verify)

#define DECLARE(n) __typeof__(&gnutls_##n)(n);
static struct {
	FUNCS(DECLARE)
} gt;
#define SYM(n) DYNLIB_SYM(gnutls_##n, gt.n),
static const struct dynlib_sym syms[] = { FUNCS(SYM) };
static const char *const sonames[] = { SONAME, NULL };
static struct dynlib gnutls_lib = DYNLIB_INIT("GnuTLS", sonames, syms);

static int ready(struct err_msg *em)
{
	return dynlib_load(&gnutls_lib, em);
}

void certgen_pair_free(struct certgen_pair *p)
{
	if (p->key)
		mem_wipe(p->key, p->key_len);
	free(p->key);
	free(p->cert);
	memset(p, 0, sizeof(*p));
}

static void when(time_t t, char *out, size_t n)
{
	struct tm tm;

	if (gmtime_r(&t, &tm) == NULL || strftime(out, n, "%Y-%m-%d %H:%M UTC", &tm) == 0)
		snprintf(out, n, "@%lld", (long long)t);
}

static gnutls_datum_t datum(const char *p, size_t n)
{
	gnutls_datum_t d = { (unsigned char *)p, (unsigned int)n };

	return d;
}

/* The first certificate of a PEM text. 0 or a GnuTLS error; *crt is set either way (deinit it). */
static int import_crt(gnutls_x509_crt_t *crt, const char *pem, size_t len)
{
	gnutls_datum_t d = datum(pem, len);
	int r;

	*crt = NULL;
	if (len > 1 << 20)
		return GNUTLS_E_BASE64_DECODING_ERROR;
	if ((r = gt.x509_crt_init(crt)) < 0)
		return r;
	return gt.x509_crt_import(*crt, &d, GNUTLS_X509_FMT_PEM);
}

static int import_key(gnutls_x509_privkey_t *key, const char *pem, size_t len)
{
	gnutls_datum_t d = datum(pem, len);
	int r;

	*key = NULL;
	if (len > 1 << 20)
		return GNUTLS_E_BASE64_DECODING_ERROR;
	if ((r = gt.x509_privkey_init(key)) < 0)
		return r;
	return gt.x509_privkey_import2(*key, &d, GNUTLS_X509_FMT_PEM, NULL, 0);
}

/* PEM of a certificate, in an allocation of the size GnuTLS asks for. */
static int export_crt(gnutls_x509_crt_t crt, char **out, size_t *len)
{
	size_t n = 0;
	char *p;
	int r = gt.x509_crt_export(crt, GNUTLS_X509_FMT_PEM, NULL, &n);

	if (r != GNUTLS_E_SHORT_MEMORY_BUFFER)
		return r < 0 ? r : GNUTLS_E_INTERNAL_ERROR;
	p = mem_alloc(n + 1);
	if ((r = gt.x509_crt_export(crt, GNUTLS_X509_FMT_PEM, p, &n)) < 0) {
		free(p);
		return r;
	}
	p[n] = '\0';
	*out = p;
	*len = strlen(p);
	return 0;
}

static int export_key(gnutls_x509_privkey_t key, char **out, size_t *len)
{
	size_t n = 0;
	char *p;
	int r = gt.x509_privkey_export_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, NULL, &n);

	if (r != GNUTLS_E_SHORT_MEMORY_BUFFER)
		return r < 0 ? r : GNUTLS_E_INTERNAL_ERROR;
	p = mem_alloc(n + 1);
	if ((r = gt.x509_privkey_export_pkcs8(key, GNUTLS_X509_FMT_PEM, NULL, GNUTLS_PKCS_PLAIN, p, &n)) < 0) {
		mem_wipe(p, n + 1);
		free(p);
		return r;
	}
	p[n] = '\0';
	*out = p;
	*len = strlen(p);
	return 0;
}

static bool cn_ok(const char *cn)
{
	size_t n = strlen(cn);

	if (n == 0 || n > 64) /* ub-common-name */
		return false;
	for (const char *c = cn; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') || (*c >= '0' && *c <= '9') || *c == '-' ||
		      *c == '.' || *c == '@'))
			return false;
	return true;
}

static int check_spec(const struct certgen_spec *s, struct err_msg *em)
{
	if (s->cn == NULL || !cn_ok(s->cn))
		return err_set(em, DP_EINVAL, "certificate name '%s' is not 1 to 64 letters, digits, '-', '.', '@'",
			       s->cn ? s->cn : "(null)");
	if (s->days < 1 || s->days > 36500)
		return err_set(em, DP_EINVAL, "a validity of %d days is not between 1 and 36500", s->days);
	for (size_t i = 0; i < s->n_dns; i++)
		if (strlen(s->dns[i]) == 0 || strlen(s->dns[i]) > NAME_MAX_LEN)
			return err_set(em, DP_EINVAL, "DNS name '%s' is empty or too long", s->dns[i]);
	return 0;
}

/* What every certificate made here has: version 3, a random serial, the validity, the subject, the key. */
static int fill(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key, const struct certgen_spec *s, time_t not_after)
{
	unsigned char serial[16], id[64];
	size_t idlen = sizeof(id);
	char dn[80];
	int r;

	if ((r = gt.rnd(GNUTLS_RND_NONCE, serial, sizeof(serial))) < 0)
		return r;
	serial[0] = (unsigned char)((serial[0] & 0x7f) | 0x40); /* positive, and all 16 bytes significant */
	snprintf(dn, sizeof(dn), "CN=%s", s->cn);
	if ((r = gt.x509_crt_set_version(crt, 3)) < 0 || (r = gt.x509_crt_set_serial(crt, serial, sizeof(serial))) < 0 ||
	    (r = gt.x509_crt_set_activation_time(crt, s->now - SKEW_S)) < 0 ||
	    (r = gt.x509_crt_set_expiration_time(crt, not_after)) < 0 ||
	    (r = gt.x509_crt_set_dn(crt, dn, NULL)) < 0 || (r = gt.x509_crt_set_key(crt, key)) < 0 ||
	    (r = gt.x509_privkey_get_key_id(key, GNUTLS_KEYID_USE_SHA1, id, &idlen)) < 0)
		return r;
	return gt.x509_crt_set_subject_key_id(crt, id, idlen);
}

static int new_key(gnutls_x509_privkey_t *key)
{
	int r;

	*key = NULL;
	if ((r = gt.x509_privkey_init(key)) < 0)
		return r;
	return gt.x509_privkey_generate(*key, GNUTLS_PK_ECDSA, GNUTLS_CURVE_TO_BITS(GNUTLS_ECC_CURVE_SECP256R1), 0);
}

/* Sign crt with issuer's key (crt itself as the issuer for a CA), then export the pair. */
static int sign_export(gnutls_x509_crt_t crt, gnutls_x509_crt_t issuer, gnutls_x509_privkey_t issuer_key,
		       gnutls_x509_privkey_t key, struct certgen_pair *out)
{
	gnutls_privkey_t signer = NULL;
	struct certgen_pair p = { 0 };
	int r;

	if ((r = gt.privkey_init(&signer)) < 0)
		return r;
	if ((r = gt.privkey_import_x509(signer, issuer_key, 0)) >= 0 &&
	    (r = gt.x509_crt_privkey_sign(crt, issuer, signer, GNUTLS_DIG_SHA256, 0)) >= 0 &&
	    (r = export_crt(crt, &p.cert, &p.cert_len)) >= 0)
		r = export_key(key, &p.key, &p.key_len);
	gt.privkey_deinit(signer); /* before issuer_key, which it borrows */
	if (r < 0) {
		certgen_pair_free(&p);
		return r;
	}
	*out = p;
	return 0;
}

int certgen_ca(const struct certgen_spec *spec, struct certgen_pair *out, struct err_msg *em)
{
	gnutls_x509_privkey_t key = NULL;
	gnutls_x509_crt_t crt = NULL;
	const char *step;
	int r, rc;

	if ((rc = ready(em)) != 0 || (rc = check_spec(spec, em)) != 0)
		return rc;
	step = "making an ECDSA P-256 key";
	if ((r = new_key(&key)) < 0)
		goto out;
	step = "making the CA certificate";
	if ((r = gt.x509_crt_init(&crt)) < 0 || (r = fill(crt, key, spec, spec->now + (time_t)spec->days * DAY_S)) < 0 ||
	    (r = gt.x509_crt_set_basic_constraints(crt, 1, 0)) < 0 || /* it signs serving certificates, no other CA */
	    (r = gt.x509_crt_set_key_usage(crt, GNUTLS_KEY_KEY_CERT_SIGN | GNUTLS_KEY_CRL_SIGN)) < 0)
		goto out;
	step = "signing the CA certificate";
	r = sign_export(crt, crt, key, key, out);
out:
	if (crt)
		gt.x509_crt_deinit(crt);
	if (key)
		gt.x509_privkey_deinit(key);
	return r < 0 ? err_set(em, DP_ECRYPTO, "GnuTLS failed %s: %s", step, gt.strerror(r)) : 0;
}

int certgen_serving(const struct certgen_spec *spec, const struct certgen_pair *ca, struct certgen_pair *out,
		    struct err_msg *em)
{
	gnutls_x509_privkey_t key = NULL, ca_key = NULL;
	gnutls_x509_crt_t crt = NULL, ca_crt = NULL;
	unsigned char id[64];
	size_t idlen = sizeof(id);
	unsigned int critical;
	time_t not_after = spec->now + (time_t)spec->days * DAY_S, ca_end;
	const char *step;
	int r, rc;

	if ((rc = ready(em)) != 0 || (rc = check_spec(spec, em)) != 0)
		return rc;
	step = "reading the CA";
	if ((r = import_crt(&ca_crt, ca->cert, ca->cert_len)) < 0 || (r = import_key(&ca_key, ca->key, ca->key_len)) < 0)
		goto out;
	ca_end = gt.x509_crt_get_expiration_time(ca_crt);
	if (ca_end != (time_t)-1 && not_after > ca_end)
		not_after = ca_end; /* a certificate never outlives its CA */
	step = "making an ECDSA P-256 key";
	if ((r = new_key(&key)) < 0)
		goto out;
	step = "making the serving certificate";
	if ((r = gt.x509_crt_init(&crt)) < 0 || (r = fill(crt, key, spec, not_after)) < 0 ||
	    (r = gt.x509_crt_set_basic_constraints(crt, 0, -1)) < 0 ||
	    (r = gt.x509_crt_set_key_usage(crt, GNUTLS_KEY_DIGITAL_SIGNATURE)) < 0 ||
	    (r = gt.x509_crt_set_key_purpose_oid(crt, GNUTLS_KP_TLS_WWW_SERVER, 0)) < 0)
		goto out;
	for (size_t i = 0; i < spec->n_dns; i++)
		if ((r = gt.x509_crt_set_subject_alt_name(crt, GNUTLS_SAN_DNSNAME, spec->dns[i],
							   (unsigned int)strlen(spec->dns[i]), GNUTLS_FSAN_APPEND)) < 0)
			goto out;
	if (gt.x509_crt_get_subject_key_id(ca_crt, id, &idlen, &critical) >= 0 &&
	    (r = gt.x509_crt_set_authority_key_id(crt, id, idlen)) < 0)
		goto out;
	step = "signing the serving certificate";
	r = sign_export(crt, ca_crt, ca_key, key, out);
out:
	if (crt)
		gt.x509_crt_deinit(crt);
	if (key)
		gt.x509_privkey_deinit(key);
	if (ca_crt)
		gt.x509_crt_deinit(ca_crt);
	if (ca_key)
		gt.x509_privkey_deinit(ca_key);
	return r < 0 ? err_set(em, DP_ECRYPTO, "GnuTLS failed %s: %s", step, gt.strerror(r)) : 0;
}

/* Valid at now? 0, or DP_EINVAL with em naming `what`. */
static int check_time(gnutls_x509_crt_t crt, const char *what, time_t now, time_t *not_after, struct err_msg *em)
{
	time_t nb = gt.x509_crt_get_activation_time(crt), na = gt.x509_crt_get_expiration_time(crt);
	char t[40];

	if (nb == (time_t)-1 || na == (time_t)-1)
		return err_set(em, DP_EINVAL, "%s has no readable validity period", what);
	if (now < nb) {
		when(nb, t, sizeof(t));
		return err_set(em, DP_EINVAL, "%s is not valid before %s", what, t);
	}
	if (now >= na) {
		when(na, t, sizeof(t));
		return err_set(em, DP_EINVAL, "%s expired on %s", what, t);
	}
	*not_after = na;
	return 0;
}

static bool key_matches(gnutls_x509_crt_t crt, gnutls_x509_privkey_t key)
{
	unsigned char a[64], b[64];
	size_t na = sizeof(a), nb = sizeof(b);

	return gt.x509_crt_get_key_id(crt, GNUTLS_KEYID_USE_SHA256, a, &na) >= 0 &&
	       gt.x509_privkey_get_key_id(key, GNUTLS_KEYID_USE_SHA256, b, &nb) >= 0 && na == nb && memcmp(a, b, na) == 0;
}

/* basicConstraints CA:TRUE, and keyCertSign when keyUsage is there. */
static bool is_ca(gnutls_x509_crt_t crt)
{
	unsigned int critical = 0, ca = 0, usage = 0;
	int pathlen = 0, r;

	if (gt.x509_crt_get_basic_constraints(crt, &critical, &ca, &pathlen) < 0 || !ca)
		return false;
	r = gt.x509_crt_get_key_usage(crt, &usage, &critical);
	return r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE || (r >= 0 && (usage & GNUTLS_KEY_KEY_CERT_SIGN));
}

/* Does crt's signature verify with issuer's key (times not looked at: check_time says those)? */
static bool signed_by(gnutls_x509_crt_t crt, gnutls_x509_crt_t issuer)
{
	unsigned int status = 0;

	return gt.x509_crt_verify(crt, &issuer, 1, GNUTLS_VERIFY_DISABLE_TIME_CHECKS, &status) >= 0 && status == 0;
}

int certgen_check_ca(const char *ca_pem, size_t ca_len, const char *key, size_t key_len, time_t now,
		     time_t *not_after, struct err_msg *em)
{
	gnutls_x509_crt_t crt = NULL;
	gnutls_x509_privkey_t k = NULL;
	time_t na = 0;
	int r, rc;

	if ((rc = ready(em)) != 0)
		return rc;
	if ((r = import_crt(&crt, ca_pem, ca_len)) < 0) {
		rc = err_set(em, DP_EINVAL, "ca.crt holds no PEM certificate (%s)", gt.strerror(r));
	} else if (!is_ca(crt)) {
		rc = err_set(em, DP_EINVAL, "the certificate in ca.crt is not a CA (basicConstraints CA:TRUE, keyCertSign)");
	} else if (!signed_by(crt, crt)) {
		rc = err_set(em, DP_EINVAL, "the CA in ca.crt is not self-signed (its signature does not verify with its "
					    "own key)");
	} else if ((rc = check_time(crt, "the CA", now, &na, em)) != 0) {
		/* em says it */
	} else if (key && (r = import_key(&k, key, key_len)) < 0) {
		rc = err_set(em, DP_EINVAL, "ca.key holds no PEM private key (%s)", gt.strerror(r));
	} else if (key && !key_matches(crt, k)) {
		rc = err_set(em, DP_EINVAL, "ca.key is not the key of the CA in ca.crt");
	}
	if (k)
		gt.x509_privkey_deinit(k);
	if (crt)
		gt.x509_crt_deinit(crt);
	if (rc == 0)
		*not_after = na;
	return rc;
}

/* Are crt's subjectAltNames exactly the DNS names dns[0..n)? */
static int check_names(gnutls_x509_crt_t crt, const char *const *dns, size_t n, struct err_msg *em)
{
	bool seen[16] = { false };
	char name[NAME_MAX_LEN + 2];
	unsigned int critical;

	if (n > sizeof(seen) / sizeof(seen[0]))
		return err_set(em, DP_EINVAL, "more than 16 DNS names asked for");
	for (unsigned i = 0;; i++) {
		size_t size = sizeof(name) - 1;
		int r = gt.x509_crt_get_subject_alt_name(crt, i, name, &size, &critical);
		size_t j;

		if (r == GNUTLS_E_REQUESTED_DATA_NOT_AVAILABLE)
			break;
		if (r != GNUTLS_SAN_DNSNAME)
			return err_set(em, DP_EINVAL, "tls.crt has a subjectAltName that is not one of our DNS names");
		name[size < sizeof(name) ? size : sizeof(name) - 1] = '\0';
		for (j = 0; j < n && strcmp(dns[j], name) != 0; j++)
			;
		if (j == n)
			return err_set(em, DP_EINVAL, "tls.crt is for DNS name '%.*s', not one of ours", 200, name);
		seen[j] = true;
	}
	for (size_t j = 0; j < n; j++)
		if (!seen[j])
			return err_set(em, DP_EINVAL, "tls.crt is not for DNS name %s", dns[j]);
	return 0;
}

static bool server_auth(gnutls_x509_crt_t crt)
{
	char oid[128];
	unsigned int critical;

	for (unsigned i = 0;; i++) {
		size_t size = sizeof(oid);
		int r = gt.x509_crt_get_key_purpose_oid(crt, i, oid, &size, &critical);

		if (r < 0 && r != GNUTLS_E_SHORT_MEMORY_BUFFER)
			return false;
		if (r >= 0 && strcmp(oid, GNUTLS_KP_TLS_WWW_SERVER) == 0)
			return true;
	}
}

int certgen_check_serving(const struct certgen_pair *pair, const char *ca_pem, size_t ca_len,
			  const char *const *dns, size_t n_dns, time_t now, time_t *not_after, struct err_msg *em)
{
	gnutls_x509_crt_t crt = NULL, ca = NULL;
	gnutls_x509_privkey_t key = NULL;
	time_t na = 0;
	int r, rc;

	if ((rc = ready(em)) != 0)
		return rc;
	if ((r = import_crt(&crt, pair->cert, pair->cert_len)) < 0)
		rc = err_set(em, DP_EINVAL, "tls.crt holds no PEM certificate (%s)", gt.strerror(r));
	else if ((r = import_key(&key, pair->key, pair->key_len)) < 0)
		rc = err_set(em, DP_EINVAL, "tls.key holds no PEM private key (%s)", gt.strerror(r));
	else if (!key_matches(crt, key))
		rc = err_set(em, DP_EINVAL, "tls.key is not the key of tls.crt");
	else if ((r = import_crt(&ca, ca_pem, ca_len)) < 0)
		rc = err_set(em, DP_EINVAL, "ca.crt holds no PEM certificate (%s)", gt.strerror(r));
	else if (!signed_by(crt, ca))
		rc = err_set(em, DP_EINVAL, "tls.crt is not signed by the CA in ca.crt");
	else if ((rc = check_time(crt, "tls.crt", now, &na, em)) == 0 && (rc = check_names(crt, dns, n_dns, em)) == 0 &&
		 !server_auth(crt))
		rc = err_set(em, DP_EINVAL, "tls.crt is not for TLS servers (no extendedKeyUsage serverAuth)");
	if (key)
		gt.x509_privkey_deinit(key);
	if (ca)
		gt.x509_crt_deinit(ca);
	if (crt)
		gt.x509_crt_deinit(crt);
	if (rc == 0)
		*not_after = na;
	return rc;
}

size_t certgen_count(const char *pem, size_t len)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----";
	const char *p = pem, *end = pem + len;
	size_t n = 0;

	while (p < end && (p = memmem(p, (size_t)(end - p), begin, sizeof(begin) - 1)) != NULL) {
		n++;
		p += sizeof(begin) - 1;
	}
	return n;
}

/* The next PEM certificate block at or after *p: its start and length; false when there is none. */
static bool next_block(const char **p, const char *end, const char **block, size_t *n)
{
	static const char begin[] = "-----BEGIN CERTIFICATE-----", fin[] = "-----END CERTIFICATE-----";
	const char *b = memmem(*p, (size_t)(end - *p), begin, sizeof(begin) - 1), *e;

	if (b == NULL)
		return false;
	e = memmem(b, (size_t)(end - b), fin, sizeof(fin) - 1);
	e = e ? e + sizeof(fin) - 1 : end;
	*block = b;
	*n = (size_t)(e - b);
	*p = e;
	return true;
}

int certgen_bundle_filter(const char *pem, size_t len, time_t now, int skip_first, struct buf *out, size_t *kept,
			  size_t *dropped, struct err_msg *em)
{
	const char *p = pem, *end = pem + len, *block;
	size_t k = 0, drop = 0, start = out->len, n, i;
	int rc, r;

	if ((rc = ready(em)) != 0)
		return rc;
	/* block by block, so that one that does not parse costs only itself */
	for (i = 0; rc == 0 && next_block(&p, end, &block, &n); i++) {
		gnutls_x509_crt_t crt = NULL;
		char *text = NULL;
		size_t tl = 0;
		time_t na;

		if (i == 0 && skip_first)
			continue;
		if (k < BUNDLE_MAX && import_crt(&crt, block, n) >= 0 && is_ca(crt) &&
		    check_time(crt, "", now, &na, NULL) == 0) {
			if ((r = export_crt(crt, &text, &tl)) < 0)
				rc = err_set(em, DP_ECRYPTO, "GnuTLS cannot write a certificate: %s", gt.strerror(r));
			else if (buf_append(out, text, tl) != 0)
				rc = err_set(em, DP_ETOOBIG, "the CA bundle is larger than %zu bytes", out->cap);
			else
				k++;
			free(text);
		} else {
			drop++;
		}
		if (crt)
			gt.x509_crt_deinit(crt);
	}
	if (rc != 0) {
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
		return rc;
	}
	*kept = k;
	*dropped = drop;
	return 0;
}
