/*
 * port.c - the diagnostic port: its listener thread, the table of runtimes
 * (port_int.h) and handing out connections (port.h). The connect_dir scanner
 * is in port_dir.c.
 *
 * Locking: one mutex guards the table; the condition variable wakes callers
 * of port_take when an idle connection arrives. The listener thread polls the
 * listening socket, every idle connection (to see a runtime hang up) and a
 * wake-up pipe written by port_take (to rebuild the poll set) and port_free.
 * Commands run on the caller's thread with the connection it took, so a slow
 * dump never stalls the listener.
 *
 * A runtime can be known two ways, one entry per cookie: through our socket
 * (via_port: it advertised) and through its default socket in connect_dir
 * (path). The grace rule below drops what only advertised; port_dir.c drops
 * what it alone knew, when that socket goes.
 */
#include "port_dir.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "mem.h"


int port_open(const struct port_config *cfg, struct port **out, struct err_msg *em)
{
	static const char shortest[] = "/" PORT_SOCKET_PREFIX "1-1-socket";
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct port *p;
	size_t dirlen = 0;
	int fd;

	if (strlen(cfg->path) >= sizeof(sa.sun_path))
		return err_set(em, DP_EINVAL, "socket path %s is %zu bytes; the limit is %zu", cfg->path,
			       strlen(cfg->path), sizeof(sa.sun_path) - 1);
	if (cfg->connect_dir) {
		dirlen = strlen(cfg->connect_dir);
		while (dirlen > 1 && cfg->connect_dir[dirlen - 1] == '/')
			dirlen--;
		if (dirlen == 0 || dirlen + strlen(shortest) >= sizeof(sa.sun_path))
			return err_set(em, DP_EINVAL, "--connect-dir %s: %s", cfg->connect_dir,
				       dirlen ? "too long: no socket path in it would fit in 107 bytes" : "empty");
	}
	memcpy(sa.sun_path, cfg->path, strlen(cfg->path) + 1);
	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return err_set(em, DP_EIO, "socket: %s", strerror(errno));
	unlink(cfg->path); /* a stale socket from an agent that died */
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 255) != 0) {
		int e = errno;

		close(fd);
		return err_set(em, DP_EIO, "cannot listen on %s: %s", cfg->path, strerror(e));
	}
	/* Connecting needs write permission on the socket: let an app of any uid in the pod connect. */
	chmod(cfg->path, 0777);
	p = mem_zalloc(sizeof(*p));
	p->cfg = *cfg;
	p->path = mem_strdup(cfg->path);
	p->cfg.path = p->path;
	if (p->cfg.advert_timeout_ms <= 0)
		p->cfg.advert_timeout_ms = 250;
	if (p->cfg.grace_ms <= 0)
		p->cfg.grace_ms = 3000;
	if (p->cfg.max_runtimes == 0)
		p->cfg.max_runtimes = 64;
	if (cfg->connect_dir) {
		p->dir = mem_zalloc(dirlen + 1);
		memcpy(p->dir, cfg->connect_dir, dirlen);
	}
	p->cfg.connect_dir = p->dir;
	p->listen_fd = fd;
	if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		DP_FATAL("pipe2: %s", strerror(errno));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	*out = p;
	return 0;
}

static void fetch_info(struct runtime *r, int fd)
{
	int rc;

	if (r->stage < 1 || r->stage > 3)
		return;
	rc = rtab_ask_info(fd, (size_t)(r->stage - 1), &r->info);
	if (rc == 0) {
		r->have_info = true;
		r->stage = 4;
	} else if (rc == DP_EUNSUPPORTED) {
		r->stage++; /* the older command on the next advertised connection */
	}
}

