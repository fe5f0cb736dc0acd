/*
 * kconn.c - copying and releasing a Kubernetes API server connection
 * (kconn.h), shared by kube.c, which fills one from the kubeconfig, and the
 * port-forward dialer, which keeps its own copy for as long as tunnels run.
 */
#include "kconn.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

static char *dup_or_null(const char *s)
{
	return s ? mem_strdup(s) : NULL;
}

static void free_secret(char *s)
{
	if (s) {
		mem_wipe(s, strlen(s));
		free(s);
	}
}

struct kube_conn *kube_conn_dup(const struct kube_conn *k)
{
	struct kube_conn *c = mem_zalloc(sizeof(*c));

	c->server = dup_or_null(k->server);
	c->ca_file = dup_or_null(k->ca_file);
	c->insecure = k->insecure;
	c->tls_server_name = dup_or_null(k->tls_server_name);
	c->proxy_url = dup_or_null(k->proxy_url);
	c->cert_file = dup_or_null(k->cert_file);
	c->key_file = dup_or_null(k->key_file);
	c->token = dup_or_null(k->token);
	c->basic = dup_or_null(k->basic);
	return c;
}

void kube_conn_free(struct kube_conn *k)
{
	if (k == NULL)
		return;
	free(k->server);
	free(k->ca_file);
	free(k->tls_server_name);
	free(k->proxy_url);
	free(k->cert_file);
	free(k->key_file);
	free_secret(k->token);
	free_secret(k->basic);
	free(k);
}
