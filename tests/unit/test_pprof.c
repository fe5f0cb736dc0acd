/*
 * test_pprof.c - the pprof writer (launcher/pprof.h): varints at their
 * edges, the bytes of a tiny profile as protoc would encode them, a profile
 * read back by a minimal protocol-buffers reader here (sample types,
 * strings, functions, locations, samples with their ids, values and
 * labels; equal names kept once), and the .pb.gz inflating to those very bytes.
 */
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "mem.h"
#include "launcher/pprof.h"
#include "t.h"

static void varint_edges(void)
{
	static const struct {
		uint64_t v;
		size_t n;
		uint8_t b[10];
	} cases[] = {
		{ 0, 1, { 0x00 } },
		{ 1, 1, { 0x01 } },
		{ 127, 1, { 0x7f } },
		{ 128, 2, { 0x80, 0x01 } },
		{ 300, 2, { 0xac, 0x02 } },
		{ 16383, 2, { 0xff, 0x7f } },
		{ 16384, 3, { 0x80, 0x80, 0x01 } },
		{ 0xffffffffull, 5, { 0xff, 0xff, 0xff, 0xff, 0x0f } },
		{ (uint64_t)1 << 63, 10, { 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01 } },
		/* an int64 of -1, as protobuf writes a negative int64: ten bytes */
		{ UINT64_MAX, 10, { 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01 } },
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		uint8_t out[10];
		size_t n = pprof_varint(out, cases[i].v);

		if (n != cases[i].n || memcmp(out, cases[i].b, n) != 0)
			T_FAIL("varint of %llu: %zu bytes, want %zu", (unsigned long long)cases[i].v, n, cases[i].n);
	}
}

/* What `protoc --encode=perftools.profiles.Profile profile.proto` gives for
 * sample_type {type: 1 unit: 2} string_table ["", "a", "b"] default_sample_type: 1. */
static void tiny_bytes(void)
{
	static const uint8_t want[] = { 0x0a, 0x04, 0x08, 0x01, 0x10, 0x02,             /* sample_type */
					0x32, 0x00, 0x32, 0x01, 'a', 0x32, 0x01, 'b', /* string_table */
					0x70, 0x01 };                                 /* default_sample_type */
	struct pprof *p = pprof_new();
	struct buf b;

	buf_init(&b, 0);
	pprof_sample_type(p, "a", "b");
	T_CHECK(pprof_encode(p, &b) == 0);
	T_CHECK(b.len == sizeof(want) && memcmp(b.data, want, sizeof(want)) == 0);
	buf_free(&b);
	pprof_free(p);
}

/* ---- a minimal reader: the fields this writer writes ---- */

struct rd {
	const uint8_t *p, *end;
};

static uint64_t rd_varint(struct rd *r)
{
	uint64_t v = 0;

	for (unsigned shift = 0; r->p < r->end && shift < 64; shift += 7) {
		uint8_t c = *r->p++;

		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80))
			return v;
	}
	T_FAIL("a varint runs past its message");
}

/* The next field: its number, and its value (varint) or bytes (length-delimited, into *sub). */
static unsigned rd_field(struct rd *r, uint64_t *v, struct rd *sub)
{
	uint64_t key = rd_varint(r), len;

	*sub = (struct rd){ r->p, r->p }; /* empty unless the field has bytes */
	if ((key & 7) == 0) {
		*v = rd_varint(r);
	} else if ((key & 7) == 2) {
		len = rd_varint(r);
		if (len > (uint64_t)(r->end - r->p))
			T_FAIL("field %u's %llu bytes run past its message", (unsigned)(key >> 3), (unsigned long long)len);
		*sub = (struct rd){ r->p, r->p + len };
		r->p += len;
	} else {
		T_FAIL("wire type %u: this writer writes only varints and lengths", (unsigned)(key & 7));
	}
	return (unsigned)(key >> 3);
}

struct readback {
	char strs[32][32];
	size_t n_strs;
	uint64_t types[4][2], n_types;
	uint64_t fn[8][4], n_fns; /* id, name, system_name, filename */
	uint64_t loc[8][2], n_locs; /* id, function */
	uint64_t sample_ids[8][8], sample_vals[8][4], n_ids[8], n_vals[8], n_samples;
	uint64_t label[8][4][4], n_labels[8]; /* per sample: key, str, num, num_unit */
	uint64_t time, duration, period, period_type[2], comment;
};

