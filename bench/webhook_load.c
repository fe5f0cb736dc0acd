/* bench/webhook_load.c - open-loop HTTPS load at a fixed request rate, over keep-alive TLS
 * connections, for bench/webhook.sh. Measures and prints; never gates.
 *
 *   webhook_load -r RATE -c CONNS -d SECONDS [-w WARMUP_S] [-o RAWFILE] CAFILE PORT PATH BODYFILE
 *
 * CONNS threads, one keep-alive TLS connection each (GnuTLS, TLS 1.2 or 1.3, the server's
 * certificate checked against CAFILE for 127.0.0.1), POST PATH with BODYFILE to 127.0.0.1:PORT.
 * Request i of the run is due at t0 + i / RATE; connection k sends requests k, k + CONNS, ...
 * A request is sent at its due time, or at once if the connection is still busy with the one
 * before (then its wait counts): latency = last byte of the answer - due time (no coordinated
 * omission); service = last byte - actual send. The first WARMUP_S seconds are not counted.
 * The run stops at SECONDS (with 100 ms of grace): requests still due then (the server fell
 * behind) are counted as never sent, and their latency is not in the percentiles.
 * Prints one summary line; RAWFILE gets "latency_us service_us status" per counted request.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <errno.h>
#include <gnutls/gnutls.h>
#include <gnutls/x509.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <arpa/inet.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct sample {
	unsigned lat_us, svc_us;
	unsigned short status;
};

static double rate, dur_s, warm_s;
static int conns, port;
static const char *cafile, *path;
static char *req;
static size_t req_len;
static long long t0;
static gnutls_certificate_credentials_t cred;

struct worker {
	int k;
	struct sample *s;
	size_t n, cap;
	long errors, reconnects, non200, missed, completed;
	pthread_t th;
};

static long long now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void sleep_until(long long ns)
{
	struct timespec ts = { .tv_sec = ns / 1000000000LL, .tv_nsec = ns % 1000000000LL };
	while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
		;
}

struct conn {
	int fd;
	gnutls_session_t s;
	char buf[65536];
	size_t have;
};

static void conn_close(struct conn *c)
{
	if (c->s) {
		gnutls_deinit(c->s);
		c->s = NULL;
	}
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
	c->have = 0;
}

static int conn_open(struct conn *c)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((unsigned short)port) };
	int one = 1, rc;

	c->fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	c->have = 0;
	inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
	if (c->fd < 0 || connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("webhook_load: connect");
		conn_close(c);
		return -1;
	}
	setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	gnutls_init(&c->s, GNUTLS_CLIENT);
	gnutls_set_default_priority(c->s);
	gnutls_credentials_set(c->s, GNUTLS_CRD_CERTIFICATE, cred);
	gnutls_session_set_verify_cert(c->s, "127.0.0.1", 0);
	gnutls_transport_set_int(c->s, c->fd);
	do
		rc = gnutls_handshake(c->s);
	while (rc < 0 && !gnutls_error_is_fatal(rc));
	if (rc < 0) {
		fprintf(stderr, "webhook_load: TLS handshake: %s\n", gnutls_strerror(rc));
		conn_close(c);
		return -1;
	}
	return 0;
}

static int send_all(struct conn *c)
{
	size_t off = 0;
	while (off < req_len) {
		ssize_t n = gnutls_record_send(c->s, req + off, req_len - off);
		if (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN)
			continue;
		if (n <= 0)
			return -1;
		off += (size_t)n;
	}
	return 0;
}

static ssize_t recv_some(struct conn *c)
{
	ssize_t n;
	if (c->have == sizeof(c->buf))
		return -1;
	do
		n = gnutls_record_recv(c->s, c->buf + c->have, sizeof(c->buf) - c->have);
	while (n == GNUTLS_E_INTERRUPTED || n == GNUTLS_E_AGAIN);
	if (n > 0)
		c->have += (size_t)n;
	return n;
}

/* One answer: status, or -1 on error / close. Needs Content-Length (both servers send it). */
static int read_answer(struct conn *c, int *close_after)
{
	char *end;
	size_t hlen, total;
	long clen = -1;
	int status;

	for (;;) {
		end = memmem(c->buf, c->have, "\r\n\r\n", 4);
		if (end)
			break;
		if (recv_some(c) <= 0)
			return -1;
	}
	hlen = (size_t)(end - c->buf) + 4;
	if (sscanf(c->buf, "HTTP/1.%*d %d", &status) != 1)
		return -1;
	*close_after = 0;
	for (char *p = c->buf; p < end;) {
		char *eol = memmem(p, (size_t)(end - p), "\r\n", 2);
		if (!eol)
			eol = end;
		if (strncasecmp(p, "content-length:", 15) == 0)
			clen = strtol(p + 15, NULL, 10);
		else if (strncasecmp(p, "connection:", 11) == 0 && memmem(p, (size_t)(eol - p), "close", 5))
			*close_after = 1;
		p = eol + 2;
	}
	if (clen < 0) {
		fprintf(stderr, "webhook_load: an answer without Content-Length\n");
		return -1;
	}
	total = hlen + (size_t)clen;
	if (total > sizeof(c->buf)) { /* a long body: count it off in chunks */
		size_t left = total;
		while (c->have < left) {
			left -= c->have;
			c->have = 0;
			if (recv_some(c) <= 0)
				return -1;
		}
		memmove(c->buf, c->buf + left, c->have - left);
		c->have -= left;
		return status;
	}
	while (c->have < total)
		if (recv_some(c) <= 0)
			return -1;
	memmove(c->buf, c->buf + total, c->have - total);
	c->have -= total;
	return status;
}

