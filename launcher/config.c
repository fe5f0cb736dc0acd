/*
 * config.c - the agent's settings (config.h): the key table and its
 * setters, and config_put, the one door every source's leaves go through.
 *
 * A const table maps each key, under every name it has, to a setter. Every
 * source (config_src.c: a file, a key-per-file directory, the environment)
 * is flattened to colon paths with where each value came from, and every
 * leaf goes through config_put into one settings tree (common/settings.h),
 * whatever its source. The agent's own keys and Egress:FileSystem
 * (config_egress.c) are bound as they are set (a bad value is refused
 * naming its source at once); the open-ended sections (a store's
 * Egress:S3Storage:NAME:*, Egress:Properties, Metrics:Providers/Meters, the
 * collection rules) are left in the tree for their binders, and
 * config_refuse_unread refuses whatever none of them read. A key no
 * consumer knows is refused at once, except dotnet-monitor's own documented
 * settings this agent does not have (monitor_names), which the sources of a
 * dotnet-monitor deployment may carry: those are warned about.
 * config_int.h is between the three files.
 */
#include "config.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "config_int.h"
#include "launcher/capture/dump.h"
#include "log.h"
#include "mem.h"
#include "served.h"
#include "size.h"

#define MAX_NODES 20000 /* the settings tree's nodes, every source together */

enum kind { K_CRASHTYPE, K_STR, K_PEM, K_BOOL, K_NBOOL, K_TRANSPORT, K_SIZE, K_MODE, K_SECONDS, K_DELAY, K_COUNT, K_LOGLEVEL, K_LIMIT, K_CAPTURES };

struct setting {
	const char *names[3]; /* diagport's name first, then dotnet-monitor's; NULL-padded */
	enum kind kind;
	size_t off; /* into struct launch_config */
};

#define OFF(f) offsetof(struct launch_config, f)
static const struct setting settings[] = {
	{ { "socket", "DiagnosticPort:EndpointName" }, K_STR, OFF(socket) },
	{ { "urls" }, K_STR, OFF(urls) },
	{ { "dumps", "Storage:DumpTempFolder" }, K_STR, OFF(dumps) },
	{ { "authTokenFile" }, K_STR, OFF(auth_token_file) },
	{ { "noAuth" }, K_BOOL, OFF(no_auth) },
	{ { "noSandbox" }, K_BOOL, OFF(no_sandbox) },
	{ { "dumpTransport" }, K_TRANSPORT, OFF(dump_transport) },
	{ { "dumpsLimit" }, K_SIZE, OFF(dumps_limit) },
	{ { "connectDir" }, K_STR, OFF(connect_dir) },
	{ { "metrics", "Metrics:Enabled" }, K_NBOOL, OFF(metrics_off) },
	{ { "metricsUrls", "Metrics:Endpoints" }, K_STR, OFF(metrics_urls) },
	{ { "metricsInterval", "GlobalCounter:IntervalSeconds" }, K_SECONDS, OFF(metrics_interval_s) },
	{ { "metricsStartDelay" }, K_DELAY, OFF(metrics_delay_s) },
	{ { "metricsIncludeDefaultProviders", "Metrics:IncludeDefaultProviders" }, K_NBOOL, OFF(metrics_no_defaults) },
	{ { "metricsMaxHistograms", "GlobalCounter:MaxHistograms" }, K_LIMIT, OFF(metrics_max_histograms) },
	{ { "metricsMaxTimeSeries", "GlobalCounter:MaxTimeSeries" }, K_LIMIT, OFF(metrics_max_time_series) },
	{ { "logLevel", "Logging:LogLevel:Default" }, K_LOGLEVEL, OFF(log_level) },
	{ { "exceptions", "InProcessFeatures:Exceptions:Enabled" }, K_NBOOL, OFF(exceptions_off) },
	{ { "exceptionsMaxCount" }, K_LIMIT, OFF(exceptions_max_count) },
	{ { "exceptionsMaxBytes" }, K_SIZE, OFF(exceptions_max_bytes) },
	{ { "Crashes:Egress" }, K_STR, OFF(crashes_egress) },
	{ { "Crashes:MaxCount" }, K_LIMIT, OFF(crashes_max_count) },
	{ { "Crashes:MaxBytes" }, K_SIZE, OFF(crashes_max_bytes) },
	{ { "Crashes:DumpType" }, K_CRASHTYPE, OFF(crash_dump_type) },
	{ { "requestHeadersTimeout" }, K_SECONDS, OFF(head_timeout_s) },
	{ { "maxConnectionsPerPeer" }, K_COUNT, OFF(per_peer) },
	{ { "captures" }, K_CAPTURES, OFF(captures) },
	/* https:// URLs: Kestrel's default certificate, as dotnet-monitor reads it (PEM files) */
	{ { "tlsCert", "Kestrel:Certificates:Default:Path" }, K_STR, OFF(tls_cert) },
	{ { "tlsKey", "Kestrel:Certificates:Default:KeyPath" }, K_STR, OFF(tls_key) },
	{ { "tlsKeyPassword", "Kestrel:Certificates:Default:Password" }, K_STR, OFF(tls_password) },
	/* or the PEM text itself (ECS hands a secret to a container only as a variable's value) */
	{ { "tlsPem" }, K_PEM, OFF(tls_pem) },
	/* dotnet-monitor's connection mode: this agent always listens; Connect is refused with a reason. */
	{ { "DiagnosticPort:ConnectionMode" }, K_MODE, 0 },
};

