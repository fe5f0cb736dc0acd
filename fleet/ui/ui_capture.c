/*
 * ui_capture.c - the captures `diagport ui` runs for the page: one thread
 * each, the agent called as `diagport capture` calls it (call.c, the
 * agent's own token, never the page's), the answer streamed into
 * DIR/.cN.partial and renamed to its name only when whole (run.h's
 * fleet_publish_file); a failed or cancelled one leaves nothing. The page
 * lists them (bytes so far while running), downloads the files, cancels.
 *
 * Each kind asks for the format the page draws: a CPU profile as folded
 * stacks, /stacks as JSON, a GC heap snapshot as its table of types; a dump
 * and a trace are files to download. At most UI_MAX_RUNNING at once and
 * UI_MAX_CAPTURES kept; each file has its kind's cap, and none may leave
 * the directory's filesystem its last FLEET_RESERVE_PCT percent.
 */
#include "ui_int.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "fleet/call.h"
#include "fleet/run.h"
#include "mem.h"

#define MIB ((uint64_t)1 << 20)
#define GIB ((uint64_t)1 << 30)
#define RESERVE_EVERY (8 * MIB) /* the free space looked at again after this many bytes */

struct ui_kind {
	const char *name;
	const char *route;  /* the agent's path and query, without pid */
	const char *accept;
	const char *ext;
	const char *ctype;
	bool duration;      /* takes durationSeconds */
	long timeout_s;     /* beyond the duration */
	uint64_t max_bytes; /* 0: only the filesystem's reserve */
};

static const struct ui_kind kinds[] = {
	{ "cpuprofile", "/trace?profile=Cpu&format=folded", NULL, ".folded", "text/plain; charset=utf-8", true, 300,
	  4 * GIB },
	{ "stacks", "/stacks?format=json", NULL, ".stacks.json", "application/json", false, 120, 64 * MIB },
	{ "gcdump", "/gcdump?format=stats", "application/json", ".gcstats.json", "application/json", false, 600,
	  64 * MIB },
	{ "dump", "/dump", NULL, ".dmp", "application/octet-stream", false, 1800, 0 },
	{ "trace", "/trace", NULL, ".nettrace", "application/octet-stream", true, 300, 16 * GIB },
	{ "exceptions", "/exceptions", "application/x-ndjson", ".exceptions.ndjson", "application/x-ndjson", false, 120,
	  64 * MIB },
};
#define N_KINDS (sizeof(kinds) / sizeof(kinds[0]))

enum cap_state { CAP_RUNNING, CAP_SUCCEEDED, CAP_FAILED, CAP_CANCELLED };
static const char *const state_names[] = { "running", "succeeded", "failed", "cancelled" };

struct ui_cap {
	struct ui *u;
	unsigned id;
	const struct ui_kind *k;
	char *target, *path, *file_name, *tmp;
	long pid, duration_s;
	char *detail;             /* "engine perf", "type Full": what else was asked, for the list */
	enum cap_state state;     /* under u->mu */
	char error[512];          /* failed: why */
	_Atomic uint64_t bytes;
	uint64_t since_check;     /* bytes since the free space was looked at */
	char started[CLOCK_RFC3339_LEN], finished[CLOCK_RFC3339_LEN];
	atomic_bool cancel;
	struct ui_snap *snap;     /* held while running: the agent below lives in it */
	const struct fleet_agent *agent;
	int fd;
};

static void cap_free(struct ui_cap *c)
{
	free(c->target);
	free(c->path);
	free(c->file_name);
	free(c->tmp);
	free(c->detail);
	free(c);
}

static const struct ui_kind *kind_named(const char *name)
{
	for (size_t i = 0; name && i < N_KINDS; i++)
		if (strcmp(kinds[i].name, name) == 0)
			return &kinds[i];
	return NULL;
}

/* ---- one capture's thread ---- */

