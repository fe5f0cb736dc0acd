/*
 * test_sigv4.c - common/sha256.c against FIPS 180-4's and RFC 4231's
 * published vectors (one-shot and fed a byte at a time), and fleet/aws.c's
 * SigV4 against AWS's published examples (the IAM ListUsers request of the
 * SigV4 documentation and cases of the SigV4 test suite). botocore's own
 * signatures are compared in tests/integration/fleet_ecs.sh.
 */
#include <stdlib.h>
#include <string.h>

#include "cloud/aws_sigv4.h"
#include "sha256.h"
#include "mem.h"
#include "t.h"

static const char *hex_of(const void *p, size_t n)
{
	static char h[SHA256_HEX_LEN];
	uint8_t d[SHA256_LEN];

	sha256(p, n, d);
	sha256_hex(d, h);
	return h;
}

static void sha256_vectors(void)
{
	T_STREQ(hex_of("", 0), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
	T_STREQ(hex_of("abc", 3), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
	T_STREQ(hex_of("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq", 56),
		"248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void sha256_incremental(void)
{
	struct sha256_ctx c;
	uint8_t d[SHA256_LEN];
	char h[SHA256_HEX_LEN], a[1000];

	memset(a, 'a', sizeof(a));
	sha256_init(&c);
	for (int i = 0; i < 1000; i++)
		sha256_update(&c, a, sizeof(a)); /* one million 'a' */
	sha256_final(&c, d);
	sha256_hex(d, h);
	T_STREQ(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
	sha256_init(&c);
	for (const char *p = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; *p; p++)
		sha256_update(&c, p, 1);
	sha256_final(&c, d);
	sha256_hex(d, h);
	T_STREQ(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
}

static void hmac_rfc4231(void)
{
	uint8_t key[131], d[SHA256_LEN];
	char h[SHA256_HEX_LEN];
	static const char big[] = "Test Using Larger Than Block-Size Key - Hash Key First";

	memset(key, 0x0b, 20);
	sha256_hmac(key, 20, "Hi There", 8, d);
	sha256_hex(d, h);
	T_STREQ(h, "b0344c61d8db38535ca8afceaf0bf12b881dc200c9833da726e9376c2e32cff7");
	sha256_hmac("Jefe", 4, "what do ya want for nothing?", 28, d);
	sha256_hex(d, h);
	T_STREQ(h, "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843");
	memset(key, 0xaa, sizeof(key)); /* a key longer than the block is hashed first */
	sha256_hmac(key, sizeof(key), big, strlen(big), d);
	sha256_hex(d, h);
	T_STREQ(h, "60e431591ee0b67f0d8a26aacbf5b77f8e0bc6213728c5140546040f0ee37f54");
}

/* The Authorization header for a request, signed with AWS's example key. */
static char *sign(const char *method, const char *url, const char *const *headers, const char *service,
		  const char *region, const char *token)
{
	struct aws_creds c = { .access_key = "AKIDEXAMPLE", .secret_key = "wJalrXUtnFEMI/K7MDENG+bPxRfiCYEXAMPLEKEY",
			       .token = (char *)token };
	struct aws_sigv4_req r = { .method = method, .url = url, .headers = headers, .service = service,
				   .region = region, .amz_date = "20150830T123600Z" };
	char *out[AWS_SIGV4_MAX] = { 0 }, *auth = NULL;

	if (aws_sigv4_sign(&r, &c, out, NULL) != 0)
		return NULL;
	for (int i = 0; out[i]; i++)
		if (strncmp(out[i], "Authorization: ", 15) == 0)
			auth = mem_strdup(out[i] + 15);
	aws_sigv4_free(out);
	return auth;
}

static void sigv4_iam_example(void)
{
	const char *h[] = { "Content-Type: application/x-www-form-urlencoded; charset=utf-8", NULL };
	char *a = sign("GET", "https://iam.amazonaws.com/?Action=ListUsers&Version=2010-05-08", h, "iam",
		       "us-east-1", NULL);

	T_STREQ(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/iam/aws4_request, "
		   "SignedHeaders=content-type;host;x-amz-date, "
		   "Signature=5d672d79c15b13162d9279b0855cfba6789a8edb4c82c400e06b5924a6f2b5d7");
	free(a);
}

static void sigv4_suite(void)
{
	char *a = sign("GET", "https://example.amazonaws.com/", NULL, "service", "us-east-1", NULL);

	/* get-vanilla */
	T_STREQ(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
		   "SignedHeaders=host;x-amz-date, "
		   "Signature=5fa00fa31553b73ebf1942676e86291e8372ff2a2260956d9b8aae1d763fbf31");
	free(a);
	/* get-vanilla-query-order-key-case: the query is sorted */
	a = sign("GET", "https://example.amazonaws.com/?Param2=value2&Param1=value1", NULL, "service", "us-east-1", NULL);
	T_STREQ(a, "AWS4-HMAC-SHA256 Credential=AKIDEXAMPLE/20150830/us-east-1/service/aws4_request, "
		   "SignedHeaders=host;x-amz-date, "
		   "Signature=b97d918cfa904a5beff61c982a1b6f458b799221646efd99d3219ec94cdf2500");
	free(a);
}

static void sigv4_default_port_and_token(void)
{
	struct aws_creds c = { .access_key = "AK", .secret_key = "SK", .token = "TOKEN" };
	struct aws_sigv4_req r = { .method = "POST", .url = "https://Ecs.eu-west-1.amazonaws.com:443/", .service = "ecs",
				   .region = "eu-west-1", .amz_date = "20240101T000000Z" };
	char *out[AWS_SIGV4_MAX] = { 0 };

	T_CHECK(aws_sigv4_sign(&r, &c, out, NULL) == 0);
	T_STREQ(out[0], "Host: ecs.eu-west-1.amazonaws.com");
	T_STREQ(out[1], "X-Amz-Date: 20240101T000000Z");
	T_STREQ(out[2], "X-Amz-Security-Token: TOKEN");
	T_CHECK(strstr(out[3], "SignedHeaders=host;x-amz-date;x-amz-security-token,") != NULL);
	T_CHECK(strstr(out[3], "SK") == NULL);
	aws_sigv4_free(out);
	T_CHECK(out[0] == NULL);
}

/* The same vectors through our own code, not nettle's. */
static void portable_vectors(void)
{
	sha256_portable_only();
	sha256_vectors();
	sha256_incremental();
	hmac_rfc4231();
}

int main(void)
{
	mem_install();
	T_BEGIN("test_sigv4");
	T_RUN(sha256_vectors); /* with nettle where it is installed (it is here: libgnutls30 needs it) */
	T_RUN(sha256_incremental);
	T_RUN(hmac_rfc4231);
	T_RUN(portable_vectors); /* and our own code, from here on */
	T_RUN(sigv4_iam_example);
	T_RUN(sigv4_suite);
	T_RUN(sigv4_default_port_and_token);
	T_END();
}