/* The settings whose source is kept beside them, for config_check's messages: { value, where }. */
static const struct {
	size_t off, where_off;
} kept_where[] = {
	{ OFF(tls_cert), OFF(tls_cert_where) },
	{ OFF(tls_key), OFF(tls_key_where) },
	{ OFF(tls_password), OFF(tls_password_where) },
	{ OFF(tls_pem), OFF(tls_pem_where) },
};

void config_free(struct launch_config *c)
{
	free(c->socket);
	free(c->urls);
	free(c->dumps);
	free(c->auth_token_file);
	free(c->dump_transport);
	free(c->connect_dir);
	free(c->metrics_urls);
	free(c->crashes_egress);
	free(c->crash_dump_type);
	free(c->tls_cert);
	free(c->tls_key);
	if (c->tls_password)
		mem_wipe(c->tls_password, strlen(c->tls_password));
	free(c->tls_password);
	if (c->tls_pem)
		mem_wipe(c->tls_pem, strlen(c->tls_pem));
	free(c->tls_pem);
	free(c->tls_cert_where);
	free(c->tls_key_where);
	free(c->tls_password_where);
	free(c->tls_pem_where);
	for (size_t i = 0; i < c->n_egress; i++) {
		free(c->egress[i].name);
		free(c->egress[i].dir);
		free(c->egress[i].tmp_dir);
	}
	free(c->egress);
	settings_free(c->tree);
	memset(c, 0, sizeof(*c));
}

static int parse_bool(const char *v, bool *out)
{
	if (strcasecmp(v, "true") == 0 || strcmp(v, "1") == 0 || strcasecmp(v, "yes") == 0) {
		*out = true;
		return 0;
	}
	if (strcasecmp(v, "false") == 0 || strcmp(v, "0") == 0 || strcasecmp(v, "no") == 0) {
		*out = false;
		return 0;
	}
	return DP_EINVAL;
}

