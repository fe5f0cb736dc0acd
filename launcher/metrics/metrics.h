/*
 * metrics.h - counters from EventPipe: EventCounters (System.Runtime,
 * Microsoft.AspNetCore.Hosting, Grpc.AspNetCore.Server, ...) and the Meter
 * API's instruments (System.Diagnostics.Metrics: the System.Runtime meter of
 * .NET 9+, ASP.NET Core's meters, the app's own).
 *
 * Three layers:
 *  - a reading from one event (metrics_sample), whatever session it came from;
 *  - Prometheus naming as dotnet-monitor writes it (metrics_prom_*), so
 *    dashboards built on dotnet-monitor's /metrics keep working;
 *  - the store behind /metrics: one long-running counters session per
 *    attached runtime, started when the runtime attaches and restarted if it
 *    ends while the runtime stays, each series' latest value kept.
 *
 * Meters are read through the runtime's one MetricsEventSource aggregation,
 * joined as a share of its SHARED session (.NET 8+). The runtime's rules
 * (docs/agent/metrics.md "Sharing the runtime with other tools"): a share is taken
 * only when its RefreshInterval, MaxHistograms and MaxTimeSeries equal the
 * running session's (else MultipleSessionsConfiguredIncorrectlyError naming
 * its ClientId), and no private session (dotnet-counters collect's) runs
 * beside a SHARED one (MultipleSessionsNotSupportedError). So the agent
 * reads the interval the runtime used from CollectionStart/Stop and scales
 * rates to its own interval, joins a running session on that session's
 * terms, and retries while a private session holds the runtime.
 */
#ifndef DP_METRICS_H
#define DP_METRICS_H

#include <stdbool.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "eventpipe/evpayload.h"
#include "eventpipe/nettrace.h"
#include "launcher/runtime/port.h"
#include "launcher/trace/trace.h"

#define METRICS_DEFAULT_INTERVAL_S 5 /* dotnet-monitor's GlobalCounter:IntervalSeconds */
/*
 * Seconds from a runtime's attach to its counters session. Enabling the
 * System.Runtime counters while the app's startup code first touches the
 * thread pool or FrameworkEventSource can deadlock the app in the runtime
 * (dotnet/runtime#118014, #105682, #119014: lock order between
 * EventListenersLock and a class constructor); after startup those
 * constructors have run and the session is safe.
 */
#define METRICS_DEFAULT_DELAY_S 10
#define METRICS_MAX_TIME_SERIES 1000 /* MetricsEventSource's MaxTimeSeries, as dotnet-monitor sets it */
#define METRICS_MAX_HISTOGRAMS 20
#define METRICS_MAX_LIMIT 100000 /* the most GlobalCounter:MaxHistograms / MaxTimeSeries may ask for */
#define METRICS_MAX_SOURCES 32
#define METRICS_MAX_NAMES 64 /* counter or instrument names per source */

enum msample_kind {
	MS_GAUGE,   /* EventCounter Mean, Meter gauge, up-down counter */
	MS_RATE,    /* EventCounter Sum (increment per interval), Meter counter (rate per interval) */
	MS_SUMMARY, /* Meter histogram: quantiles */
};

/* One reading, borrowed from the event's decoded payload. */
struct msample {
	const char *provider, *name, *display, *unit;
	const char *tags; /* "k=v,k2=v2" (meters) or "k:v,k2:v2" (EventCounter metadata); "" when none */
	char tag_sep;     /* '=' or ':' */
	bool meter;
	enum msample_kind kind;
	double value;          /* gauge or rate */
	const char *quantiles; /* MS_SUMMARY: "0.5=1.2;0.95=3;0.99=4" */
	double count, sum;     /* MS_SUMMARY, when has_sum */
	bool has_sum;
	double interval_s;     /* the interval the reading covers: an EventCounter's IntervalSec; 0 unknown */
};

/*
 * The reading an event carries: 1 (out filled) for an EventCounters event or
 * a Meter value event with a value; 0 for anything else (other events,
 * instruments that ended, errors). p is the event's payload, decoded.
 */
