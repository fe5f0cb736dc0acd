/*
 * incluster.c - the API server's address as a pod sees it (incluster.h).
 */
#include "incluster.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int incluster_server(char *out, size_t n, struct err_msg *em)
{
	const char *host = getenv("KUBERNETES_SERVICE_HOST"), *port = getenv("KUBERNETES_SERVICE_PORT");
	int w;

	if (host == NULL || host[0] == '\0' || port == NULL || port[0] == '\0')
		return err_set(em, DP_EINVAL, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?)");
	if (strchr(host, ':'))
		w = snprintf(out, n, "https://[%s]:%s", host, port);
	else
		w = snprintf(out, n, "https://%s:%s", host, port);
	if (w < 0 || (size_t)w >= n)
		return err_set(em, DP_EINVAL, "KUBERNETES_SERVICE_HOST is too long");
	return 0;
}
