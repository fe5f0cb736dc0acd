/*
 * log.c - JSON lines, slog's field names (log.h).
 */
#include "log.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <limits.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

#include "clock.h"
#include "errors.h"
#include "buf.h"
#include "mem.h"
#include "utf8.h"

static enum log_level min_level = LOG_INFO;
static int out_fd = 2;

void log_set_level(enum log_level min)
{
	min_level = min;
}

bool log_enabled(enum log_level lvl)
{
	return lvl >= min_level;
}

void log_set_fd(int fd)
{
	out_fd = fd;
}

int log_level_parse(const char *name, enum log_level *out)
{
	static const struct {
		const char *name;
		enum log_level lvl;
	} names[] = {
		{ "debug", LOG_DEBUG }, { "trace", LOG_DEBUG },	    { "info", LOG_INFO },   { "information", LOG_INFO },
		{ "warn", LOG_WARN },	{ "warning", LOG_WARN },    { "error", LOG_ERROR }, { "critical", LOG_ERROR },
	};

	for (size_t i = 0; name && i < sizeof(names) / sizeof(names[0]); i++)
		if (strcasecmp(name, names[i].name) == 0) {
			*out = names[i].lvl;
			return 0;
		}
	return DP_EINVAL;
}

static const char *level_name(enum log_level lvl)
{
	return lvl >= LOG_ERROR ? "ERROR" : lvl >= LOG_WARN ? "WARN" : lvl >= LOG_INFO ? "INFO" : "DEBUG";
}

/*
 * A key that names a secret: its value is never written, whatever a caller
 * passed. Each word is compared only where the key has its first letter, in
 * one pass (the webhook checks six keys a line).
 */
static bool secret_key(const char *k)
{
	static const char *const words[] = { "token", "authorization", "apikey", "password", "privatekey", "private_key",
					     "secret" };
	static const unsigned char first[][2] = { { 't', 0 }, { 'a', 1 }, { 'p', 3 }, { 's', 6 } }; /* letter, words[] */

	const size_t n_words = sizeof(words) / sizeof(words[0]);

	for (; *k; k++)
		for (size_t f = 0; f < sizeof(first) / sizeof(first[0]); f++)
			if (tolower((unsigned char)*k) == first[f][0])
				for (size_t i = first[f][1]; i < n_words && (unsigned char)words[i][0] == first[f][0]; i++)
					if (strncasecmp(k, words[i], strlen(words[i])) == 0)
						return true;
	return false;
}

static void write_line(const char *s, size_t n)
{
	while (n > 0) {
		ssize_t w = write(out_fd, s, n);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0)
			return; /* stderr is gone: drop the line rather than stall the daemon */
		s += w;
		n -= (size_t)w;
	}
}

/*
 * The line is written straight into a buffer, not built as a jansson object
 * and dumped: for the webhook's one line per admission that tree (a hash
 * table, an allocation per field, a key-order pass, a dump) was 11 us a line,
 * a third of the CPU of a cached answer, and the line costs ~1 us this way
 * (docs/BENCHMARKS.md, "Webhook"). Every byte that JSON escapes still goes
 * through jansson: put_str copies only text that needs no escaping.
 */
#define LOG_MAX_KV 32

/* Append j as JSON (a new reference, stolen; NULL: null). */
static void put_json(struct buf *b, json_t *j)
{
	size_t flags = JSON_ENCODE_ANY | JSON_COMPACT | JSON_REAL_PRECISION(6), n;

	if (j == NULL) {
		buf_puts(b, "null");
		return;
	}
	n = json_dumpb(j, NULL, 0, flags);
	if (n > 0 && buf_reserve(b, n) == 0)
		b->len += json_dumpb(j, b->data + b->len, n, flags);
	b->data[b->len] = '\0';
	json_decref(j);
}

/* Append s[0..n) as a JSON string: copied when it is printable ASCII but " and \, else written by jansson. */
static void put_str(struct buf *b, const char *s, size_t n)
{
	size_t i = 0;

	while (i < n && (unsigned char)s[i] >= 0x20 && (unsigned char)s[i] < 0x7f && s[i] != '"' && s[i] != '\\')
		i++;
	if (i < n) {
		put_json(b, utf8_json(s, n));
		return;
	}
	buf_putc(b, '"');
	buf_append(b, s, n);
	buf_putc(b, '"');
}

/*
 * %.6g, as below, without printf (a third of a line's cost) for the numbers
 * lines mostly carry: milliseconds, from 0.0001 up to 999,999.5. The six
 * digits are the double times a power of ten, rounded: printf rounds the
 * exact binary value instead, which can differ in the sixth digit when the
 * value is within a rounding error of a tie. False when d is out of range.
 */
