/*
 * test_patch.c - the webhook's JSON Patch generator (webhook/patch.c): the
 * exact operations for the shapes the injector produces, RFC 6901 escaping,
 * and the rule that an array is replaced whole only when nothing finer works.
 * (That applying each patch gives the injector's output is checked with real
 * JSON Patch implementations in tests/integration/webhook_review.sh.)
 */
#include <stdlib.h>

#include "doc.h"
#include "mem.h"
#include "t.h"
#include "webhook/patch.h"

/* The patch from a to b as text (static buffer), and the number of operations. */
static const char *diff(const char *a, const char *b, size_t *n)
{
	static char text[8192];
	struct doc_node *x = t_doc(a), *y = t_doc(b);
	struct buf out;
	struct err_msg em;

	buf_init(&out, sizeof(text) - 1);
	if (patch_diff(x, y, &out, n, &em) != 0)
		abort();
	snprintf(text, sizeof(text), "%s", out.data);
	buf_free(&out);
	doc_free(x);
	doc_free(y);
	return text;
}

static void equal_is_empty(void)
{
	size_t n = 99;

	T_STREQ(diff("{\"a\":[1,{\"b\":2}],\"c\":\"x\"}", "{\"a\":[1,{\"b\":2}],\"c\":\"x\"}", &n), "[]");
	T_CHECK(n == 0);
}

static void annotation_key_by_key_escaped(void)
{
	size_t n;

	T_STREQ(diff("{\"metadata\":{\"annotations\":{\"a/b\":\"1\"}}}",
		     "{\"metadata\":{\"annotations\":{\"a/b\":\"1\",\"diagport.dev/status\":\"v1\",\"x~y\":\"z\"}}}", &n),
		"[{\"op\":\"add\",\"path\":\"/metadata/annotations/diagport.dev~1status\",\"value\":\"v1\"},"
		"{\"op\":\"add\",\"path\":\"/metadata/annotations/x~0y\",\"value\":\"z\"}]");
	T_CHECK(n == 2);
}

static void missing_map_added_whole(void)
{
	size_t n;

	T_STREQ(diff("{\"metadata\":{\"name\":\"p\"}}", "{\"metadata\":{\"name\":\"p\",\"annotations\":{\"k\":\"v\"}}}", &n),
		"[{\"op\":\"add\",\"path\":\"/metadata/annotations\",\"value\":{\"k\":\"v\"}}]");
}

static void named_arrays_by_element(void)
{
	size_t n;

	/*
	 * env gains one variable at the end, a container is inserted before the app, the app gains a mount list.
	 * The containers are matched by name (the app moved to index 1); the env list keeps its items in place
	 * and only grows, so it is walked by position and the new variable appended at /-.
	 */
	T_STREQ(diff("{\"containers\":[{\"name\":\"app\",\"env\":[{\"name\":\"A\",\"value\":\"1\"}]}]}",
		     "{\"containers\":[{\"name\":\"agent\"},{\"name\":\"app\",\"env\":[{\"name\":\"A\",\"value\":\"1\"},"
		     "{\"name\":\"B\",\"value\":\"2\"}],\"volumeMounts\":[]}]}", &n),
		"[{\"op\":\"add\",\"path\":\"/containers/0\",\"value\":{\"name\":\"agent\"}},"
		"{\"op\":\"add\",\"path\":\"/containers/1/env/-\",\"value\":{\"name\":\"B\",\"value\":\"2\"}},"
		"{\"op\":\"add\",\"path\":\"/containers/1/volumeMounts\",\"value\":[]}]");
	/* an existing value changed in place, one removed */
	T_STREQ(diff("{\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"B\",\"value\":\"2\"},{\"name\":\"C\"}]}",
		     "{\"env\":[{\"name\":\"A\",\"value\":\"1;x\"},{\"name\":\"C\"}]}", &n),
		"[{\"op\":\"remove\",\"path\":\"/env/1\"},{\"op\":\"replace\",\"path\":\"/env/0/value\",\"value\":\"1;x\"}]");
}

static void plain_arrays(void)
{
	size_t n;

	T_STREQ(diff("{\"add\":[\"NET_ADMIN\"]}", "{\"add\":[\"NET_ADMIN\",\"SYS_PTRACE\"]}", &n),
		"[{\"op\":\"add\",\"path\":\"/add/-\",\"value\":\"SYS_PTRACE\"}]");
	T_STREQ(diff("{\"a\":[1,2,3]}", "{\"a\":[1,5,3]}", &n), "[{\"op\":\"replace\",\"path\":\"/a/1\",\"value\":5}]");
	/* shorter, not a prefix: replaced whole */
	T_STREQ(diff("{\"a\":[1,2,3]}", "{\"a\":[3]}", &n), "[{\"op\":\"replace\",\"path\":\"/a\",\"value\":[3]}]");
}

static void reordered_named_replaced_whole(void)
{
	size_t n;

	T_STREQ(diff("{\"c\":[{\"name\":\"a\"},{\"name\":\"b\"}]}", "{\"c\":[{\"name\":\"b\"},{\"name\":\"a\"}]}", &n),
		"[{\"op\":\"replace\",\"path\":\"/c\",\"value\":[{\"name\":\"b\"},{\"name\":\"a\"}]}]");
}

static void types_and_numbers(void)
{
	size_t n;

	T_STREQ(diff("{\"a\":1,\"b\":\"1\",\"c\":1.50}", "{\"a\":\"1\",\"b\":\"1\",\"c\":1.50}", &n),
		"[{\"op\":\"replace\",\"path\":\"/a\",\"value\":\"1\"}]");
	T_STREQ(diff("{\"big\":12345678901234567890}", "{\"big\":12345678901234567890,\"k\":null}", &n),
		"[{\"op\":\"add\",\"path\":\"/k\",\"value\":null}]");
	/* a key that needs JSON escaping in the path string */
	T_STREQ(diff("{}", "{\"q\\\"k\":true}", &n), "[{\"op\":\"add\",\"path\":\"/q\\\"k\",\"value\":true}]");
}

int main(void)
{
	t_file_name = "test_patch";
	mem_install();
	T_RUN(equal_is_empty);
	T_RUN(annotation_key_by_key_escaped);
	T_RUN(missing_map_added_whole);
	T_RUN(named_arrays_by_element);
	T_RUN(plain_arrays);
	T_RUN(reordered_named_replaced_whole);
	T_RUN(types_and_numbers);
	return t_failed_cases ? 1 : 0;
}
