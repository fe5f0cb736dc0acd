/*
 * portfwd.c - the Kubernetes port-forward dialer (kconn.h): each dial opens
 * a WebSocket to the API server's pods/portforward subresource and hands the
 * caller one end of a socketpair whose bytes travel on the port's data
 * channel; a pump thread per tunnel (pfpump.c) does the moving.
 *
 * Debian 12's libcurl (7.88) has no WebSocket of its own, so libcurl only
 * connects (CURLOPT_CONNECT_ONLY: TCP, the proxy's CONNECT, TLS with the
 * kubeconfig's CA, client certificate and insecure flag) and the upgrade
 * request, its 101 and the frames go through easy_send and easy_recv.
 * kubeconfig's tls-server-name is honoured with CURLOPT_CONNECT_TO: libcurl
 * is given the URL with that name, which it sends as SNI and verifies the
 * certificate against, and is told to connect to the server's real host.
 *
 * The dial returns after the 101, so an API server's refusal is the dial's
 * error, quoting its Status message; the kubelet's refusal (the pod's port
 * closed) comes later, on the error channel, and kube_portfwd_explain gives it.
 * timeout_ms bounds connecting and the upgrade, never the stream.
 */
#include "kconn.h"

#include <ctype.h>
#include <errno.h>
#include <jansson.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "base64.h"
#include "buf.h"
#include "clock.h"
#include "hclient.h"
#include "mem.h"
#include "pfpump.h"
#include "pftab.h"
#include "ws.h"

#define PF_PROTOCOL "v4.channel.k8s.io"
#define PF_HEAD_MAX ((size_t)16 * 1024) /* the API server's answer head */
#define PF_BODY_MAX ((size_t)64 * 1024) /* a refusal's body (a metav1.Status) */

struct pf_dialer {
	struct fleet_dialer base; /* first: the runner holds a fleet_dialer * */
	struct kube_conn *k;
	long timeout_ms;
	struct pf_tab *tab;
	char *curl_url;   /* what libcurl connects to: "https://HOST:PORT/" (HOST: tls-server-name if set) */
	char *connect_to; /* "TLSNAME:PORT:HOST:PORT" with tls-server-name, else NULL */
	char *authority;  /* the Host header: the server's "host[:port]" */
	char *prefix;     /* the server URL's path, without a trailing slash ("" mostly) */
	char *bad;        /* why the server URL cannot be used, or NULL */
};

/* one dial's connection while it is being upgraded */
struct conn {
	const struct hclient_lib *lib;
	CURL *c;
	int sock;
	long long deadline;
};

static bool name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 253)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!islower((unsigned char)s[i]) && !isdigit((unsigned char)s[i]) && s[i] != '-' && s[i] != '.')
			return false;
	return true;
}

/* split the kubeconfig's server URL into what a dial needs */
static void parse_server(struct pf_dialer *d)
{
	const char *s = d->k->server, *auth, *end, *colon;
	bool https;
	char *host, *port;

	if (s == NULL || !((https = strncasecmp(s, "https://", 8) == 0) || strncasecmp(s, "http://", 7) == 0)) {
		d->bad = mem_printf("the API server's URL \"%s\" is not http:// or https://", s ? s : "");
		return;
	}
	auth = s + (https ? 8 : 7);
	end = auth + strcspn(auth, "/?#");
	if (memchr(auth, '@', (size_t)(end - auth)) || end == auth) {
		d->bad = mem_printf("the API server's URL \"%s\" has no host, or has user information", s);
		return;
	}
	d->authority = mem_strndup(auth, (size_t)(end - auth));
	d->prefix = mem_strndup(end, strcspn(end, "?#"));
	if (d->prefix[0] && d->prefix[strlen(d->prefix) - 1] == '/')
		d->prefix[strlen(d->prefix) - 1] = '\0';
	colon = strrchr(d->authority, ':');
	if (colon && strchr(colon, ']') == NULL) {
		host = mem_strndup(d->authority, (size_t)(colon - d->authority));
		port = mem_strdup(colon + 1);
	} else {
		host = mem_strdup(d->authority);
		port = mem_strdup(https ? "443" : "80");
	}
	if (d->k->tls_server_name) {
		d->curl_url = mem_printf("%s://%s:%s/", https ? "https" : "http", d->k->tls_server_name, port);
		d->connect_to = mem_printf("%s:%s:%s:%s", d->k->tls_server_name, port, host, port);
	} else {
		d->curl_url = mem_printf("%s://%s/", https ? "https" : "http", d->authority);
	}
	free(host);
	free(port);
}

