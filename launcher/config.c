/*
 * config.c - the agent's settings (config.h).
 *
 * A const table maps each key, under every name it has, to a setter. A file
 * is read with the project's document reader (common/doc.h), flattened to
 * colon paths with the position of each value kept for messages, and every
 * leaf goes through config_set into one settings tree (common/settings.h),
 * whatever its source. The agent's own keys and Egress:FileSystem are bound
 * as they are set (a bad value is refused naming its source at once); the
 * open-ended sections (a store's Egress:S3Storage:NAME:*, Egress:Properties,
 * Metrics:Providers/Meters, the collection rules) are left in the tree for
 * their binders, and config_refuse_unread refuses whatever none of them read.
 * A key no consumer knows is refused at once, except dotnet-monitor's own
 * documented settings this agent does not have (monitor_names), which the
 * sources of a dotnet-monitor deployment may carry: those are warned about.
 */
#include "config.h"

#include <ctype.h>
#include <errno.h>
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "doc.h"
#include "launcher/capture/dump.h"
#include "log.h"
#include "mem.h"
#include "served.h"
#include "size.h"

#define MAX_FILE_BYTES (1 << 20)
#define MAX_EGRESS 16
#define MAX_PATH_KEY 512
#define MAX_NODES 20000 /* the settings tree's nodes, every source together */
#define MAX_DIR_FILES 256              /* files in a key-per-file settings directory */
#define MAX_VALUE_BYTES (64 << 10)     /* one of them */
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."

enum kind { K_STR, K_PEM, K_BOOL, K_NBOOL, K_TRANSPORT, K_SIZE, K_MODE, K_SECONDS, K_DELAY, K_COUNT, K_LOGLEVEL, K_LIMIT, K_CAPTURES };

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

/* The provider types: FileSystem, written by the agent, and the stores, written by the egress process. */
static const char *const store_types[] = { "S3Storage", "AzureBlobStorage" };

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
	"InProcessFeatures:Enabled", "InProcessFeatures:CallStacks:Enabled", "InProcessFeatures:Exceptions:Enabled",
	"InProcessFeatures:Exceptions:Include:*", "InProcessFeatures:Exceptions:Exclude:*",
	"InProcessFeatures:ParameterCapturing:Enabled",
	"Logging:*",
	"Metrics:MetricCount",
	"OpenTelemetry:*",
	"Storage:DefaultSharedPath", "Storage:SharedLibraryPath",
};

/* The agent's sections read by their own binders once every source is loaded. */
static const char *const bound_later[] = { "Egress", "Metrics:Providers", "Metrics:Meters", "CollectionRules",
					   "CollectionRuleDefaults", "Templates" };

static bool monitor_name(const char *key)
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

static bool secret_key(const char *key);

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

/* The provider named name (name_len bytes), made when new. NULL with em when there are too many. */
static struct egress_provider *provider(struct launch_config *c, const char *type, const char *name, size_t name_len,
					const char *where, struct err_msg *em)
{
	struct egress_provider *e;

	for (size_t i = 0; i < c->n_egress; i++) {
		e = &c->egress[i];
		if (strlen(e->name) != name_len || strncasecmp(e->name, name, name_len) != 0)
			continue;
		if ((e->type == NULL) != (type == NULL) || (type && strcmp(e->type, type) != 0)) {
			err_set(em, DP_EINVAL, "%s: egress provider '%s' is already a %s provider; a name may be used "
				"once across Egress:FileSystem, Egress:S3Storage and Egress:AzureBlobStorage", where,
				e->name, e->type ? e->type : "FileSystem");
			return NULL;
		}
		return e;
	}
	if (c->n_egress == MAX_EGRESS) {
		err_set(em, DP_ETOOBIG, "%s: more than %d egress providers", where, MAX_EGRESS);
		return NULL;
	}
	c->egress = mem_realloc(c->egress, (c->n_egress + 1) * sizeof(*c->egress));
	e = &c->egress[c->n_egress++];
	memset(e, 0, sizeof(*e));
	e->name = mem_strndup(name, name_len);
	e->type = type;
	return e;
}

/*
 * Egress:Properties:KEY (dotnet-monitor's indirection: a store's ...Name setting names KEY), kept in the tree
 * for the stores (egress_properties). One no store points at is not refused: the section is a shared bag, as
 * in dotnet-monitor; a ...Name that names a missing one is (egress/azblob.c), with the one it misspells.
 */
