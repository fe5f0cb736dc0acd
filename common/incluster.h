/*
 * incluster.h - what a process running in a Kubernetes pod knows about its
 * API server: the Service address the kubelet puts in its environment and
 * the service account files it mounts. The webhook's `webhook certs` and the
 * fleet client's in-cluster fallback both start from here.
 */
#ifndef DP_INCLUSTER_H
#define DP_INCLUSTER_H

#include <stddef.h>

#include "errors.h"

/* Where the kubelet mounts the service account (token, ca.crt, namespace). */
#define INCLUSTER_SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/*
 * The in-cluster API server, "https://HOST:PORT" from KUBERNETES_SERVICE_HOST
 * and KUBERNETES_SERVICE_PORT (an IPv6 address gets its brackets), into
 * out[0..n). 0, or DP_EINVAL with em when they are not set (not in a pod).
 */
int incluster_server(char *out, size_t n, struct err_msg *em);

#endif
