/*
 * run.h - running one capture on many agents at once (run.c), and the
 * process listing `diagport ps` shows (ps.c).
 */
#ifndef DP_FLEET_RUN_H
#define DP_FLEET_RUN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fleet.h"

/* Exit codes of `ps` and `capture` (docs/fleet.md). */
enum {
	FLEET_EXIT_OK = 0,         /* every capture succeeded */
	FLEET_EXIT_SOME = 1,       /* some (or all) captures failed: the summary and manifest say which */
	FLEET_EXIT_USAGE = 2,      /* bad arguments, or over 10 targets without --yes */
	FLEET_EXIT_DISCOVERY = 3,  /* the targets could not be found: an API error, a bad kubeconfig or file */
	FLEET_EXIT_DENIED = 4,     /* access denied: the message names the permission missing */
	FLEET_EXIT_NOTHING = 5,    /* no target matched, or none has an agent that can be called */
	FLEET_EXIT_CANCELLED = 130 /* Ctrl-C (SIGINT) or SIGTERM: the captures were cancelled */
};

#define FLEET_MAX_PROCESSES 256 /* taken from one agent's /processes */

/* One capture, the same for every target. Strings borrowed. */
struct fleet_capture {
	const char *kind;        /* "dump", "trace", ...: file names, lines, the manifest */
	const char *method;      /* "GET" or "POST" */
	const char *route;       /* "/dump?type=Full": the agent's path and query, without pid */
	const char *accept;      /* an Accept header, or NULL */
	const char *body;        /* POST body, or NULL */
	size_t body_len;
	const char *ext;         /* ".dmp" */
	bool freezes;            /* the process stops while it runs: --max-unavailable holds */
	bool per_process;        /* one capture per .NET process (false: one per agent, /metrics) */
	const char *egress;      /* the agent writes to this provider (202 + an operation), or NULL */
	long timeout_ms;         /* each capture; 0: none */
	long duration_ms;        /* how long the agent collects (trace, cpuprofile, logs), sending little
				    meanwhile: the low-speed floor (call.h) is not armed before; 0: none */
	uint64_t max_bytes;      /* each artifact at most (--max-size); 0: none */
	bool keep_free;          /* no --max-size given: no artifact may take the output filesystem's last
				    FLEET_RESERVE_PCT percent (at most FLEET_RESERVE_MAX bytes); checked as
				    bytes arrive, so that captures together cannot fill the disk either */
};

#define FLEET_RESERVE_PCT 5
#define FLEET_RESERVE_MAX ((uint64_t)1 << 30)

struct fleet_run_opts {
	unsigned parallel;         /* captures at once (>= 1) */
	unsigned max_unavailable;  /* of one workload at once, for captures that freeze (>= 1) */
	const char *out_dir;       /* where files and manifest.json go; NULL only with egress (manifest to stdout) */
	bool tty;                  /* progress redrawn on stderr; else a log line per event */
};

/* Run c on every agent of s that can be called. Returns one of the exit codes above. */
int fleet_run_capture(const struct fleet_set *s, const struct fleet_capture *c, const struct fleet_run_opts *o);

/* An artifact's file name (new): NAMESPACE_POD_CONTAINER_PID_KIND_YYYYMMDDTHHMMSSZ.EXT (ECS: CLUSTER_TASK_...;
 * static: NAME_...), each part made safe ([A-Za-z0-9.-], others '-'); pid 0: none. */
char *fleet_artifact_name(const struct fleet_agent *a, uint64_t pid, const char *kind, const char *ext);

/*
 * Publish the whole file tmp as DIR/NAME, *name on entry, without replacing anything (2-NAME, 3-NAME ... when
 * taken; *name is then replaced by a new string). tmp is gone on success. 0, or DP_EIO with em.
 */
int fleet_publish_file(const char *dir, const char *tmp, char **name, struct err_msg *em);

/* The ProcessList document `ps -o json` prints (a new reference): every agent of s asked, parallel at once. */
json_t *fleet_ps_list(const struct fleet_set *s, unsigned parallel);

/* `diagport ps`: list the processes behind s and print them in format ("table", "wide", "json", "yaml"). */
int fleet_ps(const struct fleet_set *s, const char *format, unsigned parallel);

/* Set by SIGINT/SIGTERM once fleet_signals_install ran. */
void fleet_signals_install(void);
bool fleet_cancelled(void);

#endif
