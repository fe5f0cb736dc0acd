/*
 * config.h - the agent's settings, from a YAML (or JSON) file, the
 * environment and the command line, in that order (a later source wins).
 *
 * One key space serves all three: diagport's own names (socket, urls, dumps,
 * authTokenFile, noAuth, dumpTransport, dumpsLimit, connectDir, sandbox, requestHeadersTimeout, maxConnectionsPerPeer, captures,
 * metrics, metricsUrls, metricsInterval, metricsMaxHistograms, metricsMaxTimeSeries, tlsCert, tlsKey, tlsKeyPassword, tlsPem) and
 * dotnet-monitor's hierarchical names for the same settings
 * (DiagnosticPort:EndpointName, Urls, Storage:DumpTempFolder, Metrics:Enabled,
 * Metrics:Endpoints, Metrics:IncludeDefaultProviders, Metrics:Providers, Metrics:Meters,
 * GlobalCounter:IntervalSeconds, GlobalCounter:MaxHistograms, GlobalCounter:MaxTimeSeries,
 * Egress:FileSystem:NAME:DirectoryPath, ...). Keys are case-insensitive, as in
 * .NET configuration. In a file the hierarchy is nesting; in the environment
 * it is "__" (DOTNETMONITOR_Egress__FileSystem__shared__DirectoryPath).
 */
#ifndef DP_LAUNCH_CONFIG_H
#define DP_LAUNCH_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "egress/store.h"
#include "errors.h"
#include "log.h"

#define CONFIG_MAX_PEM (64 << 10) /* tlsPem: a chain of a few certificates and a key fit many times over */

/*
 * What a settings source may set. The agent's own settings (its URLs, token, sandbox, captures, metrics
 * listener) come from its command line and the platform's files; a workload's egress Secret or rules
 * ConfigMap, which the app team writes, is read held to what is the team's own, its stores and its rules,
 * so that it cannot change them.
 */
enum config_scope {
	CONFIG_ANY = 0,
	CONFIG_WORKLOAD, /* Egress:*, CollectionRules:*, CollectionRuleDefaults:*, Templates:* only
			    (--workload-config, DIAGPORT_EGRESS_SETTINGS, DIAGPORT_RULES) */
};

struct launch_config {
	enum config_scope scope;     /* while a source is read: what it may set (CONFIG_ANY outside of one) */
	char *socket, *urls, *dumps, *auth_token_file, *dump_transport, *connect_dir;
	char *metrics_urls;          /* a listener for /metrics alone (Metrics:Endpoints); NULL = none */
	bool no_auth, no_sandbox;
	bool metrics_off;            /* Metrics:Enabled false: no counters sessions, /metrics 404 */
	unsigned metrics_interval_s; /* GlobalCounter:IntervalSeconds; 0 = 5 */
	unsigned metrics_delay_s;    /* metricsStartDelay: seconds from attach to the counters session */
	bool metrics_delay_set;      /* false: METRICS_DEFAULT_DELAY_S */
	bool metrics_no_defaults;    /* Metrics:IncludeDefaultProviders false */
	unsigned metrics_max_histograms, metrics_max_time_series; /* GlobalCounter:MaxHistograms, :MaxTimeSeries; 0 = 20, 1000 */
	/* Metrics:Providers:N:* and Metrics:Meters:N:* as given, each with where it came from; metrics_selection_settings
	 * (metrics.h) reads them once every source is loaded */
	struct egress_setting *metrics_kv;
	size_t n_metrics_kv;
	uint64_t dumps_limit; /* bytes; 0 = no cap */
	unsigned head_timeout_s;     /* requestHeadersTimeout: the whole request head within this; 0 = 10 */
	unsigned per_peer;           /* maxConnectionsPerPeer: connections from one address; 0 = 64 */
	unsigned captures;           /* captures: the capture kinds served, served.h's bits (captures_set false: all) */
	bool captures_set;
	/* https:// URLs: Kestrel:Certificates:Default:Path, :KeyPath, :Password (tlsCert, tlsKey, tlsKeyPassword) */
	char *tls_cert, *tls_key, *tls_password;
	/* or tlsPem (DIAGPORT_TLS_PEM, an ECS secret): the PEM text itself, chain and key, at most CONFIG_MAX_PEM
	 * bytes; a secret, wiped when freed. Each with where it was set ("environment variable DIAGPORT_TLS_PEM") */
	char *tls_pem;
	char *tls_cert_where, *tls_key_where, *tls_password_where, *tls_pem_where;
	enum log_level log_level;    /* logLevel: the least level written (LOG_INFO, which is 0) */
	struct egress_provider *egress;
	size_t n_egress;
	/* Egress:Properties:KEY values (dotnet-monitor's indirection: AccountKeyName, SharedAccessSignatureName
	 * name one), each also a setting "Properties:KEY" of every store provider, for its reader */
	struct egress_setting *egress_props;
	size_t n_egress_props;
	/* CollectionRules:*, CollectionRuleDefaults:* and Templates:* as given (the last source wins per key), each
	 * with where it came from; rules_compile (rules.h) reads them once every source is loaded */
	struct egress_setting *rule_kv; /* key: the colon path as written; where: "rules.yaml:7:20" */
	size_t n_rule_kv;
};

