/*
 * fleet.h - what the fleet client's parts share: an agent to reach, the set
 * of them a discovery found, and the way to open a byte stream to one.
 *
 * Discovery (kube.c, ecs.c, targets.c) fills a fleet_set; the runner (run.c)
 * calls every agent in it over HTTP with libcurl, either straight to the
 * agent's URL or, when the set has a dialer (Kubernetes: a port-forward
 * through the API server), over the stream the dialer opens.
 *
 * Ownership: a fleet_set owns its agents, every string in them and its
 * dialer; fleet_set_free releases all of it (tokens wiped).
 */
#ifndef DP_FLEET_H
#define DP_FLEET_H

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

#define FLEET_AGENT_PORT 52323 /* DESIGN.md: the agent's HTTP port, named diag-http */

struct fleet_agent;

/*
 * A way to reach agents that are not reachable by their URL (Kubernetes:
 * a WebSocket port-forward through the API server). dial opens a new
 * connected stream socket (AF_UNIX or TCP) whose bytes reach the agent's
 * HTTP port; the caller owns *fd and closes it when done, which ends the
 * tunnel. One HTTP request per stream (the agent closes after each answer).
 * 0, or a DP_E* code with em naming the agent. Called from several threads
 * at once. free releases the dialer (NULL-safe through fleet_set_free).
 */
struct fleet_dialer {
	int (*dial)(struct fleet_dialer *d, const struct fleet_agent *a, int *fd, struct err_msg *em);
	void (*free)(struct fleet_dialer *d);
};

struct fleet_agent {
	char *name;      /* for people and file names: "NS/POD", "CLUSTER/TASK-ID", or the URL */
	char *url;       /* the agent's base URL without a trailing slash ("http://10.1.2.3:52323");
			    with a dialer, "http://NS.POD:PORT" (only the Host header and the path prefix matter) */
	char *token;     /* the agent's bearer token, or NULL (wiped when freed) */
	char *workload;  /* who shares a fate, for --max-unavailable: "NS/Deployment/orders",
			    "CLUSTER/service:orders"; NULL: the agent is its own workload */
	char *namespace_, *pod, *container; /* Kubernetes (container: the injected app container(s),
					       comma-separated), else NULL */
	char *cluster, *task, *service;     /* ECS (task: the task ID, the ARN's last part), else NULL */
	char *mode;      /* the injected mode ("nosuspend", "suspend"), or NULL when unknown */
	char *why_not;   /* non-NULL: no agent to call here, and why: "not injected", "agent not ready",
			    "access denied: ...", "no address" */
	int port;        /* the agent's port (FLEET_AGENT_PORT unless the pod or task says otherwise) */
	char *tls_name;  /* an https agent reached directly: the name its certificate must bear (--tls-server-name,
			    servername=), sent as SNI; NULL: the URL's host */
	struct fleet_dialer *dialer; /* borrowed from the set; NULL: connect to url directly */
};

struct fleet_set {
	struct fleet_agent *v;
	size_t n, cap;
	struct fleet_dialer *dialer; /* owned; the agents that need it point at it */
	char *caller;                /* who we are to the platform, when it told us ("alice",
					"system:serviceaccount:ns:sa", an IAM ARN), or NULL: sent to the agents
					as X-Diagport-Caller, which they log (a claim, not a proof) */
};

/* A new zeroed agent at the end of s (port FLEET_AGENT_PORT); borrowed until s changes. */
struct fleet_agent *fleet_set_add(struct fleet_set *s);

/* Release everything s owns; s is then empty. */
void fleet_set_free(struct fleet_set *s);

/* s percent-encoded as buf_pct_encode does (no '/' kept), in a new string. */
char *fleet_pct_escape(const char *s);

/* Where an agent is, as JSON members set on o (namespace, pod, container, cluster, task, service,
 * workload; url when it is reached by it): the manifest's and ps's shared description. */
typedef struct json_t json_t;
void fleet_agent_describe(json_t *o, const struct fleet_agent *a);

/*
 * Make s safe to print on a terminal, in place: every C0 control byte, DEL
 * and C1 control (U+0080-U+009F in UTF-8) becomes '?'. What agents, API
 * servers and files say is printed in tables, progress lines and errors; an
 * escape sequence in it must not reach the operator's terminal.
 */
