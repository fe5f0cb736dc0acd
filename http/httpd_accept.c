/*
 * httpd_accept.c - the HTTP server's acceptor thread (httpd_int.h): one poll
 * over every listening socket, the wake pipe and every connection the
 * acceptor holds; what is readable goes to httpd_conn.c's state machine,
 * what is past its deadline expires there. New connections are admitted here
 * under the per-peer and pending limits (httpd_conn.c's file-top comment
 * says why each): a peer at max_per_peer, or a full pending list, gives up
 * its oldest connection (a lingering one first) so a new request is always
 * read. accept() failing for want of descriptors pauses accepting briefly
 * instead of spinning. Connections the workers answered come back through
 * the wake pipe, to linger.
 */
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "httpd_int.h"
#include "mem.h"

#define ACCEPT_BURST 64
#define ACCEPT_PAUSE_MS 100

static void peer_of(const struct sockaddr_storage *sa, struct peer *p)
{
	memset(p, 0, sizeof(*p));
	p->family = sa->ss_family;
	if (sa->ss_family == AF_INET)
		memcpy(p->a, &((const struct sockaddr_in *)sa)->sin_addr, 4);
	else if (sa->ss_family == AF_INET6)
		memcpy(p->a, &((const struct sockaddr_in6 *)sa)->sin6_addr, 16);
}

static bool same_peer(const struct peer *a, const struct peer *b)
{
	return a->family == b->family && memcmp(a->a, b->a, sizeof(a->a)) == 0;
}

/* Close the oldest connection the acceptor holds (of peer p, or any): one lingering first. False when none. */
static bool evict_oldest(struct httpd *d, const struct peer *p)
{
	struct conn *old = NULL;

	for (size_t i = 0; i < d->n_pend; i++) {
		struct conn *c = d->pend[i];

		if (p && !same_peer(&c->peer, p))
			continue;
		if (old == NULL || (c->state == CONN_LINGER) > (old->state == CONN_LINGER) ||
		    ((c->state == CONN_LINGER) == (old->state == CONN_LINGER) && c->seq < old->seq))
			old = c;
	}
	if (old == NULL)
		return false;
	httpd_conn_drop(d, old);
	return true;
}

static size_t peer_count(struct httpd *d, const struct peer *p)
{
	size_t n = 0;

	for (size_t i = 0; i < d->n_pend; i++)
		n += same_peer(&d->pend[i]->peer, p);
	pthread_mutex_lock(&d->mu);
	for (unsigned i = 0; i < d->max_conns + HTTPD_PROBE_SLOTS; i++)
		n += d->work[i] && same_peer(&d->work[i]->peer, p);
	pthread_mutex_unlock(&d->mu);
	return n;
}

static void admit(struct httpd *d, int sock, bool tls, const struct sockaddr_storage *sa, long long now)
{
	struct conn *c;
	struct peer p;
	int one = 1;

	peer_of(sa, &p);
	if (peer_count(d, &p) >= d->per_peer && !evict_oldest(d, &p)) {
		close(sock); /* every one of its connections is being answered: refused, as a full listen queue would */
		return;
	}
	if (d->n_pend == d->pend_cap)
		evict_oldest(d, NULL);
	/* a TLS session's memory from the one budget: the oldest readers make room, else it is refused */
	while (tls && d->budget_used + HTTPD_TLS_CONN_COST > d->budget)
		if (!evict_oldest(d, NULL)) {
			close(sock);
			return;
		}
	setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	c = mem_zalloc(sizeof(*c));
	c->d = d;
	c->sock = sock;
	c->peer = p;
	c->state = tls ? CONN_HELLO : CONN_HEAD;
	c->events = POLLIN;
	c->seq = ++d->seq;
	c->deadline_ms = now + d->head_ms;
	c->buf = c->first;
	c->cap = d->head_cap < HTTPD_CONN_FIRST ? d->head_cap : HTTPD_CONN_FIRST;
	c->r.fd = -1;
	if (tls)
		httpd_conn_charge(d, c, HTTPD_TLS_CONN_COST); /* room made above */
	httpd_conn_pend_add(d, c);
}

