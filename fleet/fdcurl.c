/*
 * fdcurl.c - libcurl transfers over an already connected stream (fdcurl.h),
 * working around libcurl 7.88's ignored CURL_SOCKOPT_ALREADY_CONNECTED with
 * one listening abstract AF_UNIX socket per process kept with a full
 * backlog (a backlog of 0 and one connection never accepted), whose address
 * every such transfer's connect() is pointed at.
 */
#include "fdcurl.h"

#include <errno.h>
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static struct sockaddr_un busy;
static socklen_t busy_len;
static int busy_err;

/*
 * The address must fit struct curl_sockaddr's 16-byte addr: the family and
 * 14 bytes of abstract name ("\0dpf" and 10 random hex digits), so a name
 * taken by another process is met by trying another.
 */
static void busy_open(void)
{
	int l = -1, c = -1;

	busy_err = EADDRINUSE;
	for (int i = 0; i < 8 && busy_err == EADDRINUSE; i++) {
		uint64_t r = 0;

		if (getrandom(&r, sizeof(r), 0) != (ssize_t)sizeof(r))
			r = (uint64_t)getpid() * 2654435761u + (uint64_t)i;
		memset(&busy, 0, sizeof(busy));
		busy.sun_family = AF_UNIX;
		snprintf(busy.sun_path + 1, sizeof(busy.sun_path) - 1, "dpf%010llx", (unsigned long long)(r & 0xFFFFFFFFFFull));
		busy_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 14);
		if (l >= 0)
			close(l);
		l = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
		busy_err = l < 0 ? errno : bind(l, (struct sockaddr *)&busy, busy_len) != 0 ? errno : 0;
	}
	if (busy_err == 0 && listen(l, 0) != 0)
		busy_err = errno;
	if (busy_err == 0 && ((c = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) < 0 ||
			      connect(c, (struct sockaddr *)&busy, busy_len) != 0))
		busy_err = errno;
	if (busy_err) {
		if (l >= 0)
			close(l);
		if (c >= 0)
			close(c);
	}
	/* else both stay open for the life of the process: the listener, its queue full with c */
}

int fdcurl_aim(struct curl_sockaddr *addr, struct err_msg *em)
{
	pthread_once(&once, busy_open);
	if (busy_err)
		return err_set(em, DP_EIO, "cannot make the listener libcurl is pointed at: %s", strerror(busy_err));
	addr->family = AF_UNIX;
	addr->socktype = SOCK_STREAM;
	addr->protocol = 0;
	addr->addrlen = busy_len; /* 16 bytes: fits struct curl_sockaddr's addr */
	memcpy(&addr->addr, &busy, busy_len);
	return 0;
}

static curl_socket_t open_fd(void *u, curlsocktype purpose, struct curl_sockaddr *addr)
{
	if (purpose != CURLSOCKTYPE_IPCXN || fdcurl_aim(addr, NULL) != 0)
		return CURL_SOCKET_BAD;
	return *(int *)u;
}

static int already_connected(void *u, curl_socket_t s, curlsocktype purpose)
{
	return CURL_SOCKOPT_ALREADY_CONNECTED;
}

static int keep_fd(void *u, curl_socket_t s)
{
	return 0; /* the caller's to close */
}

int fdcurl_attach(const struct hclient_lib *lib, CURL *c, int *fd, const char *hostport, struct curl_slist **resolve,
		  struct err_msg *em)
{
	char entry[512];

	pthread_once(&once, busy_open);
	if (busy_err)
		return err_set(em, DP_EIO, "cannot make the listener libcurl is pointed at: %s", strerror(busy_err));
	snprintf(entry, sizeof(entry), "%s:127.0.0.1", hostport);
	if ((*resolve = lib->slist_append(NULL, entry)) == NULL)
		return err_set(em, DP_EIO, "libcurl could not allocate a list");
	lib->easy_setopt(c, CURLOPT_RESOLVE, *resolve);
	lib->easy_setopt(c, CURLOPT_OPENSOCKETFUNCTION, open_fd);
	lib->easy_setopt(c, CURLOPT_OPENSOCKETDATA, fd);
	lib->easy_setopt(c, CURLOPT_SOCKOPTFUNCTION, already_connected);
	lib->easy_setopt(c, CURLOPT_CLOSESOCKETFUNCTION, keep_fd);
	lib->easy_setopt(c, CURLOPT_FORBID_REUSE, 1L);
	return 0;
}
