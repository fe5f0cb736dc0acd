/*
 * fastser.h - writing FastSerialization, the object format of .gcdump files
 * (microsoft/perfview src/FastSerialization, as dotnet-gcdump's
 * GCHeapDump.Write uses it: 4-byte stream labels). Integers little-endian;
 * a string is its length in UTF-16 units (-1 for null) and each unit as
 * UTF-8 (as IOStreamStreamWriter.Write(string)); an object is BeginObject,
 * its SerializationType (itself an object of the null type: version,
 * minimum reader version, full name), its fields, EndObject. A label is an
 * offset from the stream's start. The first failure (a buffer cap) sticks in
 * rc; later writes do nothing.
 */
#ifndef DP_FASTSER_H
#define DP_FASTSER_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"

enum { FASTSER_NULL = 1, FASTSER_BEGIN = 4, FASTSER_END = 6, FASTSER_BYTE = 8, FASTSER_SKIP = 12, FASTSER_STRING = 13 };

struct fastser {
	struct buf *b;
	size_t base; /* where the stream starts in b */
	int rc;      /* 0, or the first append's DP_ETOOBIG */
};

void fastser_bytes(struct fastser *o, const void *p, size_t n);
void fastser_u8(struct fastser *o, uint8_t v);
void fastser_le(struct fastser *o, uint64_t v, int n); /* n bytes, little-endian */
uint32_t fastser_label(const struct fastser *o);       /* the next byte's offset */
void fastser_string(struct fastser *o, const char *s); /* UTF-8 in; NULL writes null */
/* BeginObject and the object's SerializationType; its fields and FASTSER_END follow. */
void fastser_object(struct fastser *o, const char *type, int version, int min_reader);

#endif
