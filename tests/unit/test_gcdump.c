/*
 * test_gcdump.c - the heap-snapshot reader (launcher/gcdump.h) fed the
 * runtime's heap events directly, with the layouts of the runtime's manifest:
 * in order; with the GC's end and its heap walk on one thread ahead of its
 * start on another (as the runtime writes thread buffers in turn: the cause
 * of "no induced gen-2 GC ended" seen with real runtimes); a GC that is not
 * the induced one; a heap walk outside the induced GC; edges that do not add
 * up; a short event; events after the end.
 */
#include <stdlib.h>

#include "buf.h"
#include "launcher/gcdump.h"
#include "t.h"

#define RT "Microsoft-Windows-DotNETRuntime"

static const struct nettrace_meta m_start = { .id = 1, .provider = RT, .event_id = 1, .name = "" };
static const struct nettrace_meta m_end = { .id = 2, .provider = RT, .event_id = 2, .name = "" };
static const struct nettrace_meta m_type = { .id = 3, .provider = RT, .event_id = 15, .name = "" };
static const struct nettrace_meta m_node = { .id = 4, .provider = RT, .event_id = 18, .name = "" };
static const struct nettrace_meta m_edge = { .id = 5, .provider = RT, .event_id = 19, .name = "" };
static const struct nettrace_meta m_other = { .id = 6, .provider = "Other", .event_id = 2, .name = "" };

static void le(struct buf *b, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		buf_putc(b, (char)(v >> (8 * i)));
}

/* Feed one event of meta m at timestamp ts, thread tid; the callback's return. */
static int feed(struct gcdump_reader *r, const struct nettrace_meta *m, uint64_t tid, int64_t ts, const struct buf *p)
{
	struct nettrace_event e = { .meta = m, .thread_id = tid, .timestamp = ts,
				    .payload = (const uint8_t *)p->data, .payload_len = p->len };

	return gcdump_callbacks.event(r, &e);
}

static void gc_start(struct gcdump_reader *r, uint64_t tid, int64_t ts, uint32_t count, uint32_t reason)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, count, 4), le(&p, 2, 4), le(&p, reason, 4), le(&p, 0, 4), le(&p, 0, 2);
	feed(r, &m_start, tid, ts, &p);
	buf_free(&p);
}

static void gc_end(struct gcdump_reader *r, uint64_t tid, int64_t ts, uint32_t count)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, count, 4), le(&p, 2, 4), le(&p, 0, 2);
	feed(r, &m_end, tid, ts, &p);
	buf_free(&p);
}

/* BulkType naming type id `id` (ASCII name as UTF-16). */
static void bulk_type(struct gcdump_reader *r, uint64_t tid, int64_t ts, uint64_t id, const char *name)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, 1, 4), le(&p, 0, 2);
	le(&p, id, 8), le(&p, 0, 8), le(&p, 0, 4), le(&p, 0, 4), le(&p, 0, 1);
	for (const char *c = name; *c; c++)
		le(&p, (uint8_t)*c, 2);
	le(&p, 0, 2), le(&p, 0, 4);
	feed(r, &m_type, tid, ts, &p);
	buf_free(&p);
}

/* GCBulkNode: n objects of type id, `size` bytes each, `edges` references each. */
static void bulk_node(struct gcdump_reader *r, uint64_t tid, int64_t ts, uint64_t id, uint32_t n, uint64_t size,
		      uint64_t edges)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, 0, 4), le(&p, n, 4), le(&p, 0, 2);
	for (uint32_t i = 0; i < n; i++)
		le(&p, 0x10000 + i * size, 8), le(&p, size, 8), le(&p, id, 8), le(&p, edges, 8);
	feed(r, &m_node, tid, ts, &p);
	buf_free(&p);
}

static void bulk_edge(struct gcdump_reader *r, uint64_t tid, int64_t ts, uint32_t n)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, 0, 4), le(&p, n, 4), le(&p, 0, 2);
	for (uint32_t i = 0; i < n; i++)
		le(&p, 0x20000 + i, 8), le(&p, 0, 4);
	feed(r, &m_edge, tid, ts, &p);
	buf_free(&p);
}

/* The heap of every case: 3 Leaked of 100 bytes with 1 reference each, 2 System.String of 40 bytes. */
static void walk(struct gcdump_reader *r, uint64_t tid, int64_t ts)
{
	bulk_type(r, tid, ts, 0xa, "Leaked");
	bulk_type(r, tid, ts, 0xb, "System.String");
	bulk_node(r, tid, ts + 1, 0xa, 3, 100, 1);
	bulk_node(r, tid, ts + 2, 0xb, 2, 40, 0);
	bulk_edge(r, tid, ts + 3, 3);
}

static const char *the_table(struct gcdump *g)
{
	static char text[512];
	struct buf b;

	buf_init(&b, 0);
	gcdump_text(g, 0, &b);
	snprintf(text, sizeof(text), "%.*s", (int)b.len, b.data);
	buf_free(&b);
	return text;
}

#define TABLE                                                                              \
	"GC heap of pid 42 after induced gen-2 GC #7: 5 objects, 380 bytes, 2 types\n"     \
	"       count            bytes  type\n"                                            \
	"           3              300  Leaked\n"                                          \
	"           2               80  System.String\n"

