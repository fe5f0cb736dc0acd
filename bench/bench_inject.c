/*
 * bench_inject.c - time the injector in-process, without process start-up:
 * read a file once, then N times parse it, inject, and render the result.
 * Prints the median and best of the per-iteration wall times and the output
 * size. A measurement, not a test: it never fails on a figure.
 *
 *   build/bench/bench_inject FILE KIND ITERATIONS [--all]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <fcntl.h>
#include <unistd.h>

#include "buf.h"
#include "doc.h"
#include "inj.h"
#include "mem.h"
#include "stats.h"

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

int main(int argc, char **argv)
{
	struct buf in, out;
	struct inj_opts o;
	int fd, n;
	double *t;
	size_t outlen = 0;

	if (argc < 4) {
		fprintf(stderr, "usage: %s FILE k8s|ecs|cfn ITERATIONS [--all]\n", argv[0]);
		return 2;
	}
	mem_install();
	n = atoi(argv[3]);
	t = mem_array((size_t)n, sizeof(double));
	fd = open(argv[1], O_RDONLY);
	buf_init(&in, 0);
	if (fd < 0 || buf_read_fd(&in, fd) != 0) {
		perror(argv[1]);
		return 1;
	}
	close(fd);
	inj_opts_init(&o);
	for (int i = 0; i < n; i++) {
		struct doc_stream s;
		struct err_msg em;
		struct inj_ctx c = { .file = argv[1], .base = &o, .all = argc > 4 };
		double t0 = now_ms();
		int rc = doc_read(in.data, in.len, argv[1], &doc_default_limits, &s, &em);

		for (size_t k = 0; rc == 0 && k < s.n; k++) {
			if (strcmp(argv[2], "k8s") == 0)
				rc = inj_k8s_object(s.docs[k], &c, &em);
			else if (strcmp(argv[2], "ecs") == 0)
				rc = inj_ecs_taskdef(&s.docs[k], &c, &em);
			else
				rc = inj_cfn_template(s.docs[k], &c, &em);
		}
		buf_init(&out, 0);
		if (rc == 0)
			rc = doc_write(&out, &s, s.format, &em);
		t[i] = now_ms() - t0;
		if (rc != 0) {
			fprintf(stderr, "%s\n", em.text);
			return 1;
		}
		outlen = out.len;
		buf_free(&out);
		doc_stream_free(&s);
	}
	stats_sort(t, n);
	printf("%s: %zu bytes in, %zu bytes out; parse+inject+render over %d runs: median %.3f ms, best %.3f ms\n",
	       argv[1], in.len, outlen, n, t[n / 2], t[0]);
	free(t);
	buf_free(&in);
	return 0;
}
