/*
 * server.h - the webhook's HTTPS server: libmicrohttpd with GnuTLS, loaded
 * with dlopen when the webhook starts (so the capture agent, the same
 * binary, never maps them: docs/ARCHITECTURE.md), keep-alive, TLS 1.2
 * minimum with 1.3 preferred, a body cap and a per-request deadline.
 *
 * Routes: POST /mutate (pods opt in by annotation), POST /mutate/namespace
 * (the pod's namespace opted in: every pod unless it opts out), GET /healthz,
 * GET /readyz, GET /metrics (Prometheus text).
 *
 * The certificate and key files are watched; when either changes (a
 * cert-manager rotation swaps the Secret's files), a new daemon starts on the
 * same listening socket with the new pair and the old one stops accepting,
 * finishes what it has in flight, and is stopped: no request is dropped.
 */
#ifndef DP_WEBHOOK_SERVER_H
#define DP_WEBHOOK_SERVER_H

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"
#include "injector/inj.h"

struct webhook;

struct webhook_config {
	const char *listen;        /* "ADDR:PORT", ":PORT" = every IPv4 address; PORT 0: one the system picks */
	const char *cert_file, *key_file;
	const char *config_file;   /* --config (inj.h, inj_settings_load), or NULL for the built-in defaults */
	size_t max_body;           /* request cap (8 MiB) */
	size_t body_budget;        /* every request body in flight together (16 MiB; --body-budget) */
	unsigned timeout_s;        /* idle / per-request deadline (10) */
	unsigned threads;          /* worker threads (2) */
	bool no_review_cache;      /* --no-review-cache: review every request in full (rcache.h) */
};

/* Read the configuration, load libmicrohttpd, read the key pair, listen. DP_EIO / DP_EINVAL with em. */
int webhook_start(const struct webhook_config *cfg, struct webhook **out, struct err_msg *em);
/*
 * Check the key pair and configuration files now (the caller's loop calls
 * this every few seconds) and reload what changed. A file that does not load
 * is logged and counted, and what was in service stays.
 */
void webhook_poll(struct webhook *w);
/* The port it listens on (the system's choice for a --listen port 0); 0 when it cannot say. */
unsigned webhook_port(const struct webhook *w);
/* Stop, waiting for requests in flight. Accepts NULL. */
void webhook_free(struct webhook *w);

#endif
