/*
 * test_httpd.c - the agent's HTTP server (http/httpd_conn.c, httpd_accept.c)
 * over real loopback sockets: a request in progress per worker slot and 503
 * beyond them, probe slots no other request takes, connections still sending
 * their head taking no slot, the deadline for the whole head (408), the
 * minimum body rate, the cap per client address, a body refused unread (401)
 * and Expect: 100-continue; a growing file sent as it grows
 * (httpd_send_follow): whole with its last chunk, cut off without it, a chunk
 * begun from a pipe (httpd_follow_splice) and ended from the file.
 */
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "http/httpd.h"
#include "t.h"

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
static int in_slow;       /* handlers waiting in /slow */
static bool release_slow; /* let them answer */

/* A followed file of FOLLOW_BYTES, handed out FOLLOW_STEP at a time; cut after FOLLOW_CUT bytes when asked. */
#define FOLLOW_BYTES 300000
#define FOLLOW_STEP 100000
#define FOLLOW_CUT 200000
struct follow {
	int fd;
	bool cut;
};
static int follow_freed;

static long long follow_avail(void *ctx, uint64_t sent)
{
	struct follow *f = ctx;

	if (f->cut && sent >= FOLLOW_CUT)
		return -1;
	return sent >= FOLLOW_BYTES ? 0 : FOLLOW_STEP; /* never past what the file holds */
}

static void follow_free(void *ctx)
{
	struct follow *f = ctx;

	close(f->fd);
	free(f);
	__atomic_add_fetch(&follow_freed, 1, __ATOMIC_SEQ_CST);
}

/* A followed file far larger than any socket buffer (sparse), whole at once: for a client that stops reading. */
#define BIG_BYTES (256LL << 20)
static long long big_avail(void *ctx, uint64_t sent)
{
	(void)ctx;
	return (long long)sent >= BIG_BYTES ? 0 : BIG_BYTES - (long long)sent;
}

static void send_big(struct httpd_req *r)
{
	struct follow *f = calloc(1, sizeof(*f));
	FILE *tmp = tmpfile();

	f->fd = dup(fileno(tmp));
	fclose(tmp);
	if (ftruncate(f->fd, BIG_BYTES) != 0)
		abort();
	httpd_send_follow(r, 200, "application/octet-stream", f->fd, big_avail, follow_free, f, "core");
}

static void send_followed(struct httpd_req *r, bool cut)
{
	struct follow *f = calloc(1, sizeof(*f));
	char *block = calloc(1, FOLLOW_BYTES);
	FILE *tmp = tmpfile();

	memset(block, 'x', FOLLOW_BYTES);
	f->fd = dup(fileno(tmp));
	f->cut = cut;
	if (write(f->fd, block, FOLLOW_BYTES) != FOLLOW_BYTES)
		abort();
	fclose(tmp);
	free(block);
	httpd_send_follow(r, 200, "application/octet-stream", f->fd, follow_avail, follow_free, f, "core");
}

/*
 * A followed body whose first chunk begins straight from a pipe (httpd_follow_splice, from the body's own thread
 * inside avail_fn, where the socket is free) and ends from the file: the pipe holds MIXED_PIPE bytes of 'p' but
 * the chunk is declared MIXED_DECL long, so the splice stops short as on a full socket, and the rest of that chunk
 * must be the file's first bytes ('f'), with no size line between.
 */
#define MIXED_PIPE 50000
#define MIXED_DECL 80000
#define MIXED_FILE 100000
struct mixed {
	struct httpd_req *r;
	int fd, p[2];
	long long took; /* what the splice moved; -2 before it ran */
};

static long long mixed_avail(void *ctx, uint64_t sent)
{
	struct mixed *m = ctx;

	if (m->took == -2)
		m->took = httpd_follow_splice(m->r, m->p[0], MIXED_DECL, 0);
	if (m->took != MIXED_PIPE)
		return -1;
	return sent >= MIXED_FILE ? 0 : (long long)(MIXED_FILE - sent);
}

