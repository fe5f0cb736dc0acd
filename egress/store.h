/*
 * store.h - what the egress process (launcher/capture/eproc.h) and the store
 * clients of egress/ (S3, Azure Blob) share: a provider as the agent's
 * settings gave it, and the calls a store client answers. egress/ is a
 * library below the agent: it includes nothing of launcher/.
 */
#ifndef DP_EGRESS_STORE_H
#define DP_EGRESS_STORE_H

#include <stddef.h>
#include <stdint.h>

#include "errors.h"
#include "settings.h"

/*
 * An egress provider. FileSystem (type NULL): artifacts are written under
 * tmp_dir, then renamed into dir, by the agent itself. A store (type
 * "S3Storage" or "AzureBlobStorage"): its settings are its node in the agent's
 * settings tree (common/settings.h), read by the egress process
 * (launcher/capture/eproc.h), which alone talks to the network; the agent
 * checks them at startup through the same readers, whose reads mark what the
 * agent then does not refuse as unknown.
 */
struct egress_provider {
	char *name;
	char *dir;     /* FileSystem: DirectoryPath */
	char *tmp_dir; /* FileSystem: IntermediateDirectoryPath, or NULL = dir */
	const char *type; /* NULL: FileSystem; else a static string, "S3Storage" or "AzureBlobStorage" */
	/* a store: Egress:TYPE:NAME, its settings under it (borrowed from the tree). Egress:Properties, which
	 * its ...Name settings point into, is egress_properties(p). */
	struct settings_node *set;
};

/* The Egress:Properties section beside p's (NULL when there is none). */
static inline struct settings_node *egress_properties(const struct egress_provider *p)
{
	return p->set && p->set->up && p->set->up->up ? settings_find(p->set->up->up, "Properties") : NULL;
}

/* What a store client gives the egress process (egress/s3_store.h, egress/azblob.h). */
struct egress_store {
	const char *type; /* "S3Storage", "AzureBlobStorage" */
	/* The provider's settings make sense (in the agent, at startup: em names the setting and where it came from). */
	int (*check)(const struct egress_provider *p, struct err_msg *em);
	/*
	 * One upload, in the egress process: begin, then write as the bytes come,
	 * then finish (the location, a new string) or abort (nothing left on the
	 * store). meta: name/value pairs, NULL-terminated. sent: bytes acknowledged
	 * by the store so far, updated as parts complete. cancel_fd (-1: none; it
	 * stays open until abort or finish returns): once it is readable, the
	 * upload's waits and retries end (write or finish fail with DP_ECANCELED)
	 * and abort cleans up on the store within seconds, not cancellable itself.
	 */
	int (*begin)(const struct egress_provider *p, const char *name, const char *const *meta, int cancel_fd,
		     void **up, struct err_msg *em);
	int (*write)(void *up, const void *data, size_t len, struct err_msg *em);
	int (*finish)(void *up, char **location, struct err_msg *em);
	void (*abort)(void *up);
	uint64_t (*sent)(void *up);
};

#endif
