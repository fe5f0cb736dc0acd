/*
 * budget.c - body bytes and connection slots, and whom to shed (budget.h).
 *
 * Every connection is on one list under one mutex; a shed is chosen by a walk
 * of that list (at most the server's connection limit, a few microseconds),
 * which happens only when the budget or the slots run short. The mutex is
 * taken a few times per request, never across I/O.
 */
#include "budget.h"

#include <linux/tcp.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stddef.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "clock.h"
#include "log.h"
#include "mem.h"

enum phase { WAITING, BODY, ANSWERING };

struct budget_conn {
	struct budget_conn *prev, *next;
	int fd;
	enum phase phase;
	bool shed;
	bool small;          /* the request's body is an ordinary one (so far, when chunked) */
	bool served;         /* a request of its own has ended: a keep-alive connection, not a new one */
	long long since;     /* accepted, or its last request began or ended (clock_ms) */
	long long t0;        /* its request began */
	size_t got;          /* body bytes arrived */
	size_t held;         /* bytes of the budget it holds */
};

struct budget {
	pthread_mutex_t mu;
	size_t bytes, used;
	unsigned high;       /* connections open above which a new one sheds the longest waiting */
	unsigned open, shed_pending; /* shed_pending: shut down, not yet closed by the server */
	struct budget_conn *head, *tail; /* newest, oldest */
	unsigned long long shed_bytes, shed_slots;
};

struct budget *budget_new(size_t bytes, unsigned slots)
{
	struct budget *b = mem_zalloc(sizeof(*b));

	pthread_mutex_init(&b->mu, NULL);
	b->bytes = bytes;
	b->high = slots - slots / 4;
	return b;
}

void budget_free(struct budget *b)
{
	if (b == NULL)
		return;
	pthread_mutex_destroy(&b->mu);
	free(b);
}

/* Under mu: close c's socket for the server to end, and take back its bytes at once. */
static void shed(struct budget *b, struct budget_conn *c)
{
	shutdown(c->fd, SHUT_RDWR); /* the fd stays open until budget_close: no other socket can be hit */
	c->shed = true;
	b->used -= c->held;
	c->held = 0;
	b->shed_pending++;
}

/*
 * Under mu: the connection a new one sheds for its slot, or NULL; never one being answered, and among
 * equals the one waiting longest. First one that has begun no request (a TLS handshake or a request
 * head still to come) for BUDGET_SHED_AGE_MS or more, or a body that has come for as long; then the
 * keep-alive connection idle longest (closing an idle keep-alive connection is what every server does
 * at its idle timeout; clients send again on a new one); last, a younger connection that has begun no
 * request: a burst of connections that send nothing would otherwise fill every slot before any is old
 * enough, and the server, at its limit, would accept no more (nor call budget_open to shed): the oldest
 * of those that has not sent a byte (of the oldest SILENT_LOOK), else the oldest. The API server sends
 * its TLS hello and its review as soon as it connects, so it is neither.
 */
#define SILENT_LOOK 32

/* Whether the peer of socket fd has sent nothing at all yet (TCP_INFO's bytes received). */
static bool silent(int fd)
{
	struct tcp_info ti;
	socklen_t len = sizeof(ti);

	return fd >= 0 && getsockopt(fd, IPPROTO_TCP, TCP_INFO, &ti, &len) == 0 &&
	       len >= offsetof(struct tcp_info, tcpi_bytes_received) + sizeof(ti.tcpi_bytes_received) &&
	       ti.tcpi_bytes_received == 0;
}

static struct budget_conn *slot_victim(const struct budget *b, const struct budget_conn *for_c, long long now)
{
	struct budget_conn *best[3] = { NULL, NULL, NULL };
	unsigned looked = 0;

	for (struct budget_conn *p = b->head; p; p = p->next) {
		bool old;
		int k;

		if (p == for_c || p->shed || p->phase == ANSWERING)
			continue;
		old = now - (p->phase == BODY ? p->t0 : p->since) >= BUDGET_SHED_AGE_MS;
		if (p->phase == BODY)
			k = old ? 0 : -1;
		else
			k = p->served ? 1 : old ? 0 : 2;
		/* <=: the list runs from the newest, so among equal times the one opened first wins */
		if (k >= 0 && (best[k] == NULL || p->since <= best[k]->since))
			best[k] = p;
	}
	if (best[0] || best[1])
		return best[0] ? best[0] : best[1];
	/* a flood of young connections: the oldest one that has not sent a byte (the API server's sends its
	 * TLS hello at once), looking at a few; else the oldest */
	for (struct budget_conn *p = b->tail; p && looked < SILENT_LOOK; p = p->prev) {
		if (p == for_c || p->shed || p->phase != WAITING || p->served)
			continue;
		looked++;
		if (silent(p->fd))
			return p;
	}
	return best[2];
}

