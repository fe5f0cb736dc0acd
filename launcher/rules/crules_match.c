/*
 * crules_match.c - which runtimes a collection rule applies to: its Filters
 * (ProcessId, ProcessName, CommandLine, ManagedEntryPointAssemblyName; all of
 * them, case-insensitive, Exact or Contains, as dotnet-monitor matches), and
 * the command line they read, asked again until the runtime's Main has run.
 */
#include "crules_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"
#include "launcher/runtime/proc.h"
#include "launcher/runtime/target.h"

#define CMDLINE_ASK_MS 1000   /* a runtime whose command line is its host's path alone is asked again this often, */
#define CMDLINE_ASK_FOR_MS 15000 /* until Main runs (the whole line) or for this long */
#define MAX_SEEN 256

static bool text_match(const char *have, size_t len, const struct crule_filter *f)
{
	if (f->contains) {
		size_t n = strlen(f->value);

		for (size_t i = 0; i + n <= len; i++)
			if (strncasecmp(have + i, f->value, n) == 0)
				return true;
		return n == 0;
	}
	return strlen(f->value) == len && strncasecmp(have, f->value, len) == 0;
}

/* Whether p (command line cmdline) matches every filter (dotnet-monitor's rule: all of them, case-insensitive). */
bool crules_filters_match(const struct crule *r, const struct port_runtime *p, const char *cmdline)
{
	for (size_t i = 0; i < r->n_filters; i++) {
		const struct crule_filter *f = &r->filters[i];
		const char *cl = cmdline ? cmdline : "";
		size_t len;
		const char *name;
		char pid[24];

		switch (f->key) {
		case CRF_PID:
			snprintf(pid, sizeof(pid), "%llu", (unsigned long long)p->pid);
			if (!text_match(pid, strlen(pid), f))
				return false;
			break;
		case CRF_NAME: { /* the name /processes shows, or the program's file name (what `ps` calls it) */
			const char *sp = strchr(cl, ' '), *sl = memrchr(cl, '/', sp ? (size_t)(sp - cl) : strlen(cl));
			const char *prog = sl ? sl + 1 : cl;

			name = target_name(p, &len);
			if (!text_match(name, len, f) && !text_match(prog, strcspn(prog, " "), f))
				return false;
			break;
		}
		case CRF_CMDLINE:
			if (!text_match(cl, strlen(cl), f))
				return false;
			break;
		case CRF_ENTRYPOINT:
			name = p->info.assembly ? p->info.assembly : "";
			if (!text_match(name, strlen(name), f))
				return false;
			break;
		}
	}
	return true;
}

/*
 * The command line filters see for runtime p: the port's copy, asked at
 * attach, is the host's path alone when Main had not run yet ("dotnet", no
 * webapp.dll); such a runtime is asked again every second for 15 s, and
 * filters that read the command line wait for that (*ready false) meanwhile.
 */
static struct seen_rt *seen_find(struct crules *e, const uint8_t cookie[16])
{
	for (size_t i = 0; i < e->n_rt; i++)
		if (memcmp(e->rt[i].cookie, cookie, 16) == 0)
			return &e->rt[i];
	return NULL;
}

/* Ask again where the line is not whole yet (the watcher's thread, without the lock: an IPC round trip). */
void crules_cmdline_refresh(struct crules *e, const struct port_runtime *p, long long now)
{
	struct seen_rt *s = seen_find(e, p->cookie);
	const char *cl = p->info.command_line ? p->info.command_line : "";

	if (!p->have_info)
		return;
	if (s == NULL) {
		if (e->n_rt == MAX_SEEN)
			return;
		e->rt = mem_realloc(e->rt, (e->n_rt + 1) * sizeof(*e->rt));
		s = &e->rt[e->n_rt++];
		*s = (struct seen_rt){ .first_ms = now, .cmdline = mem_strdup(cl), .final = strchr(cl, ' ') != NULL };
		memcpy(s->cookie, p->cookie, 16);
	}
	if (!s->final && now >= s->next_ms) {
		struct ipc_process_info fresh = { 0 };

		s->next_ms = now + CMDLINE_ASK_MS;
		if (proc_info(e->cfg.port, p->cookie, 500, &fresh) == 0 && fresh.command_line) {
			free(s->cmdline);
			s->cmdline = mem_strdup(fresh.command_line);
		}
		ipc_process_info_free(&fresh);
		s->final = strchr(s->cmdline, ' ') != NULL || now - s->first_ms >= CMDLINE_ASK_FOR_MS;
	}
}

const char *crules_cmdline_of(struct crules *e, const struct port_runtime *p, bool *ready)
{
	struct seen_rt *s = seen_find(e, p->cookie);

	*ready = s == NULL || s->final; /* past MAX_SEEN: the port's copy */
	return s ? s->cmdline : p->info.command_line;
}

/* Filters other than ProcessId need the runtime's ProcessInfo. */
bool crules_needs_info(const struct crule *r)
{
	for (size_t i = 0; i < r->n_filters; i++)
		if (r->filters[i].key != CRF_PID)
			return true;
	return false;
}

