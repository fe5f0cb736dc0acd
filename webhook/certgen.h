/*
 * certgen.h - the webhook's certificates: made and checked with GnuTLS.
 *
 * A CA (ECDSA P-256, self-signed, basicConstraints CA:TRUE, keyUsage
 * keyCertSign and cRLSign) and serving certificates it signs (ECDSA P-256,
 * DNS names, extendedKeyUsage serverAuth, keyUsage digitalSignature, a
 * random 128-bit serial). Everything is PEM text: certificates as
 * "CERTIFICATE", keys as unencrypted PKCS#8 "PRIVATE KEY", what GnuTLS,
 * OpenSSL and Go all read.
 *
 * GnuTLS is loaded with dlopen on first use, as the webhook's server loads
 * it (through libmicrohttpd): the agent, the same binary, never maps it.
 * Every function returns DP_ECRYPTO with em when it is not installed.
 *
 * Ownership: a struct certgen_pair owns its two strings; certgen_pair_free()
 * wipes the key before freeing it. Inputs are borrowed.
 */
#ifndef DP_CERTGEN_H
#define DP_CERTGEN_H

#include <stddef.h>
#include <time.h>

#include "buf.h"
#include "errors.h"

struct certgen_pair {
	char *cert; /* PEM, NUL-terminated */
	size_t cert_len;
	char *key; /* PEM, NUL-terminated; a secret */
	size_t key_len;
};

/* Wipe the key, free both, zero the struct. Accepts a zeroed struct. */
void certgen_pair_free(struct certgen_pair *p);

/* What a new certificate says. */
struct certgen_spec {
	const char *cn;           /* subject common name: letters, digits, '-', '.', '@' only */
	const char *const *dns;   /* serving certificates: the DNS names (subjectAltName) */
	size_t n_dns;
	time_t now;               /* valid from an hour before now (clock skew)... */
	int days;                 /* ...until now + days */
};

/* A new CA with a new key. 0, or DP_ECRYPTO / DP_EINVAL with em. *out set only on success. */
int certgen_ca(const struct certgen_spec *spec, struct certgen_pair *out, struct err_msg *em);

/*
 * A new serving certificate and key, signed by ca (its cert: the first
 * certificate of the PEM; its key). 0, or DP_ECRYPTO / DP_EINVAL with em.
 */
int certgen_serving(const struct certgen_spec *spec, const struct certgen_pair *ca, struct certgen_pair *out,
		    struct err_msg *em);

/*
 * Is the first certificate of ca_pem a CA we can keep at `now`: it parses, is
 * self-signed (its signature verifies with its own key), says CA:TRUE (and
 * keyCertSign when it has keyUsage), and is valid now. With key (may be
 * NULL), also that the key is a PEM private key that matches it. 0 with
 * *not_after; DP_EINVAL with em saying why not (a sentence that starts with
 * what is wrong: "the CA expired on ..."); DP_ECRYPTO when GnuTLS is missing.
 */
int certgen_check_ca(const char *ca_pem, size_t ca_len, const char *key, size_t key_len, time_t now,
		     time_t *not_after, struct err_msg *em);

/*
 * Is pair a serving certificate we can keep at `now`: cert and key parse and
 * match, the certificate is signed by the first certificate of ca_pem, valid
 * now, for exactly the DNS names dns[0..n_dns) (in any order), with
 * extendedKeyUsage serverAuth. 0 with *not_after; DP_EINVAL with em saying
 * why not; DP_ECRYPTO when GnuTLS is missing.
 */
int certgen_check_serving(const struct certgen_pair *pair, const char *ca_pem, size_t ca_len,
			  const char *const *dns, size_t n_dns, time_t now, time_t *not_after, struct err_msg *em);

/*
 * Append to out, as PEM, the certificates of the bundle pem[0..len) that are
 * CAs (CA:TRUE) valid at `now`, in their order, at most 8; with skip_first,
 * leaving out the first certificate whatever it is. *kept and *dropped count
 * the others; a block that does not parse is dropped.
 * 0, or DP_ECRYPTO / DP_ETOOBIG (out's cap) with em.
 */
int certgen_bundle_filter(const char *pem, size_t len, time_t now, int skip_first, struct buf *out, size_t *kept,
			  size_t *dropped, struct err_msg *em);

/* The number of certificates in a PEM bundle (its "BEGIN CERTIFICATE" lines). */
size_t certgen_count(const char *pem, size_t len);

#endif
