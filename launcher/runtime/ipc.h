/*
 * ipc.h - the .NET diagnostics IPC protocol, the subset diagport speaks
 * (docs/PROTOCOL.md says it in our words; byte layouts with sources are in
 * shared/reference/dotnet-diagnostics-protocol.md).
 *
 * Two layers. Encoding and decoding are pure functions over bytes, every
 * length checked against what is left before it is used, so they can be fed
 * untrusted input (tests/fuzz/fuzz_ipc.c). The I/O helpers move whole
 * messages over a connected socket with a deadline, never blocking forever.
 *
 * Ownership: strings returned in structs are new, owned by the struct and
 * freed by its _free function; buffers are the caller's.
 */
#ifndef DP_IPC_H
#define DP_IPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"

#define IPC_ADVERTISE_SIZE 34
#define IPC_HEADER_SIZE 20
#define IPC_MAX_MESSAGE 65535
#define IPC_MAX_STRING 32768 /* UTF-16 code units we accept in one string */

enum ipc_cmdset { IPC_SET_DUMP = 0x01, IPC_SET_EVENTPIPE = 0x02, IPC_SET_PROFILER = 0x03, IPC_SET_PROCESS = 0x04,
		  IPC_SET_SERVER = 0xFF };
enum {
	IPC_DUMP_GENERATE = 0x01, IPC_DUMP_GENERATE2 = 0x02, IPC_DUMP_GENERATE3 = 0x03,
	IPC_PROCESS_INFO = 0x00, IPC_PROCESS_RESUME = 0x01, IPC_PROCESS_ENV = 0x02, IPC_PROCESS_INFO2 = 0x04,
	IPC_PROCESS_INFO3 = 0x08, IPC_PROCESS_PERFMAP_ENABLE = 0x05, IPC_PROCESS_PERFMAP_DISABLE = 0x06,
	IPC_SERVER_OK = 0x00, IPC_SERVER_ERROR = 0xFF,
};
/* HRESULTs the runtime answers with. */
#define IPC_E_BAD_ENCODING 0x80131384u
#define IPC_E_UNKNOWN_COMMAND 0x80131385u
#define IPC_E_UNKNOWN_MAGIC 0x80131386u
#define IPC_E_FAIL 0x80004005u
#define IPC_E_NOTSUPPORTED 0x80131515u

/* Dump types of GenerateCoreDump*. */
enum ipc_dump_type { IPC_DUMP_NORMAL = 1, IPC_DUMP_WITHHEAP = 2, IPC_DUMP_TRIAGE = 3, IPC_DUMP_FULL = 4 };

/* The 34-byte advertise a runtime sends on each connection it opens to us. */
struct ipc_advert {
	uint8_t cookie[16]; /* runtime instance id: the identity, not the pid */
	uint64_t pid;       /* in the runtime's own pid namespace */
};
/* 0, or DP_ESYNTAX when n != 34 or the magic is wrong. */
int ipc_parse_advert(const uint8_t *b, size_t n, struct ipc_advert *out);
/* The cookie as 32 lowercase hex digits plus NUL (dotnet-monitor calls it the process uid's source). */
void ipc_cookie_hex(const uint8_t cookie[16], char out[33]);
/* The cookie as a GUID string "xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx" (little-endian fields, as .NET prints it). */
void ipc_cookie_guid(const uint8_t cookie[16], char out[37]);

/* ---- requests ---- */
/* Start a request for (set, id) in b (b is reset). */
void ipc_begin(struct buf *b, uint8_t set, uint8_t id);
void ipc_put_u8(struct buf *b, uint8_t v);
void ipc_put_u32(struct buf *b, uint32_t v);
void ipc_put_u64(struct buf *b, uint64_t v);
/* A string: UTF-8 in, u32 count of UTF-16 units including the NUL, then UTF-16LE. DP_EINVAL on bad UTF-8. */
int ipc_put_string(struct buf *b, const char *utf8);
/* Patch the size field. DP_ETOOBIG when the message passes 65535 bytes. */
int ipc_end(struct buf *b);

/* ---- responses ---- */
struct ipc_header {
	uint16_t size; /* whole message, header included */
	uint8_t set, id;
};
/* 0, or DP_ESYNTAX for a wrong magic or size < 20. */
int ipc_parse_header(const uint8_t b[IPC_HEADER_SIZE], struct ipc_header *h);

/* A bounded cursor over a payload. */
struct ipc_reader {
	const uint8_t *p, *end;
};
int ipc_get_u16(struct ipc_reader *r, uint16_t *v);
int ipc_get_u32(struct ipc_reader *r, uint32_t *v);
int ipc_get_u64(struct ipc_reader *r, uint64_t *v);
int ipc_get_bytes(struct ipc_reader *r, void *out, size_t n);
/* A string as new UTF-8 (NULL for the null string, count 0). DP_ESYNTAX when malformed or over IPC_MAX_STRING. */
int ipc_get_string(struct ipc_reader *r, char **out);

/* ProcessInfo (version 1), ProcessInfo2 (2) or ProcessInfo3 (3). */
struct ipc_process_info {
	uint64_t pid;
	uint8_t cookie[16];
	char *command_line, *os, *arch; /* all versions */
	char *assembly, *clr_version;   /* version >= 2 */
	char *rid;                      /* version 3 */
};
int ipc_parse_process_info(const uint8_t *p, size_t n, int version, struct ipc_process_info *out);
void ipc_process_info_free(struct ipc_process_info *pi);

/* The environment block of ProcessEnvironment's continuation: count, then NAME=VALUE strings. */
int ipc_parse_env(const uint8_t *p, size_t n, char ***vars, size_t *count);
void ipc_env_free(char **vars, size_t count);

/* ---- I/O on a connected socket, with a deadline (milliseconds; < 0 = none) ---- */
/* Read exactly n bytes. DP_EIO on error or early EOF (errno kept; ECONNRESET for EOF), DP_ENOTFOUND... never; ETIMEDOUT on deadline. */
int ipc_read_full(int fd, void *p, size_t n, int timeout_ms);
int ipc_write_full(int fd, const void *p, size_t n, int timeout_ms);
/*
 * Send the request in req and read the response header and payload (the
 * payload is at most IPC_MAX_MESSAGE - 20 bytes, appended to *payload).
 * An Error response is returned as 0 with h->set == IPC_SET_SERVER and
 * h->id == IPC_SERVER_ERROR; the caller reads the HRESULT from the payload.
 */
int ipc_transact(int fd, const struct buf *req, struct ipc_header *h, struct buf *payload, int timeout_ms);
/* The HRESULT of an Error payload, and the text GenerateCoreDump3 adds (new string or NULL). */
int ipc_parse_error(const uint8_t *p, size_t n, uint32_t *hresult, char **text);
/* Text for an HRESULT the runtime uses ("unknown command", ...). */
const char *ipc_hresult_str(uint32_t hr);

#endif
