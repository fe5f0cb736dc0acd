/*
 * nettrace.c - the streaming nettrace reader (nettrace.h).
 *
 * A state machine over the container: the 32-byte preamble, then objects
 * (tag 0x05, a type header naming the object, its payload, tag 0x06) until
 * the end tag 0x01. Each unit the machine waits for (a type header, a
 * block) is gathered whole: in place when one feed holds it, else copied
 * into an accumulator that never grows past max_block. A gathered block is
 * then decoded with a bounded cursor: every read checks what is left.
 *
 * Kept between blocks: the metadata table (id -> provider, event, fields),
 * the stack cache (cleared at each sequence point, as the writer's is), and
 * each capture thread's last sequence number, whose gaps are the events the
 * runtime dropped.
 *
 * Over ~600 lines as one idea: a format's state machine. Every section below
 * (the cursor, gathering, metadata, sequence numbers, blocks, the container)
 * is a stage of one machine over one struct nettrace, and the cursor's reads
 * stay static so they inline into the block decoders, the reader's hot path
 * (bench/nettrace.sh).
 */
#include "nettrace.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "buf.h"
#include "mem.h"

const struct nettrace_limits nettrace_default_limits = {
	.max_block = (size_t)16 << 20,
	.max_metadata_bytes = (size_t)64 << 20,
	.max_stack_bytes = (size_t)256 << 20,
	.max_threads = (size_t)1 << 20,
};

#define PREAMBLE 32            /* "Nettrace", int32 20, "!FastSerialization.1" */
#define TYPE_HEADER 14         /* 05 01, int32 version, int32 minimum reader version, int32 name length */
#define MAX_TYPE_NAME 64
#define TRACE_PAYLOAD 48
#define BLOCK_HEADER 20        /* u16 header size, u16 flags, i64 min and max timestamps */
#define MAX_FIELD_DEPTH 16
#define MAX_FIELDS 4096        /* in one event type's metadata */
#define MAX_META_ID (1u << 24)

enum stage { S_PREAMBLE, S_TAG, S_TYPE, S_NAME, S_TRACE, S_SIZE, S_PAD, S_BLOCK, S_END, S_ENDED, S_FAILED };
enum kind { K_TRACE, K_EVENTS, K_METADATA, K_STACKS, K_SP, K_OTHER };

struct thread_seq {
	uint64_t id;
	uint32_t seq;
	bool used;
};

struct nettrace {
	struct nettrace_limits lim;
	struct nettrace_callbacks cb;
	void *ctx;
	enum stage st;
	enum kind kind;
	uint64_t off; /* bytes consumed */
	uint8_t *acc; /* the accumulator */
	size_t acc_cap, have, need;
	uint32_t block_size;
	char type_name[MAX_TYPE_NAME + 1];
	struct nettrace_trace hdr;
	bool have_hdr;
	struct nettrace_meta **meta; /* by id */
	size_t meta_cap, meta_bytes;
	uint64_t *ips; /* the stack cache: every stack's addresses, one after another */
	size_t n_ips, ips_cap;
	size_t *stack_at, *stack_len; /* per stack, from stack_base */
	size_t n_stacks, stacks_cap;
	uint32_t stack_base;
	struct thread_seq *threads; /* open addressing by capture thread id */
	size_t threads_cap, n_threads;
	struct nettrace_stats stats;
	int fail_rc;
	char fail_msg[sizeof(((struct err_msg *)0)->text)];
};

/* ---- failures ---- */

