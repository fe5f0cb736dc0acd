/*
 * log.c - JSON lines, slog's field names (log.h).
 */
#include "log.h"

#include <errno.h>
#include <limits.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "clock.h"
#include "errors.h"
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

/* A key that names a secret: its value is never written, whatever a caller passed. */
static bool secret_key(const char *k)
{
	static const char *const words[] = { "token", "authorization", "password", "secret", "apikey", "privatekey", "private_key" };

	for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
		if (strcasestr(k, words[i]))
			return true;
	return false;
}

static json_t *value(const struct log_kv *kv)
{
	switch (kv->type) {
	case LOG_T_STR: return kv->v.s ? utf8_json_str(kv->v.s) : json_null();
	case LOG_T_STRN: return kv->v.s ? utf8_json(kv->v.s, kv->n) : json_null();
	case LOG_T_INT: return json_integer(kv->v.i);
	case LOG_T_UINT: return kv->v.u > (unsigned long long)LLONG_MAX ? json_real((double)kv->v.u) :
									    json_integer((json_int_t)kv->v.u);
	case LOG_T_NUM: return json_real(kv->v.d);
	case LOG_T_BOOL: return json_boolean(kv->v.b);
	case LOG_T_END: break;
	}
	return json_null();
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

void log_at(enum log_level lvl, const char *msg, ...)
{
	json_t *o;
	char ts[CLOCK_RFC3339_LEN], *line;
	struct log_kv kv;
	va_list ap;
	size_t n;

	if (lvl < min_level)
		return;
	o = json_object();
	clock_rfc3339(ts, 3);
	json_object_set_new(o, "time", json_string(ts));
	json_object_set_new(o, "level", json_string(level_name(lvl)));
	json_object_set_new(o, "msg", utf8_json_str(msg));
	va_start(ap, msg);
	while ((kv = va_arg(ap, struct log_kv)).type != LOG_T_END) {
		if (kv.key == NULL || strcmp(kv.key, "time") == 0 || strcmp(kv.key, "level") == 0 ||
		    strcmp(kv.key, "msg") == 0)
			continue; /* the three fields of every line are not overwritten */
		json_object_set_new(o, kv.key, secret_key(kv.key) ? json_string("[redacted]") : value(&kv));
	}
	va_end(ap);
	line = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_REAL_PRECISION(6));
	json_decref(o);
	if (line == NULL)
		return;
	n = strlen(line);
	line[n] = '\n'; /* one write for the line and its end: lines from threads never interleave */
	write_line(line, n + 1);
	free(line);
}