static int set_property(struct launch_config *c, const char *key, const char *v, const char *where,
			struct err_msg *em)
{
	if (*key == '\0' || strchr(key, ':'))
		return err_set(em, DP_EINVAL, "%s: Egress:Properties:%s is not Egress:Properties:KEY", where, key);
	if (*v == '\0')
		return err_set(em, DP_EINVAL, "%s: Egress:Properties:%s is empty", where, key);
	/* read: a store's ...Name setting that names a missing one is refused with the one it misspells */
	{
		char path[MAX_PATH_KEY];

		snprintf(path, sizeof(path), "Egress:Properties:%s", key);
		settings_at(c->tree, path, true);
	}
	return 0;
}

/*
 * Egress:TYPE:NAME:FIELD (a store's FIELD may be a path: Metadata:KEY), already in the tree. A FileSystem
 * provider's settings are bound here; a store's node is its provider's, read by its client (store.h). 1
 * when key is not an egress key.
 */
static int set_egress(struct launch_config *c, const char *key, const char *v, const char *where,
		      struct err_msg *em)
{
	static const char *const fs_fields[] = { "DirectoryPath", "IntermediateDirectoryPath", "CopyBufferSize" };
	const char *p = key, *name, *field, *type = NULL;
	size_t name_len, n;
	struct egress_provider *e;
	struct settings_node *node;

	if (strncasecmp(p, "Egress:", 7) != 0)
		return 1;
	p += 7;
	if (strncasecmp(p, "Properties:", 11) == 0)
		return set_property(c, p + 11, v, where, em);
	n = strcspn(p, ":");
	if (!(n == 10 && strncasecmp(p, "FileSystem", 10) == 0)) {
		for (size_t i = 0; i < sizeof(store_types) / sizeof(store_types[0]); i++)
			if (strlen(store_types[i]) == n && strncasecmp(p, store_types[i], n) == 0)
				type = store_types[i];
		if (type == NULL) {
			char path[MAX_PATH_KEY];
			const char *near;

			settings_ask_path(c->tree, "Egress:FileSystem");
			settings_ask_path(c->tree, "Egress:S3Storage");
			settings_ask_path(c->tree, "Egress:AzureBlobStorage");
			settings_ask_path(c->tree, "Egress:Properties");
			snprintf(path, sizeof(path), "Egress:%.*s", (int)n, p);
			near = settings_suggest(settings_at(c->tree, path, false));
			return err_set(em, DP_EINVAL, "%s: egress provider type '%.*s' is not supported by this agent "
				       "(FileSystem, S3Storage and AzureBlobStorage are)%s%s%s", where, (int)n, p,
				       near ? "; did you mean " : "", near ? near : "", near ? "?" : "");
		}
	}
	name = p[n] == ':' ? p + n + 1 : p + n;
	name_len = strcspn(name, ":");
	field = name[name_len] == ':' ? name + name_len + 1 : NULL;
	if (name_len == 0 || field == NULL || *field == '\0' || (type == NULL && strchr(field, ':')))
		return err_set(em, DP_EINVAL, "%s: %s is not Egress:%s:NAME:SETTING", where, key,
			       type ? type : "FileSystem");
	if (strspn(name, NAME_CHARS) < name_len)
		return err_set(em, DP_EINVAL, "%s: egress provider name '%.*s' may hold only letters, digits, "
				       "'-', '_' and '.'", where, (int)name_len, name);
	if ((e = provider(c, type, name, name_len, where, em)) == NULL)
		return DP_EINVAL;
	if (*v == '\0')
		return err_set(em, DP_EINVAL, "%s: %s is empty", where, key);
	{
		char prov[MAX_PATH_KEY];

		snprintf(prov, sizeof(prov), "%.*s", (int)(name - key + name_len), key);
		node = settings_at(c->tree, prov, true); /* Egress:TYPE:NAME, the provider itself */
	}
	if (type) {
		e->set = node;
		return 0;
	}
	for (size_t i = 0; i < sizeof(fs_fields) / sizeof(fs_fields[0]); i++)
		settings_ask(node, fs_fields[i]);
	if (strcasecmp(field, "DirectoryPath") == 0) {
		free(e->dir);
		e->dir = mem_strdup(v);
	} else if (strcasecmp(field, "IntermediateDirectoryPath") == 0) {
		free(e->tmp_dir);
		e->tmp_dir = mem_strdup(v);
	} else if (strcasecmp(field, "CopyBufferSize") != 0) { /* dotnet-monitor's tuning knob: not needed here */
		return settings_refuse_unknown(DP_EINVAL, settings_find(node, field), em);
	}
	settings_get(node, field);
	return 0;
}

