/*
 * ready_probe.c - how long a server takes from exec to serving, for
 * bench/agent.sh (issue 3). Not part of diagport; built by the script.
 *
 *   ready_probe [-n RUNS] [-u SOCKET] -p PORT -- COMMAND [ARGS...]
 *
 * Each run forks, and the child stores CLOCK_MONOTONIC in a shared page just
 * before execve(COMMAND). The parent then polls, every ~100 us, connect() to
 * the Unix socket SOCKET (when given; it only connects and closes, it speaks
 * nothing on it) and a TCP connection to 127.0.0.1:PORT carrying
 * "GET /healthz", until the socket accepts and /healthz answers 200. "Ready"
 * is the later of the two. Then the server gets SIGTERM (SIGKILL after 2 s),
 * is reaped, SOCKET is removed, and the next run starts.
 *
 * Prints one line per run ("run N: ready X.XXX ms (socket S.SSS ms, http
 * H.HHH ms)") and a summary line with median, p90, min and max of "ready".
 * A run that is not ready within 5 s is reported and left out of the
 * summary. Exits 0 whenever it could run the command; 2 on bad usage.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

#define MAX_RUNS 1000
#define POLL_NS 100000L
#define GIVE_UP_MS 5000.0

static double now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* True when something listens on the Unix socket at path. */
static bool unix_accepts(const char *path)
{
	struct sockaddr_un sa = { .sun_family = AF_UNIX };
	int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
	bool ok;

	if (fd < 0)
		return false;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	ok = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0;
	close(fd);
	return ok;
}

/* True when GET /healthz on 127.0.0.1:port answers 200 within a second. */
static bool healthz_ok(int port)
{
	static const char req[] = "GET /healthz HTTP/1.0\r\nHost: 127.0.0.1\r\n\r\n";
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct pollfd pfd;
	char resp[64];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;
	bool ok = false;

	if (fd < 0)
		return false;
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 ||
	    write(fd, req, sizeof(req) - 1) != (ssize_t)(sizeof(req) - 1))
		goto out;
	pfd.fd = fd;
	pfd.events = POLLIN;
	while (got < 12 && poll(&pfd, 1, 1000) == 1) {
		ssize_t n = read(fd, resp + got, sizeof(resp) - 1 - got);

		if (n <= 0)
			break;
		got += (size_t)n;
	}
	resp[got] = '\0';
	ok = got >= 12 && strncmp(resp, "HTTP/1.", 7) == 0 && strncmp(resp + 9, "200", 3) == 0;
out:
	close(fd);
	return ok;
}

static void stop(pid_t pid)
{
	double t = now_ms();

	kill(pid, SIGTERM);
	while (waitpid(pid, NULL, WNOHANG) == 0) {
		if (now_ms() - t > 2000) {
			kill(pid, SIGKILL);
			waitpid(pid, NULL, 0);
			return;
		}
		usleep(1000);
	}
}

static void usage(void)
{
	fprintf(stderr, "usage: ready_probe [-n RUNS] [-u SOCKET] -p PORT -- COMMAND [ARGS...]\n");
	exit(2);
}

int main(int argc, char **argv)
{
	const char *sock = NULL;
	int runs = 30, port = 0, opt, ok = 0;
	static double ready[MAX_RUNS];
	volatile double *t_exec;

	while ((opt = getopt(argc, argv, "n:u:p:")) != -1) {
		if (opt == 'n')
			runs = atoi(optarg);
		else if (opt == 'u')
			sock = optarg;
		else if (opt == 'p')
			port = atoi(optarg);
		else
			usage();
	}
	if (optind >= argc || port <= 0 || port > 65535 || runs < 1 || runs > MAX_RUNS)
		usage();
	t_exec = mmap(NULL, sizeof(*t_exec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t_exec == MAP_FAILED)
		return 1;

	for (int r = 1; r <= runs; r++) {
		double t_sock = 0, t_http = 0;
		const struct timespec nap = { 0, POLL_NS };
		bool exited = false;
		pid_t pid;

		if (sock)
			unlink(sock);
		*t_exec = 0;
		pid = fork();
		if (pid < 0) {
			perror("ready_probe: fork");
			return 1;
		}
		if (pid == 0) {
			int null = open("/dev/null", O_RDWR);

			dup2(null, 0);
			dup2(null, 1);
			dup2(null, 2);
			*t_exec = now_ms();
			execvp(argv[optind], argv + optind);
			_exit(127);
		}
		for (;;) {
			double t = now_ms();

			if (*t_exec == 0) {
				nanosleep(&nap, NULL);
				continue;
			}
			if (t_sock == 0 && (sock == NULL || unix_accepts(sock)))
				t_sock = now_ms();
			if (t_http == 0 && healthz_ok(port))
				t_http = now_ms();
			if (t_sock && t_http)
				break;
			if (t - *t_exec > GIVE_UP_MS || (exited = waitpid(pid, NULL, WNOHANG) == pid))
				break;
			nanosleep(&nap, NULL);
		}
		if (t_sock && t_http) {
			double done = t_sock > t_http ? t_sock : t_http;

			ready[ok++] = done - *t_exec;
			printf("run %d: ready %.3f ms (socket %.3f ms, http %.3f ms)\n", r, done - *t_exec,
			       sock ? t_sock - *t_exec : 0.0, t_http - *t_exec);
		} else {
			printf("run %d: not ready (socket %s, http %s%s)\n", r, t_sock ? "yes" : "no", t_http ? "yes" : "no",
			       exited ? "; the server exited" : "");
		}
		fflush(stdout);
		if (!exited)
			stop(pid);
		usleep(20000);
	}
	if (sock)
		unlink(sock);
	stats_sort(ready, ok);
	if (ok)
		printf("summary: %d/%d ready; median %.3f ms, p90 %.3f ms, min %.3f ms, max %.3f ms\n", ok, runs,
		       stats_pct(ready, ok, 50), stats_pct(ready, ok, 90), ready[0], ready[ok - 1]);
	else
		printf("summary: 0/%d ready\n", runs);
	return 0;
}