void fleet_safe_text(char *s);
/*
 * The value of an injected agent's `--urls` argument in its args (a
 * Kubernetes container's args, an ECS container's command), or of
 * dotnet-monitor's DOTNETMONITOR_Urls in env (a list of {name, value}),
 * NULL when neither says; borrowed. The first URL of a list.
 */
const char *fleet_agent_urls(const json_t *args, const json_t *env);
/* Whether such a value is https://. */
bool fleet_urls_https(const char *urls);
/* Whether s can be a certificate's DNS name (1-253 of [A-Za-z0-9.-], no wildcard, no last label that reads as a
 * number: 2130706433 and 0x7f000001 are addresses to a resolver). */
bool fleet_dns_name_ok(const char *s);

/* fleet_safe_text over every string of every agent in s, and its caller. */
void fleet_set_safe(struct fleet_set *s);

/* Sort s by workload, then name (the order ps prints and captures start in). */
void fleet_set_sort(struct fleet_set *s);

/*
 * Kubernetes targets (kube.c). The user's kubeconfig (--kubeconfig, else
 * $KUBECONFIG's files merged as kubectl merges them, else ~/.kube/config),
 * else the in-cluster service account. refs are "pod/NAME" (or a bare
 * NAME), "deploy/NAME" (deployment, deployments), "sts/NAME"
 * (statefulset), "ds/NAME", "rs/NAME", "job/NAME": each one's pods by its
 * selector. With no ref, the pods that match selector (or all pods) in the
 * namespace, or in every namespace with all_namespaces.
 */
struct fleet_kube_opts {
	const char *kubeconfig;     /* NULL: $KUBECONFIG, ~/.kube/config, in-cluster */
	const char *context;        /* NULL: current-context */
	const char *namespace_;     /* NULL: the context's namespace, else "default" */
	bool all_namespaces;
	const char *selector;       /* a label selector as kubectl takes it, or NULL */
	const char *const *refs;    /* NULL-terminated, or NULL */
	const char *container;      /* only pods where this container is injected, or NULL */
	bool for_capture;           /* check (SelfSubjectAccessReview) what capturing needs, not only listing */
	long timeout_ms;            /* each API request */
};

/*
 * Fill out with one agent per matching pod (pods without an agent too, with
 * why_not) and the port-forward dialer. DP_EAUTH when the user may not list
 * the pods or, with for_capture, may not port-forward to them: em names the
 * verb, resource and namespace missing ("cannot create pods/portforward in
 * namespace shop"); DP_ENOTFOUND for a named object that does not exist;
 * DP_EREMOTE for an API error; DP_EINVAL for a bad kubeconfig or ref (em
 * names the file and field).
 */
int fleet_kube_discover(const struct fleet_kube_opts *o, struct fleet_set *out, struct err_msg *em);

/*
 * ECS targets (ecs.c): the running tasks of a cluster (of one service, when
 * given), through the ECS API (ListTasks, DescribeTasks; SigV4 with the
 * standard credential chain: environment, shared credentials and config
 * files with AWS_PROFILE, the container credentials endpoint, IMDSv2).
 * The region from region, else AWS_REGION, AWS_DEFAULT_REGION, the
 * profile's; the endpoint from AWS_ENDPOINT_URL_ECS, AWS_ENDPOINT_URL, else
 * https://ecs.REGION.amazonaws.com. An agent per task that has a container
 * named diagport-agent, at the task's private IPv4 address (awsvpc) and the
 * agent's container port; workload "CLUSTER/service:NAME" from the task's group.
 */
struct fleet_ecs_opts {
	const char *cluster;
	const char *service;        /* NULL: every task of the cluster */
	const char *region;         /* NULL: from the environment or profile */
	const char *profile;        /* NULL: AWS_PROFILE, else "default" */
	bool public_ip;             /* the tasks' public addresses, where they have them */
	long timeout_ms;
};
int fleet_ecs_discover(const struct fleet_ecs_opts *o, struct fleet_set *out, struct err_msg *em);

#endif
