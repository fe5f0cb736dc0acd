/*
 * k8s_list.c - a Kubernetes List, injected (or uninjected) and written one
 * item at a time. `kubectl get deploy -A -o json` (or `-o yaml`) of a large
 * cluster is one List of thousands of workloads; read whole it is a tree of
 * about 20 times its text. Here the List's envelope is read first (its
 * `kind` comes after `items`, so the reader skips them: doc_json_items_open,
 * doc_yaml_items_open), then each item is read, given to the rules of k8s.c
 * as inj_k8s_object gives it, written, and dropped before the next: the List
 * costs its text and one item's tree. The bytes are the ones the whole tree
 * would be written as (doc_write_json_* and doc_write_yaml_*). The CLI and
 * the fuzz target call it.
 */
#include "inj.h"

#include <string.h>

#include "mem.h"

/* The List being read and written, in JSON or in YAML. */
struct list_io {
	const struct doc_stream *s;
	struct doc_json_items *jr;
	struct doc_yaml_items *yr;
	struct doc_yaml_list *yw;
	struct buf *out;
};

static int io_next(struct list_io *io, struct doc_node **item, struct err_msg *em)
{
	return io->jr ? doc_json_items_next(io->jr, item, em) : doc_yaml_items_next(io->yr, item, em);
}

static int io_write(struct list_io *io, const struct doc_node *item, size_t n, struct err_msg *em)
{
	return io->jr ? doc_write_json_item(io->out, io->s, item, n, em) : doc_write_yaml_item(io->yw, item, em);
}

/*
 * One item: read, injected, written (a JSON item only while not only
 * checked) and dropped.
 * Everything it makes comes from the arena (mem.h) and goes at once at its
 * end, as a webhook review's trees do; its warnings are copied into `warned`
 * (heap memory, made before; a NUL after each) first. 1 when there was an
 * item, 0 after the last, or an error.
 */
static int one_item(struct list_io *io, const struct doc_node *list, size_t n, bool inject, const struct inj_ctx *c,
		    inj_list_after_fn after, void *ctx, bool *check_only, struct buf *warned, struct err_msg *em)
{
	struct inj_report rep = { 0 };
	struct inj_ctx ic = *c;
	struct doc_node *item;
	int rc, more;

	ic.report = c->report ? &rep : NULL;
	mem_arena_begin();
	if ((rc = more = io_next(io, &item, em)) == 1) {
		rc = inj_k8s_list_item(item, list, inject, &ic, em);
		if (rc == 0 && !(*check_only && io->jr)) /* what JSON read, JSON writes; YAML's emitter decides */
			rc = io_write(io, item, n, em);
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

int inj_k8s_list(const char *bytes, size_t len, const struct doc_limits *lim, const char *kind, bool inject,
		 const struct inj_ctx *c, struct buf *out, inj_list_after_fn after, void *ctx, struct err_msg *em)
{
	struct doc_stream s;
	struct list_io io = { .s = &s, .out = out };
	struct doc_node *list;
	struct buf warned;
	bool check_only = false, json = doc_sniff(bytes, len) == DOC_JSON;
	size_t k, n = 0;
	int rc;

	if (!(json ? doc_json_items_open(bytes, len, c->file, lim, "items", &io.jr, &s, &k)
		   : doc_yaml_items_open(bytes, len, c->file, lim, "items", &io.yr, &s, &k)))
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
	rc = json ? doc_write_json_open(out, &s, list, k, em) : doc_write_yaml_open(out, &s, list, k, &io.yw, em);
	while (rc == 0 && (rc = one_item(&io, list, n, inject, c, after, ctx, &check_only, &warned, em)) == 1) {
		n++;
		rc = 0;
	}
	if (rc == 0 && json) {
		rc = doc_write_json_close(out, &s, list, k, n, em);
	} else if (rc == 0) {
		rc = doc_write_yaml_close(io.yw, list, k, em);
		io.yw = NULL;
	}
	for (size_t at = 0; at < warned.len; at += strlen(warned.data + at) + 1)
		inj_report_warn(c->report, "%s", warned.data + at);
out:
	buf_free(&warned);
	doc_write_yaml_free(io.yw);
	doc_json_items_free(io.jr);
	doc_yaml_items_free(io.yr);
	doc_stream_free(&s);
	return rc;
}
