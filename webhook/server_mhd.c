/*
 * server_mhd.c - libmicrohttpd for the webhook server, and the answers
 * written with it (server_int.h).
 *
 * libmicrohttpd is reached through a table of function pointers filled by
 * dlopen/dlsym; the types come from microhttpd.h, so every call is checked by
 * the compiler as if it were linked (the capture agent, the same binary,
 * never maps it). Every answer goes out through wh_reply_with: its headers,
 * Connection: close while its generation drains, and one TLS record.
 */
#include "server_int.h"

#include <errno.h>
#include <linux/sockios.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/socket.h>

#include "clock.h"
#include "dynlib.h"
#include "problem.h"

#define GNUTLS_E_AGAIN_ (-28)       /* gnutls.h's values; GnuTLS is reached through libmicrohttpd */
#define GNUTLS_E_INTERRUPTED_ (-52)

struct wh_mhd wh_mhd;
__thread const struct gen *wh_tl_gen;
__thread struct req *wh_tl_req;

static const struct dynlib_sym mhd_syms[] = {
	DYNLIB_SYM(MHD_start_daemon, wh_mhd.start_daemon),
	DYNLIB_SYM(MHD_stop_daemon, wh_mhd.stop_daemon),
	DYNLIB_SYM(MHD_quiesce_daemon, wh_mhd.quiesce_daemon),
	DYNLIB_SYM(MHD_create_response_from_buffer, wh_mhd.response_from_buffer),
	DYNLIB_SYM(MHD_add_response_header, wh_mhd.add_header),
	DYNLIB_SYM(MHD_queue_response, wh_mhd.queue),
	DYNLIB_SYM(MHD_destroy_response, wh_mhd.destroy),
	DYNLIB_SYM(MHD_lookup_connection_value, wh_mhd.lookup),
	DYNLIB_SYM(MHD_get_connection_info, wh_mhd.info),
};
static const char *const mhd_sonames[] = { "libmicrohttpd.so.12", NULL };
static struct dynlib mhd_lib = DYNLIB_INIT("libmicrohttpd", mhd_sonames, mhd_syms);

/* GnuTLS as libmicrohttpd mapped it (never loaded on its own): without it, answers go out as two records */
static const struct dynlib_sym tls_syms[] = {
	DYNLIB_SYM(gnutls_record_cork, wh_mhd.cork),
	DYNLIB_SYM(gnutls_record_uncork, wh_mhd.uncork),
};
static const char *const tls_sonames[] = { "libgnutls.so.30", NULL };
static struct dynlib tls_lib = { .what = "GnuTLS", .sonames = tls_sonames, .syms = tls_syms, .n_syms = 2,
				 .noload = true, .once = PTHREAD_ONCE_INIT };

int wh_mhd_load(struct err_msg *em)
{
	int rc;

	if ((rc = dynlib_load(&mhd_lib, em)) != 0)
		return rc;
	dynlib_load(&tls_lib, NULL);
	return 0;
}

/*
 * One TLS record for the answer, not two. libmicrohttpd 0.9.75 sends the
 * header and the body with one gnutls_record_send each under TLS (it has no
 * vectored send there): two records, two sendmsg calls, and two wake-ups of
 * the client, where nginx sends one. So the session is corked before the
 * answer is queued (GnuTLS then gathers what libmicrohttpd sends) and
 * uncorked in completed_cb, which libmicrohttpd calls on the same thread once
 * it has handed over the last byte: one record, one sendmsg. Only when the
 * socket's send queue is empty and the answer small (WH_CORK_MAX): the kernel
 * then takes the whole record at once, so uncorking never has to wait for a
 * client that does not read (wh_uncork() still bounds that wait).
 *
 * libmicrohttpd sets TCP_CORK on the socket before it sends and clears it
 * after its last send; with GnuTLS corked, that last send writes nothing,
 * so the record wh_uncork() writes lands in a corked socket, and the kernel
 * would hold it for its cork timer, ~200 ms (the answers that were held so
 * until webhook_latency.sh caught it). wh_uncork() clears TCP_CORK after the
 * record, which sends it at once. Bought, that setsockopt included: 9-11 us
 * of CPU per answer and 11-19 % more answers a second (docs/BENCHMARKS.md,
 * "Webhook clean-up").
 */
