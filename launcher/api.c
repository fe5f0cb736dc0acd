/*
 * api.c - the agent's HTTP routes: /healthz, /readyz (always open), /info,
 * /processes, /process, /env, /dump (behind the token when there is one).
 *
 * Dumps: the runtime's createdump writes the dump into a staging file in the
 * dumps directory (a volume shared with the app); we open it, unlink it at
 * once, and stream it from the open descriptor (sendfile). So a finished,
 * failed or abandoned download leaves nothing on disk; staging files of an
 * agent that was killed mid-dump are removed when the next one starts.
 *
 * The other transport, "fifo", creates a named pipe (mode 0666) at the dump
 * path instead: createdump writes the core sequentially into it and we stream
 * it to the client as it comes, chunked. Nothing touches the disk, and the app
 * and the agent may run as different users. A dump the runtime then reports
 * as failed is cut off, so the client never gets a complete-looking body.
 */
#include "api.h"

#include <dirent.h>
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
#include "ipc.h"
#include "mem.h"

#define STAGING_PREFIX ".diagport-dump-"
#define TAKE_TIMEOUT_MS 5000
#define DUMP_TIMEOUT_MS (15 * 60 * 1000)
#define ENV_MAX_BYTES (1 << 20)

struct api {
	struct port *port;
	char *socket_path, *dumps_dir, *token;
	pthread_mutex_t mu;
	bool dumping, fifo_default;
	unsigned long seq;
};

static void clean_staging(const char *dir)
{
	DIR *d = opendir(dir);
	struct dirent *e;

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, STAGING_PREFIX, strlen(STAGING_PREFIX)) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}

struct api *api_new(const struct api_config *cfg)
{
	struct api *a = mem_zalloc(sizeof(*a));

	a->port = cfg->port;
	a->socket_path = mem_strdup(cfg->socket_path);
	a->dumps_dir = mem_strdup(cfg->dumps_dir);
	a->token = cfg->token ? mem_strdup(cfg->token) : NULL;
	a->fifo_default = cfg->dump_transport && strcmp(cfg->dump_transport, "fifo") == 0;
	pthread_mutex_init(&a->mu, NULL);
	clean_staging(a->dumps_dir);
	return a;
}

void api_free(struct api *a)
{
	if (a == NULL)
		return;
	if (a->token) {
		mem_wipe(a->token, strlen(a->token));
		free(a->token);
	}
	free(a->socket_path);
	free(a->dumps_dir);
	pthread_mutex_destroy(&a->mu);
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

		if (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK || ipc_get_u32(&rd, &incoming) != 0 ||
		    incoming > ENV_MAX_BYTES)
			rc = DP_ESYNTAX;
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
	if (rc != 0) {
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

static int dump_type(const char *t)
{
	if (t == NULL || strcasecmp(t, "WithHeap") == 0)
		return IPC_DUMP_WITHHEAP;
	if (strcasecmp(t, "Mini") == 0)
		return IPC_DUMP_NORMAL;
	if (strcasecmp(t, "Triage") == 0)
		return IPC_DUMP_TRIAGE;
	if (strcasecmp(t, "Full") == 0)
		return IPC_DUMP_FULL;
	return -1;
}

/* GenerateCoreDump3, then 2, then 1 on runtimes that do not know the newer command. */
static int generate_dump(struct api *a, const struct port_runtime *p, const char *path, int type, uint32_t *hr,
			 char **text)
{
	static const uint8_t ids[] = { IPC_DUMP_GENERATE3, IPC_DUMP_GENERATE2, IPC_DUMP_GENERATE };
	struct buf req, pl;
	int rc = DP_EIO;

	*hr = 0;
	*text = NULL;
	buf_init(&req, IPC_MAX_MESSAGE);
	buf_init(&pl, IPC_MAX_MESSAGE);
	for (size_t i = 0; i < sizeof(ids); i++) {
		struct ipc_header h;

		ipc_begin(&req, IPC_SET_DUMP, ids[i]);
		ipc_put_string(&req, path);
		ipc_put_u32(&req, (uint32_t)type);
		ipc_put_u32(&req, 0);
		ipc_end(&req);
		buf_reset(&pl);
		if ((rc = command(a, p, &req, &h, &pl, NULL, DUMP_TIMEOUT_MS)) != 0)
			break;
		if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK)
			break;
		free(*text);
		if (ipc_parse_error((const uint8_t *)pl.data, pl.len, hr, text) != 0)
			*hr = IPC_E_FAIL;
		rc = DP_EREFUSED;
		if (*hr != IPC_E_UNKNOWN_COMMAND)
			break;
	}
	buf_free(&req);
	buf_free(&pl);
	return rc;
}

static void dump_done(struct api *a)
{
	pthread_mutex_lock(&a->mu);
	a->dumping = false;
	pthread_mutex_unlock(&a->mu);
}

static void dump_filename(char *out, size_t n)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, n, "core_%Y%m%d_%H%M%S", &tm);
}

