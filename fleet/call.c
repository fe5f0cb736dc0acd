/*
 * call.c - one HTTP request to one agent (call.h), on the libcurl that
 * hclient.c loads.
 *
 * Over a dialer (Kubernetes) libcurl is handed the stream the dialer opens
 * instead of a socket it connects itself (CURLOPT_OPENSOCKETFUNCTION), and
 * the agent's host name is pinned to a placeholder address so that nothing
 * is looked up in DNS. A 2xx body flows to the caller's sink as it arrives;
 * anything else is kept (64 KiB at most) to say why.
 */
#include "call.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "fdcurl.h"
#include "hclient.h"
#include "kconn.h"
#include "mem.h"

#define ERR_BODY_CAP ((size_t)64 * 1024)
#define RECV_BUF (512L * 1024) /* libcurl's receive buffer: a large body in fewer reads (its own default is 16 KiB) */
#define CONNECT_TIMEOUT_MS 15000L
#define FLOOR_RING (FLEET_FLOOR_WINDOW_S + 2)

/* The low-speed floor's record: the body's bytes at the end of each second since it was armed. */
struct floor {
	long long t0, armed;       /* ms: the call's start, the floor's arming (0: not yet) */
	long sec;                  /* the latest second recorded */
	curl_off_t at[FLOOR_RING]; /* at[s % FLOOR_RING]: bytes by the end of second s */
	bool tripped;
	struct err_msg em;
};

struct state {
	struct fleet_call *c;
	const struct hclient_lib *lib;
	CURL *h;
	struct buf errbody;
	struct err_msg sink_em, dial_em, tunnel_em;
	int sink_rc, dial_rc;
	bool tunnel_said;
	struct floor floor;
};

static curl_socket_t open_stream(void *u, curlsocktype purpose, struct curl_sockaddr *addr)
{
	struct state *s = u;
	struct fleet_dialer *d = s->c->agent->dialer;
	int fd = -1;

	(void)purpose;
	s->dial_rc = d->dial(d, s->c->agent, &fd, &s->dial_em);
	if (s->dial_rc == 0 && (s->dial_rc = fdcurl_aim(addr, &s->dial_em)) != 0) { /* libcurl 7.88: fdcurl.h */
		close(fd);
		fd = -1;
	}
	return s->dial_rc == 0 ? fd : CURL_SOCKET_BAD;
}

static int already_connected(void *u, curl_socket_t fd, curlsocktype purpose)
{
	(void)u;
	(void)fd;
	(void)purpose;
	return CURL_SOCKOPT_ALREADY_CONNECTED;
}

static int close_stream(void *u, curl_socket_t fd)
{
	struct state *s = u;

	if (!s->tunnel_said)
		s->tunnel_said = kube_portfwd_explain(s->c->agent->dialer, fd, &s->tunnel_em);
	return close(fd);
}

static size_t on_header(char *p, size_t size, size_t n, void *u)
{
	struct state *s = u;
	size_t len = size * n;

	if (len > 9 && strncasecmp(p, "Location:", 9) == 0) {
		const char *v = p + 9;
		size_t vl = len - 9;

		while (vl && (*v == ' ' || *v == '\t'))
			v++, vl--;
		while (vl && (v[vl - 1] == '\r' || v[vl - 1] == '\n' || v[vl - 1] == ' '))
			vl--;
		snprintf(s->c->location, sizeof(s->c->location), "%.*s", (int)vl, v);
	}
	return len;
}

static size_t on_body(char *p, size_t size, size_t n, void *u)
{
	struct state *s = u;
	size_t len = size * n;
	long code = 0;

	s->lib->easy_getinfo(s->h, CURLINFO_RESPONSE_CODE, &code);
	if (code < 200 || code > 299) {
		if (s->errbody.len < ERR_BODY_CAP)
			buf_append(&s->errbody, p, len < ERR_BODY_CAP - s->errbody.len ? len : ERR_BODY_CAP - s->errbody.len);
		return len;
	}
	if ((s->sink_rc = s->c->sink(s->c->ctx, p, len, &s->sink_em)) != 0)
		return 0; /* CURLE_WRITE_ERROR */
	s->c->bytes += len;
	return len;
}

