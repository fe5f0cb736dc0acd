/*
 * clock.h - monotonic time for deadlines and durations, and the wall clock
 * written as RFC 3339 UTC (log lines, operations' creation times).
 */
#ifndef DP_CLOCK_H
#define DP_CLOCK_H

/* Milliseconds on CLOCK_MONOTONIC. */
long long clock_ms(void);

/* Now, UTC, as "2021-07-21T06:21:15.315Z" (digits 3) or "...15.315861Z" (digits 6). */
#define CLOCK_RFC3339_LEN 32
void clock_rfc3339(char out[CLOCK_RFC3339_LEN], int digits);

/* CLOCK_REALTIME in ms milliseconds: the deadline pthread_cond_timedwait takes. */
struct timespec;
void clock_deadline(struct timespec *out, long ms);
/* The same on CLOCK_MONOTONIC, for a condition variable made with pthread_condattr_setclock(CLOCK_MONOTONIC). */
void clock_deadline_mono(struct timespec *out, long ms);

/* Milliseconds since the epoch (wall clock), and such a time as RFC 3339 UTC with milliseconds. */
long long clock_unix_ms(void);
void clock_rfc3339_at(char out[CLOCK_RFC3339_LEN], long long unix_ms);

#endif
