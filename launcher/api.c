/*
 * api.c - the agent's HTTP routes: /healthz, /readyz (always open), /info,
 * /metrics (always open, like dotnet-monitor's), /processes, /process, /env,
 * /dump, /trace, /livemetrics, /logs, /stacks, /perfmap and /operations
 * (behind the token when there is one).
 *
 * Dumps (dump.h) always come through a pipe the agent owns. Three ways out:
 *  - file (default): into a staging file in the dumps directory that never
 *    has a name (O_TMPFILE, or unlinked at once), capped by --dumps-limit;
 *    the app runs on as soon as it is written, then the file is sent with
 *    sendfile. A finished, failed or abandoned download leaves nothing.
 *  - fifo: straight to the client, chunked; no disk at all, but the app stays
 *    stopped until the client has read the last byte.
 *  - egressProvider=NAME: in the background into the provider's directory,
 *    published by rename; 202 with Location: /operations/{id}.
 * One dump at a time (including its download: it holds staging space); the
 * next gets 429.
 *
 * Traces (trace.h): GET with a profile, or POST with a providers document;
 * streamed as they come, or to an egress provider; each one an operation
 * that DELETE ?stop=true ends with a complete file. At most MAX_TRACES at once.
 * /livemetrics (metrics.h) and /logs (logs.h) are the same kind of job, their
 * session's events turned into text as they arrive (job_read), with limits
 * of their own.
 */
#include "api.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <poll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "dump.h"
#include "egress.h"
#include "fsutil.h"
#include "gcdump.h"
#include "ipc.h"
#include "logs.h"
#include "mem.h"
#include "metrics.h"
#include "ops.h"
#include "profile.h"
#include "stacks.h"
#include "trace.h"

#define STAGING_PREFIX ".diagport-dump-"
#define TAKE_TIMEOUT_MS 5000
#define KEEP_OPERATIONS 100
#define SLOT_WAIT_MS 100
#define ENV_MAX_BYTES (1 << 20)
#define MAX_TRACES 3             /* at once, streamed or egressed: dotnet-monitor's default limit */
#define METRICS_INTERVAL_S 5     /* EventCounterIntervalSec of the Metrics profile (dotnet-monitor's default) */
#define TRACE_CHUNK 65536
#define STACKS_SAMPLE_MS 200 /* long enough for the sample profiler (1 ms) to see every thread */

struct api {
	struct port *port;
	char *socket_path, *dumps_dir, *token;
	pthread_mutex_t mu;
	pthread_cond_t slot_freed;
	bool dumping, fifo_default;
	unsigned traces, live, logging; /* running /trace, /livemetrics, /logs streams, under mu */
	struct metrics *metrics;        /* borrowed; NULL = /metrics turned off */
	unsigned metrics_interval_s;
	bool stacking;   /* a /stacks capture runs, under mu */
	bool heaping;    /* a /gcdump capture runs, under mu */
	unsigned long seq;
	uint64_t dumps_limit;
	const struct egress_fs *egress; /* borrowed */
	size_t n_egress;
	struct ops *ops;
};

/* A dump being streamed to the client (transport=fifo). */
struct stream_dump {
	struct api *a;
	struct dump_job *job;
};

struct api *api_new(const struct api_config *cfg)
{
	struct api *a = mem_zalloc(sizeof(*a));

	a->port = cfg->port;
	a->socket_path = mem_strdup(cfg->socket_path);
	a->dumps_dir = mem_strdup(cfg->dumps_dir);
	a->token = cfg->token ? mem_strdup(cfg->token) : NULL;
	a->fifo_default = cfg->dump_transport && strcmp(cfg->dump_transport, "fifo") == 0;
	a->dumps_limit = cfg->dumps_limit;
	a->egress = cfg->egress;
	a->n_egress = cfg->n_egress;
	a->ops = ops_new(KEEP_OPERATIONS);
	a->metrics = cfg->metrics;
	a->metrics_interval_s = cfg->metrics_interval_s ? cfg->metrics_interval_s : METRICS_DEFAULT_INTERVAL_S;
	pthread_mutex_init(&a->mu, NULL);
	pthread_cond_init(&a->slot_freed, NULL);
	fs_remove_prefixed(a->dumps_dir, STAGING_PREFIX);
	for (size_t i = 0; i < a->n_egress; i++)
		egress_fs_clean(&a->egress[i]);
	return a;
}

void api_free(struct api *a)
{
	if (a == NULL)
		return;
	ops_free(a->ops); /* cancels running egress dumps and waits for them */
	if (a->token) {
		mem_wipe(a->token, strlen(a->token));
		free(a->token);
	}
	free(a->socket_path);
	free(a->dumps_dir);
	pthread_mutex_destroy(&a->mu);
	pthread_cond_destroy(&a->slot_freed);
	free(a);
}

/* Constant-time comparison of the presented token with ours. */
static bool token_ok(const struct api *a, const char *auth)
{
	const char *t;
	size_t n, m;
	unsigned char diff;

	if (auth == NULL || strncasecmp(auth, "Bearer ", 7) != 0)
		return false;
	t = auth + 7;
	n = strlen(t);
	m = strlen(a->token);
	diff = (unsigned char)(n != m);
	for (size_t i = 0; i < m; i++)
		diff |= (unsigned char)(a->token[i] ^ (i < n ? t[i] : 0));
	return diff == 0;
}

/* ---- choosing the process ---- */

static const char *rt_name(const struct port_runtime *p)
{
	const char *cl = p->info.command_line, *sp, *sl;

	if (p->info.assembly && *p->info.assembly)
		return p->info.assembly;
	if (cl == NULL)
		return "";
	sp = strchr(cl, ' ');
	sl = memrchr(cl, '/', sp ? (size_t)(sp - cl) : strlen(cl));
	return sl ? sl + 1 : cl; /* callers copy up to the space */
}

static bool name_matches(const struct port_runtime *p, const char *want)
{
	const char *n = rt_name(p);
	size_t len = strcspn(n, " ");

	return strlen(want) == len && strncmp(n, want, len) == 0;
}

/*
 * The runtime a request means (pid, uid, name; none = the only one). On
 * failure the response has been sent and false is returned.
 */
static bool choose(struct api *a, struct httpd_req *r, struct port_runtime *out)
{
	const char *pid = httpd_query(r, "pid"), *uid = httpd_query(r, "uid"), *name = httpd_query(r, "name");
	struct port_runtime *l;
	size_t n = port_list(a->port, &l), hit = 0, at = 0;
	char *end;
	unsigned long long want_pid = 0;

	if (pid) {
		want_pid = strtoull(pid, &end, 10);
		if (*pid == '\0' || *end != '\0') {
			port_list_free(l, n);
			httpd_problem(r, 400, "Bad Request", "pid '%s' is not a number", pid);
			return false;
		}
	}
	for (size_t i = 0; i < n; i++) {
		char g[37];

		ipc_cookie_guid(l[i].cookie, g);
		if ((pid && l[i].pid != want_pid) || (uid && strcasecmp(uid, g) != 0) || (name && !name_matches(&l[i], name)))
			continue;
		hit++;
		at = i;
	}
	if (hit == 1) {
		*out = l[at];
		memset(&l[at].info, 0, sizeof(l[at].info)); /* moved to *out */
		port_list_free(l, n);
		return true;
	}
	if (hit == 0)
		httpd_problem(r, 400, "Bad Request", n == 0 ? "no .NET process is attached to the agent" :
			      "no attached process matches the given pid/uid/name");
	else {
		struct buf b;

		buf_init(&b, 4096);
		for (size_t i = 0; i < n; i++) {
			char g[37];

			ipc_cookie_guid(l[i].cookie, g);
			buf_printf(&b, "%s pid %llu uid %s name %.*s", i ? ";" : "", (unsigned long long)l[i].pid, g,
				   (int)strcspn(rt_name(&l[i]), " "), rt_name(&l[i]));
		}
		httpd_problem(r, 400, "Bad Request", "%zu processes are attached; choose one with pid, uid or name:%s",
			      n, b.data ? b.data : "");
		buf_free(&b);
	}
	port_list_free(l, n);
	return false;
}

