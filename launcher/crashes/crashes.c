/*
 * crashes.c - crashes noticed, recorded, shipped and capped (crashes.h).
 *
 * A watcher looks at the dumps directory every SCAN_MS. A crash is the pair
 * CRASH_NAME (crash-PID-TIME-EXE.dmp) and its .crashreport.json (createdump writes the
 * report, then the dump). It is complete when no runtime with its pid that
 * attached before the crash is still attached: the process ends only after
 * createdump has finished, and its diagnostic connection with it. (Runtimes
 * in containers of their own are often pid 1 each time; a new instance
 * attaches after the crash it follows.)
 *
 * A complete crash is recorded (the report's thread, type and frames; the
 * message from the exception history, which the report does not have),
 * then, with an egress provider, shipped: the report, then the dump, each a
 * capture of the file (capture.h), run as any other and waited for; a file
 * is removed once its store has it. A failed shipment is tried again after
 * RETRY_MS. Over the caps, the oldest crash's files are removed first, with
 * a warning; a crash being shipped is never removed under it.
 */
#include "crashes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "clock.h"
#include "crash_report.h"
#include "log.h"
#include "mem.h"
#include "launcher/capture/capture.h"
#include "launcher/capture/ops.h"
#include "launcher/exceptions/exceptions.h"
#include "launcher/runtime/port.h"
#include "launcher/runtime/watcher.h"

#define SCAN_MS 500
#define RETRY_MS 30000
#define KEEP_RECORDS 32   /* crashes listed by /crashes */
#define SHIP_WAIT_MS 1000 /* one wait on a shipment's operation; the watcher checks for a stop between */
#define REPORT_EXT ".crashreport.json"

enum file_state { F_NONE, F_KEPT, F_SHIPPED, F_DROPPED, F_FAILED };

struct cfile {
	char *path;         /* while in the volume */
	uint64_t bytes;
	enum file_state state;
	char *location;     /* where the store has it */
	char *error;
};

struct crash {
	char *base;         /* the dump's file name */
	uint64_t pid;
	char exe[64];
	long long unix_ms;  /* %t */
	bool complete, recorded;
	int signal, code;   /* -1: not known */
	struct crash_report rep;
	bool have_rep;
	struct exc_last exc;
	bool have_exc;
	struct cfile dump, report;
	long long retry_at;
};

struct crashes {
	struct crashes_config cfg;
	char *dir;
	pthread_mutex_t mu; /* the records; cond: a shipment ended */
	pthread_cond_t cv;
	struct crash **r;   /* oldest first */
	size_t n, cap;
	atomic_bool stop;
	struct watcher *watcher;
};

static void cfile_free(struct cfile *f)
{
	free(f->path);
	free(f->location);
	free(f->error);
}

static void crash_free(struct crash *k)
{
	free(k->base);
	crash_report_free(&k->rep);
	free(k->exc.type);
	free(k->exc.message);
	cfile_free(&k->dump);
	cfile_free(&k->report);
	free(k);
}

/* "crash-PID-T-EXE.dmp" (EXE may hold '-': it is last). */
static bool parse_name(const char *name, struct crash *k)
{
	size_t n = strlen(name), pl = strlen(CRASH_PREFIX);
	const char *p = name + pl;
	char *end;

	if (n <= pl + 4 || strncmp(name, CRASH_PREFIX, pl) != 0 || strcmp(name + n - 4, ".dmp") != 0)
		return false;
	if (*p < '0' || *p > '9')
		return false;
	k->pid = strtoull(p, &end, 10);
	if (*end != '-' || end[1] < '0' || end[1] > '9')
		return false;
	p = end + 1;
	k->unix_ms = strtoll(p, &end, 10);
	if (*end != '-' || k->unix_ms > 1LL << 40)
		return false;
	k->unix_ms *= 1000;
	p = end + 1;
	snprintf(k->exe, sizeof(k->exe), "%.*s", (int)(name + n - 4 - p < 63 ? name + n - 4 - p : 63), p);
	return true;
}

