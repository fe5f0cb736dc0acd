/*
 * limits.h - every limit the webhook's HTTPS server keeps, in one place: what
 * it takes in, how long it waits, and what it holds in memory. The reasons
 * for each figure are beside the code that enforces it (server.c for the
 * connection slots and the body rate, server_mhd.c for the corked answer,
 * budget.h for the body budget's shares, rcache.h for the kept answers).
 *
 * Configurable ones (server.h's webhook_config) have their default here;
 * webhook_start puts the default in where the caller left 0.
 */
#ifndef DP_WEBHOOK_LIMITS_H
#define DP_WEBHOOK_LIMITS_H

#include <stddef.h>

/* ---- configurable (webhook_config; 0 means the default) ---- */
#define WH_MAX_BODY_DEFAULT ((size_t)8 << 20)     /* one request's body (max_body) */
#define WH_BODY_BUDGET_DEFAULT ((size_t)16 << 20) /* every body in flight together (body_budget, --body-budget) */
#define WH_TIMEOUT_S_DEFAULT 10                   /* idle / per-request deadline (timeout_s) */
#define WH_THREADS_DEFAULT 2                      /* worker threads (threads) */

/* ---- connections and bodies ---- */
#define WH_CONN_SLOTS 256                  /* libmicrohttpd's connection limit, shared through budget.h */
#define WH_BODY_GRACE_MS 2000              /* a body's first bytes may take this long ... */
#define WH_BODY_MIN_RATE (64u << 10)       /* ... then it comes at this many bytes a second (the cluster network) */
#define WH_BODY_KEEP (128u << 10)          /* a connection keeps its body's memory between requests up to this */
#define WH_KEEP_TOTAL ((size_t)8 << 20)    /* what all connections together keep between requests */
#define WH_BODY_PREALLOC ((size_t)1 << 20) /* a claimed Content-Length reserves at most this before it comes */

/* ---- answers ---- */
#define WH_CORK_MAX (8u << 10)  /* an answer this small goes out as one TLS record */
#define WH_UNCORK_MAX_MS 1000   /* a client that leaves that record unread this long loses the connection */

/* ---- the key pair and the daemon's generations ---- */
#define WH_MAX_KEYPAIR (1 << 20)     /* the certificate or key file */
#define WH_DRAIN_MAX_MS 60000        /* a reload: the old pair serves what it has for up to this long */
#define WH_SHUTDOWN_MAX_MS 10000     /* SIGTERM: well inside Kubernetes' 30 s grace period */
#define WH_LISTEN_BACKLOG 256

#endif
