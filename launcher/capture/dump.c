/*
 * dump.c - dumps through a named pipe (dump.h).
 *
 * The pipe is what makes dumps work whatever users the app and the agent run
 * as (the FIFO is 0666; createdump's own file would be 0600 and the app's),
 * and what lets the agent cap, cancel and clean up: the bytes pass through a
 * descriptor it owns, so a full disk, a cap or a DELETE stop createdump at
 * once (EPIPE) instead of letting it fill the volume. The pipe's buffer is
 * raised to 1 MiB to cut context switches; splice moves pipe pages into the
 * file without copying them through user space.
 */
#include "dump.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "launcher/runtime/ipc.h"
#include "mem.h"

#define TAKE_TIMEOUT_MS 5000
#define STALL_TIMEOUT_MS (15LL * 60 * 1000) /* createdump writes steadily; this long without a byte is a hang */
#define VERDICT_TIMEOUT_MS 60000
#define PIPE_BYTES (1 << 20)
#define TICK_MS 200
#define BOUNCE_BYTES ((size_t)64 * 1024)

struct dump_job {
	struct port *port;
	uint8_t cookie[16];
	int rfd, conn;
	char *path;
	bool unlinked;
	char *bounce; /* for filesystems without splice; allocated the first time one is met */
	void (*progress)(void *ctx, uint64_t total); /* dump_copy's bytes so far, after every move */
	void *progress_ctx;
	long long (*take)(void *ctx, int rfd); /* offered the pipe before every move (dump_on_pipe) */
	void *take_ctx;
};

int dump_transport(const char *name)
{
	if (name == NULL || strcmp(name, "file") == 0)
		return DUMP_VIA_FILE;
	if (strcmp(name, "staged") == 0)
		return DUMP_VIA_STAGED;
	if (strcmp(name, "fifo") == 0)
		return DUMP_VIA_FIFO;
	return -1;
}

void dump_on_progress(struct dump_job *j, void (*fn)(void *ctx, uint64_t total), void *ctx)
{
	j->progress = fn;
	j->progress_ctx = ctx;
}

void dump_on_pipe(struct dump_job *j, long long (*fn)(void *ctx, int rfd), void *ctx)
{
	j->take = fn;
	j->take_ctx = ctx;
}

int dump_type(const char *t)
{
	if (t == NULL || strcasecmp(t, "WithHeap") == 0)
		return IPC_DUMP_WITHHEAP;
	if (strcasecmp(t, "Mini") == 0)
		return IPC_DUMP_NORMAL;
	if (strcasecmp(t, "Triage") == 0)
		return IPC_DUMP_TRIAGE;
	if (strcasecmp(t, "Full") == 0)
		return IPC_DUMP_FULL;
	return -1;
}

void dump_filename(char *out, size_t n)
{
	time_t now = time(NULL);
	struct tm tm;

	gmtime_r(&now, &tm);
	strftime(out, n, "core_%Y%m%d_%H%M%S", &tm);
}

void dump_free(struct dump_job *j)
{
	if (j == NULL)
		return;
	if (j->rfd >= 0)
		close(j->rfd); /* a createdump still writing gets EPIPE and stops; the app runs on */
	if (j->conn >= 0) {
		close(j->conn);
		port_release(j->port, j->cookie);
	}
	if (!j->unlinked)
		unlink(j->path);
	free(j->bounce);
	free(j->path);
	free(j);
}

/* Read an Error answer's HRESULT and text from the connection (the header already parsed). */
static void read_error(struct dump_job *j, const struct ipc_header *h, uint32_t *hr, char **text)
{
	size_t n = h->size > IPC_HEADER_SIZE ? (size_t)h->size - IPC_HEADER_SIZE : 0; /* <= 65515 */
	char *tmp = mem_alloc(n + 1);

	*hr = IPC_E_FAIL;
	*text = NULL;
	if (n && ipc_read_full(j->conn, tmp, n, 5000) == 0)
		ipc_parse_error((const uint8_t *)tmp, n, hr, text);
	free(tmp);
}

static int refused(struct err_msg *em, uint32_t hr, char *text)
{
	int rc = err_set(em, DP_EREFUSED, "the runtime could not write the dump: %s (0x%08x)%s%s", ipc_hresult_str(hr),
			 hr, text && *text ? ": " : "", text ? text : "");

	free(text);
	return rc;
}

