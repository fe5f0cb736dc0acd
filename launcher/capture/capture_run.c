/*
 * capture_run.c - the one function that runs a capture (capture.h), and the
 * sinks it can go to:
 *  - the response, streamed: the source's bytes as they come, chunked (a
 *    trace, live metrics, logs; a dump with transport=fifo, the app stopped
 *    until the client has read the last byte);
 *  - the response, whole: an artifact made in memory, sent with its length;
 *  - the response, through a staging file: a dump copied into a file in
 *    the dumps directory that never has a name, capped by the dumps limit,
 *    sent as it grows or once whole (capture_dump.c); the app runs on as
 *    soon as it is written, and the dump's slot is held until the download
 *    ends (it holds the staging space);
 *  - an egress provider or a file, on a thread of its own: written under a
 *    partial name and published by rename only once complete (egress.h).
 *
 * Each kind's limit is one counter under one mutex. A slot is given back
 * before the operation finishes, so a client that saw the operation end may
 * ask again at once, and before the operations list is freed.
 */
#include "capture_int.h"

#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "egress.h"
#include "eproc.h"
#include "launcher/fsutil.h"
#include "log.h"
#include "mem.h"
#include "launcher/runtime/target.h"

#define CHUNK 65536
#define CANCEL_TICK_MS 200 /* how often a write to a full egress pipe looks at the cancel flag */

struct captures *captures_new(const struct captures_config *cfg)
{
	struct captures *cs = mem_zalloc(sizeof(*cs));

	cs->port = cfg->port;
	cs->ops = cfg->ops;
	cs->dumps_dir = mem_strdup(cfg->dumps_dir);
	cs->dumps_limit = cfg->dumps_limit;
	cs->eproc = cfg->eproc;
	cs->exceptions = cfg->exceptions;
	pthread_mutex_init(&cs->mu, NULL);
	pthread_cond_init(&cs->freed, NULL);
	fs_remove_prefixed(cs->dumps_dir, CAPTURE_STAGING_PREFIX);
	return cs;
}

void captures_free(struct captures *cs)
{
	if (cs == NULL)
		return;
	free(cs->dumps_dir);
	pthread_mutex_destroy(&cs->mu);
	pthread_cond_destroy(&cs->freed);
	free(cs);
}

/* ---- jobs ---- */

static struct job *job_new(struct captures *cs, struct capture *c)
{
	struct job *j = mem_zalloc(sizeof(*j));

	j->cs = cs;
	j->c = *c;
	j->src_fd = -1;
	memset(c, 0, sizeof(*c));
	j->k = &capture_kinds[j->c.kind];
	return j;
}

/* The artifact's name: dotnet-monitor's, core_YYYYMMDD_HHMMSS for a dump, else YYYYMMDD_HHMMSS_PID.EXT (UTC). */
static void artifact_name(const struct job *j, char *out, size_t n)
{
	time_t now = time(NULL);
	struct tm tm;

	if (j->c.name) {
		snprintf(out, n, "%s", j->c.name);
		return;
	}
	if (j->ext == NULL) {
		dump_filename(out, n);
		return;
	}
	gmtime_r(&now, &tm);
	strftime(out, n, "%Y%m%d_%H%M%S", &tm);
	snprintf(out + strlen(out), n - strlen(out), "_%llu.%s", (unsigned long long)j->c.target.pid, j->ext);
}

/* ---- to an egress provider or a file ---- */

/*
 * All n bytes into the egress process's pipe (non-blocking), looking at the cancel flag while the pipe is
 * full: a store that stopped taking bytes must not keep a DELETE from ending the operation. 0, or -1 with
 * errno (ECANCELED when cancelled).
 */
static int pipe_write_all(struct job *j, int fd, const char *p, size_t n)
{
	while (n > 0) {
		ssize_t w = write(fd, p, n);
		struct pollfd pf = { .fd = fd, .events = POLLOUT };

		if (w > 0) {
			p += w;
			n -= (size_t)w;
			continue;
		}
		if (w < 0 && errno != EAGAIN && errno != EINTR)
			return -1;
		if (job_cancelled(j)) {
			errno = ECANCELED;
			return -1;
		}
		(void)poll(&pf, 1, CANCEL_TICK_MS);
	}
	return 0;
}

