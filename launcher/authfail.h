/*
 * authfail.h - refused tokens, per client address: each one logged (at most
 * a line per address every few seconds, with a count of the lines left out,
 * and never a byte of the token), and an address that keeps failing slowed
 * down: after a few failures its next request is held before its token is
 * even looked at (api.c holds it with httpd's HTTPD_WAIT, which costs no
 * thread or worker slot), longer with each failure, up to a cap. Right or
 * wrong, a request from a slowed address waits its turn, so closing a
 * connection that has not been answered yet tells an attacker nothing.
 *
 * The table of addresses is bounded (AUTHFAIL_PEERS): when it is full the
 * address whose last failure is the oldest is forgotten, so many addresses
 * cannot exhaust memory. An address is forgotten also AUTHFAIL_FORGET_MS
 * after its last failure. Not thread-safe by itself: api.c calls it from the
 * HTTP server's one acceptor thread, under its own lock.
 */
#ifndef DP_LAUNCH_AUTHFAIL_H
#define DP_LAUNCH_AUTHFAIL_H

#define AUTHFAIL_PEERS 1024        /* addresses remembered */
#define AUTHFAIL_FREE 5            /* failures in a row answered without a delay */
#define AUTHFAIL_STEP_MS 10        /* the first delay, doubled with each failure after it */
#define AUTHFAIL_MAX_MS 100        /* the longest: at most 10 tries a second from one address */
#define AUTHFAIL_FORGET_MS 60000   /* an address with no failure for this long starts afresh */
#define AUTHFAIL_LOG_EVERY_MS 5000 /* at most one log line per address in this time */
#define AUTHFAIL_LOG_PER_S 20      /* and at most this many lines a second, all addresses together */

struct authfail;

struct authfail *authfail_new(void);
void authfail_free(struct authfail *f); /* accepts NULL */

/* When a request from peer (an address as text) may have its token checked: now, or a later clock_ms time. */
long long authfail_turn(struct authfail *f, const char *peer, long long now);

/*
 * A refused request from peer (why: "no bearer token", "wrong token"; path
 * its path, for the log): counted, logged unless this address was logged
 * within AUTHFAIL_LOG_EVERY_MS (then counted as suppressed, reported with its
 * next line), and the address's next turn set.
 */
void authfail_record(struct authfail *f, const char *peer, const char *path, const char *why, long long now);

#endif
