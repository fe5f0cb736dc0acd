/*
 * test_nettrace.c - the nettrace reader (eventpipe/nettrace.h) on streams built
 * here byte by byte from the format (docs/NETTRACE.md), one feature each,
 * and on small real traces from .NET 10 (tests/fuzz/seeds-nettrace/, taken
 * with /trace; tests/integration/trace.sh checks such traces against
 * TraceEvent): fed whole and fed one byte at a time they must read the same.
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "buf.h"
#include "eventpipe/nettrace.h"
#include "t.h"

/* ---- building streams ---- */

static void put(struct buf *b, const void *p, size_t n)
{
	buf_append(b, p, n);
}

static void le(struct buf *b, uint64_t v, int n)
{
	for (int i = 0; i < n; i++) {
		uint8_t c = (uint8_t)(v >> (8 * i));

		put(b, &c, 1);
	}
}

static void var(struct buf *b, uint64_t v)
{
	do {
		uint8_t c = (uint8_t)(v & 0x7f);

		v >>= 7;
		if (v)
			c |= 0x80;
		put(b, &c, 1);
	} while (v);
}

static void utf16(struct buf *b, const char *s)
{
	for (; *s; s++)
		le(b, (uint8_t)*s, 2);
	le(b, 0, 2);
}

static void preamble(struct buf *b)
{
	put(b, "Nettrace", 8);
	le(b, 20, 4);
	put(b, "!FastSerialization.1", 20);
}

static void type_header(struct buf *b, const char *name, int version)
{
	uint8_t t[2] = { 0x05, 0x01 };

	put(b, "\x05", 1); /* begin object */
	put(b, t, 2);
	le(b, (uint64_t)version, 4);
	le(b, (uint64_t)version, 4);
	le(b, strlen(name), 4);
	put(b, name, strlen(name));
	put(b, "\x06", 1);
}

static void trace_object(struct buf *b)
{
	type_header(b, "Trace", 4);
	le(b, 2026, 2), le(b, 11, 2), le(b, 0, 2), le(b, 22, 2), le(b, 10, 2), le(b, 30, 2), le(b, 5, 2), le(b, 123, 2);
	le(b, 1000, 8);       /* start ticks */
	le(b, 1000000000, 8); /* ticks per second */
	le(b, 8, 4);          /* pointer size */
	le(b, 4242, 4);       /* pid */
	le(b, 2, 4);          /* processors */
	le(b, 1000000, 4);    /* sampling ns */
	put(b, "\x06", 1);
}

/* A block object: its size, zero padding to a 4-byte boundary from the stream's start, the payload, 06. */
static void block(struct buf *b, const char *name, const struct buf *payload)
{
	type_header(b, name, 2);
	le(b, payload->len, 4);
	while (b->len % 4)
		put(b, "", 1);
	put(b, payload->data, payload->len);
	put(b, "\x06", 1);
}

static void block_header(struct buf *p, int flags)
{
	le(p, 20, 2);
	le(p, (uint64_t)flags, 2);
	le(p, 0, 8);
	le(p, 0, 8);
}

/* Metadata for id 1: provider P, event 7 "E", V1 fields {Int32 a; Object o {String s}}. */
static void metadata_block(struct buf *b)
{
	struct buf m, p;

	buf_init(&m, 0);
	le(&m, 1, 4);
	utf16(&m, "P");
	le(&m, 7, 4);
	utf16(&m, "E");
	le(&m, 0xF0, 8); /* keywords */
	le(&m, 2, 4);    /* version */
	le(&m, 4, 4);    /* level */
	le(&m, 2, 4);    /* two fields */
	le(&m, 9, 4);    /* Int32 */
	utf16(&m, "a");
	le(&m, 1, 4);    /* Object, */
	le(&m, 1, 4);    /* with one field: */
	le(&m, 18, 4);   /* String */
	utf16(&m, "s");
	utf16(&m, "o");
	le(&m, 2, 4);    /* a V5 tag of 2 bytes, */
	put(&m, "\x01", 1); /* OpCode */
	put(&m, "\x0b\x00", 2);

	buf_init(&p, 0);
	block_header(&p, 1);
	put(&p, "\x81", 1); /* metadata id (0) and payload size */
	var(&p, 0);
	var(&p, 5); /* timestamp delta */
	var(&p, m.len);
	put(&p, m.data, m.len);
	block(b, "MetadataBlock", &p);
	buf_free(&m);
	buf_free(&p);
}

