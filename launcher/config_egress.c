/*
 * config_egress.c - Egress:* keys as each source sets them (config_int.h):
 * the providers by name across Egress:FileSystem, Egress:S3Storage and
 * Egress:AzureBlobStorage, a FileSystem provider's fields bound at once (a
 * bad one is refused naming its source), a store's node kept for its client
 * in the egress process (egress/store.h), and Egress:Properties kept for the
 * stores' ...Name settings.
 *
 * Apart from config.c (the agent's own keys and their setters) because the
 * egress section is open-ended, keyed by the providers' own names, with a
 * rule of its own: a name is used once across every provider type.
 */
#include "config_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

#define MAX_EGRESS 16
#define NAME_CHARS "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_."

/* The provider types: FileSystem, written by the agent, and the stores, written by the egress process. */
static const char *const store_types[] = { "S3Storage", "AzureBlobStorage" };

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
int config_set_egress(struct launch_config *c, const char *key, const char *v, const char *where,
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
