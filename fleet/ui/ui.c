/*
 * ui.c - `diagport ui`'s server: the agent's own HTTP server (http/httpd.c)
 * on 127.0.0.1, serving the page's files from the binary and the JSON API
 * the page calls (docs/ui.md), the fleet client's other files doing the
 * work.
 *
 * Safe by construction, because the server holds the user's credentials
 * (kubeconfig, agents' tokens) and a dump is every secret an app holds:
 * - it listens on loopback only;
 * - a secret made at start (32 random bytes) is in the URL it prints; that
 *   URL sets it as a cookie (HttpOnly, SameSite=Strict) and redirects to a
 *   URL without it. A request without the cookie gets 403 and an empty body,
 *   before any route is looked at: another user of this machine, or a page
 *   in the browser, learns nothing and can do nothing;
 * - the Host header must name this server (127.0.0.1 or localhost and its
 *   port): a DNS name rebound to 127.0.0.1 does not reach it;
 * - a POST or DELETE must carry this server's own Origin;
 * - every answer forbids framing, sniffing, caching and any script or
 *   connection but its own (Content-Security-Policy);
 * - agents are called as `diagport capture` calls them; their tokens never
 *   leave this process.
 */
#include "ui_int.h"

#include <errno.h>
#include <ftw.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fleet/run.h"
#include "mem.h"

#define SECRET_BYTES 32

static const char csp[] = "default-src 'self'; img-src 'self' data: blob:; style-src 'self'; script-src 'self'; "
			  "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; "
			  "frame-ancestors 'none'";

struct route {
	const char *method, *path;
	bool prefix; /* path is a prefix: "/api/captures/" */
	void (*fn)(struct ui *u, struct httpd_req *r);
};

static const struct route routes[] = {
	{ "GET", "/api/processes", false, ui_route_processes },
	{ "POST", "/api/refresh", false, ui_route_refresh },
	{ "GET", "/api/live", false, ui_route_live },
	{ "GET", "/api/exceptions", false, ui_route_exceptions },
	{ "GET", "/api/captures", false, ui_route_captures },
	{ "POST", "/api/captures", false, ui_route_capture_start },
	{ "GET", "/api/captures/", true, ui_route_capture_one },
	{ "DELETE", "/api/captures/", true, ui_route_capture_one },
};
#define N_ROUTES (sizeof(routes) / sizeof(routes[0]))

/* The headers every answer carries. */
static void common_headers(struct httpd_req *r)
{
	httpd_set_header(r, "Content-Security-Policy", csp);
	httpd_set_header(r, "Referrer-Policy", "no-referrer");
	httpd_set_header(r, "Cross-Origin-Resource-Policy", "same-origin");
}

