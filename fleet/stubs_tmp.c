/* TEMPORARY: weak stand-ins until kube.c, portfwd.c and ecs.c are merged. */
#include "fleet.h"
#include "kconn.h"

__attribute__((weak)) int fleet_kube_discover(const struct fleet_kube_opts *o, struct fleet_set *out, struct err_msg *em)
{
	(void)o, (void)out;
	return err_set(em, DP_EUNSUPPORTED, "Kubernetes targets are not built yet");
}

__attribute__((weak)) int fleet_ecs_discover(const struct fleet_ecs_opts *o, struct fleet_set *out, struct err_msg *em)
{
	(void)o, (void)out;
	return err_set(em, DP_EUNSUPPORTED, "ECS targets are not built yet");
}

__attribute__((weak)) bool kube_portfwd_explain(struct fleet_dialer *d, int fd, struct err_msg *em)
{
	(void)d, (void)fd, (void)em;
	return false;
}
