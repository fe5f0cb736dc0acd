/*
 * rtable.c - the agent's table of runtimes (rtable.h): the entries that
 * port.c (the listener, port_take) and port_dir.c (the connect_dir scanner)
 * both keep, and the process-info questions both ask.
 */
#include "rtable.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "buf.h"
#include "log.h"
#include "clock.h"
#include "mem.h"

void rtab_emit(struct port *p, const char *event, const struct runtime *r)
{
	char cookie[37];

	ipc_cookie_guid(r->cookie, cookie);
	log_info(strcmp(event, "attached") == 0 ? "runtime attached" : "runtime detached", LOG_STR("event", event),
		 LOG_UINT("pid", r->pid), LOG_STR("uid", cookie),
		 LOG_STR("assembly", r->have_info && r->info.assembly ? r->info.assembly : ""),
		 LOG_STR("runtime", r->have_info && r->info.clr_version ? r->info.clr_version : ""));
}

struct runtime *rtab_find(struct port *p, const uint8_t cookie[16])
{
	for (size_t i = 0; i < p->n; i++)
		if (memcmp(p->rt[i].cookie, cookie, 16) == 0)
			return &p->rt[i];
	return NULL;
}

void rtab_drop(struct port *p, size_t i)
{
	struct runtime *r = &p->rt[i];

	rtab_emit(p, "detached", r);
	if (r->idle_fd >= 0)
		close(r->idle_fd);
	ipc_process_info_free(&r->info);
	free(r->path);
	p->rt[i] = p->rt[--p->n];
}

/* One command on a fresh connection, in the listener thread (resume, process info). */
int rtab_command(int fd, uint8_t set, uint8_t id, struct ipc_header *h, struct buf *payload)
{
	struct buf req;
	int rc;

	buf_init(&req, IPC_MAX_MESSAGE);
	ipc_begin(&req, set, id);
	ipc_end(&req);
	rc = ipc_transact(fd, &req, h, payload, PORT_IO_TIMEOUT_MS);
	buf_free(&req);
	return rc;
}

int rtab_ask_info(int fd, size_t try, struct ipc_process_info *out)
{
	static const struct { uint8_t id; int version; } tries[] = {
		{ IPC_PROCESS_INFO3, 3 }, { IPC_PROCESS_INFO2, 2 }, { IPC_PROCESS_INFO, 1 },
	};
	struct ipc_header h;
	struct buf pl;
	int rc;

	buf_init(&pl, IPC_MAX_MESSAGE);
	rc = rtab_command(fd, IPC_SET_PROCESS, tries[try].id, &h, &pl);
	if (rc == 0 && (h.set != IPC_SET_SERVER || h.id != IPC_SERVER_OK ||
			ipc_parse_process_info((const uint8_t *)pl.data, pl.len, tries[try].version, out) != 0))
		rc = DP_EUNSUPPORTED;
	buf_free(&pl);
	return rc;
}

/*
 * Make room by dropping the runtime gone longest (no idle connection, no
 * command in flight), even inside its grace period: a new runtime that is
 * here now matters more than one that has probably exited. False if all are live.
 */
static bool evict_gone(struct port *p)
{
	size_t victim = p->n;

	for (size_t i = 0; i < p->n; i++) {
		const struct runtime *r = &p->rt[i];

		if (r->idle_fd < 0 && r->busy == 0 && r->lost_ms && r->path == NULL &&
		    (victim == p->n || r->lost_ms < p->rt[victim].lost_ms))
			victim = i;
	}
	if (victim == p->n)
		return false;
	rtab_drop(p, victim);
	return true;
}

struct runtime *rtab_find_or_add(struct port *p, const uint8_t cookie[16], uint64_t pid)
{
	struct runtime *r = rtab_find(p, cookie);

	if (r != NULL)
		return r;
	if (p->n == p->cfg.max_runtimes && !evict_gone(p))
		return NULL;
	p->rt = mem_realloc(p->rt, (p->n + 1) * sizeof(*p->rt));
	r = &p->rt[p->n++];
	memset(r, 0, sizeof(*r));
	memcpy(r->cookie, cookie, 16);
	r->pid = pid;
	r->attached_unix_ms = clock_unix_ms();
	r->idle_fd = -1;
	return r;
}