static json_t *identifier(const struct port_runtime *p, bool is_default)
{
	char g[37];
	const char *n = rt_name(p);

	ipc_cookie_guid(p->cookie, g);
	return json_pack("{s:I, s:s, s:s%, s:b}", "pid", (json_int_t)p->pid, "uid", g, "name", n, strcspn(n, " "),
			 "isDefault", is_default);
}

/* ---- routes ---- */

static void route_processes(struct api *a, struct httpd_req *r)
{
	struct port_runtime *l;
	size_t n = port_list(a->port, &l);
	json_t *arr = json_array();

	for (size_t i = 0; i < n; i++)
		json_array_append_new(arr, identifier(&l[i], n == 1));
	port_list_free(l, n);
	httpd_send_json(r, 200, arr);
}

static void route_process(struct api *a, struct httpd_req *r)
{
	struct port_runtime p;
	json_t *o;

	if (!choose(a, r, &p))
		return;
	o = identifier(&p, false);
	json_object_del(o, "isDefault");
	json_object_set_new(o, "commandLine", json_string(p.info.command_line ? p.info.command_line : ""));
	json_object_set_new(o, "operatingSystem", json_string(p.info.os ? p.info.os : ""));
	json_object_set_new(o, "processArchitecture", json_string(p.info.arch ? p.info.arch : ""));
	if (p.info.clr_version)
		json_object_set_new(o, "runtimeVersion", json_string(p.info.clr_version));
	ipc_process_info_free(&p.info);
	httpd_send_json(r, 200, o);
}

static void route_info(struct api *a, struct httpd_req *r)
{
	httpd_send_json(r, 200, json_pack("{s:s, s:n, s:s, s:s}", "version", DP_VERSION, "runtimeVersion",
					  "diagnosticPortMode", "Listen", "diagnosticPortName", a->socket_path));
}

/* Run one command on a fresh connection of runtime p. */
static int command(struct api *a, const struct port_runtime *p, const struct buf *req, struct ipc_header *h,
		   struct buf *pl, int *fd_out, int timeout_ms)
{
	int fd, rc = port_take(a->port, p->cookie, TAKE_TIMEOUT_MS, &fd);

	if (rc != 0)
		return rc;
	rc = ipc_transact(fd, req, h, pl, timeout_ms);
	if (rc == 0 && fd_out) {
		*fd_out = fd;
		return 0;
	}
	close(fd);
	port_release(a->port, p->cookie);
	return rc;
}

static void route_env(struct api *a, struct httpd_req *r)
{
	struct port_runtime p;
	struct ipc_header h;
	struct buf req, pl;
	json_t *o;
	char **vars = NULL;
	size_t n = 0;
	int fd = -1, rc;

	if (!choose(a, r, &p))
		return;
	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, ENV_MAX_BYTES);
	ipc_begin(&req, IPC_SET_PROCESS, IPC_PROCESS_ENV);
	ipc_end(&req);
	rc = command(a, &p, &req, &h, &pl, &fd, 10000);
	if (rc == 0) {
		struct ipc_reader rd = { (const uint8_t *)pl.data, (const uint8_t *)pl.data + pl.len };
		uint32_t incoming = 0;

		uint32_t hr = 0;
		char *text = NULL;

		if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_ERROR &&
		    ipc_parse_error((const uint8_t *)pl.data, pl.len, &hr, &text) == 0 && hr == IPC_E_UNKNOWN_COMMAND)
			rc = DP_EUNSUPPORTED; /* a runtime older than .NET 5 */
		else if (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK || ipc_get_u32(&rd, &incoming) != 0 ||
			 incoming > ENV_MAX_BYTES)
			rc = DP_ESYNTAX;
		free(text);
		buf_reset(&pl);
		if (rc == 0) {
			char *tmp = mem_alloc(incoming ? incoming : 1);

			rc = ipc_read_full(fd, tmp, incoming, 10000);
			if (rc == 0)
				rc = ipc_parse_env((const uint8_t *)tmp, incoming, &vars, &n);
			free(tmp);
		}
		close(fd);
		port_release(a->port, p.cookie);
	}
	if (rc == DP_EUNSUPPORTED) {
		httpd_problem(r, 400, "Bad Request", "pid %llu runs a .NET older than 5.0, which cannot report its "
			      "environment (the runtime does not know ProcessEnvironment)", (unsigned long long)p.pid);
	} else if (rc != 0) {
		httpd_problem(r, 500, "Internal Server Error", "could not read the environment of pid %llu: %s",
			      (unsigned long long)p.pid, err_str(rc));
	} else {
		o = json_object();
		for (size_t i = 0; i < n; i++) {
			char *eq = strchr(vars[i], '=');

			if (eq) {
				*eq = '\0';
				json_object_set_new(o, vars[i], json_string(eq + 1));
			}
		}
		httpd_send_json(r, 200, o);
	}
	ipc_env_free(vars, n);
	ipc_process_info_free(&p.info);
	buf_free(&req);
	buf_free(&pl);
}

/* ---- dumps ---- */

static void dump_slot_free(void *ctx)
{
	struct api *a = ctx;

	pthread_mutex_lock(&a->mu);
	a->dumping = false;
	pthread_cond_broadcast(&a->slot_freed);
	pthread_mutex_unlock(&a->mu);
}

/* Take the one dump slot and name a fresh pipe path; false (and a 429 sent) when a dump is in progress. */
static bool dump_slot(struct api *a, struct httpd_req *r, const struct port_runtime *p, char **fifo_path)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_nsec += SLOT_WAIT_MS * 1000000L;
	if (until.tv_nsec >= 1000000000L) {
		until.tv_sec++;
		until.tv_nsec -= 1000000000L;
	}
	pthread_mutex_lock(&a->mu);
	/* A client that asks again the moment its download ends can be quicker than the thread that sent it is
	 * to give the slot back: wait that moment out before saying 429. */
	while (a->dumping && pthread_cond_timedwait(&a->slot_freed, &a->mu, &until) == 0)
		;
	if (a->dumping) {
		pthread_mutex_unlock(&a->mu);
		httpd_problem(r, 429, "Too Many Requests", "a dump is already being taken or downloaded; try again "
			      "when it is done");
		return false;
	}
	a->dumping = true;
	a->seq++;
	*fifo_path = mem_printf("%s/%s%llu-%lu-%ld", a->dumps_dir, STAGING_PREFIX, (unsigned long long)p->pid, a->seq,
				(long)getpid());
	pthread_mutex_unlock(&a->mu);
	return true;
}