int metrics_sample(const struct nettrace_event *e, const struct evpayload *p, struct msample *out);

/*
 * A reading made per interval_s seconds: a rate (MS_RATE), and a histogram's
 * count and sum (not its quantiles), scaled by interval_s / r->interval_s
 * when the runtime's interval differs from it by more than 2 % (another tool
 * changed it); gauges and readings of unknown interval are left as they are.
 */
void metrics_per_interval(struct msample *r, unsigned interval_s);

/* What a MetricsEventSource event says about the session, for one listener (client_id). */
enum metrics_note_kind {
	MN_NONE,           /* not one of these */
	MN_INTERVAL,       /* CollectionStart/Stop: the interval the runtime aggregated over (interval_s) */
	MN_REFUSED_SHARE,  /* our share was refused: the running session's settings are in want */
	MN_REFUSED_PRIVATE /* a private session (running: its id) holds the runtime; our meters are refused */
};
struct metrics_meter_opts { /* a shared session's settings, as the runtime printed them; "" = the agent's own */
	char refresh[24], max_histograms[16], max_time_series[16];
};
struct metrics_note {
	enum metrics_note_kind kind;
	double interval_s;
	char running[64];
	struct metrics_meter_opts want;
};
void metrics_note(const struct nettrace_event *e, const struct evpayload *p, const char *client_id,
		  struct metrics_note *out);

/* dotnet-monitor's Prometheus name: provider lowercased, invalid characters dropped; '_'; the metric, invalid
 * characters as '_'; '_' and the unit ("%" ratio, "B"/"MB" bytes, ""/"count" none, others as they are). */
void metrics_prom_name(struct buf *b, const char *provider, const char *metric, const char *unit);
/* A value in the unit's base (MB x 1,000,000), in the shortest text that reads back the same; NaN, +Inf, -Inf. */
void metrics_prom_value(char *out, size_t n, const char *unit, double v);
/* Labels from tags ('k="v", k2="v2"': keys as metric names, values escaped); quantile appended when >= 0. */
void metrics_prom_labels(struct buf *b, const char *tags, char sep, double quantile);

/* What to collect: EventCounter sources and meters, each with optional names (none = all). */
struct metrics_source {
	char *name;
	bool meter;
	char **names;
	size_t n_names;
};
struct metrics_selection {
	struct metrics_source *s;
	size_t n;
	unsigned interval_s; /* the interval its session asked for (metrics_trace_config sets it); 0 unknown */
};
/* dotnet-monitor's defaults (System.Runtime, Microsoft.AspNetCore.Hosting, Grpc.AspNetCore.Server counters) and
 * the System.Runtime and Microsoft.AspNetCore.Hosting meters. */
void metrics_selection_defaults(struct metrics_selection *sel);
/*
 * A /livemetrics document (dotnet-monitor's EventMetricsConfiguration):
 * {"includeDefaultProviders":true, "providers":[{"providerName","counterNames":[...]}],
 *  "meters":[{"meterName","instrumentNames":[...]}]}, keys in any case.
 * DP_ESYNTAX / DP_EINVAL / DP_ETOOBIG with em naming the field.
 */
int metrics_selection_json(const char *body, size_t len, struct metrics_selection *out, struct err_msg *em);
void metrics_selection_free(struct metrics_selection *sel);
/*
 * The Metrics settings as dotnet-monitor has them, from the Metrics section of
 * the agent's settings tree (common/settings.h; NULL: none):
 * Providers:N:ProviderName, Providers:N:CounterNames:M, Meters:N:MeterName,
 * Meters:N:InstrumentNames:M, each read through the binder (marked, so the
 * agent refuses what is left): the defaults when include_defaults, then the
 * providers and meters in index order. DP_EINVAL / DP_ETOOBIG with em naming
 * the full path and its source; an unknown setting inside an entry is refused
 * with the nearest name it takes.
 */
