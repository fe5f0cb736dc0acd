/*
 * test_logscopes.c - the open logging scopes by activity ID
 * (launcher/trace/logscopes.h): chains outermost first, a stop removes only its
 * own ID, unknown IDs ignored, the caps, a cycle in the parents, and the
 * table against a plain list through many starts and stops.
 */
#include <stdlib.h>

#include "launcher/trace/logscopes.h"
#include "t.h"

static const uint8_t none[16];

static const uint8_t *id_of(unsigned n, uint8_t out[16])
{
	memset(out, 0, 16);
	/* the shape of the runtime's IDs: a shared prefix, the path in the low bytes */
	out[0] = 0x40;
	out[12] = (uint8_t)(n >> 24);
	out[13] = (uint8_t)(n >> 16);
	out[14] = (uint8_t)(n >> 8);
	out[15] = (uint8_t)n;
	return out;
}

static void chains(void)
{
	struct logscopes *s = logscopes_new();
	const char *c[LOGSCOPES_MAX_DEPTH];
	uint8_t a[16], b[16], d[16], x[16];

	id_of(1, a), id_of(2, b), id_of(3, d), id_of(4, x);
	T_CHECK(logscopes_chain(s, a, c) == 0);
	T_CHECK(logscopes_start(s, a, none, "{\"A\":\"1\"}") == 0);
	T_CHECK(logscopes_start(s, b, a, "{\"B\":\"2\"}") == 0);
	T_CHECK(logscopes_start(s, d, b, "{\"C\":\"3\"}") == 0);
	T_CHECK(logscopes_chain(s, d, c) == 3);
	T_STREQ(c[0], "{\"A\":\"1\"}");
	T_STREQ(c[2], "{\"C\":\"3\"}");
	T_CHECK(logscopes_chain(s, b, c) == 2);
	T_CHECK(logscopes_chain(s, none, c) == 0);
	T_CHECK(logscopes_chain(s, x, c) == 0);
	logscopes_stop(s, x); /* unknown: nothing happens */
	logscopes_stop(s, b); /* only b: d's chain now ends at d */
	T_CHECK(logscopes_chain(s, d, c) == 1);
	T_CHECK(logscopes_chain(s, a, c) == 1);
	T_CHECK(logscopes_start(s, none, a, "{}") == -1);
	T_CHECK(logscopes_start(s, a, none, "{\"A\":\"again\"}") == 0); /* replaced */
	T_CHECK(logscopes_chain(s, a, c) == 1);
	T_STREQ(c[0], "{\"A\":\"again\"}");
	logscopes_free(s);
	logscopes_free(NULL);
}

static void cycles_and_depth(void)
{
	struct logscopes *s = logscopes_new();
	const char *c[LOGSCOPES_MAX_DEPTH];
	uint8_t a[16], b[16], p[16];

	/* a <-> b: each the other's parent */
	T_CHECK(logscopes_start(s, id_of(1, a), id_of(2, b), "{\"a\":\"\"}") == 0);
	T_CHECK(logscopes_start(s, b, a, "{\"b\":\"\"}") == 0);
	T_CHECK(logscopes_chain(s, a, c) == 2);
	T_STREQ(c[1], "{\"a\":\"\"}");
	/* its own parent */
	T_CHECK(logscopes_start(s, a, a, "{}") == 0);
	T_CHECK(logscopes_chain(s, a, c) == 1);
	/* 100 deep: the innermost LOGSCOPES_MAX_DEPTH */
	for (unsigned i = 10; i < 110; i++)
		T_CHECK(logscopes_start(s, id_of(i, a), id_of(i - 1, p), i == 109 ? "{\"in\":\"\"}" : "{}") == 0);
	T_CHECK(logscopes_chain(s, id_of(109, a), c) == LOGSCOPES_MAX_DEPTH);
	T_STREQ(c[LOGSCOPES_MAX_DEPTH - 1], "{\"in\":\"\"}");
	logscopes_free(s);
}

static void caps(void)
{
	struct logscopes *s = logscopes_new();
	const char *c[LOGSCOPES_MAX_DEPTH];
	uint8_t a[16];
	char *big = malloc(LOGSCOPES_MAX_BYTES + 2);

	for (unsigned i = 1; i <= LOGSCOPES_MAX; i++)
		T_CHECK(logscopes_start(s, id_of(i, a), none, "{}") == 0);
	T_CHECK(logscopes_start(s, id_of(LOGSCOPES_MAX + 1, a), none, "{}") == -1);
	T_CHECK(logscopes_start(s, id_of(7, a), none, "{\"x\":\"\"}") == 0); /* one open may be replaced */
	logscopes_stop(s, id_of(8, a));
	T_CHECK(logscopes_start(s, id_of(LOGSCOPES_MAX + 1, a), none, "{}") == 0);
	T_CHECK(logscopes_chain(s, id_of(LOGSCOPES_MAX, a), c) == 1);
	logscopes_free(s);
	s = logscopes_new();
	memset(big, 'x', LOGSCOPES_MAX_BYTES + 1);
	big[LOGSCOPES_MAX_BYTES + 1] = '\0';
	T_CHECK(logscopes_start(s, id_of(1, a), none, big) == -1);
	big[LOGSCOPES_MAX_BYTES] = '\0';
	T_CHECK(logscopes_start(s, id_of(1, a), none, big) == 0);
	T_CHECK(logscopes_start(s, id_of(2, a), none, "x") == -1);
	logscopes_stop(s, id_of(1, a));
	T_CHECK(logscopes_start(s, id_of(2, a), none, "x") == 0);
	free(big);
	logscopes_free(s);
}

/* Random starts and stops over 3,000 IDs, the table checked against a flag per ID every 1,000. */
static void against_a_list(void)
{
	enum { N = 3000 };
	static char open[N];
	struct logscopes *s = logscopes_new();
	const char *c[LOGSCOPES_MAX_DEPTH];
	uint8_t a[16];
	char text[16];
	unsigned seed = 12345;

	memset(open, 0, sizeof(open));
	for (int step = 0; step < 200000; step++) {
		unsigned i;

		seed = seed * 1103515245u + 12345u;
		i = (seed >> 8) % N + 1;
		if ((seed >> 4) & 1) {
			snprintf(text, sizeof(text), "%u", i);
			T_CHECK(logscopes_start(s, id_of(i, a), none, text) == 0);
			open[i - 1] = 1;
		} else {
			logscopes_stop(s, id_of(i, a));
			open[i - 1] = 0;
		}
		if (step % 1000 != 0)
			continue;
		for (unsigned k = 1; k <= N; k++) {
			size_t n = logscopes_chain(s, id_of(k, a), c);

			snprintf(text, sizeof(text), "%u", k);
			if (n != (size_t)open[k - 1] || (n && strcmp(c[0], text) != 0))
				T_FAIL("step %d, id %u: %zu scopes (%s)", step, k, n, n ? c[0] : "");
		}
	}
	logscopes_free(s);
}

int main(void)
{
	t_file_name = "logscopes";
	T_RUN(chains);
	T_RUN(cycles_and_depth);
	T_RUN(caps);
	T_RUN(against_a_list);
	return t_failed_cases ? 1 : 0;
}
