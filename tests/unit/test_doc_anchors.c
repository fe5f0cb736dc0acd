/*
 * test_doc_anchors.c - unit tests of YAML anchors, aliases and merge keys
 * through the document tree (common/doc_yaml.c, doc_yaml_write.c,
 * doc_vid.c): a Compose-like file comes back as written; an edited copy is
 * written in full while the untouched aliases stay aliases; nested anchors,
 * redefinition, doc_copy, JSON output, doc_get_merged, and the cost of
 * writing many aliases of a big anchor.
 */
#include "doc.h"
#include "mem.h"
#include "t.h"

#include <stdlib.h>
#include <time.h>

static const char compose[] =
	"x-common: &common\n"
	"  restart: always\n"
	"  environment: &env\n"
	"    ASPNETCORE_URLS: http://+:8080\n"
	"    LOG_LEVEL: info\n"
	"  labels: [shop, \"1\"]\n"
	"services:\n"
	"  web:\n"
	"    <<: *common\n"
	"    image: shop/web\n"
	"  api:\n"
	"    <<: *common\n"
	"    image: shop/api\n"
	"    environment: *env\n"
	"  worker:\n"
	"    image: shop/worker\n"
	"    environment: *env\n";

static int read1(const char *text, struct doc_stream *st)
{
	struct err_msg em;
	int rc = doc_read_yaml(text, strlen(text), "t.yaml", NULL, st, &em);

	if (rc != 0)
		fprintf(stderr, "%s\n", em.text);
	return rc;
}

/* The stream written in fmt (a new string), or NULL. */
static char *write_as(const struct doc_stream *st, enum doc_format fmt)
{
	struct buf out;
	struct err_msg em;

	buf_init(&out, 0);
	if (doc_write(&out, st, fmt, &em) != 0) {
		fprintf(stderr, "%s\n", em.text);
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out, NULL);
}

/* Read text back and compare its data with st's. */
static bool same_data(const char *text, const struct doc_stream *st)
{
	struct doc_stream again = { 0 };
	bool same;

	if (text == NULL || read1(text, &again) != 0)
		return false;
	same = again.n == st->n;
	for (size_t i = 0; same && i < st->n; i++)
		same = doc_equal(again.docs[i], st->docs[i]);
	doc_stream_free(&again);
	return same;
}

/* The stream st written as YAML is exactly `want` and reads back as st's data. */
#define T_WRITES(st, want)                                                                        \
	do {                                                                                      \
		char *w_ = write_as((st), DOC_YAML);                                              \
		bool ok_ = w_ && strcmp(w_, (want)) == 0 && same_data(w_, (st));                  \
		if (!ok_)                                                                         \
			T_FAIL("written:\n%s\nwanted (and the same data):\n%s", w_ ? w_ : "(failed)", \
			       (want));                                                           \
		mem_free(w_);                                                                     \
	} while (0)

static void compose_roundtrip(void)
{
	struct doc_stream st = { 0 };
	const struct doc_node *api;

	T_CHECK(read1(compose, &st) == 0);
	/* the rest of the code sees data: the merge key is a plain key, an alias a copy */
	api = doc_path(st.docs[0], "services/api");
	T_CHECK(doc_is(doc_get(api, "<<"), DOC_MAP));
	T_STREQ(doc_get_str(doc_path(api, "environment"), "LOG_LEVEL"), "info");
	T_STREQ(doc_path(st.docs[0], "x-common")->anchor, "common");
	T_CHECK(doc_get(api, "<<")->alias && strcmp(doc_get(api, "<<")->alias, "common") == 0);
	T_CHECK(doc_get(api, "<<")->anchor == NULL);
	/* inside a copy, the anchor &env became an alias: a copy never defines an anchor */
	T_CHECK(doc_path(api, "<</environment")->anchor == NULL);
	T_STREQ(doc_path(api, "<</environment")->alias, "env");
	T_WRITES(&st, compose);
	doc_stream_free(&st);
}