static void mixed_free(void *ctx)
{
	struct mixed *m = ctx;

	close(m->fd);
	close(m->p[0]);
	free(m);
}

static void send_mixed(struct httpd_req *r)
{
	struct mixed *m = calloc(1, sizeof(*m));
	char *block = malloc(MIXED_FILE);
	FILE *tmp = tmpfile();

	m->r = r;
	m->took = -2;
	m->fd = dup(fileno(tmp));
	fclose(tmp);
	memset(block, 'f', MIXED_FILE);
	if (write(m->fd, block, MIXED_FILE) != MIXED_FILE || pipe(m->p) != 0)
		abort();
	memset(block, 'p', MIXED_PIPE);
	if (fcntl(m->p[1], F_SETPIPE_SZ, 1 << 20) < 0 || write(m->p[1], block, MIXED_PIPE) != MIXED_PIPE)
		abort();
	close(m->p[1]);
	free(block);
	httpd_send_follow(r, 200, "application/octet-stream", m->fd, mixed_avail, mixed_free, m, "core");
}

static void handler(void *ctx, struct httpd_req *r)
{
	(void)ctx;
	if (strcmp(httpd_path(r), "/mixed") == 0) {
		send_mixed(r);
		return;
	}
	if (strcmp(httpd_path(r), "/big") == 0) {
		send_big(r);
		return;
	}
	if (strcmp(httpd_path(r), "/follow") == 0 || strcmp(httpd_path(r), "/follow-cut") == 0) {
		send_followed(r, strcmp(httpd_path(r), "/follow-cut") == 0);
		return;
	}
	if (strcmp(httpd_path(r), "/slow") == 0) {
		pthread_mutex_lock(&mu);
		in_slow++;
		pthread_cond_broadcast(&cv);
		while (!release_slow)
			pthread_cond_wait(&cv, &mu);
		in_slow--;
		pthread_mutex_unlock(&mu);
	}
	httpd_send(r, 200, "text/plain", "ok", 2);
}

static bool is_probe(const char *path)
{
	return strcmp(path, "/probe") == 0;
}

static bool admit_body(void *ctx, struct httpd_req *r)
{
	(void)ctx;
	if (httpd_header(r, "X-Ok"))
		return true;
	httpd_problem(r, 401, "Unauthorized", "no X-Ok");
	return false;
}

