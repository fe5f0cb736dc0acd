/*
 * eproc.c - the egress process (eproc.h): the fork, the messages, the
 * agent's side (a reader thread that hands each verdict to the upload
 * waiting for it) and the egress process's side (a thread per upload that
 * reads its pipe into the store client).
 */
#include "eproc.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "egress/azblob.h"
#include "egress/s3_store.h"
#include "log.h"
#include "mem.h"
#include "sandbox.h"

#define MSG_MAX 65536          /* one message (a packet) */
#define PIPE_BYTES (1 << 20)   /* the artifact's pipe: fewer wakeups than the default 64 KiB */
#define READ_CHUNK 65536
#define MAX_UPLOADS 16         /* in flight at once */
#define PROGRESS_EVERY (4u << 20)
#define CANCEL_TICK_MS 200     /* how often a commit waiting on the store looks at the cancel flag */

/* The stores this build has (their clients, egress/). */
static const struct egress_store *const builtin_stores[] = { &s3_store, &azblob_store, NULL };
static const struct egress_store *const *stores = builtin_stores;

static const struct egress_store *store_of(const char *type)
{
	for (size_t i = 0; stores[i]; i++)
		if (strcmp(stores[i]->type, type) == 0)
			return stores[i];
	return NULL;
}

/* ---- messages ---- */