static void dump_problem(struct httpd_req *r, int rc, const struct err_msg *em)
{
	if (rc == DP_ETOOBIG)
		httpd_problem(r, 507, "Insufficient Storage", "%s", em->text);
	else
		httpd_problem(r, 500, "Internal Server Error", "%s", em->text);
}

/* The staging file: unnamed (O_TMPFILE) where the filesystem allows, else created and unlinked at once. */
static int staging_open(struct api *a, const char *fifo_path, struct err_msg *em)
{
	char *named;
	int fd = open(a->dumps_dir, O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);

	if (fd >= 0)
		return fd;
	named = mem_printf("%s.stage", fifo_path);
	fd = open(named, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
	if (fd >= 0)
		unlink(named);
	else
		err_set(em, DP_EIO, "cannot create a staging file in %s: %s", a->dumps_dir, strerror(errno));
	free(named);
	return fd;
}

static void stream_free(void *ctx)
{
	struct stream_dump *s = ctx;

	dump_free(s->job);
	dump_slot_free(s->a);
	free(s);
}

static long stream_read(void *ctx, char *out, size_t max)
{
	return dump_read(((struct stream_dump *)ctx)->job, out, max);
}

/* transport=fifo: createdump's bytes go to the client as they come; the app is stopped until the last one. */
static void dump_stream(struct api *a, struct httpd_req *r, const struct port_runtime *p, int type, char *fifo)
{
	struct stream_dump *s = mem_zalloc(sizeof(*s));
	struct err_msg em;
	char fname[64];
	int rc = dump_start(a->port, p->cookie, fifo, type, &s->job, &em);

	free(fifo);
	if (rc != 0) {
		free(s);
		dump_slot_free(a);
		dump_problem(r, rc, &em);
		return;
	}
	s->a = a;
	dump_filename(fname, sizeof(fname));
	httpd_send_stream(r, 200, "application/octet-stream", stream_read, stream_free, s, fname);
}

/* transport=file: createdump's bytes go into a staging file (capped), which is then sent with sendfile. */
static void dump_staged(struct api *a, struct httpd_req *r, const struct port_runtime *p, int type, char *fifo)
{
	struct dump_job *j = NULL;
	struct err_msg em;
	uint64_t n = 0;
	char fname[64];
	int fd = staging_open(a, fifo, &em), rc = fd < 0 ? DP_EIO : 0;

	if (rc == 0)
		rc = dump_start(a->port, p->cookie, fifo, type, &j, &em);
	if (rc == 0)
		rc = dump_copy(j, fd, a->dumps_limit, NULL, &n, &em);
	dump_free(j); /* the app runs on from here; the download can take its time */
	free(fifo);
	if (rc != 0) {
		if (fd >= 0)
			close(fd); /* the space is freed with it: the file never had a name */
		dump_slot_free(a);
		dump_problem(r, rc, &em);
		return;
	}
	dump_filename(fname, sizeof(fname));
	httpd_on_done(r, dump_slot_free, a); /* one dump at a time includes its download: it holds staging space */
	httpd_send_fd(r, 200, "application/octet-stream", fd, n, fname);
}

/* A dump sent to an egress provider, in the background. */
struct egress_job {
	struct api *a;
	struct op *op;
	const struct egress_fs *prov;
	uint8_t cookie[16];
	int type;
	char *fifo;
};

static void *egress_main(void *arg)
{
	struct egress_job *e = arg;
	struct dump_job *j = NULL;
	struct err_msg em = { "" };
	char *tmp = NULL, *final = NULL, fname[64];
	uint64_t n;
	int fd = -1, rc = egress_fs_open(e->prov, e->fifo + strlen(e->a->dumps_dir) + 1, &fd, &tmp, &em);

	if (rc == 0)
		rc = dump_start(e->a->port, e->cookie, e->fifo, e->type, &j, &em);
	if (rc == 0)
		rc = dump_copy(j, fd, 0, op_cancel_flag(e->op), &n, &em);
	dump_free(j);
	if (rc == 0) {
		dump_filename(fname, sizeof(fname));
		rc = egress_fs_publish(e->prov, fd, tmp, fname, &final, &em);
	} else if (tmp) {
		egress_fs_discard(fd, tmp);
	}
	dump_slot_free(e->a);
	op_finish(e->a->ops, e->op, rc, final, em.text);
	free(tmp);
	free(final);
	free(e->fifo);
	free(e);
	return NULL;
}

/* An operation for a capture on runtime p (egress provider prov or none), its id in id. */
static struct op *op_for(struct api *a, struct httpd_req *r, const struct port_runtime *p, const struct egress_fs *prov,
			 bool stoppable, char id[37])
{
	const char *name = rt_name(p);
	char g[37], *short_name = mem_strndup(name, strcspn(name, " "));
	struct op *op;

	ipc_cookie_guid(p->cookie, g);
	op = ops_add(a->ops, prov ? prov->name : NULL, p->pid, g, short_name, httpd_query(r, "tags"), stoppable, id);
	free(short_name);
	return op;
}

/* Run fn(arg) on a detached thread of its own and answer 202 with the Location of operation id. */
static void in_background(struct httpd_req *r, void *(*fn)(void *), void *arg, const char *id)
{
	pthread_attr_t attr;
	pthread_t t;
	char *loc;

	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&t, &attr, fn, arg) != 0)
		DP_FATAL("cannot start a thread for operation %s", id);
	pthread_attr_destroy(&attr);
	loc = mem_printf("/operations/%s", id);
	httpd_set_header(r, "Location", loc);
	free(loc);
	httpd_send(r, 202, NULL, "", 0);
}

static void dump_egress(struct api *a, struct httpd_req *r, const struct port_runtime *p, int type, char *fifo,
			const struct egress_fs *prov)
{
	struct egress_job *e = mem_zalloc(sizeof(*e));
	char id[37];

	e->a = a;
	e->prov = prov;
	e->type = type;
	e->fifo = fifo;
	memcpy(e->cookie, p->cookie, 16);
	e->op = op_for(a, r, p, prov, false, id);
	in_background(r, egress_main, e, id);
}

static const struct egress_fs *find_egress(struct api *a, const char *name)
{
	for (size_t i = 0; i < a->n_egress; i++)
		if (strcasecmp(a->egress[i].name, name) == 0)
			return &a->egress[i];
	return NULL;
}

