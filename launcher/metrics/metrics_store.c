/*
 * metrics_store.c - the store behind /metrics (metrics.h): each reading
 * (from a counters session, metrics_sessions.c) replaces its series' value.
 *
 * The store keeps one entry per series (family, runtime, labels), sorted, so
 * that a scrape is one pass under the lock writing text; a new reading only
 * replaces a value. It holds at most MAX_SERIES; past that new series are
 * dropped (and counted) while known ones keep updating.
 */
#include "metrics_int.h"

#include <errno.h>
#include <jansson.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"
#include "launcher/runtime/watcher.h"


#define MAX_SERIES 20000
#define MAX_QUANTILES 16

/* ---- the store ---- */

static int series_cmp(const char *family, uint64_t pid, const char *labels, const struct series *s)
{
	int c = strcmp(family, s->family);

	if (c)
		return c;
	if (pid != s->pid)
		return pid < s->pid ? -1 : 1;
	return strcmp(labels, s->labels);
}

/* The index of the series, or where it would go (*found false). Under mu. */
static size_t series_find(struct metrics *m, const char *family, uint64_t pid, const char *labels, bool *found)
{
	size_t lo = 0, hi = m->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int c = series_cmp(family, pid, labels, &m->s[mid]);

		if (c == 0) {
			*found = true;
			return mid;
		}
		if (c < 0)
			hi = mid;
		else
			lo = mid + 1;
	}
	*found = false;
	return lo;
}

void metrics_series_clear(struct series *s)
{
	free(s->family);
	free(s->help);
	free(s->labels);
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].labels);
	free(s->q);
}

/* The quantiles "q=v;q=v" as labelled lines, sorted by q (Prometheus wants them smallest first). */
static void set_quantiles(struct series *s, const struct msample *r, struct buf *lab)
{
	struct {
		double q, v;
	} qs[MAX_QUANTILES];
	size_t n = 0;
	const char *p = r->quantiles;

	while (*p && n < MAX_QUANTILES) {
		char *end;
		double q = strtod(p, &end), v;

		if (end == p || *end != '=')
			break;
		p = end + 1;
		v = strtod(p, &end);
		if (end == p)
			break;
		qs[n].q = q;
		qs[n++].v = v;
		p = end + (*end == ';');
	}
	for (size_t i = 1; i < n; i++)
		for (size_t k = i; k > 0 && qs[k - 1].q > qs[k].q; k--) {
			double tq = qs[k].q, tv = qs[k].v;

			qs[k] = qs[k - 1];
			qs[k - 1].q = tq;
			qs[k - 1].v = tv;
		}
	for (size_t i = 0; i < s->nq; i++)
		free(s->q[i].labels);
	s->q = mem_realloc(s->q, (n ? n : 1) * sizeof(*s->q));
	s->nq = n;
	for (size_t i = 0; i < n; i++) {
		buf_reset(lab);
		metrics_prom_labels(lab, r->tags, r->tag_sep, qs[i].q);
		s->q[i].labels = mem_strdup(lab->data ? lab->data : "");
		metrics_prom_value(s->q[i].value, sizeof(s->q[i].value), r->unit, qs[i].v);
	}
	s->has_sum = r->has_sum;
	if (r->has_sum) {
		metrics_prom_value(s->sum, sizeof(s->sum), r->unit, r->sum);
		metrics_prom_value(s->count, sizeof(s->count), NULL, r->count);
	}
}

void metrics_store_reading(struct collector *c, const struct msample *r, int64_t ts_ms)
{
	struct metrics *m = c->m;
	struct series *s;
	bool found;
	size_t i;
	const char *labels;

	buf_reset(&c->name);
	buf_reset(&c->labels);
	metrics_prom_name(&c->name, r->provider, r->name, r->unit);
	metrics_prom_labels(&c->labels, r->tags, r->tag_sep, -1);
	labels = c->labels.data ? c->labels.data : "";
	pthread_mutex_lock(&m->mu);
	i = series_find(m, c->name.data, c->pid, labels, &found);
	if (!found) {
		/* a family keeps the type it was first seen with */
		bool clash = (i > 0 && strcmp(m->s[i - 1].family, c->name.data) == 0 &&
			      m->s[i - 1].summary != (r->kind == MS_SUMMARY)) ||
			     (i < m->n && strcmp(m->s[i].family, c->name.data) == 0 &&
			      m->s[i].summary != (r->kind == MS_SUMMARY));

		if (clash || m->n >= MAX_SERIES) {
			m->dropped++;
			pthread_mutex_unlock(&m->mu);
			return;
		}
		MEM_GROW(m->s, m->cap, m->n + 1, 64);
		memmove(&m->s[i + 1], &m->s[i], (m->n - i) * sizeof(*m->s));
		m->n++;
		s = &m->s[i];
		*s = (struct series){ .family = mem_strdup(c->name.data), .help = mem_strdup(*r->display ? r->display : r->name),
				      .labels = mem_strdup(labels), .pid = c->pid, .summary = r->kind == MS_SUMMARY };
		memcpy(s->cookie, c->cookie, 16);
	}
	s = &m->s[i];
	s->ts_ms = ts_ms;
	if (s->summary)
		set_quantiles(s, r, &c->labels);
	else
		metrics_prom_value(s->value, sizeof(s->value), r->unit, r->value);
	pthread_mutex_unlock(&m->mu);
}

