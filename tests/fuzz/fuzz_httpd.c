/*
 * fuzz_httpd.c - libFuzzer target for the agent's HTTP server as a whole
 * (http/httpd_accept.c, httpd_conn.c and httpd.c): the bytes of one connection, from anyone
 * who can reach the agent's port, go to a real server on a loopback socket,
 * whose acceptor reads the head and any body without blocking, checks the
 * framing (Content-Length, Transfer-Encoding), answers or hands the request
 * to a worker, and lingers. AddressSanitizer and UndefinedBehaviorSanitizer
 * watch every thread of it; the answer must be an HTTP/1.1 status line, or
 * nothing when the bytes hold no complete head.
 */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "http/http_parse.h"
#include "http/httpd.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int port;

static void handler(void *ctx, struct httpd_req *r)
{
	size_t n;
	const char *body = httpd_body(r, &n);
	volatile size_t sum = 0;

	(void)ctx;
	for (size_t i = 0; i < n; i++) /* a body the server kept is whole and in bounds */
		sum += (unsigned char)body[i];
	if (httpd_query(r, "q"))
		sum += strlen(httpd_query(r, "q"));
	httpd_send(r, 200, "text/plain", "ok", 2);
}

static bool takes_body(const char *path)
{
	return strcmp(path, "/post") == 0;
}

static bool is_probe(const char *path)
{
	return strcmp(path, "/healthz") == 0;
}

static void start(void)
{
	static struct httpd *d;
	struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	socklen_t al = sizeof(a);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	char urls[64];
	struct httpd_config cfg = { .urls = urls, .max_body = 4096, .takes_body = takes_body, .is_probe = is_probe,
				    .head_timeout_s = 1, .idle_timeout_s = 1, .header_memory = 8192 };
	struct err_msg em;

	bind(s, (struct sockaddr *)&a, sizeof(a));
	getsockname(s, (struct sockaddr *)&a, &al);
	port = ntohs(a.sin_port);
	close(s);
	snprintf(urls, sizeof(urls), "http://127.0.0.1:%d", port);
	if (httpd_start(&cfg, handler, NULL, &d, &em) != 0) {
		fprintf(stderr, "httpd_start: %s\n", em.text);
		abort();
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct sockaddr_in to = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
	char out[4096];
	size_t got = 0;
	int s;

	if (port == 0)
		start();
	if (size > 16384)
		return 0;
	to.sin_port = htons((uint16_t)port);
	s = socket(AF_INET, SOCK_STREAM, 0);
	if (connect(s, (struct sockaddr *)&to, sizeof(to)) != 0)
		abort();
	if (size && send(s, data, size, MSG_NOSIGNAL) < 0) {
		close(s);
		return 0;
	}
	shutdown(s, SHUT_WR);
	for (;;) { /* the answer, or the close; a head that never ends is closed (no answer) at once on EOF */
		struct pollfd pf = { .fd = s, .events = POLLIN };
		ssize_t k;

		if (poll(&pf, 1, 3000) <= 0) {
			fprintf(stderr, "no answer and no close within 3 s\n");
			abort();
		}
		k = recv(s, out + got, sizeof(out) - 1 - got, 0);
		if (k <= 0)
			break;
		got += (size_t)k;
		if (got == sizeof(out) - 1)
			break;
	}
	close(s);
	out[got] = '\0';
	if (got && strncmp(out, "HTTP/1.1 ", 9) != 0) {
		fprintf(stderr, "not an HTTP/1.1 answer: %.80s\n", out);
		abort();
	}
	if (got == 0 && http_head_length((const char *)data, size) != 0 && size < 8192) {
		/* a whole head always gets an answer (the body, if it promised one, ended early: 400) */
		fprintf(stderr, "a whole head got no answer\n");
		abort();
	}
	return 0;
}