/* Stacks 1 (two frames) and 2 (empty). */
static void stack_block(struct buf *b)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, 1, 4);
	le(&p, 2, 4);
	le(&p, 16, 4);
	le(&p, 0x1111, 8);
	le(&p, 0x2222, 8);
	le(&p, 0, 4);
	block(b, "StackBlock", &p);
	buf_free(&p);
}

/* Three events of metadata 1 on capture thread 77; the third on stack 1 and seq_jump sequence numbers on. */
static void event_block(struct buf *b, uint32_t seq_jump)
{
	struct buf p;

	buf_init(&p, 0);
	block_header(&p, 1);
	/* 1: metadata id, seq + capture thread + processor, thread, timestamp, payload size */
	put(&p, "\x87", 1);
	var(&p, 1);
	var(&p, 0);      /* seq = 0 + 0 + 1 */
	var(&p, 77);     /* capture thread */
	var(&p, 1);      /* processor */
	var(&p, 5000);   /* thread */
	var(&p, 10);     /* timestamp delta */
	var(&p, 3);
	put(&p, "abc", 3);
	/* 2: everything inherited: seq + 1 */
	put(&p, "\x00", 1);
	var(&p, 10);
	put(&p, "xyz", 3);
	/* 3: stack 1, sorted, a new payload size, and a sequence jump */
	put(&p, "\xca", 1); /* 0x80 | 0x40 | 0x08 | 0x02 */
	var(&p, seq_jump);
	var(&p, 77);
	var(&p, 0);
	var(&p, 1);      /* stack id */
	var(&p, 10);
	var(&p, 1);
	put(&p, "!", 1);
	block(b, "EventBlock", &p);
	buf_free(&p);
}

static void sp_block(struct buf *b, uint32_t seq)
{
	struct buf p;

	buf_init(&p, 0);
	le(&p, 99, 8);
	le(&p, 1, 4);
	le(&p, 77, 8);
	le(&p, seq, 4);
	block(b, "SPBlock", &p);
	buf_free(&p);
}

static void stream(struct buf *b, uint32_t seq_jump, uint32_t sp_seq)
{
	buf_init(b, 0);
	preamble(b);
	trace_object(b);
	metadata_block(b);
	stack_block(b);
	event_block(b, seq_jump);
	sp_block(b, sp_seq);
	put(b, "\x01", 1);
}

/* ---- what the callbacks saw ---- */

struct seen {
	struct buf log;
	int traces, metas, events, points;
};

static int on_trace(void *ctx, const struct nettrace_trace *t)
{
	struct seen *s = ctx;

	s->traces++;
	buf_printf(&s->log, "T %u-%u-%u %u:%u:%u.%u pid %u ptr %u f %lld;", t->year, t->month, t->day, t->hour,
		   t->minute, t->second, t->millisecond, t->pid, t->pointer_size, (long long)t->ticks_per_sec);
	return 0;
}

static int on_meta(void *ctx, const struct nettrace_meta *m)
{
	struct seen *s = ctx;

	s->metas++;
	buf_printf(&s->log, "M %u %s/%u/%s v%u l%u op%u kw%llx f%zu:", m->id, m->provider, m->event_id, m->name,
		   m->version, m->level, m->opcode, (unsigned long long)m->keywords, m->n_fields);
	for (size_t i = 0; i < m->n_fields; i++)
		buf_printf(&s->log, " %s/%u/%u/%u", m->fields[i].name, m->fields[i].type, m->fields[i].elem_type,
			   m->fields[i].n_fields);
	buf_puts(&s->log, ";");
	return 0;
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct seen *s = ctx;

	s->events++;
	buf_printf(&s->log, "E m%u s%u t%llu c%llu p%u ts%lld st%u", e->meta->id, e->seq, (unsigned long long)e->thread_id,
		   (unsigned long long)e->capture_thread_id, e->processor, (long long)e->timestamp, e->stack_id);
	for (size_t i = 0; i < e->stack_n; i++)
		buf_printf(&s->log, " %llx", (unsigned long long)e->stack[i]);
	buf_printf(&s->log, " %s '%.*s';", e->sorted ? "sorted" : "-", (int)e->payload_len, (const char *)e->payload);
	return 0;
}

