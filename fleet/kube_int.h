/*
 * kube_int.h - what the Kubernetes discovery's files share (fleet_kube_discover,
 * fleet.h): kube.c walks the refs and lists the pods, kube_pod.c makes one
 * agent of one pod, kube_access.c asks the API server what the user may do.
 * Private to those three.
 */
#ifndef DP_FLEET_KUBE_INT_H
#define DP_FLEET_KUBE_INT_H

#include <jansson.h>
#include <stdbool.h>

#include "errors.h"
#include "fleet.h"
#include "kapi.h"
#include "kubeconfig.h"

/* One discovery: its options, its API connection, and the caches its pods share. */
struct disc {
	const struct fleet_kube_opts *o;
	struct kapi api;
	struct kcfg cfg;
	const char *ns;   /* the namespace, unless all_namespaces */
	const char *who;  /* for messages: the caller, else the kubeconfig's user */
	bool ssar;        /* the server answers SelfSubjectAccessReviews */
	bool pf_anywhere; /* with all_namespaces: may port-forward in every namespace */
	json_t *pf_ns;    /* namespace -> "" (may port-forward) or the refusal */
	json_t *tokens;   /* "NS/SECRET" -> {"token": ...} or {"why": ...} */
	json_t *seen;     /* "NS/POD" already added */
	struct fleet_set *set;
};

/* 0 when the user may verb resource[/sub] of group in ns ("" at the cluster scope); DP_EAUTH with em
   (or *why, new, when why is not NULL) when not; 0 too when the server has no SelfSubjectAccessReview. */
int kube_require(struct disc *d, const char *verb, const char *group, const char *resource, const char *sub,
		 const char *ns, char **why, struct err_msg *em);
/* May the user port-forward in ns? NULL, or the refusal (borrowed from d's cache); *rc a failure to ask. */
const char *kube_pf_refusal(struct disc *d, const char *ns, struct err_msg *em, int *rc);
/* The pod (borrowed JSON from a pod list) as one agent of d->set, or as one that is not (why_not). */
int kube_add_pod(struct disc *d, const json_t *pod, struct err_msg *em);
/* The string at o.a (b NULL) or o.a.b, borrowed; NULL when absent or not a string. */
const char *kube_str_at(const json_t *o, const char *a, const char *b);

#endif
