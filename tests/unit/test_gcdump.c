/*
 * test_gcdump.c - the heap-snapshot reader (launcher/gcdump/gcdump.h) fed the
 * runtime's heap events directly, with the layouts of the runtime's manifest:
 * in order; with the GC's end and its heap walk on one thread ahead of its
 * start on another (as the runtime writes thread buffers in turn: the cause
 * of "no induced gen-2 GC ended" seen with real runtimes); a GC that is not
 * the induced one; a heap walk outside the induced GC; edges that do not add
 * up; a short event; events after the end. Then the .gcdump file
 * (launcher/gcdump/gcdump_file.h), read back with the rules of dotnet-gcdump's
 * reader (FastSerialization, Graph's compressed node blob), and the type-name
 * spelling dotnet-gcdump uses.
 */
#include <stdlib.h>

#include "buf.h"
#include "launcher/gcdump/gcdump.h"
#include "launcher/gcdump/gcdump_file.h"
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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
	struct gcdump_reader *r = gcdump_reader_new(42, false);
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

	r = gcdump_reader_new(42, false);
	gc_start(r, 1, 1000, 7, 1);
	feed(r, &m_node, 1, 1100, &p);
	gc_end(r, 1, 1200, 7);
	T_CHECK(gcdump_reader_finish(r, &g, &em) == DP_ESYNTAX);
	T_STREQ(em.text, "a heap event shorter than its layout");
	buf_free(&p);
	gcdump_reader_free(r);
}

static void spelling(void)
{
	static const char *const cases[][2] = {
		{ "System.Func`1[System.Int64]", "System.Func<System.Int64>" },
		{ "System.Byte[]", "System.Byte[]" },
		{ "System.Byte[][]", "System.Byte[][]" },
		{ "System.Int32[,]", "System.Int32<,>" },
		{ "System.Collections.Generic.Dictionary`2[System.String,System.Collections.Generic.List`1[System.Int32]]",
		  "System.Collections.Generic.Dictionary<System.String,System.Collections.Generic.List<System.Int32>>" },
		{ "Entry[System.String,System.Int64][]", "Entry<System.String,System.Int64>[]" },
		{ "Outer`1+Inner`2[A,B]", "Outer+Inner<A,B>" },
		{ "Weird`x", "Weird`x" },
	};
	char *s;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		s = gcdump_type_name(cases[i][0], 0, 0);
		T_STREQ(s, cases[i][1]);
		free(s);
	}
	s = gcdump_type_name("", 0x8, 0x1a);
	T_STREQ(s, "ArrayType(0x1a)");
	free(s);
	s = gcdump_type_name(NULL, 0, 0x2b);
	T_STREQ(s, "Type(0x2b)");
	free(s);
	s = gcdump_type_name("My.Com`1[X]", 0x4, 0);
	T_STREQ(s, "[RCW My.Com<X>]");
	free(s);
}

/* ---- the .gcdump file, read back */
static const struct nettrace_meta m_module = { .id = 7, .provider = RT, .event_id = 152, .name = "" };
static const struct nettrace_meta m_root = { .id = 8, .provider = RT, .event_id = 16, .name = "" };
static const struct nettrace_meta m_static = { .id = 9, .provider = RT, .event_id = 38, .name = "" };

static void utf16z(struct buf *p, const char *s)
{
	for (; *s; s++)
		le(p, (uint8_t)*s, 2);
	le(p, 0, 2);
}

static void one(struct gcdump_reader *r, const struct nettrace_meta *m, int64_t ts, struct buf *p)
{
	feed(r, m, 1, ts, p);
	buf_reset(p);
}

struct rd {
	const uint8_t *s, *p, *end;
	bool bad;
};

static uint64_t rd_le(struct rd *r, int n)
{
	uint64_t v = 0;

	if (r->end - r->p < n) {
		r->bad = true;
		return 0;
	}
	for (int i = 0; i < n; i++)
		v |= (uint64_t)r->p[i] << (8 * i);
	r->p += n;
	return v;
}

/* A FastSerialization string (ASCII here) into out; "(null)" for null. */
static const char *rd_str(struct rd *r, char *out, size_t max)
{
	int32_t n = (int32_t)rd_le(r, 4);

	if (n < 0)
		return "(null)";
	if ((size_t)n >= max || r->end - r->p < n) {
		r->bad = true;
		return "";
	}
	memcpy(out, r->p, (size_t)n);
	out[n] = '\0';
	r->p += n;
	return out;
}