static void route_dump(struct api *a, struct httpd_req *r)
{
	struct port_runtime p;
	int type = dump_type(httpd_query(r, "type"));
	const char *tr = httpd_query(r, "transport"), *eg = httpd_query(r, "egressProvider");
	const struct egress_fs *prov = NULL;
	bool fifo = a->fifo_default;
	char *path;

	if (type < 0) {
		httpd_problem(r, 400, "Bad Request", "type '%s' is not Mini, Triage, WithHeap or Full",
			      httpd_query(r, "type"));
		return;
	}
	if (tr && strcmp(tr, "fifo") != 0 && strcmp(tr, "file") != 0) {
		httpd_problem(r, 400, "Bad Request", "transport '%s' is not file or fifo", tr);
		return;
	}
	if (tr)
		fifo = strcmp(tr, "fifo") == 0;
	if (eg && (prov = find_egress(a, eg)) == NULL) {
		struct buf b;

		buf_init(&b, 4096);
		for (size_t i = 0; i < a->n_egress; i++)
			buf_printf(&b, "%s%s", i ? ", " : "", a->egress[i].name);
		httpd_problem(r, 400, "Bad Request", "there is no egress provider '%s'; %s%s", eg,
			      a->n_egress ? "configured: " : "none is configured (Egress:FileSystem:NAME:DirectoryPath)",
			      b.data ? b.data : "");
		buf_free(&b);
		return;
	}
	if (!choose(a, r, &p))
		return;
	if (dump_slot(a, r, &p, &path)) {
		if (prov)
			dump_egress(a, r, &p, type, path, prov);
		else if (fifo)
			dump_stream(a, r, &p, type, path);
		else
			dump_staged(a, r, &p, type, path);
	}
	ipc_process_info_free(&p.info);
}

/* ---- perf maps ---- */

/*
 * POST /perfmap?type=PerfMap|JitDump|All: EnablePerfMap, so that `perf` can
 * name JIT-compiled frames (the runtime writes /tmp/perf-PID.map, or
 * /tmp/jit-PID.dump, or both, in its own filesystem);
 * DELETE /perfmap: DisablePerfMap.
 */
static void route_perfmap(struct api *a, struct httpd_req *r, bool enable)
{
	static const char *const types[] = { NULL, "All", "JitDump", "PerfMap" };
	const char *t = httpd_query(r, "type");
	struct port_runtime p;
	struct ipc_header h;
	struct buf req, pl;
	uint32_t type = 3, hr = 0;
	char *text = NULL;
	int rc;

	for (uint32_t i = 1; t && i < 4; i++)
		if (strcasecmp(t, types[i]) == 0)
			type = i;
	if (enable && t && strcasecmp(t, types[type]) != 0) {
		httpd_problem(r, 400, "Bad Request", "type '%.32s' is not PerfMap, JitDump or All", t);
		return;
	}
	if (!choose(a, r, &p))
		return;
	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, IPC_MAX_MESSAGE);
	ipc_begin(&req, IPC_SET_PROCESS, enable ? IPC_PROCESS_PERFMAP_ENABLE : IPC_PROCESS_PERFMAP_DISABLE);
	if (enable)
		ipc_put_u32(&req, type);
	ipc_end(&req);
	rc = command(a, &p, &req, &h, &pl, NULL, 10000);
	if (rc != 0) {
		httpd_problem(r, 500, "Internal Server Error", "pid %llu: no answer from the runtime: %s",
			      (unsigned long long)p.pid, err_str(rc));
	} else if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK) {
		json_t *files = json_array();
		char f[64];

		if (enable && type != 2) {
			snprintf(f, sizeof(f), "/tmp/perf-%llu.map", (unsigned long long)p.pid);
			json_array_append_new(files, json_string(f));
		}
		if (enable && type != 3) {
			snprintf(f, sizeof(f), "/tmp/jit-%llu.dump", (unsigned long long)p.pid);
			json_array_append_new(files, json_string(f));
		}
		httpd_send_json(r, 200, json_pack("{s:I, s:s, s:o}", "pid", (json_int_t)p.pid, "perfMap",
						  enable ? types[type] : "Disabled", "files", files));
	} else if (ipc_parse_error((const uint8_t *)pl.data, pl.len, &hr, &text) == 0 &&
		   (hr == IPC_E_UNKNOWN_COMMAND || hr == IPC_E_NOTSUPPORTED)) {
		httpd_problem(r, 400, "Bad Request", "pid %llu cannot write perf maps on request: %s (it needs .NET 8 "
			      "or later, and not NativeAOT)", (unsigned long long)p.pid, ipc_hresult_str(hr));
	} else {
		httpd_problem(r, 500, "Internal Server Error", "pid %llu refused %sPerfMap: 0x%08x (%s)",
			      (unsigned long long)p.pid, enable ? "Enable" : "Disable", hr, ipc_hresult_str(hr));
	}
	free(text);
	buf_free(&req);
	buf_free(&pl);
	ipc_process_info_free(&p.info);
}

/* ---- traces ---- */

/* A trace being relayed, to the client (stream) or to an egress provider (thread). */
struct trace_job {
	struct api *a;
	struct op *op;
	struct trace_session *s;
	const struct egress_fs *prov;
	uint64_t pid;
	unsigned *slot; /* the running count this job holds one of (traces, live metrics, logs) */
	const char *ext; /* of the file name: "nettrace", "metrics.json", ... */
	bool ended; /* the stream reached its end marker and went to the client whole */
	/* a converted stream (/livemetrics, /logs): the events become text in conv; the nettrace bytes are dropped */
	bool converting, conv_done;
	struct buf conv;
	size_t conv_off;
	char *scratch;
	void *cctx;
	void (*cfree)(void *cctx);
	void (*cflush)(void *cctx); /* after each piece of the stream, and at its end; may be NULL */
};

static void slot_free(struct api *a, unsigned *slot)
{
	pthread_mutex_lock(&a->mu);
	(*slot)--;
	pthread_mutex_unlock(&a->mu);
}

/* One of `max` slots of *slot, or false (429 sent, naming what). */
static bool slot_take(struct api *a, struct httpd_req *r, unsigned *slot, unsigned max, const char *what)
{
	bool ok;

	pthread_mutex_lock(&a->mu);
	ok = *slot < max;
	if (ok)
		(*slot)++;
	pthread_mutex_unlock(&a->mu);
	if (!ok)
		httpd_problem(r, 429, "Too Many Requests", "%u %s already running; try again when one is done", max, what);
	return ok;
}

/* The job's next bytes: the stream itself, or the text its events became. Same contract as trace_read. */
static long job_read(struct trace_job *j, char *out, size_t max)
{
	if (!j->converting)
		return trace_read(j->s, out, max);
	for (;;) {
		long n;

		if (j->conv_off < j->conv.len) {
			size_t k = j->conv.len - j->conv_off;

			if (k > max)
				k = max;
			memcpy(out, j->conv.data + j->conv_off, k);
			j->conv_off += k;
			return (long)k;
		}
		buf_reset(&j->conv);
		j->conv_off = 0;
		if (j->conv_done)
			return trace_error(j->s)[0] ? -1 : 0;
		n = trace_read(j->s, j->scratch, TRACE_CHUNK);
		if (j->cflush)
			j->cflush(j->cctx);
		if (n <= 0)
			j->conv_done = true; /* what the last events became goes out first */
	}
}

/* Finish the operation from how the stream ended; free the job. */
static void trace_job_end(struct trace_job *j, int rc, const char *location, const char *error)
{
	if (rc == 0 && trace_error(j->s)[0])
		rc = DP_EIO;
	if (rc != 0 && atomic_load(op_cancel_flag(j->op)))
		rc = DP_ECANCELED;
	slot_free(j->a, j->slot); /* before the operation ends: see whole_egress_main */
	op_finish(j->a->ops, j->op, rc, location, rc == DP_ECANCELED ? "cancelled" : error ? error : trace_error(j->s));
	trace_free(j->s);
	if (j->cfree)
		j->cfree(j->cctx);
	buf_free(&j->conv);
	free(j->scratch);
	free(j);
}

