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
#include "settings.h"

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
	/* a settings file or document naming one of dotnet-monitor's settings this agent does not have
	 * (Logging:LogLevel:Default in a copied settings.json): given "KEY (FILE:LINE:COL)" and skipped;
	 * NULL: refused as any unknown key */
	void (*warn)(const char *setting);
	char *socket, *urls, *dumps, *auth_token_file, *dump_transport, *connect_dir;
	char *metrics_urls;          /* a listener for /metrics alone (Metrics:Endpoints); NULL = none */
	bool no_auth, no_sandbox;
	bool metrics_off;            /* Metrics:Enabled false: no counters sessions, /metrics 404 */
	unsigned metrics_interval_s; /* GlobalCounter:IntervalSeconds; 0 = 5 */
	unsigned metrics_delay_s;    /* metricsStartDelay: seconds from attach to the counters session */
	bool metrics_delay_set;      /* false: METRICS_DEFAULT_DELAY_S */
	bool metrics_no_defaults;    /* Metrics:IncludeDefaultProviders false */
	unsigned metrics_max_histograms, metrics_max_time_series; /* GlobalCounter:MaxHistograms, :MaxTimeSeries; 0 = 20, 1000 */
	uint64_t dumps_limit; /* bytes; 0 = no cap */
	bool exceptions_off;         /* exceptions false: no exception histories, /exceptions 400 */
	char *crashes_egress;        /* Crashes:Egress: the provider a crash's files are shipped to; NULL = kept */
	unsigned crashes_max_count;  /* Crashes:MaxCount: crashes whose files the volume keeps; 0 = 8 */
	uint64_t crashes_max_bytes;  /* Crashes:MaxBytes: their bytes; 0 = 1Gi */
	char *crash_dump_type;       /* Crashes:DumpType: init mode's app (Mini, Heap, Triage, Full, Off); NULL = Mini */
	unsigned exceptions_max_count; /* exceptionsMaxCount: per runtime; 0 = 1000 */
	uint64_t exceptions_max_bytes; /* exceptionsMaxBytes: per runtime; 0 = 4Mi */
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
	/*
	 * Every source's settings as one tree (common/settings.h), each with where it came from. The agent's
	 * own and Egress:FileSystem are read as they are set; Metrics:Providers and :Meters, the collection
	 * rules' sections (CollectionRules, CollectionRuleDefaults, Templates), each store provider's settings
	 * (egress_provider.set) and Egress:Properties are read by their binders once every source is loaded
	 * (metrics.h, crules.h, egress/store.h); config_refuse_unread then refuses what none of them read.
	 */
	struct settings_node *tree;
};

/* Free the strings and providers (not c itself). */
void config_free(struct launch_config *c);

/*
 * Set one setting. key: a colon path ("Egress:FileSystem:shared:DirectoryPath")
 * or a diagport name; where: for messages ("config.yaml:3:5", "environment
 * variable DIAGPORT_URLS", "--urls"). It goes into c->tree; the agent's own
 * settings and Egress are bound at once. DP_ENOTFOUND for a key no consumer
 * knows ("KEY (WHERE): unknown setting; did you mean NAME?"), DP_EINVAL for a
 * bad value; em names where and what.
 */
int config_set(struct launch_config *c, const char *key, const char *value, const char *where, struct err_msg *em);

/* Whether key belongs to the collection rules' part of the settings (read by crules_parse). */
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
 * dotnet-monitor's documented settings this agent does not have (config.c's
 * monitor_names) are passed to warn (the file) and skipped; any other unknown
 * name is refused, as from every source.
 */
int config_load_dir(struct launch_config *c, const char *dir, void (*warn)(const char *variable), struct err_msg *em);

/*
 * Apply DIAGPORT_* and DOTNETMONITOR_* variables from envp. DOTNETMONITOR_
 * variables naming a documented dotnet-monitor setting this agent does not
 * have (config.c's monitor_names) are passed to warn (their names, one call
 * each) and skipped, so an existing dotnet-monitor manifest still starts; any
 * other unknown name (a misspelling) or a bad value is an error.
 */
int config_load_env(struct launch_config *c, char **envp, void (*warn)(const char *variable), struct err_msg *em);

/*
 * Once every consumer has read its settings (the stores' checks, the metrics selection, the collection
 * rules): the first setting nobody read, refused by its full path and source with the name it most likely
 * misspells (DP_EINVAL). 0 when every setting was read.
 */
int config_refuse_unread(const struct launch_config *c, struct err_msg *em);

/*
 * After loading: every egress provider has a DirectoryPath that is a directory; tmp_dir on the same
 * filesystem; tlsPem is not set together with tlsCert, tlsKey or tlsKeyPassword (em names both and where).
 */
int config_check(const struct launch_config *c, struct err_msg *em);

#endif
