/*
 * test_budget.c - who holds the webhook's body budget and connection slots,
 * and whom it sheds (webhook/budget.h). Connections are socket pairs: a shed
 * one's other end reads end-of-file, a kept one's would block.
 */
#include <stdlib.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "t.h"
#include "webhook/budget.h"

#define MIB ((size_t)1 << 20)

struct pair {
	int ours, theirs;
	struct budget_conn *c;
};

static void open_pair(struct budget *b, struct pair *p)
{
	int fd[2];

	if (socketpair(AF_UNIX, SOCK_STREAM, 0, fd) != 0)
		abort();
	fcntl(fd[1], F_SETFL, O_NONBLOCK);
	p->ours = fd[0];
	p->theirs = fd[1];
	p->c = budget_open(b, p->ours);
}

static void close_pair(struct budget *b, struct pair *p)
{
	budget_close(b, p->c);
	close(p->ours);
	close(p->theirs);
}

/* The other end sees the connection shut down (end of file), not just quiet. */
static bool was_shed(const struct pair *p)
{
	char c;

	return read(p->theirs, &c, 1) == 0;
}

/* Let requests begun until now pass BUDGET_SHED_AGE_MS (time passing, not a wait for an event). */
static void age(void)
{
	nanosleep(&(struct timespec){ .tv_nsec = (BUDGET_SHED_AGE_MS + 20) * 1000000L }, NULL);
}

static void large_bodies_refused_not_shedding(void)
{
	struct budget *b = budget_new(16 * MIB, 256);
	struct pair a, c;

	open_pair(b, &a);
	open_pair(b, &c);
	T_CHECK(budget_begin(b, a.c, 8 * MIB) == BUDGET_OK);
	age();
	/* 8 + 8 MiB would leave nothing of the 4 MiB reserve: refused, and nobody shed for it */
	T_CHECK(budget_begin(b, c.c, 8 * MIB) == BUDGET_FULL);
	T_CHECK(!was_shed(&a));
	budget_end(b, c.c);
	close_pair(b, &a);
	close_pair(b, &c);
	budget_free(b);
}

static void ordinary_body_sheds_the_slowest(void)
{
	struct budget *b = budget_new(16 * MIB, 256);
	struct pair big, slow, fast, review;

	open_pair(b, &big);
	open_pair(b, &slow);
	open_pair(b, &fast);
	open_pair(b, &review);
	T_CHECK(budget_begin(b, big.c, 8 * MIB) == BUDGET_OK);
	T_CHECK(budget_take(b, big.c, 4 * MIB) == BUDGET_OK); /* half its body: 4 MiB since it began */
	T_CHECK(budget_begin(b, slow.c, 200000) == BUDGET_OK);
	T_CHECK(budget_begin(b, fast.c, 200000) == BUDGET_OK);
	/* ordinary bodies fill the rest, the reserve included: 4 MiB + 4 MiB */
	T_CHECK(budget_take(b, slow.c, 1000) == BUDGET_OK);
	T_CHECK(budget_take(b, fast.c, 190000) == BUDGET_OK);
	age();
	{
		/* young ordinary holders until 4,500 bytes are left: 42 x 195,000 and 3,108 */
		struct pair fill[43];

		for (int i = 0; i < 43; i++) {
			size_t n = i < 42 ? 195000 : 3108;

			open_pair(b, &fill[i]);
			T_CHECK(budget_begin(b, fill[i].c, 200000) == BUDGET_OK);
			T_CHECK(budget_take(b, fill[i].c, n) == BUDGET_OK);
		}
		/* a 5,000-byte review does not fit: the slowest old-enough holder goes (slow: 1,000 bytes since
		   it began), which makes room; not the young ones (fill), nor the fast or the big one */
		T_CHECK(budget_begin(b, review.c, 5000) == BUDGET_OK);
		T_CHECK(budget_take(b, review.c, 5000) == BUDGET_OK);
		T_CHECK(was_shed(&slow));
		T_CHECK(!was_shed(&fast) && !was_shed(&big) && !was_shed(&fill[0]));
		T_CHECK(budget_take(b, slow.c, 2000) == BUDGET_SHED);
		T_CHECK(budget_answer(b, review.c) == BUDGET_OK);
		for (int i = 0; i < 43; i++)
			close_pair(b, &fill[i]);
	}
	{
		unsigned long long nb, ns;

		budget_stats(b, &nb, &ns);
		T_CHECK(nb == 1 && ns == 0);
	}
	close_pair(b, &big);
	close_pair(b, &slow);
	close_pair(b, &fast);
	close_pair(b, &review);
	budget_free(b);
}