static uint64_t file_bytes(const char *path)
{
	struct stat st;

	return lstat(path, &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_size : 0;
}

/* The report's bytes read whole (capped), or NULL with why. */
static char *read_report(const char *path, size_t *len, struct err_msg *em)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK); /* a FIFO there must not hold us */
	struct stat st;
	char *b = NULL;
	ssize_t n = 0, r = 0;

	if (fd < 0) {
		err_set(em, DP_EIO, "cannot open it: %s", strerror(errno));
		return NULL;
	}
	if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
		err_set(em, DP_EINVAL, "not a regular file");
	else if (st.st_size == 0 || st.st_size > CRASH_REPORT_MAX)
		err_set(em, DP_ETOOBIG, "%lld bytes: empty, or over the cap of %u", (long long)st.st_size, CRASH_REPORT_MAX);
	else {
		b = mem_alloc((size_t)st.st_size + 1);
		while (n < st.st_size && (r = read(fd, b + n, (size_t)(st.st_size - n))) > 0)
			n += r;
		if (n != st.st_size) {
			err_set(em, DP_EIO, "read %zd of %lld bytes: %s", n, (long long)st.st_size,
				r < 0 ? strerror(errno) : "it shrank");
			free(b);
			b = NULL;
		}
	}
	close(fd);
	*len = (size_t)n;
	return b;
}

/* A complete crash: its report read, its exception found in the history, said in the log. */
static void record(struct crashes *c, struct crash *k)
{
	struct err_msg em;
	size_t len = 0;
	char *text = k->report.path ? read_report(k->report.path, &len, &em) : NULL;

	if (text && crash_report_parse(text, len, &k->rep, &em) == 0)
		k->have_rep = true;
	else if (k->report.path)
		log_warn("crash report not read", LOG_STR("event", "crash-report"), LOG_STR("file", k->report.path),
			 LOG_STR("error", em.text));
	free(text);
	k->have_exc = exceptions_last(c->cfg.exceptions, k->pid, k->have_rep ? k->rep.thread : 0,
				      k->unix_ms ? k->unix_ms + 1000 : 0, k->have_rep ? k->rep.exc_type : NULL, &k->exc) == 0;
	if (k->signal < 0 && k->have_rep && k->rep.exc_type)
		k->signal = SIGABRT; /* an unhandled exception: the runtime aborts once createdump is done */
	k->recorded = true;
	log_warn("app crashed", LOG_STR("event", "crash"), LOG_UINT("pid", k->pid),
		 LOG_STR("process", k->have_rep && k->rep.process ? k->rep.process : k->exe),
		 LOG_STR("exception", k->have_rep && k->rep.exc_type ? k->rep.exc_type : k->have_exc ? k->exc.type : ""),
		 LOG_STR("message", k->have_exc ? k->exc.message : ""), LOG_STR("dump", k->dump.path ? k->dump.path : ""),
		 LOG_STR("report", k->report.path ? k->report.path : ""));
}

static struct crash *find(struct crashes *c, const char *base)
{
	for (size_t i = 0; i < c->n; i++)
		if (strcmp(c->r[i]->base, base) == 0)
			return c->r[i];
	return NULL;
}

/* New crashes from the directory's names; files that appeared added to known ones (under c->mu). */
static void scan_dir(struct crashes *c)
{
	DIR *d = opendir(c->dir);
	struct dirent *de;

	if (d == NULL)
		return;
	while ((de = readdir(d)) != NULL) {
		char base[256];
		size_t n = strlen(de->d_name), rl = strlen(REPORT_EXT);
		bool report = n > rl && strcmp(de->d_name + n - rl, REPORT_EXT) == 0;
		struct crash *k, probe = { 0 };
		struct cfile *f;

		struct stat st;
		size_t at;

		if (strncmp(de->d_name, CRASH_PREFIX, strlen(CRASH_PREFIX)) != 0 || n >= sizeof(base))
			continue;
		snprintf(base, sizeof(base), "%.*s", (int)(report ? n - rl : n), de->d_name);
		/* what createdump writes is a regular file; anything else there (a link, a FIFO, a directory) is not
		 * evidence and is left alone, unlisted */
		if (!parse_name(base, &probe) || fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 ||
		    !S_ISREG(st.st_mode))
			continue;
		if ((k = find(c, base)) == NULL) {
			k = mem_zalloc(sizeof(*k));
			*k = probe;
			k->base = mem_strdup(base);
			k->signal = k->code = -1;
			MEM_GROW(c->r, c->cap, c->n + 1, 8);
			for (at = c->n; at > 0 && (c->r[at - 1]->unix_ms > k->unix_ms ||
						   (c->r[at - 1]->unix_ms == k->unix_ms && strcmp(c->r[at - 1]->base, base) > 0));
			     at--) /* oldest first, by the crash's time (not the directory's order) */
				c->r[at] = c->r[at - 1];
			c->r[at] = k;
			c->n++;
		}
		f = report ? &k->report : &k->dump;
		if (f->path == NULL && f->state == F_NONE) {
			f->path = mem_printf("%s/%s", c->dir, de->d_name);
			f->state = F_KEPT;
		}
	}
	closedir(d);
}

