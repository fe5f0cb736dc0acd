/*
 * dump_client.c - one GET of a dump from the agent, timed, for
 * bench/transport.sh. Not part of diagport; built by the script.
 *
 *   dump_client [-r MBPS] [-d DUMPS_DIR] [-a AGENT_PID] PORT PATH
 *   dump_client -n                      (prints CLOCK_MONOTONIC in ms)
 *
 * Sends "GET PATH HTTP/1.1" to 127.0.0.1:PORT and reads the answer to its
 * end, decoding a chunked body, as fast as it comes or, with -r, at no more
 * than MBPS * 10^6 body bytes a second (measured from the first body byte).
 *
 * With -d, a second thread samples the space the dump takes in DUMPS_DIR
 * every 2 ms from the request until the last byte, two ways:
 *   vfs:   statvfs(DUMPS_DIR) used bytes minus what was used before the
 *          request (exact when DUMPS_DIR is a file system of its own, e.g. a
 *          tmpfs the script mounted; it counts unlinked files still open);
 *   files: st_blocks of the regular files in DUMPS_DIR plus, with -a, of the
 *          regular files under DUMPS_DIR that AGENT_PID holds open, unlinked
 *          or not (the file transport's staging file is unlinked before it is
 *          sent), each inode once.
 * Before the request it waits up to 10 s for "files" to read 0, so the space
 * of the previous dump, still being freed, is not counted.
 *
 * Prints one line of name=value fields:
 *   code bytes elf complete chunked t0 first total vfs files
 * t0: CLOCK_MONOTONIC ms at connect; first, total: s from t0 to the first and
 * the last body byte; vfs, files: peak bytes. elf is 1 when the body starts
 * with 0x7f 'E' 'L' 'F'; complete is 1 when the body ended as framed
 * (Content-Length reached, or the last chunk seen).
 * Exit status: 0 for a complete 200 answer whose body starts with the ELF
 * magic, 1 otherwise (the line is printed anyway), 2 on bad usage.
 */
#include <arpa/inet.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#define READ_FAST (1 << 20)
#define READ_SLOW (64 << 10)
#define IO_TIMEOUT_MS (10 * 60 * 1000)
#define MAX_INODES 256

static double mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: dump_client [-r MBPS] [-d DUMPS_DIR] [-a AGENT_PID] PORT PATH | dump_client -n\n");
	exit(2);
}

/* ---- disk sampling ---- */

static const char *dumps_dir;
static char dumps_real[PATH_MAX];
static long agent_pid;
static atomic_bool sampling_done;
static long long vfs_base, vfs_peak, files_peak;

static long long vfs_used(void)
{
	struct statvfs v;

	if (statvfs(dumps_dir, &v) != 0)
		return 0;
	return (long long)(v.f_blocks - v.f_bfree) * (long long)v.f_frsize;
}

struct seen {
	dev_t dev[MAX_INODES];
	ino_t ino[MAX_INODES];
	int n;
};

/* Adds st's blocks unless its inode was counted already. */
static long long count_once(struct seen *s, const struct stat *st)
{
	for (int i = 0; i < s->n; i++)
		if (s->dev[i] == st->st_dev && s->ino[i] == st->st_ino)
			return 0;
	if (s->n < MAX_INODES) {
		s->dev[s->n] = st->st_dev;
		s->ino[s->n] = st->st_ino;
		s->n++;
	}
	return (long long)st->st_blocks * 512;
}

