/*
 * bench_nettrace.c - time the nettrace reader in-process: read a file once,
 * then N times feed it to a new reader in 64 KiB pieces (as /trace relays a
 * stream) with an event callback that touches each event. Prints the median
 * and best time and the throughput. A measurement, not a test.
 *
 *   build/bench/bench_nettrace FILE ITERATIONS
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "mem.h"
#include "eventpipe/nettrace.h"
#include "stats.h"

static unsigned long long sink;

static int on_event(void *ctx, const struct nettrace_event *e)
{
	(void)ctx;
	sink += e->meta->event_id + e->payload_len + e->stack_n;
	return 0;
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
	struct nettrace_callbacks cb = { .event = on_event };
	struct nettrace_stats st = { 0 };
	struct buf in;
	double *t;
	int n, fd;

	if (argc != 3 || (n = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: %s FILE ITERATIONS\n", argv[0]);
		return 2;
	}
	mem_install();
	buf_init(&in, 0);
	if ((fd = open(argv[1], O_RDONLY)) < 0 || buf_read_fd(&in, fd) != 0) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	t = mem_array((size_t)n, sizeof(double));
	for (int i = 0; i < n; i++) {
		struct nettrace *r = nettrace_new(NULL, &cb, NULL);
		struct err_msg em;
		double t0 = now_s();
		int rc = 0;

		for (size_t at = 0; rc == 0 && at < in.len; at += 65536)
			rc = nettrace_feed(r, in.data + at, in.len - at < 65536 ? in.len - at : 65536, &em);
		if (rc == 0)
			rc = nettrace_finish(r, &em);
		t[i] = now_s() - t0;
		if (rc != 0) {
			fprintf(stderr, "%s\n", em.text);
			return 1;
		}
		nettrace_stats(r, &st);
		nettrace_free(r);
	}
	stats_sort(t, n);
	printf("%s: %zu bytes, %llu events; read over %d runs: median %.1f ms (%.0f MB/s), best %.1f ms (%.0f MB/s)\n",
	       argv[1], in.len, (unsigned long long)st.events, n, t[n / 2] * 1e3, (double)in.len / t[n / 2] / 1e6,
	       t[0] * 1e3, (double)in.len / t[0] / 1e6);
	free(t);
	buf_free(&in);
	return 0;
}
