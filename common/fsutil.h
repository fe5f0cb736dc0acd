/*
 * fsutil.h - small filesystem helpers the daemons share.
 */
#ifndef DP_FSUTIL_H
#define DP_FSUTIL_H

/* Remove every entry of dir whose name starts with prefix (leftovers of a killed process). Best effort. */
void fs_remove_prefixed(const char *dir, const char *prefix);

#endif