static void edited_copy_expands(void)
{
	struct doc_stream st = { 0 };
	struct doc_node *root;
	char *out;

	T_CHECK(read1(compose, &st) == 0);
	root = st.docs[0];
	/* as inject does: one more variable in one service's environment, which was *env */
	doc_set(doc_path(root, "services/api/environment"), "DOTNET_DiagnosticPorts", doc_str("/diag/port"));
	/* and one key changed in the merge map of another, which was *common */
	doc_set(doc_path(root, "services/web/<<"), "restart", doc_str("no"));
	T_WRITES(&st, "x-common: &common\n"
		      "  restart: always\n"
		      "  environment: &env\n"
		      "    ASPNETCORE_URLS: http://+:8080\n"
		      "    LOG_LEVEL: info\n"
		      "  labels: [shop, \"1\"]\n"
		      "services:\n"
		      "  web:\n"
		      "    <<:\n"
		      "      restart: \"no\"\n"
		      "      environment: *env\n"
		      "      labels: [shop, \"1\"]\n"
		      "    image: shop/web\n"
		      "  api:\n"
		      "    <<: *common\n"
		      "    image: shop/api\n"
		      "    environment:\n"
		      "      ASPNETCORE_URLS: http://+:8080\n"
		      "      LOG_LEVEL: info\n"
		      "      DOTNET_DiagnosticPorts: /diag/port\n"
		      "  worker:\n"
		      "    image: shop/worker\n"
		      "    environment: *env\n");
	/* the anchored node itself edited: every alias of it no longer fits and is written in full */
	doc_set(doc_path(root, "x-common/environment"), "LOG_LEVEL", doc_str("debug"));
	out = write_as(&st, DOC_YAML);
	T_CHECK(out && strstr(out, "environment: &env\n    ASPNETCORE_URLS: http://+:8080\n    LOG_LEVEL: debug\n"));
	T_CHECK(out && strstr(out, "*env") == NULL && strstr(out, "<<: *common") == NULL);
	T_CHECK(same_data(out, &st));
	mem_free(out);
	doc_stream_free(&st);
}

static void nested_anchors(void)
{
	static const char in[] = "base: &b\n"
				 "  inner: &i {x: 1, y: [a, b]}\n"
				 "  size: 2\n"
				 "one: *b\n"
				 "two: *i\n"
				 "three: *b\n";
	struct doc_stream st = { 0 };

	T_CHECK(read1(in, &st) == 0);
	T_WRITES(&st, in);
	/* an edit to one copy of the outer anchor: that copy in full, but its inner part is still *i */
	doc_set(doc_get(st.docs[0], "one"), "size", doc_int(3));
	T_WRITES(&st, "base: &b\n"
		      "  inner: &i {x: 1, y: [a, b]}\n"
		      "  size: 2\n"
		      "one:\n"
		      "  inner: *i\n"
		      "  size: 3\n"
		      "two: *i\n"
		      "three: *b\n");
	/* the inner anchor's node edited: *i no longer fits anywhere, *b does not either */
	doc_push(doc_path(st.docs[0], "base/inner/y"), doc_str("c"));
	T_WRITES(&st, "base: &b\n"
		      "  inner: &i {x: 1, y: [a, b, c]}\n"
		      "  size: 2\n"
		      "one:\n"
		      "  inner: {x: 1, y: [a, b]}\n"
		      "  size: 3\n"
		      "two: {x: 1, y: [a, b]}\n"
		      "three:\n"
		      "  inner: {x: 1, y: [a, b]}\n"
		      "  size: 2\n");
	doc_stream_free(&st);
}

static void redefinition(void)
{
	static const char in[] = "a: &x 1\n"
				 "b: *x\n"
				 "c: &x [2, 3]\n"
				 "d: *x\n"
				 "e: &y {k: v}\n"
				 "f: &y {k: v}\n"
				 "g: *y\n";
	struct doc_stream st = { 0 };
	struct doc_node *root;

	T_CHECK(read1(in, &st) == 0);
	root = st.docs[0];
	T_CHECK(doc_is(doc_get(root, "b"), DOC_NUMBER) && doc_is(doc_get(root, "d"), DOC_SEQ));
	T_WRITES(&st, in);
	/* the second &x removed: d (a copy of [2, 3]) cannot be *x, which would now mean 1 */
	T_CHECK(doc_del(root, "c"));
	T_WRITES(&st, "a: &x 1\nb: *x\nd: [2, 3]\ne: &y {k: v}\nf: &y {k: v}\ng: *y\n");
	/* the later &y edited: g copies it as it was, and the earlier &y does not count any more */
	doc_set(doc_get(root, "f"), "k", doc_str("w"));
	T_WRITES(&st, "a: &x 1\nb: *x\nd: [2, 3]\ne: &y {k: v}\nf: &y {k: w}\ng: {k: v}\n");
	doc_stream_free(&st);
	/* anchors are per document */
	T_CHECK(read1("a: &x 1\nb: *x\n---\nc: &x 2\nd: *x\n", &st) == 0);
	T_WRITES(&st, "a: &x 1\nb: *x\n---\nc: &x 2\nd: *x\n");
	doc_stream_free(&st);
}

