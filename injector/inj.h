/*
 * inj.h - the injection rules, written once, for every front-end.
 *
 * inject adds to a workload what a .NET process needs for diagnostics from a
 * sidecar: two shared volumes (socket and dumps), DOTNET_DiagnosticPorts and
 * the crash-dump settings on the app containers, SYS_PTRACE when the ptrace
 * option asks for it (off by default), and the capture agent container; it records
 * exactly what it added in a status record (diagport.dev/status), so that
 * injecting again is a no-op and uninject removes exactly that.
 *
 * The same rules serve Kubernetes pod specs, ECS task definitions (API JSON,
 * camelCase) and CloudFormation AWS::ECS::TaskDefinition resources
 * (PascalCase); the CLI, the admission webhook and the CloudFormation macro
 * all call these functions. Every function edits the document in place and
 * touches nothing it does not add. On failure (a negative DP_E* code) `em`
 * names the file, line, object and field, and the document may be partly
 * edited: callers work on a copy or discard it.
 */
#ifndef DP_INJ_H
#define DP_INJ_H

#include <stdbool.h>

#include "doc.h"
#include "errors.h"

/* Fixed names (../shared/DESIGN.md, "Fixed names and defaults"). */
#define INJ_AGENT_NAME "diagport-agent"
#define INJ_VOL_DIAG "diagport-diag"
#define INJ_VOL_DUMPS "diagport-dumps"
#define INJ_VOL_AUTH "diagport-auth"
#define INJ_VOL_EGRESS "diagport-egress"
#define INJ_VOL_RULES "diagport-rules"
#define INJ_VOL_TLS "diagport-tls"
#define INJ_DIAG_DIR "/diag"
#define INJ_DUMPS_DIR "/dumps"
#define INJ_AUTH_DIR "/etc/diagport/auth"
#define INJ_EGRESS_DIR "/etc/diagport/egress"
#define INJ_RULES_DIR "/etc/diagport/rules"
#define INJ_RULES_FILE "/etc/diagport/rules.yaml"
#define INJ_TLS_DIR "/etc/diagport/tls"
#define INJ_SOCKET "/diag/port"
#define INJ_ENV "DOTNET_DiagnosticPorts"
/*
 * Crash dumps (the crash-dumps option): the runtime's own settings, given
 * with the COMPlus_ prefix, which the runtime reads after DOTNET_, so that a
 * DOTNET_ value the workload sets where inject cannot see it (the image's
 * ENV, envFrom, env_file, environmentFiles) still wins, each variable on
 * its own; and which .NET 6, whose dump settings read no DOTNET_ prefix,
 * reads too. The file name (createdump expands %p pid, %t seconds since the
 * epoch, %e the executable's name) puts pid and time first, so the agent
 * reads them whatever the name holds; the crash report is the same name
 * with ".crashreport.json" appended. The agent's own files in the dumps
 * volume start with ".diagport-", so none is named like a crash dump.
 */
#define INJ_CRASH_PREFIX "COMPlus_"
#define INJ_CRASH_FILE INJ_DUMPS_DIR "/crash-%p-%t-%e.dmp"
#define INJ_CRASH_DEFAULT 1 /* Mini: docs/INJECTION.md, "Crash dumps", says why */
#define INJ_PREFIX "diagport.dev/"
#define INJ_STATUS_KEY "diagport.dev/status"
#define INJ_DEFAULT_PORT 52323
#define INJ_DEFAULT_UID 1654

enum inj_mode { INJ_NOSUSPEND = 0, INJ_SUSPEND };
enum inj_flavour { INJ_FLAVOUR_DIAGPORT = 0, INJ_FLAVOUR_DOTNET_MONITOR };
enum inj_sidecar { INJ_SIDECAR_NATIVE = 0, INJ_SIDECAR_CONTAINER };

/*
 * Options. Layered: built-in defaults, then the command line (or the
 * webhook's configuration), then the workload's own settings (annotations,
 * ECS tags, CloudFormation Metadata.diagport), each layer overriding the one
 * before for the options it sets. Strings are owned by the struct.
 */