/* A dump being streamed through the FIFO. */
struct fifo_dump {
	struct api *a;
	uint8_t cookie[16];
	int rfd, conn;
	char *path;
};

static void fifo_free(void *ctx)
{
	struct fifo_dump *f = ctx;

	close(f->rfd); /* a createdump still writing gets EPIPE and stops; the app runs on */
	if (f->conn >= 0) {
		close(f->conn);
		port_release(f->a->port, f->cookie);
	}
	unlink(f->path);
	free(f->path);
	dump_done(f->a);
	free(f);
}

/* The runtime's verdict once createdump closed the pipe: 0 when it reported success. */
static int fifo_verdict(struct fifo_dump *f)
{
	uint8_t hdr[IPC_HEADER_SIZE];
	struct ipc_header h;

	if (ipc_read_full(f->conn, hdr, sizeof(hdr), 60000) != 0 || ipc_parse_header(hdr, &h) != 0)
		return DP_EIO;
	return h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK ? 0 : DP_EREFUSED;
}

static long fifo_read(void *ctx, char *out, size_t max)
{
	struct fifo_dump *f = ctx;

	for (;;) {
		struct pollfd pf = { .fd = f->rfd, .events = POLLIN };
		ssize_t n = read(f->rfd, out, max);

		if (n > 0)
			return n;
		if (n == 0)
			return fifo_verdict(f) == 0 ? 0 : -1;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		if (poll(&pf, 1, DUMP_TIMEOUT_MS) == 0)
			return -1;
	}
}

/*
 * Send the dump command (3, then 2, then 1) and wait for the first byte in the
 * pipe or an answer on the connection, whichever comes first.
 */
static int fifo_start(struct api *a, const struct port_runtime *p, struct fifo_dump *f, int type, uint32_t *hr,
		      char **text)
{
	static const uint8_t ids[] = { IPC_DUMP_GENERATE3, IPC_DUMP_GENERATE2, IPC_DUMP_GENERATE };
	static char tmp[IPC_MAX_MESSAGE];
	struct buf req;
	int rc = DP_EIO;

	buf_init(&req, IPC_MAX_MESSAGE);
	for (size_t i = 0; i < sizeof(ids); i++) {
		struct pollfd pf[2];
		struct ipc_header h;
		uint8_t hdr[IPC_HEADER_SIZE];

		ipc_begin(&req, IPC_SET_DUMP, ids[i]);
		ipc_put_string(&req, f->path);
		ipc_put_u32(&req, (uint32_t)type);
		ipc_put_u32(&req, 0);
		ipc_end(&req);
		if ((rc = port_take(a->port, p->cookie, TAKE_TIMEOUT_MS, &f->conn)) != 0)
			break;
		if ((rc = ipc_write_full(f->conn, req.data, req.len, 5000)) != 0)
			break;
		pf[0] = (struct pollfd){ .fd = f->rfd, .events = POLLIN };
		pf[1] = (struct pollfd){ .fd = f->conn, .events = POLLIN };
		if (poll(pf, 2, DUMP_TIMEOUT_MS) <= 0) {
			rc = DP_EIO;
			break;
		}
		if (pf[0].revents & POLLIN)
			break; /* createdump is writing: stream it */
		/* The runtime answered before writing anything: a failure. */
		rc = DP_EREFUSED;
		*hr = IPC_E_FAIL;
		if (ipc_read_full(f->conn, hdr, sizeof(hdr), 5000) == 0 && ipc_parse_header(hdr, &h) == 0 &&
		    h.size > IPC_HEADER_SIZE) {
			size_t n = (size_t)h.size - IPC_HEADER_SIZE; /* <= 65515: fits tmp */

			pthread_mutex_lock(&a->mu); /* tmp is shared; one dump at a time anyway */
			if (ipc_read_full(f->conn, tmp, n, 5000) == 0) {
				free(*text);
				*text = NULL;
				ipc_parse_error((const uint8_t *)tmp, n, hr, text);
			}
			pthread_mutex_unlock(&a->mu);
		}
		close(f->conn);
		port_release(a->port, p->cookie);
		f->conn = -1;
		if (*hr != IPC_E_UNKNOWN_COMMAND)
			break;
	}
	buf_free(&req);
	return rc;
}