static void in_order(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = NULL;
	struct err_msg em;

	gc_start(r, 1, 1000, 7, 1);
	walk(r, 1, 1100);
	T_CHECK(!gcdump_reader_done(r) && !atomic_load(gcdump_reader_stop(r)));
	gc_end(r, 1, 1200, 7);
	T_CHECK(gcdump_reader_done(r) && atomic_load(gcdump_reader_stop(r)));
	T_CHECK(gcdump_reader_finish(r, &g, &em) == 0);
	T_STREQ(the_table(g), TABLE);
	T_CHECK(g->edges == 3 && g->gc_count == 7);
	gcdump_free(g);
	gcdump_reader_free(r);
}

/* The GC started on thread 2 but walked and ended on thread 1, whose buffer the runtime wrote first. */
static void end_before_start(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = NULL;
	struct err_msg em;

	gc_start(r, 3, 900, 6, 0); /* an earlier, allocation-triggered GC */
	gc_end(r, 3, 950, 6);
	walk(r, 1, 1100);
	gc_end(r, 1, 1200, 7);
	T_CHECK(!gcdump_reader_done(r));
	gc_start(r, 2, 1000, 7, 1);
	T_CHECK(gcdump_reader_done(r) && atomic_load(gcdump_reader_stop(r)));
	T_CHECK(gcdump_reader_finish(r, &g, &em) == 0);
	T_STREQ(the_table(g), TABLE);
	gcdump_free(g);
	gcdump_reader_free(r);
}

/* Many GC ends before the start: only the latest are held, and the induced one among them is found. */
static void many_ends_first(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = NULL;
	struct err_msg em;

	for (uint32_t n = 100; n < 200; n++)
		gc_end(r, 3, 10 + n, n);
	walk(r, 1, 1100);
	gc_end(r, 1, 1200, 7);
	gc_end(r, 3, 1300, 8);
	gc_start(r, 2, 1000, 7, 1);
	T_CHECK(gcdump_reader_finish(r, &g, &em) == 0);
	T_CHECK(g->objects == 5);
	gcdump_free(g);
	gcdump_reader_free(r);
}

/* A GC that is not induced, or not ended: not done; finish says so. */
static void not_induced(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = (struct gcdump *)1;
	struct err_msg em;

	gc_start(r, 1, 1000, 7, 0); /* Reason 0: allocation */
	gc_end(r, 1, 1200, 7);
	gc_start(r, 1, 1300, 8, 1);
	gc_end(r, 1, 1400, 9);
	T_CHECK(!gcdump_reader_done(r));
	T_CHECK(gcdump_reader_finish(r, &g, &em) == DP_EIO && g == NULL);
	T_CHECK(strstr(em.text, "start and end") != NULL);
	gcdump_reader_free(r);
}

/* Heap events from before the induced GC started: another session's snapshot; refused. */
static void walk_outside(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = NULL;
	struct err_msg em;

	walk(r, 1, 500);
	gc_start(r, 2, 1000, 7, 1);
	gc_end(r, 2, 1200, 7);
	T_CHECK(gcdump_reader_finish(r, &g, &em) == DP_ESYNTAX && g == NULL);
	T_CHECK(strstr(em.text, "outside induced GC #7") != NULL);
	gcdump_reader_free(r);
}

static void edges_short(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = NULL;
	struct err_msg em;

	gc_start(r, 1, 1000, 7, 1);
	bulk_node(r, 1, 1100, 0xa, 3, 100, 2);
	bulk_edge(r, 1, 1101, 5);
	gc_end(r, 1, 1200, 7);
	T_CHECK(gcdump_reader_finish(r, &g, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "name 6 references but 5 were described") != NULL);
	gcdump_reader_free(r);
}

/* A node event cut inside its objects; events after the end and of other providers change nothing. */
static void short_and_after(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42);
	struct gcdump *g = NULL;
	struct err_msg em;
	struct buf p;

	gc_start(r, 1, 1000, 7, 1);
	walk(r, 1, 1100);
	buf_init(&p, 0);
	le(&p, 0, 4), le(&p, 2, 4), le(&p, 0, 2), le(&p, 1, 8);
	feed(r, &m_other, 1, 1150, &p); /* another provider's event 2: not a GC end */
	T_CHECK(!gcdump_reader_done(r));
	gc_end(r, 1, 1200, 7);
	walk(r, 1, 1300); /* after the end: ignored */
	T_CHECK(gcdump_reader_finish(r, &g, &em) == 0);
	T_STREQ(the_table(g), TABLE);
	gcdump_free(g);
	gcdump_reader_free(r);

	r = gcdump_reader_new(42);
	gc_start(r, 1, 1000, 7, 1);
	feed(r, &m_node, 1, 1100, &p);
	gc_end(r, 1, 1200, 7);
	T_CHECK(gcdump_reader_finish(r, &g, &em) == DP_ESYNTAX);
	T_STREQ(em.text, "a heap event shorter than its layout");
	buf_free(&p);
	gcdump_reader_free(r);
}

int main(void)
{
	t_file_name = "gcdump";
	T_RUN(in_order);
	T_RUN(end_before_start);
	T_RUN(many_ends_first);
	T_RUN(not_induced);
	T_RUN(walk_outside);
	T_RUN(edges_short);
	T_RUN(short_and_after);
	return t_failed_cases ? 1 : 0;
}
