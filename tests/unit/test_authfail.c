/*
 * test_authfail.c - refused tokens per address (launcher/authfail.c): the
 * delay schedule, addresses apart, the bounded table, forgetting, the
 * rate-limited log line and its suppressed count; and the capture kinds'
 * list (launcher/served.c) that --captures takes.
 */
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "../../launcher/authfail.h"
#include "../../launcher/served.h"
#include "buf.h"
#include "t.h"

#define T0 1000000LL

static void schedule(void)
{
	struct authfail *f = authfail_new();
	long long now = T0;

	for (int i = 1; i <= AUTHFAIL_FREE; i++) {
		authfail_record(f, "10.0.0.1", "/dump", "wrong token", now);
		T_CHECK(authfail_turn(f, "10.0.0.1", now) == now);
	}
	authfail_record(f, "10.0.0.1", "/dump", "wrong token", now);
	T_CHECK(authfail_turn(f, "10.0.0.1", now) == now + AUTHFAIL_STEP_MS);
	T_CHECK(authfail_turn(f, "10.0.0.2", now) == now); /* another address is not slowed */
	now += AUTHFAIL_STEP_MS;
	authfail_record(f, "10.0.0.1", "/dump", "wrong token", now);
	T_CHECK(authfail_turn(f, "10.0.0.1", now) == now + 2 * AUTHFAIL_STEP_MS);
	for (int i = 0; i < 20; i++)
		authfail_record(f, "10.0.0.1", "/dump", "wrong token", now);
	T_CHECK(authfail_turn(f, "10.0.0.1", now) == now + AUTHFAIL_MAX_MS); /* capped */
	/* forgotten a while after its last failure */
	T_CHECK(authfail_turn(f, "10.0.0.1", now + AUTHFAIL_FORGET_MS) == now + AUTHFAIL_FORGET_MS);
	authfail_record(f, "10.0.0.1", "/dump", "wrong token", now + AUTHFAIL_FORGET_MS);
	T_CHECK(authfail_turn(f, "10.0.0.1", now + AUTHFAIL_FORGET_MS) == now + AUTHFAIL_FORGET_MS); /* afresh */
	authfail_free(f);
}

static void bounded(void)
{
	struct authfail *f = authfail_new();
	char peer[48];

	for (int i = 0; i < 10; i++)
		authfail_record(f, "fd00::1", "/env", "wrong token", T0);
	T_CHECK(authfail_turn(f, "fd00::1", T0) > T0);
	/* more addresses than the table holds, each failing later: the oldest one goes, the newest stay */
	for (int i = 0; i < AUTHFAIL_PEERS + 10; i++) {
		snprintf(peer, sizeof(peer), "10.1.%d.%d", i / 256, i % 256);
		for (int k = 0; k < 8; k++)
			authfail_record(f, peer, "/env", "wrong token", T0 + 1 + i);
	}
	T_CHECK(authfail_turn(f, "fd00::1", T0 + 2) == T0 + 2);
	T_CHECK(authfail_turn(f, peer, T0 + AUTHFAIL_PEERS + 10) > T0 + AUTHFAIL_PEERS + 10);
	authfail_free(f);
}

static void log_lines(void)
{
	struct authfail *f = authfail_new();
	char path[] = "/tmp/dp-authfail-XXXXXX";
	int fd = mkstemp(path), saved = dup(2);
	struct buf b;
	struct err_msg em;
	const char *second;

	T_CHECK(fd >= 0 && saved >= 0);
	dup2(fd, 2);
	for (int i = 0; i < 10; i++)
		authfail_record(f, "192.0.2.7", "/dump", "wrong token", T0 + i * 100);
	authfail_record(f, "192.0.2.7", "/dump", "no bearer token", T0 + AUTHFAIL_LOG_EVERY_MS);
	dup2(saved, 2);
	close(saved);
	buf_init(&b, 1 << 20);
	T_CHECK(buf_read_path(&b, path, NULL, &em) == 0 && b.data);
	unlink(path);
	close(fd);
	/* two lines: the first failure, and one 5 s later saying 9 were left out */
	T_CHECK(strstr(b.data, "\"event\":\"auth-failed\",\"peer\":\"192.0.2.7\",\"path\":\"/dump\",\"reason\":\"wrong token\","
			       "\"failures\":1,\"suppressed\":0") != NULL);
	second = strchr(b.data, '\n');
	T_CHECK(second && strstr(second, "\"reason\":\"no bearer token\",\"failures\":11,\"suppressed\":9") != NULL);
	T_CHECK(strchr(second + 1, '\n') && strchr(strchr(second + 1, '\n') + 1, '\n') == NULL);
	buf_free(&b);
	authfail_free(f);
}

static void served_list(void)
{
	struct err_msg em;
	unsigned m = 0;
	char text[96];

	T_CHECK(served_parse("stacks, Metrics", &m, "--captures", &em) == 0);
	T_CHECK(m == ((1u << SERVED_STACKS) | (1u << SERVED_METRICS)));
	served_text(m, text, sizeof(text));
	T_STREQ(text, "stacks,metrics");
	T_CHECK(served_parse("all", &m, "--captures", &em) == 0 && m == SERVED_ALL);
	served_text(m, text, sizeof(text));
	T_STREQ(text, "all");
	T_CHECK(served_parse("dump,gcdump,trace,cpuprofile,stacks,metrics,logs,env,exceptions", &m, "x", &em) == 0 && m == SERVED_ALL);
	m = 7;
	T_CHECK(served_parse("stacks,heap", &m, "--captures", &em) == DP_EINVAL && m == 7);
	T_CHECK(strstr(em.text, "--captures: 'heap' is not a capture kind") != NULL);
	T_CHECK(served_parse("stacks,,logs", &m, "environment variable DIAGPORT_CAPTURES", &em) == DP_EINVAL);
	T_CHECK(strstr(em.text, "DIAGPORT_CAPTURES: an empty name") != NULL);
	T_CHECK(served_parse("", &m, "--captures", &em) == DP_EINVAL);
}

int main(void)
{
	int null = open("/dev/null", O_WRONLY);

	t_file_name = "test_authfail";
	dup2(null, 2); /* the log lines of the cases that do not read them */
	T_RUN(schedule);
	T_RUN(bounded);
	T_RUN(log_lines);
	T_RUN(served_list);
	return t_failed_cases ? 1 : 0;
}
