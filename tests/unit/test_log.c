/*
 * test_log.c - the logger (log.h): every line is one JSON object that a
 * strict reader takes, whatever bytes the values hold; slog's field names
 * in order; levels filter; secrets are never written.
 */
#include <fcntl.h>
#include <pthread.h>
#include <jansson.h>
#include <stdlib.h>
#include <unistd.h>

#include "log.h"
#include "t.h"
#include "utf8.h"

/* Everything logged while fn runs, through a pipe, as a NUL-terminated string. */
static char captured[65536];
static void capture(void (*fn)(void))
{
	int p[2];
	ssize_t n, off = 0;

	if (pipe(p) != 0)
		abort();
	log_set_fd(p[1]);
	fn();
	log_set_fd(2);
	close(p[1]);
	while (off < (ssize_t)sizeof(captured) - 1 && (n = read(p[0], captured + off, sizeof(captured) - 1 - (size_t)off)) > 0)
		off += n;
	captured[off] = '\0';
	close(p[0]);
}

/* Each line of captured, read strictly; the count in *n. */
static json_t *lines(size_t *n)
{
	json_t *all = json_array();
	char *save = NULL, *copy = strdup(captured);

	*n = 0;
	for (char *l = strtok_r(copy, "\n", &save); l; l = strtok_r(NULL, "\n", &save)) {
		json_error_t e;
		json_t *o = json_loads(l, JSON_REJECT_DUPLICATES, &e);

		if (o == NULL || !json_is_object(o) || !utf8_valid(l, strlen(l))) {
			json_decref(o);
			json_decref(all);
			free(copy);
			return NULL;
		}
		json_array_append_new(all, o);
		(*n)++;
	}
	free(copy);
	return all;
}

static const char hostile[] = "q\"uote b\\ackslash nl\n cr\r tab\t bell\x07 nul-free \x01\x1f bad\xff\xfe\xc3 "
			      "overlong\xc0\xaf surrogate\xed\xa0\x80 end";

static void log_hostile(void)
{
	log_info("hostile", LOG_STR("value", hostile), LOG_STRN("part", hostile, 10), LOG_STR(hostile, "as a key"),
		 LOG_INT("n", -5), LOG_UINT("u", 18446744073709551615ull), LOG_NUM("ms", 0.25), LOG_BOOL("b", true));
	log_warn(hostile, LOG_STR("null", NULL));
}

static void every_line_is_json(void)
{
	size_t n;
	json_t *l, *first;

	capture(log_hostile);
	l = lines(&n);
	T_CHECK(l != NULL);
	T_CHECK(n == 2);
	first = json_array_get(l, 0);
	T_STREQ(json_string_value(json_object_get(first, "msg")), "hostile");
	T_CHECK(strstr(json_string_value(json_object_get(first, "value")), "q\"uote b\\ackslash nl\n cr\r") != NULL);
	T_CHECK(strstr(json_string_value(json_object_get(first, "value")), "bad\xEF\xBF\xBD\xEF\xBF\xBD") != NULL);
	T_CHECK(json_integer_value(json_object_get(first, "n")) == -5);
	T_CHECK(json_is_true(json_object_get(first, "b")));
	T_CHECK(json_is_null(json_object_get(json_array_get(l, 1), "null")));
	T_STREQ(json_string_value(json_object_get(json_array_get(l, 1), "level")), "WARN");
	json_decref(l);
}

static void log_order(void)
{
	log_error("m", LOG_STR("z", "1"), LOG_STR("a", "2"), LOG_STR("msg", "not the msg"), LOG_STR("level", "no"));
}