/* A connection advertised runtime `a`: resume it, ask who it is, or keep the connection idle. */
static void advertised(struct port *p, int fd, const struct ipc_advert *a)
{
	struct runtime *r = rtab_find_or_add(p, a->cookie, a->pid);
	struct ipc_header h;
	struct buf pl;

	if (r == NULL) {
		close(fd); /* full of live runtimes: this one retries on its own */
		return;
	}
	r->lost_ms = 0;
	r->hung_up = false;
	r->via_port = true;
	if (r->stage == 0 && p->on_first && !r->offered) {
		r->offered = true;
		if (p->on_first(p->on_first_ctx, a->cookie, a->pid, fd)) {
			r->lost_ms = clock_ms(); /* the runtime comes back on a new connection: resumed then */
			return;
		}
	}
	if (r->stage == 0) {
		/*
		 * First advertise: resume at once, so a suspended app waits no longer
		 * than our start (also when connect_dir found it first: ProcessInfo
		 * works while a runtime is paused, so that says nothing).
		 */
		buf_init(&pl, IPC_MAX_MESSAGE);
		if (rtab_command(fd, IPC_SET_PROCESS, IPC_PROCESS_RESUME, &h, &pl) == 0)
			r->stage = r->have_info ? 4 : 1;
		buf_free(&pl);
		close(fd);
		r->lost_ms = clock_ms();
		return;
	}
	if (r->stage >= 1 && r->stage <= 3 && r->have_info)
		r->stage = 4; /* connect_dir got its ProcessInfo meanwhile: this connection is an idle one */
	if (r->stage >= 1 && r->stage <= 3) {
		fetch_info(r, fd);
		close(fd);
		r->lost_ms = clock_ms();
		if (r->have_info)
			rtab_emit(p, "attached", r);
		return;
	}
	if (r->idle_fd >= 0)
		close(r->idle_fd); /* keep only the newest */
	r->idle_fd = fd;
	pthread_cond_broadcast(&p->cv);
}

static void accept_one(struct port *p)
{
	uint8_t b[IPC_ADVERTISE_SIZE];
	struct ipc_advert a;
	int fd = accept4(p->listen_fd, NULL, NULL, SOCK_CLOEXEC);

	if (fd < 0)
		return;
	if (ipc_read_full(fd, b, sizeof(b), p->cfg.advert_timeout_ms) != 0 || ipc_parse_advert(b, sizeof(b), &a) != 0) {
		close(fd);
		return;
	}
	pthread_mutex_lock(&p->mu);
	advertised(p, fd, &a);
	pthread_mutex_unlock(&p->mu);
}

/*
 * Idle connections that hung up (or talked out of turn) are closed; gone
 * runtimes dropped. A runtime keeps its advertised connection open until it
 * is used, so one that hangs up has exited (or shut its diagnostic server):
 * it goes as soon as no command holds it. One that only stopped advertising
 * (its connection was taken for a command) gets grace_ms to come back.
 */
static void sweep(struct port *p, const struct pollfd *pf, size_t npf)
{
	long long t = clock_ms();

	pthread_mutex_lock(&p->mu);
	for (size_t k = 0; k < npf; k++)
		for (size_t i = 0; i < p->n; i++)
			if (p->rt[i].idle_fd == pf[k].fd && pf[k].revents) {
				close(p->rt[i].idle_fd);
				p->rt[i].idle_fd = -1;
				p->rt[i].lost_ms = t;
				p->rt[i].hung_up = (pf[k].revents & (POLLHUP | POLLERR)) != 0;
			}
	for (size_t i = p->n; i-- > 0;) {
		struct runtime *r = &p->rt[i];

		if (r->idle_fd < 0 && r->busy == 0 && r->lost_ms && r->path == NULL &&
		    (r->hung_up || t - r->lost_ms > p->cfg.grace_ms))
			rtab_drop(p, i);
	}
	pthread_mutex_unlock(&p->mu);
}

static void *listener(void *arg)
{
	struct port *p = arg;
	struct pollfd *pf = NULL;

	for (;;) {
		size_t npf = 2;

		pthread_mutex_lock(&p->mu);
		if (p->stopping) {
			pthread_mutex_unlock(&p->mu);
			break;
		}
		pf = mem_realloc(pf, (p->n + 2) * sizeof(*pf));
		pf[0] = (struct pollfd){ .fd = p->listen_fd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = p->wake[0], .events = POLLIN };
		for (size_t i = 0; i < p->n; i++)
			if (p->rt[i].idle_fd >= 0)
				pf[npf++] = (struct pollfd){ .fd = p->rt[i].idle_fd, .events = POLLIN };
		pthread_mutex_unlock(&p->mu);
		if (poll(pf, npf, 500) < 0 && errno != EINTR)
			break;
		if (pf[1].revents & POLLIN) {
			char drain[64];

			while (read(p->wake[0], drain, sizeof(drain)) > 0)
				;
		}
		if (pf[0].revents & POLLIN)
			accept_one(p);
		sweep(p, pf + 2, npf - 2);
	}
	free(pf);
	return NULL;
}

void port_on_first(struct port *p, bool (*fn)(void *ctx, const uint8_t cookie[16], uint64_t pid, int fd), void *ctx)
{
	pthread_mutex_lock(&p->mu);
	p->on_first = fn;
	p->on_first_ctx = ctx;
	pthread_mutex_unlock(&p->mu);
}