/* Node.ReadCompressedInt */
static int32_t rd_ci(const uint8_t **p)
{
	uint8_t b = *(*p)++;
	int32_t v = (int32_t)((uint32_t)b << 25) >> 25;

	for (int i = 0; i < 4 && (b & 0x80); i++) {
		b = *(*p)++;
		v = (int32_t)((uint32_t)v << 7) + (b & 0x7F);
	}
	return v;
}

#define MAXT 32
#define MAXN 32
struct file {
	int64_t total;
	uint32_t n_types, n_nodes, pid;
	char name[MAXT][96], module[MAXT][96];
	int32_t size[MAXT];
	int32_t type[MAXN], nsize[MAXN], kids[MAXN][8], n_kids[MAXN];
	uint64_t addr[MAXN];
};

static bool expect(struct rd *r, const char *bytes, size_t n)
{
	if ((size_t)(r->end - r->p) < n || memcmp(r->p, bytes, n) != 0)
		return r->bad = true, false;
	r->p += n;
	return true;
}

/* Read a .gcdump as GCHeapDump's deserializer would; false at the first thing out of place. */
static bool read_file(const struct buf *b, struct file *f)
{
	struct rd r = { (const uint8_t *)b->data, (const uint8_t *)b->data, (const uint8_t *)b->data + b->len, false };
	char tmp[128];
	const uint8_t *blob;
	uint32_t labels[MAXN], blob_len, fwd;

	if (strcmp(rd_str(&r, tmp, sizeof(tmp)), "!FastSerialization.1") != 0 ||
	    !expect(&r, "\x04\x04\x01\x0a\0\0\0\x08\0\0\0", 11) || strcmp(rd_str(&r, tmp, sizeof(tmp)), "GCHeapDump") != 0 ||
	    !expect(&r, "\x06\x04\x04\x01\x01\0\0\0\0\0\0\0", 12) ||
	    strcmp(rd_str(&r, tmp, sizeof(tmp)), "Graphs.MemoryGraph") != 0 || !expect(&r, "\x06", 1))
		return false;
	f->total = (int64_t)rd_le(&r, 8);
	if (rd_le(&r, 4) != 0) /* RootIndex */
		return false;
	f->n_types = (uint32_t)rd_le(&r, 4);
	if (f->n_types > MAXT)
		return false;
	for (uint32_t t = 0; t < f->n_types; t++) {
		snprintf(f->name[t], sizeof(f->name[t]), "%s", rd_str(&r, tmp, sizeof(tmp)));
		f->size[t] = (int32_t)rd_le(&r, 4);
		snprintf(f->module[t], sizeof(f->module[t]), "%s", rd_str(&r, tmp, sizeof(tmp)));
	}
	f->n_nodes = (uint32_t)rd_le(&r, 4);
	if (f->n_nodes > MAXN)
		return false;
	for (uint32_t i = 0; i < f->n_nodes; i++)
		labels[i] = (uint32_t)rd_le(&r, 4);
	blob_len = (uint32_t)rd_le(&r, 4);
	blob = r.p;
	if (r.bad || (uint32_t)(r.end - r.p) < blob_len)
		return false;
	r.p += blob_len;
	for (uint32_t i = 0; i < f->n_nodes; i++) {
		const uint8_t *p = blob + labels[i];
		int32_t ts;

		if (labels[i] >= blob_len)
			return false;
		ts = rd_ci(&p);
		f->type[i] = ts >> 1;
		if (f->type[i] < 0 || (uint32_t)f->type[i] >= f->n_types)
			return false;
		f->nsize[i] = (ts & 1) ? rd_ci(&p) : f->size[f->type[i]];
		f->n_kids[i] = rd_ci(&p);
		for (int32_t k = 0; k < f->n_kids[i] && k < 8; k++)
			f->kids[i][k] = rd_ci(&p) + (int32_t)i;
		if (p > blob + blob_len)
			return false;
	}
	if (rd_le(&r, 4) != f->n_nodes)
		return false;
	for (uint32_t i = 0; i < f->n_nodes; i++)
		f->addr[i] = rd_le(&r, 8);
	if (!expect(&r, "\x08\x01\x06\x01\0\0\x80\x3f\0\0\x80\x3f\x01\x01\xff\xff\xff\xff", 18))
		return false;
	rd_le(&r, 8); /* ticks */
	if (!expect(&r, "\xff\xff\xff\xff\xff\xff\xff\xff", 8))
		return false;
	f->pid = (uint32_t)rd_le(&r, 4);
	if (!expect(&r, "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\x0c\0\0\0\0\x01", 26))
		return false;
	fwd = (uint32_t)(r.p - r.s);
	if (!expect(&r, "\x0d", 1) || strcmp(rd_str(&r, tmp, sizeof(tmp)), "diagport") != 0 || !expect(&r, "\x06\x06", 2))
		return false;
	/* the trailer: the last label names the trailer, which names the forward-reference table */
	if (r.end - r.s < 16)
		return false;
	{
		struct rd t = { r.s, r.end - 4, r.end, false }, tr, tab;
		uint32_t trailer = (uint32_t)rd_le(&t, 4), table;

		tr = (struct rd){ r.s, r.s + trailer, r.end, false };
		table = (uint32_t)rd_le(&tr, 4);
		tab = (struct rd){ r.s, r.s + table, r.end, false };
		if (table != (uint32_t)(r.p - r.s) || rd_le(&tab, 4) != 1 || rd_le(&tab, 4) != fwd)
			return false;
	}
	return !r.bad;
}