static void read_profile(const struct buf *b, struct readback *o)
{
	struct rd r = { (const uint8_t *)b->data, (const uint8_t *)b->data + b->len }, s, t, u;
	uint64_t v = 0;

	memset(o, 0, sizeof(*o));
	while (r.p < r.end) {
		unsigned f = rd_field(&r, &v, &s);

		if (f == 6 && o->n_strs < 32) {
			T_CHECK(s.end - s.p < 32);
			memcpy(o->strs[o->n_strs++], s.p, (size_t)(s.end - s.p));
		} else if ((f == 1 || f == 11) && o->n_types < 4) {
			uint64_t *tu = f == 1 ? o->types[o->n_types++] : o->period_type;

			while (s.p < s.end) {
				unsigned g = rd_field(&s, &v, &t);

				tu[g - 1] = v;
			}
		} else if (f == 5 && o->n_fns < 8) {
			while (s.p < s.end) {
				unsigned g = rd_field(&s, &v, &t);

				T_CHECK(g >= 1 && g <= 4);
				o->fn[o->n_fns][g - 1] = v;
			}
			o->n_fns++;
		} else if (f == 4 && o->n_locs < 8) {
			while (s.p < s.end) {
				unsigned g = rd_field(&s, &v, &t);

				if (g == 1)
					o->loc[o->n_locs][0] = v;
				while (g == 4 && t.p < t.end) /* the Line */
					if (rd_field(&t, &v, &u) == 1)
						o->loc[o->n_locs][1] = v;
			}
			o->n_locs++;
		} else if (f == 2 && o->n_samples < 8) {
			size_t k = o->n_samples++;

			while (s.p < s.end) {
				unsigned g = rd_field(&s, &v, &t);

				while (g == 1 && t.p < t.end && o->n_ids[k] < 8)
					o->sample_ids[k][o->n_ids[k]++] = rd_varint(&t);
				while (g == 2 && t.p < t.end && o->n_vals[k] < 4)
					o->sample_vals[k][o->n_vals[k]++] = rd_varint(&t);
				if (g == 3 && o->n_labels[k] < 4) {
					uint64_t *l = o->label[k][o->n_labels[k]++];

					while (t.p < t.end) {
						unsigned h = rd_field(&t, &v, &u);

						T_CHECK(h >= 1 && h <= 4);
						l[h - 1] = v;
					}
				}
			}
		} else if (f == 9) {
			o->time = v;
		} else if (f == 10) {
			o->duration = v;
		} else if (f == 12) {
			o->period = v;
		} else if (f == 13) {
			o->comment = v;
		}
	}
}

static struct pprof *small_profile(void)
{
	struct pprof *p = pprof_new();
	uint64_t spin, main_, stack[3];
	int64_t v1[2] = { 3, 3000000 }, v2[2] = { 1, 1000000 };
	struct pprof_label labels[2] = { { "thread", "Thread (0x2A)", 0, NULL }, { "bytes", NULL, 512, "bytes" } };

	pprof_sample_type(p, "samples", "count");
	pprof_sample_type(p, "cpu", "nanoseconds");
	pprof_period(p, "cpu", "nanoseconds", 1000000);
	pprof_time(p, 1700000000000000000ll, 2000000000ll);
	pprof_comment(p, "CPU, pid 7");
	spin = pprof_function(p, "Program.Spin", "Program.Spin", "console.dll");
	main_ = pprof_function(p, "Program.Main", "Program.Main", "console.dll");
	T_CHECK(pprof_function(p, "Program.Spin", "Program.Spin", "console.dll") == spin); /* kept once */
	T_CHECK(spin == 1 && main_ == 2);
	stack[0] = pprof_location(p, spin);
	stack[1] = pprof_location(p, main_);
	T_CHECK(pprof_location(p, spin) == stack[0]);
	pprof_sample(p, stack, 2, v1, labels, 2); /* leaf first */
	stack[0] = stack[1];
	pprof_sample(p, stack, 1, v2, NULL, 0);
	T_CHECK(pprof_samples(p) == 2);
	return p;
}

