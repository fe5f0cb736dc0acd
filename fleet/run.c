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
 *
 * One job's capture is run_capture.c's, the progress run_progress.c's; this
 * file plans the jobs, runs the pool and writes the record.
 */
#include "run_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "call.h"
#include "clock.h"
#include "mem.h"
#include "pool.h"

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

/* ---- progress ---- */

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
			run_log_event(r, j);
		pthread_mutex_unlock(&r->mu);

		path = run_job_path(r, j);
		rc = r->c->egress ? run_capture_to_egress(r, j, path, &em) : run_capture_to_file(r, j, path, &em);
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
			run_log_event(r, j);
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
	if (r->c->body) { /* POST: the body said what (trace's providers, exceptions' filters), JSON both */
		json_t *b = json_loadb(r->c->body, r->c->body_len, 0, NULL);

		json_object_set_new(m, "method", json_string(r->c->method));
		if (b)
			json_object_set_new(m, "body", b);
	}
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
		json_object_set_new(it, "status", json_string(run_state_names[j->st]));
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
		run_human_bytes(atomic_load(&j->bytes), b, sizeof(b));
		fprintf(f, "%-44s %7s  %-11s %10s %8.1f  %s\n", j->a->name, pid, run_state_names[j->st],
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
			run_log_event(&r, &r.jobs[i]);
	if (o->tty)
		pthread_create(&prog, NULL, run_progress_main, &r);
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
