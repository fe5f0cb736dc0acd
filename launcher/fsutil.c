/*
 * fsutil.c - small filesystem helpers (fsutil.h).
 */
#include "fsutil.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
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
		if (strncmp(e->d_name, prefix, n) == 0) {
			/*
			 * A dump pipe a killed agent left may still have createdump
			 * blocked opening it for writing, with the app's threads
			 * stopped: opening it for reading and closing it lets that
			 * open return, and createdump's first write fails (EPIPE), so
			 * it gives up and the app runs on.
			 */
			int fd = e->d_type == DT_FIFO || e->d_type == DT_UNKNOWN
					 ? openat(dirfd(d), e->d_name, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOFOLLOW) : -1;

			if (fd >= 0)
				close(fd);
			unlinkat(dirfd(d), e->d_name, 0);
		}
	closedir(d);
}

int fs_write_all(int fd, const void *p, size_t n)
{
	const char *c = p;

	while (n > 0) {
		ssize_t k = write(fd, c, n);

		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0) {
			if (k == 0)
				errno = EIO;
			return -1;
		}
		c += k;
		n -= (size_t)k;
	}
	return 0;
}
