/*
 * test_evpayload.c - payloads read by their field list (eventpipe/evpayload.h),
 * arrays in particular: arrays of structs (DiagnosticSource's Arguments, an
 * array of {Key, Value}), of strings and of numbers come out flat after the
 * array's value, each element's values marked with its index; lookups by name
 * see only what is outside arrays; the value cap holds with elements counted,
 * and a payload that ends inside an element is an error. The payloads are
 * built here byte by byte, as the runtime lays them out.
 */
#include <stdlib.h>

#include "buf.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "t.h"

/* Payload bytes as the runtime writes them. */
static void u16(struct buf *b, uint16_t v)
{
	buf_append(b, &v, 2);
}

static void i32(struct buf *b, int32_t v)
{
	buf_append(b, &v, 4);
}

/* A string as UTF-16LE with its NUL unit (ASCII only here, plus one é). */
static void str(struct buf *b, const char *s)
{
	for (; *s; s++) {
		if ((unsigned char)s[0] == 0xC3 && (unsigned char)s[1] == 0xA9) {
			u16(b, 0xE9);
			s++;
			continue;
		}
		u16(b, (uint8_t)*s);
	}
	u16(b, 0);
}

static int decode(struct evpayload *p, const struct nettrace_field *f, size_t nf, const struct buf *b,
		  struct err_msg *em)
{
	struct nettrace_meta m = { .provider = "P", .name = "E", .fields = f, .n_fields = nf };
	struct nettrace_event e = { .meta = &m, .payload = (const uint8_t *)b->data, .payload_len = b->len };

	return evpayload_decode(p, &e, em);
}

/* DiagnosticSource's Activity1Start: SourceName, EventName, Arguments (array of {Key, Value}), then one more. */
static const struct nettrace_field ds_fields[] = {
	{ "SourceName", NT_STRING, 0, 0 },
	{ "EventName", NT_STRING, 0, 0 },
	{ "Arguments", NT_ARRAY, NT_OBJECT, 2 },
	{ "Key", NT_STRING, 0, 0 },
	{ "Value", NT_STRING, 0, 0 },
	{ "After", NT_INT32, 0, 0 },
};

static void structs(void)
{
	struct evpayload p = { 0 };
	struct err_msg em;
	struct buf b;

	buf_init(&b, 0);
	str(&b, "Microsoft.AspNetCore");
	str(&b, "Microsoft.AspNetCore.Hosting.HttpRequestIn.Start");
	u16(&b, 3);
	str(&b, "ActivityId");
	str(&b, "00-abc-def-00");
	str(&b, "Path");
	str(&b, "/caf\xc3\xa9");
	str(&b, "StatusCode");
	str(&b, "404");
	i32(&b, 7);
	T_CHECK(decode(&p, ds_fields, 6, &b, &em) == 0);
	T_CHECK(p.n == 3 + 6 + 1);
	T_CHECK(p.v[2].type == NT_ARRAY && p.v[2].i == 3 && p.v[2].depth == 0 && p.v[2].index == -1);
	for (int k = 0; k < 3; k++) {
		const struct evvalue *key = &p.v[3 + 2 * k], *val = &p.v[4 + 2 * k];

		T_CHECK(key->depth == 1 && val->depth == 1 && key->index == k && val->index == k);
		T_STREQ(key->name, "Key");
		T_STREQ(val->name, "Value");
	}
	T_STREQ(p.v[3].s, "ActivityId");
	T_STREQ(p.v[4].s, "00-abc-def-00");
	T_STREQ(p.v[6].s, "/caf\xc3\xa9");
	T_CHECK(p.v[8].d == 404); /* strings are read as numbers too */
	T_CHECK(p.v[9].depth == 0 && p.v[9].index == -1 && p.v[9].i == 7);
	/* lookups by name: outside the array only */
	T_CHECK(evpayload_get(&p, "Key") == NULL);
	T_CHECK(evpayload_int(&p, "After", 0, 100, -1) == 7);
	T_STREQ(evpayload_str(&p, "SourceName"), "Microsoft.AspNetCore");
	T_CHECK(evpayload_num(&p, "Arguments", -1) == -1);
	evpayload_free(&p);
	buf_free(&b);
}

static void scalars(void)
{
	const struct nettrace_field f[] = {
		{ "Names", NT_ARRAY, NT_STRING, 0 },
		{ "Sizes", NT_ARRAY, NT_INT32, 0 },
		{ "Empty", NT_ARRAY, NT_INT32, 0 },
		{ "Tail", NT_STRING, 0, 0 },
	};
	struct evpayload p = { 0 };
	struct err_msg em;
	struct buf b;

	buf_init(&b, 0);
	u16(&b, 2);
	str(&b, "a");
	str(&b, "bc");
	u16(&b, 3);
	i32(&b, -1);
	i32(&b, 0);
	i32(&b, 65536);
	u16(&b, 0);
	str(&b, "top");
	T_CHECK(decode(&p, f, 4, &b, &em) == 0);
	T_CHECK(p.n == 1 + 2 + 1 + 3 + 1 + 1);
	T_CHECK(p.v[0].i == 2 && p.v[1].index == 0 && p.v[2].index == 1 && p.v[1].depth == 1);
	T_STREQ(p.v[1].name, "Names");
	T_STREQ(p.v[2].s, "bc");
	T_CHECK(p.v[3].i == 3 && p.v[4].i == -1 && p.v[5].i == 0 && p.v[6].i == 65536 && p.v[6].index == 2);
	T_CHECK(p.v[7].type == NT_ARRAY && p.v[7].i == 0);
	T_CHECK(p.v[8].depth == 0 && p.v[8].index == -1);
	T_STREQ(evpayload_str(&p, "Tail"), "top");
	T_CHECK(evpayload_get(&p, "Names") == &p.v[0]); /* the array, not an element named after it */
	evpayload_free(&p);
	buf_free(&b);
}

