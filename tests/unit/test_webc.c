/*
 * test_webc.c - webc's answer reader (cloud/webc_resp.c) on answers given
 * whole and one byte at a time (the same result either way), its framings,
 * keep-alive decisions and caps; base URLs and requests webc refuses before
 * connecting; the proxy the environment names for a URL (as libcurl reads
 * it), proxy URLs taken apart and answers to CONNECT. The network side is
 * tests/integration/webc.sh.
 */
#include "t.h"

#include <stdlib.h>

#include "cloud/webc_int.h"
#include "mem.h"
#include "cloud/webc.h"

static const char *const want[] = { "etag", "X-Kept", NULL };

struct got {
	int rc;
	size_t used;
	bool keep;
	struct webc_resp r;
	struct err_msg em;
};

/* Read text as one answer, fed in pieces of step bytes (0: whole), then an EOF if it asked for more. */
static void feed(const char *text, size_t len, size_t step, bool head, size_t max, struct got *g)
{
	struct webc_parse p;
	size_t off = 0;

	memset(g, 0, sizeof(*g));
	webc_parse_init(&p, head, max, want, &g->r);
	g->rc = 0;
	while (g->rc == 0 && off < len) {
		size_t n = step && len - off > step ? step : len - off, used = 0;

		g->rc = webc_parse_feed(&p, text + off, n, &used, &g->em);
		off += used;
		g->used = off;
	}
	if (g->rc == 0)
		g->rc = webc_parse_eof(&p, &g->em);
	g->keep = p.keep_alive;
	webc_parse_free(&p);
}

/* Whole and byte by byte agree: rc, status, body, headers, keep-alive. g gets the whole run. */
static bool same_both_ways(const char *text, bool head, size_t max, struct got *g)
{
	struct got b;
	bool same;

	feed(text, strlen(text), 0, head, max, g);
	feed(text, strlen(text), 1, head, max, &b);
	same = g->rc == b.rc;
	if (same && g->rc == 1) /* after a failure the answer is thrown away: only the code matters */
		same = g->r.status == b.r.status && g->r.body.len == b.r.body.len &&
		       (g->r.body.len == 0 || memcmp(g->r.body.data, b.r.body.data, b.r.body.len) == 0) &&
		       g->r.n_headers == b.r.n_headers && g->keep == b.keep && g->used == b.used;
	for (size_t i = 0; same && g->rc == 1 && i < g->r.n_headers; i++)
		same = strcmp(g->r.headers[i], b.r.headers[i]) == 0;
	webc_resp_free(&b.r);
	return same;
}

static void content_length(void)
{
	struct got g;
	const char *a = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nETag: \"e1\"  \r\nX-Other: x\r\n\r\nhelloEXTRA";

	T_CHECK(same_both_ways(a, false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.status == 200 && g.r.body.len == 5 && memcmp(g.r.body.data, "hello", 5) == 0);
	T_CHECK(g.used == strlen(a) - 5); /* EXTRA is not the answer's */
	T_CHECK(g.keep && g.r.n_headers == 1);
	T_STREQ(g.r.headers[0], "etag: \"e1\"");
	T_STREQ(webc_resp_header(&g.r, "ETag"), "\"e1\"");
	T_CHECK(webc_resp_header(&g.r, "x-other") == NULL);
	webc_resp_free(&g.r);
}

static void chunked(void)
{
	struct got g;
	const char *a = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\nx-kept: 1\r\nX-Kept: 2\r\n\r\n"
			"5;name=val\r\nhello\r\nA\r\n 012345678\r\n0\r\nX-Trailer: t\r\n\r\n";

	T_CHECK(same_both_ways(a, false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 15 && memcmp(g.r.body.data, "hello 012345678", 15) == 0);
	T_CHECK(g.keep && g.used == strlen(a) && g.r.n_headers == 2);
	T_STREQ(webc_resp_header(&g.r, "x-kept"), "1");
	webc_resp_free(&g.r);
	/* bare LF line ends are read too */
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\nTransfer-Encoding: chunked\n\n3\nabc\n0\n\n", false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 3);
	webc_resp_free(&g.r);
}

static void to_close_and_no_body(void)
{
	struct got g;

	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nServer: x\r\n\r\nall of it", false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 9 && !g.keep);
	webc_resp_free(&g.r);
	/* a coding other than chunked last: to the close */
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip\r\n\r\nzz", false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 2 && !g.keep);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n", true, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 0 && g.keep);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 204 No Content\r\n\r\n", false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.status == 204 && g.keep);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 304 Not Modified\r\nContent-Length: 9\r\n\r\n", false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.status == 304 && g.r.body.len == 0);
	webc_resp_free(&g.r);
}

