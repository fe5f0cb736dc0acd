/*
 * capture_src.c - where each kind of capture gets its bytes (capture_int.h):
 *  - a dump: createdump writes into a pipe the agent reads (dump.h);
 *  - a trace: a session's nettrace stream, relayed as it comes (trace.h);
 *  - live metrics and logs: a session whose events are turned into text as
 *    they arrive (metrics.h, logs.h); its nettrace bytes are dropped;
 *  - stacks, CPU profiles, GC heap snapshots, the exception history: made
 *    whole in memory first (stacks.h, profile.h, gcdump.h, exceptions.h),
 *    then handed out.
 */
#include "capture_int.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <sys/stat.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "launcher/gcdump/gcdump.h"
#include "log.h"
#include "mem.h"
#include "launcher/profile/profile.h"
#include "launcher/trace/stacks.h"

#define CHUNK 65536
#define STACKS_SAMPLE_MS 200 /* long enough for the sample profiler (1 ms) to see every thread */
#define OCTETS "application/octet-stream"
#define PPROF_CTYPE OCTETS /* what Go's net/http/pprof serves its profiles as */

/* ---- dumps ---- */

static int dump_src_start(struct job *j, struct err_msg *em)
{
	j->fifo = captures_staging_path(j->cs, j->c.target.pid);
	j->ctype = OCTETS;
	j->ext = NULL;
	return dump_start(j->cs->port, j->c.target.cookie, j->fifo, j->c.format, &j->dump, em);
}

static long dump_src_read(struct job *j, char *out, size_t max)
{
	return dump_read(j->dump, out, max);
}

static int dump_src_copy(struct job *j, int fd, uint64_t cap, const atomic_bool *cancel, uint64_t *n,
			 struct err_msg *em)
{
	return dump_copy(j->dump, fd, cap, cancel, n, em);
}

static const char *dump_src_error(struct job *j)
{
	return "the dump failed (createdump stopped, or the runtime reported an error)";
}

static void dump_src_end(struct job *j)
{
	dump_free(j->dump); /* the app runs on from here */
	j->dump = NULL;
	free(j->fifo);
	j->fifo = NULL;
}

/* ---- sessions relayed as they come ---- */

/* A trace's stopping event seen: the session stops, its stream ends whole. */
static int stop_event_cb(void *ctx, const struct nettrace_event *e)
{
	struct job *j = ctx;
	struct err_msg em;

	if (j->s == NULL || strcmp(e->meta->name, j->c.stop_event->event) != 0)
		return 0;
	if (e->meta->n_fields && evpayload_decode(j->stop_pl, e, &em) != 0)
		return 0;
	if (trace_stop_event_match(j->c.stop_event, e, e->meta->n_fields ? j->stop_pl : NULL))
		trace_stop_soon(j->s);
	return 0;
}

static int trace_src_start(struct job *j, struct err_msg *em)
{
	static const struct nettrace_callbacks stop_cb = { .event = stop_event_cb };

	j->ctype = OCTETS;
	j->ext = "nettrace";
	if (j->c.stop_event) {
		j->stop_pl = mem_zalloc(sizeof(*j->stop_pl));
		return trace_start_cb(j->cs->port, j->c.target.cookie, &j->c.session, j->c.duration_ms, j->stop, &stop_cb, j,
				      &j->s, em);
	}
	return trace_start(j->cs->port, j->c.target.cookie, &j->c.session, j->c.duration_ms, j->stop, &j->s, em);
}

static long trace_src_read(struct job *j, char *out, size_t max)
{
	return trace_read(j->s, out, max);
}

static const char *trace_src_error(struct job *j)
{
	return j->s ? trace_error(j->s) : "";
}

static void trace_src_end(struct job *j)
{
	trace_free(j->s);
	j->s = NULL;
	if (j->stop_pl) {
		evpayload_free(j->stop_pl);
		free(j->stop_pl);
		j->stop_pl = NULL;
	}
}

/* ---- sessions whose events become text ---- */

/*
 * The text the events became since the last call, then more of the session: as trace_read. at_end, when
 * not NULL, is called once the session has ended (a converter that held events back writes them then).
 */
