/*
 * evpayload.c - payloads read by their field list (evpayload.h).
 *
 * Sizes on the wire are TraceEvent's for EventPipe's self-describing events:
 * Boolean is 4 bytes (a Win32 BOOL), Char is one UTF-16 unit, DateTime an
 * 8-byte FILETIME, strings UTF-16LE ending with a NUL unit, and an array a
 * u16 element count followed by its elements (an object's members back to
 * back, no count or size of their own).
 */
#include "evpayload.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define MAX_DEPTH 8

struct dec {
	struct evpayload *p;
	const uint8_t *at, *end;
	size_t text_len;
	size_t *str_off; /* per value: offset of its string in p->text, or SIZE_MAX */
	const char *why;
};

static bool take(struct dec *d, void *out, size_t n)
{
	if ((size_t)(d->end - d->at) < n) {
		d->why = "the payload ends inside a field";
		return false;
	}
	if (out)
		memcpy(out, d->at, n);
	d->at += n;
	return true;
}

/* A NUL-terminated UTF-16LE string into the text buffer as UTF-8; its offset. */
static bool string(struct dec *d, size_t *off)
{
	struct evpayload *p = d->p;

	*off = d->text_len;
	for (;;) {
		uint16_t u, lo;
		uint32_t c;
		char *o;

		if (!take(d, &u, 2)) {
			d->why = "a string without its end";
			return false;
		}
		if (u == 0)
			break;
		c = u;
		if (u >= 0xD800 && u < 0xDC00 && d->end - d->at >= 2 && (memcpy(&lo, d->at, 2), lo >= 0xDC00 && lo < 0xE000)) {
			d->at += 2;
			c = 0x10000 + ((uint32_t)(u - 0xD800) << 10) + (lo - 0xDC00);
		} else if (u >= 0xD800 && u < 0xE000) {
			c = 0xFFFD; /* a lone surrogate */
		}
		MEM_GROW(p->text, p->text_cap, d->text_len + 5, 256);
		o = p->text + d->text_len;
		if (c < 0x80) {
			o[0] = (char)c;
			d->text_len += 1;
		} else if (c < 0x800) {
			o[0] = (char)(0xC0 | (c >> 6));
			o[1] = (char)(0x80 | (c & 0x3F));
			d->text_len += 2;
		} else if (c < 0x10000) {
			o[0] = (char)(0xE0 | (c >> 12));
			o[1] = (char)(0x80 | ((c >> 6) & 0x3F));
			o[2] = (char)(0x80 | (c & 0x3F));
			d->text_len += 3;
		} else {
			o[0] = (char)(0xF0 | (c >> 18));
			o[1] = (char)(0x80 | ((c >> 12) & 0x3F));
			o[2] = (char)(0x80 | ((c >> 6) & 0x3F));
			o[3] = (char)(0x80 | (c & 0x3F));
			d->text_len += 4;
		}
	}
	MEM_GROW(p->text, p->text_cap, d->text_len + 1, 256);
	p->text[d->text_len++] = '\0';
	return true;
}

static bool text(struct dec *d, size_t *off, const char *s)
{
	size_t n = strlen(s) + 1;

	MEM_GROW(d->p->text, d->p->text_cap, d->text_len + n, 256);
	*off = d->text_len;
	memcpy(d->p->text + d->text_len, s, n);
	d->text_len += n;
	return true;
}

/* One value of type t into v; *off: its text's offset in p->text, or SIZE_MAX. */
static bool scalar(struct dec *d, uint32_t t, struct evvalue *v, size_t *off)
{
	union {
		uint8_t b[16];
		int16_t i16;
		uint16_t u16;
		int32_t i32;
		uint32_t u32;
		int64_t i64;
		uint64_t u64;
		float f;
		double dbl;
	} x;

	*off = SIZE_MAX;
	switch (t) {
	case NT_BOOLEAN:
	case NT_INT32:
		if (!take(d, &x.i32, 4))
			return false;
		v->i = x.i32;
		break;
	case NT_UINT32:
		if (!take(d, &x.u32, 4))
			return false;
		v->i = x.u32;
		break;
	case NT_CHAR:
	case NT_UINT16:
		if (!take(d, &x.u16, 2))
			return false;
		v->i = x.u16;
		break;
	case NT_INT16:
		if (!take(d, &x.i16, 2))
			return false;
		v->i = x.i16;
		break;
	case NT_SBYTE:
		if (!take(d, x.b, 1))
			return false;
		v->i = x.b[0] >= 0x80 ? (int64_t)x.b[0] - 256 : (int64_t)x.b[0]; /* two's complement */
		break;
	case NT_BYTE:
		if (!take(d, x.b, 1))
			return false;
		v->i = x.b[0];
		break;
	case NT_INT64:
	case NT_DATETIME:
		if (!take(d, &x.i64, 8))
			return false;
		v->i = x.i64;
		break;
	case NT_UINT64:
		if (!take(d, &x.u64, 8))
			return false;
		v->i = (int64_t)x.u64;
		v->d = (double)x.u64;
		return true;
	case NT_SINGLE:
		if (!take(d, &x.f, 4))
			return false;
		v->d = x.f;
		v->i = 0;
		return true;
	case NT_DOUBLE:
		if (!take(d, &x.dbl, 8))
			return false;
		v->d = x.dbl;
		v->i = 0;
		return true;
	case NT_DECIMAL:
		return take(d, NULL, 16);
	case NT_GUID: {
		char g[40];

		if (!take(d, x.b, 16))
			return false;
		snprintf(g, sizeof(g), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", x.b[3],
			 x.b[2], x.b[1], x.b[0], x.b[5], x.b[4], x.b[7], x.b[6], x.b[8], x.b[9], x.b[10], x.b[11], x.b[12],
			 x.b[13], x.b[14], x.b[15]);
		return text(d, off, g);
	}
	case NT_STRING:
		return string(d, off);
	default:
		d->why = "a field of an unknown type";
		return false;
	}
	v->d = (double)v->i;
	return true;
}