static long trace_stream_read(void *ctx, char *out, size_t max)
{
	struct trace_job *j = ctx;
	long n;

	if (atomic_load(op_cancel_flag(j->op)))
		return -1; /* cancelled: the client sees the body cut off */
	n = job_read(j, out, max);
	j->ended = n == 0;
	return n;
}

static void trace_stream_free(void *ctx)
{
	struct trace_job *j = ctx;
	char why[128];

	if (trace_error(j->s)[0] || j->ended) {
		trace_job_end(j, j->ended ? 0 : DP_EIO, NULL, NULL);
		return;
	}
	snprintf(why, sizeof(why), "the client went away after %llu bytes; the session was stopped",
		 (unsigned long long)trace_bytes(j->s));
	trace_job_end(j, DP_EIO, NULL, why);
}

/* YYYYMMDD_HHMMSS_PID.EXT (dotnet-monitor's artifact names), UTC. */
static void trace_filename(char *out, size_t n, uint64_t pid, const char *ext)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, n, "%Y%m%d_%H%M%S", &tm);
	snprintf(out + strlen(out), n - strlen(out), "_%llu.%s", (unsigned long long)pid, ext);
}

static void *trace_egress_main(void *arg)
{
	struct trace_job *j = arg;
	struct err_msg em = { "" };
	char *tmp = NULL, *final = NULL, name[64], *buf = mem_alloc(TRACE_CHUNK);
	int fd = -1, rc = egress_fs_open(j->prov, "trace", &fd, &tmp, &em);
	long n = 0;

	while (rc == 0 && !atomic_load(op_cancel_flag(j->op)) && (n = job_read(j, buf, TRACE_CHUNK)) > 0)
		if (fs_write_all(fd, buf, (size_t)n) != 0)
			rc = err_set(&em, DP_EIO, "writing the trace to %s: %s", tmp, strerror(errno));
	if (rc == 0 && (n < 0 || atomic_load(op_cancel_flag(j->op))))
		rc = atomic_load(op_cancel_flag(j->op)) ? DP_ECANCELED : err_set(&em, DP_EIO, "%s", trace_error(j->s));
	if (rc == 0) {
		trace_filename(name, sizeof(name), j->pid, j->ext);
		rc = egress_fs_publish(j->prov, fd, tmp, name, &final, &em);
	} else if (tmp) {
		egress_fs_discard(fd, tmp);
	}
	free(buf);
	trace_job_end(j, rc, final, em.text[0] ? em.text : NULL);
	free(tmp);
	free(final);
	return NULL;
}

/* durationSeconds: 30 when absent, -1 (until stopped) or 0..2^31-1. False with a 400 sent. */
static bool trace_duration(struct httpd_req *r, long long *ms)
{
	const char *d = httpd_query(r, "durationSeconds");
	char *end;
	long long v;

	if (d == NULL) {
		*ms = 30000;
		return true;
	}
	errno = 0;
	v = strtoll(d, &end, 10);
	if (*d == '\0' || *end != '\0' || errno != 0 || v < -1 || v > 2147483647LL) {
		httpd_problem(r, 400, "Bad Request", "durationSeconds '%.32s' is not -1 or a whole number of seconds", d);
		return false;
	}
	*ms = v < 0 ? -1 : v * 1000;
	return true;
}

/* The egress provider named by egressProvider (NULL when none); false with a 400 sent when there is no such one. */
static bool egress_param(struct api *a, struct httpd_req *r, const struct egress_fs **prov)
{
	const char *eg = httpd_query(r, "egressProvider");

	*prov = NULL;
	if (eg && (*prov = find_egress(a, eg)) == NULL) {
		httpd_problem(r, 400, "Bad Request", "there is no egress provider '%.64s'", eg);
		return false;
	}
	return true;
}

/* ---- whole artifacts: stacks, CPU profiles, GC heap snapshots ---- */

/*
 * An artifact made whole in memory by render, then sent back in one answer
 * or written to an egress provider by a thread of its own (202 and an
 * operation). release gives back the capture's slot.
 */
struct whole_job {
	struct api *a;
	struct op *op; /* NULL for a capture sent back that no operation lists */
	const struct egress_fs *prov;
	struct port_runtime p;
	const char *what; /* "stacks", "profile", "gcdump": the egress temp name and messages */
	int kind;
	size_t top;
	long long ms;
	int (*render)(struct whole_job *j, struct buf *out, const char **ext, const char **ctype, struct err_msg *em);
	bool *flag;     /* the one-at-a-time flag held (stacks, gcdump), or */
	unsigned *slot; /* one of the counted slots held (traces) */
};

/* Give back the capture's slot (under the API's mutex). */
static void whole_release(struct whole_job *j)
{
	pthread_mutex_lock(&j->a->mu);
	if (j->flag)
		*j->flag = false;
	else
		(*j->slot)--;
	pthread_mutex_unlock(&j->a->mu);
}

static void whole_free(struct whole_job *j)
{
	whole_release(j);
	ipc_process_info_free(&j->p.info);
	free(j);
}

static void *whole_egress_main(void *arg)
{
	struct whole_job *j = arg;
	struct err_msg em = { "" };
	struct buf out;
	const char *ext = "", *ctype = "";
	char name[80], *tmp = NULL, *final = NULL;
	int fd = -1, rc;

	buf_init(&out, 0);
	rc = j->render(j, &out, &ext, &ctype, &em);
	if (rc == 0)
		rc = egress_fs_open(j->prov, j->what, &fd, &tmp, &em);
	if (rc == 0 && fs_write_all(fd, out.data ? out.data : "", out.len) != 0) {
		rc = err_set(&em, DP_EIO, "writing the %s to %s: %s", j->what, tmp, strerror(errno));
		egress_fs_discard(fd, tmp);
	} else if (rc == 0) {
		trace_filename(name, sizeof(name), j->p.pid, ext);
		rc = egress_fs_publish(j->prov, fd, tmp, name, &final, &em);
	}
	/* the slot goes back first: once the operation is finished, a client may ask again, and api_free may run */
	whole_release(j);
	op_finish(j->a->ops, j->op, rc, final, rc ? em.text : NULL);
	buf_free(&out);
	free(tmp);
	free(final);
	ipc_process_info_free(&j->p.info);
	free(j);
	return NULL;
}

/*
 * Take j (its slot held, p owned) to its end: with an egress provider, an
 * operation, a thread and 202 with Location; else rendered now and sent
 * (inline: shown by a browser; else an attachment), its operation (when
 * stoppable) finished.
 */