/* Has the body fallen under the floor (call.h)? dn: its bytes so far. Sets f->tripped and f->em. */
static bool under_floor(struct state *s, curl_off_t dn)
{
	struct floor *f = &s->floor;
	long long now = clock_ms();
	long sec;
	curl_off_t got;

	if (f->armed == 0) {
		if (dn <= 0 || now - f->t0 < s->c->floor_after_ms)
			return false;
		f->armed = now;
		f->sec = 0;
		f->at[0] = dn;
		return false;
	}
	sec = (long)((now - f->armed) / 1000);
	for (long k = sec - f->sec > FLOOR_RING ? sec - FLOOR_RING : f->sec + 1; k < sec; k++)
		f->at[k % FLOOR_RING] = f->at[f->sec % FLOOR_RING]; /* seconds without a call brought nothing */
	f->at[sec % FLOOR_RING] = dn;
	f->sec = sec;
	if (sec <= FLEET_FLOOR_WINDOW_S)
		return false;
	got = dn - f->at[(sec - FLEET_FLOOR_WINDOW_S - 1) % FLOOR_RING];
	if (got >= (curl_off_t)FLEET_FLOOR_BPS * FLEET_FLOOR_WINDOW_S)
		return false;
	f->tripped = true;
	err_set(&f->em, DP_ETIMEDOUT, "%s sent %lld bytes in the last %d s (%.1f B/s), under the low-speed floor of "
		"%d B/s: given up as stalled after %lld bytes", s->c->agent->name, (long long)got, FLEET_FLOOR_WINDOW_S,
		(double)got / FLEET_FLOOR_WINDOW_S, FLEET_FLOOR_BPS, (long long)dn);
	return true;
}

static int on_progress(void *u, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
	struct state *s = u;

	(void)dt, (void)ut, (void)un;
	if (s->c->cancel && atomic_load(s->c->cancel))
		return 1; /* CURLE_ABORTED_BY_CALLBACK */
	return under_floor(s, dn);
}

/* The reason an error answer gives: a problem+json's detail (else title), else the text itself. */
static void answer_reason(const struct buf *b, long status, struct err_msg *em, int code)
{
	json_t *j = b->len ? json_loadb(b->data, b->len, 0, NULL) : NULL;
	const char *detail = j ? json_string_value(json_object_get(j, "detail")) : NULL;
	const char *title = j ? json_string_value(json_object_get(j, "title")) : NULL;

	if (detail || title)
		err_set(em, code, "HTTP %ld: %s", status, detail ? detail : title);
	else if (b->len && b->len < 300 && memchr(b->data, '<', b->len) == NULL)
		err_set(em, code, "HTTP %ld: %.*s", status, (int)strcspn(b->data, "\r\n"), b->data);
	else
		err_set(em, code, "HTTP %ld", status);
	fleet_safe_text(em->text); /* the agent's words go to a terminal */
	json_decref(j);
}

/* "Host:port" of the agent's URL, for CURLOPT_RESOLVE ("HOST:PORT:127.0.0.1"); NULL if it has none. */
static char *pin_entry(const char *url, int port)
{
	const char *h = strstr(url, "://");
	size_t n;

	if (h == NULL)
		return NULL;
	h += 3;
	n = strcspn(h, ":/");
	return mem_printf("%.*s:%d:127.0.0.1", (int)n, h, port);
}

/* 127.0.0.0/8, [::1], localhost: what CURLOPT_NOPROXY below keeps away from a proxy. */
static bool loopback_host(const char *h, size_t n)
{
	return (n >= 4 && strncmp(h, "127.", 4) == 0) || (n == 5 && strncmp(h, "[::1]", 5) == 0) ||
	       (n == 9 && strncasecmp(h, "localhost", 9) == 0);
}