struct inj_opts {
	int inject;               /* -1 unset, 0 opt out, 1 opt in */
	enum inj_mode mode;
	char *containers;         /* comma-separated app container names; NULL = all */
	bool ptrace;
	char *image;              /* NULL = the flavour's default image */
	int port;
	char *cpu_request;        /* Kubernetes quantities; NULL = flavour default */
	char *mem_request;
	char *mem_limit;
	char *dumps_limit;        /* size limit of the dumps volume; NULL = none */
	enum inj_sidecar sidecar;
	enum inj_flavour flavour;
	char *auth_secret;        /* Secret name (k8s) or ARN (ECS/CFN); NULL = none */
	char *tls_secret;         /* the agent's certificate and key: a kubernetes.io/tls Secret (k8s), a Secrets
				     Manager ARN holding both as PEM (ECS/CFN), a project secret holding both as
				     PEM (Compose); NULL = plain http */
	char *egress_settings;    /* the agent's egress settings: a Secret of key-per-file settings (k8s), a
				     Secrets Manager ARN holding a settings document (ECS/CFN); NULL = none */
	char *rules;              /* the agent's collection rules: a ConfigMap of key-per-file settings (k8s), an
				     SSM parameter holding a settings document (ECS/CFN), a project config (Compose);
				     NULL = none */
	bool no_auth;             /* authentication explicitly turned off */
	bool perf;                /* what the agent's perf engine needs: the app's processes in the agent's pid
				     namespace and PERFMON for the runtime's seccomp profile (Kubernetes only;
				     ECS, CloudFormation and Compose refuse it) */
	int crash_dumps;          /* the runtime's dump type when an app crashes (DbgMiniDumpType: 1 mini, 2 heap,
				     3 triage, 4 full), or 0: off */
	unsigned captures;        /* the capture kinds the agent serves, a bit each (INJ_CAPTURE_ALL: all, the
				     default, which adds nothing to its arguments); never 0 */
	unsigned flagged;         /* the options the command line set, one bit each (inj_opts_set_flag): a
				     workload's own setting that gives one of them another value is warned about */
	unsigned own;             /* the options the workload's own settings set, one bit each */
};

/*
 * The capture kinds of the agent's --captures (a shared contract with the
 * agent, launcher/): a bit each, in this order, which is also the sorted
 * order of the normalised list inject writes.
 */
#define INJ_CAPTURE_KINDS { "cpuprofile", "dump", "env", "exceptions", "gcdump", "logs", "metrics", "stacks", "trace" }
#define INJ_N_CAPTURES 9
#define INJ_CAPTURE_ALL ((1u << INJ_N_CAPTURES) - 1)
/*
 * The normalised text of a set of capture kinds: "all", or the kinds sorted
 * and comma-separated ("cpuprofile,metrics,stacks"); sep other than ',' for
 * places that take no comma (an ECS tag value: '+'). Written into out.
 */
void inj_captures_text(unsigned captures, char sep, char *out, size_t n);

void inj_opts_init(struct inj_opts *o);                 /* the built-in defaults */
void inj_opts_copy(struct inj_opts *dst, const struct inj_opts *src); /* dst is initialised anew */
void inj_opts_free(struct inj_opts *o);
/*
 * Set one option by its annotation name without the prefix ("mode",
 * "containers", "ptrace", "image", "port", "resources", "dumps-size-limit",
 * "sidecar", "flavour", "auth-secret", "tls-secret", "egress-settings", "rules", "auth",
 * "perf", "captures", "crash-dumps", "inject"). DP_EINVAL with a message naming the option and the
 * accepted values when the value is bad; DP_ENOTFOUND when the name is not
 * an option.
 */
int inj_opts_set(struct inj_opts *o, const char *name, const char *value, struct err_msg *em);
/*
 * inj_opts_set for a command-line flag: the option is also marked as the
 * command line's (flagged), so that a workload's own setting that overrides
 * it with another value gives a warning (a flag is a default that the
 * workload's annotations, tags and metadata win over, and a person who
 * typed --mode suspend must not be left believing it took).
 */
int inj_opts_set_flag(struct inj_opts *o, const char *name, const char *value, struct err_msg *em);
/* The list of option names, for messages ("inject, mode, containers, ..."). Borrowed. */
const char *inj_opts_names(void);
/*
 * The command-line flags of the options (for getopt_long): each a flag name
 * without "--", whether it takes a value, the option it sets and, for a
 * flag without a value, the value it sets. Fills up to max; returns the count.
 */
