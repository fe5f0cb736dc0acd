/*
 * pool.c - a parallel loop (pool.h): threads take the next index from one
 * atomic counter until none is left; the caller's thread is one of them.
 */
#include "pool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "errors.h"
#include "mem.h"

struct loop {
	size_t n;
	atomic_size_t next;
	void (*fn)(void *, size_t);
	void *ctx;
};

static void *loop_main(void *arg)
{
	struct loop *l = arg;
	size_t i;

	while ((i = atomic_fetch_add(&l->next, 1)) < l->n)
		l->fn(l->ctx, i);
	return NULL;
}

void pool_run(size_t n, unsigned threads, void (*fn)(void *ctx, size_t i), void *ctx)
{
	struct loop l = { .n = n, .fn = fn, .ctx = ctx };
	size_t extra = threads > 1 ? threads - 1 : 0;
	pthread_t *t;

	if (extra > n)
		extra = n;
	t = mem_array(extra ? extra : 1, sizeof(*t));
	for (size_t i = 0; i < extra; i++)
		if (pthread_create(&t[i], NULL, loop_main, &l) != 0)
			DP_FATAL("cannot start a thread");
	loop_main(&l);
	for (size_t i = 0; i < extra; i++)
		pthread_join(t[i], NULL);
	free(t);
}