static void interim_and_keep_alive(void)
{
	struct got g;

	T_CHECK(same_both_ways("HTTP/1.1 100 Continue\r\nETag: interim\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 0\r\n\r\n",
			       false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.status == 201 && g.r.n_headers == 0);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false, 0, &g));
	T_CHECK(g.rc == 1 && !g.keep);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\nContent-Length: 0\r\n\r\n", false, 0, &g));
	T_CHECK(g.rc == 1 && g.keep);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nConnection: foo, close\r\nContent-Length: 0\r\n\r\n", false, 0, &g));
	T_CHECK(g.rc == 1 && !g.keep);
	webc_resp_free(&g.r);
	/* both framings: chunked wins, the connection is not reused */
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nContent-Length: 9\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
			       false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 1 && !g.keep);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nContent-Length: 2, 2\r\n\r\nok", false, 0, &g));
	T_CHECK(g.rc == 1 && g.r.body.len == 2);
	webc_resp_free(&g.r);
}

static void refused(void)
{
	static const char *const bad[] = {
		"SSH-2.0-OpenSSH\r\n\r\n",
		"HTTP/2 200\r\n\r\n",
		"HTTP/1.1 20 OK\r\n\r\n",
		"\r\nHTTP/1.1 200 OK\r\n\r\n",
		"HTTP/1.1 101 Switching Protocols\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
		"HTTP/1.1 200 OK\r\nContent-Length: -1\r\n\r\n",
		"HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\r\n folded\r\n\r\n",
		"HTTP/1.1 200 OK\r\nBad Name: a\r\n\r\n",
		"HTTP/1.1 200 OK\r\n: a\r\n\r\n",
		"HTTP/1.1 200 OK\r\nX: a\x01b\r\n\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1000000000000000\r\n",
		"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nxy\r\n0\r\n\r\n",
	};
	struct got g;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		if (!same_both_ways(bad[i], false, 0, &g))
			T_FAIL("case %zu: whole and byte by byte differ", i);
		if (g.rc != DP_EREMOTE)
			T_FAIL("case %zu: rc %d, not DP_EREMOTE", i, g.rc);
		webc_resp_free(&g.r);
	}
	/* a NUL in the head */
	feed("HTTP/1.1 200 OK\r\nX: a\0b\r\n\r\n", 27, 0, false, 0, &g);
	T_CHECK(g.rc == DP_EREMOTE);
	webc_resp_free(&g.r);
}

static void caps(void)
{
	struct buf b;
	struct got g;

	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nContent-Length: 4\r\n\r\nabcd", false, 4, &g) && g.rc == 1);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n", false, 4, &g) && g.rc == DP_ETOOBIG);
	/* refused on the length alone: no body byte came, and it is not the EOF's DP_EIO */
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nab\r\n3\r\ncde\r\n0\r\n\r\n", false,
			       4, &g) && g.rc == DP_ETOOBIG);
	webc_resp_free(&g.r);
	T_CHECK(same_both_ways("HTTP/1.1 200 OK\r\n\r\nabcde", false, 4, &g) && g.rc == DP_ETOOBIG);
	webc_resp_free(&g.r);
	/* the head: 100 headers pass, 101 do not; 16 KiB of head do not */
	buf_init(&b, 0);
	buf_puts(&b, "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i < WEBC_HEADERS_MAX; i++)
		buf_printf(&b, "X-%d: v\r\n", i);
	buf_puts(&b, "Content-Length: 0\r\n\r\n");
	T_CHECK(same_both_ways(b.data, false, 0, &g) && g.rc == DP_EREMOTE);
	webc_resp_free(&g.r);
	buf_reset(&b);
	buf_puts(&b, "HTTP/1.1 200 OK\r\n");
	for (int i = 0; i < WEBC_HEADERS_MAX - 1; i++)
		buf_printf(&b, "X-%d: v\r\n", i);
	buf_puts(&b, "Content-Length: 0\r\n\r\n");
	T_CHECK(same_both_ways(b.data, false, 0, &g) && g.rc == 1);
	webc_resp_free(&g.r);
	buf_reset(&b);
	buf_puts(&b, "HTTP/1.1 200 OK\r\nX: ");
	while (b.len < WEBC_HEAD_MAX)
		buf_putc(&b, 'a');
	buf_puts(&b, "\r\n\r\n");
	T_CHECK(same_both_ways(b.data, false, 0, &g) && g.rc == DP_EREMOTE);
	T_CHECK(strstr(g.em.text, "passes") != NULL);
	webc_resp_free(&g.r);
	buf_free(&b);
}

