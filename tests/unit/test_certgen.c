/*
 * test_certgen.c - the pieces of `diagport webhook certs` that need no API
 * server: strict base64 (common/base64.c) and the certificates with their
 * checks (webhook/certgen.c): what is made passes the checks, and each thing
 * the checks look for, when wrong, is caught with a reason.
 */
#include <stdlib.h>
#include <time.h>

#include "common/base64.h"
#include "webhook/certgen.h"
#include "errors.h"
#include "mem.h"
#include "t.h"

static const char *const dns[] = { "svc", "svc.ns", "svc.ns.svc", "svc.ns.svc.cluster.local" };

static void base64_round_trip(void)
{
	static const char *const plain[] = { "", "f", "fo", "foo", "foob", "fooba", "foobar" };
	static const char *const coded[] = { "", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy" };

	for (size_t i = 0; i < sizeof(plain) / sizeof(plain[0]); i++) {
		size_t n;
		char *e = b64_encode(plain[i], strlen(plain[i]), &n), *d = NULL;

		T_STREQ(e, coded[i]);
		T_CHECK(n == strlen(coded[i]));
		T_CHECK(b64_decode(e, n, 64, &d, &n) == 0);
		T_STREQ(d, plain[i]);
		T_CHECK(n == strlen(plain[i]));
		free(e);
		free(d);
	}
}

static void base64_strict(void)
{
	static const char *const bad[] = { "Zg", "Zg=", "Zh==", "Zm9=", "Z===", "Zm9v\n", "Zm 9v", "Zm9v-_==", "=Zm9" };
	char *d = NULL;
	size_t n = 0;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (b64_decode(bad[i], strlen(bad[i]), 64, &d, &n) != DP_ESYNTAX)
			T_FAIL("'%s' was accepted", bad[i]);
	T_CHECK(b64_decode("Zm9vYmFy", 8, 5, &d, &n) == DP_ETOOBIG);
	T_CHECK(d == NULL);
}

/* A CA and a serving certificate it signed, valid from now. */
static int make(time_t now, int ca_days, int days, struct certgen_pair *ca, struct certgen_pair *srv)
{
	struct certgen_spec cs = { .cn = "test-ca@1", .now = now, .days = ca_days };
	struct certgen_spec ss = { .cn = "svc.ns.svc", .dns = dns, .n_dns = 4, .now = now, .days = days };
	struct err_msg em;

	if (certgen_ca(&cs, ca, &em) != 0 || certgen_serving(&ss, ca, srv, &em) != 0) {
		fprintf(stderr, "%s\n", em.text);
		return -1;
	}
	return 0;
}

static void made_pass_checks(void)
{
	struct certgen_pair ca = { 0 }, srv = { 0 };
	time_t now = time(NULL), end = 0;
	struct err_msg em = { "" };

	T_CHECK(make(now, 100, 30, &ca, &srv) == 0);
	T_CHECK(strncmp(ca.key, "-----BEGIN PRIVATE KEY-----", 27) == 0);
	if (certgen_check_ca(ca.cert, ca.cert_len, ca.key, ca.key_len, now, &end, &em) != 0)
		T_FAIL("CA: %s", em.text);
	T_CHECK(end > now + 99 * 86400 && end <= now + 100 * 86400);
	if (certgen_check_serving(&srv, ca.cert, ca.cert_len, dns, 4, now, &end, &em) != 0)
		T_FAIL("serving: %s", em.text);
	T_CHECK(end > now + 29 * 86400 && end <= now + 30 * 86400);
	/* the SANs in another order are the same set */
	{
		const char *const shuffled[] = { dns[3], dns[1], dns[0], dns[2] };

		T_CHECK(certgen_check_serving(&srv, ca.cert, ca.cert_len, shuffled, 4, now, &end, &em) == 0);
	}
	certgen_pair_free(&ca);
	certgen_pair_free(&srv);
	T_CHECK(ca.key == NULL && srv.cert == NULL);
}

static void serving_capped_by_ca(void)
{
	struct certgen_pair ca = { 0 }, srv = { 0 };
	time_t now = time(NULL), ca_end = 0, end = 0;
	struct err_msg em;

	T_CHECK(make(now, 10, 30, &ca, &srv) == 0);
	T_CHECK(certgen_check_ca(ca.cert, ca.cert_len, NULL, 0, now, &ca_end, &em) == 0);
	T_CHECK(certgen_check_serving(&srv, ca.cert, ca.cert_len, dns, 4, now, &end, &em) == 0);
	T_CHECK(end == ca_end);
	certgen_pair_free(&ca);
	certgen_pair_free(&srv);
}

static void checks_catch(void)
{
	struct certgen_pair ca = { 0 }, srv = { 0 }, ca2 = { 0 }, srv2 = { 0 }, mixed;
	time_t now = time(NULL), end;
	struct err_msg em = { "" };

	T_CHECK(make(now, 100, 30, &ca, &srv) == 0);
	T_CHECK(make(now, 100, 30, &ca2, &srv2) == 0);
	/* expired, and not yet valid */
	T_CHECK(certgen_check_serving(&srv, ca.cert, ca.cert_len, dns, 4, now + 31 * 86400, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "tls.crt expired on") != NULL);
	T_CHECK(certgen_check_ca(ca.cert, ca.cert_len, NULL, 0, now - 2 * 3600, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "not valid before") != NULL);
	/* another CA's key; a serving certificate from another CA; a key that is not the certificate's */
	T_CHECK(certgen_check_ca(ca.cert, ca.cert_len, ca2.key, ca2.key_len, now, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "ca.key is not the key") != NULL);
	T_CHECK(certgen_check_serving(&srv2, ca.cert, ca.cert_len, dns, 4, now, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "not signed by the CA") != NULL);
	mixed = srv;
	mixed.key = srv2.key;
	mixed.key_len = srv2.key_len;
	T_CHECK(certgen_check_serving(&mixed, ca.cert, ca.cert_len, dns, 4, now, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "tls.key is not the key of tls.crt") != NULL);
	/* a name missing, a name too many */
	T_CHECK(certgen_check_serving(&srv, ca.cert, ca.cert_len, dns, 3, now, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "not one of ours") != NULL);
	{
		const char *const more[] = { dns[0], dns[1], dns[2], dns[3], "other" };

		T_CHECK(certgen_check_serving(&srv, ca.cert, ca.cert_len, more, 5, now, &end, &em) == DP_EINVAL);
		T_CHECK(strstr(em.text, "not for DNS name other") != NULL);
	}
	/* a serving certificate is no CA; garbage is no certificate */
	T_CHECK(certgen_check_ca(srv.cert, srv.cert_len, NULL, 0, now, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "not a CA") != NULL);
	T_CHECK(certgen_check_ca("nope", 4, NULL, 0, now, &end, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "no PEM certificate") != NULL);
	certgen_pair_free(&ca);
	certgen_pair_free(&srv);
	certgen_pair_free(&ca2);
	certgen_pair_free(&srv2);
}

static void bundle_filter(void)
{
	struct certgen_pair a = { 0 }, b = { 0 }, s1 = { 0 }, s2 = { 0 };
	time_t now = time(NULL);
	size_t kept = 9, dropped = 9;
	struct buf in, out;
	struct err_msg em;

	T_CHECK(make(now, 100, 30, &a, &s1) == 0);
	T_CHECK(make(now, 50, 30, &b, &s2) == 0);
	buf_init(&in, 0);
	buf_init(&out, 0);
	buf_append(&in, a.cert, a.cert_len);
	buf_append(&in, s1.cert, s1.cert_len); /* not a CA: dropped */
	buf_puts(&in, "-----BEGIN CERTIFICATE-----\nbm90IGEgY2VydGlmaWNhdGU=\n-----END CERTIFICATE-----\n"); /* dropped */
	buf_append(&in, b.cert, b.cert_len);
	T_CHECK(certgen_count(in.data, in.len) == 4);
	T_CHECK(certgen_bundle_filter(in.data, in.len, now, 0, &out, &kept, &dropped, &em) == 0);
	T_CHECK(kept == 2 && dropped == 2);
	T_CHECK(out.len == a.cert_len + b.cert_len && memcmp(out.data, a.cert, a.cert_len) == 0);
	buf_reset(&out);
	/* 60 days on, b has expired; skip_first leaves a out */
	T_CHECK(certgen_bundle_filter(in.data, in.len, now + 60 * 86400, 1, &out, &kept, &dropped, &em) == 0);
	T_CHECK(kept == 0 && dropped == 3 && out.len == 0);
	buf_free(&in);
	buf_free(&out);
	certgen_pair_free(&a);
	certgen_pair_free(&b);
	certgen_pair_free(&s1);
	certgen_pair_free(&s2);
}

int main(void)
{
	mem_install();
	T_BEGIN("test_certgen");
	T_RUN(base64_round_trip);
	T_RUN(base64_strict);
	T_RUN(made_pass_checks);
	T_RUN(serving_capped_by_ca);
	T_RUN(checks_catch);
	T_RUN(bundle_filter);
	T_END();
}