static int fail(struct nettrace *t, struct err_msg *em, int rc, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static int fail(struct nettrace *t, struct err_msg *em, int rc, const char *fmt, ...)
{
	va_list ap;
	int n = snprintf(t->fail_msg, sizeof(t->fail_msg), "nettrace: at byte %llu: ", (unsigned long long)t->off);

	va_start(ap, fmt);
	vsnprintf(t->fail_msg + n, sizeof(t->fail_msg) - (size_t)n, fmt, ap);
	va_end(ap);
	t->st = S_FAILED;
	t->fail_rc = rc;
	if (em)
		snprintf(em->text, sizeof(em->text), "%s", t->fail_msg);
	return rc;
}

/* ---- a bounded cursor over a gathered unit (struct nettrace_reader, nettrace.h) ---- */

static bool need(struct nettrace_reader *c, size_t n)
{
	if (c->bad || (size_t)(c->end - c->p) < n) {
		c->bad = true;
		return false;
	}
	return true;
}

static uint8_t u8(struct nettrace_reader *c)
{
	return need(c, 1) ? *c->p++ : 0;
}

static uint16_t u16(struct nettrace_reader *c)
{
	uint16_t v = 0;

	if (need(c, 2)) {
		v = (uint16_t)(c->p[0] | c->p[1] << 8);
		c->p += 2;
	}
	return v;
}

static uint32_t u32(struct nettrace_reader *c)
{
	uint32_t v = 0;

	if (need(c, 4)) {
		v = (uint32_t)c->p[0] | (uint32_t)c->p[1] << 8 | (uint32_t)c->p[2] << 16 | (uint32_t)c->p[3] << 24;
		c->p += 4;
	}
	return v;
}

static uint64_t u64(struct nettrace_reader *c)
{
	uint64_t lo = u32(c);

	return lo | (uint64_t)u32(c) << 32;
}

static void bytes(struct nettrace_reader *c, void *out, size_t n)
{
	if (need(c, n)) {
		memcpy(out, c->p, n);
		c->p += n;
	} else {
		memset(out, 0, n);
	}
}

/* Unsigned LEB128 of at most `bits` bits. */
static uint64_t varuint(struct nettrace_reader *c, unsigned bits)
{
	uint64_t v = 0;

	for (unsigned shift = 0; shift < bits + 7; shift += 7) {
		uint8_t b = u8(c);

		if (c->bad)
			return 0;
		if (shift >= 63 && (b & 0x7e)) {
			c->bad = true; /* over 64 bits */
			return 0;
		}
		v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80)) {
			if (bits < 64 && (v >> bits) != 0)
				c->bad = true;
			return v;
		}
	}
	c->bad = true; /* too many bytes */
	return 0;
}

/* A NUL-terminated UTF-16LE string as new UTF-8 (unpaired surrogates become U+FFFD). NULL when unterminated. */
static char *utf16z(struct nettrace_reader *c)
{
	const uint8_t *s = c->p;
	size_t units = 0;
	struct buf b;

	for (;;) {
		if ((size_t)(c->end - s) < 2 * (units + 1)) {
			c->bad = true;
			return NULL;
		}
		if (s[2 * units] == 0 && s[2 * units + 1] == 0)
			break;
		units++;
	}
	buf_init(&b, 0);
	for (size_t i = 0; i < units; i++) {
		uint32_t cp = (uint32_t)(s[2 * i] | s[2 * i + 1] << 8);

		if (cp >= 0xD800 && cp < 0xDC00 && i + 1 < units) {
			uint32_t lo = (uint32_t)(s[2 * i + 2] | s[2 * i + 3] << 8);

			if (lo >= 0xDC00 && lo < 0xE000) {
				cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
				i++;
			} else {
				cp = 0xFFFD;
			}
		} else if (cp >= 0xD800 && cp < 0xE000) {
			cp = 0xFFFD;
		}
		buf_put_utf8(&b, cp);
	}
	c->p = s + 2 * (units + 1);
	if (b.data == NULL)
		return mem_strdup("");
	return b.data;
}

uint16_t nettrace_u16(struct nettrace_reader *r)
{
	return u16(r);
}

uint32_t nettrace_u32(struct nettrace_reader *r)
{
	return u32(r);
}

uint64_t nettrace_u64(struct nettrace_reader *r)
{
	return u64(r);
}

char *nettrace_utf16z(struct nettrace_reader *r)
{
	return utf16z(r);
}

/* ---- gathering units from the input ---- */

/*
 * Up to t->need bytes of the current unit: a pointer to all of them once
 * they are there (in the input itself when no earlier feed held a part),
 * else NULL with what there was kept in the accumulator.
 */
static const uint8_t *gather(struct nettrace *t, const uint8_t **p, size_t *n)
{
	size_t take;

	if (t->have == 0 && *n >= t->need) {
		const uint8_t *at = *p;

		*p += t->need;
		*n -= t->need;
		t->off += t->need;
		return at;
	}
	MEM_GROW(t->acc, t->acc_cap, t->need, 4096);
	take = t->need - t->have < *n ? t->need - t->have : *n;
	memcpy(t->acc + t->have, *p, take);
	t->have += take;
	*p += take;
	*n -= take;
	t->off += take;
	if (t->have < t->need)
		return NULL;
	t->have = 0;
	return t->acc;
}

static void expect(struct nettrace *t, enum stage st, size_t need)
{
	t->st = st;
	t->need = need;
	t->have = 0;
}

/* ---- metadata ---- */