static void read_back(void)
{
	struct pprof *p = small_profile();
	struct readback o;
	struct buf b;

	buf_init(&b, 0);
	T_CHECK(pprof_encode(p, &b) == 0);
	read_profile(&b, &o);
	/* the string table: "" first, each string once */
	T_CHECK(o.n_strs == 12); /* 9, and the labels' "thread", "Thread (0x2A)", "bytes" */
	T_STREQ(o.strs[0], "");
	T_STREQ(o.strs[o.types[0][0]], "samples");
	T_STREQ(o.strs[o.types[0][1]], "count");
	T_STREQ(o.strs[o.types[1][0]], "cpu");
	T_STREQ(o.strs[o.types[1][1]], "nanoseconds");
	T_CHECK(o.n_types == 2 && o.period == 1000000 && o.period_type[0] == o.types[1][0]);
	T_CHECK(o.time == 1700000000000000000ull && o.duration == 2000000000ull);
	T_STREQ(o.strs[o.comment], "CPU, pid 7");
	T_CHECK(o.n_fns == 2 && o.fn[0][0] == 1 && o.fn[1][0] == 2);
	T_STREQ(o.strs[o.fn[0][1]], "Program.Spin");
	T_STREQ(o.strs[o.fn[0][2]], "Program.Spin");
	T_STREQ(o.strs[o.fn[0][3]], "console.dll");
	T_STREQ(o.strs[o.fn[1][1]], "Program.Main");
	T_CHECK(o.n_locs == 2 && o.loc[0][0] == 1 && o.loc[0][1] == 1 && o.loc[1][0] == 2 && o.loc[1][1] == 2);
	T_CHECK(o.n_samples == 2);
	T_CHECK(o.n_ids[0] == 2 && o.sample_ids[0][0] == 1 && o.sample_ids[0][1] == 2);
	T_CHECK(o.n_vals[0] == 2 && o.sample_vals[0][0] == 3 && o.sample_vals[0][1] == 3000000);
	T_CHECK(o.n_ids[1] == 1 && o.sample_ids[1][0] == 2 && o.sample_vals[1][1] == 1000000);
	/* labels: a string, and a number with its unit; none on the second sample */
	T_CHECK(o.n_labels[0] == 2 && o.n_labels[1] == 0);
	T_STREQ(o.strs[o.label[0][0][0]], "thread");
	T_STREQ(o.strs[o.label[0][0][1]], "Thread (0x2A)");
	T_STREQ(o.strs[o.label[0][1][0]], "bytes");
	T_CHECK(o.label[0][1][1] == 0 && o.label[0][1][2] == 512);
	T_STREQ(o.strs[o.label[0][1][3]], "bytes");
	buf_free(&b);
	pprof_free(p);
}

/* The .pb.gz is gzip (its magic) and inflates to the encoded profile. */
static void gzip_whole(void)
{
	struct pprof *p = small_profile();
	struct buf raw, gz;
	struct err_msg em;
	uint8_t back[4096];
	z_stream z;

	buf_init(&raw, 0);
	buf_init(&gz, 0);
	T_CHECK(pprof_encode(p, &raw) == 0);
	T_CHECK(pprof_write(p, &gz, &em) == 0);
	T_CHECK(gz.len > 18 && (uint8_t)gz.data[0] == 0x1f && (uint8_t)gz.data[1] == 0x8b);
	memset(&z, 0, sizeof(z));
	T_CHECK(inflateInit2(&z, 15 + 16) == Z_OK);
	z.next_in = (Bytef *)gz.data;
	z.avail_in = (uInt)gz.len;
	z.next_out = back;
	z.avail_out = sizeof(back);
	T_CHECK(inflate(&z, Z_FINISH) == Z_STREAM_END);
	T_CHECK(z.total_out == raw.len && memcmp(back, raw.data, raw.len) == 0);
	inflateEnd(&z);
	/* a cap too small for it: DP_ETOOBIG, nothing appended */
	buf_free(&gz);
	buf_init(&gz, 8);
	T_CHECK(pprof_write(p, &gz, &em) == DP_ETOOBIG && gz.len == 0);
	buf_free(&raw);
	buf_free(&gz);
	pprof_free(p);
}

int main(void)
{
	t_file_name = "test_pprof";
	T_RUN(varint_edges);
	T_RUN(tiny_bytes);
	T_RUN(read_back);
	T_RUN(gzip_whole);
	return t_failed_cases ? 1 : 0;
}