static int find_type(const struct file *f, const char *name)
{
	for (uint32_t t = 0; t < f->n_types; t++)
		if (strcmp(f->name[t], name) == 0)
			return (int)t;
	return -1;
}

static void file(void)
{
	struct gcdump_reader *r = gcdump_reader_new(42, true);
	struct gcdump *g = NULL;
	struct err_msg em;
	struct file f;
	struct buf p, out;
	int t;

	buf_init(&p, 0);
	buf_init(&out, 0);
	gc_start(r, 1, 1000, 7, 1);
	/* BulkType: 0xa Orders.Cache`1[System.Int64] in module 0x100, 0xb System.Byte[] (an array) in 0x200 */
	le(&p, 2, 4), le(&p, 0, 2);
	le(&p, 0xa, 8), le(&p, 0x100, 8), le(&p, 1, 4), le(&p, 0, 4), le(&p, 0, 1), utf16z(&p, "Orders.Cache`1[System.Int64]");
	le(&p, 1, 4), le(&p, 0xb, 8);
	le(&p, 0xb, 8), le(&p, 0x200, 8), le(&p, 2, 4), le(&p, 8, 4), le(&p, 0, 1), utf16z(&p, "System.Byte[]"), le(&p, 0, 4);
	one(r, &m_type, 1001, &p);
	/* nodes A 0x1000 (0xa, 24 bytes, -> B), B 0x2000 (0xb, 5000), C 0x3000 (0xb, 32, -> 0x9000), D 0x4000 (0xc, 16) */
	le(&p, 0, 4), le(&p, 4, 4), le(&p, 0, 2);
	le(&p, 0x1000, 8), le(&p, 24, 8), le(&p, 0xa, 8), le(&p, 1, 8);
	le(&p, 0x2000, 8), le(&p, 5000, 8), le(&p, 0xb, 8), le(&p, 0, 8);
	le(&p, 0x3000, 8), le(&p, 32, 8), le(&p, 0xb, 8), le(&p, 1, 8);
	le(&p, 0x4000, 8), le(&p, 16, 8), le(&p, 0xc, 8), le(&p, 0, 8);
	one(r, &m_node, 1002, &p);
	le(&p, 0, 4), le(&p, 2, 4), le(&p, 0, 2), le(&p, 0x2000, 8), le(&p, 0, 4), le(&p, 0x9000, 8), le(&p, 0, 4);
	one(r, &m_edge, 1003, &p);
	/* roots: A on a stack, C by a strong handle, D by a weak one (not a root) */
	le(&p, 0, 4), le(&p, 3, 4), le(&p, 0, 2);
	le(&p, 0x1000, 8), le(&p, 0, 1), le(&p, 0, 4), le(&p, 0, 8);
	le(&p, 0x3000, 8), le(&p, 2, 1), le(&p, 0, 4), le(&p, 0, 8);
	le(&p, 0x4000, 8), le(&p, 2, 1), le(&p, 2, 4), le(&p, 0, 8);
	one(r, &m_root, 1004, &p);
	/* B is Orders.Cache's static s_cache */
	le(&p, 1, 4), le(&p, 1, 8), le(&p, 0, 2), le(&p, 0, 8), le(&p, 0x2000, 8), le(&p, 0xa, 8), le(&p, 0, 4);
	utf16z(&p, "s_cache");
	one(r, &m_static, 1005, &p);
	gc_end(r, 1, 1200, 7);
	/* the rundown's module event, after the GC: module 0x100 is /app/Orders.dll; 0x200 stays unnamed */
	le(&p, 0x100, 8), le(&p, 0, 8), le(&p, 0, 4), le(&p, 0, 4), utf16z(&p, "/app/Orders.dll"), utf16z(&p, ""), le(&p, 0, 2);
	one(r, &m_module, 1300, &p);
	T_CHECK(gcdump_reader_finish(r, &g, &em) == 0);
	T_CHECK(gcdump_file(g, &out, &em) == 0);
	memset(&f, 0, sizeof(f));
	T_CHECK(read_file(&out, &f));
	T_CHECK(f.pid == 42 && f.total == 24 + 5000 + 32 + 16);
	/* types: interned by module and name, spelled as the tool spells them, by size over 1000 bytes */
	T_STREQ(f.name[0], "UNDEFINED");
	t = find_type(&f, "Orders.Cache<System.Int64>");
	T_CHECK(t > 0 && f.size[t] == 24);
	T_STREQ(f.module[t], "/app/Orders.dll");
	t = find_type(&f, "System.Byte[]");
	T_CHECK(t > 0 && f.size[t] == 32);
	T_STREQ(f.module[t], "Module(0x200)");
	t = find_type(&f, "System.Byte[] (Bytes > 1K)");
	T_CHECK(t > 0 && f.size[t] == 5000);
	T_STREQ(f.module[t], "Module(0x200)");
	T_CHECK(find_type(&f, "UNKNOWN 0xc") > 0);
	/* nodes: 7 root groups, the 4 objects, the undefined 0x9000 */
	T_CHECK(f.n_nodes == 12);
	T_STREQ(f.name[f.type[0]], "[.NET Roots]");
	T_CHECK(f.n_kids[0] == 4);
	T_STREQ(f.name[f.type[f.kids[0][0]]], "[static vars]");
	T_STREQ(f.name[f.type[f.kids[0][1]]], "[local vars]");
	T_STREQ(f.name[f.type[f.kids[0][2]]], "[other roots]");
	T_STREQ(f.name[f.type[f.kids[0][3]]], "[COM/WinRT Objects]");
	T_CHECK(f.n_kids[f.kids[0][1]] == 1 && f.addr[f.kids[f.kids[0][1]][0]] == 0x1000); /* [local vars] -> A */
	{
		int other = f.kids[0][2], strong = f.kids[other][0], statics = f.kids[0][0], s_cache = f.kids[statics][0];

		T_STREQ(f.name[f.type[strong]], "[strong Handles]");
		T_CHECK(f.n_kids[other] == 1 && f.n_kids[strong] == 1 && f.addr[f.kids[strong][0]] == 0x3000);
		T_STREQ(f.name[f.type[s_cache]], "[static var Orders.Cache<System.Int64>.s_cache]");
		T_CHECK(f.n_kids[s_cache] == 1 && f.addr[f.kids[s_cache][0]] == 0x2000);
	}
	for (uint32_t i = 7; i < 11; i++) {
		static const uint64_t addr[] = { 0x1000, 0x2000, 0x3000, 0x4000 };
		static const int32_t size[] = { 24, 5000, 32, 16 }, kids[] = { 1, 0, 1, 0 };

		T_CHECK(f.addr[i] == addr[i - 7] && f.nsize[i] == size[i - 7] && f.n_kids[i] == kids[i - 7]);
	}
	T_CHECK(f.addr[f.kids[7][0]] == 0x2000);                       /* A -> B */
	T_CHECK(f.kids[9][0] == 11 && f.addr[11] == 0x9000 && f.type[11] == 0); /* C -> an undefined node */
	buf_free(&p);
	buf_free(&out);
	gcdump_free(g);
	gcdump_reader_free(r);
}