static bool put_real_small(struct buf *b, double d)
{
	static const double p10[] = { 1e-4, 1e-3, 1e-2, 1e-1, 1, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9 };
	char s[24];
	int e = -4, n = 0, dot;
	long long v;

	if (!(d >= 1e-4 && d < 999999.5))
		return false;
	while (d >= p10[e + 5])
		e++; /* 10^e <= d < 10^(e+1) */
	v = (long long)(d * p10[9 - e] + 0.5);
	if (v >= 1000000) { /* rounded up to the next power of ten */
		v /= 10;
		e++;
	}
	dot = e >= 0 ? e + 1 : 0; /* digits before the point */
	if (e < 0) {
		s[n++] = '0';
		s[n++] = '.';
		for (int z = -1; z > e; z--)
			s[n++] = '0';
	}
	for (int i = 5; i >= 0; i--) {
		s[n + i + (e >= 0 && i >= dot)] = (char)('0' + v % 10);
		v /= 10;
	}
	if (e >= 0)
		s[n + dot] = '.';
	n += 6 + (e >= 0);
	while (s[n - 1] == '0')
		n--;
	if (s[n - 1] == '.')
		s[n++] = '0';
	buf_append(b, s, (size_t)n);
	return true;
}

/*
 * A number as jansson writes a real with JSON_REAL_PRECISION(6): %.6g, with
 * ".0" added when that reads as an integer, and the exponent without "+" or
 * leading zeros. NaN and infinities, which JSON has not, are null.
 */
static void put_real(struct buf *b, double d)
{
	char s[40], *e;
	int n;

	if (put_real_small(b, d))
		return;
	if (!isfinite(d)) {
		buf_puts(b, "null");
		return;
	}
	n = snprintf(s, sizeof(s) - 3, "%.6g", d);
	if ((e = strchr(s, 'e')) != NULL) {
		char *from = e + 1, *to = e + 1;

		if (*from == '-')
			from = ++to;
		else if (*from == '+')
			from++;
		while (*from == '0' && from[1])
			from++;
		memmove(to, from, strlen(from) + 1);
	} else if (strchr(s, '.') == NULL) {
		memcpy(s + n, ".0", 3);
	}
	buf_puts(b, s);
}

static void put_value(struct buf *b, const struct log_kv *kv)
{
	switch (kv->type) {
	case LOG_T_STR: kv->v.s ? put_str(b, kv->v.s, strlen(kv->v.s)) : (void)buf_puts(b, "null"); return;
	case LOG_T_STRN: kv->v.s ? put_str(b, kv->v.s, kv->n) : (void)buf_puts(b, "null"); return;
	case LOG_T_INT: buf_printf(b, "%lld", kv->v.i); return;
	case LOG_T_UINT:
		if (kv->v.u > (unsigned long long)LLONG_MAX)
			put_real(b, (double)kv->v.u);
		else
			buf_printf(b, "%llu", kv->v.u);
		return;
	case LOG_T_NUM: put_real(b, kv->v.d); return;
	case LOG_T_BOOL: buf_puts(b, kv->v.b ? "true" : "false"); return;
	case LOG_T_END: break;
	}
	buf_puts(b, "null");
}

/* "2026-11-25T04:30:00.123Z": the date and time of day formatted once a second per thread. */
static void stamp(struct buf *b)
{
	static __thread time_t sec = -1;
	static __thread char day[24];
	struct timespec ts;
	int ms;

	clock_gettime(CLOCK_REALTIME, &ts);
	if (ts.tv_sec != sec) {
		struct tm tm;

		gmtime_r(&ts.tv_sec, &tm);
		strftime(day, sizeof(day), "%Y-%m-%dT%H:%M:%S", &tm);
		sec = ts.tv_sec;
	}
	ms = (int)(ts.tv_nsec / 1000000);
	buf_puts(b, "{\"time\":\"");
	buf_append(b, day, 19);
	buf_append(b, (char[]){ '.', (char)('0' + ms / 100), (char)('0' + ms / 10 % 10), (char)('0' + ms % 10), 'Z', '"' }, 6);
	buf_puts(b, ",\"level\":");
}

static bool reserved_key(const char *k)
{
	return strcmp(k, "time") == 0 || strcmp(k, "level") == 0 || strcmp(k, "msg") == 0;
}

/*
 * The webhook's lines at info and below go through a queue that one writer
 * thread empties (log_async_start). Its threads wrote a line each for every
 * admission into one stderr, and writes to one file or pipe from two threads
 * contend in the kernel (the file's position lock, the inode's or the pipe's
 * mutex): a third of a context switch per request, which cost more than the
 * line. The writer writes what has gathered, then gathers for ASYNC_GATHER_NS
 * before it looks again, so under load a write carries many lines and nobody
 * has to wake it; idle, it sleeps until a line comes. Lines are written in
 * order: a warning or an error is written at once, after what is queued. At
 * most the last ASYNC_GATHER_NS of info lines is lost if the process is
 * killed; at exit the queue is written (atexit).
 */