/* The next value, or false at the cap (why NULL: DP_ETOOBIG). */
static bool add(struct dec *d, const char *name, uint32_t type, int depth, int32_t index, size_t *idx)
{
	if (d->p->n == EVPAYLOAD_MAX_VALUES) {
		d->why = NULL;
		return false;
	}
	*idx = d->p->n++;
	d->p->v[*idx] = (struct evvalue){ .name = name, .type = type, .depth = depth, .index = index };
	d->str_off[*idx] = SIZE_MAX;
	return true;
}

static bool fields(struct dec *d, const struct nettrace_field *f, size_t n, int depth, int32_t index);

/* An array's elements (its value at idx, f its field): the count, then each element at depth + 1. */
static bool array(struct dec *d, const struct nettrace_field *f, size_t idx, int depth)
{
	uint16_t count;

	if (!take(d, &count, 2))
		return false;
	d->p->v[idx].i = count;
	d->p->v[idx].d = count;
	for (uint16_t k = 0; k < count; k++) {
		size_t e;

		if (f->elem_type == NT_OBJECT) {
			if (!fields(d, f + 1, f->n_fields, depth + 1, k))
				return false;
		} else if (!add(d, f->name, f->elem_type, depth + 1, k, &e) ||
			   !scalar(d, f->elem_type, &d->p->v[e], &d->str_off[e])) {
			return false;
		}
	}
	return true;
}

/*
 * The fields f[0..n) (pre-order; an object's n_fields descendants follow it)
 * at depth, inside array element index (-1: none).
 */
static bool fields(struct dec *d, const struct nettrace_field *f, size_t n, int depth, int32_t index)
{
	if (depth > MAX_DEPTH) {
		d->why = "fields nested too deep";
		return false;
	}
	for (size_t i = 0; i < n; i += 1 + (f[i].type == NT_OBJECT || f[i].type == NT_ARRAY ? f[i].n_fields : 0)) {
		size_t idx;

		if (f[i].n_fields > n - i - 1) {
			d->why = "a field list that does not nest";
			return false;
		}
		if (!add(d, f[i].name, f[i].type, depth, index, &idx))
			return false;
		if (f[i].type == NT_OBJECT) {
			if (!fields(d, f + i + 1, f[i].n_fields, depth + 1, index))
				return false;
		} else if (f[i].type == NT_ARRAY) {
			if (!array(d, &f[i], idx, depth))
				return false;
		} else if (!scalar(d, f[i].type, &d->p->v[idx], &d->str_off[idx])) {
			return false;
		}
	}
	return true;
}

int evpayload_decode(struct evpayload *p, const struct nettrace_event *e, struct err_msg *em)
{
	size_t offs[EVPAYLOAD_MAX_VALUES];
	struct dec d = { .p = p, .at = e->payload, .end = e->payload + e->payload_len, .str_off = offs };
	const struct nettrace_meta *m = e->meta;

	p->n = 0;
	if (m->n_fields == 0)
		return 0;
	if (!fields(&d, m->fields, m->n_fields, 0, -1)) {
		p->n = 0;
		if (d.why == NULL)
			return err_set(em, DP_ETOOBIG, "event %s/%s has more than %d values (fields and array elements)",
				       m->provider, m->name, EVPAYLOAD_MAX_VALUES);
		return err_set(em, DP_ESYNTAX, "event %s/%s: %s (payload of %zu bytes)", m->provider, m->name, d.why,
			       e->payload_len);
	}
	for (size_t i = 0; i < p->n; i++) {
		p->v[i].s = offs[i] == SIZE_MAX ? NULL : p->text + offs[i];
		if (p->v[i].s && p->v[i].type == NT_STRING) {
			char *end;
			double x = strtod(p->v[i].s, &end);

			p->v[i].d = end != p->v[i].s && *end == '\0' ? x : NAN;
		}
	}
	return 0;
}

const struct evvalue *evpayload_get(const struct evpayload *p, const char *name)
{
	for (size_t i = 0; i < p->n; i++)
		if (p->v[i].index < 0 && strcmp(p->v[i].name, name) == 0)
			return &p->v[i];
	return NULL;
}

const char *evpayload_str(const struct evpayload *p, const char *name)
{
	const struct evvalue *v = evpayload_get(p, name);

	return v && v->s ? v->s : "";
}

double evpayload_num(const struct evpayload *p, const char *name, double def)
{
	const struct evvalue *v = evpayload_get(p, name);

	if (v == NULL || v->type == NT_OBJECT || v->type == NT_ARRAY || isnan(v->d))
		return def;
	return v->d;
}

long long evpayload_int(const struct evpayload *p, const char *name, long long lo, long long hi, long long def)
{
	double d = evpayload_num(p, name, NAN);

	/* compared as doubles first: converting one outside the type's range is undefined */
	return isnan(d) || d < (double)lo || d > (double)hi || d >= 9223372036854775808.0 ? def : (long long)d;
}

void evpayload_free(struct evpayload *p)
{
	free(p->text);
	p->text = NULL;
	p->text_cap = 0;
	p->n = 0;
}
