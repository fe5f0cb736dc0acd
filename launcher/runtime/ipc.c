/*
 * ipc.c - encoding, decoding and deadline-bounded I/O for the .NET
 * diagnostics IPC protocol (see ipc.h). Every length read from the wire is
 * checked against the bytes that remain before anything is copied.
 */
#include "ipc.h"
#include "clock.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/socket.h>
#include <unistd.h>

#include "mem.h"

static const uint8_t advert_magic[8] = { 'A', 'D', 'V', 'R', '_', 'V', '1', 0 };
static const uint8_t ipc_magic[14] = { 'D', 'O', 'T', 'N', 'E', 'T', '_', 'I', 'P', 'C', '_', 'V', '1', 0 };

static uint16_t le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t le32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t le64(const uint8_t *p) { return le32(p) | (uint64_t)le32(p + 4) << 32; }

int ipc_parse_advert(const uint8_t *b, size_t n, struct ipc_advert *out)
{
	if (n != IPC_ADVERTISE_SIZE || memcmp(b, advert_magic, sizeof(advert_magic)) != 0)
		return DP_ESYNTAX;
	memcpy(out->cookie, b + 8, 16);
	out->pid = le64(b + 24);
	return 0;
}

void ipc_cookie_hex(const uint8_t cookie[16], char out[33])
{
	for (int i = 0; i < 16; i++)
		snprintf(out + (size_t)i * 2, 3, "%02x", cookie[i]);
}

void ipc_cookie_guid(const uint8_t c[16], char out[37])
{
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", c[3], c[2], c[1],
		 c[0], c[5], c[4], c[7], c[6], c[8], c[9], c[10], c[11], c[12], c[13], c[14], c[15]);
}

/* ---- requests ---- */

void ipc_begin(struct buf *b, uint8_t set, uint8_t id)
{
	static const uint8_t rest[6] = { 0, 0, 0, 0, 0, 0 };

	buf_reset(b);
	buf_append(b, ipc_magic, sizeof(ipc_magic));
	buf_append(b, rest, sizeof(rest));
	b->data[16] = (char)set;
	b->data[17] = (char)id;
}

void ipc_put_u8(struct buf *b, uint8_t v)
{
	buf_append(b, &v, 1);
}

void ipc_put_u32(struct buf *b, uint32_t v)
{
	uint8_t x[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };

	buf_append(b, x, 4);
}

void ipc_put_u64(struct buf *b, uint64_t v)
{
	ipc_put_u32(b, (uint32_t)v);
	ipc_put_u32(b, (uint32_t)(v >> 32));
}

