/*
 * clock.c - monotonic milliseconds (clock.h).
 */
#include "clock.h"

#include <time.h>

long long clock_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}