static void meta_free(struct nettrace_meta *m)
{
	if (m == NULL)
		return;
	for (size_t i = 0; i < m->n_fields; i++)
		free((char *)m->fields[i].name);
	free((void *)m->fields);
	free((char *)m->provider);
	free((char *)m->name);
	free(m);
}

struct fields {
	struct nettrace_field *f;
	size_t n, cap;
};

static size_t field_add(struct fields *fs)
{
	MEM_GROW(fs->f, fs->cap, fs->n + 1, 8);
	memset(&fs->f[fs->n], 0, sizeof(fs->f[0]));
	return fs->n++;
}

/* V1 fields: count, then each {type, [nested object], name}. */
static bool fields_v1(struct nettrace_reader *c, struct fields *fs, int depth)
{
	uint32_t count = u32(c);

	if (c->bad || depth > MAX_FIELD_DEPTH || count > MAX_FIELDS)
		return false;
	for (uint32_t i = 0; i < count; i++) {
		size_t at = field_add(fs), before;

		if (fs->n > MAX_FIELDS)
			return false;
		fs->f[at].type = u32(c);
		if (fs->f[at].type == NT_OBJECT) {
			before = fs->n;
			if (!fields_v1(c, fs, depth + 1))
				return false;
			fs->f[at].n_fields = (uint32_t)(fs->n - before);
		}
		if ((fs->f[at].name = utf16z(c)) == NULL)
			return false;
	}
	return !c->bad;
}

/* V2Params fields: count, then each {u32 size including itself, name, type, [element type], [nested]}. */
static bool fields_v2(struct nettrace_reader *c, struct fields *fs, int depth)
{
	uint32_t count = u32(c);

	if (c->bad || depth > MAX_FIELD_DEPTH || count > MAX_FIELDS)
		return false;
	for (uint32_t i = 0; i < count; i++) {
		const uint8_t *start = c->p;
		uint32_t size = u32(c);
		size_t at, before;
		struct nettrace_reader f;

		if (c->bad || size < 4 || size > (size_t)(c->end - start))
			return false;
		f = (struct nettrace_reader){ c->p, start + size, false };
		c->p = start + size;
		at = field_add(fs);
		if (fs->n > MAX_FIELDS || (fs->f[at].name = utf16z(&f)) == NULL)
			return false;
		fs->f[at].type = u32(&f);
		if (fs->f[at].type == NT_ARRAY)
			fs->f[at].elem_type = u32(&f);
		if (fs->f[at].type == NT_OBJECT || (fs->f[at].type == NT_ARRAY && fs->f[at].elem_type == NT_OBJECT)) {
			before = fs->n;
			if (!fields_v2(&f, fs, depth + 1))
				return false;
			fs->f[at].n_fields = (uint32_t)(fs->n - before);
		}
		if (f.bad)
			return false;
	}
	return !c->bad;
}

static void fields_free(struct fields *fs)
{
	for (size_t i = 0; i < fs->n; i++)
		free((char *)fs->f[i].name);
	free(fs->f);
	memset(fs, 0, sizeof(*fs));
}

