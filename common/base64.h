/*
 * base64.h - standard base64 (RFC 4648 section 4, with padding), both ways.
 *
 * What Kubernetes uses for a Secret's data and a webhook's caBundle. The
 * decoder is strict, as the API server's is: the standard alphabet only,
 * padding required, no whitespace, no bits after the end. Both return one
 * allocation of the exact size, never grown by realloc, so that the caller
 * can wipe a private key's only copy before freeing it.
 */
#ifndef DP_BASE64_H
#define DP_BASE64_H

#include <stddef.h>

/* The length of the base64 text of n bytes. */
#define B64_LEN(n) (((n) + 2) / 3 * 4)
/* Write the base64 text of in[0..n) to dst (B64_LEN(n) bytes, no NUL); returns B64_LEN(n). */
size_t b64_encode_to(const void *in, size_t n, char *dst);
/* The base64 text of in[0..n): a new NUL-terminated string; *len (may be NULL) gets its length. */
char *b64_encode(const void *in, size_t n, size_t *len);

/*
 * Decode the base64 text in[0..n) into a new allocation (NUL-terminated, the
 * NUL not counted in *len). 0, DP_ESYNTAX (not strict base64) or DP_ETOOBIG
 * (more than max bytes decoded); *out and *len are set only on success.
 */
int b64_decode(const char *in, size_t n, size_t max, char **out, size_t *len);

#endif
