/*
 * run_capture.c - one job of a fleet capture (run.c runs the pool): its
 * request, and the artifact it makes. A file streams into
 * DIR/.NAME.partial with its SHA-256 computed on the way, is renamed to NAME
 * only when whole (NAME-2, NAME-3 ... when taken), and leaves the output
 * filesystem its reserve; a failed or cancelled one is removed. An egress
 * capture is a 202 and an operation, polled until it ends and cancelled
 * with DELETE on Ctrl-C. The Ctrl-C flag itself is here: every transfer
 * checks it.
 */
#include "run_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "call.h"
#include "mem.h"

#define POLL_MS 1000

/* ---- signals ---- */

static atomic_bool cancel_flag;

static void on_signal(int sig)
{
	(void)sig;
	atomic_store(&cancel_flag, true);
}

void fleet_signals_install(void)
{
	struct sigaction sa = { .sa_handler = on_signal };

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	signal(SIGPIPE, SIG_IGN);
}

bool fleet_cancelled(void)
{
	return atomic_load(&cancel_flag);
}

/* ---- names ---- */

/* Append part to b, made safe for a file name ([A-Za-z0-9._-], others become '-'), and a '_'. */
static void name_part(struct buf *b, const char *part)
{
	if (part == NULL || *part == '\0')
		return;
	for (const char *p = part; *p; p++) {
		char ch = *p;

		buf_putc(b, (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
				    ch == '.' || ch == '-' ? ch : '-');
	}
	buf_putc(b, '_');
}

char *fleet_artifact_name(const struct fleet_agent *a, uint64_t pid, const char *kind, const char *ext)
{
	struct buf b;
	char t[20];
	time_t now = time(NULL);
	struct tm tm;

	buf_init(&b, 4096);
	if (a->pod) {
		name_part(&b, a->namespace_);
		name_part(&b, a->pod);
		if (a->container && !strchr(a->container, ','))
			name_part(&b, a->container);
	} else if (a->task) {
		name_part(&b, a->cluster);
		name_part(&b, a->task);
	} else {
		name_part(&b, a->name);
	}
	if (pid)
		buf_printf(&b, "%llu_", (unsigned long long)pid);
	gmtime_r(&now, &tm);
	strftime(t, sizeof(t), "%Y%m%dT%H%M%SZ", &tm);
	buf_printf(&b, "%s_%s%s", kind, t, ext);
	return buf_steal(&b, NULL);
}

/* ---- one capture ---- */

/*
 * An artifact's file, written in pieces of SINK_BUF: libcurl hands the body
 * over 16 KiB at a time, and on a small node a write of 16 KiB costs nearly
 * what a write of a MiB does (docs/BENCHMARKS.md, "Dumps beside
 * dotnet-dump": 2.2 s for a 470 MB dump written as it came and synced,
 * 1.0 s this way).
 */
#define SINK_BUF ((size_t)1 << 20)

struct file_sink {
	int fd;
	uint64_t cap;
	struct sha256_ctx h;
	struct job *j;
	struct run *r;
	const char *path;
	char *buf;
	size_t n; /* bytes in buf */
};

/*
 * Without --max-size, may f write its n bytes and still leave the output
 * filesystem its reserve? The free count is read as the bytes arrive (each
 * MiB), less what the other captures are writing at this moment, so that
 * neither one endless agent nor several together can fill the disk. On
 * success the caller writes, then takes n off r->writing.
 */
static int keep_free(struct file_sink *f, struct err_msg *em)
{
	struct run *r = f->r;
	struct statvfs v;
	uint64_t writing = atomic_fetch_add(&r->writing, f->n) + f->n, avail;
	char at[32], res[32], free0[32];

	if (fstatvfs(f->fd, &v) != 0)
		return 0; /* no figure to go by: the write's own error will say */
	avail = (uint64_t)v.f_bavail * v.f_frsize;
	if (avail >= r->reserve + writing)
		return 0;
	atomic_fetch_sub(&r->writing, f->n);
	run_human_bytes(atomic_load(&f->j->bytes) - f->n, at, sizeof(at));
	run_human_bytes(r->reserve, res, sizeof(res));
	run_human_bytes(r->free0, free0, sizeof(free0));
	return err_set(em, DP_ETOOBIG, "stopped at %s: writing on would leave less than %s free on the filesystem of "
		       "%s, which had %s free at the start. Without --max-size a capture may take the output disk's "
		       "free space less %d%% of its size (at most 1 GiB); give -o a disk with room, or --max-size",
		       at, res, r->o->out_dir, free0, FLEET_RESERVE_PCT);
}

/* Write what buf holds and hash it. */
static int sink_flush(struct file_sink *f, struct err_msg *em)
{
	int rc = 0;

	if (f->r->c->keep_free && f->n && (rc = keep_free(f, em)) != 0)
		return rc;
	for (size_t off = 0; off < f->n;) {
		ssize_t w = write(f->fd, f->buf + off, f->n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			rc = err_set(em, DP_EIO, "writing %s: %s", f->path, w < 0 ? strerror(errno) : "nothing written");
			break;
		}
		off += (size_t)w;
	}
	if (f->r->c->keep_free && f->n)
		atomic_fetch_sub(&f->r->writing, f->n);
	if (rc != 0)
		return rc;
	sha256_update(&f->h, f->buf, f->n);
	f->n = 0;
	return 0;
}

static int to_file(void *ctx, const char *p, size_t n, struct err_msg *em)
{
	struct file_sink *f = ctx;
	int rc;

	if (f->cap && atomic_load(&f->j->bytes) + n > f->cap)
		return err_set(em, DP_ETOOBIG, "the artifact is larger than %llu bytes (--max-size)",
			       (unsigned long long)f->cap);
	while (n > 0) {
		size_t take = n < SINK_BUF - f->n ? n : SINK_BUF - f->n;

		memcpy(f->buf + f->n, p, take);
		f->n += take;
		p += take;
		n -= take;
		atomic_fetch_add(&f->j->bytes, take);
		if (f->n == SINK_BUF && (rc = sink_flush(f, em)) != 0)
			return rc;
	}
	return 0;
}

static int to_nothing(void *ctx, const char *p, size_t n, struct err_msg *em)
{
	(void)ctx, (void)p, (void)n, (void)em;
	return 0;
}

/* path + "pid=N" (+ "&egressProvider=E"): the request for job j. */
char *run_job_path(const struct run *r, const struct job *j)
{
	struct buf b;
	const char *sep = strchr(r->c->route, '?') ? "&" : "?";

	buf_init(&b, 8192);
	buf_puts(&b, r->c->route);
	if (j->pid) {
		buf_printf(&b, "%spid=%llu", sep, (unsigned long long)j->pid);
		sep = "&";
	}
	if (r->c->egress)
		buf_printf(&b, "%segressProvider=%s", sep, r->c->egress);
	return buf_steal(&b, NULL);
}

int fleet_publish_file(const char *dir, const char *tmp, char **name, struct err_msg *em)
{
	for (int i = 1; i < 100; i++) {
		char *n = i == 1 ? mem_strdup(*name) : mem_printf("%d-%s", i, *name);
		char *path = mem_printf("%s/%s", dir, n);
		int rc = link(tmp, path);

		free(path);
		if (rc == 0) {
			unlink(tmp);
			free(*name);
			*name = n;
			return 0;
		}
		free(n);
		if (errno != EEXIST)
			return err_set(em, DP_EIO, "cannot publish %s in %s: %s", *name, dir, strerror(errno));
	}
	return err_set(em, DP_EIO, "cannot publish %s in %s: too many files of that name", *name, dir);
}

int run_capture_to_file(struct run *r, struct job *j, const char *path, struct err_msg *em)
{
	struct file_sink f = { .j = j, .r = r, .cap = r->c->max_bytes };
	char *name = fleet_artifact_name(j->a, j->pid, r->c->kind, r->c->ext), *tmp = mem_printf("%s/.%s.partial", r->o->out_dir, name);
	struct fleet_call c = { .agent = j->a, .caller = r->s->caller, .method = r->c->method, .path = path,
				.accept = r->c->accept, .body = r->c->body, .body_len = r->c->body_len,
				.timeout_ms = r->c->timeout_ms, .floor_after_ms = r->c->duration_ms, .sink = to_file,
				.ctx = &f, .cancel = &cancel_flag };
	uint8_t d[SHA256_LEN];
	int rc;

	f.path = tmp;
	sha256_init(&f.h);
	if ((f.fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		rc = err_set(em, DP_EIO, "cannot create %s: %s", tmp, strerror(errno));
		goto out;
	}
	f.buf = mem_alloc(SINK_BUF);
	rc = fleet_call_run(&c, em);
	if (rc == 0)
		rc = sink_flush(&f, em);
	free(f.buf);
	if (close(f.fd) != 0 && rc == 0)
		rc = err_set(em, DP_EIO, "writing %s: %s", tmp, strerror(errno));
	if (rc == 0)
		rc = fleet_publish_file(r->o->out_dir, tmp, &name, em);
	if (rc != 0) {
		unlink(tmp);
		goto out;
	}
	sha256_final(&f.h, d);
	sha256_hex(d, j->sha);
	j->file = name;
	name = NULL;
out:
	free(name);
	free(tmp);
	return rc;
}

/* An egress capture: 202 and an operation, polled until it ends; cancelled with DELETE on Ctrl-C. */
int run_capture_to_egress(struct run *r, struct job *j, const char *path, struct err_msg *em)
{
	struct fleet_call c = { .agent = j->a, .caller = r->s->caller, .method = r->c->method, .path = path,
				.accept = r->c->accept, .body = r->c->body, .body_len = r->c->body_len,
				.timeout_ms = LIST_TIMEOUT_MS, .sink = to_nothing, .cancel = &cancel_flag };
	long long deadline = r->c->timeout_ms > 0 ? clock_ms() + r->c->timeout_ms : 0;
	char op[sizeof(c.location)];
	int rc = fleet_call_run(&c, em);

	if (rc != 0)
		return rc;
	if (c.status != 202 || c.location[0] != '/')
		return err_set(em, DP_EREMOTE, "the agent answered %ld without an operation to follow", c.status);
	snprintf(op, sizeof(op), "%s", c.location);
	for (;;) {
		char *body = NULL;
		json_t *o;
		const char *st;

		if (fleet_cancelled() || (deadline && clock_ms() > deadline)) {
			struct fleet_call del = { .agent = j->a, .caller = r->s->caller, .method = "DELETE", .path = op,
						  .timeout_ms = LIST_TIMEOUT_MS, .sink = to_nothing };
			struct err_msg ignored;

			fleet_call_run(&del, &ignored);
			return fleet_cancelled() ? err_set(em, DP_ECANCELED, "cancelled (operation %s)", op)
						 : err_set(em, DP_EIO, "timed out; operation %s cancelled", op);
		}
		usleep(POLL_MS * 1000);
		if ((rc = fleet_call_get(j->a, r->s->caller, op, LIST_CAP, LIST_TIMEOUT_MS, &body, em)) != 0)
			return rc;
		o = json_loads(body, 0, NULL);
		free(body);
		st = json_string_value(json_object_get(o, "status"));
		if (st && strcmp(st, "Running") != 0) {
			const char *loc = json_string_value(json_object_get(o, "resourceLocation"));
			const char *msg = json_string_value(json_object_get(json_object_get(o, "error"), "message"));

			if (strcmp(st, "Succeeded") == 0)
				j->location = mem_strdup(loc ? loc : "");
			else
				rc = err_set(em, DP_EREMOTE, "operation %s %s: %s", op, st, msg ? msg : "no reason given");
			json_decref(o);
			return rc;
		}
		json_decref(o);
	}
}