/* Complete: no runtime with its pid that attached before the crash is still attached. */
static void mark_complete(struct crashes *c)
{
	struct port_runtime *rt;
	size_t n = port_list(c->cfg.port, &rt);

	for (size_t i = 0; i < c->n; i++) {
		struct crash *k = c->r[i];
		bool running = false;

		for (size_t j = 0; j < n && !running; j++)
			running = rt[j].pid == k->pid && rt[j].attached_unix_ms <= k->unix_ms + 1000;
		if (!running)
			k->complete = true;
	}
	port_list_free(rt, n);
}

static void drop_file(struct cfile *f, const char *why)
{
	if (f->path == NULL)
		return;
	if (unlink(f->path) != 0 && errno != ENOENT)
		log_warn("crash file not removed", LOG_STR("event", "crash-drop"), LOG_STR("file", f->path),
			 LOG_STR("error", strerror(errno)));
	else
		log_warn(why, LOG_STR("event", "crash-dropped"), LOG_STR("file", f->path), LOG_UINT("bytes", f->bytes));
	free(f->path);
	f->path = NULL;
	f->state = F_DROPPED;
}

/* Crashes:MaxBytes, else half the volume's dump cap (room for a dump taken on demand beside), else 1 GiB. */
static uint64_t crash_max_bytes(const struct crashes_config *cfg)
{
	if (cfg->max_bytes)
		return cfg->max_bytes;
	if (cfg->dumps_limit && cfg->dumps_limit / 2 < CRASH_DEFAULT_BYTES)
		return cfg->dumps_limit / 2;
	return CRASH_DEFAULT_BYTES;
}

/* Over the count or the bytes: the oldest crash's files go first (under c->mu; shipping: the one being shipped). */
static void enforce_caps(struct crashes *c, const struct crash *shipping)
{
	unsigned max_count = c->cfg.max_count ? c->cfg.max_count : CRASH_DEFAULT_COUNT;
	uint64_t max_bytes = crash_max_bytes(&c->cfg), bytes = 0;
	size_t kept = 0, newest = c->n;

	for (size_t i = 0; i < c->n; i++) {
		struct crash *k = c->r[i];

		k->dump.bytes = k->dump.path ? file_bytes(k->dump.path) : k->dump.bytes;
		k->report.bytes = k->report.path ? file_bytes(k->report.path) : k->report.bytes;
		if (k->dump.path || k->report.path) {
			newest = i;
			kept++;
			bytes += (k->dump.path ? k->dump.bytes : 0) + (k->report.path ? k->report.bytes : 0);
		}
	}
	for (size_t i = 0; i < c->n && (kept > max_count || bytes > max_bytes); i++) {
		struct crash *k = c->r[i];

		if (k == shipping || i == newest || !(k->dump.path || k->report.path))
			continue; /* the newest crash is kept even alone over the bytes: the volume's own limit bounds it */
		bytes -= (k->dump.path ? k->dump.bytes : 0) + (k->report.path ? k->report.bytes : 0);
		kept--;
		drop_file(&k->report, "crash evidence removed: the volume's crash cap (Crashes:MaxCount, Crashes:MaxBytes)");
		drop_file(&k->dump, "crash evidence removed: the volume's crash cap (Crashes:MaxCount, Crashes:MaxBytes)");
	}
}

/* One file to the store, waited for (not under c->mu). 0, or the capture's failure with em. */
static int ship_file(struct crashes *c, struct crash *k, struct cfile *f, struct err_msg *em)
{
	struct capture cap = { .kind = CAPTURE_FILE, .egress = c->cfg.egress };
	char id[37], *loc = NULL, *err = NULL, *slash = strrchr(f->path, '/');
	int rc;

	cap.src_path = mem_strdup(f->path);
	cap.name = mem_strdup(slash ? slash + 1 : f->path);
	cap.target.pid = k->pid;
	cap.caller = mem_strdup("crash evidence");
	cap.tags = mem_strdup("crash");
	cap.op_needs = c->cfg.op_needs;
	if ((rc = capture_run(c->cfg.captures, &cap, NULL, id)) != 0)
		return err_set(em, rc, "the shipment did not start (another file is being shipped)");
	while ((rc = ops_wait(c->cfg.ops, id, SHIP_WAIT_MS, &loc, &err)) == DP_ETIMEDOUT && !atomic_load(&c->stop))
		;
	if (rc == 0) {
		pthread_mutex_lock(&c->mu);
		f->location = loc;
		loc = NULL;
		pthread_mutex_unlock(&c->mu);
	} else {
		err_set(em, rc, "%s", err ? err : rc == DP_ETIMEDOUT ? "the agent is stopping" : "the shipment failed");
	}
	free(loc);
	free(err);
	return rc;
}

