/*
 * wconfig.h - the webhook's configuration file (--config, YAML or JSON):
 * defaults for every pod it injects, under the injector's option names and
 * value syntax (the diagport.dev/<name> annotations, docs/INJECTION.md), and
 * excludedNamespaces, whose pods are never injected. Reloaded on change.
 */
#ifndef DP_WCONFIG_H
#define DP_WCONFIG_H

#include <stddef.h>

#include "errors.h"
#include "injector/inj.h"

struct wconfig {
	struct inj_opts opts;
	char **excluded; /* namespace names */
	size_t n_excluded;
};

/* Read path (at most 1 MiB) into a new c. DP_EIO, DP_ESYNTAX, DP_EINVAL with em ("FILE:LINE:COL: ..."). */
int wconfig_load(const char *path, struct wconfig *c, struct err_msg *em);
/* Built-in defaults, nothing excluded. */
void wconfig_defaults(struct wconfig *c);
void wconfig_free(struct wconfig *c);
/* True when ns is in the excluded list. */
bool wconfig_excluded(const struct wconfig *c, const char *ns);

#endif