/* Metrics:Providers and Metrics:Meters: lists, read by metrics_selection_settings. */
static bool metrics_list_key(const char *key)
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
static int put(struct launch_config *c, const char *key, const char *value, const char *where, bool monitor,
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
	if (metrics_list_key(key)) {
		if (*value == '\0')
			return err_set(em, DP_EINVAL, "%s: %s is empty", where, key);
		return 0;
	}
	rc = set_egress(c, key, value, where, em);
	if (rc <= 0)
		return rc;
	for (size_t i = 0; i < sizeof(settings) / sizeof(settings[0]); i++)
		for (size_t k = 0; k < 3 && settings[i].names[k]; k++)
			if (strcasecmp(key, settings[i].names[k]) == 0) {
				struct settings_node *n = settings_at(c->tree, key, true);

				rc = set_one(c, &settings[i], settings[i].names[k], value, where, em);
				if (secret_key(key)) /* the field holds it now, and is wiped when done with: no copy */
					settings_wipe(n);
				return rc;
			}
	if (monitor && monitor_name(key)) {
		settings_at(c->tree, key, true);
		return 1;
	}
	return refuse_unknown(c, key, em);
}

int config_set(struct launch_config *c, const char *key, const char *value, const char *where, struct err_msg *em)
{
	return put(c, key, value, where, false, em);
}

int config_refuse_unread(const struct launch_config *c, struct err_msg *em)
{
	return settings_check_unread(c->tree, em);
}

/*
 * Walk a map or a list, setting every scalar leaf under its colon path: a
 * map's values under KEY:NAME, a list's items (taken in the collection rules
 * only: Filters, Actions, IncludePaths, ..., and Metrics:Providers,
 * Metrics:Meters and their name lists) under KEY:0, KEY:1, ... as .NET
 * configuration binds a JSON array.
 */
static int walk(struct launch_config *c, const struct doc_node *n, char *key, size_t len, const char *file,
		struct err_msg *em)
{
	for (size_t i = 0; i < n->n; i++) {
		const struct doc_node *k = n->type == DOC_MAP ? n->keys[i] : n->vals[i], *v = n->vals[i];
		char where[MAX_PATH_KEY + 64];
		int w, rc;

		w = n->type == DOC_MAP ? snprintf(key + len, MAX_PATH_KEY - len, "%s%s", len ? ":" : "", k->text) :
					 snprintf(key + len, MAX_PATH_KEY - len, ":%zu", i);
		if (w < 0 || len + (size_t)w + 1 >= MAX_PATH_KEY) {
			key[len] = '\0';
			return err_set(em, DP_ETOOBIG, "%s:%u:%u: setting name too long", file, k->line, k->col);
		}
		snprintf(where, sizeof(where), "%s:%u:%u", file, v->line, v->col);
		if (v->type == DOC_MAP || (v->type == DOC_SEQ && (config_is_rule_key(key) || metrics_list_key(key))))
			rc = walk(c, v, key, strlen(key), file, em);
		else if (v->type == DOC_SEQ)
			rc = err_set(em, DP_EINVAL, "%s: %s takes a single value, not a list", where, key);
		else if (v->type == DOC_NULL)
			rc = err_set(em, DP_EINVAL, "%s: %s has no value", where, key);
		else if ((rc = put(c, key, v->text, where, c->warn != NULL, em)) == 1) {
			char said[MAX_PATH_KEY + 80];

			snprintf(said, sizeof(said), "%s (%s)", key, where);
			c->warn(said);
			rc = 0;
		}
		key[len] = '\0';
		if (rc != 0)
			return rc;
	}
	return 0;
}