static int set_value(struct launch_config *c, const struct setting *s, const char *key, const char *v,
		     const char *where, struct err_msg *em)
{
	void *field = (char *)c + s->off;

	switch (s->kind) {
	case K_STR:
		if (*v == '\0')
			return err_set(em, DP_EINVAL, "%s: %s is empty", where, key);
		free(*(char **)field);
		*(char **)field = mem_strdup(v);
		return 0;
	case K_PEM: { /* a secret: its size is told, never a byte of it */
		size_t n = strlen(v);
		char **p = field;

		if (n == 0)
			return err_set(em, DP_EINVAL, "%s: %s is empty", where, key);
		if (n > CONFIG_MAX_PEM)
			return err_set(em, DP_ETOOBIG, "%s: %s is larger than %d bytes; it takes the certificate chain "
				       "and the private key in PEM", where, key, CONFIG_MAX_PEM);
		if (*p)
			mem_wipe(*p, strlen(*p));
		free(*p);
		*p = mem_strdup(v);
		return 0;
	}
	case K_BOOL:
		if (parse_bool(v, field) != 0)
			return err_set(em, DP_EINVAL, "%s: %s takes true or false, not '%s'", where, key, v);
		return 0;
	case K_NBOOL:
		if (parse_bool(v, field) != 0)
			return err_set(em, DP_EINVAL, "%s: %s takes true or false, not '%s'", where, key, v);
		*(bool *)field = !*(bool *)field;
		return 0;
	case K_SECONDS: /* an interval: 1 s to a day */
	case K_DELAY: { /* a delay: none to an hour */
		unsigned long lo = s->kind == K_SECONDS ? 1 : 0, hi = s->kind == K_SECONDS ? 86400 : 3600, n;
		char *end;

		errno = 0;
		n = strtoul(v, &end, 10);
		if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < lo || n > hi)
			return err_set(em, DP_EINVAL, "%s: %s takes a whole number of seconds from %lu to %lu, not '%s'",
				       where, key, lo, hi, v);
		*(unsigned *)field = (unsigned)n;
		if (s->kind == K_DELAY)
			c->metrics_delay_set = true;
		return 0;
	}
	case K_COUNT:   /* connections: 1 to 1024 */
	case K_LIMIT: { /* MetricsEventSource's MaxHistograms / MaxTimeSeries: 1 to 100000 */
		unsigned long n, hi = s->kind == K_COUNT ? 1024 : 100000;
		char *end;

		errno = 0;
		n = strtoul(v, &end, 10);
		if (*v < '0' || *v > '9' || *end != '\0' || errno != 0 || n < 1 || n > hi)
			return err_set(em, DP_EINVAL, "%s: %s takes a whole number from 1 to %lu, not '%s'", where, key, hi,
				       v);
		*(unsigned *)field = (unsigned)n;
		return 0;
	}
	case K_CRASHTYPE: /* dotnet-monitor's dump type names, or the injector's crash-dumps words (heap) */
		if (strcasecmp(v, "Heap") == 0)
			v = "WithHeap";
		if (strcasecmp(v, "Off") != 0 && dump_type(v) < 0)
			return err_set(em, DP_EINVAL, "%s: %s takes Mini, Triage, WithHeap (or Heap), Full or Off, not '%s'",
				       where, key, v);
		free(*(char **)field);
		*(char **)field = mem_strdup(v);
		return 0;
	case K_TRANSPORT:
		if (dump_transport(v) < 0)
			return err_set(em, DP_EINVAL, "%s: %s takes file, staged or fifo, not '%s'", where, key, v);
		free(*(char **)field);
		*(char **)field = mem_strdup(v);
		return 0;
	case K_SIZE:
		if (size_parse(v, field) != 0)
			return err_set(em, DP_EINVAL, "%s: %s takes a size such as 2Gi, 512Mi or 100M (0 = no cap), "
				       "not '%s'", where, key, v);
		return 0;
	case K_LOGLEVEL:
		if (log_level_parse(v, field) != 0)
			return err_set(em, DP_EINVAL, "%s: %s takes debug, info, warn or error (or .NET's Trace, Debug, "
				       "Information, Warning, Error, Critical), not '%s'", where, key, v);
		return 0;
	case K_CAPTURES:
		if (served_parse(v, field, where, em) != 0)
			return DP_EINVAL;
		c->captures_set = true;
		return 0;
	case K_MODE:
		if (strcasecmp(v, "Listen") != 0)
			return err_set(em, DP_EINVAL, "%s: %s is '%s'; this agent always listens (Listen): the runtimes "
				       "connect to its socket (or use connectDir for runtimes started without it)",
				       where, key, v);
		return 0;
	}
	return DP_EINTERNAL;
}

