/*
 * pfpump.c - a port-forward tunnel's pump thread (pfpump.h).
 *
 * One thread per tunnel, one poll loop over two descriptors: the API
 * server's socket (read and written only through libcurl's easy_recv and
 * easy_send, which carry the TLS) and the pump's end of the socketpair the
 * caller holds the other end of. Memory is fixed per tunnel whatever flows
 * through it (a dump is gigabytes): one 64 KiB buffer each way, and the
 * server's frames are not gathered whole but their payload is handed to the
 * caller in place as it arrives, so a frame's size only matters against a
 * sanity cap (PF_FRAME_MAX).
 *
 * The wire (v4.channel.k8s.io, as pkg/kubelet/cri/streaming/portforward/
 * websocket.go and apimachinery's wsstream speak it): every message starts
 * with its channel byte, 0 for the port's data and 1 for its errors; the
 * server's first message on each channel is the port number (2 bytes,
 * little-endian) alone; client data goes as masked binary frames
 * [0][bytes]. The protocol has no half-close, so the caller's
 * shutdown(SHUT_WR) only stops our reading; its close (POLLHUP) closes the
 * WebSocket.
 *
 * The loop tries every step that may move bytes (receive, hand payload on,
 * read the caller, send) until none does, then polls only for what said
 * "again". libcurl's TLS may hold received bytes the socket no longer
 * shows, which is why receiving is tried before every poll, not after it.
 * GnuTLS wants a send that said "again" repeated with the same bytes, so a
 * frame started is sent to its end before another (a pong, a close) starts.
 */
#include "pfpump.h"

#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "clock.h"
#include "mem.h"
#include "ws.h"

#define PF_BUF ((size_t)64 * 1024)
#define PF_ERRTEXT 1024       /* the error channel's message kept, at most */
#define PF_CLOSE_WAIT_MS 2000 /* for the server's close frame after ours */

enum { SEND_NONE, SEND_TX, SEND_CTL };

struct pump {
	struct pf_stream s;
	bool local_eof;     /* the caller shut its writing side: nothing more to read */
	bool local_gone;    /* the caller closed (or the pod side ended): nothing more to write */
	bool server_eof;    /* the API server's connection ended */
	bool server_closed; /* its close frame came */
	bool close_sent;    /* our close frame is queued or sent */
	bool failed;
	long long deadline; /* while waiting for the server's close, else 0 */
	char why[PF_ERRTEXT + 256];

	/* from the server */
	uint8_t rx[PF_BUF];
	size_t rx_off, rx_len;
	bool in_frame, fin, in_msg;
	uint64_t left;       /* payload bytes of the current frame not yet read */
	int chan;            /* the current message's channel, -1 before its first byte */
	int prefix_left[2];  /* port bytes still expected at the head of channels 0 and 1 */
	unsigned prefix[2];
	char errtext[PF_ERRTEXT];
	size_t errlen;

	/* to the server: a data frame being built or sent, and one control frame */
	uint8_t tx[PF_BUF];
	size_t tx_off, tx_len;
	uint8_t ctl[WS_HEAD_MAX + WS_CONTROL_MAX];
	size_t ctl_off, ctl_len;
	int sending;
	uint8_t rnd[256];
	size_t rnd_off;
};

static int fail(struct pump *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct pump *p, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (!p->failed) {
		n = snprintf(p->why, sizeof(p->why), "the port-forward to %s failed: ", p->s.what);
		va_start(ap, fmt);
		if (n > 0 && (size_t)n < sizeof(p->why))
			vsnprintf(p->why + n, sizeof(p->why) - (size_t)n, fmt, ap);
		va_end(ap);
		p->failed = true;
	}
	return -1;
}

static void mask_key(struct pump *p, uint8_t mask[4])
{
	if (p->rnd_off + 4 > sizeof(p->rnd)) {
		if (getrandom(p->rnd, sizeof(p->rnd), 0) != (ssize_t)sizeof(p->rnd))
			DP_FATAL("getrandom failed: %s", strerror(errno)); /* the kernel always has it */
		p->rnd_off = 0;
	}
	memcpy(mask, p->rnd + p->rnd_off, 4);
	p->rnd_off += 4;
}

static void ctl_queue(struct pump *p, enum ws_opcode op, const uint8_t *payload, size_t n)
{
	uint8_t mask[4];
	size_t h;

	mask_key(p, mask);
	h = ws_head_put(p->ctl, op, n, mask);
	memcpy(p->ctl + h, payload, n);
	ws_mask(p->ctl + h, n, mask, 0);
	p->ctl_off = 0;
	p->ctl_len = h + n;
}