#define ASYNC_MAX (256u << 10)
#define ASYNC_GATHER_NS 1000000L

static struct {
	pthread_mutex_t mu;       /* guards the queue */
	pthread_mutex_t write_mu; /* held while queued lines are written: their order with a direct line */
	pthread_cond_t cv;
	char *buf, *spare;
	size_t len;
	bool on, sleeping;
} aq = { .mu = PTHREAD_MUTEX_INITIALIZER, .write_mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER };

/* Write what is queued now. Called with write_mu held. */
static void flush_queue(void)
{
	char *b;
	size_t n;

	pthread_mutex_lock(&aq.mu);
	b = aq.buf;
	n = aq.len;
	aq.buf = aq.spare;
	aq.spare = b;
	aq.len = 0;
	pthread_mutex_unlock(&aq.mu);
	if (n)
		write_line(b, n);
}

static void *writer_main(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_mutex_lock(&aq.mu);
		while (aq.len == 0) {
			aq.sleeping = true;
			pthread_cond_wait(&aq.cv, &aq.mu);
			aq.sleeping = false;
		}
		pthread_mutex_unlock(&aq.mu);
		pthread_mutex_lock(&aq.write_mu);
		flush_queue();
		pthread_mutex_unlock(&aq.write_mu);
		nanosleep(&(struct timespec){ .tv_nsec = ASYNC_GATHER_NS }, NULL);
	}
	return NULL;
}

void log_flush(void)
{
	pthread_mutex_lock(&aq.write_mu);
	flush_queue();
	pthread_mutex_unlock(&aq.write_mu);
}

int log_async_start(void)
{
	pthread_t t;

	if (aq.on)
		return 0;
	aq.buf = mem_alloc(ASYNC_MAX);
	aq.spare = mem_alloc(ASYNC_MAX);
	if (pthread_create(&t, NULL, writer_main, NULL) != 0) {
		mem_free(aq.buf);
		mem_free(aq.spare);
		aq.buf = aq.spare = NULL;
		return DP_EINTERNAL; /* the lines are written by their threads, as before */
	}
	pthread_detach(t);
	atexit(log_flush);
	aq.on = true;
	return 0;
}

/* Queue a line of n bytes; false when it must be written now (the queue is full or off). */
static bool enqueue(const char *line, size_t n)
{
	bool queued = false, wake = false;

	pthread_mutex_lock(&aq.mu);
	if (aq.len + n <= ASYNC_MAX) {
		memcpy(aq.buf + aq.len, line, n);
		aq.len += n;
		queued = true;
		wake = aq.sleeping;
	}
	pthread_mutex_unlock(&aq.mu);
	if (wake)
		pthread_cond_signal(&aq.cv);
	return queued;
}

void log_at(enum log_level lvl, const char *msg, ...)
{
	struct log_kv kvs[LOG_MAX_KV], kv;
	struct buf b;
	size_t n = 0;
	va_list ap;

	if (lvl < min_level)
		return;
	va_start(ap, msg);
	while ((kv = va_arg(ap, struct log_kv)).type != LOG_T_END)
		if (kv.key && !reserved_key(kv.key) && n < LOG_MAX_KV) /* the three fields of every line stay */
			kvs[n++] = kv;
	va_end(ap);
	buf_init(&b, 0);
	buf_reserve(&b, 512);
	stamp(&b);
	put_str(&b, level_name(lvl), strlen(level_name(lvl)));
	buf_puts(&b, ",\"msg\":");
	put_str(&b, msg ? msg : "", msg ? strlen(msg) : 0);
	for (size_t i = 0; i < n; i++) {
		bool later = false;

		for (size_t k = i + 1; k < n && !later; k++)
			later = strcmp(kvs[i].key, kvs[k].key) == 0;
		if (later)
			continue; /* a key given twice: its last value, as a JSON object would keep it */
		buf_putc(&b, ',');
		put_str(&b, kvs[i].key, strlen(kvs[i].key));
		buf_putc(&b, ':');
		if (secret_key(kvs[i].key))
			buf_puts(&b, "\"[redacted]\"");
		else
			put_value(&b, &kvs[i]);
	}
	buf_puts(&b, "}\n"); /* one write for the line and its end: lines from threads never interleave */
	if (!aq.on || lvl >= LOG_WARN || !enqueue(b.data, b.len)) {
		pthread_mutex_lock(&aq.write_mu);
		if (aq.on)
			flush_queue(); /* what came before it, first */
		write_line(b.data, b.len);
		pthread_mutex_unlock(&aq.write_mu);
	}
	buf_free(&b);
}