static int wait_sock(const struct conn *cn, short events)
{
	struct pollfd f = { .fd = cn->sock, .events = events };
	long long left = cn->deadline - clock_ms();

	if (left <= 0)
		return -1;
	return poll(&f, 1, (int)left) > 0 ? 0 : -1;
}

static int send_all(struct conn *cn, const char *p, size_t n, const char *what, struct err_msg *em)
{
	while (n > 0) {
		size_t sent = 0;
		CURLcode r = cn->lib->easy_send(cn->c, p, n, &sent);

		if (r == CURLE_AGAIN) {
			if (wait_sock(cn, POLLOUT) != 0)
				return err_set(em, DP_EIO, "%s: timed out sending the upgrade request", what);
			continue;
		}
		if (r != CURLE_OK)
			return err_set(em, DP_EIO, "%s: sending the upgrade request: %s", what, cn->lib->easy_strerror(r));
		p += sent;
		n -= sent;
	}
	return 0;
}

/* more of the answer into b (at most its cap): 0 (with *eof at the end), or DP_EIO / DP_ETOOBIG */
static int recv_more(struct conn *cn, struct buf *b, bool *eof, const char *what, struct err_msg *em)
{
	char chunk[4096];

	for (;;) {
		size_t n = 0, room = b->cap - b->len; /* b->cap is set: never 0 here */
		CURLcode r;

		if (room == 0)
			return err_set(em, DP_ETOOBIG, "%s: the API server's answer is larger than %zu bytes", what, b->cap);
		r = cn->lib->easy_recv(cn->c, chunk, room < sizeof(chunk) ? room : sizeof(chunk), &n);
		if (r == CURLE_AGAIN) {
			if (wait_sock(cn, POLLIN) != 0)
				return err_set(em, DP_EIO, "%s: timed out waiting for the API server's answer", what);
			continue;
		}
		if (r != CURLE_OK)
			return err_set(em, DP_EIO, "%s: reading the API server's answer: %s", what, cn->lib->easy_strerror(r));
		*eof = n == 0;
		return n ? buf_append(b, chunk, n) : 0;
	}
}

/* the value of header name in the head (lines after the status line), trimmed, into out; false if absent */
static bool header(const char *head, const char *name, char *out, size_t cap)
{
	size_t nl = strlen(name);

	for (const char *l = strstr(head, "\r\n"); l && l[2] != '\r'; l = strstr(l + 2, "\r\n")) {
		const char *v = l + 2, *e;

		if (strncasecmp(v, name, nl) != 0 || v[nl] != ':')
			continue;
		v += nl + 1;
		while (*v == ' ' || *v == '\t')
			v++;
		e = strstr(v, "\r\n");
		while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
			e--;
		snprintf(out, cap, "%.*s", (int)(e - v), v);
		return true;
	}
	return false;
}

/* the Status message in a refusal's body, or its first line, cleaned for a message */
static void refusal_text(const char *body, size_t n, char *out, size_t cap)
{
	const char *open = memchr(body, '{', n), *close = NULL;
	json_t *j = NULL, *m;

	for (const char *p = body + n; p > body && close == NULL; p--)
		if (p[-1] == '}')
			close = p;
	out[0] = '\0';
	if (open && close && close > open)
		j = json_loadb(open, (size_t)(close - open), 0, NULL);
	if (j && json_is_string(m = json_object_get(j, "message")))
		snprintf(out, cap, "%s", json_string_value(m));
	else
		snprintf(out, cap, "%.*s", (int)strcspn(body, "\r\n"), body);
	json_decref(j);
	for (char *p = out; *p; p++)
		if ((unsigned char)*p < 0x20 || *p == 0x7F)
			*p = ' ';
}

