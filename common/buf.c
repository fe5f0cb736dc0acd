/*
 * buf.c - growable byte buffer with a cap (see buf.h).
 */
#include "buf.h"

#include "errors.h"
#include "mem.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void buf_init(struct buf *b, size_t cap)
{
	b->data = NULL;
	b->len = 0;
	b->alloc = 0;
	b->cap = cap ? cap : SIZE_MAX - 1;
}

void buf_free(struct buf *b)
{
	mem_free(b->data);
	b->data = NULL;
	b->len = b->alloc = 0;
}

void buf_reset(struct buf *b)
{
	b->len = 0;
	if (b->data)
		b->data[0] = '\0';
}

int buf_reserve(struct buf *b, size_t n)
{
	size_t want, a;

	if (n > b->cap - b->len)
		return DP_ETOOBIG;
	want = b->len + n + 1;
	if (want <= b->alloc)
		return 0;
	a = b->alloc ? b->alloc : 64;
	while (a < want)
		a = a > SIZE_MAX / 2 ? want : a * 2;
	b->data = mem_realloc(b->data, a);
	b->alloc = a;
	return 0;
}

int buf_append(struct buf *b, const void *p, size_t n)
{
	if (buf_reserve(b, n) != 0)
		return DP_ETOOBIG;
	if (n)
		memcpy(b->data + b->len, p, n);
	b->len += n;
	b->data[b->len] = '\0';
	return 0;
}

int buf_puts(struct buf *b, const char *s)
{
	return buf_append(b, s, strlen(s));
}

int buf_putc(struct buf *b, char c)
{
	return buf_append(b, &c, 1);
}

int buf_put_utf8(struct buf *b, uint32_t cp)
{
	char o[4];
	size_t n;

	if (cp < 0x80) {
		o[0] = (char)cp;
		n = 1;
	} else if (cp < 0x800) {
		o[0] = (char)(0xC0 | cp >> 6);
		o[1] = (char)(0x80 | (cp & 0x3F));
		n = 2;
	} else if (cp < 0x10000) {
		o[0] = (char)(0xE0 | cp >> 12);
		o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[2] = (char)(0x80 | (cp & 0x3F));
		n = 3;
	} else {
		o[0] = (char)(0xF0 | cp >> 18);
		o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
		o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
		o[3] = (char)(0x80 | (cp & 0x3F));
		n = 4;
	}
	return buf_append(b, o, n);
}

int buf_vprintf(struct buf *b, const char *fmt, va_list ap)
{
	va_list cp;
	int n;

	va_copy(cp, ap);
	n = vsnprintf(NULL, 0, fmt, cp);
	va_end(cp);
	if (n < 0)
		return DP_EINTERNAL;
	if (buf_reserve(b, (size_t)n) != 0)
		return DP_ETOOBIG;
	vsnprintf(b->data + b->len, (size_t)n + 1, fmt, ap);
	b->len += (size_t)n;
	return 0;
}

int buf_printf(struct buf *b, const char *fmt, ...)
{
	va_list ap;
	int rc;

	va_start(ap, fmt);
	rc = buf_vprintf(b, fmt, ap);
	va_end(ap);
	return rc;
}

int buf_pct_encode(struct buf *b, const char *s, size_t n, bool keep_slash)
{
	static const char hex[] = "0123456789ABCDEF";
	int rc = 0;

	for (size_t i = 0; i < n && rc == 0; i++) {
		unsigned char c = (unsigned char)s[i];

		if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.' ||
		    c == '_' || c == '~' || (keep_slash && c == '/')) {
			rc = buf_putc(b, (char)c);
		} else {
			char e[3] = { '%', hex[c >> 4], hex[c & 15] };

			rc = buf_append(b, e, 3);
		}
	}
	return rc;
}

char *buf_steal(struct buf *b, size_t *len)
{
	char *p;

	if (b->data == NULL)
		buf_append(b, "", 0);
	p = b->data;
	if (len)
		*len = b->len;
	b->data = NULL;
	b->len = b->alloc = 0;
	return p;
}

int buf_read_fd(struct buf *b, int fd)
{
	char tmp[65536];

	for (;;) {
		ssize_t n = read(fd, tmp, sizeof(tmp));

		if (n == 0)
			return 0;
		if (n < 0) {
			if (errno == EINTR)
				continue;
			return DP_EIO;
		}
		if (buf_append(b, tmp, (size_t)n) != 0)
			return DP_ETOOBIG;
	}
}

int buf_read_path(struct buf *b, const char *path, struct stat *st, struct err_msg *em)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC), rc;

	if (fd < 0)
		return err_set(em, DP_EIO, "cannot open %s: %s", path, strerror(errno));
	rc = st && fstat(fd, st) != 0 ? DP_EIO : buf_read_fd(b, fd);
	if (rc == DP_EIO)
		err_set(em, rc, "cannot read %s: %s", path, strerror(errno));
	else if (rc == DP_ETOOBIG)
		err_set(em, rc, "%s is larger than %zu bytes", path, b->cap);
	close(fd);
	return rc;
}

int buf_write_fd(const struct buf *b, int fd)
{
	size_t off = 0;

	while (off < b->len) {
		ssize_t n = write(fd, b->data + off, b->len - off);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			return DP_EIO;
		}
		off += (size_t)n;
	}
	return 0;
}