struct inj_flag {
	const char *flag;
	bool takes_value;
	const char *option;
	const char *value;
};
size_t inj_flags(struct inj_flag *out, size_t max);
struct buf;
/* The options' lines of `diagport inject --help`, appended to out. */
void inj_opts_help(struct buf *out);
/* The options table of docs/INJECTION.md (markdown), appended to out. */
void inj_opts_markdown(struct buf *out);

/*
 * The platform's policy: option values that win over everything else (the
 * webhook's configuration's enforce: map, `diagport inject --policy FILE`).
 * A workload or a flag that asks for another value gets the enforced one,
 * and a warning naming the option and both values; for captures the
 * enforced list is a ceiling that a workload's own list is intersected
 * with. inject, containers and resources cannot be enforced.
 */
struct inj_policy {
	struct inj_opts v; /* the enforced values */
	unsigned set;      /* which options are enforced, a bit each */
};
void inj_policy_init(struct inj_policy *p);
void inj_policy_free(struct inj_policy *p);
/*
 * Enforce option `name` with value (validated as an annotation's is, with
 * its messages): 0; DP_EINVAL with em for a bad value or an option that
 * cannot be enforced; DP_ENOTFOUND when the name is not an option.
 */
int inj_policy_set(struct inj_policy *p, const char *name, const char *value, struct err_msg *em);

/*
 * The platform's settings file: the webhook's --config and `diagport inject
 * --policy` read the same one (docs/webhook.md, "Configuration"). YAML or
 * JSON, at most 1 MiB, one map: option names (the defaults of every pod, as
 * annotations take them), enforce: (a map of option names, the policy) and
 * excludedNamespaces (a list of names).
 */
struct inj_settings {
	struct inj_opts opts;      /* defaults */
	struct inj_policy enforce; /* the policy */
	char **excluded;           /* namespace names */
	size_t n_excluded;
};
/* Read path into a new s. DP_EIO, DP_ESYNTAX, DP_EINVAL with em ("FILE:LINE:COL: ..."). */
int inj_settings_load(const char *path, struct inj_settings *s, struct err_msg *em);
void inj_settings_defaults(struct inj_settings *s); /* built-in defaults, nothing enforced or excluded */
void inj_settings_free(struct inj_settings *s);

