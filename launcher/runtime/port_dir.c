/*
 * port_dir.c - --connect-dir: attaching runtimes that were not configured for
 * us, through the default sockets they listen on, and dropping them when
 * those go (port_int.h, port.h).
 *
 * A thread of its own, the scanner, so that a runtime slow to answer on its
 * default socket never delays the listener's accept loop, which suspended
 * runtimes wait on. Every SCAN_MS it lists the directory; a new
 * dotnet-diagnostic-<pid>-<key>-socket is asked ProcessInfo3/2/1, one
 * connection each (the runtime closes after every command), without the table
 * lock; the answer's cookie says whether it is a new runtime or one already
 * attached through our socket. Every PROBE_MS each attached socket is
 * connected to and closed at once (the runtime reads EOF and goes on): a
 * refusal (the process died and left its file) or a vanished file drops the
 * runtime. A runtime older than .NET 5 answers, but knows no ProcessInfo: it
 * is known by its socket's pid and start key instead (legacy_info), and
 * still takes dumps (dump.c falls back to GenerateCoreDump). Stale files,
 * whatever their pid, refuse connections, so they never get an entry; they are retried ever more rarely, as is a socket that
 * failed for another reason (permissions: logged once).
 *
 * The list of names is the scanner's alone; it takes the table lock only to
 * add, update or drop a runtime. Commands never run here: port_take dials a
 * new connection for each one on the caller's thread.
 */
#include "port_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"

#define SCAN_MS 250        /* the directory is listed this often */
#define PROBE_MS 1000      /* an attached socket is checked to be alive this often */
#define RETRY_MAX_MS 30000 /* a socket that failed is retried after SCAN_MS or 1 s, doubling up to this */
#define MAX_NAMES 4096     /* socket names tracked (stale ones included) */

/* A default socket name in the directory, as the scanner knows it. */
enum name_state {
	NAME_NEW,      /* not tried yet */
	NAME_ATTACHED, /* its runtime is in the table with this path */
	NAME_RETRY,    /* failed: refused (a file left by a runtime that died, or one not listening yet),
			  permissions, a time-out, the table full; retried ever more rarely */
	NAME_SKIPPED,  /* path too long for sun_path; ignored while it stays */
};

struct name {
	char *name, *path;  /* path is NULL when too long */
	enum name_state state;
	uint8_t cookie[16]; /* NAME_ATTACHED: whose socket it is */
	long long next_ms;  /* next probe or retry */
	int backoff_ms;
	int logged;         /* the failure last logged (an errno), so each is logged once */
	bool seen;          /* in the latest listing */
};

struct port_scan {
	pthread_t thread;
	pthread_cond_t stop_cv; /* wakes the scanner from its sleep to stop (CLOCK_MONOTONIC) */
	struct name *names;
	size_t n;
	int dir_errno; /* listing the directory failed with this (logged once), or 0 */
	bool names_full_logged;
};

/* The log line about a socket name, or about the directory when name is NULL. */
static void emit_name(struct port *p, const char *event, const char *name, const char *reason)
{
	log_warn(strcmp(event, "skipped") == 0 ? "runtime socket skipped" : "runtime socket unreachable",
		 LOG_STR("event", event), LOG_STR(name ? "socket" : "connectDir", name ? name : p->dir),
		 LOG_STR("reason", reason));
}

int port_dial(const char *path, int *fd)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	size_t n = strlen(path);
	int s, e;

	if (n >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return DP_EIO;
	}
	memcpy(sa.sun_path, path, n + 1);
	s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (s < 0)
		return DP_EIO;
	/* blocking afterwards, as accepted connections are (ipc.c polls before each read and write anyway) */
	if (connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0 || fcntl(s, F_SETFL, fcntl(s, F_GETFL) & ~O_NONBLOCK) != 0) {
		e = errno;
		close(s);
		errno = e;
		return DP_EIO;
	}
	*fd = s;
	return 0;
}

/* dotnet-diagnostic-<digits>-<digits>-socket, exactly. */
static bool default_socket_name(const char *n)
{
	static const char digits[] = "0123456789";
	size_t d;

	if (strncmp(n, PORT_SOCKET_PREFIX, strlen(PORT_SOCKET_PREFIX)) != 0)
		return false;
	n += strlen(PORT_SOCKET_PREFIX);
	d = strspn(n, digits);
	if (d == 0 || n[d] != '-')
		return false;
	n += d + 1;
	d = strspn(n, digits);
	return d > 0 && strcmp(n + d, "-socket") == 0;
}

/*
 * ProcessInfo3, then 2, then 1 over the default socket, one connection each.
 * *err: the errno of a failure. DP_ENOTFOUND when the runtime answered all
 * three in the protocol but with an error: a runtime older than .NET 5, which
 * has no ProcessInfo (it still takes dumps, with GenerateCoreDump).
 */
