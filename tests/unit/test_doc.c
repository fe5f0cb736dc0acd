/*
 * test_doc.c - unit tests of the document tree (common/doc.c) and its JSON
 * and YAML readers and writers: tree operations, exact round trips, the
 * caps on untrusted input, and the exact text of error messages.
 */
#include "doc.h"
#include "mem.h"
#include "t.h"

#include <stdlib.h>
#include <time.h>

/* ---- helpers ---- */

static int read_json(const char *s, struct doc_stream *st, struct err_msg *em)
{
	return doc_read_json(s, strlen(s), "t.json", NULL, st, em);
}

static int read_yaml(const char *s, struct doc_stream *st, struct err_msg *em)
{
	return doc_read_yaml(s, strlen(s), "t.yaml", NULL, st, em);
}

/* JSON in, JSON out with the indent seen; NULL (and *rc set) on failure. */
static char *json_rt(const char *in, int *rc, struct err_msg *em)
{
	struct doc_stream st = { 0 };
	struct buf out;

	buf_init(&out, 0);
	*rc = read_json(in, &st, em);
	if (*rc == 0)
		*rc = doc_write(&out, &st, DOC_JSON, em);
	doc_stream_free(&st);
	if (*rc != 0) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out, NULL);
}

/* The stream written as YAML (a new string), or NULL. */
static char *yaml_out(const struct doc_stream *st, struct err_msg *em)
{
	struct buf out;

	buf_init(&out, 0);
	if (doc_write(&out, st, DOC_YAML, em) != 0) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out, NULL);
}

static int write_json_rc(const struct doc_stream *st, struct err_msg *em)
{
	struct buf out;
	int rc;

	buf_init(&out, 0);
	rc = doc_write(&out, st, DOC_JSON, em);
	buf_free(&out);
	return rc;
}

static char *json_of(const struct doc_node *n, int indent)
{
	struct buf out;
	struct err_msg em;

	buf_init(&out, 0);
	if (doc_write_json(&out, n, indent, &em) != 0) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out, NULL);
}

static struct doc_node *abc_map(void)
{
	struct doc_node *m = doc_map();

	doc_set(m, "a", doc_int(1));
	doc_set(m, "b", doc_int(2));
	doc_set(m, "c", doc_int(3));
	return m;
}

static bool keys_are(const struct doc_node *m, const char *want)
{
	char got[256] = "";

	for (size_t i = 0; i < m->n; i++) {
		strcat(got, m->keys[i]->text);
		if (i + 1 < m->n)
			strcat(got, ",");
	}
	return strcmp(got, want) == 0;
}

/* ---- tree operations ---- */

static void tree_make(void)
{
	struct doc_node *n = doc_strn("a\0b", 3);

	T_CHECK(n->type == DOC_STRING && n->len == 3 && n->text[3] == '\0' && n->line == 0);
	doc_free(n);
	n = doc_int(-42);
	T_STREQ(n->text, "-42");
	T_CHECK(n->type == DOC_NUMBER);
	doc_free(n);
	n = doc_num("1e400");
	T_STREQ(n->text, "1e400");
	doc_free(n);
	n = doc_bool(false);
	T_CHECK(n->type == DOC_BOOL);
	T_STREQ(n->text, "false");
	doc_free(n);
	n = doc_null();
	T_CHECK(n->type == DOC_NULL);
	doc_free(n);
	doc_free(NULL);
}

static void tree_set_keeps_position(void)
{
	struct doc_node *m = abc_map();

	doc_set(m, "b", doc_str("two"));
	T_CHECK(keys_are(m, "a,b,c"));
	T_STREQ(doc_get_str(m, "b"), "two");
	doc_set(m, "d", doc_null());
	T_CHECK(keys_are(m, "a,b,c,d"));
	T_CHECK(doc_find(m, "c") == 2 && doc_find(m, "zz") == -1);
	doc_free(m);
}

static void tree_insert_del(void)
{
	struct doc_node *m = abc_map();

	doc_insert_at(m, 0, "first", doc_int(0));
	doc_insert_at(m, 2, "mid", doc_int(9));
	doc_insert_at(m, m->n, "last", doc_int(5));
	T_CHECK(keys_are(m, "first,a,mid,b,c,last"));
	T_CHECK(doc_del(m, "mid"));
	T_CHECK(!doc_del(m, "mid"));
	T_CHECK(doc_del(m, "last") && doc_del(m, "first"));
	T_CHECK(keys_are(m, "a,b,c"));
	doc_free(m);
}

static void tree_get_or_add(void)
{
	struct doc_node *m = abc_map(), *x, *y;
	bool created = false;

	x = doc_get_or_add_map(m, "meta", &created);
	T_CHECK(x && created && x->type == DOC_MAP);
	doc_set(x, "k", doc_str("v"));
	y = doc_get_or_add_map(m, "meta", &created);
	T_CHECK(y == x && !created);
	T_CHECK(doc_get_or_add_seq(m, "meta", &created) == NULL && !created);
	T_CHECK(doc_get_or_add_map(m, "a", NULL) == NULL);
	x = doc_get_or_add_seq(m, "list", NULL);
	T_CHECK(x && x->type == DOC_SEQ);
	T_CHECK(keys_are(m, "a,b,c,meta,list"));
	T_STREQ(doc_strval(doc_path(m, "meta/k")), "v");
	T_CHECK(doc_path(m, "meta/nope") == NULL && doc_path(m, "a/b") == NULL);
	T_CHECK(doc_get(x, "a") == NULL && doc_strval(doc_get(m, "a")) == NULL);
	T_CHECK(doc_is(x, DOC_SEQ) && !doc_is(NULL, DOC_SEQ));
	doc_free(m);
}

static void tree_seq_ops(void)
{
	struct doc_node *s = doc_seq(), *t;

	doc_push(s, doc_int(1));
	doc_push(s, doc_int(3));
	doc_insert(s, 1, doc_int(2));
	doc_insert(s, 0, doc_int(0));
	T_CHECK(s->n == 4);
	for (size_t i = 0; i < 4; i++)
		T_CHECK(s->vals[i]->text[0] == (char)('0' + i));
	t = doc_take(s, 1);
	T_STREQ(t->text, "1");
	doc_free(t);
	doc_remove(s, 0);
	T_CHECK(s->n == 2);
	T_STREQ(s->vals[0]->text, "2");
	T_STREQ(s->vals[1]->text, "3");
	doc_free(s);
}

