/*
 * mhd_file.c - libmicrohttpd alone serving one file, for bench/agent.sh
 * (issue 3). Started the way http/httpd.c starts the agent's daemon (one
 * thread per connection, internal polling thread, the same limits) and
 * answering every GET with MHD_create_response_from_fd64 of FILE, as the
 * agent answers /dump. It separates what the library costs in delivering a
 * file from what the agent adds around it.
 *
 *   mhd_file PORT FILE [DELAY_MS]     serves until SIGTERM or SIGINT
 *
 * DELAY_MS holds each answer back that long first, as createdump holds back
 * the agent's answer, so the connection sits idle before the body as it does
 * for a dump.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <microhttpd.h>

static const char *file;
static int delay_ms;

static enum MHD_Result answer(void *cls, struct MHD_Connection *c, const char *url, const char *method,
			      const char *version, const char *upload, size_t *upload_size, void **state)
{
	struct MHD_Response *resp;
	struct stat st;
	enum MHD_Result rc;
	int fd;

	(void)cls, (void)url, (void)version, (void)upload, (void)upload_size, (void)state;
	if (strcmp(method, "GET") != 0)
		return MHD_NO;
	if (delay_ms > 0)
		usleep((useconds_t)delay_ms * 1000);
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st) != 0)
		return MHD_NO;
	resp = MHD_create_response_from_fd64((uint64_t)st.st_size, fd);
	MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "application/octet-stream");
	rc = MHD_queue_response(c, 200, resp);
	MHD_destroy_response(resp);
	return rc;
}

int main(int argc, char **argv)
{
	struct sockaddr_in sa = { .sin_family = AF_INET };
	struct MHD_Daemon *d;
	sigset_t set;
	int sig;

	if (argc != 3 && argc != 4) {
		fprintf(stderr, "usage: mhd_file PORT FILE [DELAY_MS]\n");
		return 2;
	}
	file = argv[2];
	delay_ms = argc == 4 ? atoi(argv[3]) : 0;
	sa.sin_port = htons((uint16_t)atoi(argv[1]));
	sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigprocmask(SIG_BLOCK, &set, NULL);
	d = MHD_start_daemon(MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_ERROR_LOG, 0,
			     NULL, NULL, answer, NULL, MHD_OPTION_SOCK_ADDR, (const struct sockaddr *)&sa,
			     MHD_OPTION_CONNECTION_LIMIT, 32, MHD_OPTION_CONNECTION_TIMEOUT, 30,
			     MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768, MHD_OPTION_END);
	if (d == NULL) {
		fprintf(stderr, "mhd_file: cannot listen on 127.0.0.1:%s\n", argv[1]);
		return 1;
	}
	sigwait(&set, &sig);
	MHD_stop_daemon(d);
	return 0;
}
