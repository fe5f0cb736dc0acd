/*
 * test_ws.c - WebSocket framing for the port-forward tunnel (fleet/ws.c):
 * RFC 6455's own handshake example (a 60-byte SHA-1 input: two blocks), and
 * frame headers of each length form both ways.
 */
#include "t.h"

#include <stdint.h>

#include "fleet/ws.h"
#include "mem.h"

static void accept_rfc6455_example(void)
{
	char a[WS_ACCEPT_LEN + 1];

	/* RFC 6455 1.3 */
	ws_accept("dGhlIHNhbXBsZSBub25jZQ==", a);
	T_STREQ(a, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void keys_are_random_base64(void)
{
	char k1[WS_KEY_LEN + 1], k2[WS_KEY_LEN + 1];

	T_CHECK(ws_key(k1) == 0 && ws_key(k2) == 0);
	T_CHECK(strlen(k1) == WS_KEY_LEN && k1[22] == '=' && k1[23] == '=');
	T_CHECK(strcmp(k1, k2) != 0);
}

static void heads_round_trip(void)
{
	static const uint64_t lens[] = { 0, 1, 125, 126, 65535, 65536, (uint64_t)1 << 40 };
	const uint8_t mask[4] = { 1, 2, 3, 4 };
	uint8_t b[WS_HEAD_MAX];
	struct ws_head h;

	for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++) {
		size_t n = ws_head_put(b, WS_BINARY, lens[i], mask);

		T_CHECK(n == (lens[i] < 126 ? 6u : lens[i] < 65536 ? 8u : 14u));
		T_CHECK(ws_head_get(b, n - 1, &h) == 0);
		T_CHECK(ws_head_get(b, n, &h) == 1);
		T_CHECK(h.fin == 1 && h.rsv == 0 && h.opcode == WS_BINARY && h.masked == 1);
		T_CHECK(h.len == lens[i] && h.size == n);
	}
	b[0] = 0x82;
	b[1] = 127;
	b[2] = 0x80; /* a 64-bit length with its top bit set */
	T_CHECK(ws_head_get(b, 10, &h) == -1);
}

static void mask_in_pieces(void)
{
	const uint8_t mask[4] = { 0x37, 0xfa, 0x21, 0x3d };
	uint8_t whole[5] = { 'H', 'e', 'l', 'l', 'o' }, parts[5] = { 'H', 'e', 'l', 'l', 'o' };

	ws_mask(whole, 5, mask, 0);
	T_CHECK(memcmp(whole, "\x7f\x9f\x4d\x51\x58", 5) == 0); /* RFC 6455 5.7 */
	ws_mask(parts, 3, mask, 0);
	ws_mask(parts + 3, 2, mask, 3);
	T_CHECK(memcmp(whole, parts, 5) == 0);
}

int main(void)
{
	t_file_name = "test_ws";
	mem_install();
	T_RUN(accept_rfc6455_example);
	T_RUN(keys_are_random_base64);
	T_RUN(heads_round_trip);
	T_RUN(mask_in_pieces);
	return t_failed_cases ? 1 : 0;
}
