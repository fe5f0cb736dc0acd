/*
 * rtable.h - what port.c (the listener, port_take) and port_dir.c (the
 * connect_dir scanner) share: the port's state, its runtime table and the
 * helpers that change it (rtable.c). Not for other files: they use port.h.
 * port.c calls into port_dir.c (port_dir.h); both call into rtable.c, which
 * calls neither.
 *
 * Every function here that touches p->rt is called with p->mu held.
 */
#ifndef DP_RTABLE_H
#define DP_RTABLE_H

#include <pthread.h>

#include "port.h"

#define PORT_IO_TIMEOUT_MS 2000 /* resume and process-info answers are immediate; this is a safety net */
#define PORT_SOCKET_PREFIX "dotnet-diagnostic-" /* a runtime's default socket: PREFIX<pid>-<key>-socket */

struct runtime {
	uint8_t cookie[16];
	uint64_t pid;
	long long attached_unix_ms; /* when it first reached us (wall clock): /process's attachedDateTime */
	int idle_fd;          /* newest idle advertised connection, or -1 */
	int busy;             /* commands in flight */
	int stage;            /* 0: needs resume; 1-3: asking ProcessInfo3, 2, 1 (one per connection); 4: ready */
	long long lost_ms;    /* when its idle connection went away (0 = it has one) */
	bool hung_up;         /* the runtime closed its idle connection: it has exited (no grace period) */
	bool via_port;        /* has advertised on our socket at least once */
	bool offered;         /* its first connection went to port_on_first's fn */
	char *path;           /* its default socket in connect_dir while that accepts connections, or NULL */
	bool have_info;
	struct ipc_process_info info;
};

struct port_scan; /* port_dir.c's own */

struct port {
	struct port_config cfg;
	char *path, *dir;     /* dir: connect_dir without trailing slashes, or NULL */
	int listen_fd;
	int wake[2];
	pthread_t thread;
	bool started, stopping;
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct runtime *rt;
	size_t n;
	struct port_scan *scan; /* with connect_dir */
	bool (*on_first)(void *ctx, const uint8_t cookie[16], uint64_t pid, int fd); /* port_on_first's */
	void *on_first_ctx;
};

/* The log line about runtime r (event "attached" or "detached"). */
void rtab_emit(struct port *p, const char *event, const struct runtime *r);
/* The entry for cookie (borrowed, valid until the lock is released), or NULL. */
struct runtime *rtab_find(struct port *p, const uint8_t cookie[16]);
/*
 * The entry for cookie (borrowed), a new empty one when there is none; when
 * the table is full (max_runtimes), the runtime gone longest makes room. NULL
 * when the table is full of live runtimes.
 */
struct runtime *rtab_find_or_add(struct port *p, const uint8_t cookie[16], uint64_t pid);
/* Forget entry i, with a "detached" line; the caller checked that no command is in flight. */
void rtab_drop(struct port *p, size_t i);
/* One command without a payload on fd (resume, process info), answered within PORT_IO_TIMEOUT_MS. */
int rtab_command(int fd, uint8_t set, uint8_t id, struct ipc_header *h, struct buf *payload);
/*
 * ProcessInfo3 (try 0), ProcessInfo2 (1) or ProcessInfo (2) on fd. 0 with *out
 * filled (new strings); DP_EUNSUPPORTED when the runtime answered anything
 * else (an older runtime answers UNKNOWN_COMMAND: ask the older command, on a
 * new connection); DP_EIO when the connection failed (errno kept).
 */
int rtab_ask_info(int fd, size_t try, struct ipc_process_info *out);

#endif
