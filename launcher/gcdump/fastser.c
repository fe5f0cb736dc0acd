/*
 * fastser.c - FastSerialization's writing (fastser.h): the integers, the
 * strings (UTF-16 lengths, each unit as UTF-8), the object framing.
 */
#include "fastser.h"

void fastser_bytes(struct fastser *o, const void *p, size_t n)
{
	if (o->rc == 0)
		o->rc = buf_append(o->b, p, n);
}

void fastser_u8(struct fastser *o, uint8_t v)
{
	fastser_bytes(o, &v, 1);
}

void fastser_le(struct fastser *o, uint64_t v, int n)
{
	uint8_t b[8];

	for (int i = 0; i < n; i++)
		b[i] = (uint8_t)(v >> (8 * i));
	fastser_bytes(o, b, (size_t)n);
}

uint32_t fastser_label(const struct fastser *o)
{
	return (uint32_t)(o->b->len - o->base);
}

/* A UTF-8 sequence's code point and length (a stray byte is itself). */
static uint32_t utf8_next(const uint8_t *s, size_t *len)
{
	int n = s[0] >= 0xF0 && s[0] < 0xF8 ? 4 : s[0] >= 0xE0 ? 3 : s[0] >= 0xC0 ? 2 : 1;
	uint32_t cp = n == 1 ? s[0] : s[0] & (0x3F >> (n - 1));

	for (int i = 1; i < n; i++) {
		if ((s[i] & 0xC0) != 0x80) {
			*len = 1;
			return s[0];
		}
		cp = cp << 6 | (s[i] & 0x3F);
	}
	*len = (size_t)n;
	return cp;
}

/* A string: its UTF-16 length, then each UTF-16 unit as UTF-8 (as IOStreamStreamWriter); NULL as -1. */
void fastser_string(struct fastser *o, const char *s)
{
	const uint8_t *u = (const uint8_t *)s;
	size_t units = 0, n;

	if (s == NULL) {
		fastser_le(o, 0xFFFFFFFFu, 4);
		return;
	}
	for (size_t i = 0; u[i]; i += n)
		units += utf8_next(u + i, &n) >= 0x10000 ? 2 : 1;
	fastser_le(o, units, 4);
	for (size_t i = 0; u[i]; i += n) {
		uint32_t cp = utf8_next(u + i, &n), unit[2] = { cp, 0 };
		int k = 1;

		if (cp >= 0x10000) {
			unit[0] = 0xD800 + ((cp - 0x10000) >> 10);
			unit[1] = 0xDC00 + ((cp - 0x10000) & 0x3FF);
			k = 2;
		}
		for (int j = 0; j < k; j++) {
			uint32_t c = unit[j];

			if (c < 0x80) {
				fastser_u8(o, (uint8_t)c);
			} else if (c < 0x800) {
				fastser_u8(o, (uint8_t)(0xC0 | (c >> 6)));
				fastser_u8(o, (uint8_t)(0x80 | (c & 0x3F)));
			} else {
				fastser_u8(o, (uint8_t)(0xE0 | ((c >> 12) & 0xF)));
				fastser_u8(o, (uint8_t)(0x80 | ((c >> 6) & 0x3F)));
				fastser_u8(o, (uint8_t)(0x80 | (c & 0x3F)));
			}
		}
	}
}

/* BeginObject, then its SerializationType (itself an object, of the null type) */
void fastser_object(struct fastser *o, const char *type, int version, int min_reader)
{
	fastser_u8(o, FASTSER_BEGIN);
	fastser_u8(o, FASTSER_BEGIN);
	fastser_u8(o, FASTSER_NULL);
	fastser_le(o, (uint32_t)version, 4);
	fastser_le(o, (uint32_t)min_reader, 4);
	fastser_string(o, type);
	fastser_u8(o, FASTSER_END);
}