static void tree_copy_equal(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct doc_node *c;

	T_CHECK(read_yaml("a: !Ref X\nb: [1, 2.0, {c: d}]\n", &st, &em) == 0);
	c = doc_copy(st.docs[0]);
	T_CHECK(doc_equal(c, st.docs[0]));
	T_CHECK(c->vals[0]->line == 1 && c->vals[0]->col == 4);
	T_STREQ(c->vals[0]->tag, "!Ref");
	doc_set_text(c->vals[1]->vals[1], "2");
	T_CHECK(!doc_equal(c, st.docs[0])); /* numbers compare by text */
	doc_set_text(c->vals[1]->vals[1], "2.0");
	T_CHECK(doc_equal(c, st.docs[0]));
	free(c->vals[0]->tag);
	c->vals[0]->tag = NULL;
	T_CHECK(!doc_equal(c, st.docs[0]));
	doc_free(c);
	c = abc_map();
	T_CHECK(!doc_equal(c, NULL) && doc_equal(NULL, NULL));
	doc_del(c, "a");
	doc_set(c, "a", doc_int(1));
	{
		struct doc_node *d = abc_map();

		T_CHECK(!doc_equal(c, d)); /* same pairs, other order */
		doc_free(d);
	}
	doc_free(c);
	doc_stream_free(&st);
	T_CHECK(st.n == 0 && st.docs == NULL);
}

static void tree_set_text(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct doc_node *v;

	T_CHECK(read_yaml("k: !Sub 'x-${A}'\n", &st, &em) == 0);
	v = doc_get(st.docs[0], "k");
	doc_set_text(v, "y-${B}");
	T_CHECK(v->type == DOC_STRING && v->style == DOC_STYLE_SINGLE && v->line == 1 && v->len == 6);
	T_STREQ(v->tag, "!Sub");
	doc_stream_free(&st);
}

static void tree_dup_key(void)
{
	struct doc_node *m = doc_map();
	size_t a = 99, b = 99;
	char k[16];

	T_CHECK(!doc_dup_key(m, &a, &b));
	for (int i = 0; i < 5000; i++) {
		snprintf(k, sizeof(k), "k%d", i);
		doc_set(m, k, doc_int(i));
	}
	T_CHECK(!doc_dup_key(m, &a, &b));
	doc_push(doc_get_or_add_seq(m, "x", NULL), doc_null());
	/* rename the last key to repeat k1234, behind doc_set's back */
	doc_set_text(m->keys[m->n - 1], "k1234");
	T_CHECK(doc_dup_key(m, &a, &b) && a == 1234 && b == 5000);
	doc_free(m);
}

/* ---- JSON ---- */

static const char *const pretty2 =
	"{\n"
	"  \"apiVersion\": \"apps/v1\",\n"
	"  \"spec\": {\n"
	"    \"replicas\": 3,\n"
	"    \"big\": 123456789012345678901234567890,\n"
	"    \"real\": 0.1000000000000000055511151231257827,\n"
	"    \"e\": -1.5E+400,\n"
	"    \"empty\": {},\n"
	"    \"none\": [],\n"
	"    \"list\": [\n"
	"      true,\n"
	"      false,\n"
	"      null,\n"
	"      \"caf\xC3\xA9 \\u0000 \\\" \\\\ / \\n\\t\\r\\b\\f\\u001f\"\n"
	"    ]\n"
	"  }\n"
	"}\n";

static void json_roundtrip_2space(void)
{
	struct err_msg em;
	int rc;
	char *out = json_rt(pretty2, &rc, &em);

	T_CHECK(rc == 0);
	T_STREQ(out, pretty2);
	free(out);
}

static void json_roundtrip_4space(void)
{
	const char *in = "{\n    \"a\": [\n        1,\n        {\n            \"b\": \"x\"\n        }\n    ],\n"
			 "    \"c\": 2\n}\n";
	struct err_msg em;
	int rc;
	char *out = json_rt(in, &rc, &em);

	T_CHECK(rc == 0);
	T_STREQ(out, in);
	free(out);
}

static void json_roundtrip_compact(void)
{
	const char *in = "{\"a\":[1,{\"b\":\"\\u00e9\"}],\"c\":{},\"d\":[],\"e\":-0.0e-0}\n";
	struct err_msg em;
	struct doc_stream st = { 0 };
	int rc;
	char *out = json_rt(in, &rc, &em);

	T_CHECK(rc == 0);
	T_STREQ(out, "{\"a\":[1,{\"b\":\"\xC3\xA9\"}],\"c\":{},\"d\":[],\"e\":-0.0e-0}\n");
	free(out);
	T_CHECK(read_json("\"\\u00e9\"", &st, &em) == 0);
	T_CHECK(st.json_indent == 0);
	doc_stream_free(&st);
	T_CHECK(read_json("[1,\n 2]", &st, &em) == 0 && st.json_indent == 1);
	doc_stream_free(&st);
}

static void json_stream(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	int rc;
	char *out;

	T_CHECK(read_json("{\"a\":1}{\"b\":2}\n[3] \"s\"\t7 null", &st, &em) == 0);
	T_CHECK(st.n == 6 && st.format == DOC_JSON);
	T_STREQ(st.name, "t.json");
	doc_stream_free(&st);
	out = json_rt("{\"a\":1}\n{\"b\":2}\n", &rc, &em);
	T_STREQ(out, "{\"a\":1}\n{\"b\":2}\n");
	free(out);
	T_CHECK(read_json(" \n\t ", &st, &em) == DP_ESYNTAX);
	T_STREQ(em.text, "t.json: no document (the input is empty)");
	T_CHECK(doc_read_json("\xEF\xBB\xBF[1]", 6, "b", NULL, &st, &em) == 0 && st.n == 1);
	doc_stream_free(&st);
}

static void json_strings(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	const struct doc_node *s;

	T_CHECK(read_json("[\"\\ud83d\\ude00\", \"a\\u0000b\", \"\\/\"]", &st, &em) == 0);
	s = st.docs[0];
	T_STREQ(s->vals[0]->text, "\xF0\x9F\x98\x80");
	T_CHECK(s->vals[1]->len == 3 && memcmp(s->vals[1]->text, "a\0b", 4) == 0);
	T_STREQ(s->vals[2]->text, "/");
	doc_stream_free(&st);
}

