/*
 * httpd_listen.c - the HTTP server's life (httpd.h): the --urls list parsed
 * into addresses, a listening socket for each, the acceptor thread started
 * (httpd_accept.c), and at the end every connection cut off and waited for.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "httpd_int.h"
#include "mem.h"

#define PEND_MAX 512                        /* connections reading a request, at most */
#define BUDGET ((size_t)4 << 20)            /* bytes they may buffer beyond their first 1 KiB, together */

struct addr {
	struct sockaddr_storage sa;
	socklen_t len;
	bool tls; /* https:// */
};

/* "http://HOST:PORT" or "https://HOST:PORT" → address. HOST: +, *, a dotted quad, [v6], localhost. PORT 0: one the system picks
 * (httpd_bound_urls says which). */
static int parse_url(const char *u, size_t n, struct addr *a, struct err_msg *em)
{
	char host[128];
	const char *p, *colon;
	long port;
	char *end;

	bool tls = n > 8 && strncmp(u, "https://", 8) == 0;

	if (!tls && (n < 8 || strncmp(u, "http://", 7) != 0))
		return err_set(em, DP_EINVAL, "URL '%.*s': only http://HOST:PORT and https://HOST:PORT are supported",
			       (int)n, u);
	p = u + (tls ? 8 : 7);
	colon = memrchr(p, ':', (size_t)(u + n - p));
	if (colon == NULL || (size_t)(colon - p) >= sizeof(host))
		return err_set(em, DP_EINVAL, "URL '%.*s' has no port", (int)n, u);
	memcpy(host, p, (size_t)(colon - p));
	host[colon - p] = '\0';
	port = strtol(colon + 1, &end, 10);
	if (end == colon + 1 || (end != u + n && *end != '/') || port < 0 || port > 65535)
		return err_set(em, DP_EINVAL, "URL '%.*s' has no valid port", (int)n, u);
	memset(a, 0, sizeof(*a));
	a->tls = tls;
	if (host[0] == '[') {
		struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)&a->sa;
		size_t hl = strlen(host);

		if (hl < 3 || host[hl - 1] != ']')
			return err_set(em, DP_EINVAL, "URL '%.*s': bad IPv6 address", (int)n, u);
		host[hl - 1] = '\0';
		if (inet_pton(AF_INET6, host + 1, &s6->sin6_addr) != 1)
			return err_set(em, DP_EINVAL, "URL '%.*s': bad IPv6 address", (int)n, u);
		s6->sin6_family = AF_INET6;
		s6->sin6_port = htons((uint16_t)port);
		a->len = sizeof(*s6);
		return 0;
	}
	{
		struct sockaddr_in *s4 = (struct sockaddr_in *)&a->sa;

		s4->sin_family = AF_INET;
		s4->sin_port = htons((uint16_t)port);
		if (strcmp(host, "+") == 0 || strcmp(host, "*") == 0 || strcmp(host, "0.0.0.0") == 0)
			s4->sin_addr.s_addr = htonl(INADDR_ANY);
		else if (strcmp(host, "localhost") == 0)
			s4->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
		else if (inet_pton(AF_INET, host, &s4->sin_addr) != 1)
			return err_set(em, DP_EINVAL, "URL '%.*s': '%s' is not an IP address, +, * or localhost", (int)n,
				       u, host);
		a->len = sizeof(*s4);
	}
	return 0;
}

static bool is_loopback(const struct addr *a)
{
	if (a->sa.ss_family == AF_INET)
		return (ntohl(((const struct sockaddr_in *)&a->sa)->sin_addr.s_addr) >> 24) == 127;
	return IN6_IS_ADDR_LOOPBACK(&((const struct sockaddr_in6 *)&a->sa)->sin6_addr);
}

/* Call fn for each ';'-separated URL. */
static int each_url(const char *urls, int (*fn)(const struct addr *, void *), void *arg, struct err_msg *em)
{
	const char *p = urls;
	int rc;

	if (urls == NULL || *urls == '\0')
		return err_set(em, DP_EINVAL, "no URLs to listen on");
	while (*p) {
		size_t n = strcspn(p, ";");
		struct addr a;

		memset(&a, 0, sizeof(a));
		if (n > 0) {
			if ((rc = parse_url(p, n, &a, em)) != 0)
				return rc;
			if ((rc = fn(&a, arg)) != 0)
				return rc;
		}
		p += n;
		if (*p == ';')
			p++;
	}
	return 0;
}