static void whole_run(struct api *a, struct httpd_req *r, struct whole_job *j, bool stoppable, bool inline_)
{
	struct err_msg em;
	struct buf out;
	const char *ext = "", *ctype = "";
	char fname[80], *disp, id[37];
	int rc;

	if (j->prov || stoppable)
		j->op = op_for(a, r, &j->p, j->prov, stoppable, id);
	if (j->prov) {
		in_background(r, whole_egress_main, j, id);
		return;
	}
	buf_init(&out, 0);
	rc = j->render(j, &out, &ext, &ctype, &em);
	if (j->op)
		op_finish(a->ops, j->op, rc, NULL, rc ? em.text : NULL);
	if (rc != 0) {
		httpd_problem(r, rc == DP_EREMOTE || rc == DP_EUNSUPPORTED ? 502 : 500,
			      rc == DP_EREMOTE || rc == DP_EUNSUPPORTED ? "Bad Gateway" : "Internal Server Error",
			      "pid %llu: %s", (unsigned long long)j->p.pid, em.text);
	} else {
		trace_filename(fname, sizeof(fname), j->p.pid, ext);
		disp = mem_printf("%s; filename=\"%s\"", inline_ ? "inline" : "attachment", fname);
		httpd_set_header(r, "Content-Disposition", disp);
		free(disp);
		httpd_send(r, 200, ctype, out.data ? out.data : "", out.len);
	}
	buf_free(&out);
	whole_free(j);
}

/* A new job for p (taken over: its info is freed with the job), holding *flag or one of *slot. */
static struct whole_job *whole_new(struct api *a, struct port_runtime *p, const struct egress_fs *prov, const char *what,
				   int (*render)(struct whole_job *, struct buf *, const char **, const char **,
						 struct err_msg *),
				   bool *flag, unsigned *slot)
{
	struct whole_job *j = mem_zalloc(sizeof(*j));

	j->a = a;
	j->p = *p;
	j->prov = prov;
	j->what = what;
	j->render = render;
	j->flag = flag;
	j->slot = slot;
	return j;
}

/* A one-at-a-time capture (*flag under mu), or false with the 429 sent. */
static bool flag_take(struct api *a, struct httpd_req *r, bool *flag, const char *what)
{
	bool busy;

	pthread_mutex_lock(&a->mu);
	busy = *flag;
	*flag = true;
	pthread_mutex_unlock(&a->mu);
	if (busy)
		httpd_problem(r, 429, "Too Many Requests", "%s already being taken; try again when that is done", what);
	return !busy;
}

enum { STACKS_TEXT, STACKS_JSON, STACKS_SPEEDSCOPE };

static int stacks_render(struct whole_job *j, struct buf *out, const char **ext, const char **ctype, struct err_msg *em)
{
	static const char *const exts[] = { "stacks.txt", "stacks.json", "stacks.speedscope.json" };
	static const char *const ctypes[] = { "text/plain; charset=utf-8", "application/json",
					      "application/speedscope+json" };
	struct stacks *st = NULL;
	int rc = stacks_capture(j->a->port, j->p.cookie, STACKS_SAMPLE_MS, &st, em);

	if (rc != 0)
		return rc;
	if (j->kind == STACKS_JSON) {
		char *t = json_dumps(stacks_json(st), JSON_COMPACT | JSON_PRESERVE_ORDER);

		buf_puts(out, t ? t : "");
		free(t);
	} else if (j->kind == STACKS_SPEEDSCOPE) {
		stacks_speedscope(st, out);
	} else {
		stacks_text(st, out);
	}
	*ext = exts[j->kind];
	*ctype = ctypes[j->kind];
	stacks_free(st);
	return 0;
}

/* GET /stacks[?format=text|json|speedscope][&egressProvider=]: every managed thread's stack (stacks.h). */
static void route_stacks(struct api *a, struct httpd_req *r)
{
	const char *accept = httpd_header(r, "Accept"), *f = httpd_query(r, "format");
	const struct egress_fs *prov;
	struct port_runtime p;
	struct whole_job *j;
	int kind = STACKS_TEXT;

	if (f)
		kind = strcasecmp(f, "json") == 0	? STACKS_JSON :
		       strcasecmp(f, "speedscope") == 0 ? STACKS_SPEEDSCOPE :
		       strcasecmp(f, "text") == 0	? STACKS_TEXT :
							  -1;
	else if (accept && strstr(accept, "application/speedscope+json"))
		kind = STACKS_SPEEDSCOPE;
	else if (accept && strstr(accept, "application/json"))
		kind = STACKS_JSON;
	if (kind < 0) {
		httpd_problem(r, 400, "Bad Request", "format '%.32s' is not text, json or speedscope", f);
		return;
	}
	if (!egress_param(a, r, &prov) || !choose(a, r, &p))
		return;
	if (!flag_take(a, r, &a->stacking, "stacks are")) {
		ipc_process_info_free(&p.info);
		return;
	}
	j = whole_new(a, &p, prov, "stacks", stacks_render, &a->stacking, NULL);
	j->kind = kind;
	whole_run(a, r, j, false, kind != STACKS_SPEEDSCOPE);
}

/* A trace as a CPU profile (format=folded|speedscope|flamegraph): sampled, aggregated, named. */
static int profile_render(struct whole_job *j, struct buf *out, const char **ext, const char **ctype,
			  struct err_msg *em)
{
	static const char *const exts[] = { "folded.txt", "speedscope.json", "svg" };
	static const char *const ctypes[] = { "text/plain; charset=utf-8", "application/json", "image/svg+xml" };
	struct profile *prof = NULL;
	char title[96];
	int rc = profile_capture(j->a->port, j->p.cookie, j->ms, op_stop_flag(j->op), &prof, em);

	if (rc != 0)
		return atomic_load(op_cancel_flag(j->op)) ? err_set(em, DP_ECANCELED, "cancelled") : rc;
	if (atomic_load(op_cancel_flag(j->op))) {
		profile_free(prof);
		return err_set(em, DP_ECANCELED, "cancelled");
	}
	snprintf(title, sizeof(title), "CPU, pid %llu", (unsigned long long)j->p.pid);
	profile_write(prof, (enum profile_format)j->kind, title, out);
	*ext = exts[j->kind];
	*ctype = ctypes[j->kind];
	profile_free(prof);
	return 0;
}

enum { GCD_TEXT, GCD_JSON, GCD_NETTRACE };

static int gcdump_render(struct whole_job *j, struct buf *out, const char **ext, const char **ctype, struct err_msg *em)
{
	struct gcdump *g = NULL;
	int rc = gcdump_capture(j->a->port, j->p.cookie, j->p.pid, j->kind == GCD_NETTRACE ? out : NULL, &g, em);

	if (rc != 0)
		return rc;
	if (j->kind == GCD_TEXT) {
		gcdump_text(g, j->top, out);
		*ext = "gcdump.txt";
		*ctype = "text/plain; charset=utf-8";
	} else if (j->kind == GCD_JSON) {
		char *t = json_dumps(gcdump_json(g, j->top), JSON_COMPACT | JSON_PRESERVE_ORDER);

		buf_puts(out, t ? t : "");
		free(t);
		*ext = "gcdump.json";
		*ctype = "application/json";
	} else {
		*ext = "gcdump.nettrace";
		*ctype = "application/octet-stream";
	}
	gcdump_free(g);
	return 0;
}