static int set_one(struct launch_config *c, const struct setting *s, const char *key, const char *v,
		   const char *where, struct err_msg *em)
{
	int rc = set_value(c, s, key, v, where, em);

	for (size_t i = 0; rc == 0 && i < sizeof(kept_where) / sizeof(kept_where[0]); i++)
		if (kept_where[i].off == s->off) {
			char **w = (char **)((char *)c + kept_where[i].where_off);

			free(*w);
			*w = mem_strdup(where);
		}
	return rc;
}

/*
 * dotnet-monitor's documented settings (its docs/configuration and schema) that this agent does not
 * implement: from the sources an existing dotnet-monitor deployment uses (DOTNETMONITOR_ variables,
 * key-per-file directories) they are warned about and skipped, so its manifest still starts. Only these:
 * any other name no consumer reads is refused, so a misspelling is never passed over. "X:*" is the
 * section X whole (free-form below it: log categories, filter lists, Azure AD's options).
 */
static const char *const monitor_names[] = {
	"Authentication:MonitorApiKey:Subject", "Authentication:MonitorApiKey:PublicKey",
	"Authentication:MonitorApiKey:Issuer", "Authentication:AzureAd:*",
	"CorsConfiguration:AllowedOrigins", "CorsConfiguration:AllowedOrigins:*",
	"DefaultProcess:Filters:*",
	"DiagnosticPort:DeleteEndpointOnStartup", "DiagnosticPort:MaxConnections",
	"DotnetMonitorDebug:*",
	"GlobalCounter:Providers:*",
	"InProcessFeatures:Enabled", "InProcessFeatures:CallStacks:Enabled",
	"InProcessFeatures:Exceptions:CollectionFilters:*",
	"InProcessFeatures:ParameterCapturing:Enabled",
	"Logging:*",
	"Metrics:MetricCount",
	"OpenTelemetry:*",
	"Storage:DefaultSharedPath", "Storage:SharedLibraryPath",
};

/* The agent's sections read by their own binders once every source is loaded. */
static const char *const bound_later[] = { "Egress", "Metrics:Providers", "Metrics:Meters", "CollectionRules",
					   "CollectionRuleDefaults", "Templates" };

bool config_monitor_name(const char *key)
{
	for (size_t i = 0; i < sizeof(monitor_names) / sizeof(monitor_names[0]); i++) {
		const char *m = monitor_names[i];
		size_t n = strlen(m);

		if (n > 2 && strcmp(m + n - 2, ":*") == 0 ? strncasecmp(key, m, n - 1) == 0 && key[n - 1] != '\0' :
							      strcasecmp(key, m) == 0)
			return true;
	}
	return false;
}

/* Whether name is key or a section of it ("Storage" of "Storage:DumpTempFolder"), case-insensitive. */
static bool names_or_holds(const char *name, const char *key)
{
	size_t n = strlen(key);

	return strncasecmp(name, key, n) == 0 && (name[n] == '\0' || name[n] == ':');
}

bool config_is_scalar(const char *key)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		for (size_t k = 0; k < 3 && settings[i].names[k]; k++)
			if (strcasecmp(settings[i].names[k], key) == 0)
				return true;
	return false;
}

bool config_known_section(const char *key)
{
	if (config_is_rule_key(key) || config_metrics_list_key(key) || config_monitor_name(key))
		return true;
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		for (size_t k = 0; k < 3 && settings[i].names[k]; k++)
			if (names_or_holds(settings[i].names[k], key))
				return true;
	for (size_t i = 0; i < sizeof(bound_later) / sizeof(bound_later[0]); i++)
		if (names_or_holds(bound_later[i], key) || names_or_holds(key, bound_later[i]))
			return true;
	for (size_t i = 0; i < sizeof(monitor_names) / sizeof(monitor_names[0]); i++)
		if (names_or_holds(monitor_names[i], key))
			return true;
	return false;
}

static struct settings_node *tree(struct launch_config *c)
{
	if (c->tree == NULL)
		c->tree = settings_new();
	return c->tree;
}