static long conv_read(struct job *j, char *out, size_t max, void (*at_end)(void *))
{
	for (;;) {
		long n;

		if (j->out_off < j->out.len) {
			size_t k = j->out.len - j->out_off;

			if (k > max)
				k = max;
			memcpy(out, j->out.data + j->out_off, k);
			j->out_off += k;
			return (long)k;
		}
		buf_reset(&j->out);
		j->out_off = 0;
		if (j->conv_done)
			return trace_error(j->s)[0] ? -1 : 0;
		n = trace_read(j->s, j->scratch, CHUNK);
		if (n <= 0) {
			if (at_end)
				at_end(j->conv);
			j->conv_done = true; /* what the last events became goes out first */
		}
	}
}

/* Start a session whose events conv (writing into j->out) turns into text. */
static int conv_start(struct job *j, void *conv, const struct nettrace_callbacks *cb, struct err_msg *em)
{
	j->scratch = mem_alloc(CHUNK);
	j->conv = conv;
	return trace_start_cb(j->cs->port, j->c.target.cookie, &j->c.session, j->c.duration_ms, j->stop, cb, conv,
			      &j->s, em);
}

static void conv_end(struct job *j, void (*free_conv)(void *))
{
	trace_src_end(j);
	free_conv(j->conv);
	j->conv = NULL;
	buf_free(&j->out);
	free(j->scratch);
	j->scratch = NULL;
}

static int live_src_start(struct job *j, struct err_msg *em)
{
	j->ctype = "application/json-seq";
	j->ext = "metrics.json";
	buf_init(&j->out, 0);
	return conv_start(j, metrics_live_new(&j->c.sel, &j->out), &metrics_live_callbacks, em);
}

static long live_src_read(struct job *j, char *out, size_t max)
{
	return conv_read(j, out, max, NULL);
}

static void live_free_cb(void *l)
{
	metrics_live_free(l);
}

static void live_src_end(struct job *j)
{
	conv_end(j, live_free_cb);
}

static void logs_flush_cb(void *l)
{
	logs_flush(l);
}

static void logs_free_cb(void *l)
{
	logs_free(l);
}

static int logs_src_start(struct job *j, struct err_msg *em)
{
	static const char *const ctypes[] = { "application/x-ndjson", "application/json-seq",
					      "text/plain; charset=utf-8" };
	static const char *const exts[] = { "log.json", "log.json", "txt" };

	j->ctype = ctypes[j->c.format];
	j->ext = exts[j->c.format];
	buf_init(&j->out, 0);
	return conv_start(j, logs_new(&j->c.filter, (enum logs_format)j->c.format, &j->out), &logs_callbacks, em);
}

static long logs_src_read(struct job *j, char *out, size_t max)
{
	return conv_read(j, out, max, logs_flush_cb);
}

static void logs_src_end(struct job *j)
{
	conv_end(j, logs_free_cb);
}

/* ---- artifacts made whole in memory ---- */

static long whole_read(struct job *j, char *out, size_t max)
{
	size_t k = j->out.len - j->out_off;

	if (k > max)
		k = max;
	memcpy(out, j->out.data + j->out_off, k);
	j->out_off += k;
	return (long)k;
}

static const char *whole_error(struct job *j)
{
	return "";
}

static void whole_end(struct job *j)
{
	buf_free(&j->out);
}

static void put_json(struct buf *out, json_t *v)
{
	char *t = json_dumps(v, JSON_COMPACT | JSON_PRESERVE_ORDER);

	json_decref(v);
	buf_puts(out, t ? t : "");
	free(t);
}

static int stacks_src_start(struct job *j, struct err_msg *em)
{
	static const char *const exts[] = { "stacks.txt", "stacks.json", "stacks.speedscope.json" };
	static const char *const ctypes[] = { "text/plain; charset=utf-8", "application/json",
					      "application/speedscope+json" };
	struct stacks *st = NULL;
	int rc = stacks_capture(j->cs->port, j->c.target.cookie, STACKS_SAMPLE_MS, &st, em);

	buf_init(&j->out, 0);
	if (rc != 0)
		return rc;
	stacks_name_threads(st, j->c.target.pid, j->c.target.have_info ? j->c.target.info.command_line : NULL);
	if (j->c.format == CAPTURE_STACKS_JSON)
		put_json(&j->out, stacks_json(st));
	else if (j->c.format == CAPTURE_STACKS_SPEEDSCOPE)
		stacks_speedscope(st, &j->out);
	else
		stacks_text(st, &j->out);
	j->ext = exts[j->c.format];
	j->ctype = ctypes[j->c.format];
	j->inline_ = j->c.format != CAPTURE_STACKS_SPEEDSCOPE;
	stacks_free(st);
	return 0;
}