/* A metadata event's payload: defines one event type. */
static int metadata(struct nettrace *t, const uint8_t *p, size_t n, struct err_msg *em)
{
	struct nettrace_reader c = { p, p + n, false };
	struct nettrace_meta *m = mem_zalloc(sizeof(*m));
	struct fields fs = { 0 };
	size_t bytes_used = n + sizeof(*m);
	int rc;

	m->id = u32(&c);
	m->provider = utf16z(&c);
	m->event_id = u32(&c);
	m->name = m->provider ? utf16z(&c) : NULL;
	m->keywords = u64(&c);
	m->version = u32(&c);
	m->level = u32(&c);
	if (c.bad || m->provider == NULL || m->name == NULL) {
		meta_free(m);
		return fail(t, em, DP_ESYNTAX, "a metadata event of %zu bytes ends before its header does", n);
	}
	if (c.p < c.end && !fields_v1(&c, &fs, 0)) {
		rc = fail(t, em, DP_ESYNTAX, "metadata %u (%s): its field list is malformed", m->id, m->provider);
		fields_free(&fs);
		meta_free(m);
		return rc;
	}
	while (c.p < c.end) { /* V5 tags */
		uint32_t size = u32(&c);
		uint8_t tag = u8(&c);
		struct nettrace_reader d;

		if (c.bad || size > (size_t)(c.end - c.p)) {
			rc = fail(t, em, DP_ESYNTAX, "metadata %u: a tag runs past the event's end", m->id);
			fields_free(&fs);
			meta_free(m);
			return rc;
		}
		d = (struct nettrace_reader){ c.p, c.p + size, false };
		c.p += size;
		if (tag == 1) {
			m->opcode = u8(&d);
		} else if (tag == 2) {
			fields_free(&fs); /* V2Params replace the (empty) V1 list */
			if (!fields_v2(&d, &fs, 0)) {
				rc = fail(t, em, DP_ESYNTAX, "metadata %u: its V2Params are malformed", m->id);
				fields_free(&fs);
				meta_free(m);
				return rc;
			}
		}
	}
	m->fields = fs.f;
	m->n_fields = fs.n;
	if (m->id == 0 || m->id >= MAX_META_ID) {
		rc = fail(t, em, DP_ESYNTAX, "metadata id %u is out of range", m->id);
		meta_free(m);
		return rc;
	}
	if (t->meta_bytes + bytes_used > t->lim.max_metadata_bytes) {
		meta_free(m);
		return fail(t, em, DP_ETOOBIG, "metadata over the %zu-byte cap", t->lim.max_metadata_bytes);
	}
	if (m->id >= t->meta_cap) {
		size_t was = t->meta_cap;

		MEM_GROW(t->meta, t->meta_cap, (size_t)m->id + 1, 64);
		memset(t->meta + was, 0, (t->meta_cap - was) * sizeof(*t->meta));
	}
	meta_free(t->meta[m->id]); /* a redefinition replaces */
	t->meta[m->id] = m;
	t->meta_bytes += bytes_used;
	t->stats.metadata++;
	if (t->cb.metadata && (rc = t->cb.metadata(t->ctx, m)) != 0)
		return fail(t, em, rc, "stopped by the metadata callback");
	return 0;
}

/* ---- sequence numbers ---- */

/*
 * The capture threads' sequence numbers, by thread id: a table of its own, not common/htab.h. It is asked
 * once per event; through htab's comparison callback the reader ran ~10 % slower (bench_nettrace, best of
 * 30 reads of a 3.4 MB trace: 3.4 ms against 3.0-3.1), and an integer key needs no callback.
 */
static struct thread_seq *thread_find(struct nettrace *t, uint64_t id, bool add)
{
	size_t mask, i;

	if (t->threads_cap == 0 || (add && (t->n_threads + 1) * 2 > t->threads_cap)) {
		size_t cap = t->threads_cap ? t->threads_cap * 2 : 64;
		struct thread_seq *old = t->threads, *nt;
		size_t old_cap = t->threads_cap;

		if (!add && t->threads_cap == 0)
			return NULL;
		nt = mem_zalloc(cap * sizeof(*nt));
		for (size_t k = 0; k < old_cap; k++)
			if (old[k].used) {
				for (i = (size_t)(old[k].id * 0x9E3779B97F4A7C15ull) & (cap - 1); nt[i].used; i = (i + 1) & (cap - 1))
					;
				nt[i] = old[k];
			}
		free(old);
		t->threads = nt;
		t->threads_cap = cap;
	}
	mask = t->threads_cap - 1;
	for (i = (size_t)(id * 0x9E3779B97F4A7C15ull) & mask; t->threads[i].used; i = (i + 1) & mask)
		if (t->threads[i].id == id)
			return &t->threads[i];
	if (!add)
		return NULL;
	t->threads[i].used = true;
	t->threads[i].id = id;
	t->n_threads++;
	return &t->threads[i];
}

/* Thread id's sequence number is now seq: a jump past the next one means dropped events. */
static int saw_seq(struct nettrace *t, uint64_t id, uint32_t seq, bool is_point, struct err_msg *em)
{
	struct thread_seq *s = thread_find(t, id, false);

	if (s == NULL) {
		if (t->n_threads >= t->lim.max_threads)
			return fail(t, em, DP_ETOOBIG, "more than %zu capture threads", t->lim.max_threads);
		s = thread_find(t, id, true);
		s->seq = seq;
		return 0;
	}
	if (is_point) {
		if (seq > s->seq)
			t->stats.dropped += seq - s->seq;
	} else if (seq > s->seq + 1) {
		t->stats.dropped += seq - s->seq - 1;
	}
	if (seq > s->seq || !is_point)
		s->seq = seq;
	return 0;
}

/* ---- blocks ---- */

struct header_state {
	uint32_t meta_id, seq, processor, stack_id, payload_size;
	uint64_t thread_id, capture_thread_id;
	int64_t timestamp;
	uint8_t activity[16], related[16];
	bool sorted;
};

