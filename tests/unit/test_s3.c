/*
 * test_s3.c - what S3 egress computes without a store: the object's URL
 * (path or virtual-hosted style, key prefix, key encoding), SigV4 for S3
 * against AWS's published example (GET Object of the S3 SigV4 documentation:
 * the path not encoded again, the payload hash as given), the XML answers'
 * text and errors (entities, NoSuchBucket, a truncated answer), and
 * Expiration times. egress/s3.c's requests are in tests/integration/s3.sh.
 */
#include <stdlib.h>
#include <string.h>

#include "cloud/aws_creds.h"
#include "cloud/aws_sigv4.h"
#include "cloud/aws_xml.h"
#include "egress/s3.h"
#include "egress/s3_store.h"
#include "mem.h"
#include "t.h"

static char *url_of(const char *endpoint, const char *bucket, bool path_style, const char *prefix, const char *name)
{
	struct s3_cfg c = { .endpoint = endpoint, .bucket = bucket, .force_path_style = path_style, .key_prefix = prefix };
	char *u = NULL;

	return s3_object_url(&c, "eu-west-1", name, &u, NULL) == 0 ? u : NULL;
}

static void object_urls(void)
{
	char *u;

	unsetenv("AWS_ENDPOINT_URL_S3");
	unsetenv("AWS_ENDPOINT_URL");
	T_STREQ(u = url_of(NULL, "diag-dumps", false, NULL, "a.dmp"), "https://diag-dumps.s3.eu-west-1.amazonaws.com/a.dmp");
	free(u);
	T_STREQ(u = url_of(NULL, "diag-dumps", true, "x/", "a.dmp"), "https://s3.eu-west-1.amazonaws.com/diag-dumps/x/a.dmp");
	free(u);
	/* dots in the name do not fit the certificate's wildcard: path style over https */
	T_STREQ(u = url_of(NULL, "diag.dumps", false, NULL, "a"), "https://s3.eu-west-1.amazonaws.com/diag.dumps/a");
	free(u);
	/* an IP address or localhost cannot take a bucket label */
	T_STREQ(u = url_of("http://127.0.0.1:9000/", "diag", false, NULL, "a"), "http://127.0.0.1:9000/diag/a");
	free(u);
	T_STREQ(u = url_of("http://localhost:4568", "diag", false, NULL, "a"), "http://localhost:4568/diag/a");
	free(u);
	T_STREQ(u = url_of("http://minio.internal:9000", "diag", false, "", "a"), "http://diag.minio.internal:9000/a");
	free(u);
	T_STREQ(u = url_of("https://[::1]:9000", "diag", false, NULL, "a"), "https://[::1]:9000/diag/a");
	free(u);
	/* the key encoded once, '/' kept; a prefix's trailing slashes made one */
	T_STREQ(u = url_of("http://127.0.0.1:1", "diag", true, "pods//", "web 1/dump$1+é.dmp"),
		"http://127.0.0.1:1/diag/pods/web%201/dump%241%2B%C3%A9.dmp");
	free(u);
	setenv("AWS_ENDPOINT_URL_S3", "http://127.0.0.1:4568/", 1);
	T_STREQ(u = url_of(NULL, "diag", false, NULL, "a"), "http://127.0.0.1:4568/diag/a");
	free(u);
	unsetenv("AWS_ENDPOINT_URL_S3");
	T_CHECK(url_of("ftp://x", "diag", false, NULL, "a") == NULL);
	T_CHECK(url_of("http://x/base", "diag", false, NULL, "a") == NULL);
	T_CHECK(url_of(NULL, "d", false, NULL, "a") == NULL);              /* too short a bucket */
	T_CHECK(url_of(NULL, "diag/x", false, NULL, "a") == NULL);         /* not a bucket name */
	T_CHECK(url_of(NULL, "diag", false, NULL, "") == NULL);            /* no name */
	{
		char key[1100];

		memset(key, 'k', sizeof(key) - 1);
		key[sizeof(key) - 1] = '\0';
		T_CHECK(url_of(NULL, "diag", false, NULL, key) == NULL); /* over 1,024 bytes */
	}
}

