/*
 * stats.h - the few statistics the bench programs print: sort a set of
 * timings and read a nearest-rank percentile. Header-only, shared by every
 * program under bench/ (they are built one file each).
 */
#ifndef DP_BENCH_STATS_H
#define DP_BENCH_STATS_H

#include <stdlib.h>

static inline int stats_cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static inline void stats_sort(double *v, int n)
{
	qsort(v, (size_t)n, sizeof(double), stats_cmp);
}

/* Nearest-rank percentile p (0-100) of a sorted array of n > 0 values. */
static inline double stats_pct(const double *v, int n, int p)
{
	int i = (p * n + 99) / 100 - 1;

	return v[i < 0 ? 0 : i];
}

#endif