static int event(struct nettrace *t, bool in_metadata, const struct header_state *h, const uint8_t *payload,
		 struct err_msg *em)
{
	struct nettrace_event e;
	int rc;

	if (in_metadata)
		return metadata(t, payload, h->payload_size, em);
	if (h->meta_id >= t->meta_cap || t->meta[h->meta_id] == NULL)
		return fail(t, em, DP_ESYNTAX, "an event refers to metadata id %u, which was never defined", h->meta_id);
	if ((rc = saw_seq(t, h->capture_thread_id, h->seq, false, em)) != 0)
		return rc;
	memset(&e, 0, sizeof(e));
	e.meta = t->meta[h->meta_id];
	e.seq = h->seq;
	e.thread_id = h->thread_id;
	e.capture_thread_id = h->capture_thread_id;
	e.processor = h->processor;
	e.stack_id = h->stack_id;
	if (h->stack_id != 0) {
		size_t k = h->stack_id - t->stack_base;

		if (h->stack_id < t->stack_base || k >= t->n_stacks)
			return fail(t, em, DP_ESYNTAX, "an event refers to stack %u, which is not in the stack cache",
				    h->stack_id);
		e.stack = t->stack_len[k] ? t->ips + t->stack_at[k] : NULL;
		e.stack_n = t->stack_len[k];
	}
	e.timestamp = h->timestamp;
	memcpy(e.activity, h->activity, 16);
	memcpy(e.related, h->related, 16);
	e.payload = payload;
	e.payload_len = h->payload_size;
	e.sorted = h->sorted;
	t->stats.events++;
	if (t->cb.event && (rc = t->cb.event(t->ctx, &e)) != 0)
		return fail(t, em, rc, "stopped by the event callback");
	return 0;
}

/* EventBlock and MetadataBlock: a header, then event blobs (compressed headers, or the old fixed ones). */
static int event_block(struct nettrace *t, const uint8_t *p, size_t n, bool in_metadata, struct err_msg *em)
{
	struct nettrace_reader c = { p, p + n, false };
	struct header_state h;
	uint16_t hsize = u16(&c), flags = u16(&c);
	bool compressed = flags & 1;
	int rc;

	if (c.bad || hsize < 4 || hsize > n)
		return fail(t, em, DP_ESYNTAX, "a block header of %u bytes in a block of %zu", hsize, n);
	c.p = p + hsize;
	memset(&h, 0, sizeof(h));
	while (c.p < c.end) {
		const uint8_t *start = c.p, *payload;

		if (compressed) {
			uint8_t f = u8(&c);

			if (f & 0x01)
				h.meta_id = (uint32_t)varuint(&c, 32);
			if (f & 0x02) {
				h.seq += (uint32_t)varuint(&c, 32) + 1;
				h.capture_thread_id = varuint(&c, 64);
				h.processor = (uint32_t)varuint(&c, 32);
			} else if (h.meta_id != 0) {
				h.seq++;
			}
			if (f & 0x04)
				h.thread_id = varuint(&c, 64);
			if (f & 0x08)
				h.stack_id = (uint32_t)varuint(&c, 32);
			h.timestamp = (int64_t)((uint64_t)h.timestamp + varuint(&c, 64));
			if (f & 0x10)
				bytes(&c, h.activity, 16);
			if (f & 0x20)
				bytes(&c, h.related, 16);
			h.sorted = f & 0x40;
			if (f & 0x80)
				h.payload_size = (uint32_t)varuint(&c, 32);
			payload = c.p;
			if (c.bad || !need(&c, h.payload_size))
				return fail(t, em, DP_ESYNTAX, "an event at block offset %zu runs past its block",
					    (size_t)(start - p));
			c.p += h.payload_size;
		} else {
			uint32_t size = u32(&c);
			const uint8_t *end = c.p + size;

			if (c.bad || size > (size_t)(c.end - c.p) || size < 76)
				return fail(t, em, DP_ESYNTAX, "an event of %u bytes at block offset %zu", size,
					    (size_t)(start - p));
			h.meta_id = u32(&c);
			h.sorted = !(h.meta_id & 0x80000000u);
			h.meta_id &= 0x7fffffffu;
			h.seq = u32(&c);
			h.thread_id = u64(&c);
			h.capture_thread_id = u64(&c);
			h.processor = u32(&c);
			h.stack_id = u32(&c);
			h.timestamp = (int64_t)u64(&c);
			bytes(&c, h.activity, 16);
			bytes(&c, h.related, 16);
			h.payload_size = u32(&c);
			payload = c.p;
			if (c.bad || h.payload_size > (size_t)(end - c.p))
				return fail(t, em, DP_ESYNTAX, "an event's payload runs past its size at block offset %zu",
					    (size_t)(start - p));
			c.p = end;
			while ((size_t)(c.p - p) % 4 && c.p < c.end) /* the next one starts 4-aligned */
				c.p++;
		}
		if (in_metadata != (h.meta_id == 0))
			return fail(t, em, DP_ESYNTAX, "%s block holds an event with metadata id %u",
				    in_metadata ? "a metadata" : "an event", h.meta_id);
		if ((rc = event(t, in_metadata, &h, payload, em)) != 0)
			return rc;
	}
	return 0;
}