/* Send one message (a tag letter, then JSON), with fd attached when fd >= 0. 0, or -1 (errno). */
static int msg_send(int sock, pthread_mutex_t *mu, char tag, json_t *body, int fd)
{
	char *text = json_dumps(body, JSON_COMPACT);
	size_t len = text ? strlen(text) : 0;
	char *pkt = mem_alloc(len + 2); /* the tag, the text; its NUL copied but not sent */
	struct iovec iov = { pkt, len + 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	pkt[0] = tag;
	pkt[1] = '\0';
	if (text)
		memcpy(pkt + 1, text, len + 1);
	free(text);
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (mu)
		pthread_mutex_lock(mu);
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (mu)
		pthread_mutex_unlock(mu);
	free(pkt);
	return n == (ssize_t)(len + 1) ? 0 : -1;
}

/* Receive one message: its tag and JSON (new reference), and *fd when one came (else -1). 0, 1 at EOF, -1 on error. */
static int msg_recv(int sock, char *tag, json_t **body, int *fd)
{
	static _Thread_local char pkt[MSG_MAX + 1];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { pkt, MSG_MAX };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;

	*fd = -1;
	*body = NULL;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 1;
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	if (n < 2 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		*tag = '?';
		return 0;
	}
	*tag = pkt[0];
	*body = json_loadb(pkt + 1, (size_t)n - 1, 0, NULL);
	return 0;
}

static const char *jstr(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}

/* ---- the egress process ---- */

struct child_up {
	struct child *ch;
	char op[48];
	const struct egress_provider *p;
	const struct egress_store *st;
	char *name;
	char **meta;
	int fd;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int verdict; /* 0 none yet, 'C' commit, 'A' abort */
	int cancel[2]; /* the slot's pipe (made before the sandbox): a byte in it on 'A' ends the store's waits */
	uint64_t expect;
	bool used;
};

struct child {
	char host[256]; /* the hostname: in Kubernetes the pod's name, added to every upload's metadata */
	int sock;
	pthread_mutex_t send_mu;
	pthread_mutex_t mu;
	struct child_up ups[MAX_UPLOADS];
	const struct launch_config *cfg;
};

static void child_reply(struct child_up *u, char tag, const char *k1, json_t *v1, const char *k2, json_t *v2)
{
	json_t *o = json_pack("{s:s}", "op", u->op);

	if (k1)
		json_object_set_new(o, k1, v1);
	if (k2)
		json_object_set_new(o, k2, v2);
	msg_send(u->ch->sock, &u->ch->send_mu, tag, o, -1);
	json_decref(o);
}

static void child_up_release(struct child_up *u)
{
	struct child *ch = u->ch;

	if (u->fd >= 0)
		close(u->fd);
	free(u->name);
	for (size_t i = 0; u->meta && u->meta[i]; i++)
		free(u->meta[i]);
	free(u->meta);
	pthread_mutex_lock(&ch->mu);
	u->used = false;
	pthread_mutex_unlock(&ch->mu);
}

static void *child_upload(void *arg)
{
	struct child_up *u = arg;
	struct err_msg em = { "" };
	char *buf = mem_alloc(READ_CHUNK), *location = NULL;
	void *h = NULL;
	uint64_t got = 0, told = 0;
	int rc = u->st->begin(u->p, u->name, (const char *const *)u->meta, u->cancel[0], &h, &em);
	ssize_t n = 0;

	while (rc == 0) {
		n = read(u->fd, buf, READ_CHUNK);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		got += (uint64_t)n;
		rc = u->st->write(h, buf, (size_t)n, &em);
		if (rc == 0 && u->st->sent(h) >= told + PROGRESS_EVERY) {
			told = u->st->sent(h);
			child_reply(u, 'P', "bytes", json_integer((json_int_t)told), NULL, NULL);
		}
	}
	free(buf);
	if (rc == 0 && n < 0)
		rc = err_set(&em, DP_EIO, "reading the artifact from the agent: %s", strerror(errno));
	/* the pipe is at its end, or the store failed: closing it tells a writer still at it (EPIPE), and
	 * the agent's verdict decides */
	close(u->fd);
	u->fd = -1;
	pthread_mutex_lock(&u->mu);
	while (u->verdict == 0)
		pthread_cond_wait(&u->cv, &u->mu);
	pthread_mutex_unlock(&u->mu);
	if ((rc == 0 || rc == DP_ECANCELED) && u->verdict != 'C') /* the store's wait may have ended on the cancel */
		rc = err_set(&em, DP_ECANCELED, "aborted: the capture did not complete");
	if (rc == 0 && got != u->expect)
		rc = err_set(&em, DP_EIO, "the artifact arrived short: %llu of %llu bytes", (unsigned long long)got,
			     (unsigned long long)u->expect);
	if (rc == 0)
		rc = u->st->finish(h, &location, &em);
	else if (h)
		u->st->abort(h);
	{
		/* the slot is free before the agent hears the end, so that the agent (which frees its own slot
		 * then) can never have an upload in flight that this side has no slot for */
		struct child_up done = { .ch = u->ch };

		memcpy(done.op, u->op, sizeof(done.op));
		child_up_release(u);
		if (rc == 0)
			child_reply(&done, 'D', "location", json_string(location), "bytes", json_integer((json_int_t)got));
		else
			child_reply(&done, 'F', "error", json_string(em.text), "aborted", json_boolean(rc == DP_ECANCELED));
	}
	free(location);
	return NULL;
}

static struct child_up *child_find(struct child *ch, const char *op)
{
	for (size_t i = 0; i < MAX_UPLOADS; i++)
		if (ch->ups[i].used && op && strcmp(ch->ups[i].op, op) == 0)
			return &ch->ups[i];
	return NULL;
}

/* An upload request: its provider, name and metadata, and the pipe's read end. */
static void child_start(struct child *ch, json_t *b, int fd)
{
	const char *op = jstr(b, "op"), *prov = jstr(b, "provider"), *name = jstr(b, "name");
	const struct egress_provider *p = NULL;
	struct child_up *u = NULL;
	json_t *meta = json_object_get(b, "meta");
	pthread_attr_t attr;
	pthread_t t;
	size_t i;

	for (i = 0; prov && i < ch->cfg->n_egress; i++)
		if (ch->cfg->egress[i].type && strcmp(ch->cfg->egress[i].name, prov) == 0)
			p = &ch->cfg->egress[i];
	pthread_mutex_lock(&ch->mu);
	for (i = 0; i < MAX_UPLOADS && u == NULL; i++)
		if (!ch->ups[i].used)
			u = &ch->ups[i];
	if (u)
		u->used = true;
	pthread_mutex_unlock(&ch->mu);
	if (u == NULL || op == NULL || strlen(op) >= sizeof(u->op) || p == NULL || name == NULL) {
		struct child_up tmp = { .ch = ch };

		snprintf(tmp.op, sizeof(tmp.op), "%s", op ? op : "");
		child_reply(&tmp, 'F', "error", json_string(u == NULL ? "too many uploads at once" : "a bad upload request"),
			    NULL, NULL);
		if (u) {
			pthread_mutex_lock(&ch->mu);
			u->used = false;
			pthread_mutex_unlock(&ch->mu);
		}
		close(fd);
		return;
	}
	snprintf(u->op, sizeof(u->op), "%s", op);
	{
		char drop[16];

		while (read(u->cancel[0], drop, sizeof(drop)) > 0)
			; /* the slot's last upload's cancel */
	}
	u->ch = ch;
	u->p = p;
	u->st = store_of(p->type);
	u->name = mem_strdup(name);
	u->fd = fd;
	u->verdict = 0;
	u->expect = 0;
	u->meta = mem_array(2 * json_object_size(meta) + 3, sizeof(char *));
	{
		const char *k;
		json_t *v;
		size_t n = 0;

		json_object_foreach(meta, k, v)
			if (json_is_string(v)) {
				u->meta[n++] = mem_strdup(k);
				u->meta[n++] = mem_strdup(json_string_value(v));
			}
		if (ch->host[0] && json_object_get(meta, "hostname") == NULL) {
			u->meta[n++] = mem_strdup("hostname");
			u->meta[n++] = mem_strdup(ch->host);
		}
	}
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, child_upload, u) != 0) {
		child_reply(u, 'F', "error", json_string("cannot start a thread for the upload"), NULL, NULL);
		child_up_release(u);
	}
	pthread_attr_destroy(&attr);
}

