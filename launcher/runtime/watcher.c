/*
 * watcher.c - a periodic thread that stops at once when told (watcher.h).
 *
 * The wait between passes is a timed wait on a condition variable, not a
 * sleep, so that an agent shutting down does not wait out the period.
 */
#include "watcher.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>
#include <time.h>

#include "clock.h"
#include "mem.h"

struct watcher {
	unsigned period_ms;
	void (*fn)(void *ctx);
	void *ctx;
	pthread_t th;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	bool stopping;
};

static void *watch_main(void *arg)
{
	struct watcher *w = arg;

	pthread_mutex_lock(&w->mu);
	while (!w->stopping) {
		struct timespec until;

		pthread_mutex_unlock(&w->mu);
		w->fn(w->ctx);
		pthread_mutex_lock(&w->mu);
		clock_deadline(&until, w->period_ms);
		if (!w->stopping)
			pthread_cond_timedwait(&w->cv, &w->mu, &until);
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

struct watcher *watcher_start(unsigned period_ms, void (*fn)(void *ctx), void *ctx)
{
	struct watcher *w = mem_zalloc(sizeof(*w));

	w->period_ms = period_ms;
	w->fn = fn;
	w->ctx = ctx;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	if (pthread_create(&w->th, NULL, watch_main, w) != 0) {
		pthread_mutex_destroy(&w->mu);
		pthread_cond_destroy(&w->cv);
		free(w);
		return NULL;
	}
	return w;
}

void watcher_stop(struct watcher *w)
{
	if (w == NULL)
		return;
	pthread_mutex_lock(&w->mu);
	w->stopping = true;
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->th, NULL);
	pthread_mutex_destroy(&w->mu);
	pthread_cond_destroy(&w->cv);
	free(w);
}
