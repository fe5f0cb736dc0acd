/*
 * metrics_int.h - what the store behind /metrics (metrics_store.c: the
 * series, and the scrape's text) and its sessions (metrics_sessions.c: a
 * counters session per attached runtime, the watcher that starts them)
 * share. The sessions put readings into the store; the store calls nothing
 * of the sessions.
 */
#ifndef DP_METRICS_INT_H
#define DP_METRICS_INT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "metrics.h"

struct qline {
	char *labels; /* with the quantile */
	char value[32];
};

struct series {
	char *family, *help, *labels;
	uint8_t cookie[16];
	uint64_t pid;
	bool summary;
	char value[32];
	int64_t ts_ms;
	struct qline *q;
	size_t nq;
	char sum[32], count[32];
	bool has_sum;
};

struct collector {
	struct metrics *m;
	uint8_t cookie[16];
	uint64_t pid;
	pthread_t th;
	bool started, seen;
	atomic_bool stop, done;
	long long retry_at;
	long long due_ms;     /* when its session's first readings are due */
	struct nettrace_trace header;
	bool have_header;
	struct evpayload pl;
	struct buf name, labels; /* scratch */
	char client_id[48];   /* our share of the meter session: new for every session, so that the runtime's
			       * count of shares stays true (it counts a ClientId once, but each stop) */
	double meter_s;       /* the interval the runtime last aggregated meters over; 0 unknown */
	struct metrics_meter_opts join; /* the running session's settings, for the next session; "" = ours */
	atomic_llong restart_at;        /* the session is stopped and started again at this clock_ms; 0 never */
	bool told_private;
	unsigned long long readings;    /* this session's (its thread's own) */
};

struct metrics {
	struct port *port;
	unsigned interval_s;
	bool store;
	struct trace_provider *extra_p; /* added to each session */
	size_t n_extra_p;
	pthread_rwlock_t listen_lock; /* held to read while calling the listener, to write while changing it */
	metrics_reading_fn on_reading;
	metrics_event_fn on_event;
	void *listen_ctx;
	long long delay_ms; /* from attach to the first session */
	char client_id[40]; /* this store's prefix of its collectors' ClientIds */
	struct metrics_selection sel;
	pthread_mutex_t mu;
	struct series *s; /* sorted by family, pid, labels */
	size_t n, cap;
	uint64_t dropped;
	size_t runtimes; /* attached, as last seen by the watcher */
	long long first_due_ms; /* the soonest a collector's first readings are due (0: none is waiting) */
	struct watcher *watcher;
	struct collector **c;
	size_t nc;
};

/* ---- metrics_store.c (under m->mu) ---- */

/* c's reading r, at ts_ms, into its series (a new one while under MAX_SERIES, else counted as dropped). */
void metrics_store_reading(struct collector *c, const struct msample *r, int64_t ts_ms);
/* Every series of runtime cookie dropped (it went away). */
void metrics_store_forget(struct metrics *m, const uint8_t cookie[16]);
/* Frees what s holds. */
void metrics_series_clear(struct series *s);

#endif
