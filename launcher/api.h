/*
 * api.h - the agent's HTTP API (dotnet-monitor compatible routes, parameters
 * and status codes; docs/agent.md). It serves what the diagnostic port
 * (port.h) has attached.
 */
#ifndef DP_API_H
#define DP_API_H

#include "config.h"
#include "http/httpd.h"
#include "port.h"

struct api;

struct eproc;
struct crule_set;

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
	struct metrics *counters;       /* the counters sessions the collection rules read (borrowed; may be metrics) */
	const struct crule_set *rules;  /* the collection rules (borrowed: outlives the api); NULL = none */
	unsigned metrics_interval_s;    /* counters' interval for /livemetrics; 0 = 5 */
};

/* New API state (copies the strings; the token is wiped when freed). Removes staging leftovers in dumps_dir
 * and partial files in the egress providers' directories. */
struct api *api_new(const struct api_config *cfg);
/* Cancels running operations and waits for them. Accepts NULL. */
void api_free(struct api *a);
/* The httpd handler; ctx is the struct api. */
void api_handle(void *ctx, struct httpd_req *r);
/* The routes that take a POST body (httpd_config.takes_body): /trace, /livemetrics, /logs. */
bool api_takes_body(const char *path);
/* The probe routes (httpd_config.is_probe), answered from slots no other request takes: /healthz, /readyz. */
bool api_is_probe(const char *path);
/* httpd_config.admit_body: a body is read only with the token (when there is one); else 401 unread. */
bool api_admit_body(void *ctx, struct httpd_req *r);
struct metrics;
/* GET /metrics from the store m (NULL: 404, turned off). */
void api_metrics(struct metrics *m, struct httpd_req *r);
/* The handler of the metrics-only listener (Metrics:Endpoints); ctx is the struct metrics. */
void api_metrics_handle(void *ctx, struct httpd_req *r);
#define API_MAX_BODY (64u << 10) /* a providers document */

#endif