int config_load_text(struct launch_config *c, const char *text, size_t len, const char *path, struct err_msg *em)
{
	struct doc_limits lim = { .max_bytes = MAX_FILE_BYTES, .max_depth = 32, .max_nodes = 10000 };
	struct doc_stream s = { 0 };
	char key[MAX_PATH_KEY] = "";
	int rc;

	if (len > MAX_FILE_BYTES)
		return err_set(em, DP_ETOOBIG, "%s: larger than %d bytes", path, MAX_FILE_BYTES);
	if ((rc = doc_read(text, len, path, &lim, &s, em)) != 0)
		return rc;
	if (s.n > 1)
		rc = err_set(em, DP_ESYNTAX, "%s: holds %zu documents; settings are one map", path, s.n);
	else if (s.n == 1 && s.docs[0]->type != DOC_MAP && s.docs[0]->type != DOC_NULL)
		rc = err_set(em, DP_ESYNTAX, "%s:%u:%u: settings must be a map of names to values", path,
			     s.docs[0]->line, s.docs[0]->col);
	else if (s.n == 1 && s.docs[0]->type == DOC_MAP)
		rc = walk(c, s.docs[0], key, 0, path, em);
	doc_stream_free(&s);
	return rc;
}

int config_load_file(struct launch_config *c, const char *path, struct err_msg *em)
{
	struct buf b;
	int rc;

	buf_init(&b, MAX_FILE_BYTES);
	if ((rc = buf_read_path(&b, path, NULL, em)) == 0)
		rc = config_load_text(c, b.data ? b.data : "", b.len, path, em);
	mem_wipe(b.data, b.len); /* settings may hold a store's key */
	buf_free(&b);
	return rc;
}

/* The last part of a store's setting that holds a secret (or Egress:Properties, which the ...Name settings
 * point at): its variable's value is wiped once read, so that it is not left in /proc/PID/environ. */
static bool secret_key(const char *key)
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

/* PREFIX_Egress__S3Storage__s3__BucketName -> Egress:S3Storage:s3:BucketName (.NET's "__" for ':'). */
static void colons(const char *in, size_t n, char *out)
{
	size_t o = 0;

	for (size_t i = 0; i < n; i++) {
		if (in[i] == '_' && i + 1 < n && in[i + 1] == '_') {
			out[o++] = ':';
			i++;
		} else {
			out[o++] = in[i];
		}
	}
	out[o] = '\0';
}

int config_load_dir(struct launch_config *c, const char *dir, void (*warn)(const char *variable), struct err_msg *em)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *seen[MAX_DIR_FILES]; /* the files' names so far: two naming one setting are refused */
	size_t files = 0;
	int rc = 0;

	if (d == NULL)
		return err_set(em, DP_EIO, "settings directory %s: %s", dir, strerror(errno));
	while (rc == 0 && (de = readdir(d)) != NULL) {
		char path[PATH_MAX], key[MAX_PATH_KEY] = "";
		struct stat st;
		struct buf b;
		size_t n = strlen(de->d_name);

		/* a Secret's or ConfigMap's volume: its files, beside ..data and the timestamped directory */
		if (de->d_name[0] == '.' || n >= MAX_PATH_KEY)
			continue;
		snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
		if (stat(path, &st) != 0) {
			rc = err_set(em, DP_EIO, "settings directory %s: %s: %s", dir, de->d_name, strerror(errno));
			break;
		}
		if (S_ISDIR(st.st_mode))
			continue;
		if (!S_ISREG(st.st_mode)) { /* a device or a FIFO: never a setting, and a read could block */
			rc = err_set(em, DP_EINVAL, "settings directory %s: %s is not a regular file", dir, de->d_name);
			break;
		}
		if (files == MAX_DIR_FILES) {
			rc = err_set(em, DP_ETOOBIG, "settings directory %s: more than %d files", dir, MAX_DIR_FILES);
			break;
		}
		for (size_t i = 0; i < files && rc == 0; i++)
			if (strcasecmp(seen[i], de->d_name) == 0)
				rc = err_set(em, DP_EINVAL, "settings directory %s: %s and %s name the same setting "
					     "(names are case-insensitive)", dir, seen[i], de->d_name);
		if (rc != 0)
			break;
		seen[files++] = mem_strdup(de->d_name);
		/* Egress__S3Storage__s3__BucketName -> Egress:S3Storage:s3:BucketName (.NET's key-per-file) */
		colons(de->d_name, n, key);
		buf_init(&b, MAX_VALUE_BYTES);
		if ((rc = buf_read_path(&b, path, NULL, em)) == 0) {
			while (b.len && (b.data[b.len - 1] == '\n' || b.data[b.len - 1] == '\r'))
				b.data[--b.len] = '\0';
			rc = put(c, key, b.data ? b.data : "", path, warn != NULL, em);
			if (rc == 1 && warn) { /* dotnet-monitor's settings this agent does not have */
				warn(path);
				rc = 0;
			}
		}
		mem_wipe(b.data, b.len);
		buf_free(&b);
	}
	closedir(d);
	for (size_t i = 0; i < files; i++)
		free(seen[i]);
	return rc;
}

