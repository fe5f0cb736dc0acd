/*
 * bench_review.c - time the webhook's review in-process, without HTTP or TLS:
 * read AdmissionReview files once, then N times answer them with
 * review_admit() (parse, inject, diff, write the answer), cycling through the
 * files, with no answer cache (every request a full review). Prints the
 * median and best of the per-review wall times. A measurement, not a test: it
 * never fails on a figure; it exits 1 if a review is refused.
 *
 *   build/bench/bench_review ITERATIONS FILE...
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "inj.h"
#include "mem.h"
#include "review.h"
#include "stats.h"

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
	struct inj_opts o;
	struct buf *in, out;
	int n, nf;
	double *t;
	size_t outlen = 0;

	if (argc < 3) {
		fprintf(stderr, "usage: %s ITERATIONS FILE...\n", argv[0]);
		return 2;
	}
	mem_install();
	n = atoi(argv[1]);
	nf = argc - 2;
	if (n < 1)
		return 2;
	t = mem_array((size_t)n, sizeof(double));
	in = mem_array((size_t)nf, sizeof(*in));
	for (int f = 0; f < nf; f++) {
		int fd = open(argv[2 + f], O_RDONLY);

		buf_init(&in[f], 0);
		if (fd < 0 || buf_read_fd(&in[f], fd) != 0) {
			perror(argv[2 + f]);
			return 1;
		}
		close(fd);
	}
	inj_opts_init(&o);
	struct review_config cfg = { .base = &o, .max_body = 8u << 20 };
	buf_init(&out, 0);
	for (int i = 0; i < n; i++) {
		enum review_outcome oc;
		struct err_msg em;
		const struct buf *b = &in[i % nf];
		double t0 = now_us();
		int rc;

		out.len = 0;
		rc = review_admit(&cfg, b->data, b->len, &out, &oc, &em);
		t[i] = now_us() - t0;
		if (rc != 0) {
			fprintf(stderr, "%s: %s\n", argv[2 + i % nf], em.text);
			return 1;
		}
		outlen = out.len;
	}
	stats_sort(t, n);
	printf("%d file(s), %zu bytes in (the first), %zu bytes out (the last); review over %d runs: median %.1f us, best %.1f us\n",
	       nf, in[0].len, outlen, n, t[n / 2], t[0]);
	return 0;
}