static int dir_info(const char *path, struct ipc_process_info *out, int *err)
{
	for (size_t i = 0; i < 3; i++) {
		int fd, rc = port_dial(path, &fd);

		if (rc != 0) {
			*err = errno;
			return rc;
		}
		rc = rtab_ask_info(fd, i, out);
		*err = rc == DP_EIO ? errno : EPROTO;
		close(fd);
		if (rc != DP_EUNSUPPORTED)
			return rc;
	}
	*err = 0;
	return DP_ENOTFOUND;
}

/*
 * What a runtime without ProcessInfo is known by: the pid and the start key
 * of its socket's name. They make its identity (pid in the cookie's first 8
 * bytes, key in the last 8, little-endian), so two such runtimes never share
 * one, and the same runtime keeps it across agent restarts.
 */
static void legacy_info(const char *name, struct ipc_process_info *out)
{
	const char *p = name + strlen(PORT_SOCKET_PREFIX);
	unsigned long long pid = strtoull(p, (char **)&p, 10), key = strtoull(p + 1, NULL, 10);

	memset(out, 0, sizeof(*out));
	out->pid = pid;
	for (int i = 0; i < 8; i++) {
		out->cookie[i] = (uint8_t)(pid >> (8 * i));
		out->cookie[8 + i] = (uint8_t)(key >> (8 * i));
	}
}

/*
 * Put the runtime that answered on nm's socket into the table (consumes
 * info). 0; DP_ETOOBIG when the table is full of live runtimes; DP_EREFUSED
 * when the runtime is already reachable through another name.
 */
static int adopt(struct port *p, struct name *nm, struct ipc_process_info *info)
{
	struct runtime *r;
	int rc = 0;

	pthread_mutex_lock(&p->mu);
	r = rtab_find_or_add(p, info->cookie, info->pid);
	if (r == NULL) {
		rc = DP_ETOOBIG;
		goto out;
	}
	if (r->path != NULL) {
		rc = DP_EREFUSED;
		goto out;
	}
	r->path = mem_strdup(nm->path);
	memcpy(nm->cookie, info->cookie, 16);
	if (!r->have_info) {
		r->info = *info;
		memset(info, 0, sizeof(*info)); /* moved */
		r->have_info = true;
		rtab_emit(p, "attached", r);
	}
out:
	pthread_mutex_unlock(&p->mu);
	ipc_process_info_free(info);
	return rc;
}

/*
 * nm's socket is gone or refuses: its runtime is no longer reachable that way.
 * Dropped now when nothing else holds it; a runtime that also advertises on
 * our port, or has a command in flight, falls to the grace rule instead.
 */
static void lost(struct port *p, const struct name *nm)
{
	struct runtime *r;

	pthread_mutex_lock(&p->mu);
	r = rtab_find(p, nm->cookie);
	if (r && r->path && strcmp(r->path, nm->path) == 0) {
		free(r->path);
		r->path = NULL;
		if (!r->via_port && r->busy == 0)
			rtab_drop(p, (size_t)(r - p->rt));
		else if (r->idle_fd < 0 && r->lost_ms == 0)
			r->lost_ms = clock_ms();
	}
	pthread_mutex_unlock(&p->mu);
}

/* Try nm again after first_ms, then ever more rarely; log why (once per err) unless why is NULL. */
static void retry_later(struct port *p, struct name *nm, long long now, int first_ms, int err, const char *why)
{
	nm->state = NAME_RETRY;
	nm->backoff_ms = nm->backoff_ms ? nm->backoff_ms * 2 : first_ms;
	if (nm->backoff_ms > RETRY_MAX_MS)
		nm->backoff_ms = RETRY_MAX_MS;
	nm->next_ms = now + nm->backoff_ms;
	if (why && err != nm->logged) {
		emit_name(p, "unreachable", nm->name, why);
		nm->logged = err;
	}
}

static void try_attach(struct port *p, struct name *nm, long long now)
{
	struct ipc_process_info info = { 0 };
	int err = 0, rc = dir_info(nm->path, &info, &err);

	if (rc == DP_ENOTFOUND) {
		legacy_info(nm->name, &info);
		rc = 0;
	}
	if (rc == 0 && (rc = adopt(p, nm, &info)) == 0) {
		nm->state = NAME_ATTACHED;
		nm->next_ms = now + PROBE_MS;
		nm->backoff_ms = 0;
		nm->logged = 0;
		return;
	}
	if (rc == DP_ETOOBIG)
		retry_later(p, nm, now, 1000, -1, "the table of runtimes is full");
	else if (rc == DP_EREFUSED)
		retry_later(p, nm, now, 1000, 0, NULL); /* another name of the same runtime; takes over if that goes */
	else if (err == ECONNREFUSED || err == ENOENT || err == EAGAIN)
		/* Stale (quietly: that is what a crash leaves), bound but not listening yet, or a full queue. */
		retry_later(p, nm, now, SCAN_MS, 0, NULL);
	else
		retry_later(p, nm, now, 1000, err, err == EPROTO ? "not a .NET diagnostic server" : strerror(err));
}