/*
 * An https://HOST[:PORT][/PATH] URL's parts: the host as written (an IPv6 address with its brackets), the port
 * (443 when none), the path (or ""). false unless https.
 */
static bool https_parts(const char *url, const char **host, size_t *host_len, int *port, const char **path)
{
	const char *h = url + 8, *end;
	size_t n;

	if (strncmp(url, "https://", 8) != 0)
		return false;
	n = *h == '[' ? strcspn(h, "]") + 1 : strcspn(h, ":/");
	end = h + n;
	*host = h;
	*host_len = n;
	*port = *end == ':' ? (int)strtol(end + 1, NULL, 10) : 443; /* the authority's own colon, not one in the path */
	*path = strchr(end, '/') ? strchr(end, '/') : "";
	return *port > 0 && *port < 65536;
}

static int finish(struct state *s, CURLcode rc, const char *errbuf, struct err_msg *em)
{
	struct fleet_call *c = s->c;
	int code;

	if (rc == CURLE_ABORTED_BY_CALLBACK && s->floor.tripped) {
		*em = s->floor.em;
		return DP_ETIMEDOUT;
	}
	if (rc == CURLE_ABORTED_BY_CALLBACK)
		return err_set(em, DP_ECANCELED, "cancelled after %llu bytes", (unsigned long long)c->bytes);
	if (s->sink_rc != 0) {
		*em = s->sink_em;
		return s->sink_rc;
	}
	if (s->dial_rc != 0) {
		*em = s->dial_em;
		return s->dial_rc;
	}
	if (rc != CURLE_OK) {
		if (s->tunnel_said)
			return err_set(em, DP_EIO, "%s", s->tunnel_em.text);
		if (rc == CURLE_OUT_OF_MEMORY)
			return err_set(em, DP_ETOOBIG, "the agent's answer has headers larger than libcurl takes");
		if (rc == CURLE_GOT_NOTHING)
			return err_set(em, DP_EIO, "the agent closed the connection without an answer (did it stop?)");
		if (rc == CURLE_PARTIAL_FILE || (rc == CURLE_RECV_ERROR && c->bytes > 0))
			return err_set(em, DP_EIO, "the answer was cut off after %llu bytes (the capture failed on the "
				       "agent, or the connection broke)", (unsigned long long)c->bytes);
		if (rc == CURLE_PEER_FAILED_VERIFICATION && strstr(errbuf, "does not match") && !c->agent->tls_name)
			return err_set(em, DP_EIO, "%s (a certificate that names a service, not this address: give "
				       "--tls-server-name NAME)", errbuf);
		return err_set(em, DP_EIO, "%s", errbuf[0] ? errbuf : s->lib->easy_strerror(rc));
	}
	if (c->status >= 200 && c->status <= 299)
		return 0;
	code = c->status == 401 || c->status == 403 ? DP_EAUTH : c->status == 404 ? DP_ENOTFOUND : DP_EREMOTE;
	answer_reason(&s->errbody, c->status, em, code);
	if (c->status == 401 && c->agent->token == NULL && c->agent->pod)
		err_prefix(em, "the agent needs a token and its pod has no token Secret of its own (--token-file and "
			   "$DIAGPORT_TOKEN are not sent to pods found through Kubernetes: any pod can look injected; "
			   "reach it with --target through your own port-forward)");
	else if (c->status == 401 && c->agent->token == NULL)
		err_prefix(em, "the agent needs a token (give --token-file, or DIAGPORT_TOKEN)");
	else if (c->status == 401)
		err_prefix(em, "the agent refused the token");
	else if (c->status == 429)
		err_prefix(em, "the agent is busy");
	return code;
}

static const char *ca_file; /* --cacert: set once, before any call */

void fleet_call_set_cafile(const char *path)
{
	ca_file = path;
}