/* key (just put) is no setting anyone reads: refused by its path and source, with the known name nearest it. */
static int refuse_unknown(struct launch_config *c, const char *key, struct err_msg *em)
{
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		for (size_t k = 0; k < 3 && settings[i].names[k]; k++)
			settings_ask_path(c->tree, settings[i].names[k]);
	for (size_t i = 0; i < sizeof(bound_later) / sizeof(bound_later[0]); i++)
		settings_ask_path(c->tree, bound_later[i]);
	for (size_t i = 0; i < sizeof(monitor_names) / sizeof(monitor_names[0]); i++) {
		char name[128];

		snprintf(name, sizeof(name), "%s", monitor_names[i]);
		if (strlen(name) > 2 && strcmp(name + strlen(name) - 2, ":*") == 0)
			name[strlen(name) - 2] = '\0';
		settings_ask_path(c->tree, name);
	}
	return settings_refuse_unknown(DP_ENOTFOUND, settings_at(c->tree, key, false), em);
}

int config_refuse_name(struct launch_config *c, const char *key, const char *where, struct err_msg *em)
{
	int rc = settings_put(tree(c), key, "", where, 0, em);

	return rc != 0 ? rc : refuse_unknown(c, key, em);
}

/* Metrics:Providers and Metrics:Meters: lists, read by metrics_selection_settings. */
bool config_metrics_list_key(const char *key)
{
	static const char *const lists[] = { "Metrics:Providers", "Metrics:Meters" };

	for (size_t i = 0; i < sizeof(lists) / sizeof(lists[0]); i++) {
		size_t n = strlen(lists[i]);

		if (strncasecmp(key, lists[i], n) == 0 && (key[n] == '\0' || key[n] == ':'))
			return true;
	}
	return false;
}

bool config_is_rule_key(const char *key)
{
	static const char *const prefixes[] = { "CollectionRules:", "CollectionRuleDefaults:", "Templates:" };

	for (size_t i = 0; i < sizeof(prefixes) / sizeof(prefixes[0]); i++)
		if (strncasecmp(key, prefixes[i], strlen(prefixes[i])) == 0)
			return true;
	return false;
}

static bool in_scope(enum config_scope scope, const char *key)
{
	return scope == CONFIG_ANY || strncasecmp(key, "Egress:", 7) == 0 || config_is_rule_key(key);
}

/*
 * config_set, and for the sources dotnet-monitor's deployments use (monitor): 1 when key is one of
 * dotnet-monitor's settings this agent does not have (monitor_names), marked read for the caller to warn.
 */
int config_put(struct launch_config *c, const char *key, const char *value, const char *where, bool monitor,
	       struct err_msg *em)
{
	int rc;

	if (!in_scope(c->scope, key))
		return err_set(em, DP_EINVAL,
			       "%s: %s: a workload's own source holds Egress:, CollectionRules:, CollectionRuleDefaults: and "
			       "Templates: settings only; the agent's own settings come from its command line and the "
			       "platform's settings files", where, key);
	if ((rc = settings_put(tree(c), key, value, where, MAX_NODES, em)) != 0)
		return rc;
	if (config_is_rule_key(key)) /* crules_parse reads these */
		return 0;
	if (config_metrics_list_key(key)) {
		if (*value == '\0')
			return err_set(em, DP_EINVAL, "%s: %s is empty", where, key);
		return 0;
	}
	rc = config_set_egress(c, key, value, where, em);
	if (rc <= 0)
		return rc;
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		for (size_t k = 0; k < 3 && settings[i].names[k]; k++)
			if (strcasecmp(key, settings[i].names[k]) == 0) {
				struct settings_node *n = settings_at(c->tree, key, true);

				rc = set_one(c, &settings[i], settings[i].names[k], value, where, em);
				if (config_secret_key(key)) /* the field holds it now, and is wiped when done with: no copy */
					settings_wipe(n);
				return rc;
			}
	if (monitor && config_monitor_name(key)) {
		settings_at(c->tree, key, true);
		return 1;
	}
	return refuse_unknown(c, key, em);
}

int config_set(struct launch_config *c, const char *key, const char *value, const char *where, struct err_msg *em)
{
	return config_put(c, key, value, where, false, em);
}

