/*
 * portfwd_stub.c - TEMPORARY: weak stand-ins for portfwd.c (written in
 * parallel on another branch) so that kube.c links and its tests run before
 * the merge. Deleted before the branch is merged.
 */
#include <stdlib.h>

#include "errors.h"
#include "kconn.h"
#include "mem.h"

static int stub_dial(struct fleet_dialer *d, const struct fleet_agent *a, int *fd, struct err_msg *em)
{
	return err_set(em, DP_EUNSUPPORTED, "port-forward is not built in yet");
}

static void stub_free(struct fleet_dialer *d)
{
	free(d);
}

__attribute__((weak)) struct fleet_dialer *kube_portfwd_new(const struct kube_conn *k, long timeout_ms)
{
	struct fleet_dialer *d = mem_zalloc(sizeof(*d));

	d->dial = stub_dial;
	d->free = stub_free;
	return d;
}

__attribute__((weak)) bool kube_portfwd_explain(struct fleet_dialer *d, int fd, struct err_msg *em)
{
	return false;
}