/* Everything the source gives into fd: its copy when it has one, else read and written. */
static int drain(struct job *j, int fd, const char *tmp, bool store, struct err_msg *em)
{
	char *chunk;
	long n = 0;
	int rc = 0;

	if (j->k->copy) {
		uint64_t written = 0;

		rc = j->k->copy(j, fd, 0, j->cancel, &written, em);
		j->bytes += written;
		if (!store)
			op_progress(j->op, j->bytes);
		return rc;
	}
	chunk = mem_alloc(CHUNK);
	if (store)
		(void)fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
	while (!job_cancelled(j) && (n = j->k->read(j, chunk, CHUNK)) > 0) {
		j->bytes += (uint64_t)n;
		if ((store ? pipe_write_all(j, fd, chunk, (size_t)n) : fs_write_all(fd, chunk, (size_t)n)) != 0) {
			if (errno == ECANCELED)
				break;
			rc = err_set(em, DP_EIO, "writing the %s to %s: %s", j->k->what, tmp, strerror(errno));
			break;
		}
		if (!store)
			op_progress(j->op, j->bytes);
	}
	free(chunk);
	if (rc == 0 && job_cancelled(j))
		rc = err_set(em, DP_ECANCELED, "cancelled");
	else if (rc == 0 && n < 0)
		rc = err_set(em, DP_EIO, "%s", j->k->error(j));
	return rc;
}

/* The provider a file sink is: its directory, published under its own name. */
static void file_provider(const char *path, struct egress_provider *p, char **dir, char **name)
{
	char *d = mem_strdup(path), *b = mem_strdup(path);

	*dir = mem_strdup(dirname(d));
	*name = mem_strdup(basename(b));
	free(d);
	free(b);
	p->name = "file";
	p->dir = *dir;
	p->tmp_dir = NULL;
}

static void store_progress(void *op, uint64_t sent)
{
	op_progress(op, sent);
}

/*
 * To a store's provider, through the egress process: the artifact's bytes
 * go into its pipe as the capture makes them, then the store's verdict.
 * Metadata a person can search the store by: what, which process, when, where.
 */
static int to_store(struct job *j, const struct egress_provider *prov, const char *name, char **final,
		    struct err_msg *em)
{
	char pid[24], uid[37], when[32];
	const char *pname = j->c.target.have_info && j->c.target.info.assembly ? j->c.target.info.assembly : "";
	const char *pod_ns = getenv("DIAGPORT_POD_NAMESPACE"), *ctr = getenv("DIAGPORT_CONTAINER_NAME");
	const char *meta[20];
	struct eproc_upload *u;
	struct err_msg em2 = { "" };
	time_t now = time(NULL);
	struct tm tm;
	size_t n = 0;
	uint64_t before = j->bytes;
	int fd, rc;

	if (j->cs->eproc == NULL)
		return err_set(em, DP_EINTERNAL, "egress provider '%s' has no egress process", prov->name);
	snprintf(pid, sizeof(pid), "%llu", (unsigned long long)j->c.target.pid);
	target_uid(&j->c.target, uid);
	gmtime_r(&now, &tm);
	strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%SZ", &tm);
	meta[n++] = "artifacttype", meta[n++] = j->k->what;
	meta[n++] = "pid", meta[n++] = pid;
	meta[n++] = "runtimeinstancecookie", meta[n++] = uid;
	meta[n++] = "processname", meta[n++] = pname;
	meta[n++] = "created", meta[n++] = when;
	if (pod_ns)
		meta[n++] = "namespace", meta[n++] = pod_ns;
	if (ctr)
		meta[n++] = "container", meta[n++] = ctr;
	meta[n] = NULL;
	if ((rc = eproc_open(j->cs->eproc, prov, name, meta, store_progress, j->op, &fd, &u, em)) != 0)
		return rc;
	rc = drain(j, fd, "the egress process", true, em);
	if (rc == 0)
		return eproc_close(u, true, j->bytes - before, j->cancel, final, em);
	/* the store's upload is aborted: nothing left of it; when the store failed first, its words say why,
	 * and when the egress process died, that is why the pipe broke */
	switch (eproc_close(u, false, 0, NULL, NULL, &em2)) {
	case DP_EREMOTE:
		*em = em2;
		rc = DP_EREMOTE;
		break;
	case DP_EIO: {
		struct err_msg why = *em;

		rc = err_set(em, DP_EIO, "%s (%s)", em2.text, why.text);
		break;
	}
	default:
		break;
	}
	return rc;
}

static void *sink_main(void *arg)
{
	struct job *j = arg;
	struct egress_provider file = { 0 };
	const struct egress_provider *prov = j->c.egress;
	struct err_msg em = { "" };
	char *tmp = NULL, *final = NULL, *dir = NULL, *fname = NULL, name[96];
	int fd = -1, rc;

	if (j->c.file) {
		file_provider(j->c.file, &file, &dir, &fname);
		prov = &file;
	}
	rc = j->k->start(j, &em);
	if (rc == 0 && prov->type) {
		artifact_name(j, name, sizeof(name));
		rc = to_store(j, prov, name, &final, &em);
		goto end;
	}
	if (rc == 0)
		rc = egress_fs_open(prov, j->id, &fd, &tmp, &em);
	if (rc == 0)
		rc = drain(j, fd, tmp, false, &em);
	if (rc == 0) {
		if (fname)
			snprintf(name, sizeof(name), "%s", fname);
		else
			artifact_name(j, name, sizeof(name));
		rc = egress_fs_publish(prov, fd, tmp, name, &final, &em);
	} else if (tmp) {
		egress_fs_discard(fd, tmp);
	}
end:
	capture_job_end(j, rc, final, em.text);
	free(tmp);
	free(final);
	free(dir);
	free(fname);
	return NULL;
}