static void dump_fifo(struct api *a, struct httpd_req *r, const struct port_runtime *p, int type, char *path)
{
	struct fifo_dump *f = mem_zalloc(sizeof(*f));
	uint32_t hr = 0;
	char *text = NULL, fname[64];
	int rc;

	f->a = a;
	f->path = path;
	f->conn = -1;
	f->rfd = -1;
	memcpy(f->cookie, p->cookie, 16);
	if (mkfifo(path, 0600) != 0 || chmod(path, 0666) != 0 ||
	    (f->rfd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		httpd_problem(r, 500, "Internal Server Error", "cannot create the dump pipe %s: %s", path, strerror(errno));
		fifo_free(f);
		return;
	}
	rc = fifo_start(a, p, f, type, &hr, &text);
	if (rc == 0) {
		unlink(path); /* createdump has it open; nothing stays on disk */
		dump_filename(fname, sizeof(fname));
		httpd_send_stream(r, 200, "application/octet-stream", fifo_read, fifo_free, f, fname);
	} else {
		if (rc == DP_EREFUSED)
			httpd_problem(r, 500, "Internal Server Error", "the runtime could not write the dump: %s (0x%08x)%s%s",
				      ipc_hresult_str(hr), hr, text && *text ? ": " : "", text ? text : "");
		else
			httpd_problem(r, 500, "Internal Server Error", "talking to pid %llu failed: %s",
				      (unsigned long long)p->pid, err_str(rc));
		fifo_free(f);
	}
	free(text);
}

static void route_dump(struct api *a, struct httpd_req *r)
{
	struct port_runtime p;
	int type = dump_type(httpd_query(r, "type")), fd, rc, open_errno;
	char *path, *text = NULL, fname[64];
	uint32_t hr;
	struct stat st;
	const char *tr = httpd_query(r, "transport");
	bool fifo = a->fifo_default;

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
	if (httpd_query(r, "egressProvider")) {
		httpd_problem(r, 400, "Bad Request", "egress providers are not configured in this agent yet");
		return;
	}
	if (!choose(a, r, &p))
		return;
	pthread_mutex_lock(&a->mu);
	if (a->dumping) {
		pthread_mutex_unlock(&a->mu);
		ipc_process_info_free(&p.info);
		httpd_problem(r, 429, "Too Many Requests", "a dump is already being taken; try again when it is done");
		return;
	}
	a->dumping = true;
	a->seq++;
	path = mem_printf("%s/%s%llu-%lu-%ld", a->dumps_dir, STAGING_PREFIX, (unsigned long long)p.pid, a->seq, (long)getpid());
	pthread_mutex_unlock(&a->mu);
	if (fifo) {
		dump_fifo(a, r, &p, type, path); /* takes path; clears the dumping flag when done */
		ipc_process_info_free(&p.info);
		return;
	}
	rc = generate_dump(a, &p, path, type, &hr, &text);
	fd = rc == 0 ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	open_errno = errno;
	unlink(path); /* from here the dump lives only as long as the download */
	if (rc == DP_EREFUSED) {
		httpd_problem(r, 500, "Internal Server Error", "the runtime could not write the dump: %s (0x%08x)%s%s",
			      ipc_hresult_str(hr), hr, text && *text ? ": " : "", text ? text : "");
	} else if (rc != 0) {
		httpd_problem(r, 500, "Internal Server Error", "talking to pid %llu failed: %s",
			      (unsigned long long)p.pid, err_str(rc));
	} else if (fd < 0 || fstat(fd, &st) != 0) {
		httpd_problem(r, 500, "Internal Server Error",
			      "the runtime reported a dump, but the agent cannot read %s: %s (the app and the agent "
			      "must share the dumps volume; when they run as different users, use transport=fifo "
			      "or start the agent with --dump-transport fifo)",
			      path, strerror(fd < 0 ? open_errno : errno));
		if (fd >= 0)
			close(fd);
	} else {
		dump_filename(fname, sizeof(fname));
		httpd_send_fd(r, 200, "application/octet-stream", fd, (uint64_t)st.st_size, fname);
	}
	free(text);
	free(path);
	ipc_process_info_free(&p.info);
	dump_done(a);
}

void api_handle(void *ctx, struct httpd_req *r)
{
	struct api *a = ctx;
	const char *path = httpd_path(r), *m = httpd_method(r);

	if (strcmp(path, "/healthz") == 0 || strcmp(path, "/readyz") == 0) {
		httpd_send(r, 200, "text/plain", "Healthy", 7);
		return;
	}
	if (a->token && !token_ok(a, httpd_header(r, "Authorization"))) {
		httpd_problem(r, 401, "Unauthorized", "this agent requires 'Authorization: Bearer <token>'");
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
	else
		httpd_problem(r, 404, "Not Found", "no route %s", path);
}