static int to_file(void *ctx, const char *p, size_t n, struct err_msg *em)
{
	struct ui_cap *c = ctx;
	uint64_t had = atomic_load(&c->bytes);

	if (c->k->max_bytes && had + n > c->k->max_bytes)
		return err_set(em, DP_ETOOBIG, "the artifact is larger than %llu MiB, this kind's cap",
			       (unsigned long long)(c->k->max_bytes / MIB));
	if ((c->since_check += n) >= RESERVE_EVERY) {
		struct statvfs v;

		c->since_check = 0;
		if (fstatvfs(c->fd, &v) == 0) {
			uint64_t size = (uint64_t)v.f_blocks * v.f_frsize, avail = (uint64_t)v.f_bavail * v.f_frsize;
			uint64_t reserve = size / 100 * FLEET_RESERVE_PCT;

			if (reserve > FLEET_RESERVE_MAX)
				reserve = FLEET_RESERVE_MAX;
			if (avail < reserve + n)
				return err_set(em, DP_ETOOBIG, "stopped at %llu MiB: the filesystem of %s would have less "
					       "than %d%% of its size free (at most 1 GiB); start the UI with -o on a disk "
					       "with room", (unsigned long long)(had / MIB), c->u->dir, FLEET_RESERVE_PCT);
		}
	}
	while (n > 0) {
		ssize_t w = write(c->fd, p, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return err_set(em, DP_EIO, "writing %s: %s", c->tmp, w < 0 ? strerror(errno) : "nothing written");
		p += w;
		n -= (size_t)w;
		atomic_fetch_add(&c->bytes, (uint64_t)w);
	}
	return 0;
}

static void *cap_main(void *arg)
{
	struct ui_cap *c = arg;
	struct ui *u = c->u;
	struct fleet_call call = { .agent = c->agent, .caller = c->snap->set.caller, .method = "GET", .path = c->path,
				   .accept = c->k->accept, .timeout_ms = (c->duration_s + c->k->timeout_s) * 1000,
				   .floor_after_ms = c->duration_s * 1000, .sink = to_file, .ctx = c,
				   .cancel = &c->cancel };
	struct err_msg em = { .text = "" };
	char *name = mem_strdup(c->file_name); /* published under a name of its own, swapped in under the lock */
	enum cap_state st;
	int rc;

	if ((c->fd = open(c->tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600)) < 0) {
		rc = err_set(&em, DP_EIO, "cannot create %s: %s", c->tmp, strerror(errno));
	} else {
		rc = fleet_call_run(&call, &em);
		if (close(c->fd) != 0 && rc == 0)
			rc = err_set(&em, DP_EIO, "writing %s: %s", c->tmp, strerror(errno));
		if (rc == 0)
			rc = fleet_publish_file(u->dir, c->tmp, &name, &em);
		if (rc != 0)
			unlink(c->tmp);
	}
	st = rc == 0 ? CAP_SUCCEEDED : atomic_load(&c->cancel) ? CAP_CANCELLED : CAP_FAILED;
	fleet_safe_text(em.text);
	pthread_mutex_lock(&u->mu);
	c->state = st;
	free(c->file_name);
	c->file_name = name;
	if (st == CAP_FAILED)
		snprintf(c->error, sizeof(c->error), "%s", em.text[0] ? em.text : "failed");
	clock_rfc3339(c->finished, 3);
	ui_snap_put(c->snap);
	c->snap = NULL;
	c->agent = NULL;
	u->running--;
	pthread_cond_broadcast(&u->cv);
	pthread_mutex_unlock(&u->mu);
	return NULL;
}

/* ---- the list ---- */

static json_t *cap_json(const struct ui_cap *c)
{
	char id[16];
	json_t *o;

	snprintf(id, sizeof(id), "c%u", c->id);
	o = json_pack("{s:s, s:s, s:I, s:s, s:s, s:I, s:s, s:s, s:s}", "id", id, "target", c->target, "pid",
		      (json_int_t)c->pid, "kind", c->k->name, "state", state_names[c->state], "bytes",
		      (json_int_t)atomic_load(&c->bytes), "startedAt", c->started, "fileName", c->file_name,
		      "contentType", c->k->ctype);
	if (c->state != CAP_RUNNING)
		json_object_set_new(o, "finishedAt", json_string(c->finished));
	if (c->k->duration)
		json_object_set_new(o, "durationSeconds", json_integer(c->duration_s));
	if (c->detail)
		json_object_set_new(o, "detail", json_string(c->detail));
	if (c->state == CAP_FAILED)
		json_object_set_new(o, "error", json_string(c->error));
	return o;
}

/* The capture named by r's path ("/api/captures/c7..."), or NULL after a 404. Called with u->mu held. */
static struct ui_cap *find(struct ui *u, struct httpd_req *r, size_t *at, const char **rest)
{
	const char *p = httpd_path(r) + strlen("/api/captures/");
	char *end;
	unsigned long id;

	if (*p == 'c' && p[1] >= '0' && p[1] <= '9') {
		errno = 0;
		id = strtoul(p + 1, &end, 10);
		for (size_t i = 0; errno == 0 && i < u->n_caps; i++)
			if (u->caps[i]->id == id) {
				*at = i;
				*rest = end;
				return u->caps[i];
			}
	}
	return NULL;
}

/* Make room for one more in the list: forget the oldest finished capture (its file removed). Under u->mu. */
static bool make_room(struct ui *u)
{
	if (u->n_caps < UI_MAX_CAPTURES)
		return true;
	for (size_t i = 0; i < u->n_caps; i++) {
		struct ui_cap *c = u->caps[i];

		if (c->state == CAP_RUNNING)
			continue;
		if (c->state == CAP_SUCCEEDED) {
			char *f = mem_printf("%s/%s", u->dir, c->file_name);

			unlink(f);
			free(f);
		}
		cap_free(c);
		memmove(&u->caps[i], &u->caps[i + 1], (u->n_caps - i - 1) * sizeof(*u->caps));
		u->n_caps--;
		return true;
	}
	return false;
}

/* ---- routes ---- */

static bool word_ok(const char *v, const char *const *allowed)
{
	for (size_t i = 0; allowed[i]; i++)
		if (strcmp(v, allowed[i]) == 0)
			return true;
	return false;
}

/* The agent's path for c and what was asked beyond the kind: 0, or 400 answered on r naming the field. */
static int request_of(struct ui_cap *c, const json_t *body, struct httpd_req *r)
{
	static const char *const engines[] = { "eventpipe", "perf", NULL };
	static const char *const types[] = { "Mini", "Full", "WithHeap", "Triage", NULL };
	const char *engine = json_string_value(json_object_get(body, "engine"));
	const char *type = json_string_value(json_object_get(body, "type"));
	const char *profile = json_string_value(json_object_get(body, "profile"));
	struct buf b;

	if (engine && (strcmp(c->k->name, "cpuprofile") != 0 || !word_ok(engine, engines)))
		return httpd_problem(r, 400, "Bad Request", "$.engine: '%.32s' is not eventpipe or perf (cpuprofile only)",
				     engine), -1;
	if (type && (strcmp(c->k->name, "dump") != 0 || !word_ok(type, types)))
		return httpd_problem(r, 400, "Bad Request", "$.type: '%.32s' is not Mini, Full, WithHeap or Triage (dump "
				     "only)", type), -1;
	if (profile && (strcmp(c->k->name, "trace") != 0 || !*profile || strlen(profile) > 200 ||
			strspn(profile, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz,") != strlen(profile)))
		return httpd_problem(r, 400, "Bad Request", "$.profile: a trace's profiles are names like "
				     "Cpu,Http,Metrics (trace only)"), -1;
	buf_init(&b, 4096);
	buf_printf(&b, "%s%spid=%ld", c->k->route, strchr(c->k->route, '?') ? "&" : "?", c->pid);
	if (c->k->duration)
		buf_printf(&b, "&durationSeconds=%ld", c->duration_s);
	if (strcmp(c->k->name, "trace") == 0)
		buf_printf(&b, "&profile=%s", profile ? profile : "Cpu,Http,Metrics");
	if (strcmp(c->k->name, "dump") == 0)
		buf_printf(&b, "&type=%s", type ? type : "WithHeap");
	if (engine && strcmp(engine, "perf") == 0)
		buf_puts(&b, "&engine=perf");
	c->path = buf_steal(&b, NULL);
	if (engine || type || profile)
		c->detail = mem_printf("%s%s%s%s%s%s", engine ? "engine " : "", engine ? engine : "",
				       type ? "type " : "", type ? type : "", profile ? "profile " : "", profile ? profile : "");
	return 0;
}

void ui_route_capture_start(struct ui *u, struct httpd_req *r)
{
	size_t len;
	const char *text = httpd_body(r, &len);
	json_error_t jerr;
	json_t *body = text ? json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr) : NULL;
	const json_t *dur;
	struct ui_cap *c = mem_zalloc(sizeof(*c));
	struct ui_snap *snap = NULL;
	pthread_attr_t attr;
	pthread_t th;

	c->u = u;
	if (!json_is_object(body)) {
		httpd_problem(r, 400, "Bad Request", "the body is not a JSON object: %s", body ? "" : text ? jerr.text : "none");
		goto fail;
	}
	if ((c->k = kind_named(json_string_value(json_object_get(body, "kind")))) == NULL) {
		httpd_problem(r, 400, "Bad Request", "$.kind: not cpuprofile, stacks, gcdump, dump, trace or exceptions");
		goto fail;
	}
	c->pid = (long)json_integer_value(json_object_get(body, "pid"));
	if (!json_is_integer(json_object_get(body, "pid")) || c->pid <= 0 || c->pid > INT32_MAX) {
		httpd_problem(r, 400, "Bad Request", "$.pid: a process id (a positive number) is needed");
		goto fail;
	}
	dur = json_object_get(body, "durationSeconds");
	c->duration_s = c->k->duration ? 10 : 0;
	if (dur && (!c->k->duration || !json_is_integer(dur) || json_integer_value(dur) < 1 ||
		    json_integer_value(dur) > 3600)) {
		httpd_problem(r, 400, "Bad Request", "$.durationSeconds: 1 to 3600 seconds, for cpuprofile and trace only");
		goto fail;
	}
	if (dur)
		c->duration_s = (long)json_integer_value(dur);
	if (request_of(c, body, r) != 0)
		goto fail;
	snap = ui_snap_get(u);
	if ((c->agent = ui_snap_agent(snap, json_string_value(json_object_get(body, "target")), r)) == NULL)
		goto fail;
	c->target = mem_strdup(c->agent->name);
	c->file_name = fleet_artifact_name(c->agent, (uint64_t)c->pid, c->k->name, c->k->ext); /* as `capture` names it */
	clock_rfc3339(c->started, 3);
	pthread_mutex_lock(&u->mu);
	if (u->running >= UI_MAX_RUNNING || !make_room(u)) {
		pthread_mutex_unlock(&u->mu);
		httpd_problem(r, 429, "Too Many Requests", "%u captures are running; wait for one to end or cancel one",
			      u->running);
		goto fail;
	}
	c->id = ++u->next_id;
	c->tmp = mem_printf("%s/.c%u.partial", u->dir, c->id);
	c->snap = snap;
	snap = NULL;
	MEM_GROW(u->caps, u->caps_cap, u->n_caps + 1, 16);
	u->caps[u->n_caps++] = c;
	u->running++;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	if (pthread_create(&th, &attr, cap_main, c) != 0)
		DP_FATAL("pthread_create failed");
	pthread_attr_destroy(&attr);
	httpd_send_json(r, 201, cap_json(c));
	pthread_mutex_unlock(&u->mu);
	json_decref(body);
	return;
fail:
	ui_snap_put(snap);
	json_decref(body);
	cap_free(c);
}

void ui_route_captures(struct ui *u, struct httpd_req *r)
{
	json_t *items = json_array();

	pthread_mutex_lock(&u->mu);
	for (size_t i = u->n_caps; i-- > 0;)
		json_array_append_new(items, cap_json(u->caps[i]));
	pthread_mutex_unlock(&u->mu);
	httpd_send_json(r, 200, json_pack("{s:o}", "items", items));
}

void ui_route_capture_one(struct ui *u, struct httpd_req *r)
{
	const char *m = httpd_method(r), *rest = "", *dl = httpd_query(r, "download");
	size_t at = 0;
	struct ui_cap *c;
	struct stat st;
	char *path;
	int fd;

	pthread_mutex_lock(&u->mu);
	if ((c = find(u, r, &at, &rest)) == NULL || (*rest && strcmp(rest, "/data") != 0) ||
	    (*rest && strcmp(m, "GET") != 0)) {
		pthread_mutex_unlock(&u->mu);
		httpd_problem(r, 404, "Not Found", "no such capture (the list keeps the newest %d)", UI_MAX_CAPTURES);
		return;
	}
	if (strcmp(m, "DELETE") == 0) {
		if (c->state == CAP_RUNNING) {
			atomic_store(&c->cancel, true);
		} else {
			if (c->state == CAP_SUCCEEDED) {
				path = mem_printf("%s/%s", u->dir, c->file_name);
				unlink(path);
				free(path);
			}
			cap_free(c);
			memmove(&u->caps[at], &u->caps[at + 1], (u->n_caps - at - 1) * sizeof(*u->caps));
			u->n_caps--;
		}
		pthread_mutex_unlock(&u->mu);
		httpd_send(r, 204, "text/plain", "", 0);
		return;
	}
	if (*rest == '\0') {
		httpd_send_json(r, 200, cap_json(c));
		pthread_mutex_unlock(&u->mu);
		return;
	}
	if (c->state != CAP_SUCCEEDED) {
		pthread_mutex_unlock(&u->mu);
		httpd_problem(r, 409, "Conflict", "the capture has no file: it is %s", state_names[c->state]);
		return;
	}
	path = mem_printf("%s/%s", u->dir, c->file_name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	free(path);
	if (fd < 0 || fstat(fd, &st) != 0) {
		pthread_mutex_unlock(&u->mu);
		if (fd >= 0)
			close(fd);
		httpd_problem(r, 500, "Internal Server Error", "the capture's file cannot be read: %s", strerror(errno));
		return;
	}
	httpd_send_fd(r, 200, c->k->ctype, fd, (uint64_t)st.st_size,
		      dl && strcmp(dl, "1") == 0 ? c->file_name : NULL);
	pthread_mutex_unlock(&u->mu);
}

void ui_captures_end(struct ui *u)
{
	pthread_mutex_lock(&u->mu);
	for (size_t i = 0; i < u->n_caps; i++)
		atomic_store(&u->caps[i]->cancel, true);
	while (u->running > 0)
		pthread_cond_wait(&u->cv, &u->mu);
	for (size_t i = 0; i < u->n_caps; i++) {
		if (u->own_dir && u->caps[i]->state == CAP_SUCCEEDED) {
			char *f = mem_printf("%s/%s", u->dir, u->caps[i]->file_name);

			unlink(f);
			free(f);
		}
		cap_free(u->caps[i]);
	}
	free(u->caps);
	u->caps = NULL;
	u->n_caps = 0;
	pthread_mutex_unlock(&u->mu);
}