static void stacks_reset(struct nettrace *t)
{
	t->n_ips = 0;
	t->n_stacks = 0;
	t->stack_base = 0;
}

static int stack_block(struct nettrace *t, const uint8_t *p, size_t n, struct err_msg *em)
{
	struct nettrace_reader c = { p, p + n, false };
	uint32_t first = u32(&c), count = u32(&c), psize = t->hdr.pointer_size == 4 ? 4 : 8;

	if (c.bad)
		return fail(t, em, DP_ESYNTAX, "a stack block of %zu bytes has no header", n);
	if (t->n_stacks == 0)
		t->stack_base = first;
	else if (first != t->stack_base + t->n_stacks)
		return fail(t, em, DP_ESYNTAX, "stack ids jump from %zu to %u", t->stack_base + t->n_stacks - 1, first);
	for (uint32_t i = 0; i < count; i++) {
		uint32_t size = u32(&c);
		size_t k = size / psize;

		if (c.bad || size % psize || !need(&c, size))
			return fail(t, em, DP_ESYNTAX, "stack %u of a stack block is malformed", first + i);
		if ((t->n_ips + k) * sizeof(uint64_t) > t->lim.max_stack_bytes)
			return fail(t, em, DP_ETOOBIG, "stacks over the %zu-byte cap between two sequence points",
				    t->lim.max_stack_bytes);
		MEM_GROW(t->ips, t->ips_cap, t->n_ips + k, 1024);
		if (t->n_stacks == t->stacks_cap) {
			t->stacks_cap = t->stacks_cap ? t->stacks_cap * 2 : 256;
			t->stack_at = mem_realloc(t->stack_at, t->stacks_cap * sizeof(*t->stack_at));
			t->stack_len = mem_realloc(t->stack_len, t->stacks_cap * sizeof(*t->stack_len));
		}
		t->stack_at[t->n_stacks] = t->n_ips;
		t->stack_len[t->n_stacks] = k;
		t->n_stacks++;
		for (size_t j = 0; j < k; j++)
			t->ips[t->n_ips++] = psize == 8 ? u64(&c) : u32(&c);
		t->stats.stacks++;
	}
	return 0;
}

static int sequence_point(struct nettrace *t, const uint8_t *p, size_t n, struct err_msg *em)
{
	struct nettrace_reader c = { p, p + n, false };
	int64_t ts = (int64_t)u64(&c);
	uint32_t count = u32(&c);
	int rc;

	if (c.bad || count > (n - 12) / 12)
		return fail(t, em, DP_ESYNTAX, "a sequence point of %zu bytes lists %u threads", n, count);
	for (uint32_t i = 0; i < count; i++) {
		uint64_t id = u64(&c);
		uint32_t seq = u32(&c);

		if ((rc = saw_seq(t, id, seq, true, em)) != 0)
			return rc;
	}
	stacks_reset(t);
	t->stats.sequence_points++;
	if (t->cb.sequence_point && (rc = t->cb.sequence_point(t->ctx, ts)) != 0)
		return fail(t, em, rc, "stopped by the sequence-point callback");
	return 0;
}