static void cork(struct MHD_Connection *c, struct req *q, size_t len)
{
	const union MHD_ConnectionInfo *s, *f;
	int outq;

	if (wh_mhd.cork == NULL || q == NULL || len > WH_CORK_MAX ||
	    (s = wh_mhd.info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION)) == NULL || s->tls_session == NULL ||
	    (f = wh_mhd.info(c, MHD_CONNECTION_INFO_CONNECTION_FD)) == NULL ||
	    ioctl(f->connect_fd, SIOCOUTQ, &outq) != 0 || outq != 0)
		return;
	wh_mhd.cork(s->tls_session);
	q->corked = true;
}

/* Send what cork() held. A client that leaves the record unread for WH_UNCORK_MAX_MS loses the connection. */
void wh_uncork(struct MHD_Connection *c)
{
	const union MHD_ConnectionInfo *s = wh_mhd.info(c, MHD_CONNECTION_INFO_GNUTLS_SESSION),
				       *f = wh_mhd.info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
	long long deadline = clock_ms() + WH_UNCORK_MAX_MS;
	int rc;

	if (s == NULL || s->tls_session == NULL || f == NULL)
		return;
	while ((rc = wh_mhd.uncork(s->tls_session, 0)) == GNUTLS_E_AGAIN_ || rc == GNUTLS_E_INTERRUPTED_) {
		struct pollfd p = { .fd = f->connect_fd, .events = POLLOUT };
		long long now = clock_ms();

		if (now >= deadline || (poll(&p, 1, (int)(deadline - now)) < 0 && errno != EINTR)) {
			shutdown(f->connect_fd, SHUT_RDWR); /* libmicrohttpd closes it at its next read */
			return;
		}
	}
	setsockopt(f->connect_fd, IPPROTO_TCP, TCP_CORK, &(int){ 0 }, sizeof(int)); /* out now, not in 200 ms */
}

enum MHD_Result wh_reply_with(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
				  size_t len, const char *hname, const char *hval)
{
	struct MHD_Response *r = wh_mhd.response_from_buffer(len, (void *)body, MHD_RESPMEM_MUST_COPY);
	enum MHD_Result rc;

	if (r == NULL)
		return MHD_NO;
	cork(c, wh_tl_req, len);
	wh_mhd.add_header(r, "Content-Type", ctype);
	wh_mhd.add_header(r, "Cache-Control", "no-store");
	wh_mhd.add_header(r, "X-Content-Type-Options", "nosniff");
	if (hname)
		wh_mhd.add_header(r, hname, hval);
	if (wh_tl_gen && atomic_load(&wh_tl_gen->draining))
		wh_mhd.add_header(r, "Connection", "close"); /* a reload or shutdown is waiting for this connection */
	rc = wh_mhd.queue(c, status, r);
	wh_mhd.destroy(r);
	return rc;
}

enum MHD_Result wh_reply(struct MHD_Connection *c, unsigned status, const char *ctype, const char *body,
			     size_t len)
{
	return wh_reply_with(c, status, ctype, body, len, NULL, NULL);
}

enum MHD_Result wh_problem_with(struct MHD_Connection *c, unsigned status, const char *title,
				    const char *detail, const char *hname, const char *hval)
{
	char *s = problem_body(status, title, detail);
	enum MHD_Result rc = wh_reply_with(c, status, "application/problem+json", s, strlen(s), hname, hval);

	free(s);
	return rc;
}

enum MHD_Result wh_problem(struct MHD_Connection *c, unsigned status, const char *title, const char *detail)
{
	return wh_problem_with(c, status, title, detail, NULL, NULL);
}

