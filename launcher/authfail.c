/*
 * authfail.c - refused tokens per client address (authfail.h): a fixed
 * table searched by address, the delay schedule and the rate-limited log.
 */
#include "authfail.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "mem.h"

#define PEER_TEXT 48 /* INET6_ADDRSTRLEN and its NUL */

struct peer_rec {
	char peer[PEER_TEXT];       /* "" = free */
	unsigned long long failures; /* since it was (re)entered */
	unsigned long long suppressed; /* failures not logged since its last line */
	long long last_ms, next_ms, logged_ms;
	bool logged;                /* logged_ms is set */
};

struct authfail {
	struct peer_rec t[AUTHFAIL_PEERS];
	long long second;           /* the second (ms / 1000) lines are being counted in */
	unsigned lines;             /* lines written in it */
	unsigned long long forgotten; /* addresses pushed out of a full table, reported with the next line */
};

struct authfail *authfail_new(void)
{
	return mem_zalloc(sizeof(struct authfail));
}

void authfail_free(struct authfail *f)
{
	free(f);
}

static bool live(const struct peer_rec *p, long long now)
{
	return p->peer[0] != '\0' && now - p->last_ms < AUTHFAIL_FORGET_MS;
}

/* peer's record, or NULL. */
static struct peer_rec *find(struct authfail *f, const char *peer, long long now)
{
	for (size_t i = 0; i < AUTHFAIL_PEERS; i++)
		if (f->t[i].peer[0] != '\0' && strcmp(f->t[i].peer, peer) == 0)
			return live(&f->t[i], now) ? &f->t[i] : NULL;
	return NULL;
}

/* A record for peer: its own, a free or stale one, else the one whose last failure is the oldest. */
static struct peer_rec *take(struct authfail *f, const char *peer, long long now)
{
	struct peer_rec *own = NULL, *spare = NULL, *oldest = NULL;

	for (size_t i = 0; i < AUTHFAIL_PEERS; i++) {
		struct peer_rec *p = &f->t[i];

		if (p->peer[0] != '\0' && strcmp(p->peer, peer) == 0) {
			own = p;
			break;
		}
		if (!live(p, now)) {
			if (spare == NULL)
				spare = p;
		} else if (oldest == NULL || p->last_ms < oldest->last_ms) {
			oldest = p;
		}
	}
	if (own && live(own, now))
		return own;
	if (own == NULL && spare == NULL)
		f->forgotten++;
	own = own ? own : spare ? spare : oldest;
	memset(own, 0, sizeof(*own));
	strncpy(own->peer, peer, sizeof(own->peer) - 1);
	return own;
}

long long authfail_turn(struct authfail *f, const char *peer, long long now)
{
	const struct peer_rec *p = find(f, peer, now);

	return p && p->next_ms > now ? p->next_ms : now;
}

static long long delay_after(unsigned long long failures)
{
	unsigned long long k;

	if (failures <= AUTHFAIL_FREE)
		return 0;
	k = failures - AUTHFAIL_FREE - 1;
	if (k >= 16)
		return AUTHFAIL_MAX_MS;
	return AUTHFAIL_STEP_MS << k < AUTHFAIL_MAX_MS ? AUTHFAIL_STEP_MS << k : AUTHFAIL_MAX_MS;
}

void authfail_record(struct authfail *f, const char *peer, const char *path, const char *why, long long now)
{
	struct peer_rec *p = take(f, peer[0] ? peer : "unknown", now);
	long long delay;

	p->failures++;
	p->last_ms = now;
	delay = delay_after(p->failures);
	p->next_ms = now + delay;
	if (now / 1000 != f->second) {
		f->second = now / 1000;
		f->lines = 0;
	}
	if ((p->logged && now - p->logged_ms < AUTHFAIL_LOG_EVERY_MS) || f->lines >= AUTHFAIL_LOG_PER_S) {
		p->suppressed++;
		return;
	}
	f->lines++;
	log_warn("authentication failed", LOG_STR("event", "auth-failed"), LOG_STR("peer", p->peer),
		 LOG_STRN("path", path, strnlen(path, 128)), LOG_STR("reason", why),
		 LOG_UINT("failures", p->failures), LOG_UINT("suppressed", p->suppressed), LOG_INT("delayMs", delay),
		 LOG_UINT("forgottenPeers", f->forgotten));
	p->suppressed = 0;
	p->logged = true;
	p->logged_ms = now;
}
