/*
 * fsutil.c - small filesystem helpers (fsutil.h).
 */
#include "fsutil.h"

#include <dirent.h>
#include <string.h>
#include <unistd.h>

void fs_remove_prefixed(const char *dir, const char *prefix)
{
	DIR *d = opendir(dir);
	struct dirent *e;
	size_t n = strlen(prefix);

	if (d == NULL)
		return;
	while ((e = readdir(d)) != NULL)
		if (strncmp(e->d_name, prefix, n) == 0)
			unlinkat(dirfd(d), e->d_name, 0);
	closedir(d);
}
