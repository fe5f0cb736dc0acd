/*
 * run.c - one capture on many agents at once (run.h).
 *
 * First every agent that can be called is asked for its processes (a
 * capture per .NET process: a pod may run several); then a pool of
 * --parallel threads takes the jobs in order, each the first one that may
 * start: one capture per agent at a time (the agent runs one dump at a
 * time anyway), and for captures that freeze the process (a dump, a GC
 * snapshot) at most --max-unavailable of one workload. Each artifact
 * streams into DIR/.NAME.partial with its SHA-256 computed on the way, and
 * is renamed to NAME only when whole; a failed or cancelled one is removed.
 * The manifest (manifest.json) is written the same way at the end.
 *
 * Ctrl-C (or SIGTERM) sets one flag: the transfers stop (the agents see
 * their connections close, which stops a dump, a trace, a log stream),
 * operations on egress providers are cancelled with DELETE, nothing
 * partial is left, and the exit code is 130.
 */
#include "run.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "call.h"
#include "clock.h"
#include "mem.h"
#include "pool.h"
#include "sha256.h"

#define LIST_CAP ((size_t)1024 * 1024)
#define LIST_TIMEOUT_MS 20000L
#define POLL_MS 1000

enum job_state { J_QUEUED, J_RUNNING, J_DONE, J_FAILED, J_CANCELLED, J_UNAVAILABLE };
static const char *const state_names[] = { "queued", "running", "succeeded", "failed", "cancelled", "unavailable" };

struct job {
	const struct fleet_agent *a;
	size_t ai, wi;           /* the agent's index in the set, its workload's (for the counters) */
	uint64_t pid;            /* 0: the agent as a whole (/metrics), or none found */
	char *pname;             /* the process's name, or NULL */
	enum job_state st;
	char *error;             /* why it failed or is unavailable */
	char *file;              /* the artifact's name in DIR once whole */
	char *location;          /* egress: the published resource */
	char sha[SHA256_HEX_LEN];
	_Atomic uint64_t bytes;
	long long t0, t1;        /* monotonic ms */
	char started[CLOCK_RFC3339_LEN];
};

struct run {
	const struct fleet_set *s;
	const struct fleet_capture *c;
	const struct fleet_run_opts *o;
	struct job *jobs;
	size_t n, cap;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	size_t running;
	unsigned *agent_busy;    /* per agent: its captures running (at most one) */
	unsigned *wl_running;    /* per workload: its captures running */
	size_t first_queued;     /* no job before it is queued */
	long long t0;
	bool done;
	unsigned drawn;          /* lines of progress on the terminal now */
	char started[CLOCK_RFC3339_LEN];
	/* the output filesystem, when c->keep_free: its reserve, its free space at the start, and the bytes
	   being written to it now (not yet in its free count) */
	uint64_t reserve, free0;
	_Atomic uint64_t writing;
};

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

/* ---- the jobs ---- */

static struct job *job_add(struct run *r, const struct fleet_agent *a)
{
	struct job *j;

	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 64;
		r->jobs = mem_realloc(r->jobs, r->cap * sizeof(*r->jobs));
	}
	j = &r->jobs[r->n++];
	memset(j, 0, sizeof(*j));
	j->a = a;
	j->ai = (size_t)(a - r->s->v);
	return j;
}

/* The processes of each agent: one job per process (or one for the agent), or one unavailable job. */
struct listing {
	const struct fleet_set *s;
	char **answers;  /* per agent: /processes' JSON, or NULL */
	char **errors;   /* per agent: why not, or NULL */
};

static void list_one(void *ctx, size_t i)
{
	struct listing *l = ctx;
	const struct fleet_agent *a = &l->s->v[i];
	struct err_msg em;

	if (a->why_not || fleet_cancelled())
		return;
	if (fleet_call_get(a, l->s->caller, "/processes", LIST_CAP, LIST_TIMEOUT_MS, &l->answers[i], &em) != 0)
		l->errors[i] = mem_strdup(em.text);
}