/* A complete crash's files shipped, report first; each removed once stored. */
static void ship(struct crashes *c, struct crash *k)
{
	struct cfile *files[2] = { &k->report, &k->dump };

	for (int i = 0; i < 2 && !atomic_load(&c->stop); i++) {
		struct cfile *f = files[i];
		struct err_msg em;

		if (f->path == NULL || f->state != F_KEPT)
			continue;
		f->bytes = file_bytes(f->path);
		if (ship_file(c, k, f, &em) != 0) {
			pthread_mutex_lock(&c->mu);
			free(f->error);
			f->error = mem_strdup(em.text);
			k->retry_at = clock_ms() + RETRY_MS;
			pthread_mutex_unlock(&c->mu);
			log_warn("crash evidence not shipped", LOG_STR("event", "crash-ship"), LOG_STR("file", f->path),
				 LOG_STR("egress", c->cfg.egress->name), LOG_STR("error", em.text),
				 LOG_UINT("retryInSeconds", RETRY_MS / 1000));
			return;
		}
		log_info("crash evidence shipped", LOG_STR("event", "crash-shipped"), LOG_STR("file", f->path),
			 LOG_STR("egress", c->cfg.egress->name), LOG_STR("location", f->location), LOG_UINT("bytes", f->bytes));
		unlink(f->path);
		pthread_mutex_lock(&c->mu);
		free(f->path);
		f->path = NULL;
		f->state = F_SHIPPED;
		free(f->error);
		f->error = NULL;
		pthread_mutex_unlock(&c->mu);
	}
}

static void scan_once(void *arg)
{
	struct crashes *c = arg;
	struct crash *todo = NULL;
	long long now = clock_ms();

	pthread_mutex_lock(&c->mu);
	scan_dir(c);
	mark_complete(c);
	for (size_t i = 0; i < c->n; i++) {
		struct crash *k = c->r[i];

		if (k->complete && !k->recorded)
			record(c, k);
		if (todo == NULL && k->complete && c->cfg.egress && now >= k->retry_at &&
		    ((k->dump.path && k->dump.state == F_KEPT) || (k->report.path && k->report.state == F_KEPT)))
			todo = k;
	}
	enforce_caps(c, todo);
	while (c->n > KEEP_RECORDS && !(c->r[0]->dump.path || c->r[0]->report.path) && c->r[0] != todo) {
		crash_free(c->r[0]);
		memmove(c->r, c->r + 1, (c->n - 1) * sizeof(c->r[0]));
		c->n--;
	}
	pthread_mutex_unlock(&c->mu);
	if (todo)
		ship(c, todo); /* the record stays: only this thread removes records */
	pthread_mutex_lock(&c->mu);
	pthread_cond_broadcast(&c->cv);
	pthread_mutex_unlock(&c->mu);
}

struct crashes *crashes_start(const struct crashes_config *cfg)
{
	struct crashes *c = mem_zalloc(sizeof(*c));
	DIR *d = opendir(cfg->dir);

	c->cfg = *cfg;
	c->dir = mem_strdup(cfg->dir);
	if (d)
		closedir(d);
	else /* said, not refused: the volume may be mounted later; the crashes in it are seen then */
		log_warn("the dumps directory cannot be read: no crash there is seen until it can", LOG_STR("event", "crashes"),
			 LOG_STR("dir", cfg->dir), LOG_STR("error", strerror(errno)));
	pthread_mutex_init(&c->mu, NULL);
	pthread_cond_init(&c->cv, NULL);
	log_info("crashes watched", LOG_STR("event", "crashes"), LOG_STR("dir", c->dir),
		 LOG_STR("egress", cfg->egress ? cfg->egress->name : NULL),
		 LOG_UINT("maxCount", cfg->max_count ? cfg->max_count : CRASH_DEFAULT_COUNT),
		 LOG_UINT("maxBytes", crash_max_bytes(cfg)));
	c->watcher = watcher_start(SCAN_MS, scan_once, c);
	return c;
}

