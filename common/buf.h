/*
 * buf.h - a growable byte buffer with a hard cap.
 *
 * A buf owns its bytes. It grows on demand up to `cap` bytes; an append that
 * would pass the cap fails with DP_ETOOBIG and leaves the buffer unchanged.
 * The bytes are always followed by a NUL that is not counted in `len`.
 */
#ifndef DP_BUF_H
#define DP_BUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct buf {
	char *data;   /* NUL-terminated; NULL until the first append */
	size_t len;   /* bytes used, not counting the NUL */
	size_t alloc; /* bytes allocated */
	size_t cap;   /* most bytes it may hold; 0 means SIZE_MAX */
};

void buf_init(struct buf *b, size_t cap);
void buf_free(struct buf *b);                 /* frees the bytes; b may be reused after buf_init */
void buf_reset(struct buf *b);                /* len = 0, keeps the allocation */
int buf_append(struct buf *b, const void *p, size_t n);   /* 0 or DP_ETOOBIG */
/* Make room for n more bytes now (so later appends do not allocate). 0 or DP_ETOOBIG. */
int buf_reserve(struct buf *b, size_t n);
int buf_puts(struct buf *b, const char *s);
int buf_putc(struct buf *b, char c);
/* Append one Unicode code point (<= 0x10FFFF) encoded as UTF-8. */
int buf_put_utf8(struct buf *b, uint32_t cp);
int buf_printf(struct buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
int buf_vprintf(struct buf *b, const char *fmt, va_list ap);
/*
 * Percent-encode s[0..n) onto b (RFC 3986: every byte but A-Z a-z 0-9 - . _ ~
 * as %XX, uppercase; '/' kept too when keep_slash): query values, form
 * bodies, SigV4's canonical URI, S3 object keys. 0 or DP_ETOOBIG.
 */
int buf_pct_encode(struct buf *b, const char *s, size_t n, bool keep_slash);
/* Take the bytes (a new NUL-terminated string the caller frees); b is left empty. */
char *buf_steal(struct buf *b, size_t *len);

/* Read all of fd into b (respecting b's cap). 0, DP_ETOOBIG or DP_EIO (errno kept). */
int buf_read_fd(struct buf *b, int fd);
/*
 * Read the whole file at path into b (respecting b's cap); *st (may be NULL)
 * gets the open file's stat. 0, or DP_EIO / DP_ETOOBIG with em naming the
 * path ("cannot open PATH: ...", "PATH is larger than N bytes").
 */
struct stat;
struct err_msg;
int buf_read_path(struct buf *b, const char *path, struct stat *st, struct err_msg *em);
/* Write all of b to fd, retrying short writes. 0 or DP_EIO. */
int buf_write_fd(const struct buf *b, int fd);

#endif