static int on_point(void *ctx, int64_t ts)
{
	struct seen *s = ctx;

	s->points++;
	buf_printf(&s->log, "P %lld;", (long long)ts);
	return 0;
}

static const struct nettrace_callbacks cbs = { on_trace, on_meta, on_event, on_point };

/* Read b (in chunks of `chunk` bytes; 0 = whole) into s; the return of the feed or the finish. */
static int read_all(const struct buf *b, size_t chunk, const struct nettrace_limits *lim, struct seen *s,
		    struct nettrace_stats *st, struct err_msg *em)
{
	struct nettrace *t = nettrace_new(lim, &cbs, s);
	size_t step = chunk ? chunk : b->len;
	int rc = 0;

	memset(s, 0, sizeof(*s));
	buf_init(&s->log, 0);
	for (size_t at = 0; rc == 0 && at < b->len; at += step)
		rc = nettrace_feed(t, b->data + at, b->len - at < step ? b->len - at : step, em);
	if (rc == 0)
		rc = nettrace_finish(t, em);
	if (st)
		nettrace_stats(t, st);
	nettrace_free(t);
	return rc;
}

static void built_stream(void)
{
	struct buf b;
	struct seen s;
	struct nettrace_stats st;
	struct err_msg em;

	stream(&b, 0, 3);
	T_CHECK(read_all(&b, 0, NULL, &s, &st, &em) == 0);
	T_CHECK(s.traces == 1 && s.metas == 1 && s.events == 3 && s.points == 1);
	T_CHECK(strstr(s.log.data, "T 2026-11-22 10:30:5.123 pid 4242 ptr 8 f 1000000000;") != NULL);
	T_CHECK(strstr(s.log.data, "M 1 P/7/E v2 l4 op11 kwf0 f3: a/9/0/0 o/1/0/1 s/18/0/0;") != NULL);
	T_CHECK(strstr(s.log.data, "E m1 s1 t5000 c77 p1 ts10 st0 - 'abc';") != NULL);
	T_CHECK(strstr(s.log.data, "E m1 s2 t5000 c77 p1 ts20 st0 - 'xyz';") != NULL);
	T_CHECK(strstr(s.log.data, "E m1 s3 t5000 c77 p0 ts30 st1 1111 2222 sorted '!';") != NULL);
	T_CHECK(strstr(s.log.data, "P 99;") != NULL);
	T_CHECK(st.events == 3 && st.metadata == 1 && st.stacks == 2 && st.sequence_points == 1 && st.blocks == 4);
	T_CHECK(st.dropped == 0 && st.bytes == b.len);
	buf_free(&s.log);
	buf_free(&b);
}

/* Sequence numbers: a jump of 5 inside the block is 5 dropped; a sequence point 4 past the last is 4 more. */
static void dropped(void)
{
	struct buf b;
	struct seen s;
	struct nettrace_stats st;
	struct err_msg em;

	stream(&b, 5, 12);
	T_CHECK(read_all(&b, 0, NULL, &s, &st, &em) == 0);
	T_CHECK(strstr(s.log.data, "E m1 s8 ") != NULL); /* 2 + 5 + 1 */
	T_CHECK(st.dropped == 5 + 4);
	buf_free(&s.log);
	buf_free(&b);
}

