/*
 * dump.h - taking a dump of an attached runtime through a named pipe.
 *
 * Every dump goes the same way: the agent creates a FIFO (mode 0666, so an
 * app of any uid can write it) at a path in the dumps directory and asks the
 * runtime for GenerateCoreDump3 (then 2, then 1 on runtimes that do not know
 * the newer command) with that path. The runtime's createdump opens the FIFO
 * and writes the core sequentially; the agent reads it. What the agent does
 * with the bytes is the caller's choice: stream them to an HTTP client
 * (dump_read), or copy them into a file it owns, with a size cap and a cancel
 * flag (dump_copy), which may hand some straight on instead (dump_on_pipe). Closing the read end early makes createdump fail with
 * EPIPE and the runtime answer with an error; the app itself runs on.
 */
#ifndef DP_DUMP_H
#define DP_DUMP_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "errors.h"
#include "launcher/runtime/port.h"

struct dump_job;

/*
 * Create the FIFO at fifo_path, send the dump command of `type` (IPC_DUMP_*)
 * to runtime `cookie`, and wait until createdump writes its first byte. 0 with
 * a new *out; on failure the FIFO is removed and em says why (the runtime's
 * own error text when it refused: DP_EREFUSED; DP_ENOTFOUND when the runtime
 * is gone; DP_EIO otherwise).
 */
int dump_start(struct port *port, const uint8_t cookie[16], const char *fifo_path, int type,
	       struct dump_job **out, struct err_msg *em);

/*
 * Read up to max bytes of the dump: the count, 0 at the end when the runtime
 * reported success, -1 when the dump failed (createdump died, the runtime
 * reported an error, nothing came for the stall timeout). For streaming.
 */
long dump_read(struct dump_job *j, char *out, size_t max);

/*
 * Copy the whole dump into fd (a file opened for writing at offset 0), then
 * wait for the runtime's verdict. cap > 0 limits the bytes written; *cancel
 * (may be NULL) is checked at least every 200 ms. 0 with *written set, or:
 * DP_ETOOBIG (over the cap, or the volume is full), DP_ECANCELED, DP_EREFUSED
 * (the runtime's error), DP_EIO; em says which. On failure the read end is
 * closed at once so createdump stops.
 */
int dump_copy(struct dump_job *j, int fd, uint64_t cap, const atomic_bool *cancel, uint64_t *written,
	      struct err_msg *em);

/*
 * Have fn(ctx, total) called by dump_copy after every piece it wrote, with
 * the bytes in fd so far (never more than the cap), on dump_copy's thread:
 * how a reader of the same file follows the writer.
 */
void dump_on_progress(struct dump_job *j, void (*fn)(void *ctx, uint64_t total), void *ctx);

/*
 * Have fn(ctx, rfd) offered the pipe by dump_copy before every move into fd,
 * on dump_copy's thread: it may take bytes from rfd itself (the count; they
 * never reach fd or the cap), take none (0: the copy moves what the pipe
 * holds into fd), or fail (-1: the copy stops, DP_ECANCELED). How a download
 * that keeps up takes the dump without the file.
 */
void dump_on_pipe(struct dump_job *j, long long (*fn)(void *ctx, int rfd), void *ctx);

/* Close everything, release the runtime's connection, remove the FIFO if still there. Accepts NULL. */
void dump_free(struct dump_job *j);

/* IPC_DUMP_* for a dotnet-monitor type name (Mini, Triage, WithHeap, Full; NULL = WithHeap), or -1. */
int dump_type(const char *name);

/*
 * How a dump sent to the client travels (docs/agent/dump.md, Transports):
 * FILE, the default: staged into a file the download follows as it grows
 * (chunked); STAGED: the same file, sent once whole with its length; FIFO:
 * straight from the pipe, the app stopped until the client has read it all.
 */
enum dump_transport { DUMP_VIA_FILE, DUMP_VIA_STAGED, DUMP_VIA_FIFO };
/* The dump_transport of "file", "staged" or "fifo" (NULL = file), or -1. */
int dump_transport(const char *name);

/* "core_YYYYMMDD_HHMMSS" (UTC, now), the name dotnet-monitor gives a dump. */
void dump_filename(char *out, size_t n);

#endif