int config_load_scoped(struct launch_config *c, enum config_scope scope, const char *path, const char *text,
		       const char *where, void (*warn)(const char *variable), struct err_msg *em)
{
	struct stat st;
	int rc;

	c->scope = scope;
	if (text)
		rc = config_load_text(c, text, strlen(text), where, em);
	else if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
		rc = config_load_dir(c, path, warn, em);
	else
		rc = config_load_file(c, path, em);
	c->scope = CONFIG_ANY;
	return rc;
}

/* DIAGPORT_AUTH_TOKEN_FILE -> "AUTHTOKENFILE" (matched case-insensitively against authTokenFile). */
static void squash(const char *in, size_t n, char *out, size_t cap)
{
	size_t o = 0;

	for (size_t i = 0; i < n && o + 1 < cap; i++)
		if (in[i] != '_')
			out[o++] = in[i];
	out[o] = '\0';
}

/* One variable: 1 when it is not one of prefix's, else config_set's result (unknown DOTNETMONITOR_ ones warned and skipped). */
static int env_one(struct launch_config *c, const char *var, bool monitor, void (*warn)(const char *variable),
		   struct err_msg *em)
{
	const char *eq = strchr(var, '=');
	char key[MAX_PATH_KEY] = "", where[MAX_PATH_KEY + 32];
	size_t n;
	int rc;

	if (eq == NULL || eq[1] == '\0') /* an empty variable is unset, as a shell user expects */
		return 1;
	n = (size_t)(eq - var);
	if (n >= MAX_PATH_KEY)
		return 1;
	snprintf(where, sizeof(where), "environment variable %.*s", (int)n, var);
	if (!monitor) {
		if (strncmp(var, "DIAGPORT_", 9) != 0)
			return 1;
		/* Read by the command itself, not settings: the file's name and the token's value. */
		if ((n == 15 && strncmp(var, "DIAGPORT_CONFIG", 15) == 0) ||
		    (n == 19 && strncmp(var, "DIAGPORT_CONFIG_DIR", 19) == 0) ||
		    (n == 17 && strncmp(var, "DIAGPORT_SETTINGS", 17) == 0) ||
		    (n == 24 && strncmp(var, "DIAGPORT_EGRESS_SETTINGS", 24) == 0) ||
		    (n == 14 && strncmp(var, "DIAGPORT_RULES", 14) == 0) ||
		    (n == 19 && strncmp(var, "DIAGPORT_AUTH_TOKEN", 19) == 0))
			return 1;
		/* a hierarchical name (DIAGPORT_Egress__S3Storage__s3__BucketName) as dotnet-monitor's; else
		 * diagport's own, underscores dropped */
		if (memmem(var + 9, n - 9, "__", 2))
			colons(var + 9, n - 9, key);
		else
			squash(var + 9, n - 9, key, sizeof(key));
		rc = config_set(c, key, eq + 1, where, em);
	} else {
		if (strncasecmp(var, "DOTNETMONITOR_", 14) != 0) /* .NET matches the prefix in any case: DotnetMonitor_ */
			return 1;
		colons(var + 14, n - 14, key);
		rc = put(c, key, eq + 1, where, warn != NULL, em);
	}
	if (secret_key(key)) /* refused too: the agent stops, but not with the secret left in its environ */
		mem_wipe((char *)eq + 1, strlen(eq + 1));
	if (rc == 1 && warn) { /* dotnet-monitor's settings this agent does not have */
		char name[MAX_PATH_KEY + 64];

		snprintf(name, sizeof(name), "%.*s", (int)n, var);
		warn(name);
		return 0;
	}
	return rc;
}

int config_load_env(struct launch_config *c, char **envp, void (*warn)(const char *variable), struct err_msg *em)
{
	/* dotnet-monitor's names first, so diagport's own win where both are set. */
	for (int monitor = 1; monitor >= 0; monitor--)
		for (char **e = envp; e && *e; e++) {
			int rc = env_one(c, *e, monitor, warn, em);

			if (rc < 0)
				return rc;
		}
	return 0;
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
