/*
 * kconn.h - a connection to a Kubernetes API server, as the kubeconfig (or
 * the in-cluster service account) describes it: what kube.c's API calls and
 * portfwd.c's tunnels both need. kube.c fills and owns it; the dialer keeps
 * its own copy.
 */
#ifndef DP_FLEET_KCONN_H
#define DP_FLEET_KCONN_H

#include <stdbool.h>

#include "fleet.h"

struct kube_conn {
	char *server;          /* "https://host:port" (kubeconfig's cluster.server), no trailing slash */
	char *ca_file;         /* the cluster's CA (PEM), or NULL: the system's trust store; may be a
				  /proc/self/fd/N path (a memfd holding certificate-authority-data) */
	bool insecure;         /* insecure-skip-tls-verify */
	char *tls_server_name; /* verify the server as this name, or NULL */
	char *proxy_url;       /* proxy-url, or NULL */
	char *cert_file;       /* client certificate and key (paths as ca_file), or NULL */
	char *key_file;
	char *token;           /* bearer token, or NULL; wiped when freed */
	char *basic;           /* "user:password", or NULL; wiped when freed */
};

/* Deep copy of k (new); free with kube_conn_free. */
struct kube_conn *kube_conn_dup(const struct kube_conn *k);
void kube_conn_free(struct kube_conn *k); /* NULL-safe; wipes the secrets */
/* Free k's members (as kube_conn_free) and zero it; k itself stays the caller's. */
void kube_conn_clear(struct kube_conn *k);
/* Free a path of k's: a memfd of ours ("/proc/self/fd/N") is closed too. NULL-safe. */
void kube_conn_path_free(char *path);
/* Wipe and free a secret string. NULL-safe. */
void kube_conn_secret_free(char *s);

/* The name our memfds of inline data carry (kubeconfig.c makes them, kconn.c tells them apart). */
#define MEMFD_PREFIX "diagport-kube-"

/*
 * The port-forward dialer (portfwd.c): each dial opens a WebSocket to
 * GET {server}/api/v1/namespaces/{ns}/pods/{pod}/portforward?ports={port}
 * (subprotocol v4.channel.k8s.io) for the agent's namespace_, pod and port,
 * and returns a stream socket whose bytes travel on the port's data channel.
 * The new dialer holds its own copy of k. Never NULL.
 */
struct fleet_dialer *kube_portfwd_new(const struct kube_conn *k, long timeout_ms);

/*
 * After a stream from this dialer failed (the caller saw it end early),
 * the tunnel's own reason if it had one: the API server refused the
 * upgrade ("403 Forbidden: ..."), or the kubelet's error channel said why
 * ("error forwarding port 52323 to pod ...: connection refused"). Writes
 * it into em and returns true; false when the tunnel knows nothing more.
 * Call it before closing fd.
 */
bool kube_portfwd_explain(struct fleet_dialer *d, int fd, struct err_msg *em);

#endif