static void closes_early(void)
{
	struct got g;

	feed("", 0, 0, false, 0, &g);
	T_CHECK(g.rc == DP_EIO && strstr(g.em.text, "without answering"));
	webc_resp_free(&g.r);
	feed("HTTP/1.1 200 OK\r\n", 17, 0, false, 0, &g);
	T_CHECK(g.rc == DP_EIO && strstr(g.em.text, "head"));
	webc_resp_free(&g.r);
	feed("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nabc", 42, 0, false, 0, &g);
	T_CHECK(g.rc == DP_EIO && strstr(g.em.text, "7 bytes before"));
	webc_resp_free(&g.r);
	feed("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nab", 51, 0, false, 0, &g);
	T_CHECK(g.rc == DP_EIO && strstr(g.em.text, "chunked"));
	webc_resp_free(&g.r);
}

static void urls_and_requests_refused(void)
{
	static const char *const bad[] = { "ftp://h/", "http://", "http://u@h/", "http://[::1/", "http://[zz]/",
					   "http://h:0/", "http://h:65536", "http://h:8a", "http://h h/", "https://h:/" };
	static const char *const host_hdr[] = { "Host: x", NULL };
	struct webc_opts o = { .connect_timeout_ms = 1 };
	struct webc_conn *c = NULL;
	struct webc_resp r;
	struct err_msg em;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (webc_open(bad[i], &o, &c, &em) != DP_EINVAL)
			T_FAIL("%s was taken", bad[i]);
	T_CHECK(webc_open("https://[::1]:8443/base?q", NULL, &c, &em) == 0);
	webc_close(c);
	o.ca_file = "/nonexistent/ca.pem";
	T_CHECK(webc_open("https://localhost/", &o, &c, &em) == DP_EIO);
	T_CHECK(strstr(em.text, "/nonexistent/ca.pem") != NULL);
	o.ca_file = NULL;
	T_CHECK(webc_open("http://127.0.0.1:9/", &o, &c, &em) == 0);
	T_CHECK(webc_request(c, &(struct webc_req){ .method = "G T", .target = "/" }, &r, &em) == DP_EINVAL);
	T_CHECK(r.status == 0 && r.body.len == 0);
	webc_resp_free(&r);
	T_CHECK(webc_request(c, &(struct webc_req){ .method = "GET", .target = "x" }, &r, &em) == DP_EINVAL);
	webc_resp_free(&r);
	T_CHECK(webc_request(c, &(struct webc_req){ .method = "GET", .target = "/a b" }, &r, &em) == DP_EINVAL);
	webc_resp_free(&r);
	T_CHECK(webc_request(c, &(struct webc_req){ .method = "GET", .target = "/", .headers = host_hdr }, &r, &em) ==
		DP_EINVAL);
	T_CHECK(strstr(em.text, "webc's own") != NULL);
	webc_resp_free(&r);
	T_CHECK(webc_request(c, &(struct webc_req){ .method = "GET", .target = "/",
						    .headers = (const char *const[]){ "X: a\r\nInjected: b", NULL } },
			     &r, &em) == DP_EINVAL);
	webc_resp_free(&r);
	webc_close(c);
	webc_close(NULL);
}

