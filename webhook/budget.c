/*
 * budget.c - body bytes and connection slots, and whom to shed (budget.h).
 *
 * Every connection is on one list under one mutex; a shed is chosen by a walk
 * of that list (at most the server's connection limit, a few microseconds),
 * which happens only when the budget or the slots run short. The mutex is
 * taken a few times per request, never across I/O.
 */
#include "budget.h"

#include <pthread.h>
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
	struct budget_conn *head;
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

struct budget_conn *budget_open(struct budget *b, int fd)
{
	struct budget_conn *c = mem_zalloc(sizeof(*c)), *v = NULL;
	long long now = clock_ms();

	c->fd = fd;
	c->since = now;
	pthread_mutex_lock(&b->mu);
	if (b->head)
		b->head->prev = c;
	c->next = b->head;
	b->head = c;
	b->open++;
	if (b->open - b->shed_pending > b->high) {
		for (struct budget_conn *p = c->next; p; p = p->next)
			if (!p->shed && p->phase != ANSWERING && now - p->since >= BUDGET_SHED_AGE_MS &&
			    (v == NULL || p->since < v->since))
				v = p;
		if (v) {
			shed(b, v);
			b->shed_slots++;
		}
	}
	pthread_mutex_unlock(&b->mu);
	if (v)
		log_warn("connection shed", LOG_STR("event", "shed"), LOG_STR("reason", "the connection slots run short: the "
			 "connection that waited longest was closed"));
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