/* What a run did, for the person or the webhook's response. */
struct inj_report {
	char **warnings;   /* owned strings */
	size_t nwarn;
	int injected;      /* workloads changed */
	int skipped;       /* workloads opted out or already as asked */
	int passed;        /* objects that are not workloads */
};
void inj_report_free(struct inj_report *r);
void inj_report_warn(struct inj_report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Where the document came from, for messages. */
struct inj_ctx {
	const char *file;          /* "deploy.yaml", "<stdin>" */
	const struct inj_opts *base; /* defaults + command line; borrowed */
	const struct inj_policy *policy; /* what wins over base and the workload's own settings; NULL: none */
	bool all;                  /* CloudFormation: rewrite every task definition (--all) */
	struct inj_report *report; /* may be NULL */
};

/* True when obj is a Kubernetes List: apiVersion, a kind that ends in List (List, DeploymentList, ...), items a sequence. */
bool inj_k8s_is_list(const struct doc_node *obj);
/*
 * One item of the List `list` (borrowed), injected (or uninjected) as
 * inj_k8s_object does it when it goes through the list's items: what the
 * CLI calls for each item of a List it reads one item at a time.
 */
int inj_k8s_list_item(struct doc_node *item, const struct doc_node *list, bool inject, const struct inj_ctx *c,
		      struct err_msg *em);
/*
 * A Kubernetes List (kind List or *List) in JSON or YAML, injected (or
 * uninjected) and written to out in the same format one item at a time
 * (k8s_list.c): the bytes and warnings inj_k8s_object and doc_write_part
 * give for the whole List, for its text and one item's tree. `kind`: as
 * named on the command line, or NULL to detect it. `after` (may be NULL) is
 * called with ctx after each item: a negative return stops the List and is
 * returned; 1 says the items after need not be written, only checked (out
 * then lacks them and is not the List). Returns 1 when bytes are not such a
 * List (nothing done: read them as a stream of documents; a YAML List with
 * anchors is one), 0 when every item went through, or an error.
 */
typedef int (*inj_list_after_fn)(void *ctx);
int inj_k8s_list(const char *bytes, size_t len, const struct doc_limits *lim, const char *kind, bool inject,
		 const struct inj_ctx *c, struct buf *out, inj_list_after_fn after, void *ctx, struct err_msg *em);
/* Kubernetes: one object of any kind (a List's items recursed; kinds without a pod template pass). */
int inj_k8s_object(struct doc_node *obj, const struct inj_ctx *c, struct err_msg *em);
int uninj_k8s_object(struct doc_node *obj, const struct inj_ctx *c, struct err_msg *em);
/*
 * What a Kubernetes object's metadata says about injecting it, for every
 * front-end alike: 1 opt in, 0 opt out, -1 nothing, -2 the label
 * diagport.dev/inject holds something other than "enabled" or "disabled"
 * (*bad: that value, for the message). The annotation diagport.dev/inject
 * and the label of the same name both count, and an opt-out either way
 * wins (annotation "false" or "disabled", label "disabled": out, as the
 * manifests' objectSelector keeps a pod labelled disabled from the webhook
 * whatever it is annotated); otherwise either one opts in (any other
 * annotation value: in, and the rules check it; label "enabled"). A pod's
 * namespace may opt it in besides (the webhook's /mutate/namespace).
 */
int inj_k8s_wants(const struct doc_node *metadata, const struct doc_node **bad);
/* Kubernetes: a bare pod (metadata + spec), as the webhook sees it. */
int inj_k8s_pod(struct doc_node *pod, const struct inj_ctx *c, struct err_msg *em);

/*
 * ECS: a task definition as register-task-definition input, or as
 * describe-task-definition output ({"taskDefinition": {...}, "tags": [...]}),
 * which is turned into register input first (read-only fields removed), so
 * *doc may be replaced.
 */
int inj_ecs_taskdef(struct doc_node **doc, const struct inj_ctx *c, struct err_msg *em);
int uninj_ecs_taskdef(struct doc_node **doc, const struct inj_ctx *c, struct err_msg *em);

/* CloudFormation: every AWS::ECS::TaskDefinition that opts in (or all, with c->all). */
int inj_cfn_template(struct doc_node *tpl, const struct inj_ctx *c, struct err_msg *em);
int uninj_cfn_template(struct doc_node *tpl, const struct inj_ctx *c, struct err_msg *em);
/* Rewrite YAML short-form intrinsics (!Ref x, !GetAtt a.b, ...) into their JSON form, in place. */
int inj_cfn_expand_tags(struct doc_node *n, const char *file, struct err_msg *em);

/*
 * Compose (the Compose Specification: docker compose, podman-compose): one
 * agent service, diagport-agent, for the project; every service but it is
 * injected, unless the containers option names services or a service's
 * label diagport.dev/inject opts it out. Per-service options (inject, mode,
 * ptrace) are service labels; the agent's come from the top-level map
 * x-diagport (bare option names) over the command line. Each injected
 * service carries its record in the label diagport.dev/status, the project's
 * is on the agent.
 */
int inj_compose_project(struct doc_node *doc, const struct inj_ctx *c, struct err_msg *em);
int uninj_compose_project(struct doc_node *doc, const struct inj_ctx *c, struct err_msg *em);
/*
 * Before a Compose document is written: for JSON (yaml false), which has no
 * merge keys, a document holding one (a plain `<<` key, or `!!merge <<`) is
 * refused (DP_EUNSUPPORTED); YAML writes them back as written (0).
 */
int inj_compose_merge_keys(struct doc_node *doc, bool yaml, const char *file, struct err_msg *em);

/*
 * The CloudFormation macro contract: an event (JSON: requestId, fragment,
 * params, ...) in, the response (JSON: requestId, status "success" with the
 * injected fragment, or "failure" with errorMessage) appended to out. The
 * fragment is a whole template (a template-level Transform) or one
 * AWS::ECS::TaskDefinition's Properties (Fn::Transform in them); params are
 * the inject options by name, plus all. 0, or DP_ETOOBIG when out is full.
 */
int inj_macro(const char *event, size_t len, struct buf *out);
/*
 * The macro as a Lambda custom runtime: the Runtime API loop at
 * $AWS_LAMBDA_RUNTIME_API (numeric HOST:PORT), each event through inj_macro.
 * Returns only on failure: 2 when the variable is unusable, 1 when the API
 * cannot be reached.
 */
int inj_lambda_serve(void);

/* Which kind of document this is: "k8s", "ecs", "cfn", "compose", or NULL when it cannot tell. */
const char *inj_detect(const struct doc_node *doc);

#endif