static int profile_src_start(struct job *j, struct err_msg *em)
{
	static const char *const names[] = { "folded", "speedscope", "flamegraph", "perfscript", "pprof" };
	static const char *const exts[] = { "folded.txt", "speedscope.json", "svg", "perfscript.txt", "pb.gz" };
	static const char *const ctypes[] = { "text/plain; charset=utf-8", "application/json", "image/svg+xml",
					      "text/plain; charset=utf-8", PPROF_CTYPE };
	struct profile *prof = NULL;
	struct timespec t0, t1;
	char title[96];
	int rc = j->c.engine == PROFILE_PERF
			 ? profile_perf_capture(j->cs->port, j->c.target.cookie, j->c.target.pid, &j->c.perf,
						j->c.duration_ms, j->stop, &prof, em)
			 : profile_capture(j->cs->port, j->c.target.cookie, j->c.duration_ms, j->stop, &prof, em);

	buf_init(&j->out, 0);
	if (rc == 0 && job_cancelled(j)) {
		profile_free(prof);
		rc = DP_ECANCELED;
	}
	if (rc != 0)
		return job_cancelled(j) ? err_set(em, DP_ECANCELED, "cancelled") : rc;
	snprintf(title, sizeof(title), "CPU, pid %llu%s", (unsigned long long)j->c.target.pid,
		 j->c.engine == PROFILE_PERF ? " (perf events)" : "");
	clock_gettime(CLOCK_MONOTONIC, &t0);
	rc = profile_write(prof, (enum profile_format)j->c.format, title, &j->out, em);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	/* what each format costs to write (bench/pprof_size.sh reads it) */
	log_debug("profile written", LOG_STR("event", "profile-written"), LOG_STR("format", names[j->c.format]),
		  LOG_UINT("samples", profile_samples(prof)), LOG_UINT("bytes", j->out.len),
		  LOG_INT("writeUs", (t1.tv_sec - t0.tv_sec) * 1000000 + (t1.tv_nsec - t0.tv_nsec) / 1000));
	j->ext = exts[j->c.format];
	j->ctype = ctypes[j->c.format];
	j->inline_ = j->c.format == PROFILE_FLAMEGRAPH;
	profile_free(prof);
	return rc;
}

static int gcdump_src_start(struct job *j, struct err_msg *em)
{
	struct gcdump *g = NULL;
	bool raw = j->c.format == CAPTURE_GCDUMP_NETTRACE, file = j->c.format == CAPTURE_GCDUMP_FILE;
	int rc;

	buf_init(&j->out, 0);
	exceptions_pause(j->cs->exceptions, j->c.target.cookie); /* the types named again (exceptions.h) */
	rc = gcdump_capture(j->cs->port, j->c.target.cookie, j->c.target.pid, raw ? &j->out : NULL, file, &g, em);
	exceptions_resume(j->cs->exceptions, j->c.target.cookie);
	if (rc != 0)
		return rc;
	if (j->c.format == CAPTURE_GCDUMP_TEXT) {
		gcdump_text(g, j->c.top, &j->out);
		j->ext = "gcdump.txt";
		j->ctype = "text/plain; charset=utf-8";
	} else if (j->c.format == CAPTURE_GCDUMP_JSON) {
		put_json(&j->out, gcdump_json(g, j->c.top));
		j->ext = "gcdump.json";
		j->ctype = "application/json";
	} else if (j->c.format == CAPTURE_GCDUMP_PPROF) {
		rc = gcdump_pprof(g, j->c.top, &j->out, em);
		j->ext = "gcdump.pb.gz";
		j->ctype = PPROF_CTYPE;
	} else if (file) {
		rc = gcdump_file(g, &j->out, em); /* dotnet-monitor's: {time}_{pid}.gcdump, application/octet-stream */
		j->ext = "gcdump";
		j->ctype = OCTETS;
	} else {
		j->ext = "gcdump.nettrace";
		j->ctype = OCTETS;
	}
	j->inline_ = j->c.format == CAPTURE_GCDUMP_TEXT || j->c.format == CAPTURE_GCDUMP_JSON;
	gcdump_free(g);
	return rc;
}

