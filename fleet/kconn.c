/*
 * kconn.c - a Kubernetes API server connection's life (kconn.h): a deep copy
 * and the free that wipes its secrets. Inline certificate and key data live
 * in memfds of ours (kubeconfig.c makes them), named by a "/proc/self/fd/N"
 * path: a copy gets its own descriptor and a free closes it, so each copy
 * owns one.
 */
#include "kconn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"

/* The fd behind a "/proc/self/fd/N" path that is one of our memfds, else -1. */
static int own_memfd(const char *path)
{
	char link[64], target[128];
	char *end;
	long fd;
	ssize_t n;

	if (path == NULL || strncmp(path, "/proc/self/fd/", 14) != 0)
		return -1;
	fd = strtol(path + 14, &end, 10);
	if (*end || fd < 0 || fd > 1 << 20)
		return -1;
	snprintf(link, sizeof(link), "/proc/self/fd/%ld", fd);
	n = readlink(link, target, sizeof(target) - 1);
	if (n <= 0)
		return -1;
	target[n] = '\0';
	return strncmp(target, "/memfd:" MEMFD_PREFIX, strlen("/memfd:" MEMFD_PREFIX)) == 0 ? (int)fd : -1;
}

/* A copy of a path; a memfd of ours gets its own descriptor, so each copy owns one. */
static char *dup_path(const char *path)
{
	int fd = own_memfd(path), nfd;

	if (fd < 0)
		return path ? mem_strdup(path) : NULL;
	nfd = fcntl(fd, F_DUPFD_CLOEXEC, 3);
	if (nfd < 0)
		DP_FATAL("cannot duplicate a memfd: %s", strerror(errno));
	return mem_printf("/proc/self/fd/%d", nfd);
}

void kube_conn_path_free(char *path)
{
	int fd = own_memfd(path);

	if (fd >= 0)
		close(fd);
	free(path);
}

void kube_conn_secret_free(char *s)
{
	if (s) {
		mem_wipe(s, strlen(s));
		free(s);
	}
}

struct kube_conn *kube_conn_dup(const struct kube_conn *k)
{
	struct kube_conn *c = mem_zalloc(sizeof(*c));

	c->server = k->server ? mem_strdup(k->server) : NULL;
	c->ca_file = dup_path(k->ca_file);
	c->insecure = k->insecure;
	c->tls_server_name = k->tls_server_name ? mem_strdup(k->tls_server_name) : NULL;
	c->proxy_url = k->proxy_url ? mem_strdup(k->proxy_url) : NULL;
	c->cert_file = dup_path(k->cert_file);
	c->key_file = dup_path(k->key_file);
	c->token = k->token ? mem_strdup(k->token) : NULL;
	c->basic = k->basic ? mem_strdup(k->basic) : NULL;
	return c;
}

void kube_conn_clear(struct kube_conn *k)
{
	free(k->server);
	kube_conn_path_free(k->ca_file);
	free(k->tls_server_name);
	free(k->proxy_url);
	kube_conn_path_free(k->cert_file);
	kube_conn_path_free(k->key_file);
	kube_conn_secret_free(k->token);
	kube_conn_secret_free(k->basic);
	memset(k, 0, sizeof(*k));
}

void kube_conn_free(struct kube_conn *k)
{
	if (k) {
		kube_conn_clear(k);
		free(k);
	}
}
