/*
 * eproc_child.c - the egress process's side (eproc_int.h): forked by the
 * agent, it drops what it inherited (the agent's TLS secrets, its file
 * descriptors, its signals), enters its own seccomp profile, and runs a
 * thread per upload that reads the upload's pipe into the store client,
 * reporting progress and the verdict back over the socket pair.
 */
#include "eproc_int.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"
#include "sandbox.h"

#define READ_CHUNK 65536
#define PROGRESS_EVERY (4u << 20)

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
	eproc_msg_send(u->ch->sock, &u->ch->send_mu, tag, o, -1);
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
	const char *op = eproc_jstr(b, "op"), *prov = eproc_jstr(b, "provider"), *name = eproc_jstr(b, "name");
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
	u->st = eproc_store_of(p->type);
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
	u = child_find(ch, eproc_jstr(b, "op"));
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

void eproc_child_main(int sock, const struct launch_config *cfg, bool sandbox)
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
		int fd, r = eproc_msg_recv(sock, &tag, &b, &fd);

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