static int refused(struct conn *cn, struct buf *b, size_t head_len, int status, const char *what, struct err_msg *em)
{
	char v[32], reason[128], text[512];
	const char *sp;
	size_t want = PF_BODY_MAX;
	bool eof = false;
	int code = status == 401 || status == 403 ? DP_EAUTH : status == 404 ? DP_ENOTFOUND : DP_EREMOTE;

	if (header(b->data, "Content-Length", v, sizeof(v)))
		want = strtoul(v, NULL, 10) < PF_BODY_MAX ? strtoul(v, NULL, 10) : PF_BODY_MAX;
	b->cap = head_len + PF_BODY_MAX;
	while (b->len - head_len < want && !eof)
		if (recv_more(cn, b, &eof, what, NULL) != 0)
			break; /* what came is what we have */
	sp = strchr(b->data, ' ');
	sp = sp ? strchr(sp + 1, ' ') : NULL;
	snprintf(reason, sizeof(reason), "%.*s", sp ? (int)strcspn(sp + 1, "\r\n") : 0, sp ? sp + 1 : "");
	refusal_text(b->data + head_len, b->len - head_len, text, sizeof(text));
	return err_set(em, code, "%s: the API server answered %d%s%s%s%s", what, status, reason[0] ? " " : "", reason,
		       text[0] ? ": " : "", text);
}

/* the 101's headers say the upgrade is what we asked for */
static int check_upgrade(const char *head, const char *key, const char *what, struct err_msg *em)
{
	char v[256], want[WS_ACCEPT_LEN + 1];

	ws_accept(key, want);
	if (!header(head, "Upgrade", v, sizeof(v)) || strcasecmp(v, "websocket") != 0)
		return err_set(em, DP_EREMOTE, "%s: the API server's 101 does not upgrade to websocket", what);
	if (!header(head, "Sec-WebSocket-Accept", v, sizeof(v)) || strcmp(v, want) != 0)
		return err_set(em, DP_EREMOTE, "%s: the API server's Sec-WebSocket-Accept is not the answer to our key", what);
	if (!header(head, "Sec-WebSocket-Protocol", v, sizeof(v)) || strcmp(v, PF_PROTOCOL) != 0)
		return err_set(em, DP_EREMOTE, "%s: the API server did not agree to the %s subprotocol", what, PF_PROTOCOL);
	return 0;
}

static int connect_curl(struct pf_dialer *d, struct conn *cn, const char *what, struct err_msg *em)
{
	const struct kube_conn *k = d->k;
	struct curl_slist *to = NULL;
	char errbuf[CURL_ERROR_SIZE] = "";
	curl_socket_t sock = CURL_SOCKET_BAD;
	CURLcode r;

	if ((cn->lib = hclient_lib(em)) == NULL) {
		err_prefix(em, "%s", what);
		return DP_ENOLIB;
	}
	if ((cn->c = cn->lib->easy_init()) == NULL)
		return err_set(em, DP_EIO, "%s: libcurl could not start", what);
	cn->lib->easy_setopt(cn->c, CURLOPT_URL, d->curl_url);
	cn->lib->easy_setopt(cn->c, CURLOPT_CONNECT_ONLY, 1L);
	cn->lib->easy_setopt(cn->c, CURLOPT_CONNECTTIMEOUT_MS, d->timeout_ms);
	cn->lib->easy_setopt(cn->c, CURLOPT_NOSIGNAL, 1L);
	cn->lib->easy_setopt(cn->c, CURLOPT_TCP_KEEPALIVE, 1L);
	cn->lib->easy_setopt(cn->c, CURLOPT_ERRORBUFFER, errbuf);
	cn->lib->easy_setopt(cn->c, CURLOPT_SSL_VERIFYPEER, k->insecure ? 0L : 1L);
	cn->lib->easy_setopt(cn->c, CURLOPT_SSL_VERIFYHOST, k->insecure ? 0L : 2L);
	if (k->ca_file) {
		cn->lib->easy_setopt(cn->c, CURLOPT_CAINFO, k->ca_file);
		cn->lib->easy_setopt(cn->c, CURLOPT_CAPATH, (char *)NULL);
	}
	if (k->cert_file) {
		cn->lib->easy_setopt(cn->c, CURLOPT_SSLCERT, k->cert_file);
		cn->lib->easy_setopt(cn->c, CURLOPT_SSLKEY, k->key_file);
	}
	if (k->proxy_url) {
		cn->lib->easy_setopt(cn->c, CURLOPT_PROXY, k->proxy_url);
		cn->lib->easy_setopt(cn->c, CURLOPT_HTTPPROXYTUNNEL, 1L);
	}
	if (d->connect_to) {
		if ((to = cn->lib->slist_append(NULL, d->connect_to)) == NULL)
			return err_set(em, DP_EIO, "%s: libcurl could not allocate a list", what);
		cn->lib->easy_setopt(cn->c, CURLOPT_CONNECT_TO, to);
	}
	r = cn->lib->easy_perform(cn->c);
	cn->lib->easy_setopt(cn->c, CURLOPT_CONNECT_TO, (struct curl_slist *)NULL);
	cn->lib->easy_setopt(cn->c, CURLOPT_ERRORBUFFER, (char *)NULL);
	if (to)
		cn->lib->slist_free_all(to);
	if (r != CURLE_OK)
		return err_set(em, DP_EIO, "%s: connecting to %s: %s", what, k->server,
			       errbuf[0] ? errbuf : cn->lib->easy_strerror(r));
	if (cn->lib->easy_getinfo(cn->c, CURLINFO_ACTIVESOCKET, &sock) != CURLE_OK || sock == CURL_SOCKET_BAD)
		return err_set(em, DP_EIO, "%s: libcurl gave no socket for %s", what, k->server);
	cn->sock = (int)sock;
	return 0;
}

