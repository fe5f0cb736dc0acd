/*
 * health.c - `diagport health [--port N]` (cli.h): the agent's probe for
 * images without a shell, on a plain socket to this host's loopback.
 */
#include "cli.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "errors.h"
#include "http/httpd.h"

/*
 * GET /healthz from the agent on this host's loopback, on a plain socket: a
 * probe runs every few seconds, and in the agent's image (a static binary,
 * nothing else) there is no libcurl to load. Every step within 2 s.
 */
static int probe_status(int port, long *code, struct err_msg *em)
{
	struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t)port) };
	struct timeval tv = { .tv_sec = 2 };
	static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
	char head[64];
	size_t got = 0;
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), rc = 0;

	if (fd < 0)
		return err_set(em, DP_EIO, "socket: %s", strerror(errno));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
	setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
		rc = err_set(em, DP_EIO, "cannot connect: %s", strerror(errno));
		goto out;
	}
	if (!httpd_send_all(fd, req, sizeof(req) - 1)) {
		rc = err_set(em, DP_EIO, "cannot send the request: %s", strerror(errno));
		goto out;
	}
	while (got < 12) { /* "HTTP/1.1 200" */
		ssize_t n = read(fd, head + got, sizeof(head) - 1 - got);

		if (n <= 0) {
			rc = err_set(em, DP_EIO, "%s", n == 0 ? "no answer" : strerror(errno));
			goto out;
		}
		got += (size_t)n;
	}
	head[got] = '\0';
	if (strncmp(head, "HTTP/1.", 7) != 0 || head[8] != ' ') {
		rc = err_set(em, DP_EREMOTE, "the answer is not HTTP");
		goto out;
	}
	*code = strtol(head + 9, NULL, 10);
out:
	close(fd);
	return rc;
}

int health_cli(int argc, char **argv)
{
	int port = LAUNCH_DEFAULT_PORT;
	long code = 0;
	char url[64];
	struct err_msg em;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--port") == 0 && i + 1 < argc) {
			char *end;

			const char *v = argv[++i];

			port = (int)strtol(v, &end, 10);
			if (*v < '0' || *v > '9' || *end != '\0')
				port = 0;
		} else {
			bool help = strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0;

			fprintf(help ? stdout : stderr, "usage: diagport health [--port N]\n"
				"Exits 0 when the agent on this host answers /healthz (for probes without a shell),\n"
				"1 when it does not, 2 on a usage error.\n");
			return help ? 0 : 2;
		}
	}
	if (port < 1 || port > 65535) {
		fprintf(stderr, "diagport: health: bad port\n");
		return 2;
	}
	snprintf(url, sizeof(url), "http://127.0.0.1:%d/healthz", port);
	if (probe_status(port, &code, &em) != 0) {
		fprintf(stderr, "diagport: health: %s: %s\n", url, em.text);
		return 1;
	}
	if (code == 200)
		return 0;
	fprintf(stderr, "diagport: health: %s: answered %ld, not healthy\n", url, code);
	return 1;
}

