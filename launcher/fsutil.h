/*
 * fsutil.h - small filesystem helpers the daemons share.
 */
#ifndef DP_FSUTIL_H
#define DP_FSUTIL_H

#include <stddef.h>

/* Remove every entry of dir whose name starts with prefix (leftovers of a killed process). Best effort. */
void fs_remove_prefixed(const char *dir, const char *prefix);
/* Write all n bytes of p to fd (a file), retrying short writes and EINTR. 0, or -1 with errno set. */
int fs_write_all(int fd, const void *p, size_t n);

#endif