/* the upgrade request (it holds the credentials: the caller wipes it) */
static void request(const struct pf_dialer *d, const struct fleet_agent *a, const char *key, struct buf *b)
{
	buf_printf(b,
		   "GET %s/api/v1/namespaces/%s/pods/%s/portforward?ports=%d HTTP/1.1\r\n"
		   "Host: %s\r\nUser-Agent: diagport/%s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
		   "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: %s\r\n",
		   d->prefix, a->namespace_, a->pod, a->port, d->authority, DP_VERSION, key, PF_PROTOCOL);
	if (d->k->token) {
		buf_printf(b, "Authorization: Bearer %s\r\n", d->k->token);
	} else if (d->k->basic) {
		size_t len;
		char *enc = b64_encode(d->k->basic, strlen(d->k->basic), &len);

		buf_printf(b, "Authorization: Basic %s\r\n", enc);
		mem_wipe(enc, len);
		free(enc);
	}
	buf_puts(b, "\r\n");
}

/* connect, upgrade, and check the 101; the bytes after its head stay in b from *head_len */
static int upgrade(struct pf_dialer *d, const struct fleet_agent *a, struct conn *cn, struct buf *b, size_t *head_len,
		   const char *what, struct err_msg *em)
{
	char key[WS_KEY_LEN + 1];
	const char *end;
	bool eof = false;
	int rc, status = 0;

	if ((rc = connect_curl(d, cn, what, em)) != 0)
		return rc;
	if (ws_key(key) != 0)
		return err_set(em, DP_EIO, "%s: no random bytes for the WebSocket key", what);
	request(d, a, key, b);
	rc = send_all(cn, b->data, b->len, what, em);
	mem_wipe(b->data, b->len);
	buf_reset(b);
	if (rc != 0)
		return rc;
	b->cap = PF_HEAD_MAX;
	for (;;) {
		/* only the head must be text: bytes after its end may be the first frames, in the same read */
		end = b->data ? strstr(b->data, "\r\n\r\n") : NULL;
		if (b->data && memchr(b->data, '\0', end ? (size_t)(end + 4 - b->data) : b->len))
			return err_set(em, DP_EREMOTE, "%s: the API server's answer is not HTTP", what);
		if (end)
			break;
		if ((rc = recv_more(cn, b, &eof, what, em)) != 0)
			return rc;
		if (eof)
			return err_set(em, DP_EREMOTE, "%s: the API server closed the connection before answering", what);
	}
	*head_len = (size_t)(end + 4 - b->data);
	if (strncmp(b->data, "HTTP/1.", 7) != 0 || (b->data[7] != '0' && b->data[7] != '1') || b->data[8] != ' ' ||
	    !isdigit((unsigned char)b->data[9]) || !isdigit((unsigned char)b->data[10]) ||
	    !isdigit((unsigned char)b->data[11]))
		return err_set(em, DP_EREMOTE, "%s: the API server's answer is not HTTP", what);
	status = (b->data[9] - '0') * 100 + (b->data[10] - '0') * 10 + (b->data[11] - '0');
	if (status != 101)
		return refused(cn, b, *head_len, status, what, em);
	b->data[*head_len - 2] = '\0'; /* the head ends at its last CRLF, for header() */
	return check_upgrade(b->data, key, what, em);
}