/* Decode one UTF-8 code point; returns bytes used, 0 when invalid. */
static size_t utf8_next(const unsigned char *s, uint32_t *cp)
{
	if (s[0] < 0x80) {
		*cp = s[0];
		return 1;
	}
	if ((s[0] & 0xE0) == 0xC0 && (s[1] & 0xC0) == 0x80) {
		*cp = (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
		return *cp >= 0x80 ? 2 : 0;
	}
	if ((s[0] & 0xF0) == 0xE0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80) {
		*cp = (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
		return *cp >= 0x800 && (*cp < 0xD800 || *cp > 0xDFFF) ? 3 : 0;
	}
	if ((s[0] & 0xF8) == 0xF0 && (s[1] & 0xC0) == 0x80 && (s[2] & 0xC0) == 0x80 && (s[3] & 0xC0) == 0x80) {
		*cp = (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 | (uint32_t)(s[2] & 0x3F) << 6 |
		      (s[3] & 0x3F);
		return *cp >= 0x10000 && *cp <= 0x10FFFF ? 4 : 0;
	}
	return 0;
}

int ipc_put_string(struct buf *b, const char *utf8)
{
	const unsigned char *s = (const unsigned char *)utf8;
	size_t count_at = b->len;
	uint32_t units = 0, cp;

	ipc_put_u32(b, 0);
	while (*s) {
		size_t n = utf8_next(s, &cp);

		if (n == 0) {
			b->len = count_at;
			return DP_EINVAL;
		}
		s += n;
		if (cp >= 0x10000) {
			cp -= 0x10000;
			uint8_t pair[4] = { (uint8_t)(0xD800 + (cp >> 10)), (uint8_t)((0xD800 + (cp >> 10)) >> 8),
					    (uint8_t)(0xDC00 + (cp & 0x3FF)), (uint8_t)((0xDC00 + (cp & 0x3FF)) >> 8) };
			buf_append(b, pair, 4);
			units += 2;
		} else {
			uint8_t u[2] = { (uint8_t)cp, (uint8_t)(cp >> 8) };

			buf_append(b, u, 2);
			units++;
		}
	}
	buf_append(b, "\0\0", 2);
	units++;
	for (int i = 0; i < 4; i++)
		b->data[count_at + (size_t)i] = (char)(units >> (8 * i));
	return 0;
}

int ipc_end(struct buf *b)
{
	if (b->len > IPC_MAX_MESSAGE)
		return DP_ETOOBIG;
	b->data[14] = (char)(b->len & 0xFF);
	b->data[15] = (char)(b->len >> 8);
	return 0;
}

/* ---- responses ---- */

int ipc_parse_header(const uint8_t b[IPC_HEADER_SIZE], struct ipc_header *h)
{
	if (memcmp(b, ipc_magic, sizeof(ipc_magic)) != 0)
		return DP_ESYNTAX;
	h->size = le16(b + 14);
	h->set = b[16];
	h->id = b[17];
	return h->size < IPC_HEADER_SIZE ? DP_ESYNTAX : 0;
}

int ipc_get_bytes(struct ipc_reader *r, void *out, size_t n)
{
	if ((size_t)(r->end - r->p) < n)
		return DP_ESYNTAX;
	memcpy(out, r->p, n);
	r->p += n;
	return 0;
}

int ipc_get_u16(struct ipc_reader *r, uint16_t *v)
{
	uint8_t x[2];
	int rc = ipc_get_bytes(r, x, 2);

	if (rc == 0)
		*v = le16(x);
	return rc;
}

int ipc_get_u32(struct ipc_reader *r, uint32_t *v)
{
	uint8_t x[4];
	int rc = ipc_get_bytes(r, x, 4);

	if (rc == 0)
		*v = le32(x);
	return rc;
}

int ipc_get_u64(struct ipc_reader *r, uint64_t *v)
{
	uint8_t x[8];
	int rc = ipc_get_bytes(r, x, 8);

	if (rc == 0)
		*v = le64(x);
	return rc;
}

int ipc_get_string(struct ipc_reader *r, char **out)
{
	uint32_t count;
	struct buf b;
	const uint8_t *s;

	if (ipc_get_u32(r, &count) != 0)
		return DP_ESYNTAX;
	if (count == 0) {
		*out = NULL;
		return 0;
	}
	if (count > IPC_MAX_STRING || (size_t)(r->end - r->p) / 2 < count)
		return DP_ESYNTAX;
	s = r->p;
	if (le16(s + (size_t)(count - 1) * 2) != 0)
		return DP_ESYNTAX;
	buf_init(&b, 0);
	for (uint32_t i = 0; i + 1 < count; i++) {
		uint32_t u = le16(s + (size_t)i * 2);
		uint32_t next = i + 2 < count ? le16(s + (size_t)(i + 1) * 2) : 0;

		if (u >= 0xD800 && u <= 0xDBFF && next >= 0xDC00 && next <= 0xDFFF) {
			u = 0x10000 + ((u - 0xD800) << 10) + (next - 0xDC00);
			i++;
		} else if ((u >= 0xD800 && u <= 0xDFFF) || u == 0) {
			/* a lone surrogate, or a NUL that would cut the C string short: keep the rest readable */
			u = 0xFFFD;
		}
		buf_put_utf8(&b, u);
	}
	r->p += 2 * (size_t)count;
	*out = buf_steal(&b, NULL);
	return 0;
}

void ipc_process_info_free(struct ipc_process_info *pi)
{
	if (pi == NULL)
		return;
	free(pi->command_line);
	free(pi->os);
	free(pi->arch);
	free(pi->assembly);
	free(pi->clr_version);
	free(pi->rid);
	memset(pi, 0, sizeof(*pi));
}

int ipc_parse_process_info(const uint8_t *p, size_t n, int version, struct ipc_process_info *out)
{
	struct ipc_reader r = { p, p + n };
	struct ipc_process_info pi;
	uint32_t v3 = 0;

	memset(&pi, 0, sizeof(pi));
	if ((version == 3 && ipc_get_u32(&r, &v3) != 0) || ipc_get_u64(&r, &pi.pid) != 0 ||
	    ipc_get_bytes(&r, pi.cookie, 16) != 0 || ipc_get_string(&r, &pi.command_line) != 0 ||
	    ipc_get_string(&r, &pi.os) != 0 || ipc_get_string(&r, &pi.arch) != 0)
		goto bad;
	if (version >= 2 && (ipc_get_string(&r, &pi.assembly) != 0 || ipc_get_string(&r, &pi.clr_version) != 0))
		goto bad;
	if (version == 3 && v3 >= 1 && ipc_get_string(&r, &pi.rid) != 0)
		goto bad;
	*out = pi;
	return 0;
bad:
	ipc_process_info_free(&pi);
	return DP_ESYNTAX;
}

void ipc_env_free(char **vars, size_t count)
{
	for (size_t i = 0; vars && i < count; i++)
		free(vars[i]);
	free(vars);
}

int ipc_parse_env(const uint8_t *p, size_t n, char ***vars, size_t *count)
{
	struct ipc_reader r = { p, p + n };
	uint32_t c;
	char **v;

	if (ipc_get_u32(&r, &c) != 0 || c > n / 4)
		return DP_ESYNTAX;
	v = mem_array(c ? c : 1, sizeof(char *));
	for (uint32_t i = 0; i < c; i++)
		if (ipc_get_string(&r, &v[i]) != 0 || v[i] == NULL) {
			ipc_env_free(v, i + 1);
			return DP_ESYNTAX;
		}
	*vars = v;
	*count = c;
	return 0;
}

int ipc_parse_error(const uint8_t *p, size_t n, uint32_t *hresult, char **text)
{
	struct ipc_reader r = { p, p + n };

	*text = NULL;
	if (ipc_get_u32(&r, hresult) != 0)
		return DP_ESYNTAX;
	if (r.p < r.end && ipc_get_string(&r, text) != 0)
		*text = NULL; /* the text is a courtesy: a malformed one is left out */
	return 0;
}

const char *ipc_hresult_str(uint32_t hr)
{
	switch (hr) {
	case IPC_E_BAD_ENCODING: return "the runtime could not read the request (bad encoding)";
	case IPC_E_UNKNOWN_COMMAND: return "the runtime does not know this command (older runtime)";
	case IPC_E_UNKNOWN_MAGIC: return "the runtime did not recognise the message";
	case IPC_E_FAIL: return "the runtime reported a failure";
	case 0x80131515u: return "not supported by this runtime";
	case 0x8013135Bu: return "not available yet (the runtime is still starting)";
	case 0x80070057u: return "invalid argument";
	}
	return "error";
}

/* ---- I/O ---- */

static int wait_fd(int fd, short ev, long long deadline)
{
	struct pollfd pf = { .fd = fd, .events = ev };

	for (;;) {
		int left = deadline < 0 ? -1 : (int)(deadline - clock_ms());
		int n;

		if (deadline >= 0 && left <= 0) {
			errno = ETIMEDOUT;
			return DP_EIO;
		}
		n = poll(&pf, 1, left);
		if (n > 0)
			return 0;
		if (n < 0 && errno != EINTR)
			return DP_EIO;
	}
}

/* Move exactly n bytes in one direction (send when out), waiting at most until the deadline. */
static int move_full(int fd, char *p, size_t n, int timeout_ms, bool out)
{
	long long deadline = timeout_ms < 0 ? -1 : clock_ms() + timeout_ms;
	size_t done = 0;

	while (done < n) {
		ssize_t k;

		if (wait_fd(fd, out ? POLLOUT : POLLIN, deadline) != 0)
			return DP_EIO;
		k = out ? send(fd, p + done, n - done, MSG_NOSIGNAL) : read(fd, p + done, n - done);
		if (k == 0 && !out) {
			errno = ECONNRESET; /* the peer closed before the message was whole */
			return DP_EIO;
		}
		if (k < 0) {
			if (errno == EINTR || errno == EAGAIN)
				continue;
			return DP_EIO;
		}
		done += (size_t)k;
	}
	return 0;
}

int ipc_read_full(int fd, void *p, size_t n, int timeout_ms)
{
	return move_full(fd, p, n, timeout_ms, false);
}

int ipc_write_full(int fd, const void *p, size_t n, int timeout_ms)
{
	return move_full(fd, (char *)p, n, timeout_ms, true); /* never written through when out */
}

int ipc_transact(int fd, const struct buf *req, struct ipc_header *h, struct buf *payload, int timeout_ms)
{
	uint8_t hdr[IPC_HEADER_SIZE];
	int rc;

	if ((rc = ipc_write_full(fd, req->data, req->len, timeout_ms)) != 0 ||
	    (rc = ipc_read_full(fd, hdr, sizeof(hdr), timeout_ms)) != 0)
		return rc;
	if (ipc_parse_header(hdr, h) != 0)
		return DP_ESYNTAX;
	{
		size_t n = (size_t)h->size - IPC_HEADER_SIZE, at = payload->len;

		if (buf_append(payload, NULL, 0) != 0 || n > payload->cap - payload->len)
			return DP_ETOOBIG;
		while (payload->len < at + n) {
			char tmp[4096];
			size_t want = at + n - payload->len < sizeof(tmp) ? at + n - payload->len : sizeof(tmp);

			if ((rc = ipc_read_full(fd, tmp, want, timeout_ms)) != 0)
				return rc;
			buf_append(payload, tmp, want);
		}
	}
	return 0;
}