void crashes_free(struct crashes *c)
{
	if (c == NULL)
		return;
	atomic_store(&c->stop, true);
	watcher_stop(c->watcher);
	for (size_t i = 0; i < c->n; i++)
		crash_free(c->r[i]);
	free(c->r);
	free(c->dir);
	pthread_mutex_destroy(&c->mu);
	pthread_cond_destroy(&c->cv);
	free(c);
}

static json_t *file_json(const char *kind, const struct cfile *f)
{
	static const char *const states[] = { "none", "kept", "shipped", "dropped", "failed" };

	return json_pack("{s:s, s:s, s:o, s:I, s:o, s:o}", "kind", kind, "state",
			 f->error && f->state == F_KEPT ? "failed" : states[f->state], "file",
			 f->path ? json_string(f->path) : json_null(), "bytes", (json_int_t)f->bytes, "location",
			 f->location ? json_string(f->location) : json_null(), "error",
			 f->error ? json_string(f->error) : json_null());
}

json_t *crashes_json(struct crashes *c)
{
	json_t *a = json_array();

	if (c == NULL)
		return a;
	pthread_mutex_lock(&c->mu);
	for (size_t i = c->n; i-- > 0;) {
		struct crash *k = c->r[i];
		json_t *o, *frames = json_array(), *files = json_array(), *exc;
		char when[CLOCK_RFC3339_LEN];

		if (!k->recorded)
			continue;
		for (size_t f = 0; k->have_rep && f < k->rep.n_frames; f++)
			json_array_append_new(frames, json_string(k->rep.frames[f]));
		exc = json_pack("{s:o, s:o, s:o, s:o}", "typeName",
				k->have_rep && k->rep.exc_type ? json_string(k->rep.exc_type) :
				k->have_exc			? json_string(k->exc.type) :
								  json_null(),
				"message", k->have_exc ? json_string(k->exc.message) : json_null(), "hresult",
				k->have_rep && k->rep.hresult ? json_string(k->rep.hresult) : json_null(), "stack", frames);
		if (k->report.state != F_NONE)
			json_array_append_new(files, file_json("crashReport", &k->report));
		if (k->dump.state != F_NONE)
			json_array_append_new(files, file_json("dump", &k->dump));
		clock_rfc3339_at(when, k->unix_ms);
		o = json_pack("{s:I, s:s, s:s, s:o, s:o, s:o, s:o}", "pid", (json_int_t)k->pid, "processName",
			      k->have_rep && k->rep.process ? k->rep.process : k->exe, "time", when, "exitSignal",
			      k->signal >= 0 ? json_integer(k->signal) : json_null(), "exitCode",
			      k->code >= 0 ? json_integer(k->code) : json_null(), "exception", exc, "artifacts", files);
		json_array_append_new(a, o);
	}
	pthread_mutex_unlock(&c->mu);
	return a;
}

/* Whether every complete crash is done with: recorded, and shipped when there is somewhere to ship (under mu). */
static bool settled(const struct crashes *c)
{
	for (size_t i = 0; i < c->n; i++) {
		const struct crash *k = c->r[i];

		if (!k->complete || !k->recorded)
			return false;
		if (c->cfg.egress && ((k->dump.path && k->dump.state == F_KEPT && !k->dump.error) ||
				      (k->report.path && k->report.state == F_KEPT && !k->report.error)))
			return false;
	}
	return true;
}

void crashes_app_ended(struct crashes *c, uint64_t pid, int status, int timeout_ms)
{
	struct timespec until;
	bool signalled = WIFSIGNALED(status);

	if (c == NULL || !signalled)
		return;
	clock_deadline(&until, timeout_ms);
	pthread_mutex_lock(&c->mu);
	scan_dir(c); /* the files its death left, now: the watcher's next scan would be too late to say this */
	for (size_t i = 0; i < c->n; i++)
		if (c->r[i]->pid == pid && !c->r[i]->recorded)
			c->r[i]->signal = WTERMSIG(status);
	while (!settled(c) && pthread_cond_timedwait(&c->cv, &c->mu, &until) == 0)
		;
	if (!settled(c))
		log_warn("crash evidence not all shipped before exiting", LOG_STR("event", "crash-ship"),
			 LOG_UINT("waitedSeconds", (unsigned)(timeout_ms / 1000)));
	pthread_mutex_unlock(&c->mu);
}