static int loopback_fn(const struct addr *a, void *arg)
{
	if (!is_loopback(a))
		*(bool *)arg = false;
	return 0;
}

bool httpd_urls_loopback_only(const char *urls)
{
	bool only = true;

	if (each_url(urls, loopback_fn, &only, NULL) != 0)
		return false;
	return only;
}

struct start_arg {
	struct httpd *d;
	struct err_msg *em;
};

static int listen_fn(const struct addr *a, void *arg)
{
	struct start_arg *s = arg;
	char shown[INET6_ADDRSTRLEN + 8] = "?";
	int fd, one = 1;

	if (s->d->n == HTTPD_MAX_LISTENERS)
		return err_set(s->em, DP_EINVAL, "more than %d URLs", HTTPD_MAX_LISTENERS);
	fd = socket(a->sa.ss_family, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd >= 0) {
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
		if (a->sa.ss_family == AF_INET6)
			setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &one, sizeof(one));
	}
	if (fd < 0 || bind(fd, (const struct sockaddr *)&a->sa, a->len) != 0 || listen(fd, 128) != 0) {
		int e = errno;

		if (fd >= 0)
			close(fd);
		if (a->sa.ss_family == AF_INET)
			inet_ntop(AF_INET, &((const struct sockaddr_in *)&a->sa)->sin_addr, shown, sizeof(shown));
		else
			inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)&a->sa)->sin6_addr, shown, sizeof(shown));
		return err_set(s->em, DP_EIO, "cannot listen on %s port %d: %s", shown,
			       ntohs(((const struct sockaddr_in *)&a->sa)->sin_port), strerror(e));
	}
	s->d->lfd_tls[s->d->n] = a->tls;
	s->d->lfd[s->d->n++] = fd;
	return 0;
}

void httpd_bound_urls(const struct httpd *d, struct buf *out)
{
	for (size_t i = 0; d && i < d->n; i++) {
		union {
			struct sockaddr_storage ss;
			struct sockaddr_in in;
			struct sockaddr_in6 in6;
		} sa;
		socklen_t len = sizeof(sa);
		char host[INET6_ADDRSTRLEN] = "?";

		memset(&sa, 0, sizeof(sa));
		if (getsockname(d->lfd[i], (struct sockaddr *)&sa, &len) != 0)
			continue;
		if (sa.ss.ss_family == AF_INET6) {
			inet_ntop(AF_INET6, &sa.in6.sin6_addr, host, sizeof(host));
			buf_printf(out, "%s%s://[%s]:%u", out->len ? ";" : "", d->lfd_tls[i] ? "https" : "http", host,
				   ntohs(sa.in6.sin6_port));
		} else {
			inet_ntop(AF_INET, &sa.in.sin_addr, host, sizeof(host));
			buf_printf(out, "%s%s://%s:%u", out->len ? ";" : "", d->lfd_tls[i] ? "https" : "http", host,
				   ntohs(sa.in.sin_port));
		}
	}
}

/* How many connections may be reading a request at once: PEND_MAX, or fewer when the process may
 * open fewer files (a container's nofile of 1024 leaves half for the runtimes, dumps and workers). */
static size_t pend_cap(void)
{
	struct rlimit rl;
	size_t n = PEND_MAX;

	if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur / 2 < n)
		n = rl.rlim_cur / 2;
	return n < 16 ? 16 : n;
}

/* The certificate for the https listeners, when there are any. */
static int start_tls(struct httpd *d, const struct httpd_config *cfg, struct err_msg *em)
{
	struct httpd_tls_files f = { cfg->tls_cert, cfg->tls_key, cfg->tls_password,
				     cfg->tls_cert_name ? cfg->tls_cert_name : "the certificate",
				     cfg->tls_key_name ? cfg->tls_key_name : "the key", cfg->tls_pem,
				     cfg->tls_pem_name ? cfg->tls_pem_name : "the PEM text" };
	bool any = false;

	for (size_t i = 0; i < d->n; i++)
		any |= d->lfd_tls[i];
	if (!any)
		return 0;
	if (cfg->tls_cert == NULL && cfg->tls_pem == NULL)
		return err_set(em, DP_EINVAL, "%s is an https URL, and no certificate is configured: set %s and %s, "
			       "or %s to the certificate chain and key as PEM text", cfg->urls, f.cert_name, f.key_name,
			       f.pem_name);
	return httpd_tls_new(&f, &d->tls, em);
}