static void json_positions(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	const struct doc_node *m;

	T_CHECK(read_json("{\n  \"k\": [1,\n    \"\xC3\xA9x\", true]}", &st, &em) == 0);
	m = st.docs[0];
	T_CHECK(m->line == 1 && m->col == 1);
	T_CHECK(m->keys[0]->line == 2 && m->keys[0]->col == 3);
	T_CHECK(m->vals[0]->line == 2 && m->vals[0]->col == 8);
	T_CHECK(m->vals[0]->vals[1]->line == 3 && m->vals[0]->vals[1]->col == 5);
	T_CHECK(m->vals[0]->vals[2]->col == 12); /* columns count bytes */
	doc_stream_free(&st);
}

struct bad {
	const char *in, *msg;
	int rc;
};

static void json_errors(void)
{
	static const struct bad cases[] = {
		{ "{\"a\": 1", "t.json:1:8: unexpected end of input: expected ',' or '}' after an object member", DP_ESYNTAX },
		{ "{\n  \"a\": 1\n  \"b\": 2\n}", "t.json:3:3: expected ',' or '}' after an object member", DP_ESYNTAX },
		{ "[\"a\\x\"]", "t.json:1:4: invalid escape '\\x' in a string", DP_ESYNTAX },
		{ "{\"a\": \"\xFF\"}", "t.json:1:8: invalid UTF-8 (byte 0xFF) in a string", DP_ESYNTAX },
		{ "[\"\xC0\xAF\"]", "t.json:1:3: invalid UTF-8 (byte 0xC0) in a string", DP_ESYNTAX },
		{ "[\"\xED\xA0\x80\"]", "t.json:1:3: invalid UTF-8 (byte 0xED) in a string", DP_ESYNTAX },
		{ "{\n \"k\": 1,\n \"k\": 2\n}", "t.json:3:2: duplicate key \"k\" (lines 2 and 3)", DP_ESYNTAX },
		{ "[1,]", "t.json:1:4: expected a value after ',' (JSON has no trailing commas)", DP_ESYNTAX },
		{ "{\"a\":1,}", "t.json:1:8: expected a key after ',' (JSON has no trailing commas)", DP_ESYNTAX },
		{ "[01]", "t.json:1:2: invalid number", DP_ESYNTAX },
		{ "[1.]", "t.json:1:2: invalid number: expected a digit after '.'", DP_ESYNTAX },
		{ "[.5]", "t.json:1:2: unexpected character '.'", DP_ESYNTAX },
		{ "[tru]", "t.json:1:2: invalid literal (JSON has true, false and null)", DP_ESYNTAX },
		{ "[\"\\ud800x\"]", "t.json:1:3: high surrogate \\uD800 is not followed by a low surrogate", DP_ESYNTAX },
		{ "[\"\\udc00\"]", "t.json:1:3: lone low surrogate \\uDC00 in a string", DP_ESYNTAX },
		{ "[\"a\tb\"]", "t.json:1:4: control character 0x09 in a string (write it as \\u0009)", DP_ESYNTAX },
		{ "[\"abc", "t.json:1:2: unterminated string", DP_ESYNTAX },
		{ "{\"a\" 1}", "t.json:1:6: expected ':' after an object key", DP_ESYNTAX },
		{ "{} x", "t.json:1:4: invalid literal (JSON has true, false and null)", DP_ESYNTAX },
		{ "{'a': 1}", "t.json:1:2: expected a string key or '}'", DP_ESYNTAX },
	};
	struct doc_stream st = { 0 };
	struct err_msg em;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = read_json(cases[i].in, &st, &em);

		if (rc != cases[i].rc)
			T_FAIL("case %zu: rc %d", i, rc);
		T_STREQ(em.text, cases[i].msg);
		T_CHECK(st.docs == NULL && st.n == 0); /* untouched on failure */
	}
}

static char *nested(int depth, const char *open, const char *close)
{
	struct buf b;

	buf_init(&b, 0);
	for (int i = 0; i < depth; i++)
		buf_puts(&b, open);
	for (int i = 0; i < depth; i++)
		buf_puts(&b, close);
	return buf_steal(&b, NULL);
}