static void copies_and_json(void)
{
	struct doc_stream st = { 0 };
	struct doc_node *copy, *root;
	struct err_msg em;
	struct buf json;

	T_CHECK(read1("svc: &s {image: app, tags: &t [a]}\nuse: *s\nkey: &k name\n*k : 1\n", &st) == 0);
	root = st.docs[0];
	/* doc_copy of an anchored node: an alias of it, never a second definition */
	copy = doc_copy(doc_get(root, "svc"));
	T_CHECK(copy->anchor == NULL && copy->alias && strcmp(copy->alias, "s") == 0);
	T_CHECK(doc_get(copy, "tags")->anchor == NULL && strcmp(doc_get(copy, "tags")->alias, "t") == 0);
	doc_set(root, "more", copy);
	/* and what was copied from it is an alias of the same anchor */
	doc_set(root, "tags", doc_copy(doc_get(doc_get(root, "use"), "tags")));
	T_WRITES(&st, "svc: &s {image: app, tags: &t [a]}\nuse: *s\nkey: &k name\n*k : 1\nmore: *s\ntags: *t\n");
	/* JSON has no aliases: everything expanded */
	buf_init(&json, 0);
	T_CHECK(doc_write_json(&json, root, 0, &em) == 0);
	T_STREQ(json.data, "{\"svc\":{\"image\":\"app\",\"tags\":[\"a\"]},\"use\":{\"image\":\"app\",\"tags\":[\"a\"]},"
		     "\"key\":\"name\",\"name\":1,\"more\":{\"image\":\"app\",\"tags\":[\"a\"]},\"tags\":[\"a\"]}");
	buf_free(&json);
	doc_stream_free(&st);
}

static void merge_lookup(void)
{
	struct doc_node *d = t_doc("a: &a {x: 1, y: 1, <<: {deep: a}}\n"
				   "b: &b {y: 2, z: 2, deep: b}\n"
				   "m:\n  <<: [*a, *b]\n  x: own\n"
				   "one:\n  <<: *b\n"
				   "q:\n  \"<<\": *b\n");
	const struct doc_node *m;

	T_CHECK(d != NULL);
	m = doc_get(d, "m");
	T_STREQ(doc_strval(doc_get_merged(m, "x")), "own"); /* own keys win */
	T_STREQ(doc_get_merged(m, "y")->text, "1");          /* then the first merged map that has it */
	T_STREQ(doc_get_merged(m, "z")->text, "2");
	T_STREQ(doc_strval(doc_get_merged(m, "deep")), "a"); /* *a's own merge counts as part of *a */
	T_CHECK(doc_get_merged(m, "nope") == NULL);
	T_STREQ(doc_get_merged(doc_get(d, "one"), "z")->text, "2");
	T_CHECK(doc_get_merged(doc_get(d, "q"), "z") == NULL); /* a quoted "<<" is a plain key */
	T_CHECK(doc_get(m, "y") == NULL);                        /* doc_get does not merge */
	T_CHECK(doc_get_merged(doc_get(m, "x"), "x") == NULL && doc_get_merged(NULL, "x") == NULL);
	doc_free(d);
}

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/*
 * 600 aliases of a 500-node anchor, with nested anchors inside, every fifth
 * copy edited deep inside (written in full, its inner aliases checked
 * again): writing is a walk of the tree, not a comparison per pair of nodes.
 */
static void many_aliases_linear(void)
{
	struct doc_stream st = { 0 };
	struct buf in;
	double t0, t_read, t_write;
	char *out = NULL;
	size_t n_alias = 0;

	buf_init(&in, 0);
	buf_puts(&in, "base: &base\n");
	for (int g = 0; g < 10; g++) {
		buf_printf(&in, "  g%d: &g%d\n", g, g);
		for (int k = 0; k < 12; k++)
			buf_printf(&in, "    k%d: [v%d, %d]\n", k, g, k);
	}
	for (int i = 0; i < 2000; i++)
		buf_printf(&in, "plain%d: {a: %d, b: x}\n", i, i);
	for (int i = 0; i < 600; i++)
		buf_printf(&in, "use%d: *base\n", i);
	t0 = now_s();
	T_CHECK(read1(in.data, &st) == 0);
	t_read = now_s() - t0;
	for (int i = 0; i < 600; i += 5) {
		char path[32];

		snprintf(path, sizeof(path), "use%d/g9/k11", i);
		doc_set_text(doc_path(st.docs[0], path)->vals[1], "99");
	}
	t0 = now_s();
	out = write_as(&st, DOC_YAML);
	t_write = now_s() - t0;
	T_CHECK(out != NULL && same_data(out, &st));
	for (const char *p = out; (p = strstr(p, ": *base\n")) != NULL; p++)
		n_alias++;
	T_CHECK(n_alias == 480);
	T_CHECK(strstr(out, "use0:\n  g0: *g0\n") != NULL); /* an edited copy keeps its untouched parts as aliases */
	mem_free(out);
	doc_stream_free(&st);
	buf_free(&in);
	if (t_write > 3 * t_read + 0.05)
		T_FAIL("writing took %.3f s, reading %.3f s", t_write, t_read);
}

int main(void)
{
	T_BEGIN("doc_anchors");
	T_RUN(compose_roundtrip);
	T_RUN(edited_copy_expands);
	T_RUN(nested_anchors);
	T_RUN(redefinition);
	T_RUN(copies_and_json);
	T_RUN(merge_lookup);
	T_RUN(many_aliases_linear);
	T_END();
}
