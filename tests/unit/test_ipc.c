/*
 * test_ipc.c - the IPC codec against the byte layouts in
 * shared/reference/dotnet-diagnostics-protocol.md (sections 2, 3.1, 3.2, 3.8).
 */
#include <stdlib.h>
#include <string.h>

#include "t.h"
#include "launcher/runtime/ipc.h"
#include "mem.h"

static const uint8_t magic[14] = { 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0 };

static void advert(void)
{
	uint8_t b[34] = { 'A', 'D', 'V', 'R', '_', 'V', '1', 0 };
	struct ipc_advert a;
	char hex[33], guid[37];

	for (int i = 0; i < 16; i++)
		b[8 + i] = (uint8_t)(i + 1);
	b[24] = 0x39; /* pid 12345 = 0x3039, little-endian */
	b[25] = 0x30;
	T_CHECK(ipc_parse_advert(b, 34, &a) == 0);
	T_CHECK(a.pid == 12345);
	T_CHECK(a.cookie[0] == 1 && a.cookie[15] == 16);
	ipc_cookie_hex(a.cookie, hex);
	T_STREQ(hex, "0102030405060708090a0b0c0d0e0f10");
	ipc_cookie_guid(a.cookie, guid);
	T_STREQ(guid, "04030201-0605-0807-090a-0b0c0d0e0f10");
	T_CHECK(ipc_parse_advert(b, 33, &a) == DP_ESYNTAX);
	b[3] = 'X';
	T_CHECK(ipc_parse_advert(b, 34, &a) == DP_ESYNTAX);
}

static void resume_request_bytes(void)
{
	/* Reference 3.1: ResumeRuntime = magic 14 00 04 01 00 00 (20 bytes). */
	static const uint8_t want[20] = { 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0,
					  0x14, 0x00, 0x04, 0x01, 0x00, 0x00 };
	struct buf b;

	buf_init(&b, 0);
	ipc_begin(&b, IPC_SET_PROCESS, IPC_PROCESS_RESUME);
	T_CHECK(ipc_end(&b) == 0);
	T_CHECK(b.len == 20 && memcmp(b.data, want, 20) == 0);
	buf_free(&b);
}

static void strings(void)
{
	/* Reference 3.2: "MyEventSource" -> 0E 00 00 00 + 28 bytes (13 chars + NUL, UTF-16LE). */
	struct buf b;
	struct ipc_reader r;
	char *s;

	buf_init(&b, 0);
	T_CHECK(ipc_put_string(&b, "MyEventSource") == 0);
	T_CHECK(b.len == 4 + 28);
	T_CHECK((uint8_t)b.data[0] == 0x0E && b.data[1] == 0 && b.data[4] == 'M' && b.data[5] == 0);
	T_CHECK(b.data[30] == 0 && b.data[31] == 0);
	r = (struct ipc_reader){ (const uint8_t *)b.data, (const uint8_t *)b.data + b.len };
	T_CHECK(ipc_get_string(&r, &s) == 0);
	T_STREQ(s, "MyEventSource");
	T_CHECK(r.p == r.end);
	free(s);
	/* Non-ASCII and a character outside the BMP (a surrogate pair) survive the round trip. */
	buf_reset(&b);
	T_CHECK(ipc_put_string(&b, "/tmp/дамп-🎉") == 0);
	r = (struct ipc_reader){ (const uint8_t *)b.data, (const uint8_t *)b.data + b.len };
	T_CHECK(ipc_get_string(&r, &s) == 0);
	T_STREQ(s, "/tmp/дамп-🎉");
	free(s);
	/* Invalid UTF-8 is refused and leaves the buffer as it was. */
	buf_reset(&b);
	T_CHECK(ipc_put_string(&b, "\xff\xfe") == DP_EINVAL && b.len == 0);
	buf_free(&b);
}

static void string_bounds(void)
{
	uint8_t b[12] = { 5, 0, 0, 0, 'a', 0, 'b', 0, 0, 0 };
	struct ipc_reader r = { b, b + 10 };
	char *s = (char *)1;

	T_CHECK(ipc_get_string(&r, &s) == DP_ESYNTAX); /* count 5 needs 10 bytes; 6 are left */
	b[0] = 3;
	r = (struct ipc_reader){ b, b + 10 };
	T_CHECK(ipc_get_string(&r, &s) == 0);
	T_STREQ(s, "ab");
	free(s);
	b[0] = 2; /* last unit must be NUL: here it is 'b' */
	r = (struct ipc_reader){ b, b + 10 };
	T_CHECK(ipc_get_string(&r, &s) == DP_ESYNTAX);
	b[0] = 0xFF;
	b[1] = 0xFF;
	b[2] = 0xFF;
	b[3] = 0xFF;
	r = (struct ipc_reader){ b, b + 10 };
	T_CHECK(ipc_get_string(&r, &s) == DP_ESYNTAX);
	b[0] = 0; /* count 0: the null string */
	b[1] = b[2] = b[3] = 0;
	r = (struct ipc_reader){ b, b + 10 };
	T_CHECK(ipc_get_string(&r, &s) == 0 && s == NULL);
}