static void json_caps(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct doc_limits lim = doc_default_limits;
	char *deep = nested(300, "[", "]");

	T_CHECK(doc_default_limits.max_bytes == 64u << 20 && doc_default_limits.max_depth == 256 &&
		doc_default_limits.max_nodes == 16u << 20);
	T_CHECK(read_json(deep, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "t.json:1:257: nesting deeper than 256 levels (max_depth)");
	free(deep);
	deep = nested(256, "[", "]");
	T_CHECK(read_json(deep, &st, &em) == 0);
	doc_stream_free(&st);
	free(deep);
	lim.max_bytes = 4;
	T_CHECK(doc_read_json("[1,2]", 5, "c", &lim, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "c: input is 5 bytes, over the 4-byte cap (max_bytes)");
	lim = doc_default_limits;
	lim.max_nodes = 3;
	T_CHECK(doc_read_json("[1,2,3]", 7, "c", &lim, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "c:1:6: more than 3 values (max_nodes)");
}

static void json_writer_converts(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	char *out;

	T_CHECK(read_yaml("a: 0x1F\nb: 0o17\nc: +1\nd: !!int 1_000\ne: .5\nf: 1.\ng: -.5e3\n"
			  "h: yes\ni: Off\nj: ~\nk:\nl: Null\nm: 0644\nn: 0x123456789abcdef0123\n"
			  "80: port\ntrue: t\ny: yes\n",
			  &st, &em) == 0);
	out = json_of(st.docs[0], 0);
	T_STREQ(out, "{\"a\":31,\"b\":15,\"c\":1,\"d\":1000,\"e\":0.5,\"f\":1.0,\"g\":-0.5e3,"
		     "\"h\":true,\"i\":false,\"j\":null,\"k\":null,\"l\":null,\"m\":420,"
		     "\"n\":5373003642731685151011,\"80\":\"port\",\"true\":\"t\",\"y\":true}");
	free(out);
	doc_stream_free(&st);
	T_CHECK(read_yaml("x: [1, -.INF]\n", &st, &em) == 0);
	T_CHECK(write_json_rc(&st, &em) == DP_EUNSUPPORTED);
	T_STREQ(em.text, "t.yaml:1:8: number -.INF has no JSON form");
	doc_stream_free(&st);
	T_CHECK(read_yaml("Resources:\n  B:\n    Name: !Ref X\n", &st, &em) == 0);
	T_CHECK(write_json_rc(&st, &em) == DP_EUNSUPPORTED);
	T_STREQ(em.text, "t.yaml:3:11: YAML tag !Ref has no JSON form");
	doc_stream_free(&st);
	T_CHECK(read_yaml("a: !!str 12\nb: !!binary aGk=\n", &st, &em) == 0);
	out = json_of(st.docs[0], 2);
	T_STREQ(out, "{\n  \"a\": \"12\",\n  \"b\": \"aGk=\"\n}\n");
	free(out);
	doc_stream_free(&st);
}

static void json_writer_memory_nodes(void)
{
	struct doc_node *m = doc_map(), *s = doc_seq(), *t = doc_str("x");
	struct buf out;
	struct err_msg em;
	char *o;

	doc_set(m, "s", s);
	doc_push(s, doc_str("a\"b\\c\x01\x7f\xE2\x82\xAC"));
	doc_push(s, doc_map());
	o = json_of(m, 2);
	T_STREQ(o, "{\n  \"s\": [\n    \"a\\\"b\\\\c\\u0001\x7f\xE2\x82\xAC\",\n    {}\n  ]\n}\n");
	free(o);
	t->tag = mem_strdup("!Ref");
	doc_push(s, t);
	buf_init(&out, 0);
	T_CHECK(doc_write_json(&out, m, 0, &em) == DP_EUNSUPPORTED);
	T_STREQ(em.text, "YAML tag !Ref has no JSON form");
	T_CHECK(out.len == 0);
	free(t->tag);
	t->tag = NULL;
	buf_free(&out);
	buf_init(&out, 10);
	T_CHECK(doc_write_json(&out, m, 0, &em) == DP_ETOOBIG);
	buf_free(&out);
	doc_free(m);
}

/* ---- YAML ---- */

static void yaml_resolve(void)
{
	static const struct {
		const char *text;
		enum doc_type type;
	} cases[] = {
		{ "~", DOC_NULL }, { "null", DOC_NULL }, { "Null", DOC_NULL }, { "NULL", DOC_NULL },
		{ "nULL", DOC_STRING }, { "true", DOC_BOOL }, { "False", DOC_BOOL }, { "yes", DOC_BOOL },
		{ "NO", DOC_BOOL }, { "on", DOC_BOOL }, { "Off", DOC_BOOL }, { "y", DOC_BOOL },
		{ "N", DOC_BOOL }, { "tRue", DOC_STRING }, { "12", DOC_NUMBER }, { "-12", DOC_NUMBER },
		{ "+12", DOC_NUMBER }, { "0x1F", DOC_NUMBER }, { "0o17", DOC_NUMBER },
		{ "0o18", DOC_STRING }, { "1.5", DOC_NUMBER }, { ".5", DOC_NUMBER },
		{ "1.", DOC_NUMBER }, { "1e3", DOC_NUMBER }, { "-1.5E-3", DOC_NUMBER },
		{ ".inf", DOC_NUMBER }, { "-.Inf", DOC_NUMBER }, { ".NaN", DOC_NUMBER },
		{ "1e", DOC_STRING }, { ".", DOC_STRING }, { "1.2.3", DOC_STRING },
		{ "1_000", DOC_STRING }, { "abc", DOC_STRING }, { "12abc", DOC_STRING },
	};
	struct doc_stream st = { 0 };
	struct err_msg em;
	char in[64];

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(in, sizeof(in), "v: %s\n", cases[i].text);
		T_CHECK(read_yaml(in, &st, &em) == 0);
		if (st.docs[0]->vals[0]->type != cases[i].type)
			T_FAIL("%s resolved as %d", cases[i].text, (int)st.docs[0]->vals[0]->type);
		T_STREQ(st.docs[0]->vals[0]->text, cases[i].text);
		doc_stream_free(&st);
	}
	T_CHECK(read_yaml("a:\nb: \"true\"\nc: '1'\nd: |\n  12\n", &st, &em) == 0);
	T_CHECK(st.docs[0]->vals[0]->type == DOC_NULL && st.docs[0]->vals[0]->len == 0);
	T_CHECK(st.docs[0]->vals[1]->type == DOC_STRING && st.docs[0]->vals[2]->type == DOC_STRING);
	T_CHECK(st.docs[0]->vals[3]->type == DOC_STRING);
	doc_stream_free(&st);
}

static void yaml_styles_tags(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	const struct doc_node *m;

	T_CHECK(read_yaml("a: plain\nb: 'single'\nc: \"double\"\nd: |\n  lit\ne: >\n  fold\n"
			  "f: [1, 2]\ng: {x: 1}\nh: !Ref X\ni: !!str 123\nj: !!int '7'\n"
			  "k: !!bool yes\nl: !!null ''\nm: !If [c, a, b]\n",
			  &st, &em) == 0);
	m = st.docs[0];
	T_CHECK(m->vals[0]->style == DOC_STYLE_PLAIN && m->vals[1]->style == DOC_STYLE_SINGLE);
	T_CHECK(m->vals[2]->style == DOC_STYLE_DOUBLE && m->vals[3]->style == DOC_STYLE_LITERAL);
	T_CHECK(m->vals[4]->style == DOC_STYLE_FOLDED && m->vals[5]->style == DOC_STYLE_FLOW);
	T_CHECK(m->vals[6]->style == DOC_STYLE_FLOW && m->style == DOC_STYLE_ANY);
	T_STREQ(m->vals[3]->text, "lit\n");
	T_STREQ(m->vals[7]->tag, "!Ref");
	T_CHECK(m->vals[7]->type == DOC_STRING);
	T_STREQ(m->vals[8]->tag, "tag:yaml.org,2002:str");
	T_CHECK(m->vals[8]->type == DOC_STRING);
	T_CHECK(m->vals[9]->type == DOC_NUMBER && m->vals[10]->type == DOC_BOOL);
	T_CHECK(m->vals[11]->type == DOC_NULL);
	T_STREQ(m->vals[12]->tag, "!If");
	T_CHECK(m->vals[12]->type == DOC_SEQ && m->vals[12]->n == 3);
	T_CHECK(m->vals[12]->line == 15 && m->vals[12]->col == 4);
	doc_stream_free(&st);
}

static const char *const cfn =
	"AWSTemplateFormatVersion: '2010-09-09'\n"
	"Conditions:\n"
	"  IsProd: !Equals [!Ref Env, prod]\n"
	"Resources:\n"
	"  Task:\n"
	"    Type: AWS::ECS::TaskDefinition\n"
	"    Properties:\n"
	"      Family: !Sub '${AWS::StackName}-task'\n"
	"      Role: !GetAtt Role.Arn\n"
	"      Cpu: !If [IsProd, 1024, 256]\n"
	"      Tags: !Join\n"
	"      - ','\n"
	"      - - a\n"
	"        - !Ref B\n"
	"      Script: |\n"
	"        #!/bin/sh\n"
	"        echo \"hi\"\n"
	"      Mode: 0644\n"
	"      Flag: yes\n"
	"      Quoted: \"true\"\n"
	"      Empty:\n"
	"      Env: {}\n";

static void yaml_roundtrip_tags(void)
{
	struct doc_stream st = { 0 }, st2 = { 0 };
	struct err_msg em;
	char *out;

	T_CHECK(read_yaml(cfn, &st, &em) == 0);
	out = yaml_out(&st, &em);
	T_CHECK(out != NULL);
	T_STREQ(out, cfn);
	T_CHECK(read_yaml(out, &st2, &em) == 0);
	T_CHECK(doc_equal(st.docs[0], st2.docs[0]));
	free(out);
	doc_stream_free(&st);
	doc_stream_free(&st2);
}

static void yaml_roundtrip_equal(void)
{
	static const char *const inputs[] = {
		"a: [1, {b: c}, [d]]\nb: {c: , d: e}\n",
		"- !!binary aGk=\n- !Custom {a: 1}\n- ! x\n- !<tag:example.com,2000:x> y\n",
		"k: \"line1\\nline2\\t\\u00e9 \\U0001F600\"\nl: >+\n  keep\n\n",
		"? !!str 1\n: one\n\"2\": two\n'': empty\n",
		"a: &x {b: [1, 2]}\nc: *x\nd: &s text\ne: *s\n",
		"- 'it''s'\n- \"  padded  \"\n- 'x: y'\n- '#c'\n- '- d'\n",
	};
	struct doc_stream a = { 0 }, b = { 0 };
	struct err_msg em;

	for (size_t i = 0; i < sizeof(inputs) / sizeof(inputs[0]); i++) {
		char *out;

		if (read_yaml(inputs[i], &a, &em) != 0)
			T_FAIL("case %zu: %s", i, em.text);
		out = yaml_out(&a, &em);
		if (out == NULL)
			T_FAIL("case %zu: %s", i, em.text);
		if (read_yaml(out, &b, &em) != 0)
			T_FAIL("case %zu: re-read %s: %s", i, out, em.text);
		if (a.n != b.n || !doc_equal(a.docs[0], b.docs[0]))
			T_FAIL("case %zu: not equal after writing:\n%s", i, out);
		free(out);
		doc_stream_free(&a);
		doc_stream_free(&b);
	}
}

static void yaml_stream(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	char *out;

	T_CHECK(read_yaml("a: 1\n---\nb: 2\n---\n", &st, &em) == 0);
	T_CHECK(st.n == 2 && !st.yaml_explicit_start && st.format == DOC_YAML);
	out = yaml_out(&st, &em);
	T_STREQ(out, "a: 1\n---\nb: 2\n");
	free(out);
	doc_stream_free(&st);
	T_CHECK(read_yaml("# c\n---\na: 1\n--- null\n---\n...\n", &st, &em) == 0);
	T_CHECK(st.n == 2 && st.yaml_explicit_start && st.docs[1]->type == DOC_NULL);
	out = yaml_out(&st, &em);
	T_STREQ(out, "---\na: 1\n--- null\n");
	free(out);
	doc_stream_free(&st);
	T_CHECK(read_yaml("", &st, &em) == 0 && st.n == 0);
	T_CHECK(read_yaml("# only a comment\n", &st, &em) == 0 && st.n == 0);
	T_CHECK(read_yaml("--- ~\n", &st, &em) == 0 && st.n == 1);
	doc_stream_free(&st);
	T_CHECK(doc_read("  \n{\"a\": 1}", 11, "x", NULL, &st, &em) == 0 && st.format == DOC_JSON);
	doc_stream_free(&st);
	T_CHECK(doc_read("a: {b: 1}", 9, "x", NULL, &st, &em) == 0 && st.format == DOC_YAML);
	doc_stream_free(&st);
}

static void yaml_anchors(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct doc_limits lim = doc_default_limits;
	struct buf bomb;

	T_CHECK(read_yaml("base: &b {x: 1}\nuse: *b\n", &st, &em) == 0);
	T_CHECK(doc_equal(st.docs[0]->vals[0], st.docs[0]->vals[1]));
	T_CHECK(st.docs[0]->vals[0] != st.docs[0]->vals[1]);
	doc_stream_free(&st);
	buf_init(&bomb, 0);
	buf_puts(&bomb, "a: &a [x, x, x, x, x, x, x, x, x, x]\n");
	for (char c = 'b'; c <= 'j'; c++)
		buf_printf(&bomb, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", c,
			   c, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1);
	/* 10^10 leaves in 400 bytes: go-yaml's alias ratio stops it within a few thousand nodes, long before
	   the 16M-node cap (which used to let it build 0.7-1.5 GB first) */
	T_CHECK(doc_read_yaml(bomb.data, bomb.len, "bomb.yaml", &lim, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "bomb.yaml:4:8: the document contains excessive aliasing: alias *c would make 2331 of its "
			 "2350 nodes copies");
	/* an honest document that reuses a block 50 times is read */
	buf_reset(&bomb);
	buf_puts(&bomb, "base: &env [{name: A, value: '1'}, {name: B, value: '2'}, {name: C, value: '3'}]\n");
	for (int i = 0; i < 50; i++)
		buf_printf(&bomb, "c%d: {image: app, n: %d, labels: {a: b, c: d, e: f}, env: *env}\n", i, i);
	T_CHECK(doc_read_yaml(bomb.data, bomb.len, "honest.yaml", &lim, &st, &em) == 0);
	T_CHECK(st.n == 1 && st.docs[0]->n == 51);
	doc_stream_free(&st);
	buf_reset(&bomb);
	buf_puts(&bomb, "a: &a [x, x, x, x, x, x, x, x, x, x]\n");
	for (char c = 'b'; c <= 'j'; c++)
		buf_printf(&bomb, "%c: &%c [*%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c, *%c]\n", c,
			   c, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1, c - 1);
	lim.max_nodes = 100;
	T_CHECK(doc_read_yaml(bomb.data, bomb.len, "bomb.yaml", &lim, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "bomb.yaml:2:36: alias *a expands past 100 values (max_nodes)");
	buf_free(&bomb);
	T_CHECK(read_yaml("a: *nope\n", &st, &em) == DP_ESYNTAX);
	T_STREQ(em.text, "t.yaml:1:4: alias *nope has no anchor");
	T_CHECK(read_yaml("a: &r [*r]\n", &st, &em) == DP_EUNSUPPORTED);
	T_STREQ(em.text, "t.yaml:1:8: alias *r refers to a node that contains it");
}

static void yaml_errors(void)
{
	static const struct bad cases[] = {
		{ "a:\n\tb: 1\n", "t.yaml:2:1: found character that cannot start any token (while scanning for the next token)", DP_ESYNTAX },
		{ "a: 1\nb: 2\na: 3\n", "t.yaml:3:1: duplicate key \"a\" (lines 1 and 3)", DP_ESYNTAX },
		{ "x:\n  ? [a]\n  : 1\n", "t.yaml:2:5: a map key that is a collection is not supported", DP_EUNSUPPORTED },
		{ "k: v\n? \n: x\n", "t.yaml:2:2: a map key with no text is not supported", DP_EUNSUPPORTED },
		{ "a: \xFF\n", "t.yaml:1:4: invalid leading UTF-8 octet (byte 0xFF)", DP_ESYNTAX },
		{ "a: [1\n", "t.yaml:2:1: did not find expected ',' or ']' (while parsing a flow sequence)", DP_ESYNTAX },
		{ "a: 'b\n", "t.yaml:2:1: found unexpected end of stream (while scanning a quoted scalar)", DP_ESYNTAX },
		{ "a: b: c\n", "t.yaml:1:5: mapping values are not allowed in this context", DP_ESYNTAX },
		{ "- !<!a,b> x\n", "t.yaml:1:3: YAML tag !a,b cannot be written back (',', '[' or ']' in a short tag)", DP_EUNSUPPORTED },
	};
	struct doc_stream st = { 0 };
	struct err_msg em;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		int rc = read_yaml(cases[i].in, &st, &em);

		if (rc != cases[i].rc)
			T_FAIL("case %zu: rc %d (%s)", i, rc, em.text);
		T_STREQ(em.text, cases[i].msg);
		T_CHECK(st.docs == NULL && st.n == 0);
	}
}

static void yaml_caps(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct doc_limits lim = doc_default_limits;
	char *deep = nested(300, "[", "]");

	T_CHECK(read_yaml(deep, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "t.yaml:1:257: nesting deeper than 256 levels (max_depth)");
	free(deep);
	lim.max_bytes = 3;
	T_CHECK(doc_read_yaml("a: 1", 4, "y", &lim, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "y: input is 4 bytes, over the 3-byte cap (max_bytes)");
	lim = doc_default_limits;
	lim.max_nodes = 4;
	T_CHECK(doc_read_yaml("[a, b, c, d]", 12, "y", &lim, &st, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "y:1:11: more than 4 values (max_nodes)");
}

static void yaml_writer_quoting(void)
{
	static const char *const quoted[] = { "true", "123", "", "null", "1e3", "~", "yes",
					       "0x1F", ".inf", "1_000", "2001-12-14", "1:20", "<<" };
	struct doc_node *m = doc_map();
	struct doc_node *docs[1] = { m };
	struct buf out;
	struct err_msg em;
	char key[8];

	for (size_t i = 0; i < sizeof(quoted) / sizeof(quoted[0]); i++) {
		snprintf(key, sizeof(key), "q%zu", i);
		doc_set(m, key, doc_str(quoted[i]));
	}
	doc_set(m, "plain", doc_str("hello world"));
	doc_set(m, "ver", doc_str("v1.2.3"));
	doc_set(m, "n", doc_num("1e400"));
	doc_set(m, "b", doc_bool(true));
	doc_set(m, "z", doc_null());
	doc_set(m, "colon", doc_str("a: b"));
	doc_set(m, "multi", doc_str("l1\nl2\n"));
	buf_init(&out, 0);
	T_CHECK(doc_write_yaml(&out, docs, 1, false, &em) == 0);
	T_STREQ(out.data, "q0: \"true\"\nq1: \"123\"\nq2: \"\"\nq3: \"null\"\nq4: \"1e3\"\nq5: \"~\"\n"
			  "q6: \"yes\"\nq7: \"0x1F\"\nq8: \".inf\"\nq9: \"1_000\"\nq10: \"2001-12-14\"\n"
			  "q11: \"1:20\"\nq12: \"<<\"\nplain: hello world\nver: v1.2.3\n\"n\": 1e400\n"
			  "b: true\nz: null\ncolon: 'a: b'\nmulti: 'l1\n\n  l2\n\n  '\n");
	buf_reset(&out);
	T_CHECK(doc_write_yaml(&out, docs, 1, true, &em) == 0);
	T_CHECK(strncmp(out.data, "---\nq0:", 7) == 0);
	buf_reset(&out);
	m->vals[0]->tag = mem_strdup("!a[0]");
	T_CHECK(doc_write_yaml(&out, docs, 1, false, &em) == DP_EUNSUPPORTED);
	T_STREQ(em.text, "cannot write YAML tag !a[0] (',', '[' or ']' in a short tag)");
	T_CHECK(out.len == 0);
	buf_free(&out);
	doc_free(m);
}

static void json_yaml_json(void)
{
	struct doc_stream st = { 0 }, st2 = { 0 };
	struct err_msg em;
	struct buf out;
	char *y;

	T_CHECK(read_json(pretty2, &st, &em) == 0);
	y = yaml_out(&st, &em);
	T_CHECK(y != NULL);
	T_CHECK(read_yaml(y, &st2, &em) == 0);
	st2.json_indent = 2;
	st2.format = DOC_JSON;
	buf_init(&out, 0);
	T_CHECK(doc_write(&out, &st2, DOC_JSON, &em) == 0);
	T_STREQ(out.data, pretty2);
	T_CHECK(strstr(y, "e: -1.5E+400\n") != NULL);
	buf_free(&out);
	free(y);
	doc_stream_free(&st);
	doc_stream_free(&st2);
}

static double seconds(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Parse and write `in` in both formats; seconds taken. */
static double time_both(const char *in, size_t len, bool *ok)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct buf out;
	double t0 = seconds();

	buf_init(&out, 0);
	*ok = doc_read(in, len, "big", NULL, &st, &em) == 0 &&
	      doc_write(&out, &st, DOC_JSON, &em) == 0 && doc_write(&out, &st, DOC_YAML, &em) == 0;
	doc_stream_free(&st);
	buf_free(&out);
	return seconds() - t0;
}

/* Both must take well under a second; valgrind runs ~50 times slower. */
static void big_documents(void)
{
	struct doc_stream st = { 0 };
	struct err_msg em;
	struct buf env, map, out;
	double t, t0, limit = getenv("T_SLOW") ? 60.0 : 1.0;
	bool ok;

	buf_init(&env, 0);
	buf_puts(&env, "{\"containers\": [{\"name\": \"app\", \"env\": [");
	for (int i = 0; i < 1500; i++)
		buf_printf(&env, "%s{\"name\": \"VAR_%d\", \"value\": \"v%d\"}", i ? ", " : "", i, i);
	buf_puts(&env, "]}]}");
	t = time_both(env.data, env.len, &ok);
	buf_free(&env);
	T_CHECK(ok);
	if (t > limit)
		T_FAIL("1,500-entry env took %.3f s", t);
	buf_init(&map, 0);
	buf_puts(&map, "Resources:\n");
	for (int i = 0; i < 10000; i++)
		buf_printf(&map, "  R%d:\n    Type: AWS::SQS::Queue\n    Properties: {Name: !Sub 'q-%d'}\n",
			   i, i);
	buf_init(&out, 0);
	t0 = seconds();
	ok = doc_read(map.data, map.len, "big", NULL, &st, &em) == 0 &&
	     doc_get(st.docs[0], "Resources")->n == 10000 &&
	     doc_write(&out, &st, DOC_YAML, &em) == 0 && strcmp(out.data, map.data) == 0;
	t = seconds() - t0;
	doc_stream_free(&st);
	buf_free(&out);
	buf_free(&map);
	T_CHECK(ok);
	if (t > limit)
		T_FAIL("10,000-key map took %.3f s", t);
}

/*
 * An object read around its "items" and written back in pieces: the bytes
 * doc_read_json + doc_write_part give, element positions as the whole read
 * stamps them; or 0 (read it whole) where the shape does not fit.
 */
static char *items_rt(const char *in, size_t *n_items, int *rc, struct err_msg *em)
{
	struct doc_json_items *it;
	struct doc_stream st;
	struct doc_node *item;
	struct buf out;
	size_t k, n = 0;

	*rc = doc_json_items_open(in, strlen(in), "t.json", NULL, "items", &it, &st, &k);
	if (*rc != 1)
		return NULL;
	buf_init(&out, 0);
	*rc = doc_write_json_open(&out, &st, st.docs[0], k, em);
	while (*rc == 0 && (*rc = doc_json_items_next(it, &item, em)) == 1) {
		*rc = doc_write_json_item(&out, &st, item, n++, em);
		doc_free(item);
	}
	if (*rc == 0)
		*rc = doc_write_json_close(&out, &st, st.docs[0], k, n, em);
	doc_json_items_free(it);
	doc_stream_free(&st);
	*n_items = n;
	if (*rc != 0) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out, NULL);
}

static void json_items(void)
{
	static const char *const same[] = {
		"{\"kind\":\"List\",\"items\":[{\"a\":1},[2,3],\"x\"],\"metadata\":{}}\n",
		"{\n  \"items\": [\n    {\n      \"a\": [\n        1\n      ]\n    },\n    4\n  ],\n  \"z\": null\n}\n",
		"{\n    \"a\": {},\n    \"items\": []\n}\n",
		"{\"items\":[]}\n",
		"{\n  \"items\": [\n    \"]}\\\"[{\"\n  ]\n}\n",
	};
	static const char *const whole[] = {
		"[1]", "{\"items\":{}}", "{\"a\":[1]}", "{\"items\":[1]} {}", "{\"items\":[1,]} x",
		"{\"items\":[\"a]}", "{\"items\":[1]", "{\"items\":[],\"items\":[]}", "  ",
	};
	struct err_msg em = { "" };
	size_t n;
	int rc;

	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		char *a = json_rt(same[i], &rc, &em), *b = items_rt(same[i], &n, &rc, &em);

		T_CHECK(a && b && strcmp(a, b) == 0);
		free(a);
		free(b);
	}
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
		T_CHECK(items_rt(whole[i], &n, &rc, &em) == NULL && rc == 0);
	/* an element's error is the whole reading's, at the same place */
	T_CHECK(items_rt("{\"items\":[{\"a\":1},\n {\"b\" 2}]}", &n, &rc, &em) == NULL && rc == DP_ESYNTAX);
	T_STREQ(em.text, "t.json:2:7: expected ':' after an object key");
	T_CHECK(items_rt("{\"items\":[1,\n]}", &n, &rc, &em) == NULL && rc == DP_ESYNTAX);
	T_STREQ(em.text, "t.json:2:1: expected a value after ',' (JSON has no trailing commas)");
	T_CHECK(items_rt("{\"items\":[{\"a\":1,\"a\":2}]}", &n, &rc, &em) == NULL && rc == DP_ESYNTAX);
	T_CHECK(strncmp(em.text, "t.json:1:", 9) == 0 && strstr(em.text, "duplicate key"));
}

static void json_items_positions_caps(void)
{
	const char *in = "{\n  \"items\": [\n    {\"a\": 1},\n    {\"b\": [2]}\n  ],\n  \"kind\": \"List\"\n}\n";
	struct doc_limits lim = doc_default_limits;
	struct doc_json_items *it;
	struct doc_stream st;
	struct doc_node *item;
	struct err_msg em;
	size_t k;

	T_CHECK(doc_json_items_open(in, strlen(in), "p", NULL, "items", &it, &st, &k) == 1 && k == 0);
	T_CHECK(doc_get(st.docs[0], "items")->line == 2 && doc_get(st.docs[0], "items")->col == 12);
	T_CHECK(doc_json_items_next(it, &item, &em) == 1 && item->line == 3 && item->col == 5);
	doc_free(item);
	T_CHECK(doc_json_items_next(it, &item, &em) == 1 && doc_get(item, "b")->line == 4 &&
		doc_get(item, "b")->col == 11);
	doc_free(item);
	T_CHECK(doc_json_items_next(it, &item, &em) == 0 && doc_json_items_next(it, &item, &em) == 0);
	doc_json_items_free(it);
	doc_stream_free(&st);
	/* the caps are the whole input's: the envelope's values and every element's count */
	lim.max_nodes = 8; /* the object, its 2 keys and 2 values, then {"a": 1}: 8; the second element passes it */
	T_CHECK(doc_json_items_open(in, strlen(in), "p", &lim, "items", &it, &st, &k) == 1);
	T_CHECK(doc_json_items_next(it, &item, &em) == 1);
	doc_free(item);
	T_CHECK(doc_json_items_next(it, &item, &em) == DP_ETOOBIG);
	T_STREQ(em.text, "p:4:5: more than 8 values (max_nodes)");
	doc_json_items_free(it);
	doc_stream_free(&st);
}

/* A YAML document read around its "items" and written back in pieces: doc_read_yaml + doc_write_part's bytes. */
static char *yaml_items_rt(const char *in, int *rc, struct err_msg *em)
{
	struct doc_yaml_items *it;
	struct doc_yaml_list *w = NULL;
	struct doc_stream st;
	struct doc_node *item;
	struct buf out;
	size_t k;

	*rc = doc_yaml_items_open(in, strlen(in), "t.yaml", NULL, "items", &it, &st, &k);
	if (*rc != 1)
		return NULL;
	buf_init(&out, 0);
	*rc = doc_write_yaml_open(&out, &st, st.docs[0], k, &w, em);
	while (*rc == 0 && (*rc = doc_yaml_items_next(it, &item, em)) == 1) {
		*rc = doc_write_yaml_item(w, item, em);
		doc_free(item);
	}
	if (*rc == 0) {
		*rc = doc_write_yaml_close(w, st.docs[0], k, em);
		w = NULL;
	}
	doc_write_yaml_free(w);
	doc_yaml_items_free(it);
	doc_stream_free(&st);
	if (*rc != 0) {
		buf_free(&out);
		return NULL;
	}
	return buf_steal(&out, NULL);
}

static void yaml_items(void)
{
	static const char *const same[] = {
		"kind: List\nitems:\n- a: 1\n  b: [x, 'y']\n- \"s\"\n- - 1\n  - 2\nmetadata: {}\n",
		"---\nitems: !!seq\n- |\n  text\nz: ~\n",
		"items:\n- {a: 1}\n...\n",
	};
	static const char *const whole[] = {
		"- 1\n", "items: {}\n", "a: 1\nitems: []\n", "a: [1]\n", "items: [1]\n", "{items: [1]}\n", "items:\n- &a 1\n- *a\n",
		"x: &a 1\nitems:\n- 2\n", "items:\n- 1\n---\nb: 2\n", "items:\n- [1\n", "items: []\nitems: []\n", "",
	};
	struct err_msg em = { "" };
	int rc;

	for (size_t i = 0; i < sizeof(same) / sizeof(same[0]); i++) {
		struct doc_stream st = { 0 };
		struct buf a;
		char *b = yaml_items_rt(same[i], &rc, &em);

		buf_init(&a, 0);
		T_CHECK(doc_read_yaml(same[i], strlen(same[i]), "t.yaml", NULL, &st, &em) == 0 &&
			doc_write_part(&a, &st, st.docs[0], 0, DOC_YAML, &em) == 0);
		T_STREQ(b ? b : "(null)", a.data ? a.data : "(none)");
		doc_stream_free(&st);
		buf_free(&a);
		free(b);
	}
	for (size_t i = 0; i < sizeof(whole) / sizeof(whole[0]); i++)
		T_CHECK(yaml_items_rt(whole[i], &rc, &em) == NULL && rc == 0);
	/* an item's error is the whole reading's, at the same place */
	T_CHECK(yaml_items_rt("items:\n- a: 1\n- {b: 1, b: 2}\n", &rc, &em) == NULL && rc == DP_ESYNTAX);
	T_CHECK(strncmp(em.text, "t.yaml:3:", 9) == 0 && strstr(em.text, "duplicate key"));
}

int main(void)
{
	T_BEGIN("doc");
	T_RUN(tree_make);
	T_RUN(tree_set_keeps_position);
	T_RUN(tree_insert_del);
	T_RUN(tree_get_or_add);
	T_RUN(tree_seq_ops);
	T_RUN(tree_copy_equal);
	T_RUN(tree_set_text);
	T_RUN(tree_dup_key);
	T_RUN(json_roundtrip_2space);
	T_RUN(json_roundtrip_4space);
	T_RUN(json_roundtrip_compact);
	T_RUN(json_stream);
	T_RUN(json_strings);
	T_RUN(json_positions);
	T_RUN(json_errors);
	T_RUN(json_caps);
	T_RUN(json_writer_converts);
	T_RUN(json_writer_memory_nodes);
	T_RUN(json_items);
	T_RUN(json_items_positions_caps);
	T_RUN(yaml_items);
	T_RUN(yaml_resolve);
	T_RUN(yaml_styles_tags);
	T_RUN(yaml_roundtrip_tags);
	T_RUN(yaml_roundtrip_equal);
	T_RUN(yaml_stream);
	T_RUN(yaml_anchors);
	T_RUN(yaml_errors);
	T_RUN(yaml_caps);
	T_RUN(yaml_writer_quoting);
	T_RUN(json_yaml_json);
	T_RUN(big_documents);
	T_END();
}