int port_start(struct port *p, struct err_msg *em)
{
	if (pthread_create(&p->thread, NULL, listener, p) != 0)
		return err_set(em, DP_EIO, "cannot start the listener thread");
	p->started = true;
	return p->dir ? port_dir_start(p, em) : 0;
}

void port_free(struct port *p)
{
	if (p == NULL)
		return;
	pthread_mutex_lock(&p->mu);
	p->stopping = true;
	pthread_cond_broadcast(&p->cv);
	pthread_mutex_unlock(&p->mu);
	if (write(p->wake[1], "x", 1) < 0) {
		/* the thread also wakes on its poll timeout */
	}
	if (p->started)
		pthread_join(p->thread, NULL);
	port_dir_free(p);
	for (size_t i = 0; i < p->n; i++) {
		if (p->rt[i].idle_fd >= 0)
			close(p->rt[i].idle_fd);
		ipc_process_info_free(&p->rt[i].info);
		free(p->rt[i].path);
	}
	free(p->rt);
	free(p->dir);
	close(p->listen_fd);
	close(p->wake[0]);
	close(p->wake[1]);
	unlink(p->path);
	free(p->path);
	pthread_mutex_destroy(&p->mu);
	pthread_cond_destroy(&p->cv);
	free(p);
}

size_t port_list(struct port *p, struct port_runtime **out)
{
	struct port_runtime *l;
	size_t n = 0;

	pthread_mutex_lock(&p->mu);
	l = mem_array(p->n ? p->n : 1, sizeof(*l));
	for (size_t i = 0; i < p->n; i++) {
		const struct runtime *r = &p->rt[i];

		if (!r->have_info)
			continue; /* not fully attached yet */
		memcpy(l[n].cookie, r->cookie, 16);
		l[n].pid = r->pid;
		l[n].attached_unix_ms = r->attached_unix_ms;
		l[n].have_info = true;
		l[n].info.pid = r->info.pid;
		memcpy(l[n].info.cookie, r->info.cookie, 16);
#define DUP(f) l[n].info.f = r->info.f ? mem_strdup(r->info.f) : NULL
		DUP(command_line);
		DUP(os);
		DUP(arch);
		DUP(assembly);
		DUP(clr_version);
		DUP(rid);
#undef DUP
		n++;
	}
	pthread_mutex_unlock(&p->mu);
	*out = l;
	return n;
}

void port_list_free(struct port_runtime *list, size_t n)
{
	for (size_t i = 0; i < n; i++)
		ipc_process_info_free(&list[i].info);
	free(list);
}

int port_take(struct port *p, const uint8_t cookie[16], int timeout_ms, int *fd)
{
	struct timespec until;
	struct runtime *r;
	bool dialed = false, took_idle = false;
	int rc = 0;

	clock_deadline(&until, timeout_ms);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		r = rtab_find(p, cookie);
		if (r == NULL) {
			rc = DP_ENOTFOUND;
			break;
		}
		if (r->path && !dialed) {
			/* Its own connection to the runtime's socket, made without the lock; busy keeps r in the table. */
			char *path = mem_strdup(r->path);
			int e;

			r->busy++;
			pthread_mutex_unlock(&p->mu);
			rc = port_dial(path, fd);
			e = errno;
			free(path);
			pthread_mutex_lock(&p->mu);
			if (rc == 0)
				break;
			dialed = true;
			r = rtab_find(p, cookie);
			if (r == NULL)
				DP_FATAL("port: a runtime with a command in flight was dropped");
			r->busy--;
			errno = e;
			continue; /* an advertised connection may still serve */
		}
		if (r->idle_fd >= 0) {
			*fd = r->idle_fd;
			r->idle_fd = -1;
			r->busy++;
			took_idle = true;
			rc = 0;
			break;
		}
		if (!r->via_port || r->hung_up) {
			if (!dialed)
				errno = ECONNREFUSED; /* its socket went away, or it exited: nothing will be advertised */
			rc = DP_EIO;
			break;
		}
		if (p->stopping || pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0) {
			errno = ETIMEDOUT;
			rc = DP_EIO;
			break;
		}
	}
	pthread_mutex_unlock(&p->mu);
	if (took_idle && write(p->wake[1], "x", 1) < 0) {
		/* the listener rebuilds its poll set on its next timeout anyway */
	}
	return rc;
}

void port_release(struct port *p, const uint8_t cookie[16])
{
	struct runtime *r;

	pthread_mutex_lock(&p->mu);
	r = rtab_find(p, cookie);
	if (r && r->busy > 0) {
		r->busy--;
		if (r->idle_fd < 0 && r->lost_ms == 0)
			r->lost_ms = clock_ms();
	}
	pthread_mutex_unlock(&p->mu);
}
