/*
 * egress.c - the filesystem egress provider (egress.h).
 *
 * Publishing is fsync of the data, then renameat2(RENAME_NOREPLACE) into
 * the final directory (link + unlink where the filesystem lacks it), then
 * fsync of the directory, so the name appears only for a complete, durable
 * file and never replaces someone else's.
 */
#include "egress.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "launcher/fsutil.h"
#include "mem.h"

#define PARTIAL_PREFIX ".diagport-egress-"
#define MAX_SUFFIX 1000

static const char *tmp_dir(const struct egress_provider *p)
{
	return p->tmp_dir ? p->tmp_dir : p->dir;
}

void egress_fs_clean(const struct egress_provider *p)
{
	fs_remove_prefixed(tmp_dir(p), PARTIAL_PREFIX);
}

int egress_fs_open(const struct egress_provider *p, const char *op_id, int *fd, char **tmp_path, struct err_msg *em)
{
	char *path = mem_printf("%s/%s%s.partial", tmp_dir(p), PARTIAL_PREFIX, op_id);
	int f = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0600);

	if (f < 0) {
		int rc = err_set(em, DP_EIO, "egress provider '%s': cannot create %s: %s", p->name, path, strerror(errno));

		free(path);
		return rc;
	}
	*fd = f;
	*tmp_path = path;
	return 0;
}

void egress_fs_discard(int fd, const char *tmp_path)
{
	if (fd >= 0)
		close(fd);
	unlink(tmp_path);
}

/* Rename without replacing: 0, or -1 with errno (EEXIST when the name is taken). */
static int move_noreplace(const char *from, const char *to)
{
	if (renameat2(AT_FDCWD, from, AT_FDCWD, to, RENAME_NOREPLACE) == 0)
		return 0;
	if (errno != EINVAL && errno != ENOSYS)
		return -1;
	if (link(from, to) != 0) /* a filesystem without RENAME_NOREPLACE: link fails on an existing name too */
		return -1;
	unlink(from);
	return 0;
}

int egress_fs_publish(const struct egress_provider *p, int fd, const char *tmp_path, const char *name, char **final,
		      struct err_msg *em)
{
	int rc = 0, dfd;

	if (fsync(fd) != 0) {
		rc = err_set(em, errno == ENOSPC || errno == EDQUOT ? DP_ETOOBIG : DP_EIO,
			     "egress provider '%s': writing %s failed: %s", p->name, tmp_path, strerror(errno));
		egress_fs_discard(fd, tmp_path);
		return rc;
	}
	close(fd);
	for (int i = 1; i <= MAX_SUFFIX; i++) {
		char *to = i == 1 ? mem_printf("%s/%s", p->dir, name) : mem_printf("%s/%s-%d", p->dir, name, i);

		if (move_noreplace(tmp_path, to) == 0) {
			*final = to;
			if ((dfd = open(p->dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC)) >= 0) {
				fsync(dfd); /* the new name survives a crash */
				close(dfd);
			}
			return 0;
		}
		rc = errno;
		free(to);
		if (rc != EEXIST)
			break;
	}
	unlink(tmp_path);
	return err_set(em, DP_EIO, "egress provider '%s': cannot publish %s/%s: %s", p->name, p->dir, name,
		       rc == EEXIST ? "too many files of that name" : strerror(rc));
}