/* Send one dump command and wait for the first byte in the pipe or an answer, whichever comes first. */
static int try_command(struct dump_job *j, uint8_t id, int type, uint32_t *hr, char **text, struct err_msg *em)
{
	struct pollfd pf[2];
	struct ipc_header h;
	uint8_t hdr[IPC_HEADER_SIZE];
	struct buf req;
	int rc, n;

	buf_init(&req, IPC_MAX_MESSAGE);
	ipc_begin(&req, IPC_SET_DUMP, id);
	rc = ipc_put_string(&req, j->path);
	ipc_put_u32(&req, (uint32_t)type);
	ipc_put_u32(&req, 0);
	if (rc == 0)
		rc = ipc_end(&req);
	if (rc != 0) {
		buf_free(&req);
		return err_set(em, DP_EINVAL, "the dump path %s cannot be sent to the runtime", j->path);
	}
	rc = port_take(j->port, j->cookie, TAKE_TIMEOUT_MS, &j->conn);
	if (rc == 0)
		rc = ipc_write_full(j->conn, req.data, req.len, 5000);
	buf_free(&req);
	if (rc == DP_ENOTFOUND)
		return err_set(em, rc, "the process is no longer attached");
	if (rc != 0)
		return err_set(em, DP_EIO, "the runtime did not take the dump command: %s", strerror(errno));
	pf[0] = (struct pollfd){ .fd = j->rfd, .events = POLLIN };
	pf[1] = (struct pollfd){ .fd = j->conn, .events = POLLIN };
	do
		n = poll(pf, 2, (int)STALL_TIMEOUT_MS);
	while (n < 0 && errno == EINTR);
	if (n <= 0)
		return err_set(em, DP_EIO, "createdump wrote nothing in %lld minutes", STALL_TIMEOUT_MS / 60000);
	if (pf[0].revents & POLLIN)
		return 0; /* createdump is writing */
	/* The runtime answered before anything was written: a failure, or a command it does not know. */
	if (ipc_read_full(j->conn, hdr, sizeof(hdr), 5000) != 0 || ipc_parse_header(hdr, &h) != 0) {
		*hr = IPC_E_FAIL;
		*text = NULL;
	} else if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK) {
		*hr = IPC_E_FAIL; /* OK without a byte written: createdump could not open the pipe */
		*text = mem_strdup("the runtime reported success, but nothing was written to the dump pipe");
	} else {
		read_error(j, &h, hr, text);
	}
	close(j->conn);
	port_release(j->port, j->cookie);
	j->conn = -1;
	return DP_EREFUSED;
}

int dump_start(struct port *port, const uint8_t cookie[16], const char *fifo_path, int type,
	       struct dump_job **out, struct err_msg *em)
{
	static const uint8_t ids[] = { IPC_DUMP_GENERATE3, IPC_DUMP_GENERATE2, IPC_DUMP_GENERATE };
	struct dump_job *j = mem_zalloc(sizeof(*j));
	uint32_t hr = 0;
	char *text = NULL;
	int rc = DP_EIO;

	j->port = port;
	memcpy(j->cookie, cookie, 16);
	j->rfd = j->conn = -1;
	j->path = mem_strdup(fifo_path);
	if (mkfifo(fifo_path, 0600) != 0) {
		j->unlinked = true; /* not ours to remove */
		rc = err_set(em, DP_EIO, "cannot create the dump pipe %s: %s", fifo_path, strerror(errno));
		goto out;
	}
	/* createdump, running as the app's uid, opens it to write; only the agent reads it: the dump is every secret
	 * the app holds, and the dumps volume is shared with the app's container */
	if (chmod(fifo_path, 0622) != 0 || (j->rfd = open(fifo_path, O_RDONLY | O_NONBLOCK | O_CLOEXEC)) < 0) {
		rc = err_set(em, DP_EIO, "cannot open the dump pipe %s: %s", fifo_path, strerror(errno));
		goto out;
	}
	fcntl(j->rfd, F_SETPIPE_SZ, PIPE_BYTES); /* best effort: the default 64 KiB works too */
	for (size_t i = 0; i < sizeof(ids); i++) {
		free(text);
		text = NULL;
		rc = try_command(j, ids[i], type, &hr, &text, em);
		if (rc != DP_EREFUSED || hr != IPC_E_UNKNOWN_COMMAND)
			break;
	}
	if (rc == DP_EREFUSED) {
		refused(em, hr, text);
		text = NULL;
	}
out:
	free(text);
	if (rc != 0) {
		dump_free(j);
		return rc;
	}
	unlink(fifo_path); /* createdump has it open; nothing stays in the directory */
	j->unlinked = true;
	*out = j;
	return 0;
}

/* The runtime's answer once createdump has closed the pipe. */
static int verdict(struct dump_job *j, struct err_msg *em)
{
	uint8_t hdr[IPC_HEADER_SIZE];
	struct ipc_header h;
	uint32_t hr;
	char *text;

	if (ipc_read_full(j->conn, hdr, sizeof(hdr), VERDICT_TIMEOUT_MS) != 0 || ipc_parse_header(hdr, &h) != 0)
		return err_set(em, DP_EIO, "the runtime gave no answer after the dump (did the app exit?)");
	if (h.set == IPC_SET_SERVER && h.id == IPC_SERVER_OK)
		return 0;
	read_error(j, &h, &hr, &text);
	return refused(em, hr, text);
}