/* Fed one byte at a time, in 7-byte pieces and whole: the same callbacks, in the same order. */
static void chunking(void)
{
	struct buf b;
	struct seen whole, other;
	struct err_msg em;
	static const size_t chunks[] = { 1, 2, 7, 4096 };

	stream(&b, 2, 9);
	T_CHECK(read_all(&b, 0, NULL, &whole, NULL, &em) == 0);
	for (size_t i = 0; i < sizeof(chunks) / sizeof(chunks[0]); i++) {
		T_CHECK(read_all(&b, chunks[i], NULL, &other, NULL, &em) == 0);
		if (strcmp(whole.log.data, other.log.data) != 0)
			T_FAIL("chunks of %zu: '%s' vs '%s'", chunks[i], other.log.data, whole.log.data);
		buf_free(&other.log);
	}
	buf_free(&whole.log);
	buf_free(&b);
}

/* V2Params (the V5 tag 2) replace an empty V1 list: an array of Int32 and an array of objects. */
static void v2params(void)
{
	struct buf b, m, p, f;
	struct seen s;
	struct err_msg em;

	buf_init(&m, 0);
	le(&m, 3, 4);
	utf16(&m, "Prov");
	le(&m, 1, 4);
	utf16(&m, "Ev");
	le(&m, 0, 8);
	le(&m, 0, 4);
	le(&m, 5, 4);
	le(&m, 0, 4); /* no V1 fields */
	buf_init(&f, 0);
	le(&f, 2, 4); /* two fields */
	{             /* "n": Array of Int32 */
		struct buf one;

		buf_init(&one, 0);
		utf16(&one, "n");
		le(&one, 19, 4);
		le(&one, 9, 4);
		le(&f, one.len + 4, 4);
		put(&f, one.data, one.len);
		buf_free(&one);
	}
	{ /* "kv": Array of Object {String k} */
		struct buf one, in;

		buf_init(&one, 0);
		buf_init(&in, 0);
		utf16(&in, "k");
		le(&in, 18, 4);
		utf16(&one, "kv");
		le(&one, 19, 4);
		le(&one, 1, 4);
		le(&one, 1, 4);
		le(&one, in.len + 4, 4);
		put(&one, in.data, in.len);
		le(&f, one.len + 4, 4);
		put(&f, one.data, one.len);
		buf_free(&one);
		buf_free(&in);
	}
	le(&m, f.len, 4);
	put(&m, "\x02", 1);
	put(&m, f.data, f.len);

	buf_init(&p, 0);
	block_header(&p, 1);
	put(&p, "\x81", 1);
	var(&p, 0);
	var(&p, 0);
	var(&p, m.len);
	put(&p, m.data, m.len);
	buf_init(&b, 0);
	preamble(&b);
	trace_object(&b);
	block(&b, "MetadataBlock", &p);
	put(&b, "\x01", 1);
	T_CHECK(read_all(&b, 0, NULL, &s, NULL, &em) == 0);
	if (strstr(s.log.data, "M 3 Prov/1/Ev v0 l5 op0 kw0 f3: n/19/9/0 kv/19/1/1 k/18/0/0;") == NULL)
		T_FAIL("%s", s.log.data);
	buf_free(&s.log);
	buf_free(&b);
	buf_free(&m);
	buf_free(&p);
	buf_free(&f);
}

/* Over a cap: refused with DP_ETOOBIG and the cap named, before the block is held. */
static void caps(void)
{
	struct buf b;
	struct seen s;
	struct err_msg em;
	struct nettrace_limits lim = nettrace_default_limits;

	stream(&b, 0, 3);
	lim.max_block = 40;
	T_CHECK(read_all(&b, 0, &lim, &s, NULL, &em) == DP_ETOOBIG);
	T_CHECK(strstr(em.text, "the cap is 40") != NULL);
	buf_free(&s.log);
	lim = nettrace_default_limits;
	lim.max_metadata_bytes = 10;
	T_CHECK(read_all(&b, 0, &lim, &s, NULL, &em) == DP_ETOOBIG);
	T_CHECK(strstr(em.text, "metadata over the 10-byte cap") != NULL);
	buf_free(&s.log);
	lim = nettrace_default_limits;
	lim.max_stack_bytes = 8;
	T_CHECK(read_all(&b, 0, &lim, &s, NULL, &em) == DP_ETOOBIG);
	buf_free(&s.log);
	buf_free(&b);
}