int fleet_call_run(struct fleet_call *c, struct err_msg *em)
{
	struct state s = { .c = c, .floor.t0 = clock_ms() };
	const struct fleet_agent *a = c->agent;
	struct curl_slist *hdr = NULL, *pin = NULL;
	char errbuf[CURL_ERROR_SIZE] = "", *url, *line, *p;
	const char *host, *path, *noproxy = "localhost,127.0.0.0/8,::1";
	size_t host_len;
	int port;
	CURLcode rc;
	int ret;

	c->status = 0;
	c->location[0] = '\0';
	c->bytes = 0;
	if ((s.lib = hclient_lib(em)) == NULL)
		return DP_ENOLIB;
	if ((s.h = s.lib->easy_init()) == NULL)
		return err_set(em, DP_EIO, "libcurl could not start");
	buf_init(&s.errbody, ERR_BODY_CAP + 1);
	url = mem_printf("%s%s", a->url, c->path);
	hdr = s.lib->slist_append(hdr, "Expect:");
	if (a->token) {
		line = mem_printf("Authorization: Bearer %s", a->token);
		hdr = s.lib->slist_append(hdr, line);
		mem_wipe(line, strlen(line));
		free(line);
	}
	if (c->caller) { /* fleet_set_safe made it one line without control bytes */
		line = mem_printf("X-Diagport-Caller: %s", c->caller);
		hdr = s.lib->slist_append(hdr, line);
		free(line);
	}
	if (c->accept) {
		line = mem_printf("Accept: %s", c->accept);
		hdr = s.lib->slist_append(hdr, line);
		free(line);
	}
	if (c->body)
		hdr = s.lib->slist_append(hdr, "Content-Type: application/json");
	s.lib->easy_setopt(s.h, CURLOPT_URL, url);
	s.lib->easy_setopt(s.h, CURLOPT_CUSTOMREQUEST, c->method);
	if (c->body) {
		s.lib->easy_setopt(s.h, CURLOPT_POSTFIELDS, c->body);
		s.lib->easy_setopt(s.h, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)c->body_len);
	}
	s.lib->easy_setopt(s.h, CURLOPT_HTTPHEADER, hdr);
	s.lib->easy_setopt(s.h, CURLOPT_PROTOCOLS_STR, "http,https");
	if (ca_file) { /* that CA only: not also the system's directory, which libcurl reads by default */
		s.lib->easy_setopt(s.h, CURLOPT_CAINFO, ca_file);
		s.lib->easy_setopt(s.h, CURLOPT_CAPATH, (char *)NULL);
	}
	if (a->tls_name && !a->dialer && https_parts(a->url, &host, &host_len, &port, &path)) {
		/*
		 * The request names the certificate's name (SNI, the name check); the connection goes to the URL's
		 * host ("NAME:PORT:HOST:PORT"), and whether through a proxy is decided on that host, not the name.
		 */
		p = mem_printf("%s:%d:%.*s:%d", a->tls_name, port, (int)host_len, host, port);
		pin = s.lib->slist_append(pin, p);
		free(p);
		s.lib->easy_setopt(s.h, CURLOPT_CONNECT_TO, pin);
		if (loopback_host(host, host_len))
			noproxy = "*";
		free(url);
		url = mem_printf("https://%s:%d%s%s", a->tls_name, port, path, c->path);
		s.lib->easy_setopt(s.h, CURLOPT_URL, url);
	}
	s.lib->easy_setopt(s.h, CURLOPT_FOLLOWLOCATION, 0L);
	s.lib->easy_setopt(s.h, CURLOPT_NOSIGNAL, 1L);
	s.lib->easy_setopt(s.h, CURLOPT_FORBID_REUSE, 1L);
	s.lib->easy_setopt(s.h, CURLOPT_CONNECTTIMEOUT_MS, CONNECT_TIMEOUT_MS);
	if (c->timeout_ms > 0)
		s.lib->easy_setopt(s.h, CURLOPT_TIMEOUT_MS, c->timeout_ms);
	s.lib->easy_setopt(s.h, CURLOPT_ERRORBUFFER, errbuf);
	s.lib->easy_setopt(s.h, CURLOPT_HEADERFUNCTION, on_header);
	s.lib->easy_setopt(s.h, CURLOPT_HEADERDATA, &s);
	s.lib->easy_setopt(s.h, CURLOPT_BUFFERSIZE, RECV_BUF);
	/* an agent on this machine is never reached through $http_proxy: its token would go to the proxy in clear */
	s.lib->easy_setopt(s.h, CURLOPT_NOPROXY, noproxy);
	s.lib->easy_setopt(s.h, CURLOPT_WRITEFUNCTION, on_body);
	s.lib->easy_setopt(s.h, CURLOPT_WRITEDATA, &s);
	s.lib->easy_setopt(s.h, CURLOPT_NOPROGRESS, 0L);
	s.lib->easy_setopt(s.h, CURLOPT_XFERINFOFUNCTION, on_progress);
	s.lib->easy_setopt(s.h, CURLOPT_XFERINFODATA, &s);
	if (a->dialer) {
		if ((p = pin_entry(a->url, a->port)) != NULL) {
			pin = s.lib->slist_append(pin, p);
			free(p);
		}
		s.lib->easy_setopt(s.h, CURLOPT_RESOLVE, pin);
		s.lib->easy_setopt(s.h, CURLOPT_PROXY, ""); /* the stream is the way there, not a proxy */
		s.lib->easy_setopt(s.h, CURLOPT_OPENSOCKETFUNCTION, open_stream);
		s.lib->easy_setopt(s.h, CURLOPT_OPENSOCKETDATA, &s);
		s.lib->easy_setopt(s.h, CURLOPT_SOCKOPTFUNCTION, already_connected);
		s.lib->easy_setopt(s.h, CURLOPT_CLOSESOCKETFUNCTION, close_stream);
		s.lib->easy_setopt(s.h, CURLOPT_CLOSESOCKETDATA, &s);
		/*
		 * An agent served with TLS, through the API server's tunnel: the API
		 * server chose the pod, so there is no name to check; its
		 * certificate's chain is checked against --cacert when one is given.
		 */
		s.lib->easy_setopt(s.h, CURLOPT_SSL_VERIFYHOST, 0L);
		s.lib->easy_setopt(s.h, CURLOPT_SSL_VERIFYPEER, ca_file ? 1L : 0L);
	}
	rc = s.lib->easy_perform(s.h);
	s.lib->easy_getinfo(s.h, CURLINFO_RESPONSE_CODE, &c->status);
	s.lib->easy_cleanup(s.h); /* closes the stream: a tunnel says why it ended, first */
	ret = finish(&s, rc, errbuf, em);
	hclient_free_headers(hdr);
	if (pin)
		s.lib->slist_free_all(pin);
	buf_free(&s.errbody);
	free(url);
	return ret;
}

struct collect {
	struct buf b;
};

static int collect_sink(void *ctx, const char *p, size_t n, struct err_msg *em)
{
	struct collect *k = ctx;

	if (buf_append(&k->b, p, n) != 0)
		return err_set(em, DP_ETOOBIG, "the answer is larger than %zu bytes", k->b.cap);
	return 0;
}

int fleet_call_get(const struct fleet_agent *a, const char *caller, const char *path, size_t cap, long timeout_ms,
		   char **out, struct err_msg *em)
{
	struct collect k;
	struct fleet_call c = { .agent = a, .caller = caller, .method = "GET", .path = path, .timeout_ms = timeout_ms,
				.sink = collect_sink, .ctx = &k };
	int rc;

	buf_init(&k.b, cap);
	if ((rc = fleet_call_run(&c, em)) != 0) {
		buf_free(&k.b);
		return rc;
	}
	if (k.b.data == NULL)
		buf_append(&k.b, "", 0);
	*out = buf_steal(&k.b, NULL);
	return 0;
}