static bool takes_body(const char *path)
{
	return strcmp(path, "/post") == 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static int port;
static unsigned idle_s; /* the next start's idle timeout, 0 for the default */

/* Start a server on a port the system picks (port 0), which httpd_bound_urls names. */
static struct httpd *start(unsigned max_conns, unsigned per_peer, unsigned head_s)
{
	struct httpd_config cfg = { .urls = "http://127.0.0.1:0", .max_connections = max_conns,
				    .max_per_peer = per_peer, .head_timeout_s = head_s, .max_body = 4096,
				    .takes_body = takes_body, .is_probe = is_probe, .admit_body = admit_body,
				    .idle_timeout_s = idle_s };
	struct httpd *d = NULL;
	struct err_msg em;
	struct buf bound;

	port = 0;
	if (httpd_start(&cfg, handler, NULL, &d, &em) != 0) {
		fprintf(stderr, "httpd_start: %s\n", em.text);
		return NULL;
	}
	buf_init(&bound, 0);
	httpd_bound_urls(d, &bound);
	if (bound.data == NULL || sscanf(bound.data, "http://127.0.0.1:%d", &port) != 1 || port <= 0) {
		fprintf(stderr, "httpd_bound_urls: '%s'\n", bound.data ? bound.data : "");
		httpd_free(d);
		d = NULL; /* the callers' T_CHECK(d != NULL) fails */
	}
	buf_free(&bound);
	return d;
}

/* A connection from source address src (127.0.0.x), with data (may be NULL) sent. */
static int dial(const char *src, const char *data)
{
	struct sockaddr_in from = { .sin_family = AF_INET }, to = { .sin_family = AF_INET };
	int s = socket(AF_INET, SOCK_STREAM, 0);

	inet_pton(AF_INET, src, &from.sin_addr);
	inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
	to.sin_port = htons((uint16_t)port);
	if (bind(s, (struct sockaddr *)&from, sizeof(from)) != 0 || connect(s, (struct sockaddr *)&to, sizeof(to)) != 0) {
		close(s);
		return -1;
	}
	if (data && send(s, data, strlen(data), MSG_NOSIGNAL) < 0) {
		close(s);
		return -1;
	}
	return s;
}

/* Read the whole answer (until the server closes, at most wait_s); its status, 0 for none. */
static int answer(int s, double wait_s, char *out, size_t cap)
{
	size_t n = 0;
	double end = now_s() + wait_s;
	int st = 0;

	out[0] = '\0';
	for (;;) {
		struct pollfd pf = { .fd = s, .events = POLLIN };
		int ms = (int)((end - now_s()) * 1000);
		ssize_t k;

		if (ms <= 0 || poll(&pf, 1, ms) <= 0)
			break;
		k = recv(s, out + n, cap - 1 - n, 0);
		if (k <= 0)
			break;
		n += (size_t)k;
		out[n] = '\0';
	}
	close(s);
	if (sscanf(out, "HTTP/1.1 %d", &st) != 1)
		st = 0;
	return st;
}

static int get(const char *src, const char *path, char *out, size_t cap)
{
	char req[256];

	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", path);
	return answer(dial(src, req), 5, out, cap);
}

static void wait_in_slow(int n)
{
	pthread_mutex_lock(&mu);
	while (in_slow < n)
		pthread_cond_wait(&cv, &mu);
	pthread_mutex_unlock(&mu);
}

static void set_release(bool v)
{
	pthread_mutex_lock(&mu);
	release_slow = v;
	pthread_cond_broadcast(&cv);
	pthread_mutex_unlock(&mu);
}

static void slots_and_probes(void)
{
	struct httpd *d = start(2, 64, 10);
	static char out[8192];
	int slow[2], idle[50];

	T_CHECK(d != NULL);
	set_release(false);
	for (int i = 0; i < 50; i++) /* connections that never send a byte take no slot */
		idle[i] = dial("127.0.0.2", NULL);
	T_CHECK(get("127.0.0.1", "/x", out, sizeof(out)) == 200);
	for (int i = 0; i < 2; i++)
		slow[i] = dial("127.0.0.1", "GET /slow HTTP/1.1\r\n\r\n");
	wait_in_slow(2);
	T_CHECK(get("127.0.0.1", "/x", out, sizeof(out)) == 503);
	T_CHECK(strstr(out, "Retry-After: 1\r\n") != NULL);
	T_CHECK(strstr(out, "2 requests are in progress") != NULL);
	T_CHECK(get("127.0.0.1", "/probe", out, sizeof(out)) == 200);
	set_release(true);
	for (int i = 0; i < 2; i++)
		T_CHECK(answer(slow[i], 5, out, sizeof(out)) == 200);
	T_CHECK(get("127.0.0.1", "/x", out, sizeof(out)) == 200);
	for (int i = 0; i < 50; i++)
		close(idle[i]);
	httpd_free(d);
}

static void head_deadline(void)
{
	struct httpd *d = start(4, 64, 1);
	static char out[8192];
	int s = dial("127.0.0.1", "GET /x HTTP/1.1\r\n");
	double t0 = now_s(), took;

	T_CHECK(d != NULL && s >= 0);
	/* a byte every 0.3 s: a timeout per read would never fire; the head's deadline does */
	for (int i = 0; i < 20 && now_s() - t0 < 3; i++) {
		struct pollfd pf = { .fd = s, .events = POLLIN };

		if (poll(&pf, 1, 300) > 0)
			break;
		if (send(s, "X", 1, MSG_NOSIGNAL) < 0)
			break;
	}
	T_CHECK(answer(s, 3, out, sizeof(out)) == 408);
	took = now_s() - t0;
	T_CHECK(took > 0.8 && took < 3);
	T_CHECK(strstr(out, "did not arrive within 1 s") != NULL);
	httpd_free(d);
}

static void body_rate(void)
{
	struct httpd *d = start(4, 64, 10);
	static char out[8192];
	/* one byte of 1200, then nothing: behind 240 bytes/s as soon as the 5 s grace is over */
	int s = dial("127.0.0.1", "POST /post HTTP/1.1\r\nX-Ok: 1\r\nContent-Length: 1200\r\n\r\n{");
	double t0 = now_s(), took;

	T_CHECK(d != NULL && s >= 0);
	T_CHECK(answer(s, 20, out, sizeof(out)) == 408);
	took = now_s() - t0;
	T_CHECK(took > 4.5 && took < 8);
	T_CHECK(strstr(out, "slower than 240 bytes a second (1 of 1200 bytes)") != NULL);
	s = dial("127.0.0.1", "POST /post HTTP/1.1\r\nX-Ok: 1\r\nContent-Length: 2\r\n\r\n{}");
	T_CHECK(answer(s, 5, out, sizeof(out)) == 200);
	httpd_free(d);
}

/* admit_body refuses a body unread (the agent: no token, 401); Expect: 100-continue gets its 100 */
static void body_admission(void)
{
	struct httpd *d = start(4, 64, 10);
	static char out[8192];
	int s = dial("127.0.0.1", "POST /post HTTP/1.1\r\nContent-Length: 4000\r\n\r\n");
	double t0 = now_s();

	T_CHECK(d != NULL && s >= 0);
	T_CHECK(answer(s, 5, out, sizeof(out)) == 401);
	T_CHECK(now_s() - t0 < 2);
	s = dial("127.0.0.1", "POST /post HTTP/1.1\r\nX-Ok: 1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\n");
	{
		char b[64] = "";
		struct pollfd pf = { .fd = s, .events = POLLIN };
		ssize_t k = poll(&pf, 1, 3000) > 0 ? recv(s, b, sizeof(b) - 1, 0) : -1;

		T_CHECK(k > 0 && strncmp(b, "HTTP/1.1 100 Continue\r\n\r\n", 25) == 0);
	}
	T_CHECK(send(s, "{}", 2, MSG_NOSIGNAL) == 2);
	T_CHECK(answer(s, 5, out, sizeof(out)) == 200);
	httpd_free(d);
}

static void per_peer(void)
{
	struct httpd *d = start(4, 3, 10);
	static char out[8192];
	int s[5], closed = 0;

	T_CHECK(d != NULL);
	for (int i = 0; i < 5; i++)
		s[i] = dial("127.0.0.3", NULL);
	usleep(300000);
	for (int i = 0; i < 5; i++) { /* the oldest two were closed for the newest */
		struct pollfd pf = { .fd = s[i], .events = POLLIN };
		char c;

		if (poll(&pf, 1, 0) > 0 && recv(s[i], &c, 1, 0) == 0)
			closed += 1 + (i < 2) * 10;
	}
	T_CHECK(closed == 22);
	/* from that address a new request still gets read and served; another address is untouched */
	T_CHECK(get("127.0.0.3", "/x", out, sizeof(out)) == 200);
	T_CHECK(get("127.0.0.4", "/x", out, sizeof(out)) == 200);
	for (int i = 0; i < 5; i++)
		close(s[i]);
	httpd_free(d);
}

/* The body's bytes (chunked framing removed) and whether the last chunk came; -1 on bad framing. */
static long dechunk(const char *body, bool *last)
{
	long total = 0;

	*last = false;
	for (;;) {
		char *end;
		long n = strtol(body, &end, 16);

		if (end == body || strncmp(end, "\r\n", 2) != 0)
			return *body ? -1 : total;
		if (n == 0) {
			*last = strcmp(end, "\r\n\r\n") == 0;
			return total;
		}
		body = end + 2;
		if ((long)strnlen(body, (size_t)n + 2) < n + 2 || strncmp(body + n, "\r\n", 2) != 0)
			return total + (long)strnlen(body, (size_t)n); /* cut inside a chunk */
		total += n;
		body += n + 2;
	}
}

static void follow(void)
{
	static char out[FOLLOW_BYTES + 4096];
	struct httpd *d = start(4, 64, 10);
	const char *body;
	bool last;
	int st;

	T_CHECK(d != NULL);
	st = get("127.0.0.1", "/follow", out, sizeof(out));
	body = strstr(out, "\r\n\r\n");
	T_CHECK(st == 200 && strstr(out, "Transfer-Encoding: chunked\r\n") && !strstr(out, "Content-Length"));
	T_CHECK(body && dechunk(body + 4, &last) == FOLLOW_BYTES && last);
	/* cut: the bytes before the cut, and no last chunk, so the client knows */
	st = get("127.0.0.1", "/follow-cut", out, sizeof(out));
	body = strstr(out, "\r\n\r\n");
	T_CHECK(st == 200 && body && dechunk(body + 4, &last) == FOLLOW_CUT && !last);
	/* HTTP/1.0: no framing (the agent sends such a client the whole file instead: httpd_chunked) */
	st = answer(dial("127.0.0.1", "GET /follow HTTP/1.0\r\n\r\n"), 5, out, sizeof(out));
	body = strstr(out, "\r\n\r\n");
	T_CHECK(body && !strstr(out, "Transfer-Encoding") && strlen(body + 4) == FOLLOW_BYTES);
	/* a chunk begun straight from a pipe and ended from the file: one size line, the bytes in order */
	st = get("127.0.0.1", "/mixed", out, sizeof(out));
	body = strstr(out, "\r\n\r\n");
	T_CHECK(st == 200 && body && strncmp(body + 4, "13880\r\n", 7) == 0);
	T_CHECK(body && dechunk(body + 4, &last) == MIXED_PIPE + MIXED_FILE && last);
	T_CHECK(body && body[4 + 7] == 'p' && body[4 + 7 + MIXED_PIPE - 1] == 'p' && body[4 + 7 + MIXED_PIPE] == 'f' &&
		body[4 + 7 + MIXED_DECL] == '\r');
	httpd_free(d);
	T_CHECK(__atomic_load_n(&follow_freed, __ATOMIC_SEQ_CST) == 3);
}

/* A client that takes the head and stops reading: cut off within a few idle timeouts, its file freed. Before,
 * the kernel's trickle into a growing send buffer kept each send making progress, and the answer (a dump, and
 * its slot) was held for minutes. */
static void stalled(void)
{
	struct httpd *d;
	int s, rcv = 4096, freed = __atomic_load_n(&follow_freed, __ATOMIC_SEQ_CST);
	char head[512];
	const char *req = "GET /big HTTP/1.1\r\nHost: x\r\n\r\n";
	double t0;

	idle_s = 2;
	d = start(4, 64, 10);
	idle_s = 0;
	T_CHECK(d != NULL);
	s = dial("127.0.0.1", NULL);
	T_CHECK(s >= 0);
	setsockopt(s, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
	T_CHECK(send(s, req, strlen(req), MSG_NOSIGNAL) == (ssize_t)strlen(req));
	T_CHECK(recv(s, head, sizeof(head) - 1, 0) > 0);
	t0 = now_s();
	while (__atomic_load_n(&follow_freed, __ATOMIC_SEQ_CST) == freed && now_s() - t0 < 30)
		usleep(100000);
	fprintf(stderr, "stalled: cut after %.1f s (idle timeout 2 s)\n", now_s() - t0);
	T_CHECK(__atomic_load_n(&follow_freed, __ATOMIC_SEQ_CST) == freed + 1 && now_s() - t0 < 5);
	close(s);
	httpd_free(d);
}

int main(void)
{
	t_file_name = "test_httpd";
	T_RUN(slots_and_probes);
	T_RUN(head_deadline);
	T_RUN(per_peer);
	T_RUN(body_rate);
	T_RUN(body_admission);
	T_RUN(follow);
	T_RUN(stalled);
	return t_failed_cases ? 1 : 0;
}