/* Not nettrace, or broken: DP_ESYNTAX with the byte offset; a cut stream is "truncated". */
static void refused(void)
{
	struct buf b, c;
	struct seen s;
	struct err_msg em;

	buf_init(&c, 0);
	put(&c, "NotTrace and more bytes to make 32 of them", 40);
	T_CHECK(read_all(&c, 0, NULL, &s, NULL, &em) == DP_ESYNTAX && strstr(em.text, "magic") != NULL);
	buf_free(&s.log);
	buf_reset(&c);
	put(&c, "Nettrace", 8);
	le(&c, 0, 4);
	le(&c, 6, 4);
	put(&c, "....................", 16);
	T_CHECK(read_all(&c, 0, NULL, &s, NULL, &em) == DP_ESYNTAX && strstr(em.text, "V6") != NULL);
	buf_free(&s.log);

	stream(&b, 0, 3);
	for (size_t cut = 0; cut < b.len; cut++) { /* every prefix is truncated, and said to be */
		struct buf pre;

		buf_init(&pre, 0);
		put(&pre, b.data, cut);
		if (read_all(&pre, 0, NULL, &s, NULL, &em) != DP_ESYNTAX || strstr(em.text, "truncated") == NULL)
			T_FAIL("a cut after %zu bytes: '%s'", cut, em.text);
		buf_free(&s.log);
		buf_free(&pre);
	}
	/* a wrong tag where an object should start names its offset */
	buf_reset(&c);
	put(&c, b.data, 32);
	put(&c, "\x07", 1);
	T_CHECK(read_all(&c, 0, NULL, &s, NULL, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "at byte 33") != NULL && strstr(em.text, "found 07") != NULL);
	buf_free(&s.log);
	/* bytes after the end */
	buf_reset(&c);
	put(&c, b.data, b.len);
	put(&c, "\x05", 1);
	T_CHECK(read_all(&c, 0, NULL, &s, NULL, &em) == DP_ESYNTAX && strstr(em.text, "after the end") != NULL);
	buf_free(&s.log);
	/* an event whose metadata was never defined */
	buf_reset(&c);
	preamble(&c);
	trace_object(&c);
	event_block(&c, 0);
	put(&c, "\x01", 1);
	T_CHECK(read_all(&c, 0, NULL, &s, NULL, &em) == DP_ESYNTAX && strstr(em.text, "never defined") != NULL);
	buf_free(&s.log);
	buf_free(&c);
	buf_free(&b);
}

/* Real traces from .NET 10: read to their end, the same fed whole and a byte at a time. */
static void real_traces(void)
{
	static const char *const files[] = { "counters", "gc", "logs", "cpu" };

	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++) {
		char path[128];
		struct buf b;
		struct seen whole, bytes;
		struct nettrace_stats a, c;
		struct err_msg em;
		int fd;

		snprintf(path, sizeof(path), "tests/fuzz/seeds-nettrace/%s.nettrace", files[i]);
		buf_init(&b, 1 << 20);
		fd = open(path, O_RDONLY);
		if (fd < 0 || buf_read_fd(&b, fd) != 0)
			T_FAIL("cannot read %s", path);
		close(fd);
		if (read_all(&b, 0, NULL, &whole, &a, &em) != 0)
			T_FAIL("%s: %s", path, em.text);
		if (read_all(&b, 1, NULL, &bytes, &c, &em) != 0)
			T_FAIL("%s byte by byte: %s", path, em.text);
		T_CHECK(strcmp(whole.log.data, bytes.log.data) == 0);
		T_CHECK(a.events > 0 && a.events == c.events && a.metadata == c.metadata && a.bytes == b.len);
		T_CHECK(whole.traces == 1 && a.dropped == 0);
		buf_free(&whole.log);
		buf_free(&bytes.log);
		buf_free(&b);
	}
}

int main(void)
{
	t_file_name = "nettrace";
	T_RUN(built_stream);
	T_RUN(dropped);
	T_RUN(chunking);
	T_RUN(v2params);
	T_RUN(caps);
	T_RUN(refused);
	T_RUN(real_traces);
	return t_failed_cases ? 1 : 0;
}
