/*
 * clock.h - monotonic time for deadlines and durations (never the wall clock).
 */
#ifndef DP_CLOCK_H
#define DP_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC. */
long long clock_ms(void);

#endif
