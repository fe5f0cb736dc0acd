/*
 * config_src.c - the agent's settings sources (config.h): a YAML or JSON
 * file or document, a key-per-file directory (a Secret's or ConfigMap's
 * volume), the environment (DIAGPORT_ and DOTNETMONITOR_ variables), and a
 * workload's scoped source.
 *
 * Each source is turned into colon paths, with where each value came from
 * (FILE:LINE:COL, the file, the variable) for messages, and every leaf goes
 * through config_put (config.c) into the one settings tree, whatever its
 * source. Apart from config.c's key table and setters because reading a
 * source is I/O with caps of its own (a file's bytes, a directory's files,
 * a name's length) and the wiping of what may hold a store's key.
 */
#include "config_int.h"

#include <dirent.h>
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>

#include "buf.h"
#include "doc.h"
#include "mem.h"

#define MAX_FILE_BYTES (1 << 20)
#define MAX_DIR_FILES 256              /* files in a key-per-file settings directory */
#define MAX_VALUE_BYTES (64 << 10)     /* one of them */

/*
 * Walk a map or a list, setting every scalar leaf under its colon path: a
 * map's values under KEY:NAME, a list's items (taken in the collection rules
 * only: Filters, Actions, IncludePaths, ..., and Metrics:Providers,
 * Metrics:Meters and their name lists) under KEY:0, KEY:1, ... as .NET
 * configuration binds a JSON array.
 */
/* Whether key's items (KEY:0, ...) are one of dotnet-monitor's settings this agent warns about. */
static bool monitor_list(const char *key)
{
	char item[MAX_PATH_KEY + 4];

	snprintf(item, sizeof(item), "%s:0", key);
	return config_monitor_name(item);
}

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
		if (((v->type == DOC_MAP && v->n == 0) || v->type == DOC_SEQ) && !config_known_section(key))
			rc = config_refuse_name(c, key, where, em); /* a misspelt name is said as one, whatever its value */
		else if (v->type == DOC_MAP && v->n == 0 && config_is_scalar(key))
			rc = err_set(em, DP_EINVAL, "%s: %s takes a single value, not a map", where, key);
		else if (v->type == DOC_MAP ||
			 (v->type == DOC_SEQ && (config_is_rule_key(key) || config_metrics_list_key(key) ||
						 (c->warn != NULL && monitor_list(key)))))
			rc = walk(c, v, key, strlen(key), file, em); /* dotnet-monitor's lists (DefaultProcess:Filters)
									 are warned about item by item */
		else if (v->type == DOC_SEQ)
			rc = err_set(em, DP_EINVAL, "%s: %s takes a single value, not a list", where, key);
		else if (v->type == DOC_NULL)
			rc = err_set(em, DP_EINVAL, "%s: %s has no value", where, key);
		else if ((rc = config_put(c, key, v->text, where, c->warn != NULL, em)) == 1) {
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

/* Whether path, links followed, is within the directory top (already resolved). */
static bool inside(const char *top, const char *path)
{
	char real[PATH_MAX];
	size_t n = strlen(top);

	return realpath(path, real) != NULL && strncmp(real, top, n) == 0 && real[n] == '/';
}

int config_load_dir(struct launch_config *c, const char *dir, void (*warn)(const char *variable), struct err_msg *em)
{
	DIR *d = opendir(dir);
	struct dirent *de;
	char *seen[MAX_DIR_FILES]; /* the files' names so far: two naming one setting are refused */
	size_t files = 0;
	char top[PATH_MAX];
	int rc = 0;

	if (d == NULL)
		return err_set(em, DP_EIO, "settings directory %s: %s", dir, strerror(errno));
	if (realpath(dir, top) == NULL) {
		closedir(d);
		return err_set(em, DP_EIO, "settings directory %s: %s", dir, strerror(errno));
	}
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
		/* A workload's own directory (the app team's) is read only within itself: a volume's links
		 * (KEY -> ..data/KEY) stay inside it; one leading elsewhere would read a file of the agent's
		 * (its token) into a setting and perhaps a message. */
		if (c->scope == CONFIG_WORKLOAD && !inside(top, path)) {
			rc = err_set(em, DP_EINVAL, "settings directory %s: %s leads outside the directory", dir,
				     de->d_name);
			break;
		}
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
			rc = config_put(c, key, b.data ? b.data : "", path, warn != NULL, em);
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
		if (strncasecmp(var, "DIAGPORT_", 9) == 0 && strncmp(var, "DIAGPORT_", 9) != 0)
			return err_set(em, DP_EINVAL, "%s: diagport's variables are named in capitals (DIAGPORT_...); "
				       "this one would not be read", where);
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
		rc = config_put(c, key, eq + 1, where, warn != NULL, em);
	}
	if (config_secret_key(key)) /* refused too: the agent stops, but not with the secret left in its environ */
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