static void proxy_env(void)
{
	static const char *const vars[] = { "http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy",
					    "ALL_PROXY", "no_proxy", "NO_PROXY" };
	char *p;

	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
	T_CHECK(webc_proxy_env("https://ecs.eu-west-1.amazonaws.com") == NULL);
	setenv("HTTP_PROXY", "http://upper:1", 1); /* libcurl reads http_proxy in lowercase only (httpoxy) */
	T_CHECK(webc_proxy_env("http://127.0.0.1:4566") == NULL);
	setenv("HTTPS_PROXY", "http://px:3128", 1);
	p = webc_proxy_env("https://ecs.eu-west-1.amazonaws.com");
	T_STREQ(p, "http://px:3128");
	free(p);
	setenv("https_proxy", "http://lower:3128", 1);
	p = webc_proxy_env("https://ecs.eu-west-1.amazonaws.com");
	T_STREQ(p, "http://lower:3128");
	free(p);
	T_CHECK(webc_proxy_env("ftp://h/") == NULL);
	setenv("no_proxy", "localhost, .amazonaws.com", 1);
	T_CHECK(webc_proxy_env("https://ecs.eu-west-1.amazonaws.com/") == NULL);
	T_CHECK(webc_proxy_env("https://amazonaws.com") == NULL);
	p = webc_proxy_env("https://notamazonaws.com");
	T_STREQ(p, "http://lower:3128");
	free(p);
	setenv("no_proxy", "*", 1);
	T_CHECK(webc_proxy_env("https://s3.amazonaws.com") == NULL);
	unsetenv("no_proxy");
	setenv("NO_PROXY", "[::1],127.0.0.1", 1);
	T_CHECK(webc_proxy_env("https://127.0.0.1:8443/") == NULL);
	T_CHECK(webc_proxy_env("https://[::1]:8443/") == NULL);
	setenv("http_proxy", "http://plain:8080", 1);
	p = webc_proxy_env("http://10.0.0.1/");
	T_STREQ(p, "http://plain:8080");
	free(p);
	unsetenv("http_proxy");
	setenv("ALL_PROXY", "http://all:1", 1);
	p = webc_proxy_env("http://10.0.0.1/");
	T_STREQ(p, "http://all:1");
	free(p);
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++)
		unsetenv(vars[i]);
}

static void proxy_urls_and_answers(void)
{
	static const char ok[] = "HTTP/1.1 200 Connection established\r\nProxy-Agent: x\r\n\r\n";
	struct webc_proxy px;
	struct webc_conn *c = NULL;
	struct webc_opts o = { .proxy = "socks5://127.0.0.1:1080" };
	struct err_msg em;
	size_t head = 0;
	int status = 0;

	T_CHECK(webc_proxy_parse("http://u%40x:p%3Aw@proxy.corp:3128/", &px, &em) == 0);
	T_STREQ(px.host, "proxy.corp");
	T_STREQ(px.port, "3128");
	T_STREQ(px.auth, "Proxy-Authorization: Basic dUB4OnA6dw=="); /* base64("u@x:p:w") */
	webc_proxy_free(&px);
	T_CHECK(webc_proxy_parse("[::1]", &px, &em) == 0);
	T_STREQ(px.host, "::1");
	T_STREQ(px.port, "1080");
	T_CHECK(px.auth == NULL);
	webc_proxy_free(&px);
	T_CHECK(webc_proxy_parse("http://:3128", &px, &em) == DP_EINVAL);
	T_CHECK(webc_proxy_parse("http://h:0", &px, &em) == DP_EINVAL);
	T_CHECK(webc_proxy_parse("http://h:99999", &px, &em) == DP_EINVAL);
	T_CHECK(webc_open("https://localhost/", &o, &c, &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "not an http:// proxy") != NULL);
	T_CHECK(webc_proxy_answer(ok, 20, &head, &status, &em) == 0);
	T_CHECK(webc_proxy_answer(ok, sizeof(ok) - 1, &head, &status, &em) == 1);
	T_CHECK(status == 200 && head == sizeof(ok) - 1);
	T_CHECK(webc_proxy_answer("HTTP/1.0 407 Auth\r\n\r\n", 22, &head, &status, &em) == 1 && status == 407);
	T_CHECK(webc_proxy_answer("SSH-2.0-x\r\n\r\n", 15, &head, &status, &em) == DP_EREMOTE);
}

int main(void)
{
	T_BEGIN("test_webc");
	T_RUN(content_length);
	T_RUN(chunked);
	T_RUN(to_close_and_no_body);
	T_RUN(interim_and_keep_alive);
	T_RUN(refused);
	T_RUN(caps);
	T_RUN(closes_early);
	T_RUN(urls_and_requests_refused);
	T_RUN(proxy_env);
	T_RUN(proxy_urls_and_answers);
	T_END();
}