static void child_verdict(struct child *ch, char tag, json_t *b)
{
	struct child_up *u;

	pthread_mutex_lock(&ch->mu);
	u = child_find(ch, jstr(b, "op"));
	pthread_mutex_unlock(&ch->mu);
	if (u == NULL)
		return;
	pthread_mutex_lock(&u->mu);
	u->expect = (uint64_t)json_integer_value(json_object_get(b, "bytes"));
	u->verdict = (unsigned char)tag;
	if (tag == 'A') /* the store may be waiting on the network: end that now */
		(void)!write(u->cancel[1], "A", 1);
	pthread_cond_signal(&u->cv);
	pthread_mutex_unlock(&u->mu);
}

static void child_main(int sock, const struct launch_config *cfg, bool sandbox)
{
	static struct child ch;
	int devnull = open("/dev/null", O_RDWR | O_CLOEXEC);

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	prctl(PR_SET_NAME, "diagport-egress");
	/* the agent's TLS secrets, inherited with its memory, are no business of this process */
	if (cfg->tls_pem)
		mem_wipe(cfg->tls_pem, strlen(cfg->tls_pem));
	if (cfg->tls_password)
		mem_wipe(cfg->tls_password, strlen(cfg->tls_password));
	/* nothing of the agent's: only the socket pair, stderr (the log) and /dev/null for the rest */
	for (int fd = 3; fd < 1024; fd++)
		if (fd != sock && fd != devnull)
			close(fd);
	if (devnull >= 0) {
		dup2(devnull, 0);
		dup2(devnull, 1);
	}
	ch.sock = sock;
	ch.cfg = cfg;
	gethostname(ch.host, sizeof(ch.host) - 1);
	pthread_mutex_init(&ch.send_mu, NULL);
	pthread_mutex_init(&ch.mu, NULL);
	for (size_t i = 0; i < MAX_UPLOADS; i++) {
		ch.ups[i].fd = -1;
		pthread_mutex_init(&ch.ups[i].mu, NULL);
		pthread_cond_init(&ch.ups[i].cv, NULL);
		if (pipe2(ch.ups[i].cancel, O_CLOEXEC | O_NONBLOCK) != 0)
			_exit(1); /* the agent sees the egress process gone and says so */
	}
	{
		sigset_t all;

		sigfillset(&all);
		sigdelset(&all, SIGKILL);
		pthread_sigmask(SIG_SETMASK, &all, NULL); /* the agent's signals are the agent's */
	}
	if (sandbox)
		sandbox_enter(SANDBOX_EGRESS);
	for (;;) {
		char tag;
		json_t *b;
		int fd, r = msg_recv(sock, &tag, &b, &fd);

		if (r != 0)
			_exit(0); /* the agent is gone */
		if (tag == 'U' && b && fd >= 0)
			child_start(&ch, b, fd);
		else if ((tag == 'C' || tag == 'A') && b)
			child_verdict(&ch, tag, b);
		else if (fd >= 0)
			close(fd);
		json_decref(b);
	}
}

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
		int fd, r = msg_recv(e->sock, &tag, &b, &fd);
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
		op = jstr(b, "op");
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
				u->location = mem_strdup(jstr(b, "location") ? jstr(b, "location") : "");
				u->sent = (uint64_t)json_integer_value(json_object_get(b, "bytes"));
				if (u->progress)
					u->progress(u->ctx, u->sent);
			} else {
				snprintf(u->error, sizeof(u->error), "%s", jstr(b, "error") ? jstr(b, "error") : "failed");
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
	stores = list;
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
		if ((st = store_of(p->type)) == NULL)
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
		child_main(sv[1], c, sandbox);
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
	if (msg_send(e->sock, &e->send_mu, 'U', msg, pfd[0]) != 0) {
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
	if (msg_send(e->sock, &e->send_mu, commit ? 'C' : 'A', msg, -1) != 0) {
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
			(void)msg_send(e->sock, &e->send_mu, 'A', a, -1); /* if the process is gone, the reader says so */
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