static void slog_field_names_in_order(void)
{
	size_t n;
	json_t *l, *o;
	const char *keys[] = { "time", "level", "msg", "z", "a" };
	size_t i = 0;
	const char *k;
	json_t *v;

	capture(log_order);
	T_CHECK((l = lines(&n)) != NULL && n == 1);
	o = json_array_get(l, 0);
	T_CHECK(json_object_size(o) == 5);
	json_object_foreach(o, k, v) {
		(void)v;
		T_STREQ(k, keys[i]);
		i++;
	}
	T_STREQ(json_string_value(json_object_get(o, "level")), "ERROR");
	T_STREQ(json_string_value(json_object_get(o, "msg")), "m");
	/* 2026-11-25T04:30:00.123Z */
	T_CHECK(strlen(json_string_value(json_object_get(o, "time"))) == 24);
	T_CHECK(json_string_value(json_object_get(o, "time"))[23] == 'Z');
	json_decref(l);
}

static void log_levels_fn(void)
{
	log_set_level(LOG_WARN);
	log_debug("d");
	log_info("i");
	log_warn("w");
	log_error("e");
	log_set_level(LOG_INFO);
	log_debug("d2");
}

static void levels_filter(void)
{
	enum log_level lv;

	capture(log_levels_fn);
	T_CHECK(strstr(captured, "\"msg\":\"w\"") != NULL);
	T_CHECK(strstr(captured, "\"msg\":\"e\"") != NULL);
	T_CHECK(strstr(captured, "\"msg\":\"i\"") == NULL);
	T_CHECK(strstr(captured, "\"msg\":\"d") == NULL);
	T_CHECK(log_level_parse("Information", &lv) == 0 && lv == LOG_INFO);
	T_CHECK(log_level_parse("WARNING", &lv) == 0 && lv == LOG_WARN);
	T_CHECK(log_level_parse("Trace", &lv) == 0 && lv == LOG_DEBUG);
	T_CHECK(log_level_parse("Critical", &lv) == 0 && lv == LOG_ERROR);
	T_CHECK(log_level_parse("loud", &lv) == DP_EINVAL);
}

static void log_secrets(void)
{
	log_info("request", LOG_STR("authorization", "Bearer hunter2"), LOG_STR("token", "hunter3"),
		 LOG_STR("clientSecret", "hunter4"), LOG_STR("private_key", "hunter5"), LOG_STR("path", "/dump"));
}

static void secrets_redacted(void)
{
	capture(log_secrets);
	T_CHECK(strstr(captured, "hunter") == NULL);
	T_CHECK(strstr(captured, "\"token\":\"[redacted]\"") != NULL);
	T_CHECK(strstr(captured, "\"path\":\"/dump\"") != NULL);
}

static void *log_some(void *arg)
{
	for (int i = 0; i < 100; i++)
		if (i % 10 == 9)
			log_warn("w", LOG_INT("t", (long)arg), LOG_INT("n", i));
		else
			log_info("i", LOG_INT("t", (long)arg), LOG_INT("n", i));
	return NULL;
}

static void log_async(void)
{
	pthread_t t[2];

	log_async_start();
	for (long i = 0; i < 2; i++)
		pthread_create(&t[i], NULL, log_some, (void *)i);
	for (int i = 0; i < 2; i++)
		pthread_join(t[i], NULL);
	log_flush();
}

/* Queued lines (info) and direct ones (warn) from two threads: every line whole, each thread's in order. */
static void async_lines_whole_and_in_order(void)
{
	size_t n;
	json_t *l;
	long long last[2] = { -1, -1 };

	capture(log_async);
	T_CHECK((l = lines(&n)) != NULL);
	T_CHECK(n == 200);
	for (size_t i = 0; i < n; i++) {
		json_t *o = json_array_get(l, i);
		long long t = json_integer_value(json_object_get(o, "t")), k = json_integer_value(json_object_get(o, "n"));

		T_CHECK(t == 0 || t == 1);
		T_CHECK(k == last[t] + 1);
		last[t] = k;
	}
	json_decref(l);
}

int main(void)
{
	t_file_name = "log";
	T_RUN(every_line_is_json);
	T_RUN(slog_field_names_in_order);
	T_RUN(levels_filter);
	T_RUN(secrets_redacted);
	T_RUN(async_lines_whole_and_in_order); /* last: the queue stays on */
	return t_failed_cases ? 1 : 0;
}
