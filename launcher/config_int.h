/*
 * config_int.h - what the agent's settings files share: config.c (the key
 * table, its setters, and config_put, which every source's leaves go
 * through), config_src.c (the sources: a file or document, a key-per-file
 * directory, the environment) and config_egress.c (Egress:* keys as they
 * are set).
 *
 * config_src.c calls config.c, which calls config_egress.c; none calls one
 * above it. 0 or a negative DP_E* code with em, as config.h's functions.
 */
#ifndef DP_LAUNCH_CONFIG_INT_H
#define DP_LAUNCH_CONFIG_INT_H

#include <stdbool.h>

#include "config.h"

#define MAX_PATH_KEY 512 /* a setting's colon path, whatever its source */

/*
 * config_set, and for the sources dotnet-monitor's deployments use (monitor): 1 when key is one of
 * dotnet-monitor's settings this agent does not have (config.c's monitor_names), marked read for the
 * caller to warn.
 */
int config_put(struct launch_config *c, const char *key, const char *value, const char *where, bool monitor,
	       struct err_msg *em);

/* Whether key is one of dotnet-monitor's settings this agent does not have (monitor_names), warned about. */
bool config_monitor_name(const char *key);

/*
 * Whether key names a setting or a section of one that some part of the agent reads, or one of
 * dotnet-monitor's it warns about: an empty map or a list there is a value to read, not a misspelling.
 */
bool config_known_section(const char *key);

/* Whether key is one of the agent's own settings, each a single value (socket, Storage:DumpTempFolder). */
bool config_is_scalar(const char *key);

/* key, from where, is a name nothing reads: refused as config_put refuses one (its path, source, the nearest
 * known name). Always DP_E* with em. */
int config_refuse_name(struct launch_config *c, const char *key, const char *where, struct err_msg *em);

/* Whether key is Metrics:Providers or Metrics:Meters or below: lists, read by metrics_selection_settings. */
bool config_metrics_list_key(const char *key);

/* Whether key's value is a secret (a store's key, Egress:Properties, the TLS key's password or PEM): its
 * variable's value is wiped once read. */
bool config_secret_key(const char *key);

/*
 * Egress:TYPE:NAME:FIELD or Egress:Properties:KEY, already in c's tree: a FileSystem provider's field bound,
 * a store's provider made and its node kept. 1 when key is not an egress key.
 */
int config_set_egress(struct launch_config *c, const char *key, const char *v, const char *where,
		      struct err_msg *em);

#endif