/* Drop a runtime's series (it went away). */
void metrics_store_forget(struct metrics *m, const uint8_t cookie[16])
{
	size_t k = 0;

	pthread_mutex_lock(&m->mu);
	for (size_t i = 0; i < m->n; i++) {
		if (memcmp(m->s[i].cookie, cookie, 16) == 0)
			metrics_series_clear(&m->s[i]);
		else
			m->s[k++] = m->s[i];
	}
	m->n = k;
	pthread_mutex_unlock(&m->mu);
}

static void help_text(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if (*s == '\\')
			buf_puts(b, "\\\\");
		else if (*s == '\n')
			buf_puts(b, "\\n");
		else
			buf_putc(b, *s);
	}
}

/* name{pid="N", labels} or name{labels} or name */
static void sample_head(struct buf *b, const char *family, const char *suffix, bool with_pid, uint64_t pid,
			const char *labels)
{
	buf_puts(b, family);
	buf_puts(b, suffix);
	if (!with_pid && *labels == '\0')
		return;
	buf_putc(b, '{');
	if (with_pid)
		buf_printf(b, "pid=\"%llu\"%s", (unsigned long long)pid, *labels ? ", " : "");
	buf_puts(b, labels);
	buf_putc(b, '}');
}

void metrics_render(struct metrics *m, struct buf *out)
{
	bool with_pid;

	if (m == NULL)
		return;
	pthread_mutex_lock(&m->mu);
	if (m->n == 0) { /* a scrape that finds nothing says why, and when to look again (a comment to Prometheus) */
		long long in_ms = m->first_due_ms - clock_ms();

		if (m->runtimes == 0)
			buf_printf(out, "# diagport: no .NET runtime is attached; counters come metricsStartDelay (%lld s) "
				   "and one metricsInterval (%u s) after one attaches\n", m->delay_ms / 1000, m->interval_s);
		else
			buf_printf(out, "# diagport: no readings yet; the first are due in %lld s (metricsStartDelay %lld s "
				   "after a runtime attaches, then one metricsInterval of %u s)\n",
				   in_ms > 0 ? (in_ms + 999) / 1000 : 0, m->delay_ms / 1000, m->interval_s);
	}
	with_pid = m->runtimes > 1;
	for (size_t i = 0; i < m->n; i++) {
		const struct series *s = &m->s[i];

		if (i == 0 || strcmp(m->s[i - 1].family, s->family) != 0) {
			buf_printf(out, "# HELP %s ", s->family);
			help_text(out, s->help);
			buf_printf(out, "\n# TYPE %s %s\n", s->family, s->summary ? "summary" : "gauge");
		}
		if (!s->summary) {
			sample_head(out, s->family, "", with_pid, s->pid, s->labels);
			buf_printf(out, " %s %lld\n", s->value, (long long)s->ts_ms);
			continue;
		}
		for (size_t k = 0; k < s->nq; k++) {
			sample_head(out, s->family, "", with_pid, s->pid, s->q[k].labels);
			buf_printf(out, " %s\n", s->q[k].value);
		}
		if (s->has_sum) {
			sample_head(out, s->family, "_sum", with_pid, s->pid, s->labels);
			buf_printf(out, " %s\n", s->sum);
			sample_head(out, s->family, "_count", with_pid, s->pid, s->labels);
			buf_printf(out, " %s\n", s->count);
		}
	}
	pthread_mutex_unlock(&m->mu);
}

size_t metrics_series(struct metrics *m)
{
	size_t n;

	if (m == NULL)
		return 0;
	pthread_mutex_lock(&m->mu);
	n = m->n;
	pthread_mutex_unlock(&m->mu);
	return n;
}

