/*
 * k8s_list.c - a Kubernetes List in JSON, injected (or uninjected) and
 * written one item at a time. `kubectl get deploy -A -o json` of a large
 * cluster is one List of thousands of workloads; read whole it is a tree of
 * about 30 times its text. Here the List's envelope is read first
 * (doc_json_items_open skips the items), then each item is read, given to
 * the rules of k8s.c as inj_k8s_object gives it, written, and dropped before
 * the next: the List costs its text and one item's tree. The bytes are the
 * ones the whole tree would be written as (doc_write_json_open/_item/_close).
 * The CLI and the fuzz target call it.
 */
#include "inj.h"

#include <string.h>

#include "mem.h"

/*
 * One item: read, injected, written (unless only checked) and dropped.
 * Everything it makes comes from the arena (mem.h) and goes at once at its
 * end, as a webhook review's trees do; its warnings are copied into `warned`
 * (heap memory, made before; a NUL after each) first. 1 when there was an
 * item, 0 after the last, or an error.
 */
static int one_item(struct doc_json_items *it, const struct doc_stream *s, const struct doc_node *list, size_t n,
		    bool inject, const struct inj_ctx *c, struct buf *out, inj_list_after_fn after, void *ctx,
		    bool *check_only, struct buf *warned, struct err_msg *em)
{
	struct inj_report rep = { 0 };
	struct inj_ctx ic = *c;
	struct doc_node *item;
	int rc, more;

	ic.report = c->report ? &rep : NULL;
	mem_arena_begin();
	if ((rc = more = doc_json_items_next(it, &item, em)) == 1) {
		rc = inj_k8s_list_item(item, list, inject, &ic, em);
		if (rc == 0 && !*check_only)
			rc = doc_write_json_item(out, s, item, n, em);
		if (rc == 0 && after && (rc = after(ctx)) == 1) {
			*check_only = true;
			rc = 0;
		}
		for (size_t i = 0; i < rep.nwarn; i++)
			buf_append(warned, rep.warnings[i], strlen(rep.warnings[i]) + 1);
	}
	mem_arena_end();
	if (c->report) {
		c->report->injected += rep.injected;
		c->report->skipped += rep.skipped;
		c->report->passed += rep.passed;
	}
	return rc == 0 ? more : rc;
}

int inj_k8s_list_json(const char *bytes, size_t len, const struct doc_limits *lim, const char *kind, bool inject,
		      const struct inj_ctx *c, struct buf *out, inj_list_after_fn after, void *ctx, struct err_msg *em)
{
	struct doc_json_items *it = NULL;
	struct doc_stream s;
	struct doc_node *list;
	struct buf warned;
	bool check_only = false;
	size_t k, n = 0;
	int rc;

	if (!doc_json_items_open(bytes, len, c->file, lim, "items", &it, &s, &k))
		return 1;
	list = s.docs[0];
	buf_init(&warned, 0);
	if (kind == NULL)
		kind = inj_detect(list);
	if (kind == NULL || strcmp(kind, "k8s") != 0 || !inj_k8s_is_list(list)) {
		rc = 1;
		goto out;
	}
	buf_reserve(&warned, 256); /* both on the heap before an item's arena */
	buf_reserve(out, 4096);
	rc = doc_write_json_open(out, &s, list, k, em);
	while (rc == 0 && (rc = one_item(it, &s, list, n, inject, c, out, after, ctx, &check_only, &warned, em)) == 1) {
		n++;
		rc = 0;
	}
	if (rc == 0)
		rc = doc_write_json_close(out, &s, list, k, n, em);
	for (size_t at = 0; at < warned.len; at += strlen(warned.data + at) + 1)
		inj_report_warn(c->report, "%s", warned.data + at);
out:
	buf_free(&warned);
	doc_json_items_free(it);
	doc_stream_free(&s);
	return rc;
}
