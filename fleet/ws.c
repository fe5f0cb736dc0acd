/*
 * ws.c - WebSocket framing for the port-forward tunnel (ws.h): the opening
 * handshake's key and expected answer (SHA-1 and base64, RFC 6455 4.1 and
 * 4.2.2) and frame headers. SHA-1 is here, in a few lines, because the
 * handshake is its only use and the libraries that have one (GnuTLS,
 * OpenSSL) are loaded, if at all, by whichever libcurl build is installed;
 * it only proves the server read our key, nothing secret rides on it.
 */
#include "ws.h"

#include <string.h>
#include <sys/random.h>

#include "base64.h"
#include "errors.h"

static uint32_t rol(uint32_t x, int n)
{
	return (x << n) | (x >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
	uint32_t w[80], a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];

	for (size_t i = 0; i < 16; i++)
		w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
	for (int i = 16; i < 80; i++)
		w[i] = rol(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
	for (int i = 0; i < 80; i++) {
		uint32_t f, k, t;

		if (i < 20) {
			f = (b & c) | (~b & d);
			k = 0x5A827999;
		} else if (i < 40) {
			f = b ^ c ^ d;
			k = 0x6ED9EBA1;
		} else if (i < 60) {
			f = (b & c) | (b & d) | (c & d);
			k = 0x8F1BBCDC;
		} else {
			f = b ^ c ^ d;
			k = 0xCA62C1D6;
		}
		t = rol(a, 5) + f + e + k + w[i];
		e = d;
		d = c;
		c = rol(b, 30);
		b = a;
		a = t;
	}
	h[0] += a;
	h[1] += b;
	h[2] += c;
	h[3] += d;
	h[4] += e;
}

/* SHA-1 (FIPS 180-4) of a short message (the handshake's 60 bytes; any length works) */
static void sha1(const void *msg, size_t n, uint8_t out[20])
{
	uint32_t h[5] = { 0x67452301, 0xEFCDAB89, 0x98BADCFE, 0x10325476, 0xC3D2E1F0 };
	const uint8_t *p = msg;
	uint8_t last[128] = { 0 };
	size_t full = n / 64 * 64, rest = n - full, tail;
	uint64_t bits = (uint64_t)n * 8;

	for (size_t i = 0; i < full; i += 64)
		sha1_block(h, p + i);
	memcpy(last, p + full, rest);
	last[rest] = 0x80;
	tail = rest + 1 + 8 <= 64 ? 64 : 128;
	for (int i = 0; i < 8; i++)
		last[tail - 1 - i] = (uint8_t)(bits >> (8 * i));
	for (size_t i = 0; i < tail; i += 64)
		sha1_block(h, last + i);
	for (size_t i = 0; i < 5; i++) {
		out[4 * i] = (uint8_t)(h[i] >> 24);
		out[4 * i + 1] = (uint8_t)(h[i] >> 16);
		out[4 * i + 2] = (uint8_t)(h[i] >> 8);
		out[4 * i + 3] = (uint8_t)h[i];
	}
}

int ws_key(char key[WS_KEY_LEN + 1])
{
	uint8_t nonce[16];

	if (getrandom(nonce, sizeof(nonce), 0) != (ssize_t)sizeof(nonce))
		return DP_EIO;
	key[b64_encode_to(nonce, sizeof(nonce), key)] = '\0';
	return 0;
}

void ws_accept(const char *key, char accept[WS_ACCEPT_LEN + 1])
{
	static const char guid[] = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";
	char msg[WS_KEY_LEN + sizeof(guid)];
	size_t n = strnlen(key, WS_KEY_LEN);
	uint8_t digest[20];

	memcpy(msg, key, n);
	memcpy(msg + n, guid, sizeof(guid) - 1);
	sha1(msg, n + sizeof(guid) - 1, digest);
	accept[b64_encode_to(digest, sizeof(digest), accept)] = '\0';
}

size_t ws_head_put(uint8_t *dst, enum ws_opcode op, uint64_t len, const uint8_t mask[4])
{
	size_t n = 0;

	dst[n++] = (uint8_t)(0x80 | op);
	if (len <= 125) {
		dst[n++] = (uint8_t)(0x80 | len);
	} else if (len <= 0xFFFF) {
		dst[n++] = 0x80 | 126;
		dst[n++] = (uint8_t)(len >> 8);
		dst[n++] = (uint8_t)len;
	} else {
		dst[n++] = 0x80 | 127;
		for (int i = 7; i >= 0; i--)
			dst[n++] = (uint8_t)(len >> (8 * i));
	}
	memcpy(dst + n, mask, 4);
	return n + 4;
}

void ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t at)
{
	for (size_t i = 0; i < n; i++)
		p[i] ^= mask[(at + i) & 3];
}

int ws_head_get(const uint8_t *p, size_t n, struct ws_head *h)
{
	size_t need = 2;
	uint64_t len;

	if (n < 2)
		return 0;
	len = p[1] & 0x7F;
	if (len == 126)
		need += 2;
	else if (len == 127)
		need += 8;
	if (p[1] & 0x80)
		need += 4;
	if (n < need)
		return 0;
	if (len == 126) {
		len = (uint64_t)p[2] << 8 | p[3];
	} else if (len == 127) {
		len = 0;
		for (int i = 0; i < 8; i++)
			len = len << 8 | p[2 + i];
		if (len >> 63)
			return -1;
	}
	h->fin = (p[0] >> 7) & 1;
	h->rsv = (p[0] >> 4) & 7;
	h->opcode = p[0] & 0x0F;
	h->masked = (p[1] >> 7) & 1;
	h->len = len;
	h->size = need;
	return 1;
}
