/*
 * test_journal.c - the document journal (doc.h doc_journal_*): the tree it
 * gives back is the tree as it was, whatever was changed, moved, replaced or
 * removed; and the webhook's review through it answers byte for byte what
 * the long way (inject a copy, diff) answers.
 */
#include <stdio.h>
#include <stdlib.h>

#include "common/buf.h"
#include "common/doc.h"
#include "common/mem.h"
#include "t.h"
#include "webhook/review.h"

static char *text(const struct doc_node *n)
{
	struct buf b;
	struct err_msg em;

	buf_init(&b, 1 << 20);
	doc_write_json(&b, n, 0, &em);
	return buf_steal(&b, NULL);
}

/* Every kind of change under a journal: before() prints as the original did, and shares what was left alone. */
static void before_is_the_original(void)
{
	const char *orig = "{\"a\":{\"x\":1,\"y\":[1,2,3]},\"b\":[{\"name\":\"p\"},{\"name\":\"q\",\"v\":\"s\"}],"
			   "\"c\":\"t\",\"d\":{\"deep\":{\"er\":[true]}},\"untouched\":{\"k\":[1,{\"z\":null}]}}";
	struct doc_node *root, *b, *moved;
	char *want, *got, *after, g[512], w[512];
	bool changed, shared, distinct;

	mem_arena_begin();
	root = t_doc(orig);
	want = text(root);
	doc_journal_begin();
	doc_set(doc_get(root, "a"), "x", doc_int(2));           /* replace a value */
	doc_push(doc_get(doc_get(root, "a"), "y"), doc_int(4)); /* append */
	doc_remove(doc_get(doc_get(root, "a"), "y"), 0);        /* remove */
	moved = doc_take(doc_get(root, "b"), 1);                /* move an item... */
	doc_set_text(doc_get(moved, "v"), "changed");           /* ...change it... */
	doc_push(doc_get_or_add_seq(root, "new", NULL), moved); /* ...and put it in a new list */
	doc_del(root, "c");                                     /* delete a key */
	doc_insert_at(doc_path(root, "d/deep"), 0, "first", doc_str("v")); /* insert a key */
	doc_append_pair(root, doc_str("z"), doc_null());
	b = doc_journal_before(root);
	doc_journal_end();
	got = text(b);
	after = text(root);
	/* the checks after the scope ends (a failed one returns at once), on copies of what they need */
	snprintf(g, sizeof(g), "%s", got);
	snprintf(w, sizeof(w), "%s", want);
	changed = strcmp(after, want) != 0;
	shared = doc_get(b, "untouched") == doc_get(root, "untouched");
	distinct = b != root;
	mem_arena_end();
	T_STREQ(g, w);
	T_CHECK(changed);
	T_CHECK(shared); /* what nothing touched is the same node, not a copy */
	T_CHECK(distinct);
}

static void nothing_changed_is_the_same_tree(void)
{
	struct doc_node *root;
	bool same;

	mem_arena_begin();
	root = t_doc("{\"a\":[1,2],\"b\":{\"c\":\"d\"}}");
	doc_journal_begin();
	(void)doc_get(root, "a");
	same = doc_journal_before(root) == root;
	doc_journal_end();
	mem_arena_end();
	T_CHECK(same);
}

/* A review the journal's way (arena, default) and the long way (copy_diff): the same bytes. */
static const char *const pods[] = {
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"bare\",\"annotations\":{\"diagport.dev/inject\":\"true\"}},"
	"\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"example.com/app:1\"}]}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"full\",\"labels\":{\"app\":\"x\"},\"annotations\":"
	"{\"diagport.dev/inject\":\"true\",\"we~ird/key\":\"x\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\","
	"\"env\":[{\"name\":\"A\",\"value\":\"1\"},{\"name\":\"DOTNET_DiagnosticPorts\",\"value\":\"/x\"}],\"volumeMounts\":"
	"[{\"name\":\"cfg\",\"mountPath\":\"/cfg\"}],\"securityContext\":{\"capabilities\":{\"add\":null,\"drop\":[\"ALL\"]}}},"
	"{\"name\":\"b\",\"image\":\"y\",\"env\":null}],\"volumes\":[{\"name\":\"cfg\",\"configMap\":{\"name\":\"cfg\"}}],"
	"\"initContainers\":[{\"name\":\"setup\",\"image\":\"busybox\"}]}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"empty\",\"annotations\":{\"diagport.dev/inject\":\"true\","
	"\"diagport.dev/mode\":\"suspend\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\",\"env\":[]}],"
	"\"volumes\":[],\"initContainers\":[]}}",
	"{\"apiVersion\":\"v1\",\"kind\":\"Pod\",\"metadata\":{\"name\":\"ptrace\",\"annotations\":{\"diagport.dev/inject\":\"true\","
	"\"diagport.dev/ptrace\":\"true\"}},\"spec\":{\"containers\":[{\"name\":\"app\",\"image\":\"x\"}]}}",
};

static char *admit(const char *pod, bool copy_diff, bool no_ptrace, enum review_outcome *o)
{
	struct inj_opts opts;
	struct review_config cfg = { .base = &opts, .max_body = 1 << 20, .copy_diff = copy_diff, .no_ptrace = no_ptrace };
	char *body = mem_printf("{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"request\":{\"uid\":\"u\","
				"\"kind\":{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"namespace\":\"n\","
				"\"operation\":\"CREATE\",\"object\":%s}}",
				pod);
	struct err_msg em;
	struct buf out;
	char *s;

	inj_opts_init(&opts);
	buf_init(&out, 1 << 24);
	s = review_admit(&cfg, body, strlen(body), &out, o, &em) == 0 ? mem_strdup(out.data) : NULL;
	buf_free(&out);
	inj_opts_free(&opts);
	mem_free(body);
	return s;
}

static void review_same_both_ways(void)
{
	for (size_t i = 0; i < sizeof(pods) / sizeof(pods[0]); i++)
		for (int np = 0; np < 2; np++) {
			enum review_outcome o1, o2;
			char *a = admit(pods[i], false, np, &o1), *b = admit(pods[i], true, np, &o2);

			if (a == NULL || b == NULL)
				T_FAIL("pod %zu: review failed", i);
			if (strcmp(a, b) != 0 || o1 != o2)
				T_FAIL("pod %zu (no_ptrace %d):\njournal %.300s\ncopy    %.300s", i, np, a, b);
			if (o1 == REVIEW_INJECTED && strstr(a, "\"patch\"") == NULL)
				T_FAIL("pod %zu: injected without a patch", i);
			mem_free(a);
			mem_free(b);
		}
}

int main(void)
{
	t_file_name = "test_journal";
	mem_install();
	T_RUN(before_is_the_original);
	T_RUN(nothing_changed_is_the_same_tree);
	T_RUN(review_same_both_ways);
	return t_failed_cases ? 1 : 0;
}
