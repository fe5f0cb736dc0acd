/*
 * run_progress.c - what a fleet capture (run.c) shows while it runs: on a
 * terminal, one line per target that started (as many as fit) and the
 * total, redrawn four times a second by a thread of its own; otherwise one
 * plain line on stderr per event. Sizes as people read them.
 */
#include "run_int.h"

#include <stdio.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "buf.h"

const char *const run_state_names[] = { "queued", "running", "succeeded", "failed", "cancelled", "unavailable" };

void run_human_bytes(uint64_t n, char *out, size_t len)
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
void run_log_event(const struct run *r, const struct job *j)
{
	char t[CLOCK_RFC3339_LEN], who[512], b[32];
	double secs = (j->t1 - j->t0) / 1000.0;

	clock_rfc3339(t, 3);
	job_label(r, j, who, sizeof(who));
	run_human_bytes(atomic_load(&j->bytes), b, sizeof(b));
	if (j->st == J_RUNNING)
		fprintf(stderr, "%s %s: %s started\n", t, who, r->c->kind);
	else if (j->st == J_DONE)
		fprintf(stderr, "%s %s: %s succeeded, %s in %.1f s, %s\n", t, who, r->c->kind, b, secs,
			j->file ? j->file : j->location);
	else
		fprintf(stderr, "%s %s: %s %s: %s\n", t, who, r->c->kind, run_state_names[j->st], j->error);
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
		run_human_bytes(n, b, sizeof(b));
		run_human_bytes(js > 0.05 ? (uint64_t)(n / js) : 0, rate, sizeof(rate));
		buf_printf(&out, "%-48.48s %-10s %12s %12s/s %6.1fs%s%.60s\n", who, run_state_names[j->st], b, rate, js,
			   j->error ? "  " : "", j->error ? j->error : "");
	}
	run_human_bytes(total, b, sizeof(b));
	run_human_bytes(secs > 0.05 ? (uint64_t)(total / secs) : 0, rate, sizeof(rate));
	buf_printf(&out, "%s: %u/%zu done (%u failed, %u cancelled), %u running, %u queued, %s at %s/s, %.1f s\n",
		   r->c->kind, counts[J_DONE] + counts[J_FAILED] + counts[J_CANCELLED], r->n - counts[J_UNAVAILABLE],
		   counts[J_FAILED], counts[J_CANCELLED], counts[J_RUNNING], counts[J_QUEUED], b, rate, secs);
	r->drawn = shown + 1;
	fwrite(out.data, 1, out.len, stderr);
	fflush(stderr);
	buf_free(&out);
}

void *run_progress_main(void *arg)
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
