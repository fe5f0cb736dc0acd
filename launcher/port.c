/*
 * port.c - the diagnostic port's listener thread and runtime table (port.h).
 *
 * Locking: one mutex guards the table; the condition variable wakes callers
 * of port_take when an idle connection arrives. The listener thread polls the
 * listening socket, every idle connection (to see a runtime hang up) and a
 * wake-up pipe used by port_free. Commands run on the caller's thread with the
 * connection it took, so a slow dump never stalls the listener.
 */
#include "port.h"

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

#define IO_TIMEOUT_MS 2000 /* resume and process-info answers are immediate; this is a safety net */

struct runtime {
	uint8_t cookie[16];
	uint64_t pid;
	int idle_fd;          /* newest idle advertised connection, or -1 */
	int busy;             /* commands in flight */
	int stage;            /* 0: needs resume; 1-3: asking ProcessInfo3, 2, 1 (one per connection); 4: ready */
	long long lost_ms;    /* when its idle connection went away (0 = it has one) */
	bool have_info;
	struct ipc_process_info info;
};

struct port {
	struct port_config cfg;
	char *path;
	int listen_fd;
	int wake[2];
	pthread_t thread;
	bool started, stopping;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct runtime *rt;
	size_t n;
};

static void emit(struct port *p, const char *event, const struct runtime *r)
{
	char cookie[37], line[2048];

	if (p->cfg.on_event == NULL)
		return;
	ipc_cookie_guid(r->cookie, cookie);
	snprintf(line, sizeof(line), "{\"event\":\"%s\",\"pid\":%llu,\"uid\":\"%s\",\"assembly\":\"%s\",\"runtime\":\"%s\"}",
		 event, (unsigned long long)r->pid, cookie, r->have_info && r->info.assembly ? r->info.assembly : "",
		 r->have_info && r->info.clr_version ? r->info.clr_version : "");
	p->cfg.on_event(line);
}

int port_open(const struct port_config *cfg, struct port **out, struct err_msg *em)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	struct port *p;
	int fd;

	if (strlen(cfg->path) >= sizeof(sa.sun_path))
		return err_set(em, DP_EINVAL, "socket path %s is %zu bytes; the limit is %zu", cfg->path,
			       strlen(cfg->path), sizeof(sa.sun_path) - 1);
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
	p->listen_fd = fd;
	if (pipe2(p->wake, O_CLOEXEC | O_NONBLOCK) != 0)
		DP_FATAL("pipe2: %s", strerror(errno));
	pthread_mutex_init(&p->mu, NULL);
	pthread_cond_init(&p->cv, NULL);
	*out = p;
	return 0;
}

static struct runtime *find(struct port *p, const uint8_t cookie[16])
{
	for (size_t i = 0; i < p->n; i++)
		if (memcmp(p->rt[i].cookie, cookie, 16) == 0)
			return &p->rt[i];
	return NULL;
}

/* One command on a fresh connection, in the listener thread (resume, process info). */
static int simple_command(int fd, uint8_t set, uint8_t id, struct ipc_header *h, struct buf *payload)
{
	struct buf req;
	int rc;

	buf_init(&req, IPC_MAX_MESSAGE);
	ipc_begin(&req, set, id);
	ipc_end(&req);
	rc = ipc_transact(fd, &req, h, payload, IO_TIMEOUT_MS);
	buf_free(&req);
	return rc;
}

static void fetch_info(struct runtime *r, int fd)
{
	static const struct { uint8_t id; int version; } tries[] = {
		{ IPC_PROCESS_INFO3, 3 }, { IPC_PROCESS_INFO2, 2 }, { IPC_PROCESS_INFO, 1 },
	};
	struct ipc_header h;
	struct buf pl;

	buf_init(&pl, IPC_MAX_MESSAGE);
	/* Newer first; an older runtime answers UNKNOWN_COMMAND and we use its next connection. */
	for (size_t i = (size_t)(r->stage - 1); i < 3 && r->stage >= 1; i++) {
		buf_reset(&pl);
		if (simple_command(fd, IPC_SET_PROCESS, tries[i].id, &h, &pl) != 0)
			break;
		if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK &&
		    ipc_parse_process_info((const uint8_t *)pl.data, pl.len, tries[i].version, &r->info) == 0) {
			r->have_info = true;
			r->stage = 4;
		} else {
			r->stage++; /* try the older command on the next advertised connection */
		}
		break;
	}
	buf_free(&pl);
}