static void close_queue(struct pump *p, unsigned code)
{
	uint8_t c[2] = { (uint8_t)(code >> 8), (uint8_t)code };

	ctl_queue(p, WS_CLOSE, c, sizeof(c));
	p->close_sent = true;
	p->deadline = clock_ms() + PF_CLOSE_WAIT_MS;
}

/* the pod side said why it failed: keep it for kube_portfwd_explain and end the caller's stream */
static void pod_error(struct pump *p)
{
	char msg[PF_ERRTEXT + 128];

	for (size_t i = 0; i < p->errlen; i++)
		if ((unsigned char)p->errtext[i] < 0x20 || p->errtext[i] == 0x7F)
			p->errtext[i] = ' ';
	snprintf(msg, sizeof(msg), "the port-forward to %s ended: %.*s", p->s.what, (int)p->errlen, p->errtext);
	pf_tab_note(p->s.tab, p->s.caller_fd, p->s.gen, msg);
	p->errlen = 0;
	if (!p->local_gone) {
		shutdown(p->s.fd, SHUT_RDWR);
		p->local_gone = true;
	}
}

static void frame_end(struct pump *p)
{
	p->in_frame = false;
	if (!p->fin)
		return;
	if (p->chan == 1 && p->errlen > 0)
		pod_error(p);
	p->in_msg = false;
	p->chan = -1;
}

/* a whole control frame (h, then its payload at pl) */
static int control(struct pump *p, const struct ws_head *h, const uint8_t *pl)
{
	if (h->opcode == WS_PING) {
		ctl_queue(p, WS_PONG, pl, (size_t)h->len);
	} else if (h->opcode == WS_CLOSE) {
		p->server_closed = true;
		if (!p->close_sent) /* echo its status code (RFC 6455 5.5.1) */
			ctl_queue(p, WS_CLOSE, pl, h->len >= 2 ? 2 : 0);
		p->close_sent = true;
	}
	return 1;
}

static int frame_start(struct pump *p, const uint8_t *b, size_t n, bool *blocked)
{
	struct ws_head h;
	int r = ws_head_get(b, n, &h);

	if (r <= 0)
		return r == 0 ? 0 : fail(p, "a malformed WebSocket frame header from the API server");
	if (h.rsv || h.masked)
		return fail(p, "the API server sent a frame with %s", h.rsv ? "RSV bits set" : "a mask");
	if (h.opcode >= WS_CLOSE) {
		if (!h.fin || h.len > WS_CONTROL_MAX || h.opcode > WS_PONG)
			return fail(p, "the API server sent a malformed control frame (opcode %d)", h.opcode);
		if (n < h.size + h.len)
			return 0;
		if (h.opcode != WS_PONG && (p->ctl_len || p->sending == SEND_CTL)) {
			*blocked = true; /* our last control frame is still going out */
			return 0;
		}
		p->rx_off += h.size + (size_t)h.len;
		return control(p, &h, b + h.size);
	}
	if (h.opcode == WS_TEXT)
		return fail(p, "the API server sent a text frame on the binary channel protocol");
	if (h.opcode != WS_BINARY && h.opcode != WS_CONT)
		return fail(p, "the API server sent a frame with the unknown opcode %d", h.opcode);
	if ((h.opcode == WS_CONT) != p->in_msg)
		return fail(p, "the API server sent a %s", p->in_msg ? "new message inside a fragmented one"
								 : "continuation frame outside a message");
	if (h.len > PF_FRAME_MAX)
		return fail(p, "the API server sent a WebSocket frame of %llu bytes, over the cap of %u",
			    (unsigned long long)h.len, PF_FRAME_MAX);
	p->in_msg = true;
	p->in_frame = true;
	p->fin = h.fin;
	p->left = h.len;
	p->rx_off += h.size;
	if (p->left == 0)
		frame_end(p);
	return 1;
}