struct settings_node;
int metrics_selection_settings(struct settings_node *metrics, bool include_defaults, struct metrics_selection *out,
			       struct err_msg *em);
/* GlobalCounter:MaxHistograms and :MaxTimeSeries for every meter session of this process (0: 20 and 1000). */
void metrics_set_limits(unsigned max_histograms, unsigned max_time_series);
/* Whether a reading is one the selection asked for. */
bool metrics_selected(const struct metrics_selection *sel, const struct msample *s);
/*
 * The session for a selection (interval in seconds; client_id names our share
 * of the shared meter session), sel->interval_s set. metrics_trace_config_as
 * joins the meter session with the settings of mo where they are not "" (a
 * running session's, to be let in).
 */
int metrics_trace_config(struct metrics_selection *sel, unsigned interval_s, const char *client_id,
			 struct trace_config *out, struct err_msg *em);
int metrics_trace_config_as(struct metrics_selection *sel, unsigned interval_s, const char *client_id,
			    const struct metrics_meter_opts *mo, struct trace_config *out, struct err_msg *em);


/* ---- /livemetrics: readings as json-seq records ---- */
struct metrics_live;
/*
 * A converter of a counters session's events into json-seq records
 * (dotnet-monitor's: RS, {"timestamp","provider","name","displayName","unit",
 * "counterType":"Rate"|"Metric","tags","value"}, LF; a histogram's value is an
 * object of its quantiles), appended to out. Takes sel (zeroed after).
 */
struct metrics_live *metrics_live_new(struct metrics_selection *sel, struct buf *out);
extern const struct nettrace_callbacks metrics_live_callbacks; /* ctx: the struct metrics_live */
uint64_t metrics_live_records(const struct metrics_live *l);
void metrics_live_free(struct metrics_live *l); /* accepts NULL */

/* ---- the store behind /metrics ---- */
struct metrics;

/* Who else reads each runtime's counters session (the collection rules), called on the session's thread. */
typedef void (*metrics_reading_fn)(void *ctx, const uint8_t cookie[16], const struct msample *r, int64_t ts_ms);
typedef void (*metrics_event_fn)(void *ctx, const uint8_t cookie[16], const struct nettrace_event *e,
				 const struct evpayload *p, int64_t ts_ms);

struct metrics_config {
	struct port *port;       /* NULL: nothing collected */
	unsigned interval_s;     /* 0 = METRICS_DEFAULT_INTERVAL_S */
	unsigned delay_s;        /* from a runtime's attach to its session */
	bool store;              /* keep the readings for /metrics; false: sessions only for the listener */
	const struct metrics_selection *selection; /* what /metrics collects (copied); NULL: the defaults */
	const struct metrics_selection *extra; /* collected too (copied): the collection rules' counters */
	const struct trace_provider *extra_providers; /* added to the session (copied): the rules' request events */
	size_t n_extra_providers;
};

/*
 * Start collecting from every runtime port attaches (a thread watches the
 * port), each one delay_s seconds after it attached: dotnet-monitor's
 * default counters when cfg->store, and cfg->extra.
 */
struct metrics *metrics_start(const struct metrics_config *cfg);
/*
 * Hand every reading of the sessions (after the selection) to reading, and
 * every other event of them to event (either may be NULL), with ctx, from
 * the sessions' threads. Set before the first session starts or at any time
 * after; once it returns, no call to the previous listener is under way, so
 * metrics_listen(m, NULL, NULL, NULL) is how a listener leaves before it is freed.
 */
void metrics_listen(struct metrics *m, metrics_reading_fn reading, metrics_event_fn event, void *ctx);
/* Stop every session and free. Accepts NULL. */
void metrics_free(struct metrics *m);
/*
 * The latest value of every series, Prometheus text format 0.0.4, families
 * sorted by name. With more than one runtime attached each sample carries a
 * pid label. Appends to out.
 */
void metrics_render(struct metrics *m, struct buf *out);
/* How many series are held (for tests and logs). */
size_t metrics_series(struct metrics *m);

#endif