/* Free the strings and providers (not c itself). */
void config_free(struct launch_config *c);

/*
 * Set one setting. key: a colon path ("Egress:FileSystem:shared:DirectoryPath")
 * or a diagport name; where: for messages ("config.yaml:3:5", "environment
 * variable DIAGPORT_URLS", "--urls"). DP_ENOTFOUND for an unknown key,
 * DP_EINVAL for a bad value; em names where and what.
 */
int config_set(struct launch_config *c, const char *key, const char *value, const char *where, struct err_msg *em);

/* Whether key belongs to the collection rules' part of the settings (kept as text in rule_kv). */
bool config_is_rule_key(const char *key);

/*
 * A settings source scoped to one section: a file (YAML or JSON) or a key-per-file directory (path), or
 * a document in memory (text, where names it). A key outside the scope is DP_EINVAL naming the source
 * and the key. 0 or a DP_E* code with em.
 */
int config_load_scoped(struct launch_config *c, enum config_scope scope, const char *path, const char *text,
		       const char *where, void (*warn)(const char *variable), struct err_msg *em);

/* Read a settings file (at most 1 MiB). DP_EIO, DP_ESYNTAX, DP_ENOTFOUND, DP_EINVAL with em (file:line:col). */
int config_load_file(struct launch_config *c, const char *path, struct err_msg *em);
/* The same for a settings document in memory (DIAGPORT_SETTINGS); where names it in messages. */
int config_load_text(struct launch_config *c, const char *text, size_t len, const char *where, struct err_msg *em);
/*
 * A key-per-file settings directory, as .NET's KeyPerFile provider and
 * dotnet-monitor read one (a Secret or ConfigMap mounted as a volume): each
 * file's name is a key with "__" for ':' (Egress__S3Storage__s3__BucketName),
 * its content the value, trailing newlines dropped. Names starting with '.'
 * (a volume's ..data) are skipped; at most 256 files of at most 64 KiB.
 * Settings this agent does not have are passed to warn (the file) and skipped.
 */
int config_load_dir(struct launch_config *c, const char *dir, void (*warn)(const char *variable), struct err_msg *em);

/*
 * Apply DIAGPORT_* and DOTNETMONITOR_* variables from envp. Unknown
 * DOTNETMONITOR_ settings (ones this agent does not have) are reported on
 * passed to warn (their names, one call each) and skipped, so an existing dotnet-monitor manifest
 * still starts; an unknown DIAGPORT_ variable or a bad value is an error.
 */
int config_load_env(struct launch_config *c, char **envp, void (*warn)(const char *variable), struct err_msg *em);

/*
 * After loading: every egress provider has a DirectoryPath that is a directory; tmp_dir on the same
 * filesystem; tlsPem is not set together with tlsCert, tlsKey or tlsKeyPassword (em names both and where).
 */
int config_check(const struct launch_config *c, struct err_msg *em);

#endif