static int exceptions_src_start(struct job *j, struct err_msg *em)
{
	static const char *const ctypes[] = { "application/x-ndjson", "application/json-seq",
					      "text/plain; charset=utf-8" };
	static const char *const exts[] = { "exceptions.json", "exceptions.json", "exceptions.txt" };

	buf_init(&j->out, 0);
	if (j->cs->exceptions == NULL)
		return err_set(em, DP_ENOTFOUND, "the exception history is turned off on this agent");
	j->ctype = ctypes[j->c.format];
	j->ext = exts[j->c.format];
	j->inline_ = true;
	return exceptions_write(j->cs->exceptions, j->c.target.cookie, j->c.target.pid,
				j->c.target.have_info ? j->c.target.info.command_line : NULL, &j->c.exc,
				(enum exc_format)j->c.format, &j->out, em);
}

/* ---- a file already written, shipped as it is (a crash's evidence) ---- */

/* A regular file only: the directory is the app's, and a FIFO or a link there must not hold or mislead us. */
static int file_src_start(struct job *j, struct err_msg *em)
{
	struct stat st;

	j->ctype = OCTETS;
	j->ext = "";
	if ((j->src_fd = open(j->c.src_path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK)) < 0)
		return err_set(em, DP_EIO, "%s: %s", j->c.src_path, strerror(errno));
	if (fstat(j->src_fd, &st) != 0 || !S_ISREG(st.st_mode))
		return err_set(em, DP_EIO, "%s: not a regular file", j->c.src_path);
	return 0;
}

static long file_src_read(struct job *j, char *out, size_t max)
{
	ssize_t n;

	while ((n = read(j->src_fd, out, max)) < 0 && errno == EINTR)
		;
	return n < 0 ? -1 : (long)n;
}

static const char *file_src_error(struct job *j)
{
	return "the file could not be read";
}

static void file_src_end(struct job *j)
{
	if (j->src_fd >= 0)
		close(j->src_fd);
	j->src_fd = -1;
}

/* dotnet-monitor's default limits: one dump, one GC dump, one stacks capture; three traces, metrics, log streams */
const struct capture_kind_def capture_kinds[CAPTURE_KINDS] = {
	[CAPTURE_DUMP] = { "dump", "a dump is already being taken or downloaded; try again when it is done", 1,
			   CAPTURE_DUMP, false, false, dump_src_start, dump_src_read, dump_src_copy, dump_src_error,
			   dump_src_end },
	[CAPTURE_TRACE] = { "trace", "3 traces are already running; try again when one is done", 3, CAPTURE_TRACE,
			    true, false, trace_src_start, trace_src_read, NULL, trace_src_error, trace_src_end },
	[CAPTURE_PROFILE] = { "profile", "3 traces are already running; try again when one is done", 3, CAPTURE_TRACE,
			      true, true, profile_src_start, whole_read, NULL, whole_error, whole_end },
	[CAPTURE_LIVEMETRICS] = { "livemetrics", "3 live metrics streams are already running; try again when one is "
				  "done", 3, CAPTURE_LIVEMETRICS, true, false, live_src_start, live_src_read, NULL,
				  trace_src_error, live_src_end },
	[CAPTURE_LOGS] = { "logs", "3 log streams are already running; try again when one is done", 3, CAPTURE_LOGS,
			   true, false, logs_src_start, logs_src_read, NULL, trace_src_error, logs_src_end },
	[CAPTURE_STACKS] = { "stacks", "stacks are already being taken; try again when that is done", 1,
			     CAPTURE_STACKS, false, true, stacks_src_start, whole_read, NULL, whole_error, whole_end },
	[CAPTURE_GCDUMP] = { "gcdump", "a GC heap snapshot is already being taken; try again when that is done", 1,
			     CAPTURE_GCDUMP, false, true, gcdump_src_start, whole_read, NULL, whole_error, whole_end },
	[CAPTURE_EXCEPTIONS] = { "exceptions", "3 exception histories are already being written; try again when one "
				 "is done", 3, CAPTURE_EXCEPTIONS, false, true, exceptions_src_start, whole_read, NULL,
				 whole_error, whole_end },
	[CAPTURE_FILE] = { "file", "a file is already being shipped; try again when that is done", 1, CAPTURE_FILE, false,
			   false, file_src_start, file_src_read, NULL, file_src_error, file_src_end },
};
