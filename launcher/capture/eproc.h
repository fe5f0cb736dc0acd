/*
 * eproc.h - the egress process: the one part of the agent that talks to the
 * network.
 *
 * The agent proper (the diagnostic port, the runtimes' sockets, the HTTP API)
 * runs under a seccomp profile that cannot open a network socket. An artifact
 * bound for an object store (Egress:S3Storage, Egress:AzureBlobStorage) goes
 * instead to a second process, forked at startup before any thread exists,
 * which holds the stores' settings and credentials and nothing of the
 * runtimes: no diagnostic socket, no dumps directory, no HTTP listener. The
 * two speak over a SOCK_SEQPACKET socket pair, one JSON message per packet:
 *
 *   agent -> egress  U {op, provider, name, meta}  + the read end of a pipe (SCM_RIGHTS)
 *                    C {op, bytes}  the artifact is whole (the pipe is closed): commit it
 *                    A {op}         it is not: abort the upload on the store
 *   egress -> agent  P {op, bytes}  bytes sent to the store so far
 *                    D {op, location, bytes}  committed
 *                    F {op, error}  failed (the store's own words), nothing left on it
 *
 * The artifact's bytes go through the pipe as the capture makes them, so
 * neither process holds more of it than the store's part buffers. The egress
 * process dies with the agent (PR_SET_PDEATHSIG); if it dies first, every
 * upload in flight fails, and so does every later one, and /healthz says so.
 * Its own seccomp profile (SANDBOX_EGRESS) allows network sockets, and no
 * Unix-domain connect, no exec, no ptrace; files it may only read.
 */
#ifndef DP_EPROC_H
#define DP_EPROC_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/config.h"
#include "egress/store.h"
#include "errors.h"

struct eproc;
struct eproc_upload;

/*
 * Check every store provider of c and, when there is one, fork the egress
 * process (call before any thread starts). 0 with *out (NULL when no store
 * is configured); DP_EINVAL with em for a provider whose settings do not
 * hold or whose type this build lacks; DP_EIO when the process cannot start.
 * After the fork the agent wipes its copy of the stores' setting values:
 * only the egress process holds them.
 */
int eproc_start(struct launch_config *c, bool sandbox, struct eproc **out, struct err_msg *em);
/* The same with another list of stores (NULL-terminated; the unit tests' own), for this process from now on. */
int eproc_start_with(struct launch_config *c, bool sandbox, const struct egress_store *const *list, struct eproc **out,
		     struct err_msg *em);
/* Stop the egress process (uploads in flight fail) and free. NULL-safe. */
void eproc_free(struct eproc *e);
/* false once the egress process has exited (or when e is NULL). */
bool eproc_alive(struct eproc *e);

/*
 * Start an upload of the artifact name to provider p: *wfd is where its
 * bytes go (a pipe; write them all, then call eproc_close, which closes it).
 * meta: name/value pairs, NULL-terminated (pod, pid, artifact type, ...).
 * progress (may be NULL): called with the bytes the store has acknowledged,
 * as they are (from the reader thread, with a lock held: it must be quick),
 * never after eproc_close has returned.
 * DP_EIO with em when the egress process is gone.
 */
int eproc_open(struct eproc *e, const struct egress_provider *p, const char *name, const char *const *meta,
	       void (*progress)(void *ctx, uint64_t sent), void *ctx, int *wfd, struct eproc_upload **u,
	       struct err_msg *em);
/* Bytes the store has acknowledged so far (for the operation's progress). */
uint64_t eproc_sent(struct eproc_upload *u);
/*
 * End an upload: commit (the artifact is whole, bytes long) or abort. Waits
 * for the store's verdict: 0 with *location (a new string) when committed;
 * DP_EREMOTE with the store's own words when the store failed (then the
 * egress process stopped reading: a writer gets EPIPE), DP_ECANCELED when
 * aborted as asked, DP_EIO when the egress process is gone. Frees u.
 * cancel (may be NULL): once set while a commit waits on the store (the
 * last part, the completion), the upload is aborted instead (DP_ECANCELED).
 * An abort ends the store's waits at once and cleans up on the store within
 * seconds, so a store that stopped answering holds neither for long.
 */
int eproc_close(struct eproc_upload *u, bool commit, uint64_t bytes, const atomic_bool *cancel, char **location,
		struct err_msg *em);

#endif
