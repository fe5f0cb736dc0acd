/*
 * bench_log.c - the cost of the webhook's admission log line (common/log.c),
 * side by side with the same line built as a jansson object and dumped (how
 * log.c built every line until issue 32), both written to /dev/null.
 *
 *   bench_log LINES ROUNDS
 *
 * Prints the median and best microseconds a line over ROUNDS of LINES each.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "stats.h"

static const char uid[] = "705ab4f5-6393-11e8-b7cc-42010a800002";

static void line_log(void)
{
	log_at(LOG_INFO, "admission", LOG_STR("event", "admission"), LOG_STR("path", "/mutate"),
	       LOG_STR("outcome", "injected"), LOG_STR("uid", uid), LOG_NUM("ms", 0.0123), LOG_END_);
}

/* The reference: an object, a dump, one write. */
static int null_fd;
static void line_jansson(void)
{
	json_t *o = json_object();
	char ts[CLOCK_RFC3339_LEN], *s;
	size_t n;

	clock_rfc3339(ts, 3);
	json_object_set_new(o, "time", json_string(ts));
	json_object_set_new(o, "level", json_string("INFO"));
	json_object_set_new(o, "msg", json_string("admission"));
	json_object_set_new(o, "event", json_string("admission"));
	json_object_set_new(o, "path", json_string("/mutate"));
	json_object_set_new(o, "outcome", json_string("injected"));
	json_object_set_new(o, "uid", json_string(uid));
	json_object_set_new(o, "ms", json_real(0.0123));
	s = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(o);
	n = strlen(s);
	s[n] = '\n';
	if (write(null_fd, s, n + 1) < 0)
		abort();
	free(s);
}

static double us_per_line(void (*fn)(void), long lines)
{
	struct timespec a, b;

	clock_gettime(CLOCK_MONOTONIC, &a);
	for (long i = 0; i < lines; i++)
		fn();
	clock_gettime(CLOCK_MONOTONIC, &b);
	return ((double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec)) / (double)lines / 1e3;
}

int main(int argc, char **argv)
{
	long lines = argc > 1 ? atol(argv[1]) : 100000;
	int rounds = argc > 2 ? atoi(argv[2]) : 5;
	double *mine = calloc((size_t)rounds, sizeof(double)), *ref = calloc((size_t)rounds, sizeof(double));

	null_fd = open("/dev/null", O_WRONLY);
	log_set_fd(null_fd);
	for (int r = 0; r < rounds; r++) { /* alternating */
		mine[r] = us_per_line(line_log, lines);
		ref[r] = us_per_line(line_jansson, lines);
	}
	stats_sort(mine, rounds);
	stats_sort(ref, rounds);
	printf("admission line, %ld lines x %d rounds: log.c median %.2f us (best %.2f); jansson object + dump median %.2f us "
	       "(best %.2f)\n", lines, rounds, stats_pct(mine, rounds, 50), mine[0], stats_pct(ref, rounds, 50), ref[0]);
	return 0;
}