struct budget_conn *budget_open(struct budget *b, int fd)
{
	struct budget_conn *c = mem_zalloc(sizeof(*c)), *v = NULL;
	long long now = clock_ms();

	c->fd = fd;
	c->since = now;
	pthread_mutex_lock(&b->mu);
	if (b->head)
		b->head->prev = c;
	else
		b->tail = c;
	c->next = b->head;
	b->head = c;
	b->open++;
	if (b->open - b->shed_pending > b->high && (v = slot_victim(b, c, now)) != NULL) {
		shed(b, v);
		b->shed_slots++;
	}
	pthread_mutex_unlock(&b->mu);
	if (v)
		log_warn("connection shed", LOG_STR("event", "shed"), LOG_STR("reason", "the connection slots run short: "
			 "the connection that waited longest without a request was closed"));
	return c;
}

void budget_close(struct budget *b, struct budget_conn *c)
{
	if (c == NULL)
		return;
	pthread_mutex_lock(&b->mu);
	b->used -= c->held;
	if (c->shed)
		b->shed_pending--;
	b->open--;
	if (c->prev)
		c->prev->next = c->next;
	else
		b->head = c->next;
	if (c->next)
		c->next->prev = c->prev;
	else
		b->tail = c->prev;
	pthread_mutex_unlock(&b->mu);
	free(c);
}

/*
 * Under mu: shed the slowest holders whose requests are old enough until n
 * more bytes fit in cap; true when they then fit.
 */
static bool make_room(struct budget *b, const struct budget_conn *for_c, size_t n, size_t cap, long long now)
{
	while (b->used + n > cap) {
		struct budget_conn *v = NULL;
		double v_rate = 0;

		for (struct budget_conn *p = b->head; p; p = p->next) {
			double rate;

			if (p == for_c || p->shed || p->held == 0 || p->phase != BODY || now - p->t0 < BUDGET_SHED_AGE_MS)
				continue;
			rate = (double)p->got / (double)(now - p->t0);
			if (v == NULL || rate < v_rate) {
				v = p;
				v_rate = rate;
			}
		}
		if (v == NULL)
			return false;
		shed(b, v);
		b->shed_bytes++;
	}
	return true;
}

enum budget_ans budget_begin(struct budget *b, struct budget_conn *c, unsigned long long declared)
{
	enum budget_ans a = BUDGET_OK;

	pthread_mutex_lock(&b->mu);
	c->phase = BODY;
	c->since = c->t0 = clock_ms();
	c->got = 0;
	c->small = declared <= BUDGET_SMALL;
	if (c->shed)
		a = BUDGET_SHED;
	else if (!c->small && b->used + declared > b->bytes - BUDGET_RESERVE)
		a = BUDGET_FULL; /* a large body is charged what it declares, before a byte of it is read */
	else if (!c->small)
		b->used += c->held = (size_t)declared;
	pthread_mutex_unlock(&b->mu);
	return a;
}

enum budget_ans budget_take(struct budget *b, struct budget_conn *c, size_t got)
{
	enum budget_ans a = BUDGET_OK;
	int shed_now = 0;

	pthread_mutex_lock(&b->mu);
	c->got = got;
	if (c->shed) {
		a = BUDGET_SHED;
	} else if (got > c->held) {
		size_t n = got - c->held;
		unsigned long long before = b->shed_bytes;

		c->small = c->small && got <= BUDGET_SMALL; /* a chunked body that grew past it */
		if (c->small ? !make_room(b, c, n, b->bytes, clock_ms()) : b->used + n > b->bytes - BUDGET_RESERVE) {
			a = BUDGET_FULL;
		} else {
			b->used += n;
			c->held = got;
		}
		shed_now = (int)(b->shed_bytes - before);
	}
	pthread_mutex_unlock(&b->mu);
	if (shed_now)
		log_warn("connection shed", LOG_STR("event", "shed"), LOG_INT("connections", shed_now), LOG_STR("reason",
			 "the body budget ran short for an ordinary review: the slowest uploads were closed"));
	return a;
}

enum budget_ans budget_answer(struct budget *b, struct budget_conn *c)
{
	enum budget_ans a;

	pthread_mutex_lock(&b->mu);
	a = c->shed ? BUDGET_SHED : BUDGET_OK;
	c->phase = ANSWERING;
	pthread_mutex_unlock(&b->mu);
	return a;
}

void budget_end(struct budget *b, struct budget_conn *c)
{
	pthread_mutex_lock(&b->mu);
	b->used -= c->held;
	c->held = 0;
	c->got = 0;
	c->phase = WAITING;
	c->served = true;
	c->since = clock_ms();
	pthread_mutex_unlock(&b->mu);
}

void budget_stats(struct budget *b, unsigned long long *for_bytes, unsigned long long *for_slots)
{
	pthread_mutex_lock(&b->mu);
	*for_bytes = b->shed_bytes;
	*for_slots = b->shed_slots;
	pthread_mutex_unlock(&b->mu);
}