static void accept_some(struct httpd *d, int lfd, bool tls, long long now)
{
	for (int k = 0; k < ACCEPT_BURST; k++) {
		struct sockaddr_storage sa = { 0 };
		socklen_t sl = sizeof(sa);
		int s = accept4(lfd, (struct sockaddr *)&sa, &sl, SOCK_CLOEXEC | SOCK_NONBLOCK);

		if (s >= 0) {
			admit(d, s, tls, &sa, now);
			continue;
		}
		if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
			if (evict_oldest(d, NULL))
				continue; /* out of descriptors: the oldest reader makes room */
			d->accept_pause_until = now + ACCEPT_PAUSE_MS;
		}
		return;
	}
}

/* ---- the loop ---- */

/* Take the connections workers have answered, to linger. True when the server is stopping. */
static bool take_done(struct httpd *d, long long now)
{
	char drain[64];
	struct conn *list;
	bool stopping;

	while (read(d->wake[0], drain, sizeof(drain)) > 0)
		;
	pthread_mutex_lock(&d->mu);
	list = d->done;
	d->done = NULL;
	stopping = d->stopping;
	pthread_mutex_unlock(&d->mu);
	while (list) {
		struct conn *c = list;

		list = c->next;
		if (stopping || d->n_pend == d->pend_cap) {
			httpd_conn_free(c);
			continue;
		}
		c->seq = ++d->seq;
		httpd_conn_linger(c, now);
		httpd_conn_pend_add(d, c);
	}
	return stopping;
}

void *httpd_acceptor_main(void *arg)
{
	struct httpd *d = arg;
	struct pollfd *pf = mem_array(d->n + 1 + d->pend_cap, sizeof(*pf));
	struct conn **polled = mem_array(d->pend_cap, sizeof(*polled));

	for (;;) {
		long long now = clock_ms(), next = -1;
		bool listening = now >= d->accept_pause_until;
		size_t m = 0, first_conn, np = d->n_pend;

		for (size_t i = 0; listening && i < d->n; i++)
			pf[m++] = (struct pollfd){ .fd = d->lfd[i], .events = POLLIN };
		pf[m++] = (struct pollfd){ .fd = d->wake[0], .events = POLLIN };
		first_conn = m;
		for (size_t i = 0; i < np; i++) {
			polled[i] = d->pend[i];
			pf[m++] = (struct pollfd){ .fd = d->pend[i]->sock,
						   .events = d->pend[i]->state == CONN_WAIT ? 0 : d->pend[i]->events };
			if (next < 0 || d->pend[i]->deadline_ms < next)
				next = d->pend[i]->deadline_ms;
			if (d->pend[i]->tls && httpd_tls_pending(d->pend[i]->tls))
				next = now; /* decrypted bytes wait that poll cannot see */
		}
		if (!listening && (next < 0 || d->accept_pause_until < next))
			next = d->accept_pause_until;
		if (poll(pf, m, next < 0 ? -1 : (int)(next > now ? next - now : 0)) < 0)
			continue;
		now = clock_ms();
		if (pf[first_conn - 1].revents && take_done(d, now))
			break;
		for (size_t i = 0; i < np; i++)
			if (pf[first_conn + i].revents ||
			    (polled[i]->tls && polled[i]->state != CONN_WAIT && httpd_tls_pending(polled[i]->tls)))
				httpd_conn_readable(d, polled[i], now);
		httpd_conn_expire(d, now);
		for (size_t i = 0; listening && i < d->n; i++)
			if (pf[i].revents & POLLIN)
				accept_some(d, d->lfd[i], d->lfd_tls[i], now);
	}
	while (d->n_pend)
		httpd_conn_drop(d, d->pend[0]);
	free(polled);
	free(pf);
	return NULL;
}