static int trace_object(struct nettrace *t, const uint8_t *p, struct err_msg *em)
{
	struct nettrace_reader c = { p, p + TRACE_PAYLOAD, false };
	struct nettrace_trace *h = &t->hdr;
	int rc;

	h->year = u16(&c);
	h->month = u16(&c);
	h->day_of_week = u16(&c);
	h->day = u16(&c);
	h->hour = u16(&c);
	h->minute = u16(&c);
	h->second = u16(&c);
	h->millisecond = u16(&c);
	h->start_ticks = (int64_t)u64(&c);
	h->ticks_per_sec = (int64_t)u64(&c);
	h->pointer_size = u32(&c);
	h->pid = u32(&c);
	h->processors = u32(&c);
	h->sampling_ns = u32(&c);
	if (h->pointer_size != 4 && h->pointer_size != 8)
		return fail(t, em, DP_ESYNTAX, "the Trace object gives a pointer size of %u", h->pointer_size);
	t->have_hdr = true;
	if (t->cb.trace && (rc = t->cb.trace(t->ctx, h)) != 0)
		return fail(t, em, rc, "stopped by the trace callback");
	return 0;
}

static int block(struct nettrace *t, const uint8_t *p, size_t n, struct err_msg *em)
{
	t->stats.blocks++;
	switch (t->kind) {
	case K_EVENTS:
		return event_block(t, p, n, false, em);
	case K_METADATA:
		return event_block(t, p, n, true, em);
	case K_STACKS:
		return stack_block(t, p, n, em);
	case K_SP:
		return sequence_point(t, p, n, em);
	default:
		return 0; /* an object type this reader does not know: skipped whole */
	}
}

/* ---- the container ---- */

static int preamble(struct nettrace *t, const uint8_t *u, struct err_msg *em)
{
	if (memcmp(u, "Nettrace", 8) != 0)
		return fail(t, em, DP_ESYNTAX, "not a nettrace stream (no \"Nettrace\" magic)");
	if (memcmp(u + 8, "\0\0\0\0", 4) == 0)
		return fail(t, em, DP_ESYNTAX, "a NetTrace V6 stream, which this reader does not read");
	if (memcmp(u + 8, "\x14\0\0\0!FastSerialization.1", 24) != 0)
		return fail(t, em, DP_ESYNTAX, "no \"!FastSerialization.1\" after the magic");
	return 0;
}

static int type_header(struct nettrace *t, const uint8_t *u, struct err_msg *em)
{
	struct nettrace_reader c = { u, u + TYPE_HEADER, false };
	uint8_t a = u8(&c), b = u8(&c);
	uint32_t ver = u32(&c), minver = u32(&c), len = u32(&c);

	(void)minver;
	if (a != 0x05 || b != 0x01)
		return fail(t, em, DP_ESYNTAX, "an object's type header starts %02x %02x, not 05 01", a, b);
	if (len == 0 || len > MAX_TYPE_NAME)
		return fail(t, em, DP_ESYNTAX, "an object type name of %u bytes", len);
	t->hdr.version = t->have_hdr ? t->hdr.version : ver;
	expect(t, S_NAME, (size_t)len + 1);
	return 0;
}

static int type_name(struct nettrace *t, const uint8_t *u, struct err_msg *em)
{
	size_t len = t->need - 1;

	if (u[len] != 0x06)
		return fail(t, em, DP_ESYNTAX, "an object type name is not followed by 06");
	memcpy(t->type_name, u, len);
	t->type_name[len] = '\0';
	if (strcmp(t->type_name, "Trace") == 0) {
		if (t->have_hdr)
			return fail(t, em, DP_ESYNTAX, "a second Trace object");
		t->kind = K_TRACE;
		expect(t, S_TRACE, TRACE_PAYLOAD);
		return 0;
	}
	if (!t->have_hdr)
		return fail(t, em, DP_ESYNTAX, "a %s before the Trace object", t->type_name);
	t->kind = strcmp(t->type_name, "EventBlock") == 0 ? K_EVENTS :
		  strcmp(t->type_name, "MetadataBlock") == 0 ? K_METADATA :
		  strcmp(t->type_name, "StackBlock") == 0 ? K_STACKS :
		  strcmp(t->type_name, "SPBlock") == 0 ? K_SP : K_OTHER;
	expect(t, S_SIZE, 4);
	return 0;
}