/*
 * Make room by dropping the runtime gone longest (no idle connection, no
 * command in flight), even inside its grace period: a new runtime that is
 * here now matters more than one that has probably exited. False if all are live.
 */
static bool evict_gone(struct port *p)
{
	size_t victim = p->n;

	for (size_t i = 0; i < p->n; i++) {
		const struct runtime *r = &p->rt[i];

		if (r->idle_fd < 0 && r->busy == 0 && r->lost_ms &&
		    (victim == p->n || r->lost_ms < p->rt[victim].lost_ms))
			victim = i;
	}
	if (victim == p->n)
		return false;
	emit(p, "detached", &p->rt[victim]);
	ipc_process_info_free(&p->rt[victim].info);
	p->rt[victim] = p->rt[--p->n];
	return true;
}

/* A connection advertised runtime `a`: resume it, ask who it is, or keep the connection idle. */
static void advertised(struct port *p, int fd, const struct ipc_advert *a)
{
	struct runtime *r = find(p, a->cookie);
	struct ipc_header h;
	struct buf pl;

	if (r == NULL) {
		if (p->n == p->cfg.max_runtimes && !evict_gone(p)) {
			close(fd); /* full of live runtimes: this one retries on its own */
			return;
		}
		p->rt = mem_realloc(p->rt, (p->n + 1) * sizeof(*p->rt));
		r = &p->rt[p->n++];
		memset(r, 0, sizeof(*r));
		memcpy(r->cookie, a->cookie, 16);
		r->pid = a->pid;
		r->idle_fd = -1;
	}
	r->lost_ms = 0;
	if (r->stage == 0) {
		/* First sight: resume at once, so a suspended app waits no longer than our start. */
		buf_init(&pl, IPC_MAX_MESSAGE);
		if (simple_command(fd, IPC_SET_PROCESS, IPC_PROCESS_RESUME, &h, &pl) == 0)
			r->stage = 1;
		buf_free(&pl);
		close(fd);
		r->lost_ms = clock_ms();
		return;
	}
	if (r->stage >= 1 && r->stage <= 3) {
		fetch_info(r, fd);
		close(fd);
		r->lost_ms = clock_ms();
		if (r->have_info)
			emit(p, "attached", r);
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

/* Idle connections that hung up (or talked out of turn) are closed; long-gone runtimes dropped. */
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
			}
	for (size_t i = p->n; i-- > 0;) {
		struct runtime *r = &p->rt[i];

		if (r->idle_fd < 0 && r->busy == 0 && r->lost_ms && t - r->lost_ms > p->cfg.grace_ms) {
			emit(p, "detached", r);
			ipc_process_info_free(&r->info);
			p->rt[i] = p->rt[--p->n];
		}
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

int port_start(struct port *p, struct err_msg *em)
{
	if (pthread_create(&p->thread, NULL, listener, p) != 0)
		return err_set(em, DP_EIO, "cannot start the listener thread");
	p->started = true;
	return 0;
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
	for (size_t i = 0; i < p->n; i++) {
		if (p->rt[i].idle_fd >= 0)
			close(p->rt[i].idle_fd);
		ipc_process_info_free(&p->rt[i].info);
	}
	free(p->rt);
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
	int rc = 0;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += timeout_ms / 1000;
	until.tv_nsec += (long)(timeout_ms % 1000) * 1000000;
	if (until.tv_nsec >= 1000000000) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000;
	}
	pthread_mutex_lock(&p->mu);
	for (;;) {
		r = find(p, cookie);
		if (r == NULL) {
			rc = DP_ENOTFOUND;
			break;
		}
		if (r->idle_fd >= 0) {
			*fd = r->idle_fd;
			r->idle_fd = -1;
			r->busy++;
			break;
		}
		if (p->stopping || pthread_cond_timedwait(&p->cv, &p->mu, &until) != 0) {
			errno = ETIMEDOUT;
			rc = DP_EIO;
			break;
		}
	}
	pthread_mutex_unlock(&p->mu);
	if (rc == 0 && write(p->wake[1], "x", 1) < 0) {
		/* the listener rebuilds its poll set on its next timeout anyway */
	}
	return rc;
}

void port_release(struct port *p, const uint8_t cookie[16])
{
	struct runtime *r;

	pthread_mutex_lock(&p->mu);
	r = find(p, cookie);
	if (r && r->busy > 0) {
		r->busy--;
		if (r->idle_fd < 0 && r->lost_ms == 0)
			r->lost_ms = clock_ms();
	}
	pthread_mutex_unlock(&p->mu);
}
