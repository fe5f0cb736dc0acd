/*
 * utf8.c - validating UTF-8 and repairing it on the way into JSON (utf8.h).
 */
#include "utf8.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

/* The length of the valid sequence at s (at most n bytes left), or 0 when it is not one. */
static size_t seq_len(const unsigned char *s, size_t n)
{
	unsigned c = s[0];
	size_t len;
	unsigned cp;

	if (c < 0x80)
		return 1;
	if (c >= 0xC2 && c <= 0xDF)
		len = 2, cp = c & 0x1F;
	else if (c >= 0xE0 && c <= 0xEF)
		len = 3, cp = c & 0x0F;
	else if (c >= 0xF0 && c <= 0xF4)
		len = 4, cp = c & 0x07;
	else
		return 0;
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xC0) != 0x80)
			return 0;
		cp = (cp << 6) | (s[i] & 0x3F);
	}
	if ((len == 3 && cp < 0x800) || (len == 4 && (cp < 0x10000 || cp > 0x10FFFF)) ||
	    (cp >= 0xD800 && cp <= 0xDFFF))
		return 0;
	return len;
}

bool utf8_valid(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;

	for (size_t i = 0, k; i < n; i += k)
		if ((k = seq_len(p + i, n - i)) == 0)
			return false;
	return true;
}

json_t *utf8_json(const char *s, size_t n)
{
	const unsigned char *p = (const unsigned char *)s;
	char *fixed, *o;
	json_t *j;

	if (s == NULL)
		return json_string("");
	if (utf8_valid(s, n))
		return json_stringn(s, n);
	o = fixed = mem_alloc(n * 3 + 1); /* each bad byte becomes the 3 bytes of U+FFFD */
	for (size_t i = 0, k; i < n; i += k) {
		if ((k = seq_len(p + i, n - i)) == 0) {
			*o++ = '\xEF'; /* U+FFFD, bytes of text, not a C string */
			*o++ = '\xBF';
			*o++ = '\xBD';
			k = 1;
		} else {
			memcpy(o, p + i, k);
			o += k;
		}
	}
	j = json_stringn(fixed, (size_t)(o - fixed));
	free(fixed);
	return j;
}

json_t *utf8_json_str(const char *s)
{
	return utf8_json(s, s ? strlen(s) : 0);
}