static void in_background(struct job *j)
{
	pthread_attr_t attr;
	pthread_t t;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, sink_main, j) != 0)
		DP_FATAL("cannot start a thread for operation %s", j->id);
	pthread_attr_destroy(&attr);
}

/* ---- to the response ---- */

static long stream_read(void *ctx, char *out, size_t max)
{
	struct job *j = ctx;
	long n;

	if (job_cancelled(j))
		return -1; /* the client sees the body cut off */
	n = j->k->read(j, out, max);
	if (n > 0)
		j->bytes += (uint64_t)n;
	j->ended = n == 0;
	return n;
}

static void stream_done(void *ctx)
{
	struct job *j = ctx;
	const char *error = j->k->error(j);
	char why[128];

	if (j->ended || error[0]) {
		capture_job_end(j, j->ended ? 0 : DP_EIO, NULL, error);
		return;
	}
	snprintf(why, sizeof(why), "the client went away after %llu bytes; the %s was stopped",
		 (unsigned long long)j->bytes, j->k->what);
	capture_job_end(j, DP_EIO, NULL, why);
}

static void to_response(struct httpd_req *r, struct job *j)
{
	struct err_msg em;
	char fname[96], *disp;
	int rc = j->k->start(j, &em);

	if (rc != 0) {
		capture_send_failure(r, j, rc, &em);
		capture_job_end(j, rc, NULL, em.text);
		return;
	}
	artifact_name(j, fname, sizeof(fname));
	if (j->k->whole) {
		disp = mem_printf("%s; filename=\"%s\"", j->inline_ ? "inline" : "attachment", fname);
		httpd_set_header(r, "Content-Disposition", disp);
		free(disp);
		httpd_send(r, 200, j->ctype, j->out.data ? j->out.data : "", j->out.len);
		j->bytes = j->out.len;
		capture_job_end(j, 0, NULL, NULL);
	} else if (j->k->copy && j->c.transport != DUMP_VIA_FIFO) {
		capture_send_dump(r, j, fname, j->c.transport == DUMP_VIA_STAGED);
	} else {
		httpd_send_stream(r, 200, j->ctype, stream_read, stream_done, j, fname);
	}
}

int capture_run(struct captures *cs, struct capture *c, struct httpd_req *r, char op_id[37])
{
	const struct capture_kind_def *k = &capture_kinds[c->kind];
	bool own_sink = c->egress || c->file;
	struct job *j;
	char id[37] = "", *loc;

	if (!own_sink && r == NULL) {
		capture_free(c);
		return DP_EINVAL;
	}
	if (!capture_slot_take(cs, k)) {
		if (r)
			httpd_problem(r, 429, "Too Many Requests", "%s", k->busy);
		capture_free(c);
		return DP_ETOOBIG;
	}
	j = job_new(cs, c);
	if (own_sink || k->stoppable) {
		char uid[37], *name;
		size_t len;
		const char *n = target_name(&j->c.target, &len);

		target_uid(&j->c.target, uid);
		name = mem_strndup(n, len);
		j->op = ops_add(cs->ops, j->c.egress ? j->c.egress->name : j->c.file ? "file" : NULL, j->c.target.pid, uid,
				name, j->c.tags, k->stoppable, j->c.op_needs, j->id);
		j->stop = op_stop_flag(j->op);
		j->cancel = op_cancel_flag(j->op);
		free(name);
		memcpy(id, j->id, sizeof(id)); /* j is the thread's once it runs */
		if (op_id)
			memcpy(op_id, id, sizeof(id));
	}
	log_info("capture started", LOG_STR("event", "capture-started"), LOG_STR("kind", k->what),
		 LOG_UINT("pid", j->c.target.pid), LOG_STR("operation", j->op ? id : NULL),
		 LOG_STR("sink", j->c.egress ? j->c.egress->name : j->c.file ? j->c.file : "response"),
		 LOG_STR("tags", j->c.tags), LOG_STR("peer", j->c.peer[0] ? j->c.peer : NULL),
		 LOG_BOOL("authenticated", j->c.token), LOG_STR("caller", j->c.caller));
	if (!own_sink) {
		to_response(r, j);
		return 0;
	}
	in_background(j);
	if (r) {
		loc = mem_printf("/operations/%s", id);
		httpd_set_header(r, "Location", loc);
		free(loc);
		httpd_send(r, 202, NULL, "", 0);
	}
	return 0;
}