static void young_holders_are_not_shed(void)
{
	struct budget *b = budget_new(16 * MIB, 256);
	struct pair h[90], review;

	for (int i = 0; i < 90; i++) {
		open_pair(b, &h[i]);
		T_CHECK(budget_begin(b, h[i].c, 200000) == BUDGET_OK);
		budget_take(b, h[i].c, 190000);
	}
	open_pair(b, &review);
	T_CHECK(budget_begin(b, review.c, 200000) == BUDGET_OK);
	/* everyone began less than BUDGET_SHED_AGE_MS ago: no room is made, the review is refused */
	T_CHECK(budget_take(b, review.c, 200000) == BUDGET_FULL);
	for (int i = 0; i < 90; i++) {
		T_CHECK(!was_shed(&h[i]));
		close_pair(b, &h[i]);
	}
	close_pair(b, &review);
	budget_free(b);
}

static void slots_shed_the_longest_waiting(void)
{
	struct budget *b = budget_new(16 * MIB, 8); /* 6 open before a new one sheds */
	struct pair p[8];
	int shed = 0;

	open_pair(b, &p[0]);
	open_pair(b, &p[1]);
	T_CHECK(budget_begin(b, p[0].c, 0) == BUDGET_OK);
	T_CHECK(budget_answer(b, p[0].c) == BUDGET_OK); /* being answered: never shed */
	age();
	for (int i = 2; i < 6; i++)
		open_pair(b, &p[i]);
	age();
	budget_end(b, p[2].c); /* a request of p[2] just ended: it waits afresh */
	open_pair(b, &p[6]);
	/* p[0] is answering; of the others p[1] waited longest */
	T_CHECK(was_shed(&p[1]));
	T_CHECK(!was_shed(&p[0]) && !was_shed(&p[2]) && !was_shed(&p[3]) && !was_shed(&p[4]) && !was_shed(&p[5]));
	T_CHECK(budget_begin(b, p[1].c, 0) == BUDGET_SHED);
	/* p[1] is shed but not yet closed: it does not count, so the next one sheds again, one of those that
	   waited since they were opened (p[2] waits afresh, under BUDGET_SHED_AGE_MS) */
	open_pair(b, &p[7]);
	T_CHECK(!was_shed(&p[0]) && !was_shed(&p[2]));
	for (int i = 3; i < 6; i++)
		shed += was_shed(&p[i]);
	T_CHECK(shed == 1);
	{
		unsigned long long nb, ns;

		budget_stats(b, &nb, &ns);
		T_CHECK(nb == 0 && ns == 2);
	}
	for (int i = 0; i < 8; i++)
		close_pair(b, &p[i]);
	budget_free(b);
}

/* A burst: every slot taken by connections younger than BUDGET_SHED_AGE_MS that begin no request. A new
 * one still sheds (the oldest of them), or the server would reach its own limit and accept nothing more;
 * but a keep-alive connection, idle between requests, goes before any of them. */
static void burst_of_young_connections_sheds(void)
{
	struct budget *b = budget_new(16 * MIB, 8); /* 6 open before a new one sheds */
	struct pair p[8];

	open_pair(b, &p[0]);
	T_CHECK(budget_begin(b, p[0].c, 0) == BUDGET_OK);
	T_CHECK(budget_answer(b, p[0].c) == BUDGET_OK);
	budget_end(b, p[0].c); /* served, now idle: a keep-alive connection */
	for (int i = 1; i < 6; i++)
		open_pair(b, &p[i]);
	open_pair(b, &p[6]);
	T_CHECK(was_shed(&p[0]));
	for (int i = 1; i < 7; i++)
		T_CHECK(!was_shed(&p[i]));
	open_pair(b, &p[7]); /* p[0] shed, not yet closed: the oldest young one goes */
	T_CHECK(was_shed(&p[1]));
	for (int i = 2; i < 8; i++)
		T_CHECK(!was_shed(&p[i]));
	for (int i = 0; i < 8; i++)
		close_pair(b, &p[i]);
	budget_free(b);
}

int main(void)
{
	T_BEGIN("budget");
	log_set_level(LOG_ERROR); /* the shed lines */
	T_RUN(large_bodies_refused_not_shedding);
	T_RUN(ordinary_body_sheds_the_slowest);
	T_RUN(young_holders_are_not_shed);
	T_RUN(slots_shed_the_longest_waiting);
	T_RUN(burst_of_young_connections_sheds);
	T_END();
}