/* More references than the objects name: no file (dotnet-gcdump gives up on such a dump too). */
static void file_extra_edges(void)
{
	struct gcdump_graph *g = gcdump_graph_new();
	struct gcdump_file_info info = { 42, 0, true };
	struct buf out;
	struct err_msg em;

	buf_init(&out, 0);
	T_CHECK(gcdump_graph_node(g, 0x1000, 24, 0xa, 1) == 0);
	T_CHECK(gcdump_graph_edge(g, 0x2000) == 0 && gcdump_graph_edge(g, 0x3000) == 0);
	T_CHECK(gcdump_graph_write(g, &info, &out, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "1 references described that no object names") != NULL);
	buf_free(&out);
	gcdump_graph_free(g);
}

/* Objects not in address order (the heap walk goes region by region): references still find their nodes. */
static void file_unsorted(void)
{
	struct gcdump_graph *g = gcdump_graph_new();
	struct gcdump_file_info info = { 42, 0, true };
	struct buf out;
	struct err_msg em;
	struct file f;

	buf_init(&out, 0);
	gcdump_graph_type(g, 0xa, 0x100, 0, 0, "T");
	T_CHECK(gcdump_graph_node(g, 0x3000, 24, 0xa, 1) == 0 && gcdump_graph_edge(g, 0x1000) == 0);
	T_CHECK(gcdump_graph_node(g, 0x1000, 24, 0xa, 0) == 0);
	T_CHECK(gcdump_graph_node(g, 0x2000, 24, 0xa, 2) == 0);
	T_CHECK(gcdump_graph_edge(g, 0x3000) == 0 && gcdump_graph_edge(g, 0x2000) == 0);
	T_CHECK(gcdump_graph_root(g, 0x2000, 0, 0) == 0);
	T_CHECK(gcdump_graph_write(g, &info, &out, &em) == 0);
	memset(&f, 0, sizeof(f));
	T_CHECK(read_file(&out, &f));
	/* groups: [.NET Roots], [static vars], [local vars], [COM/WinRT Objects]; then the three objects */
	T_CHECK(f.n_nodes == 7 && f.addr[4] == 0x3000 && f.addr[5] == 0x1000 && f.addr[6] == 0x2000);
	T_CHECK(f.n_kids[4] == 1 && f.kids[4][0] == 5);
	T_CHECK(f.n_kids[6] == 2 && f.kids[6][0] == 4 && f.kids[6][1] == 6);
	T_CHECK(f.n_kids[2] == 1 && f.kids[2][0] == 6);
	T_STREQ(f.name[f.type[4]], "T");
	T_STREQ(f.module[f.type[4]], "Module(0x100)");
	buf_free(&out);
	gcdump_graph_free(g);
}