static void *run(void *arg)
{
	struct worker *w = arg;
	struct conn c = { .fd = -1 };
	long long period = (long long)(1e9 / rate), end = t0 + (long long)(dur_s * 1e9),
		  warm = t0 + (long long)(warm_s * 1e9);

	prctl(PR_SET_TIMERSLACK, 1UL);
	if (conn_open(&c) != 0) {
		w->errors++;
		return NULL;
	}
	for (long long i = w->k;; i += conns) {
		long long due = t0 + i * period, sent, done;
		int st, close_after = 0;

		if (due >= end)
			break;
		sleep_until(due);
		if (now_ns() >= end + 100000000LL) { /* still behind 100 ms after the end: what is due was never sent */
			for (; t0 + i * period < end; i += conns)
				w->missed++;
			break;
		}
		if (c.fd < 0) {
			w->reconnects++;
			if (conn_open(&c) != 0) {
				w->errors++;
				continue;
			}
		}
		sent = now_ns();
		st = send_all(&c) == 0 ? read_answer(&c, &close_after) : -1;
		done = now_ns();
		if (st < 0) {
			w->errors++;
			conn_close(&c);
			continue;
		}
		if (close_after)
			conn_close(&c);
		w->completed++;
		if (due < warm)
			continue;
		if (st != 200)
			w->non200++;
		if (w->n == w->cap) {
			w->cap = w->cap ? 2 * w->cap : 4096;
			w->s = realloc(w->s, w->cap * sizeof(*w->s));
			if (!w->s)
				abort();
		}
		w->s[w->n++] = (struct sample){ (unsigned)((done - due) / 1000), (unsigned)((done - sent) / 1000),
						(unsigned short)st };
	}
	if (c.s)
		gnutls_bye(c.s, GNUTLS_SHUT_WR);
	conn_close(&c);
	return NULL;
}

static int cmp_u(const void *a, const void *b)
{
	unsigned x = *(const unsigned *)a, y = *(const unsigned *)b;
	return x < y ? -1 : x > y;
}

static double pct(const unsigned *v, size_t n, double p)
{
	size_t i;
	if (n == 0)
		return 0;
	i = (size_t)(p / 100.0 * (double)n + 0.999999);
	if (i < 1)
		i = 1;
	if (i > n)
		i = n;
	return v[i - 1] / 1000.0;
}

