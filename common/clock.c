/*
 * clock.c - monotonic milliseconds, and the wall clock in RFC 3339 (clock.h).
 */
#include "clock.h"

#include <stdio.h>
#include <sys/time.h>
#include <time.h>

static void deadline_on(clockid_t clock, struct timespec *out, long ms)
{
	clock_gettime(clock, out);
	out->tv_sec += ms / 1000;
	out->tv_nsec += ms % 1000 * 1000000L;
	if (out->tv_nsec >= 1000000000L) {
		out->tv_sec++;
		out->tv_nsec -= 1000000000L;
	}
}

void clock_deadline(struct timespec *out, long ms)
{
	deadline_on(CLOCK_REALTIME, out, ms);
}

void clock_deadline_mono(struct timespec *out, long ms)
{
	deadline_on(CLOCK_MONOTONIC, out, ms);
}

long long clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void clock_rfc3339(char out[CLOCK_RFC3339_LEN], int digits)
{
	struct timeval tv;
	struct tm tm;
	char s[24];

	gettimeofday(&tv, NULL);
	gmtime_r(&tv.tv_sec, &tm);
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	if (digits == 6)
		snprintf(out, CLOCK_RFC3339_LEN, "%.19s.%06dZ", s, (int)(tv.tv_usec % 1000000));
	else
		snprintf(out, CLOCK_RFC3339_LEN, "%.19s.%03dZ", s, (int)(tv.tv_usec / 1000 % 1000));
}

long long clock_unix_ms(void)
{
	struct timeval tv;

	gettimeofday(&tv, NULL);
	return (long long)tv.tv_sec * 1000 + tv.tv_usec / 1000;
}

void clock_rfc3339_at(char out[CLOCK_RFC3339_LEN], long long unix_ms)
{
	time_t t;
	struct tm tm;
	char s[24];

	unix_ms = unix_ms < 0 ? 0 : unix_ms; /* an event stamped before the epoch (a bad trace header): the epoch */
	t = (time_t)(unix_ms / 1000);
	gmtime_r(&t, &tm);
	strftime(s, sizeof(s), "%Y-%m-%dT%H:%M:%S", &tm);
	snprintf(out, CLOCK_RFC3339_LEN, "%.19s.%03dZ", s, (int)(unix_ms % 1000));
}