/* a and b equal, in a time that depends on their lengths only */
static bool same_secret(const char *a, const char *b)
{
	size_t n = strlen(b);
	unsigned char d = 0;

	if (strlen(a) != n)
		return false;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* The value of cookie name in a Cookie header, copied into out; false when absent or too long. */
static bool cookie_value(const char *header, const char *name, char *out, size_t n)
{
	size_t nl = strlen(name);

	for (const char *p = header; p && *p;) {
		p += strspn(p, " \t");
		if (strncmp(p, name, nl) == 0 && p[nl] == '=') {
			size_t len = strcspn(p + nl + 1, ";");

			if (len >= n)
				return false;
			memcpy(out, p + nl + 1, len);
			out[len] = '\0';
			return true;
		}
		p = strchr(p, ';');
		if (p)
			p++;
	}
	return false;
}

static bool host_ok(const struct ui *u, const char *host)
{
	return host && (strcmp(host, u->origin[0] + 7) == 0 || strcmp(host, u->origin[1] + 7) == 0);
}

static enum httpd_admission refuse(struct httpd_req *r)
{
	common_headers(r);
	httpd_send(r, 403, "text/plain", "", 0);
	return HTTPD_REFUSE;
}

/*
 * What a page navigation without the cookie gets: no data, and a way back in for a browser that has the
 * cookie but did not send it (SameSite=Strict keeps it from a link followed from another site: chat,
 * webmail). continue.js (served without the cookie, with app.css) follows the link once, from this origin.
 */
static const char gate[] =
	"<!doctype html><html lang=\"en\"><head><meta charset=\"utf-8\"><title>diagport ui</title>"
	"<link rel=\"stylesheet\" href=\"/app.css\"><script type=\"module\" src=\"/continue.js\"></script></head>"
	"<body><main class=\"gate\"><h1>diagport ui</h1><p>This page opens only in the browser where the URL "
	"<code>diagport ui</code> printed (the one with <code>?secret=</code>) was opened.</p>"
	"<p><a id=\"continue\" href=\"/\">Continue to diagport ui</a></p></main></body></html>\n";

/* The files a browser without the cookie may load: the gate's own, which hold no data. */
static bool gate_file(const char *path)
{
	return strcmp(path, "/continue.js") == 0 || strcmp(path, "/app.css") == 0;
}

/*
 * The uid that owns the client's end of this loopback connection (/proc/net/tcp lists every TCP socket of
 * the network namespace with its owner's uid), or -1 when it cannot be told.
 */
static long peer_uid(int sock)
{
	struct sockaddr_in me = { 0 }, peer = { 0 };
	socklen_t ml = sizeof(me), pl = sizeof(peer);
	char want_local[32], want_rem[32], line[512];
	long uid = -1;
	FILE *f;

	if (getsockname(sock, (struct sockaddr *)&me, &ml) != 0 || getpeername(sock, (struct sockaddr *)&peer, &pl) != 0 ||
	    peer.sin_family != AF_INET || me.sin_family != AF_INET)
		return -1;
	/* an address as the kernel prints it: the 32 bits as stored, in hex, then the port */
	snprintf(want_local, sizeof(want_local), "%08X:%04X", peer.sin_addr.s_addr, ntohs(peer.sin_port));
	snprintf(want_rem, sizeof(want_rem), "%08X:%04X", me.sin_addr.s_addr, ntohs(me.sin_port));
	if ((f = fopen("/proc/net/tcp", "re")) == NULL)
		return -1;
	while (uid < 0 && fgets(line, sizeof(line), f)) {
		/* "sl local_address rem_address st tx:rx tr:when retrnsmt uid ...": fields 1, 2 and 7 */
		char *field[8], *save = NULL, *t = strtok_r(line, " \t", &save), *end;
		size_t n = 0;
		unsigned long u;

		for (; t && n < 8; t = strtok_r(NULL, " \t", &save))
			field[n++] = t;
		if (n < 8 || strcmp(field[1], want_local) != 0 || strcmp(field[2], want_rem) != 0)
			continue;
		errno = 0;
		u = strtoul(field[7], &end, 10);
		if (errno == 0 && end != field[7] && *end == '\0')
			uid = (long)u;
	}
	fclose(f);
	return uid;
}

/* On the acceptor's thread, before anything else: the Host, the secret, the Origin (file-top comment). */
static enum httpd_admission admit(void *ctx, struct httpd_req *r, long long now, long long *until)
{
	struct ui *u = ctx;
	const char *m = httpd_method(r), *given = httpd_query(r, "secret"), *origin = httpd_header(r, "Origin");
	char value[80];

	(void)now, (void)until;
	if (!host_ok(u, httpd_header(r, "Host")))
		return refuse(r);
	/* the cookie reaches every server on 127.0.0.1 (browsers keep cookies by host, not port): another user's
	 * server could learn it, so only this user's sockets are served at all */
	if (peer_uid(httpd_socket(r)) != (long)geteuid())
		return refuse(r);
	if (given && strcmp(httpd_path(r), "/") == 0 && strcmp(m, "GET") == 0) {
		char *set;

		if (!same_secret(given, u->secret))
			return refuse(r);
		common_headers(r);
		set = mem_printf("%s=%s; HttpOnly; SameSite=Strict; Path=/", u->cookie_name, u->secret);
		httpd_set_header(r, "Set-Cookie", set);
		httpd_set_header(r, "Location", "/");
		mem_wipe(set, strlen(set));
		free(set);
		httpd_send(r, 303, "text/plain", "", 0);
		return HTTPD_REFUSE; /* answered here: the redirect, which no worker need run */
	}
	if (!cookie_value(httpd_header(r, "Cookie"), u->cookie_name, value, sizeof(value)) ||
	    !same_secret(value, u->secret)) {
		if (strcmp(m, "GET") != 0 || strncmp(httpd_path(r), "/api/", 5) == 0)
			return refuse(r);
		if (gate_file(httpd_path(r)))
			return HTTPD_ADMIT;
		common_headers(r);
		httpd_send(r, 403, "text/html; charset=utf-8", gate, sizeof(gate) - 1);
		return HTTPD_REFUSE;
	}
	if (strcmp(m, "GET") != 0 && strcmp(m, "HEAD") != 0 &&
	    (origin == NULL || (strcmp(origin, u->origin[0]) != 0 && strcmp(origin, u->origin[1]) != 0)))
		return refuse(r);
	return HTTPD_ADMIT;
}

static bool takes_body(const char *path)
{
	return strcmp(path, "/api/captures") == 0;
}

static void serve_asset(struct httpd_req *r, const char *path)
{
	const char *name = strcmp(path, "/") == 0 ? "index.html" : path + 1;

	for (size_t i = 0; i < ui_n_assets; i++)
		if (strcmp(ui_assets[i].name, name) == 0) {
			httpd_send(r, 200, ui_assets[i].ctype, (const char *)ui_assets[i].data, ui_assets[i].len);
			return;
		}
	httpd_problem(r, 404, "Not Found", "no such page");
}

static void handle(void *ctx, struct httpd_req *r)
{
	struct ui *u = ctx;
	const char *m = httpd_method(r), *path = httpd_path(r);
	bool path_known = false;

	common_headers(r);
	for (size_t i = 0; i < N_ROUTES; i++) {
		const struct route *rt = &routes[i];
		bool match = rt->prefix ? strncmp(path, rt->path, strlen(rt->path)) == 0 : strcmp(path, rt->path) == 0;

		if (!match)
			continue;
		path_known = true;
		if (strcmp(m, rt->method) == 0) {
			rt->fn(u, r);
			return;
		}
	}
	if (path_known || strncmp(path, "/api/", 5) == 0 || strcmp(m, "GET") != 0)
		httpd_problem(r, path_known ? 405 : 404, path_known ? "Method Not Allowed" : "Not Found", "%s %s", m, path);
	else
		serve_asset(r, path);
}

/* The directory the artifacts go to: -o's (made 0700 if missing), or a new private one. 0, or exit 2. */
static int make_dir(struct ui *u)
{
	const char *tmp = getenv("TMPDIR");
	char *templ;

	if (u->o->out_dir) {
		if (mkdir(u->o->out_dir, 0700) != 0 && errno != EEXIST) {
			fprintf(stderr, "diagport ui: -o %s: %s\n", u->o->out_dir, strerror(errno));
			return FLEET_EXIT_USAGE;
		}
		u->dir = mem_strdup(u->o->out_dir);
		return 0;
	}
	templ = mem_printf("%s/diagport-ui-XXXXXX", tmp && *tmp ? tmp : "/tmp");
	if (mkdtemp(templ) == NULL) {
		fprintf(stderr, "diagport ui: cannot make a directory for the artifacts (%s): %s\n", templ, strerror(errno));
		free(templ);
		return FLEET_EXIT_USAGE;
	}
	u->dir = templ;
	u->own_dir = true;
	return 0;
}

static int remove_one(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
	(void)st, (void)flag, (void)ftw;
	remove(path);
	return 0;
}

int ui_run(const struct ui_opts *o, struct fleet_set *first)
{
	struct ui u = { .o = o };
	uint8_t raw[SECRET_BYTES];
	struct httpd_config cfg = { .max_connections = 64, .max_per_peer = 64, .idle_timeout_s = 30,
				    .head_timeout_s = 10, .header_memory = (size_t)32 * 1024, .max_body = UI_MAX_BODY,
				    .takes_body = takes_body, .admit = admit };
	struct err_msg em;
	struct buf bound;
	char url[64], *port;
	long pnum;
	int rc;

	/* every request, capture and refresh thread would otherwise get a malloc arena of its own: 20 MB of RSS
	 * with 200 targets, 15 MB with two arenas (docs/BENCHMARKS.md, "diagport ui") */
	mallopt(M_ARENA_MAX, 2);
	pthread_mutex_init(&u.mu, NULL);
	pthread_cond_init(&u.cv, NULL);
	if (getrandom(raw, sizeof(raw), 0) != (ssize_t)sizeof(raw))
		DP_FATAL("getrandom failed");
	for (size_t i = 0; i < sizeof(raw); i++)
		snprintf(u.secret + 2 * i, 3, "%02x", raw[i]);
	mem_wipe(raw, sizeof(raw));
	if ((rc = make_dir(&u)) != 0) {
		fleet_set_free(first);
		return rc;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d", o->port);
	cfg.urls = url;
	if (httpd_start(&cfg, handle, &u, &u.httpd, &em) != 0) {
		fprintf(stderr, "diagport ui: cannot listen on 127.0.0.1:%d: %s\n", o->port, em.text);
		fleet_set_free(first);
		rc = FLEET_EXIT_USAGE;
		goto out;
	}
	buf_init(&bound, 4096);
	httpd_bound_urls(u.httpd, &bound);
	port = bound.data ? strrchr(bound.data, ':') : NULL;
	pnum = port ? strtol(port + 1, NULL, 10) : o->port; /* what httpd_bound_urls wrote: a number */
	snprintf(u.origin[0], sizeof(u.origin[0]), "http://127.0.0.1:%ld", pnum);
	snprintf(u.origin[1], sizeof(u.origin[1]), "http://localhost:%ld", pnum);
	snprintf(u.cookie_name, sizeof(u.cookie_name), "diagport-ui-%ld", pnum);
	buf_free(&bound);
	ui_targets_start(&u, first); /* the first list is made before the URL is given: the page's first view has it */
	if (o->ready) {
		char *full = mem_printf("%s/?secret=%s", u.origin[0], u.secret);

		o->ready(full);
		free(full);
	} else {
		printf("diagport ui: %s/?secret=%s\n", u.origin[0], u.secret);
		printf("diagport ui: artifacts in %s%s; Ctrl-C stops\n", u.dir, u.own_dir ? " (removed at exit)" : "");
		fflush(stdout);
	}
	while (!fleet_cancelled()) {
		struct timespec t = { 0, 200L * 1000 * 1000 };

		nanosleep(&t, NULL); /* a signal wakes it early */
	}
	httpd_free(u.httpd);
	ui_captures_end(&u);
	ui_targets_stop(&u);
	rc = FLEET_EXIT_OK;
out:
	if (u.own_dir)
		nftw(u.dir, remove_one, 16, FTW_DEPTH | FTW_PHYS);
	free(u.dir);
	mem_wipe(u.secret, sizeof(u.secret));
	pthread_mutex_destroy(&u.mu);
	pthread_cond_destroy(&u.cv);
	return rc;
}
