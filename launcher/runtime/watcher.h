/*
 * watcher.h - a thread that calls one function now and then every period
 * until it is stopped: the loop that looks at the port's runtimes, written
 * once for the metrics store and the collection rules.
 *
 * A stop wakes the thread at once (it does not wait out the period) and
 * waits for a pass under way to end; no pass starts after watcher_stop
 * returns.
 */
#ifndef DP_WATCHER_H
#define DP_WATCHER_H

struct watcher;

/* Calls fn(ctx) on a thread of its own, now and every period_ms after each pass ends; new, or NULL when the
 * thread cannot start (then fn is never called). */
struct watcher *watcher_start(unsigned period_ms, void (*fn)(void *ctx), void *ctx);

/* Stops w (see above) and frees it; NULL is fine. */
void watcher_stop(struct watcher *w);

#endif
