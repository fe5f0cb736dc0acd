/*
 * nettrace.h - a streaming reader of the nettrace format: the bytes an
 * EventPipe session writes (docs/NETTRACE.md says the format in our words;
 * byte layouts with sources are in shared/reference §5).
 *
 * Push-based: feed bytes as they arrive, in chunks of any size (one byte at
 * a time gives the same result as the whole file at once). The reader calls
 * back for the Trace object, each event type's metadata, each event (its
 * header decoded, its stack resolved, its payload as bytes) and each
 * sequence point. Memory is bounded whatever the input: a block is held
 * whole only up to max_block, the metadata table and the stack cache have
 * caps, and every length is checked against what is left before it is used.
 *
 * Ownership: every pointer handed to a callback is borrowed and valid only
 * during the call, but a struct nettrace_meta, which lives until
 * nettrace_free.
 */
#ifndef DP_NETTRACE_H
#define DP_NETTRACE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "errors.h"

struct nettrace;

struct nettrace_limits {
	size_t max_block;          /* bytes of one block (the runtime's are about 100 KiB) */
	size_t max_metadata_bytes; /* all metadata kept, bytes */
	size_t max_stack_bytes;    /* the stack cache between two sequence points, bytes */
	size_t max_threads;        /* capture threads whose sequence numbers are followed */
};
extern const struct nettrace_limits nettrace_default_limits; /* 16 MiB, 64 MiB, 256 MiB, 1M threads */

/* The Trace object, first in every stream. */
struct nettrace_trace {
	uint16_t year, month, day_of_week, day, hour, minute, second, millisecond; /* UTC start */
	int64_t start_ticks;    /* the timestamp counter at the start */
	int64_t ticks_per_sec;  /* its frequency */
	uint32_t pointer_size;  /* 4 or 8: the size of a stack's addresses */
	uint32_t pid, processors;
	uint32_t sampling_ns;   /* the SampleProfiler's period */
	uint32_t version;       /* of the Trace object: 4 (V4/V5) */
};

/* A payload field as the metadata describes it (V1 fields or V2Params), in pre-order. */
enum nettrace_type {
	NT_OBJECT = 1, NT_BOOLEAN = 3, NT_CHAR = 4, NT_SBYTE = 5, NT_BYTE = 6, NT_INT16 = 7, NT_UINT16 = 8,
	NT_INT32 = 9, NT_UINT32 = 10, NT_INT64 = 11, NT_UINT64 = 12, NT_SINGLE = 13, NT_DOUBLE = 14,
	NT_DECIMAL = 15, NT_DATETIME = 16, NT_GUID = 17, NT_STRING = 18, NT_ARRAY = 19,
};
struct nettrace_field {
	const char *name;
	uint32_t type;      /* enum nettrace_type */
	uint32_t elem_type; /* NT_ARRAY: the elements' type */
	uint32_t n_fields;  /* NT_OBJECT (or an array of objects): how many fields follow as its members */
};

struct nettrace_meta {
	uint32_t id;          /* the metadata id events refer to */
	const char *provider; /* UTF-8 */
	uint32_t event_id;
	const char *name;     /* UTF-8; "" for the runtime's own events, which carry no field list */
	uint64_t keywords;
	uint32_t version, level;
	uint8_t opcode;       /* from the V5 OpCode tag, else 0 */
	const struct nettrace_field *fields; /* top-level and nested, pre-order */
	size_t n_fields;      /* all of them; the top level is those not inside another */
};

struct nettrace_event {
	const struct nettrace_meta *meta;
	uint32_t seq;
	uint64_t thread_id, capture_thread_id;
	uint32_t processor;
	uint32_t stack_id;
	const uint64_t *stack; /* instruction pointers, innermost first; NULL when none */
	size_t stack_n;
	int64_t timestamp;     /* ticks (struct nettrace_trace.ticks_per_sec) */
	uint8_t activity[16], related[16];
	const uint8_t *payload;
	size_t payload_len;
	bool sorted;
};

/* Each may be NULL. A nonzero return stops the read: nettrace_feed returns it. */
struct nettrace_callbacks {
	int (*trace)(void *ctx, const struct nettrace_trace *t);
	int (*metadata)(void *ctx, const struct nettrace_meta *m);
	int (*event)(void *ctx, const struct nettrace_event *e);
	int (*sequence_point)(void *ctx, int64_t timestamp);
};

/* A reader (new). lim NULL = nettrace_default_limits; cb NULL = count only. */
struct nettrace *nettrace_new(const struct nettrace_limits *lim, const struct nettrace_callbacks *cb, void *ctx);
/*
 * Read the next n bytes of the stream. 0; DP_ESYNTAX (not nettrace, or
 * malformed) or DP_ETOOBIG (over a cap), with em naming the byte offset and
 * what was wrong; or a callback's nonzero return. After a failure every
 * later call fails the same way.
 */
int nettrace_feed(struct nettrace *t, const void *p, size_t n, struct err_msg *em);
/* The end-of-stream tag has been read. */
bool nettrace_ended(const struct nettrace *t);
/* 0 when the stream ended at its end tag; else DP_ESYNTAX "truncated ..." (or the earlier failure) with em. */
int nettrace_finish(struct nettrace *t, struct err_msg *em);

/*
 * Reading an event's payload by hand (the runtime's own events carry no
 * field list; their layouts are the runtime's manifest): a bounded cursor.
 * A read past the end sets bad and returns 0 (or NULL); nothing is read
 * after that.
 */
struct nettrace_reader {
	const uint8_t *p, *end;
	bool bad;
};
uint16_t nettrace_u16(struct nettrace_reader *r);
uint32_t nettrace_u32(struct nettrace_reader *r);
uint64_t nettrace_u64(struct nettrace_reader *r);
/* A NUL-terminated UTF-16LE string as new UTF-8 (free it), or NULL (and bad) when it is not terminated. */
char *nettrace_utf16z(struct nettrace_reader *r);

struct nettrace_stats {
	uint64_t bytes, blocks, events, metadata, stacks, sequence_points;
	uint64_t dropped; /* events the runtime dropped: gaps in each capture thread's sequence numbers */
};
void nettrace_stats(const struct nettrace *t, struct nettrace_stats *out);
/* The Trace object, once read (else NULL). Borrowed. */
const struct nettrace_trace *nettrace_header(const struct nettrace *t);
void nettrace_free(struct nettrace *t); /* accepts NULL */
/* The wall-clock milliseconds (since the epoch) of an event's timestamp, from the trace's start and frequency. */
int64_t nettrace_wall_ms(const struct nettrace_trace *h, int64_t timestamp);

#endif
