/*
 * test_http.c - the HTTP request head parser (http/http_parse.c): what it
 * accepts, what it decodes, and the status it answers each malformed head with.
 */
#include <stdlib.h>

#include "http/http_parse.h"
#include "t.h"

/* Parse text (a C string holding a head) and return the status; r filled on 0. */
static int parse(const char *text, char *buf, size_t cap, struct http_request *r)
{
	size_t n = strlen(text), head;

	if (n >= cap)
		return -1;
	memcpy(buf, text, n + 1);
	head = http_head_length(buf, n);
	if (head == 0)
		return -2;
	return http_parse_head(buf, head, r);
}

static void good_request(void)
{
	static char buf[4096];
	struct http_request r;

	T_CHECK(parse("GET /dump?pid=42&type=Full&tags=a%2Cb&x=1+2&flag HTTP/1.1\r\nHost: h\r\n"
		      "authorization:   Bearer abc  \r\nX-Empty:\r\n\r\n", buf, sizeof(buf), &r) == 0);
	T_STREQ(r.method, "GET");
	T_STREQ(r.path, "/dump");
	T_CHECK(r.minor == 1);
	T_STREQ(http_param(&r, "pid"), "42");
	T_STREQ(http_param(&r, "type"), "Full");
	T_STREQ(http_param(&r, "tags"), "a,b");
	T_STREQ(http_param(&r, "x"), "1 2");
	T_STREQ(http_param(&r, "flag"), "");
	T_CHECK(http_param(&r, "nope") == NULL);
	T_STREQ(http_header(&r, "Authorization"), "Bearer abc");
	T_STREQ(http_header(&r, "x-empty"), "");
	T_CHECK(r.n_headers == 3);
}

static void lone_lf_and_leading_blank_lines(void)
{
	static char buf[4096];
	struct http_request r;

	T_CHECK(parse("\r\nGET /healthz HTTP/1.0\nHost: h\n\n", buf, sizeof(buf), &r) == 0);
	T_STREQ(r.path, "/healthz");
	T_CHECK(r.minor == 0);
	T_STREQ(http_header(&r, "host"), "h");
}

static void path_decoded(void)
{
	static char buf[4096];
	struct http_request r;

	T_CHECK(parse("DELETE /operations/ab%2Dcd HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 0);
	T_STREQ(r.path, "/operations/ab-cd");
	T_STREQ(r.method, "DELETE");
}

static void head_not_complete(void)
{
	static char buf[4096];
	struct http_request r;

	T_CHECK(parse("GET / HTTP/1.1\r\nHost: h\r\n", buf, sizeof(buf), &r) == -2);
}

static void malformed(void)
{
	static char buf[16384];
	struct http_request r;

	T_CHECK(parse("GET HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET  / HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("G(T / HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET http://x/ HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET / HTTP/2.0\r\n\r\n", buf, sizeof(buf), &r) == 505);
	T_CHECK(parse("GET / HTTP/1.2\r\n\r\n", buf, sizeof(buf), &r) == 505);
	T_CHECK(parse("GET / FTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET /a%zz HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET /a%00b HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET /?pid=%0 HTTP/1.1\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\n folded\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET / HTTP/1.1\r\nBad Name: a\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET / HTTP/1.1\r\nHost: a\r\nX: y\r\nhost: b\r\n\r\n", buf, sizeof(buf), &r) == 400); /* RFC 9112 3.2 */
	T_CHECK(parse("GET / HTTP/1.1\r\nX-Host: a\r\nHost: b\r\n\r\n", buf, sizeof(buf), &r) == 0);
	T_CHECK(parse("GET / HTTP/1.1\r\n: a\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET / HTTP/1.1\r\nA: b\rc\r\n\r\n", buf, sizeof(buf), &r) == 400);
	T_CHECK(parse("GET / HTTP/1.1\r\nA: b\x01\r\n\r\n", buf, sizeof(buf), &r) == 400);
	{
		/* an embedded NUL anywhere in the head */
		static const char nul[] = "GET / HTTP/1.1\r\nA: b\0c\r\n\r\n";
		size_t n = sizeof(nul) - 1;

		memcpy(buf, nul, n);
		T_CHECK(http_parse_head(buf, http_head_length(buf, n), &r) == 400);
	}
}

static void caps(void)
{
	static char buf[65536], text[65536];
	struct http_request r;
	size_t o;

	o = (size_t)snprintf(text, sizeof(text), "GET /");
	memset(text + o, 'a', 8200);
	o += 8200;
	o += (size_t)snprintf(text + o, sizeof(text) - o, " HTTP/1.1\r\n\r\n");
	T_CHECK(parse(text, buf, sizeof(buf), &r) == 414);

	o = (size_t)snprintf(text, sizeof(text), "GET / HTTP/1.1\r\n");
	for (int i = 0; i <= HTTP_MAX_HEADERS; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "H%d: v\r\n", i);
	snprintf(text + o, sizeof(text) - o, "\r\n");
	T_CHECK(parse(text, buf, sizeof(buf), &r) == 431);

	o = (size_t)snprintf(text, sizeof(text), "GET /?");
	for (int i = 0; i <= HTTP_MAX_PARAMS; i++)
		o += (size_t)snprintf(text + o, sizeof(text) - o, "p%d=1&", i);
	snprintf(text + o, sizeof(text) - o, " HTTP/1.1\r\n\r\n");
	T_CHECK(parse(text, buf, sizeof(buf), &r) == 431);
}

int main(void)
{
	t_file_name = "test_http";
	T_RUN(good_request);
	T_RUN(lone_lf_and_leading_blank_lines);
	T_RUN(path_decoded);
	T_RUN(head_not_complete);
	T_RUN(malformed);
	T_RUN(caps);
	return t_failed_cases ? 1 : 0;
}