/* GET /gcdump?pid=&format=stats|nettrace[&top=N][&egressProvider=]: a GC heap snapshot (gcdump.h). */
static void route_gcdump(struct api *a, struct httpd_req *r)
{
	const char *f = httpd_query(r, "format"), *accept = httpd_header(r, "Accept"), *top_s = httpd_query(r, "top");
	const struct egress_fs *prov;
	struct port_runtime p;
	struct whole_job *j;
	size_t top = 0;
	int kind;

	if (f == NULL || strcasecmp(f, "gcdump") == 0) {
		httpd_problem(r, 501, "Not Implemented", "this agent does not write the .gcdump file format yet: "
			      "format=stats gives the per-type table of the live heap, format=nettrace the heap "
			      "snapshot's events (`dotnet-gcdump convert FILE` turns them into a .gcdump)");
		return;
	}
	if (strcasecmp(f, "stats") == 0)
		kind = accept && strstr(accept, "application/json") ? GCD_JSON : GCD_TEXT;
	else if (strcasecmp(f, "nettrace") == 0)
		kind = GCD_NETTRACE;
	else {
		httpd_problem(r, 400, "Bad Request", "format '%.32s' is not stats or nettrace", f);
		return;
	}
	if (top_s) {
		char *end;
		unsigned long v = strtoul(top_s, &end, 10);

		if (*top_s < '0' || *top_s > '9' || *end || v > 1000000) {
			httpd_problem(r, 400, "Bad Request", "top '%.32s' is not a count of types (0 = all)", top_s);
			return;
		}
		top = v;
	}
	if (!egress_param(a, r, &prov) || !choose(a, r, &p))
		return;
	if (!flag_take(a, r, &a->heaping, "a GC heap snapshot is")) {
		ipc_process_info_free(&p.info);
		return;
	}
	j = whole_new(a, &p, prov, "gcdump", gcdump_render, &a->heaping, NULL);
	j->kind = kind;
	j->top = top;
	whole_run(a, r, j, false, kind != GCD_NETTRACE);
}

/* A job for a capture on runtime p (its operation added; id filled), holding one of *slot. */
static struct trace_job *job_new(struct api *a, struct httpd_req *r, const struct port_runtime *p,
				 const struct egress_fs *prov, unsigned *slot, const char *ext, char id[37])
{
	struct trace_job *j = mem_zalloc(sizeof(*j));

	j->a = a;
	j->slot = slot;
	j->ext = ext;
	j->prov = prov;
	j->pid = p->pid;
	j->op = op_for(a, r, p, prov, true, id);
	return j;
}

/*
 * Start the job's session (its events also to cb with ctx, when cb is set)
 * and answer: 202 with Location and a thread writing to the egress provider,
 * or 200 streamed to the client. On failure the job ends and the answer
 * names why.
 */
static void job_run(struct api *a, struct httpd_req *r, struct trace_job *j, const struct port_runtime *p,
		    const struct trace_config *cfg, long long ms, const struct nettrace_callbacks *cb, void *ctx,
		    const char *id, const char *ctype)
{
	struct err_msg em;
	char fname[80];
	int rc = trace_start_cb(a->port, p->cookie, cfg, ms, op_stop_flag(j->op), cb, ctx, &j->s, &em);

	if (rc != 0) {
		trace_job_end(j, rc, NULL, em.text);
		httpd_problem(r, rc == DP_EREMOTE || rc == DP_EUNSUPPORTED ? 502 : 500,
			      rc == DP_EREMOTE || rc == DP_EUNSUPPORTED ? "Bad Gateway" : "Internal Server Error",
			      "pid %llu: %s", (unsigned long long)p->pid, em.text);
		return;
	}
	if (j->prov) {
		in_background(r, trace_egress_main, j, id);
		return;
	}
	trace_filename(fname, sizeof(fname), p->pid, j->ext);
	httpd_send_stream(r, 200, ctype, trace_stream_read, trace_stream_free, j, fname);
}

/* Make j a converted stream: its text goes to j->conv, from where job_read serves it. */
static void job_convert(struct trace_job *j, void *cctx, void (*cfree)(void *))
{
	j->converting = true;
	buf_init(&j->conv, 0);
	j->scratch = mem_alloc(TRACE_CHUNK);
	j->cctx = cctx;
	j->cfree = cfree;
}

static void live_free(void *l)
{
	metrics_live_free(l);
}

static void logs_conv_free(void *l)
{
	logs_free(l);
}

static void logs_conv_flush(void *l)
{
	logs_flush(l);
}


/* GET /livemetrics (the default counters) or POST with an EventMetricsConfiguration: json-seq records. */
static void route_livemetrics(struct api *a, struct httpd_req *r)
{
	struct metrics_selection sel = { 0 };
	struct trace_config cfg = { 0 };
	const struct egress_fs *prov;
	struct port_runtime p;
	struct trace_job *j;
	struct err_msg em;
	long long ms;
	size_t blen;
	const char *body = httpd_body(r, &blen);
	char id[37], client[64];
	int rc;

	if (!trace_duration(r, &ms) || !egress_param(a, r, &prov))
		return;
	if (strcmp(httpd_method(r), "POST") == 0)
		rc = metrics_selection_json(body, blen, &sel, &em);
	else
		rc = (metrics_selection_defaults(&sel), 0);
	if (rc != 0) {
		httpd_problem(r, 400, "Bad Request", "%s", em.text);
		return;
	}
	if (!choose(a, r, &p)) {
		metrics_selection_free(&sel);
		return;
	}
	if (!slot_take(a, r, &a->live, MAX_TRACES, "live metrics streams are"))
		goto out;
	j = job_new(a, r, &p, prov, &a->live, "metrics.json", id);
	snprintf(client, sizeof(client), "diagport-live-%s", id);
	if (metrics_trace_config(&sel, a->metrics_interval_s, client, &cfg, &em) != 0) {
		trace_job_end(j, DP_EINVAL, NULL, em.text);
		httpd_problem(r, 400, "Bad Request", "%s", em.text);
		goto out;
	}
	job_convert(j, NULL, live_free);
	j->cctx = metrics_live_new(&sel, &j->conv);
	job_run(a, r, j, &p, &cfg, ms, &metrics_live_callbacks, j->cctx, id, "application/json-seq");
out:
	metrics_selection_free(&sel);
	trace_config_free(&cfg);
	ipc_process_info_free(&p.info);
}

