/*
 * crashes.h - a crash's evidence kept and shipped. The runtime writes a dump
 * and a crash report into the dumps volume when an app dies of an unhandled
 * exception (DOTNET_DbgEnableMiniDump, DOTNET_EnableCrashReport; the
 * injector and init mode set them, naming the files CRASH_NAME). The agent
 * notices them, records the crash (GET /crashes: who, when, the exception
 * from its history or the report, where each file is), ships the files to
 * an egress provider when Crashes:Egress says so (removing them once
 * stored), and keeps the volume from filling in a crash loop (a count and a
 * size cap, the oldest crash dropped first). Files found at start are
 * evidence too: nothing is lost when the agent restarts.
 * docs/agent/crashes.md.
 */
#ifndef DP_CRASHES_H
#define DP_CRASHES_H

#include <jansson.h>
#include <stdint.h>

#include "launcher/config.h"

/* The dump's name the runtime is given, in the dumps directory; the report is NAME.crashreport.json. */
#define CRASH_PREFIX "crash-"
#define CRASH_NAME CRASH_PREFIX "%p-%t-%e.dmp" /* the injector gives the same (its crash-dumps option) */
#define CRASH_DEFAULT_COUNT 8
#define CRASH_DEFAULT_BYTES (1ull << 30)

struct crashes;
struct captures;
struct ops;
struct port;
struct exceptions;

struct crashes_config {
	struct port *port;             /* borrowed: which runtimes still run */
	const char *dir;               /* the dumps directory */
	struct captures *captures;     /* borrowed: shipping runs as a capture of the file */
	struct ops *ops;               /* borrowed: its operation waited for */
	struct exceptions *exceptions; /* borrowed, or NULL: the exception's message and stack */
	const struct egress_provider *egress; /* Crashes:Egress (borrowed), or NULL: kept in the volume */
	unsigned max_count;            /* crashes' files kept in the volume (0: CRASH_DEFAULT_COUNT) */
	uint64_t max_bytes;            /* their bytes (0: half of dumps_limit, at most CRASH_DEFAULT_BYTES) */
	uint64_t dumps_limit;          /* the volume's dump cap (--dumps-limit, the injector's from its size limit), or 0 */
	unsigned op_needs;             /* the permission a caller needs to see a shipment's operation (ops_add) */
};
/* Start watching dir (a thread). */
struct crashes *crashes_start(const struct crashes_config *cfg);
/* Stop (a shipment under way is cancelled: its files stay for the next start). Accepts NULL. */
void crashes_free(struct crashes *c);
/* GET /crashes: the crashes seen, newest first (new reference). */
json_t *crashes_json(struct crashes *c);
/*
 * Init mode: the app (pid) ended with this wait status. When it died of a
 * signal, the crash it left is recorded with it and its evidence shipped:
 * returns once every crash seen is shipped (or kept: no egress), or
 * timeout_ms has passed.
 */
void crashes_app_ended(struct crashes *c, uint64_t pid, int status, int timeout_ms);

#endif
