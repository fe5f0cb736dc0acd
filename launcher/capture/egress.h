/*
 * egress.h - the filesystem egress provider: an artifact is written under a
 * temporary name and renamed into place only when it is complete, so a
 * reader of the directory never sees a partial file under a final name.
 */
#ifndef DP_EGRESS_H
#define DP_EGRESS_H

#include "launcher/config.h"
#include "errors.h"

/* Remove partial files a killed agent left in the provider's temporary directory. */
void egress_fs_clean(const struct egress_provider *p);

/* Create the partial file for operation op_id (mode 0600). 0 with *fd and *tmp_path (new string); DP_EIO with em. */
int egress_fs_open(const struct egress_provider *p, const char *op_id, int *fd, char **tmp_path, struct err_msg *em);

/*
 * Flush and close fd, then rename tmp_path to DirectoryPath/NAME without
 * replacing an existing file (NAME, then NAME-2, NAME-3, ...). 0 with *final
 * (new string). On failure the partial file is removed, DP_EIO/DP_ETOOBIG with em.
 */
int egress_fs_publish(const struct egress_provider *p, int fd, const char *tmp_path, const char *name, char **final,
		      struct err_msg *em);

/* Close fd and remove the partial file (after a failed or cancelled capture). */
void egress_fs_discard(int fd, const char *tmp_path);

#endif
