/*
 * server_routes.c - what the webhook answers (server_int.h): the route
 * table, one row per path, and its handlers: /mutate and its variants (an
 * AdmissionReview through review.c, logged at the level its outcome calls
 * for), /metrics (Prometheus text from the server's counters), the probes.
 */
#include "server_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "log.h"

static const double buckets_ms[WH_N_BUCKETS] = { 0.5, 1, 2, 5, 10, 25, 50, 100, 250 };

static enum MHD_Result metrics(struct webhook *w, struct MHD_Connection *c)
{
	struct buf b;
	unsigned long long cum = 0, hits, misses, shed_bytes, shed_slots;
	enum MHD_Result rc;

	buf_init(&b, 1 << 20);
	buf_puts(&b, "# HELP diagport_webhook_admissions_total AdmissionReviews answered, by path and outcome.\n"
		     "# TYPE diagport_webhook_admissions_total counter\n");
	for (int ns = 0; ns < 2; ns++)
		for (int o = 0; o < REVIEW_N_OUTCOMES; o++)
			buf_printf(&b, "diagport_webhook_admissions_total{path=\"%s\",outcome=\"%s\"} %llu\n",
				   ns ? "/mutate/namespace" : "/mutate", review_outcome_name((enum review_outcome)o),
				   atomic_load(&w->outcomes[ns][o]));
	buf_printf(&b, "# HELP diagport_webhook_rejected_requests_total Requests that were not a well-formed "
		       "AdmissionReview (400), too large (413), or whose body did not fit in the budget for bodies "
		       "in flight (503).\n# TYPE diagport_webhook_rejected_requests_total counter\n"
		       "diagport_webhook_rejected_requests_total{reason=\"malformed\"} %llu\n"
		       "diagport_webhook_rejected_requests_total{reason=\"too_big\"} %llu\n"
		       "diagport_webhook_rejected_requests_total{reason=\"busy\"} %llu\n",
		   atomic_load(&w->malformed), atomic_load(&w->too_big), atomic_load(&w->busy));
	budget_stats(w->budget, &shed_bytes, &shed_slots);
	buf_printf(&b, "# HELP diagport_webhook_closed_connections_total Connections the webhook closed while a request "
		       "came: shed for an ordinary review's body (the slowest uploads), shed for a connection slot (the "
		       "longest waiting), or a body under the minimum rate.\n"
		       "# TYPE diagport_webhook_closed_connections_total counter\n"
		       "diagport_webhook_closed_connections_total{reason=\"shed-for-body\"} %llu\n"
		       "diagport_webhook_closed_connections_total{reason=\"shed-for-slot\"} %llu\n"
		       "diagport_webhook_closed_connections_total{reason=\"slow-body\"} %llu\n",
		   shed_bytes, shed_slots, atomic_load(&w->slow));
	buf_printf(&b, "# HELP diagport_webhook_certificate_reloads_total Key pair reloads, by result.\n"
		       "# TYPE diagport_webhook_certificate_reloads_total counter\n"
		       "diagport_webhook_certificate_reloads_total{result=\"ok\"} %llu\n"
		       "diagport_webhook_certificate_reloads_total{result=\"failed\"} %llu\n",
		   atomic_load(&w->reloads), atomic_load(&w->reload_failures));
	buf_printf(&b, "# HELP diagport_webhook_config_reloads_total Configuration file reloads, by result.\n"
		       "# TYPE diagport_webhook_config_reloads_total counter\n"
		       "diagport_webhook_config_reloads_total{result=\"ok\"} %llu\n"
		       "diagport_webhook_config_reloads_total{result=\"failed\"} %llu\n",
		   atomic_load(&w->cfg_reloads), atomic_load(&w->cfg_failures));
	rcache_stats(w->cache, &hits, &misses);
	buf_printf(&b, "# HELP diagport_webhook_review_cache_lookups_total Reviews looked up among the answers kept for "
		       "repeated requests (a ReplicaSet's replicas), by result.\n"
		       "# TYPE diagport_webhook_review_cache_lookups_total counter\n"
		       "diagport_webhook_review_cache_lookups_total{result=\"hit\"} %llu\n"
		       "diagport_webhook_review_cache_lookups_total{result=\"miss\"} %llu\n",
		   hits, misses);
	buf_puts(&b, "# HELP diagport_webhook_admission_seconds Time to answer an AdmissionReview.\n"
		     "# TYPE diagport_webhook_admission_seconds histogram\n");
	for (size_t i = 0; i < WH_N_BUCKETS; i++) {
		cum += atomic_load(&w->hist[i]);
		buf_printf(&b, "diagport_webhook_admission_seconds_bucket{le=\"%g\"} %llu\n", buckets_ms[i] / 1000, cum);
	}
	cum += atomic_load(&w->hist[WH_N_BUCKETS]);
	buf_printf(&b, "diagport_webhook_admission_seconds_bucket{le=\"+Inf\"} %llu\n"
		       "diagport_webhook_admission_seconds_sum %.6f\ndiagport_webhook_admission_seconds_count %llu\n",
		   cum, (double)atomic_load(&w->sum_us) / 1e6, cum);
	rc = wh_reply(c, 200, "text/plain; version=0.0.4", b.data, b.len);
	buf_free(&b);
	return rc;
}