static void usage(void)
{
	fprintf(stderr, "usage: webhook_load -r RATE -c CONNS -d SECONDS [-w WARMUP_S] [-o RAWFILE] CAFILE PORT PATH BODYFILE\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *raw = NULL;
	struct worker *ws;
	FILE *f;
	char *body;
	long blen;
	int opt, rc;
	size_t n = 0, k;
	long errors = 0, reconnects = 0, non200 = 0, missed = 0, completed = 0;
	unsigned *lat, *svc;

	rate = 1000, conns = 4, dur_s = 10, warm_s = 1;
	while ((opt = getopt(argc, argv, "r:c:d:w:o:")) != -1) {
		switch (opt) {
		case 'r': rate = atof(optarg); break;
		case 'c': conns = atoi(optarg); break;
		case 'd': dur_s = atof(optarg); break;
		case 'w': warm_s = atof(optarg); break;
		case 'o': raw = optarg; break;
		default: usage();
		}
	}
	if (argc - optind != 4 || rate <= 0 || conns < 1 || dur_s <= warm_s)
		usage();
	cafile = argv[optind];
	port = atoi(argv[optind + 1]);
	path = argv[optind + 2];
	if (!(f = fopen(argv[optind + 3], "rb")) || fseek(f, 0, SEEK_END) != 0 || (blen = ftell(f)) < 0) {
		perror(argv[optind + 3]);
		return 1;
	}
	rewind(f);
	body = malloc((size_t)blen + 1);
	if (fread(body, 1, (size_t)blen, f) != (size_t)blen) {
		perror(argv[optind + 3]);
		return 1;
	}
	fclose(f);
	req = malloc((size_t)blen + 512);
	req_len = (size_t)snprintf(req, 512,
				   "POST %s HTTP/1.1\r\nHost: 127.0.0.1:%d\r\nContent-Type: application/json\r\n"
				   "Accept: application/json\r\nContent-Length: %ld\r\n\r\n",
				   path, port, blen);
	memcpy(req + req_len, body, (size_t)blen);
	req_len += (size_t)blen;

	gnutls_global_init();
	gnutls_certificate_allocate_credentials(&cred);
	if ((rc = gnutls_certificate_set_x509_trust_file(cred, cafile, GNUTLS_X509_FMT_PEM)) <= 0) {
		fprintf(stderr, "webhook_load: %s: %s\n", cafile, rc < 0 ? gnutls_strerror(rc) : "no certificate");
		return 1;
	}
	ws = calloc((size_t)conns, sizeof(*ws));
	t0 = now_ns() + 50000000LL; /* 50 ms to connect all before the first is due */
	for (int i = 0; i < conns; i++) {
		ws[i].k = i;
		pthread_create(&ws[i].th, NULL, run, &ws[i]);
	}
	for (int i = 0; i < conns; i++) {
		pthread_join(ws[i].th, NULL);
		n += ws[i].n;
		errors += ws[i].errors;
		reconnects += ws[i].reconnects;
		non200 += ws[i].non200;
		missed += ws[i].missed;
		completed += ws[i].completed;
	}
	lat = malloc((n + 1) * sizeof(*lat));
	svc = malloc((n + 1) * sizeof(*svc));
	f = raw ? fopen(raw, "w") : NULL;
	k = 0;
	for (int i = 0; i < conns; i++)
		for (size_t j = 0; j < ws[i].n; j++, k++) {
			lat[k] = ws[i].s[j].lat_us;
			svc[k] = ws[i].s[j].svc_us;
			if (f)
				fprintf(f, "%u %u %u\n", lat[k], svc[k], ws[i].s[j].status);
		}
	if (f)
		fclose(f);
	qsort(lat, n, sizeof(*lat), cmp_u);
	qsort(svc, n, sizeof(*svc), cmp_u);
	printf("%zu requests counted at %.0f/s over %d connections (%.1f s, first %.1f s not counted), %ld not 200, "
	       "%ld errors, %ld reconnects, %ld due but never sent (%.0f/s answered in all); latency ms p50 %.3f p90 %.3f p99 %.3f p99.9 %.3f max %.3f; "
	       "service ms p50 %.3f p99 %.3f\n",
	       n, rate, conns, dur_s, warm_s, non200, errors, reconnects, missed, (double)completed / dur_s, pct(lat, n, 50), pct(lat, n, 90),
	       pct(lat, n, 99), pct(lat, n, 99.9), n ? lat[n - 1] / 1000.0 : 0, pct(svc, n, 50), pct(svc, n, 99));
	return errors || non200 || missed ? 3 : 0;
}
