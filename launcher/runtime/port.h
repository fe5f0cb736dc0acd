/*
 * port.h - the agent's diagnostic port: the listening Unix socket that .NET
 * runtimes connect to (DOTNET_DiagnosticPorts=PATH,connect,...), and the table
 * of runtimes attached to it.
 *
 * One thread owns the socket. Each runtime is known by its cookie (several
 * containers of a pod can all be PID 1). A runtime seen for the first time is
 * resumed at once (ResumeRuntime is a no-op when it was not suspended), then
 * asked for its process info; after that its newest idle connection is kept
 * for the next command. A runtime whose connection went away and did not come
 * back within the grace period, with no command in flight, is dropped; a live
 * one never is.
 *
 * With connect_dir, a second thread also attaches runtimes that were not
 * configured for us, through the default sockets they listen on,
 * DIR/dotnet-diagnostic-<pid>-<key>-socket: there the runtime is the server,
 * and every command gets a connection of its own. Such a runtime is dropped
 * when its socket file goes away or refuses connections (its process died).
 * A runtime reachable both ways is one entry (same cookie).
 */
#ifndef DP_PORT_H
#define DP_PORT_H

#include <stdbool.h>
#include <stdint.h>

#include "errors.h"
#include "ipc.h"

struct port;

struct port_config {
	const char *path;       /* socket path (< 108 bytes) */
	int advert_timeout_ms;  /* a connection must advertise within this (250) */
	int grace_ms;           /* a runtime gone this long is dropped (3000) */
	unsigned max_runtimes;  /* cap on attached runtimes (64) */
	const char *connect_dir; /* also attach the default sockets in this directory; NULL = off */
};

/* Create the socket (a stale file at path is replaced), world-connectable so an app of any uid can
 * connect. 0, or DP_EINVAL (path too long, or a connect_dir too long for any socket name in it),
 * DP_EIO (bind failed) with em filled. */
int port_open(const struct port_config *cfg, struct port **out, struct err_msg *em);
/*
 * A runtime's first connection, offered to fn on the listener's thread before the runtime is resumed
 * (with the port's lock held: fn must not call the port, and must be quick). fn returns true when it took
 * fd (it owns it then: a session started on it); the runtime is resumed on its next connection. fn NULL:
 * none (set it so before ctx goes away).
 */
void port_on_first(struct port *p, bool (*fn)(void *ctx, const uint8_t cookie[16], uint64_t pid, int fd), void *ctx);
/* Start the listener thread (and the connect_dir scanner, when set). */
int port_start(struct port *p, struct err_msg *em);
/* Stop the thread, close every connection, unlink the socket. Accepts NULL. */
void port_free(struct port *p);

/* A snapshot of one attached runtime. */
struct port_runtime {
	uint8_t cookie[16];
	uint64_t pid;
	long long attached_unix_ms;   /* when it first reached the agent */
	bool have_info;
	struct ipc_process_info info; /* owned by the snapshot */
};
/* Snapshot of the attached runtimes (new array the caller frees with port_list_free). */
size_t port_list(struct port *p, struct port_runtime **out);
void port_list_free(struct port_runtime *list, size_t n);

/*
 * A connection to the runtime for one command: a new connection to its
 * default socket when it was found in connect_dir, else its idle advertised
 * connection, waiting up to timeout_ms for one. The caller owns *fd (a
 * blocking socket) and closes it when done, then calls port_release.
 * DP_ENOTFOUND when no such runtime, DP_EIO when none came in time
 * (ETIMEDOUT) or the socket refused (errno kept).
 */
int port_take(struct port *p, const uint8_t cookie[16], int timeout_ms, int *fd);
void port_release(struct port *p, const uint8_t cookie[16]);

#endif