/* payload bytes b[0..n) of a data frame: how many were taken, or -1 */
static ssize_t payload(struct pump *p, const uint8_t *b, size_t n, bool *blocked)
{
	ssize_t w;

	if (p->chan < 0) {
		p->chan = b[0];
		return 1;
	}
	if (p->chan < 2 && p->prefix_left[p->chan] > 0) {
		p->prefix[p->chan] |= (unsigned)b[0] << (8 * (2 - p->prefix_left[p->chan]));
		if (--p->prefix_left[p->chan] == 0 && p->prefix[p->chan] != (unsigned)p->s.port)
			return fail(p, "the API server's channel %d is for port %u, not %d", p->chan, p->prefix[p->chan],
				    p->s.port);
		return 1;
	}
	if (p->chan == 1) {
		size_t room = sizeof(p->errtext) - p->errlen;

		memcpy(p->errtext + p->errlen, b, n < room ? n : room);
		p->errlen += n < room ? n : room;
		return (ssize_t)n;
	}
	if (p->chan != 0 || p->local_gone)
		return (ssize_t)n; /* another port's channel (none was asked for), or nobody to give it to */
	w = send(p->s.fd, b, n, MSG_NOSIGNAL | MSG_DONTWAIT);
	if (w >= 0)
		return w;
	if (errno == EAGAIN || errno == EWOULDBLOCK) {
		*blocked = true;
		return 0;
	}
	if (errno == EINTR)
		return 0;
	p->local_gone = true; /* EPIPE, ECONNRESET: the caller closed */
	return (ssize_t)n;
}

/* parse what rx holds: 1 when something moved, 0 when nothing could, -1 on a protocol error */
static int rx_step(struct pump *p, bool *blocked)
{
	const uint8_t *b = p->rx + p->rx_off;
	size_t n = p->rx_len - p->rx_off;
	ssize_t took;

	if (p->server_closed || n == 0)
		return 0;
	if (!p->in_frame)
		return frame_start(p, b, n, blocked);
	if (n > p->left)
		n = (size_t)p->left;
	if ((took = payload(p, b, n, blocked)) < 0)
		return -1;
	p->rx_off += (size_t)took;
	p->left -= (uint64_t)took;
	if (p->left == 0)
		frame_end(p);
	return took > 0;
}

static int receive(struct pump *p, bool *again)
{
	size_t n = 0;
	CURLcode r;

	if (p->rx_off == p->rx_len) {
		p->rx_off = p->rx_len = 0;
	} else if (p->rx_off > 0 && PF_BUF - p->rx_len < PF_BUF / 2) {
		memmove(p->rx, p->rx + p->rx_off, p->rx_len - p->rx_off);
		p->rx_len -= p->rx_off;
		p->rx_off = 0;
	}
	if (p->server_eof || p->server_closed || p->rx_len == PF_BUF)
		return 0;
	r = p->s.lib->easy_recv(p->s.c, p->rx + p->rx_len, PF_BUF - p->rx_len, &n);
	if (r == CURLE_AGAIN) {
		*again = true;
		return 0;
	}
	if (r != CURLE_OK) {
		p->server_eof = true;
		return fail(p, "reading from the API server: %s", p->s.lib->easy_strerror(r));
	}
	if (n == 0)
		p->server_eof = true;
	p->rx_len += n;
	return 1;
}

/* the caller's next bytes into one masked binary frame on channel 0 */
static int read_local(struct pump *p, bool *again)
{
	const size_t at = WS_HEAD_MAX + 1; /* the header goes right-aligned before the channel byte */
	uint8_t head[WS_HEAD_MAX], mask[4];
	ssize_t n;
	size_t h;

	if (p->local_eof || p->local_gone || p->close_sent || p->tx_len || p->sending != SEND_NONE)
		return 0;
	n = recv(p->s.fd, p->tx + at, PF_BUF - at, MSG_DONTWAIT);
	if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) {
		*again = true;
		return 0;
	}
	if (n <= 0) {
		p->local_eof = true;
		if (n < 0)
			p->local_gone = true;
		return 1;
	}
	p->tx[at - 1] = 0;
	mask_key(p, mask);
	h = ws_head_put(head, WS_BINARY, (uint64_t)n + 1, mask);
	memcpy(p->tx + at - 1 - h, head, h);
	ws_mask(p->tx + at - 1, (size_t)n + 1, mask, 0);
	p->tx_off = at - 1 - h;
	p->tx_len = at + (size_t)n;
	return 1;
}

static int flush(struct pump *p, bool *again)
{
	uint8_t *b;
	size_t *off, *len, n = 0;
	CURLcode r;

	if (p->sending == SEND_NONE)
		p->sending = p->ctl_len ? SEND_CTL : p->tx_len ? SEND_TX : SEND_NONE;
	if (p->sending == SEND_NONE)
		return 0;
	b = p->sending == SEND_CTL ? p->ctl : p->tx;
	off = p->sending == SEND_CTL ? &p->ctl_off : &p->tx_off;
	len = p->sending == SEND_CTL ? &p->ctl_len : &p->tx_len;
	r = p->s.lib->easy_send(p->s.c, b + *off, *len - *off, &n);
	if (r == CURLE_AGAIN) {
		*again = true;
		return 0;
	}
	if (r != CURLE_OK) {
		p->server_eof = true;
		return fail(p, "writing to the API server: %s", p->s.lib->easy_strerror(r));
	}
	*off += n;
	if (*off == *len) {
		*off = *len = 0;
		p->sending = SEND_NONE;
	}
	return n > 0;
}