/* One step: what to do with a gathered unit u. */
static int step(struct nettrace *t, const uint8_t *u, struct err_msg *em)
{
	uint32_t pad;

	switch (t->st) {
	case S_PREAMBLE:
		if (preamble(t, u, em) != 0)
			return t->fail_rc;
		expect(t, S_TAG, 1);
		return 0;
	case S_TAG:
		if (u[0] == 0x01) {
			t->st = S_ENDED;
			return 0;
		}
		if (u[0] != 0x05)
			return fail(t, em, DP_ESYNTAX, "expected an object (05) or the end of the stream (01), found %02x",
				    u[0]);
		expect(t, S_TYPE, TYPE_HEADER);
		return 0;
	case S_TYPE:
		return type_header(t, u, em);
	case S_NAME:
		return type_name(t, u, em);
	case S_TRACE:
		expect(t, S_END, 1);
		return trace_object(t, u, em);
	case S_SIZE:
		t->block_size = (uint32_t)(u[0] | u[1] << 8 | u[2] << 16 | (uint32_t)u[3] << 24);
		if (t->block_size > t->lim.max_block)
			return fail(t, em, DP_ETOOBIG, "a %s of %u bytes; the cap is %zu", t->type_name, t->block_size,
				    t->lim.max_block);
		pad = (uint32_t)((4 - t->off % 4) % 4);
		if (pad)
			expect(t, S_PAD, pad);
		else
			expect(t, t->block_size ? S_BLOCK : S_END, t->block_size ? t->block_size : 1);
		if (t->block_size == 0)
			t->stats.blocks++;
		return 0;
	case S_PAD:
		expect(t, t->block_size ? S_BLOCK : S_END, t->block_size ? t->block_size : 1);
		return 0;
	case S_BLOCK:
		expect(t, S_END, 1);
		return block(t, u, t->block_size, em);
	case S_END:
		if (u[0] != 0x06)
			return fail(t, em, DP_ESYNTAX, "a %s does not end with 06 (found %02x)", t->type_name, u[0]);
		expect(t, S_TAG, 1);
		return 0;
	default:
		return fail(t, em, DP_EINTERNAL, "the reader is in no known state");
	}
}

struct nettrace *nettrace_new(const struct nettrace_limits *lim, const struct nettrace_callbacks *cb, void *ctx)
{
	struct nettrace *t = mem_zalloc(sizeof(*t));

	t->lim = lim ? *lim : nettrace_default_limits;
	if (cb)
		t->cb = *cb;
	t->ctx = ctx;
	expect(t, S_PREAMBLE, PREAMBLE);
	return t;
}

int nettrace_feed(struct nettrace *t, const void *p, size_t n, struct err_msg *em)
{
	const uint8_t *b = p;

	if (t->st == S_FAILED) {
		if (em)
			snprintf(em->text, sizeof(em->text), "%s", t->fail_msg);
		return t->fail_rc;
	}
	while (n > 0) {
		const uint8_t *u;
		int rc;

		if (t->st == S_ENDED)
			return fail(t, em, DP_ESYNTAX, "bytes after the end of the stream");
		if ((u = gather(t, &b, &n)) == NULL)
			break;
		if ((rc = step(t, u, em)) != 0)
			return rc;
	}
	t->stats.bytes = t->off;
	return 0;
}

bool nettrace_ended(const struct nettrace *t)
{
	return t->st == S_ENDED;
}

int nettrace_finish(struct nettrace *t, struct err_msg *em)
{
	if (t->st == S_ENDED)
		return 0;
	if (t->st == S_FAILED) {
		if (em)
			snprintf(em->text, sizeof(em->text), "%s", t->fail_msg);
		return t->fail_rc;
	}
	return fail(t, em, DP_ESYNTAX, "truncated: the stream ends %s without its end tag",
		    t->off == 0 ? "before its first byte" : t->st == S_TAG ? "between objects" : "inside an object");
}

void nettrace_stats(const struct nettrace *t, struct nettrace_stats *out)
{
	*out = t->stats;
	out->bytes = t->off;
}

const struct nettrace_trace *nettrace_header(const struct nettrace *t)
{
	return t->have_hdr ? &t->hdr : NULL;
}

void nettrace_free(struct nettrace *t)
{
	if (t == NULL)
		return;
	for (size_t i = 0; i < t->meta_cap; i++)
		meta_free(t->meta[i]);
	free(t->meta);
	free(t->acc);
	free(t->ips);
	free(t->stack_at);
	free(t->stack_len);
	free(t->threads);
	free(t);
}

int64_t nettrace_wall_ms(const struct nettrace_trace *h, int64_t timestamp)
{
	struct tm tm = { .tm_year = h->year - 1900, .tm_mon = h->month - 1, .tm_mday = h->day, .tm_hour = h->hour,
			 .tm_min = h->minute, .tm_sec = h->second };
	int64_t start = (int64_t)timegm(&tm) * 1000 + h->millisecond;

	if (h->ticks_per_sec <= 0)
		return start;
	return start + (int64_t)((double)(timestamp - h->start_ticks) * 1000.0 / (double)h->ticks_per_sec);
}
