/*
 * eproc_msg.c - the egress process's wire (eproc_int.h): one message is one
 * SOCK_SEQPACKET packet, a tag letter then JSON, with at most one file
 * descriptor attached (the artifact's pipe); and the table of stores the
 * egress process can write to.
 */
#include "eproc_int.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "egress/azblob.h"
#include "egress/s3_store.h"
#include "mem.h"

#define MSG_MAX 65536 /* one message (a packet) */

/* The stores this build has (their clients, egress/). */
static const struct egress_store *const builtin_stores[] = { &s3_store, &azblob_store, NULL };
static const struct egress_store *const *stores = builtin_stores; /* eproc_stores_set */

const struct egress_store *eproc_store_of(const char *type)
{
	for (size_t i = 0; stores[i]; i++)
		if (strcmp(stores[i]->type, type) == 0)
			return stores[i];
	return NULL;
}

void eproc_stores_set(const struct egress_store *const *list)
{
	stores = list;
}

int eproc_msg_send(int sock, pthread_mutex_t *mu, char tag, json_t *body, int fd)
{
	char *text = json_dumps(body, JSON_COMPACT);
	size_t len = text ? strlen(text) : 0;
	char *pkt = mem_alloc(len + 2); /* the tag, the text; its NUL copied but not sent */
	struct iovec iov = { pkt, len + 1 };
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1 };
	ssize_t n;

	pkt[0] = tag;
	pkt[1] = '\0';
	if (text)
		memcpy(pkt + 1, text, len + 1);
	free(text);
	if (fd >= 0) {
		struct cmsghdr *c;

		memset(&ctl, 0, sizeof(ctl));
		m.msg_control = ctl.buf;
		m.msg_controllen = sizeof(ctl.buf);
		c = CMSG_FIRSTHDR(&m);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fd, sizeof(int));
	}
	if (mu)
		pthread_mutex_lock(mu);
	do
		n = sendmsg(sock, &m, MSG_NOSIGNAL);
	while (n < 0 && errno == EINTR);
	if (mu)
		pthread_mutex_unlock(mu);
	free(pkt);
	return n == (ssize_t)(len + 1) ? 0 : -1;
}

int eproc_msg_recv(int sock, char *tag, json_t **body, int *fd)
{
	static _Thread_local char pkt[MSG_MAX + 1];
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = { pkt, MSG_MAX };
	struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.buf, .msg_controllen = sizeof(ctl.buf) };
	ssize_t n;

	*fd = -1;
	*body = NULL;
	do
		n = recvmsg(sock, &m, MSG_CMSG_CLOEXEC);
	while (n < 0 && errno == EINTR);
	if (n == 0)
		return 1;
	if (n < 0)
		return -1;
	for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); c; c = CMSG_NXTHDR(&m, c))
		if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
			memcpy(fd, CMSG_DATA(c), sizeof(int));
	if (n < 2 || (m.msg_flags & (MSG_TRUNC | MSG_CTRUNC))) {
		if (*fd >= 0)
			close(*fd);
		*fd = -1;
		*tag = '?';
		return 0;
	}
	*tag = pkt[0];
	*body = json_loadb(pkt + 1, (size_t)n - 1, 0, NULL);
	return 0;
}

const char *eproc_jstr(const json_t *o, const char *k)
{
	return json_string_value(json_object_get(o, k));
}