int config_refuse_unread(const struct launch_config *c, struct err_msg *em)
{
	return settings_check_unread(c->tree, em);
}

/* The last part of a store's setting that holds a secret (or Egress:Properties, which the ...Name settings
 * point at): its variable's value is wiped once read, so that it is not left in /proc/PID/environ. */
bool config_secret_key(const char *key)
{
	static const char *const secret[] = { "SecretAccessKey", "SessionToken", "AccountKey", "SharedAccessSignature",
					      "QueueSharedAccessSignature" };
	const char *last = strrchr(key, ':');

	if (strcasecmp(key, "Kestrel:Certificates:Default:Password") == 0 || strcasecmp(key, "tlsKeyPassword") == 0 ||
	    strcasecmp(key, "tlsPem") == 0)
		return true;
	if (strncasecmp(key, "Egress:", 7) != 0 || last == NULL)
		return false;
	if (strncasecmp(key + 7, "Properties:", 11) == 0)
		return true;
	for (size_t i = 0; i < sizeof(secret) / sizeof(secret[0]); i++)
		if (strcasecmp(last + 1, secret[i]) == 0)
			return true;
	return false;
}

static int check_dir(const char *what, const char *path, struct stat *st, struct err_msg *em)
{
	if (stat(path, st) != 0)
		return err_set(em, DP_EINVAL, "%s %s: %s", what, path, strerror(errno));
	if (!S_ISDIR(st->st_mode))
		return err_set(em, DP_EINVAL, "%s %s is not a directory", what, path);
	if (access(path, W_OK | X_OK) != 0)
		return err_set(em, DP_EINVAL, "%s %s is not writable by this agent (uid %u): %s", what, path,
			       (unsigned)geteuid(), strerror(errno));
	return 0;
}

/* tlsPem, or the files: not both. */
static int check_tls(const struct launch_config *c, struct err_msg *em)
{
	const struct {
		const char *value, *where, *name;
	} files[] = {
		{ c->tls_cert, c->tls_cert_where, "Kestrel:Certificates:Default:Path (tlsCert)" },
		{ c->tls_key, c->tls_key_where, "Kestrel:Certificates:Default:KeyPath (tlsKey)" },
		{ c->tls_password, c->tls_password_where, "Kestrel:Certificates:Default:Password (tlsKeyPassword)" },
	};

	if (c->tls_pem == NULL)
		return 0;
	for (size_t i = 0; i < sizeof(files) / sizeof(files[0]); i++)
		if (files[i].value)
			return err_set(em, DP_EINVAL, "tlsPem (%s) and %s (%s) are both set: give the certificate and "
				       "key as PEM text in tlsPem (unencrypted) or as files, not both", c->tls_pem_where,
				       files[i].name, files[i].where);
	return 0;
}

int config_check(const struct launch_config *c, struct err_msg *em)
{
	int rc;

	if ((rc = check_tls(c, em)) != 0)
		return rc;
	for (size_t i = 0; i < c->n_egress; i++) {
		const struct egress_provider *e = &c->egress[i];
		struct stat a, b;
		char what[128];

		if (e->type)
			continue; /* a store: the egress process's readers check it (egress/eprov.h) */
		if (e->dir == NULL)
			return err_set(em, DP_EINVAL, "egress provider '%s' has no DirectoryPath", e->name);
		snprintf(what, sizeof(what), "egress provider '%s': DirectoryPath", e->name);
		if ((rc = check_dir(what, e->dir, &a, em)) != 0)
			return rc;
		if (e->tmp_dir == NULL)
			continue;
		snprintf(what, sizeof(what), "egress provider '%s': IntermediateDirectoryPath", e->name);
		if ((rc = check_dir(what, e->tmp_dir, &b, em)) != 0)
			return rc;
		if (a.st_dev != b.st_dev)
			return err_set(em, DP_EINVAL, "egress provider '%s': IntermediateDirectoryPath %s and "
				       "DirectoryPath %s are on different filesystems, so a finished artifact could "
				       "not be renamed into place atomically", e->name, e->tmp_dir, e->dir);
	}
	return 0;
}