/* A memory budget (the agent's cgroup limit's headroom): objects and references past it are refused, and the
 * graph says which cap it passed; no budget, no such cap. Before, a heap too large for the agent's memory limit
 * (the injected 64Mi; 2.2 million objects took 98 MB) got the agent killed, or aborted under ulimit -v. */
static void budget(void)
{
	struct gcdump_graph *g = gcdump_graph_new();
	uint64_t a = 0x1000;

	gcdump_graph_set_budget(g, 10 * GCDUMP_NODE_BYTES + 4 * GCDUMP_EDGE_BYTES);
	for (int i = 0; i < 10; i++, a += 0x100)
		T_CHECK(gcdump_graph_node(g, a, 24, 0xa, 0) == 0);
	T_CHECK(gcdump_graph_budget(g) == 0);
	for (int i = 0; i < 4; i++)
		T_CHECK(gcdump_graph_edge(g, 0x1000) == 0);
	T_CHECK(gcdump_graph_edge(g, 0x1000) == DP_ETOOBIG);
	T_CHECK(gcdump_graph_node(g, a, 24, 0xa, 0) == DP_ETOOBIG);
	T_CHECK(gcdump_graph_budget(g) == 10 * GCDUMP_NODE_BYTES + 4 * GCDUMP_EDGE_BYTES);
	gcdump_graph_free(g);
	g = gcdump_graph_new();
	for (int i = 0; i < 1000; i++, a += 0x100)
		T_CHECK(gcdump_graph_node(g, a, 24, 0xa, 0) == 0);
	T_CHECK(gcdump_graph_budget(g) == 0);
	gcdump_graph_free(g);
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
	T_RUN(spelling);
	T_RUN(file);
	T_RUN(file_extra_edges);
	T_RUN(budget);
	T_RUN(file_unsorted);
	return t_failed_cases ? 1 : 0;
}
