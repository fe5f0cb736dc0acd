/*
 * ws.h - the client's half of RFC 6455 (WebSocket) framing, for the
 * port-forward tunnel (portfwd.c): the opening handshake's key and the
 * answer that proves the server read it, and frame headers both ways.
 * Pure functions over caller-owned bytes; nothing here does I/O.
 */
#ifndef DP_FLEET_WS_H
#define DP_FLEET_WS_H

#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
	WS_CONT = 0x0,
	WS_TEXT = 0x1,
	WS_BINARY = 0x2,
	WS_CLOSE = 0x8,
	WS_PING = 0x9,
	WS_PONG = 0xA,
};

#define WS_KEY_LEN 24        /* base64 of 16 random bytes */
#define WS_ACCEPT_LEN 28     /* base64 of a SHA-1 */
#define WS_HEAD_MAX 14       /* 2 + 8 (64-bit length) + 4 (mask) */
#define WS_CONTROL_MAX 125   /* a control frame's payload (RFC 6455 5.5) */

/* A new random Sec-WebSocket-Key: WS_KEY_LEN characters and a NUL into key. 0, or DP_EIO (no randomness). */
int ws_key(char key[WS_KEY_LEN + 1]);

/* The Sec-WebSocket-Accept a server must answer to key (RFC 6455 4.2.2): WS_ACCEPT_LEN characters and a NUL. */
void ws_accept(const char *key, char accept[WS_ACCEPT_LEN + 1]);

/*
 * The header of a client frame (FIN set, masked with mask) carrying len
 * payload bytes, written to dst (at most WS_HEAD_MAX bytes); returns its
 * length. The caller masks the payload with ws_mask.
 */
size_t ws_head_put(uint8_t *dst, enum ws_opcode op, uint64_t len, const uint8_t mask[4]);

/* XOR p[0..n) with mask, p[0] being byte `at` of the payload (so a payload may be masked in pieces). */
void ws_mask(uint8_t *p, size_t n, const uint8_t mask[4], uint64_t at);

/* A frame header as read. */
struct ws_head {
	int fin;
	int rsv;        /* the three RSV bits; no extension is negotiated, so they must be 0 */
	int opcode;
	int masked;     /* a server's frames must not be */
	uint64_t len;   /* payload length */
	size_t size;    /* the header's own length */
};

/*
 * Read a frame header from p[0..n): 1 with *h filled, 0 when n does not yet
 * hold all of it, -1 when it is malformed (a 64-bit length with its top
 * bit set). A length not in its shortest form is accepted.
 */
int ws_head_get(const uint8_t *p, size_t n, struct ws_head *h);

#endif