/* An element that is a struct holding an object and an array: depths and indexes nest. */
static void nested(void)
{
	const struct nettrace_field f[] = {
		{ "Outer", NT_ARRAY, NT_OBJECT, 5 },
		{ "Id", NT_INT32, 0, 0 },
		{ "Inner", NT_OBJECT, 0, 1 },
		{ "X", NT_INT32, 0, 0 },
		{ "Tags", NT_ARRAY, NT_STRING, 0 },
		{ "Last", NT_INT32, 0, 0 },
	};
	struct evpayload p = { 0 };
	struct err_msg em;
	struct buf b;

	buf_init(&b, 0);
	u16(&b, 2);
	for (int k = 0; k < 2; k++) {
		i32(&b, 10 + k);
		i32(&b, 20 + k);
		u16(&b, 1);
		str(&b, k ? "t1" : "t0");
		i32(&b, 30 + k);
	}
	T_CHECK(decode(&p, f, 6, &b, &em) == 0);
	/* Outer, then per element: Id, Inner, X, Tags, Tags[0], Last */
	T_CHECK(p.n == 1 + 2 * 6);
	for (int k = 0; k < 2; k++) {
		const struct evvalue *v = &p.v[1 + 6 * k];

		T_CHECK(v[0].i == 10 + k && v[0].depth == 1 && v[0].index == k);
		T_CHECK(v[1].type == NT_OBJECT && v[1].depth == 1 && v[1].index == k);
		T_CHECK(v[2].i == 20 + k && v[2].depth == 2 && v[2].index == k);
		T_CHECK(v[3].type == NT_ARRAY && v[3].i == 1 && v[3].depth == 1);
		T_CHECK(v[4].depth == 2 && v[4].index == 0); /* the innermost array's element */
		T_STREQ(v[4].s, k ? "t1" : "t0");
		T_CHECK(v[5].i == 30 + k && v[5].index == k);
	}
	evpayload_free(&p);
	buf_free(&b);
}

/* At most EVPAYLOAD_MAX_VALUES values, elements counted: one past is DP_ETOOBIG, and nothing is kept. */
static void cap(void)
{
	const struct nettrace_field f[] = { { "A", NT_ARRAY, NT_INT32, 0 } };
	struct evpayload p = { 0 };
	struct err_msg em;
	struct buf b;

	buf_init(&b, 0);
	u16(&b, EVPAYLOAD_MAX_VALUES - 1);
	for (int k = 0; k < EVPAYLOAD_MAX_VALUES - 1; k++)
		i32(&b, k);
	T_CHECK(decode(&p, f, 1, &b, &em) == 0);
	T_CHECK(p.n == EVPAYLOAD_MAX_VALUES && p.v[EVPAYLOAD_MAX_VALUES - 1].i == EVPAYLOAD_MAX_VALUES - 2);
	buf_reset(&b);
	u16(&b, 60000);
	for (int k = 0; k < 60000; k++)
		i32(&b, k);
	T_CHECK(decode(&p, f, 1, &b, &em) == DP_ETOOBIG);
	T_CHECK(p.n == 0);
	T_CHECK(strstr(em.text, "more than 128 values") != NULL);
	/* structs: Arguments with 63 pairs is 3 + 126 values, past the cap */
	buf_reset(&b);
	str(&b, "s");
	str(&b, "e");
	u16(&b, 63);
	for (int k = 0; k < 63; k++) {
		str(&b, "k");
		str(&b, "v");
	}
	i32(&b, 1);
	T_CHECK(decode(&p, ds_fields, 6, &b, &em) == DP_ETOOBIG);
	evpayload_free(&p);
	buf_free(&b);
}

/* Elements that the payload does not hold, and element types this reader does not know. */
static void bad(void)
{
	const struct nettrace_field nest[] = { { "A", NT_ARRAY, NT_ARRAY, 0 } };
	const struct nettrace_field empty[] = { { "A", NT_ARRAY, NT_OBJECT, 0 }, { "B", NT_INT32, 0, 0 } };
	struct evpayload p = { 0 };
	struct err_msg em;
	struct buf b;

	buf_init(&b, 0);
	str(&b, "s");
	str(&b, "e");
	u16(&b, 2);
	str(&b, "k");
	str(&b, "v");
	str(&b, "k2"); /* the second element's Value is missing */
	T_CHECK(decode(&p, ds_fields, 6, &b, &em) == DP_ESYNTAX);
	T_CHECK(p.n == 0);
	buf_reset(&b);
	u16(&b, 1); /* the count's second byte missing */
	b.len = 1;
	T_CHECK(decode(&p, ds_fields + 2, 4, &b, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "ends inside a field") != NULL);
	buf_reset(&b);
	u16(&b, 1);
	u16(&b, 1);
	T_CHECK(decode(&p, nest, 1, &b, &em) == DP_ESYNTAX);
	T_CHECK(strstr(em.text, "unknown type") != NULL);
	/* 65535 elements with no members: read at once, one value */
	buf_reset(&b);
	u16(&b, 65535);
	i32(&b, 5);
	T_CHECK(decode(&p, empty, 2, &b, &em) == 0);
	T_CHECK(p.n == 2 && p.v[0].i == 65535 && p.v[1].i == 5);
	evpayload_free(&p);
	buf_free(&b);
}

int main(void)
{
	t_file_name = "evpayload";
	T_RUN(structs);
	T_RUN(scalars);
	T_RUN(nested);
	T_RUN(cap);
	T_RUN(bad);
	return t_failed_cases ? 1 : 0;
}