/* AWS's "Example: GET Object" (Signature Version 4, authenticating requests with the Authorization header). */
static void sigv4_s3_example(void)
{
	const char *headers[] = { "Range: bytes=0-9",
				  "x-amz-content-sha256: e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
				  NULL };
	struct aws_creds c = { .access_key = "AKIAIOSFODNN7EXAMPLE",
			       .secret_key = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" };
	struct aws_sigv4_req r = { .method = "GET", .url = "https://examplebucket.s3.amazonaws.com/test.txt",
				   .headers = headers, .s3 = true, .service = "s3", .region = "us-east-1",
				   .payload_hash = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
				   .amz_date = "20130524T000000Z" };
	char *out[AWS_SIGV4_MAX] = { 0 };

	T_CHECK(aws_sigv4_sign(&r, &c, out, NULL) == 0);
	T_STREQ(out[0], "Host: examplebucket.s3.amazonaws.com");
	T_STREQ(out[2], "Authorization: AWS4-HMAC-SHA256 Credential=AKIAIOSFODNN7EXAMPLE/20130524/us-east-1/s3/"
			"aws4_request, SignedHeaders=host;range;x-amz-content-sha256;x-amz-date, "
			"Signature=f0e8bdb87c964420e857bd35b5d6ed310bd44f0170aba48dd91039c6036bdb41");
	aws_sigv4_free(out);
}

static void xml_answers(void)
{
	static const char ok[] = "<?xml version=\"1.0\"?><InitiateMultipartUploadResult><Bucket>b</Bucket>"
				 "<UploadId>VXBsb2FkIElE&amp;x&#65;&#x42;</UploadId></InitiateMultipartUploadResult>";
	static const char err[] = "<Error><Code>NoSuchBucket</Code><Message>The specified bucket does not exist"
				  "</Message><BucketName>nb</BucketName></Error>";
	struct aws_error ae;
	char *t;

	T_STREQ(t = aws_xml_text(ok, sizeof(ok) - 1, "UploadId"), "VXBsb2FkIElE&xAB");
	free(t);
	T_CHECK(aws_xml_text(ok, sizeof(ok) - 1, "ETag") == NULL);
	T_CHECK(aws_xml_text(ok, 60, "UploadId") == NULL); /* cut before its end: not read past the length */
	T_STREQ(t = aws_xml_text("<E>&bogus;&#0;&lt;</E>", 22, "E"), "&bogus;&#0;<");
	free(t);
	aws_xml_error(err, sizeof(err) - 1, 404, &ae);
	T_STREQ(ae.type, "NoSuchBucket");
	T_STREQ(ae.message, "The specified bucket does not exist");
	T_CHECK(ae.status == 404);
	aws_xml_error("", 0, 503, &ae);
	T_STREQ(ae.type, "HTTP 503");
	T_STREQ(ae.message, "");
	aws_xml_error("", 0, 307, &ae); /* a bare redirect says it is one, and that it was not followed */
	T_STREQ(ae.type, "HTTP 307");
	T_CHECK(strstr(ae.message, "a redirect, which is not followed") == ae.message);
	aws_xml_error("<Error><Code>X\001\nY</Code></Error>", 30, 400, &ae);
	T_STREQ(ae.type, "X  Y"); /* control bytes never reach a message */
}

static void expiration_times(void)
{
	T_CHECK(aws_creds_parse_time("1970-01-01T00:00:00Z") == 0);
	T_CHECK(aws_creds_parse_time("2024-05-01T12:00:00Z") == 1714564800);
	T_CHECK(aws_creds_parse_time("2024-05-01T12:00:00.123456Z") == 1714564800);
	T_CHECK(aws_creds_parse_time("2024-05-01T14:00:00+02:00") == 1714564800);
	T_CHECK(aws_creds_parse_time("2024-05-01T07:30:00-04:30") == 1714564800);
	T_CHECK(aws_creds_parse_time("2024-05-01 12:00:00") == 0);
	T_CHECK(aws_creds_parse_time("2024-13-01T12:00:00Z") == 0);
	T_CHECK(aws_creds_parse_time(NULL) == 0);
}

static void renewal(void)
{
	struct aws_creds_opts o = { .profile = NULL };
	struct aws_creds c = { .access_key = mem_strdup("AK"), .secret_key = mem_strdup("SK"),
			       .expires = time(NULL) + 3600 };
	bool renewed = true;

	/* an hour left: kept as they are, nothing loaded */
	T_CHECK(aws_creds_fresh(&o, &c, &renewed, NULL) == 0);
	T_CHECK(!renewed);
	T_STREQ(c.access_key, "AK");
	/* four minutes left and no source to renew from: kept while they last */
	unsetenv("AWS_ACCESS_KEY_ID");
	setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
	setenv("AWS_CONFIG_FILE", "/nonexistent/config", 1);
	setenv("AWS_EC2_METADATA_DISABLED", "true", 1);
	c.expires = time(NULL) + 240;
	T_CHECK(aws_creds_fresh(&o, &c, &renewed, NULL) == 0);
	T_STREQ(c.access_key, "AK");
	/* lapsed: an error */
	c.expires = time(NULL) - 1;
	T_CHECK(aws_creds_fresh(&o, &c, &renewed, NULL) == DP_EAUTH);
	/* four minutes left and the environment has new keys: renewed */
	setenv("AWS_ACCESS_KEY_ID", "AK2", 1);
	setenv("AWS_SECRET_ACCESS_KEY", "SK2", 1);
	c.expires = time(NULL) + 240;
	T_CHECK(aws_creds_fresh(&o, &c, &renewed, NULL) == 0);
	T_CHECK(renewed);
	T_STREQ(c.access_key, "AK2");
	T_CHECK(c.expires == 0);
	aws_creds_free(&c);
}

/* The provider's check at startup: the message names the setting at fault and where it came from, once,
 * whole; an Endpoint with a user and password is refused without repeating them */
static void store_check_messages(void)
{
	struct settings_node *root = settings_new();
	struct egress_provider p = { .name = "s3", .type = "S3Storage" };
	struct err_msg em;
	const char *env = "environment variable DOTNETMONITOR_Egress__S3Storage__s3__Endpoint";
#define PUT(k, v, w) T_CHECK(settings_put(root, "Egress:S3Storage:s3:" k, v, w, 0, &em) == 0)

	PUT("BucketName", "diag", "f.yaml:3:19");
	PUT("Endpoint", "http://127.0.0.1:1/path?x=1", env);
	p.set = settings_at(root, "Egress:S3Storage:s3", false);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_STREQ(em.text, "environment variable DOTNETMONITOR_Egress__S3Storage__s3__Endpoint: egress provider 's3': "
			 "Endpoint http://127.0.0.1:1/path?x=1 must be scheme://host[:port] alone (no path or query)");
	PUT("Endpoint", "ftp://127.0.0.1:1", env);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "Endpoint ftp://127.0.0.1:1 is not an http:// or https:// URL") != NULL);
	PUT("Endpoint", "http://AKID:hunter2@127.0.0.1:1", env);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "Endpoint holds a user or password") != NULL && strstr(em.text, "hunter2") == NULL);
	PUT("Endpoint", "http://127.0.0.1:99999", env);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "port that is not a number from 1 to 65535") != NULL);
	PUT("Endpoint", "http://[::1]:x", env);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	PUT("Endpoint", "http://127.0.0.1:", env);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	PUT("Endpoint", "http://[::1]:9000", env);
	T_CHECK(s3_store.check(&p, &em) == 0);
	PUT("Endpoint", "http://127.0.0.1:1", env);
	PUT("BucketName", "a/b", "f.yaml:3:19");
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_STREQ(em.text, "f.yaml:3:19: egress provider 's3': BucketName a/b has a character S3 does not allow");
	PUT("BucketName", "diag", "f.yaml:3:19");
	T_CHECK(s3_store.check(&p, &em) == 0);
	/* a part size that every upload would refuse is refused at startup */
	PUT("CopyBufferSize", "1Gi", "f.yaml:4:23");
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "f.yaml:4:23: egress provider 's3': CopyBufferSize takes a size such as 8Mi, "
			      "at most 512Mi") == em.text);
	PUT("CopyBufferSize", "512Mi", "f.yaml:4:23");
	T_CHECK(s3_store.check(&p, &em) == 0);
	PUT("CopyBufferSize", "0", "f.yaml:4:23");
	T_CHECK(s3_store.check(&p, &em) == 0);
	/* a misspelt setting: refused by its full path and source, with the name it misspells */
	PUT("RegoinName", "eu-west-1", "f.yaml:6:17");
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_STREQ(em.text, "Egress:S3Storage:s3:RegoinName (f.yaml:6:17): unknown setting; did you mean RegionName?");
	settings_free(root);
	root = settings_new();
	PUT("BucketName", "diag", "f.yaml:3:19");
	PUT("AccessKeyId", "AKID", "f.yaml:5:20");
	p.set = settings_at(root, "Egress:S3Storage:s3", false);
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "egress provider 's3' (f.yaml:5:20): AccessKeyId and SecretAccessKey") == em.text);
	PUT("GeneratePreSignedUrl", "true", "f.yaml:5:29");
	T_CHECK(s3_store.check(&p, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "f.yaml:5:29: egress provider 's3': GeneratePreSignedUrl is dotnet-monitor's, "
			      "not supported by this agent yet") == em.text);
	settings_free(root);
#undef PUT
}

int main(void)
{
	mem_install();
	T_BEGIN("test_s3");
	T_RUN(object_urls);
	T_RUN(sigv4_s3_example);
	T_RUN(xml_answers);
	T_RUN(expiration_times);
	T_RUN(renewal);
	T_RUN(store_check_messages);
	T_END();
}
