/*
 * ui.h - `diagport ui` (fleet/ui/): the fleet client as a web page on
 * 127.0.0.1. The targets are found the way `ps` and `capture` find them,
 * again every few seconds; the page lists their processes, charts their
 * counters, runs captures into files this process keeps, and shows CPU
 * profiles, stacks and GC heap snapshots (and their differences). docs/ui.md.
 */
#ifndef DP_FLEET_UI_H
#define DP_FLEET_UI_H

#include <stdbool.h>
#include <stdint.h>

#include "errors.h"
#include "fleet/fleet.h"

struct ui_opts {
	int port;              /* on 127.0.0.1; 0: the system picks one */
	unsigned parallel;     /* agents asked at once when the list is refreshed */
	const char *out_dir;   /* the artifacts go here and stay; NULL: a private directory removed at exit */
	/*
	 * Find the targets again (a new set into *out, which is empty): the
	 * command line's discovery. 0, or a DP_E* code with em saying why.
	 */
	int (*discover)(void *ctx, struct fleet_set *out, struct err_msg *em);
	void *discover_ctx;
	void (*ready)(const char *url); /* called once with the URL to open (secret included); NULL: printed */
};

/*
 * Serve until SIGINT or SIGTERM (fleet_signals_install, which the caller ran).
 * first is the set found at the start (stolen). Returns an exit code of run.h:
 * FLEET_EXIT_OK when stopped by a signal, FLEET_EXIT_USAGE when the port cannot
 * be bound or the output directory made (said on stderr).
 */
int ui_run(const struct ui_opts *o, struct fleet_set *first);

#endif
