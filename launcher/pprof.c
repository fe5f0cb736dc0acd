/*
 * pprof.c - the pprof writer (pprof.h): profile.proto's messages encoded
 * by hand (a varint, a tag, a length-delimited field: the three things
 * protocol buffers need for this one message, not worth a code generator),
 * then gzip'd with zlib, which profile.proto asks for on disk and every
 * reader expects.
 *
 * Why here, at the top of launcher/ beside fsutil.c: CPU profiles
 * (launcher/profile/) and GC heap snapshots (launcher/gcdump/) both write
 * pprof, and they are peers in the agent's layers (docs/ARCHITECTURE.md),
 * so neither may include the other; common/ is for code two or more parts
 * share, and only the agent writes pprof. A leaf with no dependencies but
 * common/'s buf and hash table, it sits below every layer that includes it.
 *
 * Field numbers, from profile.proto: Profile: sample_type 1, sample 2,
 * location 4, function 5, string_table 6, time_nanos 9, duration_nanos 10,
 * period_type 11, period 12, comment 13, default_sample_type 14.
 * ValueType: type 1, unit 2. Sample: location_id 1, value 2 (packed, as
 * proto3 writes repeated numbers), label 3. Label: key 1, str 2, num 3,
 * num_unit 4. Location: id 1, line 4. Line: function_id 1. Function: id 1,
 * name 2, system_name 3, filename 4.
 * Samples are encoded as they come (the largest part, kept as bytes rather
 * than structs); the tables are encoded at the end.
 */
#include "pprof.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "htab.h"
#include "mem.h"

enum { F_SAMPLE_TYPE = 1, F_SAMPLE = 2, F_LOCATION = 4, F_FUNCTION = 5, F_STRING = 6, F_TIME = 9, F_DURATION = 10,
       F_PERIOD_TYPE = 11, F_PERIOD = 12, F_COMMENT = 13, F_DEFAULT_TYPE = 14 };
enum { WIRE_VARINT = 0, WIRE_LEN = 2 };
#define MAX_COMMENTS 8

struct str_slot {
	const char *s; /* the table's copy */
	size_t len;
	int64_t ix;
};

struct fn_slot {
	int64_t key[3]; /* name, system_name, filename */
	uint64_t id;
};

struct loc_slot {
	uint64_t fn, id;
};

struct pprof {
	char **strs;
	size_t n_strs, cap_strs;
	struct htab str_ix;
	int64_t (*fns)[3];
	size_t n_fns, cap_fns;
	struct htab fn_ix;
	uint64_t *loc_fn; /* location id i+1's function */
	size_t n_locs, cap_locs;
	struct htab loc_ix;
	int64_t types[PPROF_MAX_TYPES][2];
	size_t n_types;
	int64_t period_type[2], period, time_nanos, duration_nanos;
	int64_t comments[MAX_COMMENTS];
	size_t n_comments;
	struct buf samples; /* Profile.sample fields, encoded */
	uint64_t n_samples;
	struct buf msg, part; /* one sample's message, and one field of it */
};