static void observe(struct webhook *w, double ms)
{
	size_t i = 0;

	while (i < WH_N_BUCKETS && ms > buckets_ms[i])
		i++;
	atomic_fetch_add(&w->hist[i], 1);
	atomic_fetch_add(&w->sum_us, (unsigned long long)(ms * 1000));
}

static double now_ms(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec * 1000 + (double)t.tv_nsec / 1e6;
}

static const char *mutate_path(bool ns_enabled, bool no_ptrace)
{
	static const char *const paths[2][2] = { { "/mutate", "/mutate/no-ptrace" },
						 { "/mutate/namespace", "/mutate/namespace/no-ptrace" } };

	return paths[ns_enabled][no_ptrace];
}

/*
 * A pod that asked for diagnostics is logged at info (warn when refused,
 * error when we failed); one that did not ask, at debug. With the annotation
 * default every pod created in the cluster reaches the webhook, so those are
 * most answers, and a line each would be most of the log and, at saturation,
 * a quarter of the CPU (docs/BENCHMARKS.md, "webhook clean-up").
 */
static enum log_level admission_level(enum review_outcome o)
{
	switch (o) {
	case REVIEW_SKIPPED_NOT_OPTED:
	case REVIEW_SKIPPED_NOT_POD_CREATE:
	case REVIEW_SKIPPED_EXCLUDED: return LOG_DEBUG;
	case REVIEW_REFUSED: return LOG_WARN;
	case REVIEW_ERROR: return LOG_ERROR;
	default: return LOG_INFO;
	}
}

/*
 * What an admission line says about the request: its uid (what the API
 * server's own logs and audit events carry), read from the answer review.c
 * wrote, which starts with a fixed prefix; and for a refused pod the reason,
 * the answer's first warning. Both only when the line will be written.
 */
#define ANSWER_PREFIX "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":"
static void answer_facts(const struct buf *out, bool reason, char uid[128], char why[512])
{
	size_t p = sizeof(ANSWER_PREFIX) - 1, n = 0;
	json_t *j = NULL;

	uid[0] = why[0] = '\0';
	if (out->len < p + 2 || memcmp(out->data, ANSWER_PREFIX, p) != 0)
		return;
	while (p + 1 + n < out->len && n < 127 && out->data[p + 1 + n] != '"' && out->data[p + 1 + n] != '\\')
		n++;
	if (p + 1 + n < out->len && out->data[p + 1 + n] == '"') {
		memcpy(uid, out->data + p + 1, n); /* a plain literal, as the API server's UUIDs are */
		uid[n] = '\0';
	} else {
		reason = true; /* escapes: let the JSON reader take it */
	}
	if (!reason || (j = json_loadb(out->data, out->len, 0, NULL)) == NULL)
		return;
	if (!uid[0])
		snprintf(uid, 128, "%s", json_string_value(json_object_get(json_object_get(j, "response"), "uid")) ?: "");
	snprintf(why, 512, "%s",
		 json_string_value(json_array_get(json_object_get(json_object_get(j, "response"), "warnings"), 0)) ?: "");
	json_decref(j);
}

enum MHD_Result wh_busy(struct webhook *w, struct MHD_Connection *c)
{
	char detail[160];

	atomic_fetch_add(&w->busy, 1);
	snprintf(detail, sizeof(detail), "the request bodies in flight fill the webhook's %zu-byte budget; retry",
		 w->cfg.body_budget);
	log_warn("request rejected", LOG_STR("event", "rejected"), LOG_INT("status", 503), LOG_STR("reason", detail));
	return wh_problem_with(c, 503, "Service Unavailable", detail, "Retry-After", "1");
}

enum MHD_Result wh_too_big(struct webhook *w, struct MHD_Connection *c)
{
	char detail[128];

	atomic_fetch_add(&w->too_big, 1);
	snprintf(detail, sizeof(detail), "the request body is over %zu bytes", w->cfg.max_body);
	log_warn("request rejected", LOG_STR("event", "rejected"), LOG_INT("status", 413), LOG_STR("reason", detail));
	return wh_problem(c, 413, "Content Too Large", detail);
}