int httpd_start(const struct httpd_config *cfg, httpd_handler h, void *ctx, struct httpd **out, struct err_msg *em)
{
	struct httpd *d = mem_zalloc(sizeof(*d));
	struct start_arg s = { d, em };
	int rc;

	d->h = h;
	d->ctx = ctx;
	d->max_conns = cfg->max_connections ? cfg->max_connections : 32;
	d->per_peer = cfg->max_per_peer ? cfg->max_per_peer : 64;
	d->idle_s = cfg->idle_timeout_s ? cfg->idle_timeout_s : 30;
	d->head_ms = (cfg->head_timeout_s ? cfg->head_timeout_s : 10) * 1000LL;
	d->head_cap = cfg->header_memory ? cfg->header_memory : (size_t)32768;
	d->max_body = cfg->max_body;
	d->takes_body = cfg->takes_body;
	d->is_probe = cfg->is_probe;
	d->admit_body = cfg->admit_body;
	d->admit = cfg->admit;
	d->pend_cap = pend_cap();
	d->pend = mem_array(d->pend_cap, sizeof(*d->pend));
	d->budget = BUDGET;
	d->work = mem_array(d->max_conns + HTTPD_PROBE_SLOTS, sizeof(*d->work));
	memset(d->work, 0, (d->max_conns + HTTPD_PROBE_SLOTS) * sizeof(*d->work));
	d->wake[0] = d->wake[1] = -1;
	pthread_mutex_init(&d->mu, NULL);
	pthread_cond_init(&d->cv, NULL);
	if ((rc = each_url(cfg->urls, listen_fn, &s, em)) != 0 || (rc = start_tls(d, cfg, em)) != 0)
		goto fail;
	if (pipe2(d->wake, O_CLOEXEC | O_NONBLOCK) != 0) {
		rc = err_set(em, DP_EIO, "pipe: %s", strerror(errno));
		goto fail;
	}
	{
		/* The acceptor and every connection thread (they inherit its mask) block SIGPIPE: a client that
		 * goes away mid-sendfile gives EPIPE instead of killing the process. */
		sigset_t pipe_set, old;

		sigemptyset(&pipe_set);
		sigaddset(&pipe_set, SIGPIPE);
		pthread_sigmask(SIG_BLOCK, &pipe_set, &old);
		rc = pthread_create(&d->acceptor, NULL, httpd_acceptor_main, d);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		if (rc != 0) {
			rc = err_set(em, DP_EIO, "cannot start the HTTP acceptor thread");
			goto fail;
		}
	}
	d->acceptor_started = true;
	*out = d;
	return 0;
fail:
	httpd_free(d);
	return rc;
}

void httpd_free(struct httpd *d)
{
	unsigned slots;

	if (d == NULL)
		return;
	slots = d->max_conns + HTTPD_PROBE_SLOTS;
	pthread_mutex_lock(&d->mu);
	d->stopping = true; /* from now on a worker closes its own connection instead of handing it back */
	pthread_mutex_unlock(&d->mu);
	if (d->acceptor_started) {
		if (write(d->wake[1], "x", 1) != 1 && errno != EAGAIN)
			DP_FATAL("cannot wake the HTTP acceptor");
		pthread_join(d->acceptor, NULL); /* it closes every connection still reading or lingering */
	}
	for (size_t i = 0; i < d->n; i++)
		close(d->lfd[i]);
	/* Cut every connection a worker holds off and wait for its thread to clean up (streams, on_done). */
	pthread_mutex_lock(&d->mu);
	for (unsigned i = 0; i < slots; i++)
		if (d->work[i])
			shutdown(d->work[i]->sock, SHUT_RDWR);
	while (d->n_general + d->n_probe)
		pthread_cond_wait(&d->cv, &d->mu);
	pthread_mutex_unlock(&d->mu);
	if (d->wake[0] >= 0) {
		close(d->wake[0]);
		close(d->wake[1]);
	}
	httpd_tls_free(d->tls); /* every session is ended: their connections are closed */
	pthread_mutex_destroy(&d->mu);
	pthread_cond_destroy(&d->cv);
	free(d->work);
	free(d->pend);
	free(d);
}