static void header(void)
{
	uint8_t h[20];
	struct ipc_header x;

	memcpy(h, magic, 14);
	h[14] = 0x18; /* OK-with-hresult response: size 24 */
	h[15] = 0;
	h[16] = 0xFF;
	h[17] = 0x00;
	h[18] = h[19] = 0;
	T_CHECK(ipc_parse_header(h, &x) == 0);
	T_CHECK(x.size == 24 && x.set == IPC_SET_SERVER && x.id == IPC_SERVER_OK);
	h[14] = 19;
	T_CHECK(ipc_parse_header(h, &x) == DP_ESYNTAX); /* size below the header itself */
	h[14] = 24;
	h[0] = 'X';
	T_CHECK(ipc_parse_header(h, &x) == DP_ESYNTAX);
}

static void process_info(void)
{
	struct buf b;
	struct ipc_process_info pi;

	buf_init(&b, 0);
	ipc_put_u32(&b, 1); /* ProcessInfo3 version */
	ipc_put_u64(&b, 42);
	for (int i = 0; i < 16; i++)
		ipc_put_u8(&b, (uint8_t)i);
	ipc_put_string(&b, "/usr/bin/dotnet app.dll");
	ipc_put_string(&b, "Linux");
	ipc_put_string(&b, "x64");
	ipc_put_string(&b, "app");
	ipc_put_string(&b, "10.0.12");
	ipc_put_string(&b, "linux-x64");
	T_CHECK(ipc_parse_process_info((const uint8_t *)b.data, b.len, 3, &pi) == 0);
	T_CHECK(pi.pid == 42 && pi.cookie[15] == 15);
	T_STREQ(pi.command_line, "/usr/bin/dotnet app.dll");
	T_STREQ(pi.assembly, "app");
	T_STREQ(pi.rid, "linux-x64");
	ipc_process_info_free(&pi);
	/* Every truncation is refused, never read past. */
	for (size_t n = 0; n < b.len; n++)
		T_CHECK(ipc_parse_process_info((const uint8_t *)b.data, n, 3, &pi) == DP_ESYNTAX);
	/* Version 1 layout = the same bytes without the leading u32 and the trailing strings. */
	T_CHECK(ipc_parse_process_info((const uint8_t *)b.data + 4, b.len - 4, 1, &pi) == 0);
	T_STREQ(pi.arch, "x64");
	T_CHECK(pi.assembly == NULL);
	ipc_process_info_free(&pi);
	buf_free(&b);
}

static void error_payload(void)
{
	struct buf b;
	uint32_t hr;
	char *text;

	buf_init(&b, 0);
	ipc_put_u32(&b, IPC_E_FAIL);
	ipc_put_string(&b, "createdump: ptrace(ATTACH) failed");
	T_CHECK(ipc_parse_error((const uint8_t *)b.data, b.len, &hr, &text) == 0);
	T_CHECK(hr == IPC_E_FAIL);
	T_STREQ(text, "createdump: ptrace(ATTACH) failed");
	free(text);
	T_CHECK(ipc_parse_error((const uint8_t *)b.data, 4, &hr, &text) == 0 && text == NULL);
	T_CHECK(ipc_parse_error((const uint8_t *)b.data, 3, &hr, &text) == DP_ESYNTAX);
	buf_free(&b);
}

static void env_block(void)
{
	struct buf b;
	char **v;
	size_t n;

	buf_init(&b, 0);
	ipc_put_u32(&b, 2);
	ipc_put_string(&b, "A=1");
	ipc_put_string(&b, "PATH=/usr/bin");
	T_CHECK(ipc_parse_env((const uint8_t *)b.data, b.len, &v, &n) == 0);
	T_CHECK(n == 2);
	T_STREQ(v[1], "PATH=/usr/bin");
	ipc_env_free(v, n);
	b.data[0] = 100; /* claims more strings than bytes */
	T_CHECK(ipc_parse_env((const uint8_t *)b.data, b.len, &v, &n) == DP_ESYNTAX);
	buf_free(&b);
}

static void too_big(void)
{
	struct buf b;

	buf_init(&b, 0);
	ipc_begin(&b, IPC_SET_DUMP, IPC_DUMP_GENERATE3);
	for (int i = 0; i < 70000; i++)
		ipc_put_u8(&b, 0);
	T_CHECK(ipc_end(&b) == DP_ETOOBIG);
	buf_free(&b);
}

int main(void)
{
	mem_install();
	T_BEGIN("ipc");
	T_RUN(advert);
	T_RUN(resume_request_bytes);
	T_RUN(strings);
	T_RUN(string_bounds);
	T_RUN(header);
	T_RUN(process_info);
	T_RUN(error_payload);
	T_RUN(env_block);
	T_RUN(too_big);
	T_END();
}
