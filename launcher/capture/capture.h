/*
 * capture.h - a capture as a value, and the one function that runs it.
 *
 * A capture says what (a dump of a type, a trace of some providers, a CPU
 * profile, live metrics, logs, stacks, a GC heap snapshot; a duration and a
 * format), from which process, and into which sink: the HTTP response of the
 * request that asked, an egress provider, or a file. An HTTP request is
 * parsed into one once (capture_from_request, with dotnet-monitor-shaped
 * validation errors); a collection rule can build one directly. capture_run
 * takes it from there: the kind's concurrency limit (dotnet-monitor's: one
 * dump, one GC snapshot, one stacks capture, three traces, three live
 * metrics and three log streams at a time; three exception histories written), an operation in /operations
 * when it goes to a sink of its own or can be stopped, the artifact made and
 * sent, and the outcome reported to the operation. Nothing is left half
 * written under a final name: a failed capture leaves no file.
 */
#ifndef DP_CAPTURE_H
#define DP_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "launcher/config.h"
#include "errors.h"
#include "http/httpd.h"
#include "launcher/exceptions/exceptions.h"
#include "launcher/trace/logs.h"
#include "launcher/metrics/metrics.h"
#include "ops.h"
#include "launcher/runtime/port.h"
#include "launcher/profile/profile.h"
#include "launcher/trace/trace.h"

enum capture_kind {
	CAPTURE_DUMP,
	CAPTURE_TRACE,   /* a nettrace stream */
	CAPTURE_PROFILE, /* a trace made into a CPU profile */
	CAPTURE_LIVEMETRICS,
	CAPTURE_LOGS,
	CAPTURE_STACKS,
	CAPTURE_GCDUMP,
	CAPTURE_EXCEPTIONS, /* the exception history, written out */
	CAPTURE_FILE,       /* a file already written (a crash's dump or report), shipped as it is */
	CAPTURE_KINDS
};

enum capture_stacks_format { CAPTURE_STACKS_TEXT, CAPTURE_STACKS_JSON, CAPTURE_STACKS_SPEEDSCOPE };
enum capture_gcdump_format {
	CAPTURE_GCDUMP_TEXT, CAPTURE_GCDUMP_JSON, CAPTURE_GCDUMP_NETTRACE, CAPTURE_GCDUMP_FILE, CAPTURE_GCDUMP_PPROF
};

struct capture {
	enum capture_kind kind;
	struct port_runtime target;   /* its info owned */
	long long duration_ms;        /* traces, profiles, live metrics, logs: -1 = until stopped */
	int format;                   /* the kind's: IPC_DUMP_* type, enum profile_format, logs_format, the enums above */
	int engine;                   /* a CPU profile's: enum profile_engine */
	struct profile_perf perf;     /* a CPU profile with the perf engine: its settings */
	size_t top;                   /* GC snapshot: the largest types listed (0 = all) */
	int transport;                /* a dump to the response: enum dump_transport (file, staged, fifo) */
	struct trace_config session;  /* traces, live metrics, logs: the session to ask for */
	struct trace_stop_event *stop_event; /* a trace: the event that ends it (owned), or NULL */
	struct metrics_selection sel; /* live metrics: what to keep */
	struct logs_filter filter;    /* logs */
	struct exc_filters exc;       /* exceptions: which are written */
	char *src_path;               /* a file capture: the file */
	char *name;                   /* the artifact's name, or NULL: dotnet-monitor's (a file capture: its own) */
	unsigned op_needs;            /* the permission bits that see its operation (ops_add's needs), or 0 */
	const struct egress_provider *egress; /* the sink: an egress provider (borrowed), */
	char *file;                     /* or a file (a path that must not exist yet), */
					/* or neither: the HTTP response */
	char *tags;                   /* the operation's tags (comma-separated), or NULL */
	/* who asked, for the log line of every capture: what the agent can tell of its caller */
	char peer[48];                /* the client's address ("" when not over HTTP) */
	bool token;                   /* it presented the agent's token (false: no token is configured) */
	char *caller;                 /* the X-Diagport-Caller header (who the fleet client says it acts for:
					 a claim, not a proof), at most 256 bytes, or NULL */
};
/* Free what c owns (accepts a zeroed capture). */
void capture_free(struct capture *c);

/* What request parsing needs to know of the agent. */
struct capture_env {
	struct port *port;
	const struct egress_provider *egress; /* the providers */
	size_t n_egress;
	int dump_transport;             /* dumpTransport: enum dump_transport */
	unsigned metrics_interval_s;    /* counters' interval for /livemetrics and the Metrics trace profile */
	bool exceptions;                /* exception histories are kept */
};

/* Why a request is refused: an HTTP status, a title, the field at fault (NULL: none) and a sentence. */
struct capture_problem {
	unsigned status;
	const char *title;
	const char *field;
	struct err_msg em;
};

/*
 * Parse request r on the route of kind (CAPTURE_TRACE becomes
 * CAPTURE_PROFILE when r asks for a profile format) into *out: the query
 * parameters, the body of a POST, the Accept header, the process. 0, or -1
 * with *p filled (out untouched).
 */
int capture_from_request(const struct capture_env *env, struct httpd_req *r, enum capture_kind kind,
			 struct capture *out, struct capture_problem *p);
/* Answer r with p (application/problem+json; a field's 400 in ASP.NET's validation shape). */
void capture_send_problem(struct httpd_req *r, const struct capture_problem *p);

struct captures;
struct eproc;

struct captures_config {
	struct port *port;     /* borrowed */
	struct ops *ops;       /* borrowed: the operations list */
	const char *dumps_dir; /* staging for dumps, shared with the app */
	uint64_t dumps_limit;  /* cap on one staged dump, bytes; 0 = none */
	struct eproc *eproc;   /* borrowed: the egress process, for the stores' providers; NULL = none */
	struct exceptions *exceptions; /* borrowed: the histories; NULL = none kept */
};
/* New runner state (the strings copied). Removes staging leftovers a killed agent left in dumps_dir. */
struct captures *captures_new(const struct captures_config *cfg);
/* Accepts NULL. The operations list must have been freed first (it waits for running captures). */
void captures_free(struct captures *cs);

/*
 * Run c (taken: *c is zeroed). With r, answer it: 429 when the kind's limit
 * is reached; the artifact (streamed as it is made, or whole) or a problem
 * when the sink is the response; 202 with Location: /operations/{id} when it
 * is an egress provider or a file, the capture then running on a thread of
 * its own. Without r (a capture nobody waits for), the same but for the
 * answer: 0 with the operation's id in op_id, or DP_ETOOBIG at the limit,
 * DP_EINVAL when the sink is the response.
 */
int capture_run(struct captures *cs, struct capture *c, struct httpd_req *r, char op_id[37]);

#endif
