/*
 * eproc.c - the egress process (eproc.h), the agent's side: the fork, and a
 * reader thread that hands each verdict to the upload waiting for it. The
 * egress process's side is eproc_child.c, the messages between them
 * eproc_msg.c.
 */
#include "eproc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"

#define PIPE_BYTES (1 << 20)   /* the artifact's pipe: fewer wakeups than the default 64 KiB */
#define CANCEL_TICK_MS 200     /* how often a commit waiting on the store looks at the cancel flag */

/* ---- the agent's side ---- */

struct eproc_upload {
	struct eproc *e;
	char op[48];
	int wfd;
	bool done, used;
	int rc;
	char *location;
	char error[512];
	uint64_t sent;
	void (*progress)(void *ctx, uint64_t sent);
	void *ctx;
	pthread_cond_t cv;
};

struct eproc {
	int sock;
	pid_t pid;
	pthread_t reader;
	bool reader_on;
	pthread_mutex_t mu, send_mu;
	bool dead;
	unsigned long seq;
	struct eproc_upload ups[MAX_UPLOADS];
};

static void fail_all(struct eproc *e, const char *why)
{
	for (size_t i = 0; i < MAX_UPLOADS; i++) {
		struct eproc_upload *u = &e->ups[i];

		if (u->used && !u->done) {
			u->done = true;
			u->rc = DP_EIO;
			snprintf(u->error, sizeof(u->error), "%s", why);
			pthread_cond_broadcast(&u->cv);
		}
	}
}

static void *reader_main(void *arg)
{
	struct eproc *e = arg;

	for (;;) {
		char tag;
		json_t *b;
		int fd, r = eproc_msg_recv(e->sock, &tag, &b, &fd);
		struct eproc_upload *u = NULL;
		const char *op;

		if (fd >= 0)
			close(fd);
		if (r != 0) {
			pthread_mutex_lock(&e->mu);
			e->dead = true;
			fail_all(e, "the egress process exited");
			pthread_mutex_unlock(&e->mu);
			log_error("egress process exited", LOG_STR("event", "egress-exited"));
			return NULL;
		}
		op = eproc_jstr(b, "op");
		pthread_mutex_lock(&e->mu);
		for (size_t i = 0; op && i < MAX_UPLOADS && u == NULL; i++)
			if (e->ups[i].used && strcmp(e->ups[i].op, op) == 0)
				u = &e->ups[i];
		if (u && tag == 'P') {
			u->sent = (uint64_t)json_integer_value(json_object_get(b, "bytes"));
			if (u->progress)
				u->progress(u->ctx, u->sent);
		} else if (u && (tag == 'D' || tag == 'F') && !u->done) {
			u->done = true;
			u->rc = tag == 'D' ? 0 : json_is_true(json_object_get(b, "aborted")) ? DP_ECANCELED : DP_EREMOTE;
			if (tag == 'D') {
				u->location = mem_strdup(eproc_jstr(b, "location") ? eproc_jstr(b, "location") : "");
				u->sent = (uint64_t)json_integer_value(json_object_get(b, "bytes"));
				if (u->progress)
					u->progress(u->ctx, u->sent);
			} else {
				snprintf(u->error, sizeof(u->error), "%s", eproc_jstr(b, "error") ? eproc_jstr(b, "error") : "failed");
			}
			pthread_cond_broadcast(&u->cv);
		}
		pthread_mutex_unlock(&e->mu);
		json_decref(b);
	}
}

int eproc_start_with(struct launch_config *c, bool sandbox, const struct egress_store *const *list, struct eproc **out,
		     struct err_msg *em)
{
	eproc_stores_set(list);
	return eproc_start(c, sandbox, out, em);
}

int eproc_start(struct launch_config *c, bool sandbox, struct eproc **out, struct err_msg *em)
{
	struct eproc *e;
	bool any = false;
	int sv[2];
	pid_t pid;

	*out = NULL;
	for (size_t i = 0; i < c->n_egress; i++) {
		const struct egress_provider *p = &c->egress[i];
		const struct egress_store *st;
		int rc;

		if (p->type == NULL)
			continue;
		if ((st = eproc_store_of(p->type)) == NULL)
			return err_set(em, DP_EINVAL, "egress provider '%s': this agent cannot write to %s", p->name,
				       p->type);
		if ((rc = st->check(p, em)) != 0)
			return rc;
		any = true;
	}
	if (!any)
		return 0;
	if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv) != 0)
		return err_set(em, DP_EIO, "egress process: socketpair: %s", strerror(errno));
	pid = fork();
	if (pid < 0) {
		close(sv[0]);
		close(sv[1]);
		return err_set(em, DP_EIO, "egress process: fork: %s", strerror(errno));
	}
	if (pid == 0) {
		close(sv[0]);
		eproc_child_main(sv[1], c, sandbox);
		_exit(0);
	}
	close(sv[1]);
	/* only the egress process holds the stores' settings from here */
	for (size_t i = 0; i < c->n_egress; i++)
		if (c->egress[i].type) {
			settings_wipe(c->egress[i].set);
			settings_wipe(egress_properties(&c->egress[i]));
		}
	e = mem_zalloc(sizeof(*e));
	e->sock = sv[0];
	e->pid = pid;
	pthread_mutex_init(&e->mu, NULL);
	pthread_mutex_init(&e->send_mu, NULL);
	for (size_t i = 0; i < MAX_UPLOADS; i++)
		pthread_cond_init(&e->ups[i].cv, NULL);
	if (pthread_create(&e->reader, NULL, reader_main, e) != 0)
		DP_FATAL("cannot start the egress process's reader thread");
	e->reader_on = true;
	log_info("egress process started", LOG_STR("event", "egress-started"), LOG_INT("pid", pid));
	*out = e;
	return 0;
}

