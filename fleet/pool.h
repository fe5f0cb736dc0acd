/*
 * pool.h - fn(ctx, i) for every i below n, on up to `threads` threads at
 * once (pool.c): the fleet client's small parallel loops (asking every
 * agent for its processes).
 */
#ifndef DP_FLEET_POOL_H
#define DP_FLEET_POOL_H

#include <stddef.h>

void pool_run(size_t n, unsigned threads, void (*fn)(void *ctx, size_t i), void *ctx);

#endif
