/*
 * webc_driver.c - webc (cloud/webc.h) driven from the command line for
 * tests/integration/webc.sh: requests one after another on one webc_conn,
 * each result on one line. Linked dynamically (libssl by dlopen) and, for
 * the static build's TLS, statically with build/static/tlsbase_linked.o.
 *
 *   webc_driver [OPTIONS] BASE-URL METHOD TARGET [METHOD TARGET]...
 *     --ca FILE          ca_file              --insecure          insecure
 *     --allow A,B        allow only these addresses (as inet_ntop writes them); each
 *                        address asked about goes to stderr as "allow ADDR yes|no"
 *     --connect-timeout MS, --io-timeout MS, --answer-timeout MS, --max-resp N
 *     --want NAME        keep that answer header (repeatable)
 *     -H "Name: value"   send that header (repeatable)
 *     --data TEXT        a body in memory     --body-file FILE    a streamed body (body_fn)
 *                        (for PUT and POST requests)
 *     --body-fail-at N   body_fn fails (DP_EIO) once N bytes have been given
 *     --out FILE         the last answer's body goes there
 *     --pause MS         between requests
 *   One line per request:
 *     "I status=S len=L ms=T [name=value]..."   or   "I error=CODE ms=T: MESSAGE"
 *   Exit 0 when every request got an answer, 1 otherwise.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "mem.h"
#include "cloud/webc.h"

#define MAX_LIST 16

static const char *allow_list;

static bool allow(void *ctx, const char *host, const struct sockaddr *sa, socklen_t len)
{
	char a[INET6_ADDRSTRLEN] = "?";
	const void *p = sa->sa_family == AF_INET6 ? (const void *)&((const struct sockaddr_in6 *)sa)->sin6_addr
						  : (const void *)&((const struct sockaddr_in *)sa)->sin_addr;
	bool ok = false;

	(void)ctx;
	(void)len;
	inet_ntop(sa->sa_family, p, a, sizeof(a));
	for (const char *s = allow_list; s && *s;) {
		size_t n = strcspn(s, ",");

		ok |= n == strlen(a) && strncmp(s, a, n) == 0;
		s += n + (s[n] == ',');
	}
	fprintf(stderr, "allow %s %s (%s)\n", a, ok ? "yes" : "no", host);
	return ok;
}

struct body {
	int fd;
	long long given, fail_at;
};

static long from_file(void *ctx, char *out, size_t max)
{
	struct body *b = ctx;
	ssize_t n;

	if (b->fail_at >= 0 && b->given >= b->fail_at)
		return DP_EIO;
	n = read(b->fd, out, max);
	if (n < 0)
		return DP_EIO;
	b->given += n;
	return (long)n;
}

static void usage(void)
{
	fprintf(stderr, "usage: webc_driver [OPTIONS] BASE-URL METHOD TARGET [METHOD TARGET]...\n");
	exit(2);
}

int main(int argc, char **argv)
{
	struct webc_opts o = { 0 };
	const char *headers[MAX_LIST + 1] = { 0 }, *want[MAX_LIST + 1] = { 0 };
	const char *data = NULL, *body_file = NULL, *out = NULL;
	size_t nh = 0, nw = 0, max_resp = 0;
	long pause_ms = 0;
	long long fail_at = -1;
	struct webc_conn *c;
	struct err_msg em;
	int i = 1, failed = 0;

	for (; i < argc && argv[i][0] == '-'; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--insecure") == 0) {
			o.insecure = true;
			continue;
		}
		if (v == NULL)
			usage();
		i++;
		if (strcmp(a, "--ca") == 0)
			o.ca_file = v;
		else if (strcmp(a, "--allow") == 0)
			allow_list = v, o.allow = allow;
		else if (strcmp(a, "--connect-timeout") == 0)
			o.connect_timeout_ms = atol(v);
		else if (strcmp(a, "--io-timeout") == 0)
			o.io_timeout_ms = atol(v);
		else if (strcmp(a, "--answer-timeout") == 0)
			o.answer_timeout_ms = atol(v);
		else if (strcmp(a, "--max-resp") == 0)
			max_resp = (size_t)atoll(v);
		else if (strcmp(a, "--want") == 0 && nw < MAX_LIST)
			want[nw++] = v;
		else if (strcmp(a, "-H") == 0 && nh < MAX_LIST)
			headers[nh++] = v;
		else if (strcmp(a, "--data") == 0)
			data = v;
		else if (strcmp(a, "--body-file") == 0)
			body_file = v;
		else if (strcmp(a, "--body-fail-at") == 0)
			fail_at = atoll(v);
		else if (strcmp(a, "--out") == 0)
			out = v;
		else if (strcmp(a, "--proxy") == 0)
			o.proxy = v;
		else if (strcmp(a, "--pause") == 0)
			pause_ms = atol(v);
		else
			usage();
	}
	if (i + 3 > argc || (argc - i - 1) % 2 != 0)
		usage();
	if (webc_open(argv[i], &o, &c, &em) != 0) {
		printf("open error: %s\n", em.text);
		return 1;
	}
	for (int k = i + 1, n = 1; k + 1 < argc; k += 2, n++) {
		struct webc_req req = { .method = argv[k], .target = argv[k + 1], .headers = nh ? headers : NULL,
					.max_resp = max_resp, .want_headers = want };
		struct body b = { .fd = -1, .fail_at = fail_at };
		struct webc_resp resp;
		long long t0 = clock_ms();
		int rc;

		bool sends = strcmp(req.method, "PUT") == 0 || strcmp(req.method, "POST") == 0;

		if (!sends) {
		} else if (data) {
			req.body = data;
			req.body_len = strlen(data);
		} else if (body_file) {
			if ((b.fd = open(body_file, O_RDONLY | O_CLOEXEC)) < 0) {
				perror(body_file);
				return 1;
			}
			req.body_len = (size_t)lseek(b.fd, 0, SEEK_END);
			lseek(b.fd, 0, SEEK_SET);
			req.body_fn = from_file;
			req.body_ctx = &b;
		}
		rc = webc_request(c, &req, &resp, &em);
		if (rc != 0) {
			printf("%d error=%s ms=%lld: %s\n", n, err_str(rc), clock_ms() - t0, em.text);
			failed = 1;
		} else {
			printf("%d status=%d len=%zu ms=%lld", n, resp.status, resp.body.len, clock_ms() - t0);
			for (size_t h = 0; h < resp.n_headers; h++)
				printf(" [%s]", resp.headers[h]);
			printf("\n");
			if (out) {
				FILE *f = fopen(out, "wb");

				if (f == NULL || fwrite(resp.body.data ? resp.body.data : "", 1, resp.body.len, f) != resp.body.len)
					failed = 1;
				if (f)
					fclose(f);
			}
		}
		fflush(stdout);
		webc_resp_free(&resp);
		if (b.fd >= 0)
			close(b.fd);
		if (pause_ms > 0) {
			struct timespec ts = { pause_ms / 1000, (pause_ms % 1000) * 1000000L };

			nanosleep(&ts, NULL);
		}
	}
	webc_close(c);
	return failed;
}