/* An attached socket: still accepting? Connect and close at once (the runtime reads EOF and goes on). */
static void probe(struct port *p, struct name *nm, long long now)
{
	int fd;

	nm->next_ms = now + PROBE_MS;
	if (port_dial(nm->path, &fd) == 0) {
		close(fd);
		return;
	}
	if (errno == ECONNREFUSED || errno == ENOENT) {
		lost(p, nm);
		nm->backoff_ms = RETRY_MAX_MS / 2; /* dead for good: its pid and start time name no other process */
		retry_later(p, nm, now, 0, 0, NULL);
	}
}

static struct name *name_get(struct port *p, const char *name)
{
	struct port_scan *sc = p->scan;
	struct sockaddr_un sa;
	struct name *nm;
	char *path;

	for (size_t i = 0; i < sc->n; i++)
		if (strcmp(sc->names[i].name, name) == 0)
			return &sc->names[i];
	if (sc->n == MAX_NAMES) {
		if (!sc->names_full_logged)
			emit_name(p, "skipped", name, "more than 4096 socket names in --connect-dir");
		sc->names_full_logged = true;
		return NULL;
	}
	sc->names = mem_realloc(sc->names, (sc->n + 1) * sizeof(*sc->names));
	nm = &sc->names[sc->n++];
	memset(nm, 0, sizeof(*nm));
	nm->name = mem_strdup(name);
	path = mem_printf("%s%s%s", p->dir, p->dir[strlen(p->dir) - 1] == '/' ? "" : "/", name);
	if (strlen(path) >= sizeof(sa.sun_path)) {
		char why[96];

		snprintf(why, sizeof(why), "the socket path is %zu bytes; the limit is %zu", strlen(path),
			 sizeof(sa.sun_path) - 1);
		emit_name(p, "skipped", name, why); /* once: the entry stays while the file does */
		free(path);
		nm->state = NAME_SKIPPED;
	} else {
		nm->path = path;
	}
	return nm;
}

static void scan_dir(struct port *p)
{
	struct port_scan *sc = p->scan;
	DIR *d = opendir(p->dir);
	struct dirent *e;
	long long now;

	if (d == NULL) {
		int err = errno;

		if (err != sc->dir_errno)
			emit_name(p, "unreachable", NULL, strerror(err));
		sc->dir_errno = err;
		return; /* not a reason to drop anything: it may be back on the next scan */
	}
	sc->dir_errno = 0;
	for (size_t i = 0; i < sc->n; i++)
		sc->names[i].seen = false;
	while ((e = readdir(d)) != NULL) {
		struct name *nm;

		if (default_socket_name(e->d_name) && (nm = name_get(p, e->d_name)) != NULL)
			nm->seen = true;
	}
	closedir(d);
	now = clock_ms();
	for (size_t i = sc->n; i-- > 0;) {
		struct name *nm = &sc->names[i];

		if (!nm->seen) {
			if (nm->state == NAME_ATTACHED)
				lost(p, nm);
			free(nm->name);
			free(nm->path);
			sc->names[i] = sc->names[--sc->n];
			continue;
		}
		if (now < nm->next_ms)
			continue;
		if (nm->state == NAME_NEW || nm->state == NAME_RETRY)
			try_attach(p, nm, now);
		else if (nm->state == NAME_ATTACHED)
			probe(p, nm, now);
	}
}

static void *scanner(void *arg)
{
	struct port *p = arg;
	struct port_scan *sc = p->scan;

	for (;;) {
		struct timespec until;
		bool stop;

		scan_dir(p);
		clock_deadline_mono(&until, SCAN_MS);
		pthread_mutex_lock(&p->mu);
		while (!p->stopping && pthread_cond_timedwait(&sc->stop_cv, &p->mu, &until) == 0)
			;
		stop = p->stopping;
		pthread_mutex_unlock(&p->mu);
		if (stop)
			return NULL;
	}
}

int port_dir_start(struct port *p, struct err_msg *em)
{
	pthread_condattr_t ca;
	struct port_scan *sc = mem_zalloc(sizeof(*sc));

	pthread_condattr_init(&ca);
	pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
	pthread_cond_init(&sc->stop_cv, &ca);
	pthread_condattr_destroy(&ca);
	p->scan = sc;
	if (pthread_create(&sc->thread, NULL, scanner, p) != 0) {
		pthread_cond_destroy(&sc->stop_cv);
		free(sc);
		p->scan = NULL;
		return err_set(em, DP_EIO, "cannot start the --connect-dir scanner thread");
	}
	return 0;
}

void port_dir_free(struct port *p)
{
	struct port_scan *sc = p->scan;

	if (sc == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	pthread_cond_broadcast(&sc->stop_cv); /* p->stopping is set */
	pthread_mutex_unlock(&p->mu);
	pthread_join(sc->thread, NULL);
	for (size_t i = 0; i < sc->n; i++) {
		free(sc->names[i].name);
		free(sc->names[i].path);
	}
	free(sc->names);
	pthread_cond_destroy(&sc->stop_cv);
	free(sc);
	p->scan = NULL;
}