size_t pprof_varint(uint8_t out[10], uint64_t v)
{
	size_t n = 0;

	while (v >= 0x80) {
		out[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	out[n++] = (uint8_t)v;
	return n;
}

static int put_varint(struct buf *b, uint64_t v)
{
	uint8_t tmp[10];

	return buf_append(b, tmp, pprof_varint(tmp, v));
}

static int put_tag(struct buf *b, unsigned field, unsigned wire)
{
	return put_varint(b, (uint64_t)field << 3 | wire);
}

/* A number field; proto3 leaves out a zero (the reader's default). int64s go as their two's complement. */
static int put_num(struct buf *b, unsigned field, uint64_t v)
{
	int rc = 0;

	if (v != 0 && (rc = put_tag(b, field, WIRE_VARINT)) == 0)
		rc = put_varint(b, v);
	return rc;
}

static int put_bytes(struct buf *b, unsigned field, const void *p, size_t n)
{
	int rc = put_tag(b, field, WIRE_LEN);

	if (rc == 0)
		rc = put_varint(b, n);
	if (rc == 0)
		rc = buf_append(b, p, n);
	return rc;
}

static bool str_eq(const void *slot, const void *key)
{
	const struct str_slot *s = slot;
	const struct str_slot *k = key;

	return s->len == k->len && memcmp(s->s, k->s, k->len) == 0;
}

static bool fn_eq(const void *slot, const void *key)
{
	return memcmp(((const struct fn_slot *)slot)->key, key, sizeof(int64_t[3])) == 0;
}

static bool loc_eq(const void *slot, const void *key)
{
	return ((const struct loc_slot *)slot)->fn == *(const uint64_t *)key;
}

struct pprof *pprof_new(void)
{
	struct pprof *p = mem_zalloc(sizeof(*p));

	htab_init(&p->str_ix, sizeof(struct str_slot));
	htab_init(&p->fn_ix, sizeof(struct fn_slot));
	htab_init(&p->loc_ix, sizeof(struct loc_slot));
	buf_init(&p->samples, 0);
	buf_init(&p->msg, 0);
	buf_init(&p->part, 0);
	pprof_string(p, ""); /* string_table[0] must be "" */
	return p;
}

void pprof_free(struct pprof *p)
{
	if (p == NULL)
		return;
	for (size_t i = 0; i < p->n_strs; i++)
		free(p->strs[i]);
	free(p->strs);
	free(p->fns);
	free(p->loc_fn);
	htab_free(&p->str_ix);
	htab_free(&p->fn_ix);
	htab_free(&p->loc_ix);
	buf_free(&p->samples);
	buf_free(&p->msg);
	buf_free(&p->part);
	free(p);
}

int64_t pprof_string(struct pprof *p, const char *s)
{
	struct str_slot key = { s ? s : "", strlen(s ? s : ""), 0 }, *slot;
	uint64_t h = htab_bytes(key.s, key.len);

	if ((slot = htab_find(&p->str_ix, h, str_eq, &key)) != NULL)
		return slot->ix;
	MEM_GROW(p->strs, p->cap_strs, p->n_strs + 1, 256);
	p->strs[p->n_strs] = mem_strndup(key.s, key.len);
	slot = htab_put(&p->str_ix, h);
	*slot = (struct str_slot){ p->strs[p->n_strs], key.len, (int64_t)p->n_strs };
	p->n_strs++;
	return slot->ix;
}

void pprof_sample_type(struct pprof *p, const char *type, const char *unit)
{
	if (p->n_types == PPROF_MAX_TYPES || p->n_samples)
		DP_FATAL("pprof: sample types are at most %d, all before the first sample", PPROF_MAX_TYPES);
	p->types[p->n_types][0] = pprof_string(p, type);
	p->types[p->n_types++][1] = pprof_string(p, unit);
}

void pprof_period(struct pprof *p, const char *type, const char *unit, int64_t period)
{
	p->period_type[0] = pprof_string(p, type);
	p->period_type[1] = pprof_string(p, unit);
	p->period = period;
}

void pprof_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos)
{
	p->time_nanos = time_nanos;
	p->duration_nanos = duration_nanos;
}

void pprof_comment(struct pprof *p, const char *text)
{
	if (p->n_comments < MAX_COMMENTS)
		p->comments[p->n_comments++] = pprof_string(p, text);
}

uint64_t pprof_function(struct pprof *p, const char *name, const char *system_name, const char *filename)
{
	int64_t key[3] = { pprof_string(p, name), pprof_string(p, system_name), pprof_string(p, filename) };
	uint64_t h = htab_bytes(key, sizeof(key));
	struct fn_slot *slot = htab_find(&p->fn_ix, h, fn_eq, key);

	if (slot)
		return slot->id;
	MEM_GROW(p->fns, p->cap_fns, p->n_fns + 1, 256);
	memcpy(p->fns[p->n_fns], key, sizeof(key));
	slot = htab_put(&p->fn_ix, h);
	memcpy(slot->key, key, sizeof(key));
	slot->id = ++p->n_fns;
	return slot->id;
}

uint64_t pprof_location(struct pprof *p, uint64_t fn)
{
	uint64_t h = htab_u64(fn);
	struct loc_slot *slot = htab_find(&p->loc_ix, h, loc_eq, &fn);

	if (fn == 0 || fn > p->n_fns)
		DP_FATAL("pprof: function id %llu was not given", (unsigned long long)fn);
	if (slot)
		return slot->id;
	MEM_GROW(p->loc_fn, p->cap_locs, p->n_locs + 1, 256);
	p->loc_fn[p->n_locs] = fn;
	slot = htab_put(&p->loc_ix, h);
	*slot = (struct loc_slot){ fn, ++p->n_locs };
	return slot->id;
}

void pprof_sample(struct pprof *p, const uint64_t *locations, size_t n, const int64_t *values,
		  const struct pprof_label *labels, size_t n_labels)
{
	struct buf *m = &p->msg, *f = &p->part;

	/* the Sample made whole, then appended with its length (the buffers have no cap: appends cannot fail) */
	buf_reset(m);
	buf_reset(f);
	for (size_t i = 0; i < n; i++) /* location_id, packed */
		put_varint(f, locations[i]);
	if (f->len)
		put_bytes(m, 1, f->data, f->len);
	buf_reset(f);
	for (size_t i = 0; i < p->n_types; i++) /* value, packed */
		put_varint(f, (uint64_t)values[i]);
	if (f->len)
		put_bytes(m, 2, f->data, f->len);
	for (size_t i = 0; i < n_labels; i++) { /* Label {key 1, str 2 | num 3, num_unit 4} */
		buf_reset(f);
		put_num(f, 1, (uint64_t)pprof_string(p, labels[i].key));
		if (labels[i].str) {
			put_num(f, 2, (uint64_t)pprof_string(p, labels[i].str));
		} else {
			put_num(f, 3, (uint64_t)labels[i].num);
			put_num(f, 4, (uint64_t)pprof_string(p, labels[i].num_unit));
		}
		put_bytes(m, 3, f->data, f->len);
	}
	put_bytes(&p->samples, F_SAMPLE, m->data, m->len);
	p->n_samples++;
}

uint64_t pprof_samples(const struct pprof *p)
{
	return p->n_samples;
}

/* A ValueType {type, unit} as field `field` of out. */
static int put_value_type(struct buf *out, unsigned field, const int64_t tu[2], struct buf *tmp)
{
	buf_reset(tmp);
	put_num(tmp, 1, (uint64_t)tu[0]);
	put_num(tmp, 2, (uint64_t)tu[1]);
	return put_bytes(out, field, tmp->data, tmp->len);
}

/* The tables and the profile's own fields, after the samples (a reader takes fields in any order). */
static int put_tables(const struct pprof *p, struct buf *out, struct buf *tmp, struct buf *line)
{
	int rc = 0;

	for (size_t i = 0; i < p->n_locs && rc == 0; i++) { /* Location {id, line: [Line {function_id}]} */
		buf_reset(line);
		put_num(line, 1, p->loc_fn[i]);
		buf_reset(tmp);
		put_num(tmp, 1, i + 1);
		put_bytes(tmp, 4, line->data, line->len);
		rc = put_bytes(out, F_LOCATION, tmp->data, tmp->len);
	}
	for (size_t i = 0; i < p->n_fns && rc == 0; i++) { /* Function {id, name, system_name, filename} */
		buf_reset(tmp);
		put_num(tmp, 1, i + 1);
		for (unsigned f = 0; f < 3; f++)
			put_num(tmp, 2 + f, (uint64_t)p->fns[i][f]);
		rc = put_bytes(out, F_FUNCTION, tmp->data, tmp->len);
	}
	for (size_t i = 0; i < p->n_strs && rc == 0; i++) /* every string, "" too: the table's indexes are positions */
		rc = put_bytes(out, F_STRING, p->strs[i], strlen(p->strs[i]));
	if (rc == 0)
		rc = put_num(out, F_TIME, (uint64_t)p->time_nanos);
	if (rc == 0)
		rc = put_num(out, F_DURATION, (uint64_t)p->duration_nanos);
	if (rc == 0 && p->period_type[0])
		rc = put_value_type(out, F_PERIOD_TYPE, p->period_type, tmp);
	if (rc == 0)
		rc = put_num(out, F_PERIOD, (uint64_t)p->period);
	for (size_t i = 0; i < p->n_comments && rc == 0; i++)
		rc = put_num(out, F_COMMENT, (uint64_t)p->comments[i]);
	/* the last type is what viewers show first: cpu/nanoseconds, inuse_space/bytes */
	if (rc == 0 && p->n_types)
		rc = put_num(out, F_DEFAULT_TYPE, (uint64_t)p->types[p->n_types - 1][0]);
	return rc;
}

int pprof_encode(const struct pprof *p, struct buf *out)
{
	struct buf tmp, line;
	size_t start = out->len;
	int rc = 0;

	buf_init(&tmp, 0);
	buf_init(&line, 0);
	for (size_t i = 0; i < p->n_types && rc == 0; i++)
		rc = put_value_type(out, F_SAMPLE_TYPE, p->types[i], &tmp);
	if (rc == 0 && p->samples.len)
		rc = buf_append(out, p->samples.data, p->samples.len);
	if (rc == 0)
		rc = put_tables(p, out, &tmp, &line);
	if (rc != 0) { /* nothing half written stays */
		out->len = start;
		if (out->data)
			out->data[start] = '\0';
	}
	buf_free(&tmp);
	buf_free(&line);
	return rc;
}

int pprof_write(const struct pprof *p, struct buf *out, struct err_msg *em)
{
	struct buf raw;
	z_stream z;
	size_t bound;
	int rc = 0, zrc;

	buf_init(&raw, 0);
	memset(&z, 0, sizeof(z));
	pprof_encode(p, &raw);
	if (raw.len > UINT32_MAX) { /* zlib counts a call's bytes in 32 bits; a profile that large was capped before */
		rc = err_set(em, DP_ETOOBIG, "the pprof profile (%zu bytes) passes 4 GiB", raw.len);
		goto out;
	}
	/* windowBits 15 + 16: a gzip wrapper (what profile.proto asks for), not zlib's */
	if (deflateInit2(&z, Z_DEFAULT_COMPRESSION, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		rc = err_set(em, DP_EINTERNAL, "zlib: deflateInit2 failed");
		goto out;
	}
	bound = deflateBound(&z, raw.len);
	if (bound > UINT32_MAX || (rc = buf_reserve(out, bound)) != 0) {
		rc = DP_ETOOBIG;
		err_set(em, rc, "the pprof file (up to %zu bytes) passes the limit of %zu", bound, out->cap);
		deflateEnd(&z);
		goto out;
	}
	z.next_in = (Bytef *)raw.data;
	z.avail_in = (uInt)raw.len;
	z.next_out = (Bytef *)out->data + out->len;
	z.avail_out = (uInt)bound;
	zrc = deflate(&z, Z_FINISH); /* the bound makes one call enough */
	if (zrc != Z_STREAM_END)
		rc = err_set(em, DP_EINTERNAL, "zlib: deflate ended with %d", zrc);
	else
		out->len += z.total_out;
	out->data[out->len] = '\0';
	deflateEnd(&z);
out:
	buf_free(&raw);
	return rc;
}
