/*
 * api.h - the agent's HTTP API (dotnet-monitor compatible routes, parameters
 * and status codes; docs/agent/api.md). It serves what the diagnostic port
 * (port.h) has attached.
 */
#ifndef DP_API_H
#define DP_API_H

#include "config.h"
#include "http/httpd.h"
#include "launcher/runtime/port.h"

struct api;

struct eproc;
struct crule_set;
struct exceptions;

struct api_config {
	struct port *port;        /* borrowed */
	const char *socket_path;  /* for /info */
	const char *dumps_dir;    /* staging for dumps; must be shared with the app */
	const char *token;        /* bearer token; NULL = no authentication (loopback or --no-auth) */
	const char *dump_transport; /* "file" (staging file followed, default), "staged" (sent whole) or "fifo" */
	uint64_t dumps_limit;       /* cap on one staged dump, bytes; 0 = none */
	const struct egress_provider *egress; /* providers (borrowed: must outlive the api) */
	size_t n_egress;
	struct eproc *eproc;            /* the egress process (borrowed); NULL = no store is configured */
	struct metrics *metrics;        /* the /metrics store (borrowed); NULL = turned off */
	struct exceptions *exceptions;  /* the exception histories (borrowed); NULL = turned off */
	struct metrics *counters;       /* the counters sessions the collection rules read (borrowed; may be metrics) */
	const struct crule_set *rules;  /* the collection rules (borrowed: outlives the api); NULL = none */
	unsigned metrics_interval_s;    /* counters' interval for /livemetrics; 0 = 5 */
	const struct egress_provider *crashes_egress; /* Crashes:Egress (borrowed), or NULL: crashes kept */
	unsigned crashes_max_count;     /* Crashes:MaxCount; 0 = 8 */
	uint64_t crashes_max_bytes;     /* Crashes:MaxBytes; 0 = 1Gi */
	unsigned served;                /* the capture kinds served (served.h's bits); */
	bool served_set;                /* false: all of them */
};

/* New API state (copies the strings; the token is wiped when freed). Removes staging leftovers in dumps_dir
 * and partial files in the egress providers' directories. */
struct api *api_new(const struct api_config *cfg);
struct crashes;
/* The crashes watched (init mode waits on them when its app ends). Borrowed. */
struct crashes *api_crashes(struct api *a);
/* Cancels running operations and waits for them. Accepts NULL. */
void api_free(struct api *a);
/* The httpd handler; ctx is the struct api. */
void api_handle(void *ctx, struct httpd_req *r);
/* The routes that take a POST body (httpd_config.takes_body): /trace, /livemetrics, /logs, /exceptions. */
bool api_takes_body(const char *path);
/* The probe routes (httpd_config.is_probe), answered from slots no other request takes: /healthz, /readyz. */
bool api_is_probe(const char *path);
/*
 * httpd_config.admit, on the acceptor's thread, before anything else about
 * the request: the token first (when there is one; not for the open routes):
 * from an address being slowed for its refused tokens the request waits its
 * turn (HTTPD_WAIT), and a wrong or missing token is 401, counted and logged
 * (authfail.h); then the capture kind (403 naming `captures` when this agent
 * does not serve it). 401 before 403, so that a stranger learns nothing of
 * what the agent serves.
 */
enum httpd_admission api_admit(void *ctx, struct httpd_req *r, long long now_ms, long long *until_ms);
/* The same for the metrics-only listener (ctx: the api): 403 when metrics are not served. */
enum httpd_admission api_metrics_admit(void *ctx, struct httpd_req *r, long long now_ms, long long *until_ms);
struct metrics;
/* GET /metrics from the store m (NULL: 404, turned off). */
void api_metrics(struct metrics *m, struct httpd_req *r);
/* The handler of the metrics-only listener (Metrics:Endpoints); ctx is the struct api. */
void api_metrics_handle(void *ctx, struct httpd_req *r);
#define API_MAX_BODY (64u << 10) /* a providers document */

#endif
