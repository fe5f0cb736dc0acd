/*
 * aws_xml.c - the text of an element in an AWS XML answer, and an error
 * document's Code and Message (aws_xml.h). A bounded search for "<tag>"
 * and the next "</tag>", then entity decoding into a new string; nothing
 * reads past the length given, which need not be NUL-terminated.
 */
#include "aws_xml.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

#define MAX_TEXT ((size_t)64 << 10)
#define MAX_TAG 64

static const char *find(const char *x, size_t len, const char *needle, size_t nlen)
{
	if (nlen == 0 || len < nlen)
		return NULL;
	for (const char *p = x, *end = x + len - nlen; p <= end; p++) {
		p = memchr(p, needle[0], (size_t)(end - p) + 1);
		if (p == NULL)
			return NULL;
		if (memcmp(p, needle, nlen) == 0)
			return p;
	}
	return NULL;
}

/* One code point as UTF-8 onto b; 0, or -1 for one XML does not allow. */
static int put_ref(struct buf *b, unsigned long cp)
{
	if (cp == 0 || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
		return -1;
	return buf_put_utf8(b, (uint32_t)cp) == 0 ? 0 : -1;
}

/* Decode an entity at p (after '&') of at most n bytes; the bytes it took, or 0 when it is not one. */
static size_t entity(struct buf *b, const char *p, size_t n)
{
	static const struct {
		const char *name;
		char c;
	} named[] = { { "amp;", '&' }, { "lt;", '<' }, { "gt;", '>' }, { "quot;", '"' }, { "apos;", '\'' } };
	const char *semi = memchr(p, ';', n < 12 ? n : 12);
	unsigned long cp = 0;
	size_t i;

	if (semi == NULL)
		return 0;
	for (i = 0; i < sizeof(named) / sizeof(named[0]); i++) {
		size_t k = strlen(named[i].name);

		if ((size_t)(semi - p) + 1 == k && memcmp(p, named[i].name, k) == 0) {
			buf_putc(b, named[i].c);
			return k;
		}
	}
	if (*p != '#' || semi == p + 1)
		return 0;
	if (p[1] == 'x') {
		for (i = 2; p + i < semi; i++) {
			char c = p[i];
			int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
							: c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;

			if (v < 0 || i == 2 + 8)
				return 0;
			cp = cp * 16 + (unsigned long)v;
		}
	} else {
		for (i = 1; p + i < semi; i++) {
			if (p[i] < '0' || p[i] > '9' || i == 1 + 8)
				return 0;
			cp = cp * 10 + (unsigned long)(p[i] - '0');
		}
	}
	return put_ref(b, cp) == 0 ? (size_t)(semi - p) + 1 : 0;
}

char *aws_xml_text(const char *x, size_t len, const char *tag)
{
	char open[MAX_TAG + 3], close[MAX_TAG + 4];
	const char *a, *e;
	struct buf b;
	size_t tl = strlen(tag);

	if (x == NULL || tl == 0 || tl > MAX_TAG)
		return NULL;
	snprintf(open, sizeof(open), "<%s>", tag);
	snprintf(close, sizeof(close), "</%s>", tag);
	if ((a = find(x, len, open, tl + 2)) == NULL)
		return NULL;
	a += tl + 2;
	if ((e = find(a, len - (size_t)(a - x), close, tl + 3)) == NULL || (size_t)(e - a) > MAX_TEXT)
		return NULL;
	buf_init(&b, 0);
	buf_puts(&b, "");
	for (const char *p = a; p < e; p++) {
		size_t k = *p == '&' ? entity(&b, p + 1, (size_t)(e - p - 1)) : 0;

		if (k)
			p += k;
		else
			buf_putc(&b, *p);
	}
	return buf_steal(&b, NULL);
}

void aws_error_copy(char *dst, size_t n, const char *src, size_t len)
{
	size_t k = len < n - 1 ? len : n - 1;

	for (size_t i = 0; i < k; i++)
		dst[i] = (unsigned char)src[i] < 0x20 || src[i] == 0x7f ? ' ' : src[i];
	dst[k] = '\0';
}

void aws_xml_error(const char *x, size_t len, long status, struct aws_error *ae)
{
	char *t = len ? aws_xml_text(x, len, "Code") : NULL, *m = len ? aws_xml_text(x, len, "Message") : NULL;

	memset(ae, 0, sizeof(*ae));
	ae->status = status;
	if (t && *t)
		aws_error_copy(ae->type, sizeof(ae->type), t, strlen(t));
	else
		snprintf(ae->type, sizeof(ae->type), "HTTP %ld", status);
	if (m)
		aws_error_copy(ae->message, sizeof(ae->message), m, strlen(m));
	else if (status >= 300 && status < 400) /* egress follows no redirect: an answer cannot send it elsewhere */
		snprintf(ae->message, sizeof(ae->message), "a redirect, which is not followed (is the endpoint the "
			 "bucket's or the account's own?)");
	free(t);
	free(m);
}