static void plan(struct run *r)
{
	const struct fleet_set *s = r->s;
	struct listing l = { .s = s, .answers = mem_array(s->n ? s->n : 1, sizeof(char *)),
			     .errors = mem_array(s->n ? s->n : 1, sizeof(char *)) };

	if (r->c->per_process)
		pool_run(s->n, r->o->parallel * 2, list_one, &l);
	for (size_t i = 0; i < s->n; i++) {
		const struct fleet_agent *a = &s->v[i];
		json_t *arr = l.answers[i] ? json_loads(l.answers[i], 0, NULL) : NULL;
		struct job *j;

		if (a->why_not || l.errors[i] || (r->c->per_process && !json_is_array(arr))) {
			j = job_add(r, a);
			j->st = J_UNAVAILABLE;
			j->error = mem_strdup(a->why_not ? a->why_not : l.errors[i] ? l.errors[i] :
					      "the agent's /processes answer is not a list");
		} else if (!r->c->per_process) {
			job_add(r, a);
		} else if (json_array_size(arr) == 0 || json_array_size(arr) > FLEET_MAX_PROCESSES) {
			j = job_add(r, a);
			j->st = J_UNAVAILABLE;
			j->error = json_array_size(arr) ? mem_printf("the agent lists %zu processes; more than %d is not taken",
								     json_array_size(arr), FLEET_MAX_PROCESSES)
							: mem_strdup("no .NET process is attached to the agent");
		} else {
			for (size_t k = 0; k < json_array_size(arr); k++) {
				json_t *p = json_array_get(arr, k);
				json_int_t pid = json_integer_value(json_object_get(p, "pid"));
				const char *name = json_string_value(json_object_get(p, "name"));

				j = job_add(r, a);
				j->pname = name ? mem_strndup(name, 256) : NULL;
				fleet_safe_text(j->pname);
				if (pid > 0 && pid <= INT32_MAX) {
					j->pid = (uint64_t)pid;
				} else { /* without a pid the agent would take its default process: not this one */
					j->st = J_UNAVAILABLE;
					j->error = mem_strdup("the agent listed a process without a valid pid");
				}
			}
		}
		json_decref(arr);
		free(l.answers[i]);
		free(l.errors[i]);
	}
	free(l.answers);
	free(l.errors);
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

/* NAMESPACE_POD_CONTAINER_PID_KIND_YYYYMMDDTHHMMSSZ.EXT (ECS: CLUSTER_TASK_...; static: NAME_...). */
static char *artifact_name(const struct run *r, const struct job *j)
{
	const struct fleet_agent *a = j->a;
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
	if (j->pid)
		buf_printf(&b, "%llu_", (unsigned long long)j->pid);
	gmtime_r(&now, &tm);
	strftime(t, sizeof(t), "%Y%m%dT%H%M%SZ", &tm);
	buf_printf(&b, "%s_%s%s", r->c->kind, t, r->c->ext);
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

static void human_bytes(uint64_t n, char *out, size_t len);

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
	human_bytes(atomic_load(&f->j->bytes) - f->n, at, sizeof(at));
	human_bytes(r->reserve, res, sizeof(res));
	human_bytes(r->free0, free0, sizeof(free0));
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
static char *job_path(const struct run *r, const struct job *j)
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

/* Publish tmp as DIR/name without replacing anything (name-2, name-3 ... when taken). */
static int publish(const char *dir, const char *tmp, char **name, struct err_msg *em)
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

static int capture_to_file(struct run *r, struct job *j, const char *path, struct err_msg *em)
{
	struct file_sink f = { .j = j, .r = r, .cap = r->c->max_bytes };
	char *name = artifact_name(r, j), *tmp = mem_printf("%s/.%s.partial", r->o->out_dir, name);
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
		rc = publish(r->o->out_dir, tmp, &name, em);
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
static int capture_to_egress(struct run *r, struct job *j, const char *path, struct err_msg *em)
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

/* ---- progress ---- */

static void human_bytes(uint64_t n, char *out, size_t len)
{
	if (n < 10ULL * 1024)
		snprintf(out, len, "%llu B", (unsigned long long)n);
	else if (n < 10ULL * 1024 * 1024)
		snprintf(out, len, "%.1f KiB", n / 1024.0);
	else if (n < 10ULL * 1024 * 1024 * 1024)
		snprintf(out, len, "%.1f MiB", n / 1048576.0);
	else
		snprintf(out, len, "%.2f GiB", n / 1073741824.0);
}

static void job_label(const struct run *r, const struct job *j, char *out, size_t len)
{
	if (j->pid)
		snprintf(out, len, "%s pid %llu", j->a->name, (unsigned long long)j->pid);
	else
		snprintf(out, len, "%s", j->a->name);
	(void)r;
}

/* A plain line on stderr for one event (not a terminal). Called with r->mu held. */
static void log_event(const struct run *r, const struct job *j)
{
	char t[CLOCK_RFC3339_LEN], who[512], b[32];
	double secs = (j->t1 - j->t0) / 1000.0;

	clock_rfc3339(t, 3);
	job_label(r, j, who, sizeof(who));
	human_bytes(atomic_load(&j->bytes), b, sizeof(b));
	if (j->st == J_RUNNING)
		fprintf(stderr, "%s %s: %s started\n", t, who, r->c->kind);
	else if (j->st == J_DONE)
		fprintf(stderr, "%s %s: %s succeeded, %s in %.1f s, %s\n", t, who, r->c->kind, b, secs,
			j->file ? j->file : j->location);
	else
		fprintf(stderr, "%s %s: %s %s: %s\n", t, who, r->c->kind, state_names[j->st], j->error);
}

static unsigned term_rows(void)
{
	struct winsize w;

	return ioctl(STDERR_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_row > 4 ? w.ws_row : 24;
}

/* Redraw the lines: one per target that started (as many as fit), and the total. r->mu held. */
static void draw(struct run *r)
{
	unsigned rows = term_rows() - 2, shown = 0, counts[6] = { 0 };
	uint64_t total = 0;
	double secs = (clock_ms() - r->t0) / 1000.0;
	char b[32], rate[32], who[512];
	struct buf out;

	buf_init(&out, 0);
	if (r->drawn)
		buf_printf(&out, "\r\033[%uA\033[J", r->drawn);
	for (size_t i = 0; i < r->n; i++) {
		const struct job *j = &r->jobs[i];
		uint64_t n = atomic_load(&j->bytes);
		double js = ((j->t1 ? j->t1 : clock_ms()) - j->t0) / 1000.0;

		counts[j->st]++;
		total += n;
		if (j->st == J_QUEUED || j->st == J_UNAVAILABLE || shown >= rows)
			continue;
		shown++;
		job_label(r, j, who, sizeof(who));
		human_bytes(n, b, sizeof(b));
		human_bytes(js > 0.05 ? (uint64_t)(n / js) : 0, rate, sizeof(rate));
		buf_printf(&out, "%-48.48s %-10s %12s %12s/s %6.1fs%s%.60s\n", who, state_names[j->st], b, rate, js,
			   j->error ? "  " : "", j->error ? j->error : "");
	}
	human_bytes(total, b, sizeof(b));
	human_bytes(secs > 0.05 ? (uint64_t)(total / secs) : 0, rate, sizeof(rate));
	buf_printf(&out, "%s: %u/%zu done (%u failed, %u cancelled), %u running, %u queued, %s at %s/s, %.1f s\n",
		   r->c->kind, counts[J_DONE] + counts[J_FAILED] + counts[J_CANCELLED], r->n - counts[J_UNAVAILABLE],
		   counts[J_FAILED], counts[J_CANCELLED], counts[J_RUNNING], counts[J_QUEUED], b, rate, secs);
	r->drawn = shown + 1;
	fwrite(out.data, 1, out.len, stderr);
	fflush(stderr);
	buf_free(&out);
}

static void *progress_main(void *arg)
{
	struct run *r = arg;

	pthread_mutex_lock(&r->mu);
	while (!r->done) {
		struct timespec ts;

		draw(r);
		clock_deadline(&ts, 250);
		pthread_cond_timedwait(&r->cv, &r->mu, &ts);
	}
	draw(r);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* ---- the pool ---- */

static const char *workload_of(const struct fleet_agent *a)
{
	return a->workload ? a->workload : a->name;
}

static int by_workload(const void *x, const void *y, void *ctx)
{
	const struct fleet_agent *v = ctx;

	return strcmp(workload_of(&v[*(const size_t *)x]), workload_of(&v[*(const size_t *)y]));
}

/* Number the workloads (the agents' indices sorted by workload, equal names one number) and size the counters. */
static void count_workloads(struct run *r)
{
	size_t n = r->s->n, *idx = mem_array(n ? n : 1, sizeof(size_t)), *wid = mem_array(n ? n : 1, sizeof(size_t));
	size_t next = 0;

	for (size_t i = 0; i < n; i++)
		idx[i] = i;
	qsort_r(idx, n, sizeof(size_t), by_workload, r->s->v);
	for (size_t i = 0; i < n; i++)
		wid[idx[i]] = i > 0 && by_workload(&idx[i - 1], &idx[i], r->s->v) == 0 ? wid[idx[i - 1]] : next++;
	for (size_t i = 0; i < r->n; i++)
		r->jobs[i].wi = wid[r->jobs[i].ai];
	r->agent_busy = mem_array(n ? n : 1, sizeof(unsigned));
	r->wl_running = mem_array(next ? next : 1, sizeof(unsigned));
	free(idx);
	free(wid);
}

/* The first queued job that may start now, or NULL. r->mu held. */
static struct job *next_job(struct run *r, bool *any_queued)
{
	*any_queued = false;
	while (r->first_queued < r->n && r->jobs[r->first_queued].st != J_QUEUED)
		r->first_queued++;
	for (size_t i = r->first_queued; i < r->n; i++) {
		struct job *j = &r->jobs[i];

		if (j->st != J_QUEUED)
			continue;
		*any_queued = true;
		if (r->agent_busy[j->ai] == 0 && (!r->c->freezes || r->wl_running[j->wi] < r->o->max_unavailable))
			return j;
	}
	return NULL;
}

static void *worker_main(void *arg)
{
	struct run *r = arg;

	pthread_mutex_lock(&r->mu);
	for (;;) {
		bool queued;
		struct job *j = next_job(r, &queued);
		struct err_msg em;
		char *path;
		int rc;

		if (!queued || fleet_cancelled())
			break;
		if (j == NULL) {
			pthread_cond_wait(&r->cv, &r->mu);
			continue;
		}
		j->st = J_RUNNING;
		j->t0 = clock_ms();
		clock_rfc3339(j->started, 3);
		r->running++;
		r->agent_busy[j->ai]++;
		r->wl_running[j->wi]++;
		if (!r->o->tty)
			log_event(r, j);
		pthread_mutex_unlock(&r->mu);

		path = job_path(r, j);
		rc = r->c->egress ? capture_to_egress(r, j, path, &em) : capture_to_file(r, j, path, &em);
		free(path);

		pthread_mutex_lock(&r->mu);
		j->t1 = clock_ms();
		j->st = rc == 0 ? J_DONE : rc == DP_ECANCELED || fleet_cancelled() ? J_CANCELLED : J_FAILED;
		if (rc != 0)
			j->error = mem_strdup(j->st == J_CANCELLED ? "cancelled" : em.text);
		r->running--;
		r->agent_busy[j->ai]--;
		r->wl_running[j->wi]--;
		if (!r->o->tty)
			log_event(r, j);
		pthread_cond_broadcast(&r->cv);
	}
	pthread_cond_broadcast(&r->cv);
	pthread_mutex_unlock(&r->mu);
	return NULL;
}

/* ---- the record ---- */

static void set_str(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

static json_t *manifest(const struct run *r)
{
	json_t *m = json_object(), *items = json_array();
	char now[CLOCK_RFC3339_LEN];
	unsigned counts[6] = { 0 };

	clock_rfc3339(now, 3);
	json_object_set_new(m, "apiVersion", json_string("diagport.dev/v1"));
	json_object_set_new(m, "kind", json_string("CaptureManifest"));
	json_object_set_new(m, "capture", json_string(r->c->kind));
	json_object_set_new(m, "request", json_string(r->c->route));
	set_str(m, "egressProvider", r->c->egress);
	set_str(m, "caller", r->s->caller);
	json_object_set_new(m, "startedAt", json_string(r->started));
	json_object_set_new(m, "finishedAt", json_string(now));
	for (size_t i = 0; i < r->n; i++) {
		const struct job *j = &r->jobs[i];
		const struct fleet_agent *a = j->a;
		json_t *it = json_object(), *t = json_object();

		counts[j->st]++;
		set_str(t, "name", a->name);
		fleet_agent_describe(t, a);
		json_object_set_new(it, "target", t);
		if (j->pid)
			json_object_set_new(it, "pid", json_integer((json_int_t)j->pid));
		set_str(it, "processName", j->pname);
		json_object_set_new(it, "status", json_string(state_names[j->st]));
		set_str(it, "file", j->file);
		set_str(it, "location", j->location);
		if (j->st == J_DONE && !r->c->egress) {
			json_object_set_new(it, "bytes", json_integer((json_int_t)atomic_load(&j->bytes)));
			json_object_set_new(it, "sha256", json_string(j->sha));
		}
		if (j->t0) {
			json_object_set_new(it, "startedAt", json_string(j->started));
			json_object_set_new(it, "durationSeconds", json_real((j->t1 - j->t0) / 1000.0));
		}
		set_str(it, "error", j->error);
		json_array_append_new(items, it);
	}
	json_object_set_new(m, "succeeded", json_integer(counts[J_DONE]));
	json_object_set_new(m, "failed", json_integer(counts[J_FAILED]));
	json_object_set_new(m, "cancelled", json_integer(counts[J_CANCELLED]));
	json_object_set_new(m, "unavailable", json_integer(counts[J_UNAVAILABLE]));
	json_object_set_new(m, "items", items);
	return m;
}

static int write_manifest(const struct run *r, struct err_msg *em)
{
	json_t *m = manifest(r);
	char *text = json_dumps(m, JSON_INDENT(2) | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6)), *tmp, *path;
	int fd, rc = 0;
	size_t len = strlen(text);

	json_decref(m);
	if (r->o->out_dir == NULL) {
		rc = fwrite(text, 1, len, stdout) == len && fputc('\n', stdout) != EOF ? 0 : DP_EIO;
		free(text);
		return rc ? err_set(em, rc, "writing the manifest to stdout failed") : 0;
	}
	tmp = mem_printf("%s/.manifest.json.XXXXXX", r->o->out_dir);
	path = mem_printf("%s/manifest.json", r->o->out_dir);
	fd = mkostemp(tmp, O_CLOEXEC); /* a new file of ours, never one planted (a symlink) under a known name */
	if (fd < 0 || write(fd, text, len) != (ssize_t)len || write(fd, "\n", 1) != 1 || fsync(fd) != 0 ||
	    close(fd) != 0 || rename(tmp, path) != 0) {
		rc = err_set(em, DP_EIO, "writing %s: %s", path, strerror(errno));
		if (fd >= 0)
			unlink(tmp);
	}
	free(text);
	free(tmp);
	free(path);
	return rc;
}

static void summary(const struct run *r, FILE *f)
{
	char b[32];

	fprintf(f, "%-44s %7s  %-11s %10s %8s  %s\n", "TARGET", "PID", "STATUS", "BYTES", "SECONDS", "FILE / ERROR");
	for (size_t i = 0; i < r->n; i++) {
		const struct job *j = &r->jobs[i];
		char pid[24];

		snprintf(pid, sizeof(pid), j->pid ? "%llu" : "-", (unsigned long long)j->pid);
		human_bytes(atomic_load(&j->bytes), b, sizeof(b));
		fprintf(f, "%-44s %7s  %-11s %10s %8.1f  %s\n", j->a->name, pid, state_names[j->st],
			j->st == J_DONE ? b : "-", j->t0 ? (j->t1 - j->t0) / 1000.0 : 0.0,
			j->st == J_DONE ? (j->file ? j->file : j->location) : j->error ? j->error : "");
	}
}

int fleet_run_capture(const struct fleet_set *s, const struct fleet_capture *c, const struct fleet_run_opts *o)
{
	struct run r = { .s = s, .c = c, .o = o, .t0 = clock_ms() };
	unsigned nthreads = o->parallel ? o->parallel : 1;
	pthread_t *t = mem_array(nthreads, sizeof(pthread_t)), prog;
	unsigned counts[6] = { 0 };
	struct err_msg em;
	int code;

	pthread_mutex_init(&r.mu, NULL);
	pthread_cond_init(&r.cv, NULL);
	clock_rfc3339(r.started, 3);
	if (c->keep_free && o->out_dir) {
		struct statvfs v;

		if (statvfs(o->out_dir, &v) == 0) {
			uint64_t size = (uint64_t)v.f_blocks * v.f_frsize;

			r.free0 = (uint64_t)v.f_bavail * v.f_frsize;
			r.reserve = size / 100 * FLEET_RESERVE_PCT < FLEET_RESERVE_MAX ? size / 100 * FLEET_RESERVE_PCT
										  : FLEET_RESERVE_MAX;
		}
	}
	plan(&r);
	count_workloads(&r);
	for (size_t i = 0; i < r.n; i++)
		if (r.jobs[i].st == J_UNAVAILABLE && !o->tty)
			log_event(&r, &r.jobs[i]);
	if (o->tty)
		pthread_create(&prog, NULL, progress_main, &r);
	for (unsigned i = 0; i < nthreads; i++)
		if (pthread_create(&t[i], NULL, worker_main, &r) != 0)
			DP_FATAL("cannot start a capture thread");
	for (unsigned i = 0; i < nthreads; i++)
		pthread_join(t[i], NULL);
	pthread_mutex_lock(&r.mu);
	for (size_t i = 0; i < r.n; i++)
		if (r.jobs[i].st == J_QUEUED) { /* Ctrl-C came before they started */
			r.jobs[i].st = J_CANCELLED;
			r.jobs[i].error = mem_strdup("cancelled before it started");
		}
	r.done = true;
	pthread_cond_broadcast(&r.cv);
	pthread_mutex_unlock(&r.mu);
	if (o->tty)
		pthread_join(prog, NULL);
	for (size_t i = 0; i < r.n; i++)
		counts[r.jobs[i].st]++;
	code = fleet_cancelled() ? FLEET_EXIT_CANCELLED
	       : counts[J_DONE] + counts[J_FAILED] == 0 ? FLEET_EXIT_NOTHING
	       : counts[J_FAILED] || counts[J_UNAVAILABLE] ? FLEET_EXIT_SOME : FLEET_EXIT_OK;
	if (write_manifest(&r, &em) != 0) {
		fprintf(stderr, "diagport capture: %s\n", em.text);
		if (code == FLEET_EXIT_OK)
			code = FLEET_EXIT_SOME;
	}
	summary(&r, o->out_dir ? stdout : stderr);
	fprintf(o->out_dir ? stdout : stderr, "%u succeeded, %u failed, %u cancelled, %u unavailable%s%s%s\n",
		counts[J_DONE], counts[J_FAILED], counts[J_CANCELLED], counts[J_UNAVAILABLE],
		o->out_dir ? "; manifest: " : "", o->out_dir ? o->out_dir : "", o->out_dir ? "/manifest.json" : "");
	for (size_t i = 0; i < r.n; i++) {
		free(r.jobs[i].pname);
		free(r.jobs[i].error);
		free(r.jobs[i].file);
		free(r.jobs[i].location);
	}
	free(r.jobs);
	free(r.agent_busy);
	free(r.wl_running);
	free(t);
	pthread_mutex_destroy(&r.mu);
	pthread_cond_destroy(&r.cv);
	return code;
}