/* GET /logs?level=... (or the app's filters) or POST with a LogsConfiguration; the format by Accept. */
static void route_logs(struct api *a, struct httpd_req *r)
{
	static const char *const ctypes[] = { "application/x-ndjson", "application/json-seq", "text/plain; charset=utf-8" };
	static const char *const exts[] = { "log.json", "log.json", "txt" };
	struct logs_filter f = { .level = -1, .use_app_filters = true };
	struct trace_config cfg = { 0 };
	const struct egress_fs *prov;
	const char *accept = httpd_header(r, "Accept"), *lv = httpd_query(r, "level");
	struct port_runtime p;
	struct trace_job *j;
	struct err_msg em;
	enum logs_format fmt = LOGS_NDJSON;
	long long ms;
	size_t blen;
	const char *body = httpd_body(r, &blen);
	char id[37];

	if (!trace_duration(r, &ms) || !egress_param(a, r, &prov))
		return;
	if (accept && strstr(accept, "application/json-seq"))
		fmt = LOGS_JSON_SEQ;
	else if (accept && strstr(accept, "text/plain"))
		fmt = LOGS_TEXT;
	if (strcmp(httpd_method(r), "POST") == 0) {
		if (logs_filter_json(body, blen, &f, &em) != 0) {
			httpd_problem(r, 400, "Bad Request", "%s", em.text);
			return;
		}
	}
	if (lv) {
		if ((f.level = logs_level(lv)) < 0) {
			httpd_problem(r, 400, "Bad Request", "level '%.32s' is not one of Trace, Debug, Information, Warning, "
				      "Error, Critical", lv);
			logs_filter_free(&f);
			return;
		}
		f.use_app_filters = false; /* a level given overrides the app's filters (dotnet-monitor's rule) */
	}
	if (logs_trace_config(&f, &cfg, &em) != 0) {
		httpd_problem(r, 400, "Bad Request", "%s", em.text);
		logs_filter_free(&f);
		return;
	}
	if (!choose(a, r, &p))
		goto done;
	if (!slot_take(a, r, &a->logging, MAX_TRACES, "log streams are"))
		goto out;
	j = job_new(a, r, &p, prov, &a->logging, exts[fmt], id);
	job_convert(j, NULL, logs_conv_free);
	j->cflush = logs_conv_flush;
	j->cctx = logs_new(&f, fmt, &j->conv);
	job_run(a, r, j, &p, &cfg, ms, &logs_callbacks, j->cctx, id, ctypes[fmt]);
out:
	ipc_process_info_free(&p.info);
done:
	logs_filter_free(&f);
	trace_config_free(&cfg);
}

static void route_trace(struct api *a, struct httpd_req *r)
{
	const struct egress_fs *prov = NULL;
	struct trace_config cfg = { 0 };
	struct trace_job *j;
	struct port_runtime p;
	struct err_msg em;
	long long ms;
	size_t blen;
	const char *body = httpd_body(r, &blen);
	char id[37];
	int rc, format = -1;

	if (!trace_duration(r, &ms))
		return;
	if (httpd_query(r, "format") &&
	    ((format = profile_format(httpd_query(r, "format"))) < 0 || strcmp(httpd_method(r), "POST") == 0 ||
	     (httpd_query(r, "profile") && strcasecmp(httpd_query(r, "profile"), "Cpu") != 0))) {
		httpd_problem(r, 400, "Bad Request", "format '%.32s': a CPU profile is folded, speedscope or flamegraph, "
			      "from GET /trace with profile=Cpu (or none)", httpd_query(r, "format"));
		return;
	}
	if (!egress_param(a, r, &prov))
		return;
	rc = strcmp(httpd_method(r), "POST") == 0 ? trace_config_json(body, blen, &cfg, &em) :
		trace_config_profile(httpd_query(r, "profile"), METRICS_INTERVAL_S, &cfg, &em);
	if (rc != 0) {
		httpd_problem(r, 400, "Bad Request", "%s", em.text);
		return;
	}
	if (!choose(a, r, &p)) {
		trace_config_free(&cfg);
		return;
	}
	if (!slot_take(a, r, &a->traces, MAX_TRACES, "traces are")) {
		ipc_process_info_free(&p.info);
	} else if (format >= 0) {
		struct whole_job *w = whole_new(a, &p, prov, "profile", profile_render, NULL, &a->traces);

		w->kind = format;
		w->ms = ms;
		whole_run(a, r, w, true, format == PROFILE_FLAMEGRAPH);
	} else {
		j = job_new(a, r, &p, prov, &a->traces, "nettrace", id);
		job_run(a, r, j, &p, &cfg, ms, NULL, NULL, id, "application/octet-stream");
		ipc_process_info_free(&p.info);
	}
	trace_config_free(&cfg);
}

bool api_takes_body(const char *path)
{
	return strcmp(path, "/trace") == 0 || strcmp(path, "/livemetrics") == 0 || strcmp(path, "/logs") == 0;
}

void api_metrics(struct metrics *m, struct httpd_req *r)
{
	struct buf out;

	if (strcmp(httpd_method(r), "GET") != 0) {
		httpd_problem(r, 405, "Method Not Allowed", "%s is not allowed on /metrics", httpd_method(r));
		return;
	}
	if (m == NULL) {
		httpd_problem(r, 404, "Not Found", "metrics are turned off (Metrics:Enabled is false)");
		return;
	}
	buf_init(&out, 0);
	buf_reserve(&out, 16384);
	metrics_render(m, &out);
	httpd_send(r, 200, "text/plain; version=0.0.4; charset=utf-8", out.data ? out.data : "", out.len);
	buf_free(&out);
}

void api_metrics_handle(void *ctx, struct httpd_req *r)
{
	if (strcmp(httpd_path(r), "/metrics") == 0)
		api_metrics(ctx, r);
	else
		httpd_problem(r, 404, "Not Found", "this listener serves /metrics only");
}

void api_handle(void *ctx, struct httpd_req *r)
{
	struct api *a = ctx;
	const char *path = httpd_path(r), *m = httpd_method(r);

	if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0) {
		httpd_send(r, 200, "text/plain", "Healthy", 7);
		return;
	}
	if (strcmp(path, "/metrics") == 0) { /* unauthenticated, like dotnet-monitor's */
		api_metrics(a->metrics, r);
		return;
	}
	if (a->token && !token_ok(a, httpd_header(r, "Authorization"))) {
		httpd_problem(r, 401, "Unauthorized", "this agent requires 'Authorization: Bearer <token>'");
		return;
	}
	if (strcmp(path, "/operations") == 0 || strncmp(path, "/operations/", 12) == 0) {
		ops_route(a->ops, r);
		return;
	}
	if (strcmp(path, "/perfmap") == 0 && (strcmp(m, "POST") == 0 || strcmp(m, "DELETE") == 0)) {
		route_perfmap(a, r, strcmp(m, "POST") == 0);
		return;
	}
	if (strcmp(path, "/trace") == 0 && (strcmp(m, "GET") == 0 || strcmp(m, "POST") == 0)) {
		route_trace(a, r);
		return;
	}
	if (strcmp(path, "/livemetrics") == 0 && (strcmp(m, "GET") == 0 || strcmp(m, "POST") == 0)) {
		route_livemetrics(a, r);
		return;
	}
	if (strcmp(path, "/logs") == 0 && (strcmp(m, "GET") == 0 || strcmp(m, "POST") == 0)) {
		route_logs(a, r);
		return;
	}
	if (strcmp(m, "GET") != 0) {
		httpd_problem(r, 405, "Method Not Allowed", "%s is not allowed on %s", m, path);
		return;
	}
	if (strcmp(path, "/processes") == 0)
		route_processes(a, r);
	else if (strcmp(path, "/process") == 0)
		route_process(a, r);
	else if (strcmp(path, "/env") == 0)
		route_env(a, r);
	else if (strcmp(path, "/info") == 0)
		route_info(a, r);
	else if (strcmp(path, "/dump") == 0)
		route_dump(a, r);
	else if (strcmp(path, "/stacks") == 0)
		route_stacks(a, r);
	else if (strcmp(path, "/gcdump") == 0)
		route_gcdump(a, r);
	else
		httpd_problem(r, 404, "Not Found", "no route %s", path);
}