static int dial(struct fleet_dialer *fd_, const struct fleet_agent *a, int *fd, struct err_msg *em)
{
	struct pf_dialer *d = (struct pf_dialer *)fd_;
	struct conn cn = { .sock = -1 };
	struct buf b;
	struct pf_stream s;
	size_t head_len = 0;
	char *what;
	int sv[2] = { -1, -1 }, rc;

	what = mem_printf("port-forward to %s/%s:%d", a->namespace_ ? a->namespace_ : "", a->pod ? a->pod : "", a->port);
	buf_init(&b, PF_HEAD_MAX);
	if (d->bad) {
		rc = err_set(em, DP_EINVAL, "%s: %s", what, d->bad);
		goto out;
	}
	if (!name_ok(a->namespace_) || !name_ok(a->pod) || a->port < 1 || a->port > 65535) {
		rc = err_set(em, DP_EINVAL, "%s: not a pod's namespace, name and port", what);
		goto out;
	}
	cn.deadline = clock_ms() + d->timeout_ms;
	if ((rc = upgrade(d, a, &cn, &b, &head_len, what, em)) != 0)
		goto out;
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
		rc = err_set(em, DP_EIO, "%s: socketpair: %s", what, strerror(errno));
		goto out;
	}
	s = (struct pf_stream){ .lib = cn.lib, .c = cn.c, .sock = cn.sock, .fd = sv[0], .caller_fd = sv[1],
				.tab = d->tab, .port = a->port, .what = what + strlen("port-forward to "),
				.early = (const uint8_t *)b.data + head_len, .early_len = b.len - head_len };
	s.gen = pf_tab_begin(d->tab, sv[1]);
	pf_tab_ref(d->tab);
	if ((rc = pf_pump_start(&s, em)) != 0) {
		pf_tab_end(d->tab, sv[1], s.gen);
		pf_tab_unref(d->tab);
		goto out;
	}
	cn.c = NULL; /* the pump's now, with sv[0] */
	sv[0] = -1;
	*fd = sv[1];
	sv[1] = -1;
out:
	if (sv[0] >= 0)
		close(sv[0]);
	if (sv[1] >= 0)
		close(sv[1]);
	if (cn.c)
		cn.lib->easy_cleanup(cn.c);
	buf_free(&b);
	free(what);
	return rc;
}

static void dialer_free(struct fleet_dialer *fd_)
{
	struct pf_dialer *d = (struct pf_dialer *)fd_;

	if (d == NULL)
		return;
	kube_conn_free(d->k);
	pf_tab_unref(d->tab); /* running pumps keep it until they end */
	free(d->curl_url);
	free(d->connect_to);
	free(d->authority);
	free(d->prefix);
	free(d->bad);
	free(d);
}

struct fleet_dialer *kube_portfwd_new(const struct kube_conn *k, long timeout_ms)
{
	struct pf_dialer *d = mem_zalloc(sizeof(*d));

	d->base.dial = dial;
	d->base.free = dialer_free;
	d->k = kube_conn_dup(k);
	d->timeout_ms = timeout_ms > 0 ? timeout_ms : 30000;
	d->tab = pf_tab_new();
	parse_server(d);
	return &d->base;
}

bool kube_portfwd_explain(struct fleet_dialer *fd_, int fd, struct err_msg *em)
{
	struct pf_dialer *d = (struct pf_dialer *)fd_;

	return d && d->base.dial == dial && pf_tab_take(d->tab, fd, em);
}