static long long files_used(void)
{
	struct seen s = { .n = 0 };
	struct stat dst, st;
	struct dirent *e;
	long long sum = 0;
	DIR *d;

	if (stat(dumps_dir, &dst) != 0 || (d = opendir(dumps_dir)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL)
		if (fstatat(dirfd(d), e->d_name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode))
			sum += count_once(&s, &st);
	closedir(d);
	if (agent_pid > 0) {
		char p[64], target[PATH_MAX];
		size_t dl = strlen(dumps_real);

		snprintf(p, sizeof(p), "/proc/%ld/fd", agent_pid);
		if ((d = opendir(p)) != NULL) {
			while ((e = readdir(d)) != NULL) {
				ssize_t n;

				if (e->d_name[0] == '.' || fstatat(dirfd(d), e->d_name, &st, 0) != 0 ||
				    !S_ISREG(st.st_mode) || st.st_dev != dst.st_dev)
					continue;
				/* "DIR/NAME" or "DIR/NAME (deleted)"; "DIR/#INO (deleted)" for O_TMPFILE */
				n = readlinkat(dirfd(d), e->d_name, target, sizeof(target) - 1);
				if (n <= 0)
					continue;
				target[n] = '\0';
				if (strncmp(target, dumps_real, dl) == 0 && target[dl] == '/')
					sum += count_once(&s, &st);
			}
			closedir(d);
		}
	}
	return sum;
}

static void sample(void)
{
	long long v = vfs_used() - vfs_base, f = files_used();

	if (v > vfs_peak)
		vfs_peak = v;
	if (f > files_peak)
		files_peak = f;
}

static void *sampler(void *arg)
{
	(void)arg;
	while (!atomic_load(&sampling_done)) {
		sample();
		usleep(2000);
	}
	sample();
	return NULL;
}

/* ---- HTTP ---- */

static int fd_in;

/* Reads up to n bytes; 0 at EOF, -1 on error or timeout. */
static ssize_t get(char *b, size_t n)
{
	for (;;) {
		struct pollfd pf = { .fd = fd_in, .events = POLLIN };
		ssize_t r = read(fd_in, b, n);

		if (r >= 0)
			return r;
		if (errno != EAGAIN && errno != EINTR)
			return -1;
		if (poll(&pf, 1, IO_TIMEOUT_MS) == 0) {
			fprintf(stderr, "dump_client: no data for %d s\n", IO_TIMEOUT_MS / 1000);
			return -1;
		}
	}
}

/* The body decoder: counts body bytes, keeps the first 4, tracks chunk framing. */
enum { S_SIZE, S_EXT, S_SIZE_LF, S_DATA, S_DATA_CR, S_DATA_LF, S_TRAILER, S_DONE };
struct body {
	bool chunked;
	long long length; /* Content-Length, -1 when unknown */
	long long bytes, chunk_left;
	int state, trailer_col;
	unsigned char magic[4];
	double t_first;
};

static void body_data(struct body *b, const char *p, size_t n)
{
	if (n == 0)
		return;
	if (b->bytes == 0)
		b->t_first = mono_ms();
	for (size_t i = 0; i < n && b->bytes + (long long)i < 4; i++)
		b->magic[b->bytes + (long long)i] = (unsigned char)p[i];
	b->bytes += (long long)n;
}

/* Feeds n raw bytes; false on a framing error. */
static bool body_feed(struct body *b, const char *p, size_t n)
{
	size_t i = 0;

	if (!b->chunked) {
		body_data(b, p, n);
		if (b->length >= 0 && b->bytes >= b->length)
			b->state = S_DONE;
		return b->length < 0 || b->bytes <= b->length;
	}
	while (i < n) {
		char c = p[i];

		switch (b->state) {
		case S_SIZE:
			if ((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F')) {
				int d = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;

				if (b->chunk_left > (1LL << 56))
					return false;
				b->chunk_left = b->chunk_left * 16 + d;
			} else if (c == ';' || c == ' ') {
				b->state = S_EXT;
			} else if (c == '\r') {
				b->state = S_SIZE_LF;
			} else {
				return false;
			}
			i++;
			break;
		case S_EXT:
			if (c == '\r')
				b->state = S_SIZE_LF;
			i++;
			break;
		case S_SIZE_LF:
			if (c != '\n')
				return false;
			b->state = b->chunk_left ? S_DATA : S_TRAILER;
			b->trailer_col = 0;
			i++;
			break;
		case S_DATA: {
			size_t k = n - i < (size_t)b->chunk_left ? n - i : (size_t)b->chunk_left;

			body_data(b, p + i, k);
			b->chunk_left -= (long long)k;
			i += k;
			if (b->chunk_left == 0)
				b->state = S_DATA_CR;
			break;
		}
		case S_DATA_CR:
			if (c != '\r')
				return false;
			b->state = S_DATA_LF;
			i++;
			break;
		case S_DATA_LF:
			if (c != '\n')
				return false;
			b->state = S_SIZE;
			i++;
			break;
		case S_TRAILER: /* lines until an empty one */
			if (c == '\n') {
				if (b->trailer_col == 0)
					b->state = S_DONE;
				b->trailer_col = 0;
			} else if (c != '\r') {
				b->trailer_col++;
			}
			i++;
			break;
		case S_DONE:
			return false; /* bytes after the end */
		}
	}
	return true;
}

static const char *header(const char *hdrs, const char *name)
{
	size_t n = strlen(name);

	for (const char *l = strstr(hdrs, "\r\n"); l; l = strstr(l + 2, "\r\n"))
		if (strncasecmp(l + 2, name, n) == 0 && l[2 + n] == ':')
			return l + 3 + n + strspn(l + 3 + n, " \t");
	return NULL;
}

int main(int argc, char **argv)
{
	static char buf[READ_FAST + 1];
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct body b = { .length = -1, .state = S_SIZE };
	double mbps = 0, t0, t_body = 0, t_end;
	char req[4096], *eoh = NULL;
	size_t have = 0, chunk;
	pthread_t th;
	int opt, code = 0, s;
	bool ok = true;
	ssize_t r;

	while ((opt = getopt(argc, argv, "r:d:a:n")) != -1) {
		switch (opt) {
		case 'r':
			mbps = atof(optarg);
			break;
		case 'd':
			dumps_dir = optarg;
			break;
		case 'a':
			agent_pid = atol(optarg);
			break;
		case 'n':
			printf("%.3f\n", mono_ms());
			return 0;
		default:
			usage();
		}
	}
	if (argc - optind != 2)
		usage();
	sa.sin_port = htons((uint16_t)atoi(argv[optind]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	chunk = mbps > 0 ? READ_SLOW : READ_FAST;

	if (dumps_dir) {
		if (realpath(dumps_dir, dumps_real) == NULL) {
			perror("dump_client: realpath");
			return 1;
		}
		long long left = files_used();

		for (int i = 0; i < 1000 && left > 0; i++) {
			usleep(10000);
			left = files_used();
		}
		if (left > 0)
			fprintf(stderr, "dump_client: %s still holds %lld bytes after 10 s; counting from there\n",
				dumps_dir, left);
		vfs_base = vfs_used();
		if (pthread_create(&th, NULL, sampler, NULL) != 0) {
			perror("dump_client: pthread_create");
			return 1;
		}
	}
	t0 = mono_ms();
	if ((s = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
	    connect(s, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		perror("dump_client: connect");
		return 1;
	}
	fd_in = s;
	snprintf(req, sizeof(req), "GET %s HTTP/1.1\r\nHost: 127.0.0.1:%s\r\nConnection: close\r\n\r\n", argv[optind + 1],
		 argv[optind]);
	if (write(s, req, strlen(req)) != (ssize_t)strlen(req)) {
		perror("dump_client: write");
		return 1;
	}
	/* headers */
	while (eoh == NULL) {
		if (have >= 65536 || (r = get(buf + have, 65536 - have)) <= 0) {
			fprintf(stderr, "dump_client: no complete response header\n");
			ok = false;
			break;
		}
		have += (size_t)r;
		buf[have] = '\0';
		eoh = strstr(buf, "\r\n\r\n");
	}
	if (ok) {
		const char *te, *cl;
		size_t hlen = (size_t)(eoh + 4 - buf);

		eoh[2] = '\0';
		if (sscanf(buf, "HTTP/1.%*c %d", &code) != 1)
			ok = false;
		te = header(buf, "Transfer-Encoding");
		cl = header(buf, "Content-Length");
		b.chunked = te && strncasecmp(te, "chunked", 7) == 0;
		if (!b.chunked && cl)
			b.length = atoll(cl);
		t_body = mono_ms();
		if (!body_feed(&b, buf + hlen, have - hlen))
			ok = false;
		if (code != 200) {
			/* show what the agent said, then read no further */
			fprintf(stderr, "dump_client: HTTP %d: %.*s\n", code, (int)(have - hlen > 500 ? 500 : have - hlen),
				buf + hlen);
			ok = false;
		}
	}
	/* body */
	while (ok && b.state != S_DONE) {
		if ((r = get(buf, chunk)) < 0) {
			ok = false;
			break;
		}
		if (r == 0)
			break;
		if (!body_feed(&b, buf, (size_t)r)) {
			fprintf(stderr, "dump_client: malformed body framing\n");
			ok = false;
			break;
		}
		if (mbps > 0) {
			static long long raw;
			double due, now;

			raw += r;
			due = t_body + (double)raw / (mbps * 1e3); /* ms */
			now = mono_ms();
			if (due > now)
				usleep((useconds_t)((due - now) * 1e3));
		}
	}
	t_end = mono_ms();
	if (dumps_dir) {
		atomic_store(&sampling_done, true);
		pthread_join(th, NULL);
	}
	close(s);
	if (b.state != S_DONE && b.length < 0 && !b.chunked && ok)
		b.state = S_DONE; /* no framing: the body ends at EOF */
	printf("code=%d bytes=%lld elf=%d complete=%d chunked=%d t0=%.3f first=%.4f total=%.4f vfs=%lld files=%lld\n",
	       code, b.bytes, b.bytes >= 4 && memcmp(b.magic, "\177ELF", 4) == 0, b.state == S_DONE, b.chunked, t0,
	       b.bytes ? (b.t_first - t0) / 1e3 : 0.0, (t_end - t0) / 1e3, dumps_dir ? vfs_peak : -1,
	       dumps_dir ? files_peak : -1);
	return ok && code == 200 && b.state == S_DONE && b.bytes >= 4 && memcmp(b.magic, "\177ELF", 4) == 0 ? 0 : 1;
}