/* fd cannot take more now: wait a tick for room (true), or false when it can. */
static bool out_full(int fd)
{
	struct pollfd pf = { .fd = fd, .events = POLLOUT };

	if (poll(&pf, 1, 0) != 0)
		return false;
	poll(&pf, 1, TICK_MS);
	return true;
}

/* Wait until the pipe is readable: 1, 0 on the tick (to look at *cancel), -1 when nothing came for the stall timeout. */
static int wait_readable(struct dump_job *j, long long *idle_ms)
{
	struct pollfd pf = { .fd = j->rfd, .events = POLLIN };
	int n = poll(&pf, 1, TICK_MS);

	if (n > 0) {
		*idle_ms = 0;
		return 1;
	}
	if (n < 0 && errno != EINTR)
		return -1;
	*idle_ms += TICK_MS;
	return *idle_ms >= STALL_TIMEOUT_MS ? -1 : 0;
}

long dump_read(struct dump_job *j, char *out, size_t max)
{
	long long idle = 0;

	for (;;) {
		ssize_t n = read(j->rfd, out, max);

		if (n > 0)
			return n;
		if (n == 0)
			return verdict(j, NULL) == 0 ? 0 : -1;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		if (wait_readable(j, &idle) < 0)
			return -1;
	}
}

/* Move up to max bytes from the pipe into fd: splice where the filesystem takes it, else read and write. */
static ssize_t move(struct dump_job *j, int fd, size_t max)
{
	ssize_t n = splice(j->rfd, NULL, fd, NULL, max, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
	ssize_t w, done = 0;

	if (n >= 0 || errno != EINVAL)
		return n;
	if (j->bounce == NULL)
		j->bounce = mem_alloc(BOUNCE_BYTES);
	n = read(j->rfd, j->bounce, max < BOUNCE_BYTES ? max : BOUNCE_BYTES);
	while (n > 0 && done < n) {
		if ((w = write(fd, j->bounce + done, (size_t)(n - done))) < 0)
			return -1;
		done += w;
	}
	return n;
}

int dump_copy(struct dump_job *j, int fd, uint64_t cap, const atomic_bool *cancel, uint64_t *written,
	      struct err_msg *em)
{
	uint64_t total = 0;
	long long idle = 0;
	int rc = 0;

	for (;;) {
		size_t want = PIPE_BYTES;
		ssize_t n;

		if (cancel && atomic_load(cancel)) {
			rc = err_set(em, DP_ECANCELED, "the dump was cancelled");
			break;
		}
		if (j->take) {
			long long t = j->take(j->take_ctx, j->rfd);

			if (t < 0) {
				rc = err_set(em, DP_ECANCELED, "the bytes taken from the pipe could not be sent on");
				break;
			}
			if (t > 0) {
				idle = 0;
				continue;
			}
		}
		if (cap && total + want > cap + 1)
			want = (size_t)(cap + 1 - total); /* one byte over the cap is enough to know */
		n = move(j, fd, want);
		if (n > 0) {
			total += (uint64_t)n;
			idle = 0;
			if (cap && total > cap) {
				rc = err_set(em, DP_ETOOBIG, "the dump is larger than the staging cap of %llu bytes "
					     "(--dumps-limit)", (unsigned long long)cap);
				break;
			}
			if (j->progress)
				j->progress(j->progress_ctx, total);
			continue;
		}
		if (n == 0) {
			close(j->rfd); /* createdump is done with it */
			j->rfd = -1;
			rc = verdict(j, em);
			break;
		}
		if (errno == ENOSPC || errno == EDQUOT || errno == EFBIG) {
			rc = err_set(em, DP_ETOOBIG, "the disk is full after %llu bytes of the dump (%s)",
				     (unsigned long long)total, strerror(errno));
			break;
		}
		if (errno != EAGAIN && errno != EINTR) {
			rc = err_set(em, DP_EIO, "writing the dump failed after %llu bytes: %s", (unsigned long long)total,
				     strerror(errno));
			break;
		}
		/* a pipe on the other side (the egress process) that is full: wait for room, not for createdump,
		 * which has bytes (else splice would spin); its pace is the store's, not a stall */
		if (errno == EAGAIN && out_full(fd))
			continue;
		if (wait_readable(j, &idle) < 0) {
			rc = err_set(em, DP_EIO, "createdump wrote nothing for %lld minutes", STALL_TIMEOUT_MS / 60000);
			break;
		}
	}
	if (rc != 0 && j->rfd >= 0) {
		close(j->rfd); /* stop createdump now: it gets EPIPE */
		j->rfd = -1;
	}
	if (rc == 0)
		*written = total;
	return rc;
}