/* true when the tunnel is over */
static bool finished(struct pump *p, bool rx_blocked)
{
	if (p->failed)
		return true;
	if (p->server_closed) /* done once our answering close is out */
		return p->ctl_len == 0 && p->sending == SEND_NONE;
	if (p->server_eof) /* done once what came before the end is handed on */
		return !rx_blocked;
	if (p->local_gone && !p->close_sent)
		close_queue(p, 1000);
	return p->close_sent && p->deadline && clock_ms() >= p->deadline;
}

static void wait_io(struct pump *p, bool sock_in, bool sock_out, bool local_in, bool local_out)
{
	struct pollfd f[2] = {
		{ .fd = p->s.sock, .events = (short)((sock_in ? POLLIN : 0) | (sock_out ? POLLOUT : 0)) },
		{ .fd = p->local_gone ? -1 : p->s.fd, .events = (short)((local_in ? POLLIN : 0) | (local_out ? POLLOUT : 0)) },
	};
	int timeout = -1;

	if (p->deadline) {
		long long left = p->deadline - clock_ms();

		timeout = left > 0 ? (int)left : 0;
	}
	/* POLLHUP: the caller closed its end (its shutdown(SHUT_WR) alone is a read of 0, not this) */
	if (poll(f, 2, timeout) > 0 && (f[1].revents & (POLLHUP | POLLERR)))
		p->local_gone = true;
}

static void run(struct pump *p)
{
	for (;;) {
		bool sock_in = false, sock_out = false, local_in = false, local_out = false, moved = false;
		int r;

		if ((r = receive(p, &sock_in)) < 0)
			break;
		moved |= r > 0;
		while ((r = rx_step(p, &local_out)) > 0)
			moved = true;
		if (r < 0)
			break;
		if (read_local(p, &local_in) > 0)
			moved = true;
		if ((r = flush(p, &sock_out)) < 0)
			break;
		moved |= r > 0;
		if (finished(p, local_out))
			break;
		if (!moved)
			wait_io(p, sock_in, sock_out, local_in, local_out);
	}
	if (p->failed && !p->server_eof && p->sending == SEND_NONE && !p->close_sent) {
		size_t n;

		close_queue(p, 1002); /* protocol error; one try, the connection ends anyway */
		p->s.lib->easy_send(p->s.c, p->ctl, p->ctl_len, &n);
	}
	if (p->failed)
		pf_tab_note(p->s.tab, p->s.caller_fd, p->s.gen, p->why);
	else if (p->server_eof && !p->server_closed && !p->local_gone)
		pf_tab_note(p->s.tab, p->s.caller_fd, p->s.gen, "the API server ended the port-forward without closing it");
}

static void *pump_main(void *arg)
{
	struct pump *p = arg;

	run(p);
	close(p->s.fd); /* after the reason is kept: the caller reads the end, then may ask why */
	pf_tab_end(p->s.tab, p->s.caller_fd, p->s.gen);
	pf_tab_unref(p->s.tab);
	p->s.lib->easy_cleanup(p->s.c);
	free((char *)p->s.what);
	free(p);
	return NULL;
}

int pf_pump_start(const struct pf_stream *s, struct err_msg *em)
{
	struct pump *p;
	pthread_attr_t attr;
	pthread_t t;
	int rc;

	if (s->early_len > PF_BUF)
		return err_set(em, DP_EREMOTE, "the port-forward to %s: the API server sent %zu bytes at once after the 101",
			       s->what, s->early_len);
	p = mem_zalloc(sizeof(*p));
	p->s = *s;
	p->s.what = mem_strdup(s->what);
	if (s->early_len)
		memcpy(p->rx, s->early, s->early_len);
	p->rx_len = s->early_len;
	p->chan = -1;
	p->prefix_left[0] = p->prefix_left[1] = 2;
	p->rnd_off = sizeof(p->rnd);
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	pthread_attr_setstacksize(&attr, (size_t)256 * 1024);
	rc = pthread_create(&t, &attr, pump_main, p);
	pthread_attr_destroy(&attr);
	if (rc != 0) {
		free((char *)p->s.what);
		free(p);
		return err_set(em, DP_EIO, "the port-forward to %s: cannot start its thread: %s", s->what, strerror(rc));
	}
	return 0;
}
