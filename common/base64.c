/*
 * base64.c - standard base64 with padding (base64.h).
 *
 * Sizes are computed first and the output is allocated once: a decoded
 * private key has exactly one copy, which its owner wipes.
 */
#include "base64.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "mem.h"

static const char alphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

size_t b64_encode_to(const void *in, size_t n, char *dst)
{
	const unsigned char *p = in;
	size_t i, o = 0;

	for (i = 0; i + 2 < n; i += 3) {
		dst[o++] = alphabet[p[i] >> 2];
		dst[o++] = alphabet[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
		dst[o++] = alphabet[((p[i + 1] & 15) << 2) | (p[i + 2] >> 6)];
		dst[o++] = alphabet[p[i + 2] & 63];
	}
	if (n - i == 1) {
		dst[o++] = alphabet[p[i] >> 2];
		dst[o++] = alphabet[(p[i] & 3) << 4];
		dst[o++] = '=';
		dst[o++] = '=';
	} else if (n - i == 2) {
		dst[o++] = alphabet[p[i] >> 2];
		dst[o++] = alphabet[((p[i] & 3) << 4) | (p[i + 1] >> 4)];
		dst[o++] = alphabet[(p[i + 1] & 15) << 2];
		dst[o++] = '=';
	}
	return o;
}

char *b64_encode(const void *in, size_t n, size_t *len)
{
	size_t o;
	char *s;

	if (n > (SIZE_MAX - 1) / 4 * 3 - 3)
		DP_FATAL("base64 of %zu bytes", n);
	s = mem_alloc(B64_LEN(n) + 1);
	o = b64_encode_to(in, n, s);
	s[o] = '\0';
	if (len)
		*len = o;
	return s;
}

static int value(unsigned char c)
{
	const char *at = c ? strchr(alphabet, c) : NULL;

	return at ? (int)(at - alphabet) : -1;
}

int b64_decode(const char *in, size_t n, size_t max, char **out, size_t *len)
{
	const unsigned char *s = (const unsigned char *)in;
	size_t pad = 0, need, o = 0;
	unsigned char *d;
	int rc = 0;

	if (n % 4 != 0)
		return DP_ESYNTAX;
	if (n >= 1 && s[n - 1] == '=')
		pad++;
	if (n >= 2 && s[n - 2] == '=')
		pad++;
	need = n / 4 * 3 - pad;
	if (need > max)
		return DP_ETOOBIG;
	d = mem_alloc(need + 1);
	for (size_t i = 0; i < n && rc == 0; i += 4) {
		bool last = i + 4 == n;
		int v[4];

		for (int k = 0; k < 4; k++) {
			if (last && k >= 4 - (int)pad)
				v[k] = 0;
			else if ((v[k] = value(s[i + k])) < 0)
				rc = DP_ESYNTAX;
		}
		/* no bits may follow the last byte */
		if (rc == 0 && last && ((pad == 2 && (v[1] & 15) != 0) || (pad == 1 && (v[2] & 3) != 0)))
			rc = DP_ESYNTAX;
		if (rc != 0)
			break;
		d[o++] = (unsigned char)((v[0] << 2) | (v[1] >> 4));
		if (!(last && pad == 2))
			d[o++] = (unsigned char)(((v[1] & 15) << 4) | (v[2] >> 2));
		if (!(last && pad >= 1))
			d[o++] = (unsigned char)(((v[2] & 3) << 6) | v[3]);
	}
	if (rc != 0) {
		mem_wipe(d, o);
		free(d);
		return rc;
	}
	d[o] = '\0';
	*out = (char *)d;
	*len = o;
	return 0;
}