bool eproc_alive(struct eproc *e)
{
	bool alive;

	if (e == NULL)
		return false;
	pthread_mutex_lock(&e->mu);
	alive = !e->dead;
	pthread_mutex_unlock(&e->mu);
	return alive;
}

void eproc_free(struct eproc *e)
{
	if (e == NULL)
		return;
	shutdown(e->sock, SHUT_RDWR);
	if (e->reader_on)
		pthread_join(e->reader, NULL);
	close(e->sock);
	kill(e->pid, SIGKILL);
	waitpid(e->pid, NULL, 0);
	free(e);
}

int eproc_open(struct eproc *e, const struct egress_provider *p, const char *name, const char *const *meta,
	       void (*progress)(void *ctx, uint64_t sent), void *ctx, int *wfd, struct eproc_upload **out,
	       struct err_msg *em)
{
	struct eproc_upload *u = NULL;
	json_t *msg, *m = json_object();
	int pfd[2];

	*out = NULL;
	*wfd = -1;
	pthread_mutex_lock(&e->mu);
	for (size_t i = 0; i < MAX_UPLOADS && u == NULL && !e->dead; i++)
		if (!e->ups[i].used)
			u = &e->ups[i];
	if (u) {
		u->used = true;
		u->done = false;
		u->rc = 0;
		u->sent = 0;
		u->location = NULL;
		u->error[0] = '\0';
		u->e = e;
		u->progress = progress;
		u->ctx = ctx;
		snprintf(u->op, sizeof(u->op), "u%lu", ++e->seq);
	}
	pthread_mutex_unlock(&e->mu);
	if (u == NULL) {
		json_decref(m);
		return err_set(em, DP_EIO, "%s", e->dead ? "the egress process has exited" : "too many uploads at once");
	}
	if (pipe2(pfd, O_CLOEXEC) != 0) {
		json_decref(m);
		eproc_close(u, false, 0, NULL, NULL, em);
		return err_set(em, DP_EIO, "pipe: %s", strerror(errno));
	}
	fcntl(pfd[1], F_SETPIPE_SZ, PIPE_BYTES);
	for (size_t i = 0; meta && meta[i] && meta[i + 1]; i += 2)
		json_object_set_new(m, meta[i], json_string(meta[i + 1]));
	msg = json_pack("{s:s, s:s, s:s, s:o}", "op", u->op, "provider", p->name, "name", name, "meta", m);
	if (eproc_msg_send(e->sock, &e->send_mu, 'U', msg, pfd[0]) != 0) {
		int err = errno;

		json_decref(msg);
		close(pfd[0]);
		close(pfd[1]);
		u->wfd = -1;
		eproc_close(u, false, 0, NULL, NULL, em);
		return err_set(em, DP_EIO, "cannot reach the egress process: %s", strerror(err));
	}
	json_decref(msg);
	close(pfd[0]);
	u->wfd = pfd[1];
	*wfd = pfd[1];
	*out = u;
	return 0;
}

uint64_t eproc_sent(struct eproc_upload *u)
{
	uint64_t n;

	pthread_mutex_lock(&u->e->mu);
	n = u->sent;
	pthread_mutex_unlock(&u->e->mu);
	return n;
}

int eproc_close(struct eproc_upload *u, bool commit, uint64_t bytes, const atomic_bool *cancel, char **location,
		struct err_msg *em)
{
	struct eproc *e = u->e;
	json_t *msg = json_pack("{s:s, s:I}", "op", u->op, "bytes", (json_int_t)bytes);
	int rc;

	if (location)
		*location = NULL;
	if (u->wfd >= 0)
		close(u->wfd);
	u->wfd = -1;
	if (eproc_msg_send(e->sock, &e->send_mu, commit ? 'C' : 'A', msg, -1) != 0) {
		pthread_mutex_lock(&e->mu);
		if (!u->done) {
			u->done = true;
			u->rc = DP_EIO;
			snprintf(u->error, sizeof(u->error), "the egress process has exited");
		}
		pthread_mutex_unlock(&e->mu);
	}
	json_decref(msg);
	pthread_mutex_lock(&e->mu);
	while (!u->done) {
		struct timespec tick;

		if (!commit || cancel == NULL) {
			pthread_cond_wait(&u->cv, &e->mu);
			continue;
		}
		if (atomic_load(cancel)) { /* cancelled while the store completes: abort it instead */
			json_t *a = json_pack("{s:s, s:I}", "op", u->op, "bytes", (json_int_t)0);

			commit = false;
			pthread_mutex_unlock(&e->mu);
			(void)eproc_msg_send(e->sock, &e->send_mu, 'A', a, -1); /* if the process is gone, the reader says so */
			json_decref(a);
			pthread_mutex_lock(&e->mu);
			continue;
		}
		clock_deadline(&tick, CANCEL_TICK_MS);
		pthread_cond_timedwait(&u->cv, &e->mu, &tick);
	}
	rc = u->rc;
	if (rc == 0 && location)
		*location = u->location;
	else
		free(u->location);
	if (rc != 0)
		err_set(em, rc, "%s", u->error);
	u->location = NULL;
	u->progress = NULL;
	u->used = false;
	pthread_mutex_unlock(&e->mu);
	return rc;
}