static enum MHD_Result mutate(struct webhook *w, struct MHD_Connection *c, struct req *q, bool ns_enabled,
				     bool no_ptrace)
{
	struct review_config rc_cfg = { .base = &w->wc.opts, .policy = &w->wc.enforce, .namespace_enabled = ns_enabled, .no_ptrace = no_ptrace,
					.max_body = w->cfg.max_body, .excluded = w->wc.excluded,
					.n_excluded = w->wc.n_excluded, .cache = w->cache };
	enum review_outcome o;
	struct err_msg em;
	struct buf out;
	double t0 = now_ms(), ms;
	enum MHD_Result r;
	int rc;

	if (q->busy)
		return wh_busy(w, c);
	if (q->too_big)
		return wh_too_big(w, c);
	buf_init(&out, (size_t)128 << 20);
	pthread_rwlock_rdlock(&w->cfg_lock);
	rc = review_admit(&rc_cfg, q->body.data ? q->body.data : "", q->body.len, &out, &o, &em);
	pthread_rwlock_unlock(&w->cfg_lock);
	ms = now_ms() - t0;
	if (rc != 0) {
		bool big = rc == DP_ETOOBIG; /* over a cap of the reader (nodes, depth) */

		atomic_fetch_add(big ? &w->too_big : &w->malformed, 1);
		buf_free(&out);
		log_warn("request rejected", LOG_STR("event", "rejected"), LOG_INT("status", big ? 413 : 400),
			 LOG_STR("reason", em.text), LOG_NUM("ms", ms));
		return wh_problem(c, big ? 413 : 400, big ? "Content Too Large" : "Bad Request", em.text);
	}
	atomic_fetch_add(&w->outcomes[ns_enabled][o], 1);
	observe(w, ms);
	if (log_enabled(admission_level(o))) {
		char uid[128], why[512];

		answer_facts(&out, o == REVIEW_REFUSED || o == REVIEW_ERROR, uid, why);
		if (why[0])
			log_at(admission_level(o), "admission", LOG_STR("event", "admission"),
			       LOG_STR("path", mutate_path(ns_enabled, no_ptrace)),
			       LOG_STR("outcome", review_outcome_name(o)), LOG_STR("uid", uid), LOG_STR("reason", why),
			       LOG_NUM("ms", ms), LOG_END_);
		else
			log_at(admission_level(o), "admission", LOG_STR("event", "admission"),
			       LOG_STR("path", mutate_path(ns_enabled, no_ptrace)),
			       LOG_STR("outcome", review_outcome_name(o)), LOG_STR("uid", uid), LOG_NUM("ms", ms), LOG_END_);
	}
	r = wh_reply(c, 200, "application/json", out.data, out.len);
	buf_free(&out);
	return r;
}

/*
 * The routes, one row each. /mutate[/namespace][/no-ptrace]: what the API server's choice of webhook
 * tells us about the pod's namespace (namespace: opted in as a whole; no-ptrace: Pod Security baseline or
 * restricted). The probes answer any method.
 */
enum route_kind { ROUTE_PROBE, ROUTE_METRICS, ROUTE_MUTATE };
static const struct route {
	const char *path;
	enum route_kind kind;
	bool ns, no_ptrace; /* ROUTE_MUTATE: what the path says of the namespace */
	const char *allow;  /* the methods answered ("GET, HEAD"); NULL: any */
	const char *hint;   /* a 405's detail */
} routes[] = {
	{ "/healthz", ROUTE_PROBE, false, false, NULL, NULL },
	{ "/readyz", ROUTE_PROBE, false, false, NULL, NULL },
	{ "/metrics", ROUTE_METRICS, false, false, "GET, HEAD", "GET the metrics" },
	{ "/mutate", ROUTE_MUTATE, false, false, "POST", "POST an AdmissionReview here" },
	{ "/mutate/namespace", ROUTE_MUTATE, true, false, "POST", "POST an AdmissionReview here" },
	{ "/mutate/no-ptrace", ROUTE_MUTATE, false, true, "POST", "POST an AdmissionReview here" },
	{ "/mutate/namespace/no-ptrace", ROUTE_MUTATE, true, true, "POST", "POST an AdmissionReview here" },
};

/* Whether method is one of allow's comma-separated methods. */
static bool method_allowed(const char *allow, const char *method)
{
	size_t n = strlen(method);

	for (const char *p = allow; p && *p; p += strspn(p, ", ")) {
		size_t k = strcspn(p, ",");

		if (k == n && strncmp(p, method, n) == 0)
			return true;
		p += k;
	}
	return allow == NULL;
}

enum MHD_Result wh_route(struct webhook *w, struct MHD_Connection *c, struct req *q, const char *url,
			     const char *method)
{
	for (size_t i = 0; i < sizeof(routes) / sizeof(routes[0]); i++) {
		const struct route *r = &routes[i];

		if (strcmp(url, r->path) != 0)
			continue;
		if (!method_allowed(r->allow, method))
			return wh_problem_with(c, 405, "Method Not Allowed", r->hint, "Allow", r->allow);
		switch (r->kind) {
		case ROUTE_PROBE: return wh_reply(c, 200, "text/plain", "ok", 2);
		case ROUTE_METRICS: return metrics(w, c);
		case ROUTE_MUTATE: return mutate(w, c, q, r->ns, r->no_ptrace);
		}
	}
	return wh_problem(c, 404, "Not Found", "no such route: /mutate[/namespace][/no-ptrace], /healthz, /readyz, /metrics");
}

