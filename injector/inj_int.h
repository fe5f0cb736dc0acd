/*
 * inj_int.h - what the injector's files share among themselves: the dialect
 * table that lets one set of container rules serve Kubernetes, ECS and
 * CloudFormation, the status record, and message helpers. Not for other
 * components: they use inj.h.
 */
#ifndef DP_INJ_INT_H
#define DP_INJ_INT_H

#include "inj.h"

/*
 * The field names one platform uses for the things the rules touch. ECS and
 * CloudFormation are the same model in camelCase and PascalCase.
 */
struct inj_dialect {
	const char *platform;      /* "Kubernetes", "ECS", "CloudFormation" */
	const char *c_name;        /* a container's name */
	const char *c_env;         /* a container's environment list */
	const char *e_name, *e_value;
	const char *e_value_from;  /* k8s: env[].valueFrom; NULL elsewhere */
	const char *c_secrets;     /* ECS: secrets[] (name/valueFrom); NULL for k8s */
	const char *c_mounts;      /* volume mounts list */
	const char *m_volume, *m_path, *m_readonly;
	const char *caps[3];       /* path to the capability add list */
	const char *v_name;        /* a volume's name */
	bool pascal;               /* keys of what we build are PascalCase */
};

extern const struct inj_dialect inj_k8s_dialect, inj_ecs_dialect, inj_cfn_dialect;

/*
 * The options that give the agent settings kept outside the workload
 * (egress-settings, rules), one row each; every platform's rules read the
 * rows, so such an option is a row here, not a copy of the code. On
 * Kubernetes the value names a Secret or a ConfigMap of key-per-file
 * settings, mounted read-only and given as --config-dir (dotnet-monitor:
 * mounted where it reads such settings); on ECS and CloudFormation it names
 * a secret whose value is a settings document, passed in a variable; on
 * Compose it names a project secret or config, a settings file given as
 * --config. Defined in util.c.
 */
struct inj_source {
	const char *option;       /* its name: "egress-settings" */
	size_t off;               /* its char * field in struct inj_opts */
	const char *k8s_kind;     /* what the value names on Kubernetes: "Secret", "ConfigMap" */
	const char *k8s_source;   /* the volume's source field: "secret", "configMap" */
	const char *k8s_name_key; /* the name's key in it: "secretName", "name" */
	const char *volume;       /* the volume's name (Kubernetes) */
	const char *dir;          /* the diagport agent's mount path (Kubernetes), its --workload-config */
	const char *ecs_var;      /* the variable an ECS secret's value goes to */
	const char *section;      /* the settings' section ("Egress"), for messages */
	const char *compose_list; /* the project's top-level map that must define the value: "secrets", "configs" */
	const char *compose_file; /* where the agent reads it (long syntax, target); NULL: /run/secrets/NAME */
};
#define INJ_NSOURCES 2
extern const struct inj_source inj_sources[INJ_NSOURCES];
/* The option's value in o (borrowed), or NULL when it is not set. */
const char *inj_source_value(const struct inj_source *s, const struct inj_opts *o);
/* Where dotnet-monitor reads key-per-file settings: a source is mounted there for that flavour. */
#define INJ_MONITOR_DIR "/etc/dotnet-monitor"

/*
 * The status record: what inject added, kept on the workload as a string so
 * that it fits a Kubernetes annotation, an ECS tag value (<= 256 characters
 * from [A-Za-z0-9 _.:/=+-@]) and CloudFormation metadata alike:
 *
 *   v1 mode=nosuspend flavour=diagport sidecar=native +VIA app:MElP123 web:MeP
 *
 * "+FLAGS" are workload flags, "NAME:FLAGS" one per app container. The flag
 * letters are in status.c.
 */
#define INJ_MAX_CONTAINERS 64
struct inj_cstat {
	char name[256];
	char flags[24];
};
struct inj_status {
	char wflags[24];              /* workload flags */
	struct inj_cstat c[INJ_MAX_CONTAINERS];
	size_t n;
};
/* Flag helpers on a flags string. */
bool inj_flag(const char *flags, char f);
void inj_flag_add(char *flags, size_t size, char f);
/*
 * Make m[k] a new empty map or seq, recording flag f: in place of a null
 * that was there (flag "f."), or appended when k was absent. Returns the new
 * collection (borrowed). The caller has checked that m[k] is absent or null.
 */
struct doc_node *inj_create(struct doc_node *m, const char *k, enum doc_type t, char *flags, size_t size, char f);
/* The inverse: when flags has f and m[k] is an empty collection again, put back the null or delete k. */
void inj_prune(struct doc_node *m, const char *k, const char *flags, char f);
/* inj_create for any value: set m[k] = v (stolen), recording f as inj_create does. */
void inj_put(struct doc_node *m, const char *k, struct doc_node *v, char *flags, size_t size, char f);
/* Its inverse, whatever m[k] holds now: when flags has f, put back the null or delete k. */
void inj_unput(struct doc_node *m, const char *k, const char *flags, char f);

/* Render (a new string) and parse a status record. */
char *inj_status_format(const struct inj_status *st, const struct inj_opts *o);
int inj_status_parse(const char *text, struct inj_status *st, struct err_msg *em);
/* Parse the status record held by node n (found at `field`), with a message naming where it is. */
int inj_status_load(const struct inj_ctx *c, const struct doc_node *n, const char *field, const char *what,
		    struct inj_status *st, struct err_msg *em);

/* Message with position: "FILE:LINE:COL: WHAT: message" (position left out when unknown). */
int inj_fail(const struct inj_ctx *c, struct err_msg *em, const struct doc_node *at, int code,
	     const char *what, const char *fmt, ...) __attribute__((format(printf, 6, 7)));

/* A map's value for key k, checked to be a seq (or absent): DP_EUNSUPPORTED naming the field otherwise. */
int inj_seq_field(const struct inj_ctx *c, struct doc_node *m, const char *k, const char *what,
		  struct doc_node **out, struct err_msg *em);
int inj_map_field(const struct inj_ctx *c, struct doc_node *m, const char *k, const char *what,
		  struct doc_node **out, struct err_msg *em);
/* "Fn::If" / "Ref" / "!Sub" when n is a CloudFormation intrinsic function, else NULL. */
const char *inj_intrinsic(const struct doc_node *n);
/* Index of the item of seq s whose key `k` has string value v, or -1. */
long inj_seq_find(const struct doc_node *s, const char *k, const char *v);
/* A container name both platforms accept: 1-255 of [A-Za-z0-9._-] (what the status record can hold). */
bool inj_name_ok(const char *s, size_t len);
/*
 * The container list[i] about to be injected as the n-th: 0, or DP_EREFUSED
 * with em when it is not a map with a valid name, or when n is the most a
 * status record holds (INJ_MAX_CONTAINERS).
 */
int inj_ctr_named(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *ctr,
		  const char *list, size_t i, size_t n, const char *what, struct err_msg *em);
/* A scalar's text as an option value ("true" for a bool, "3" for a number), or NULL. */
const char *inj_scalar_text(const struct doc_node *n);

/* The common per-container rules (rules.c). `what` names the container for messages. */
int inj_container(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		  const struct inj_opts *o, const char *what, struct inj_cstat *cs, struct err_msg *em);
int uninj_container(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		    const struct inj_cstat *cs, const char *what, struct err_msg *em);
/* Refuse when a name the rules add is already used by something that is not ours. */
int inj_check_collisions(const struct inj_ctx *c, const struct inj_dialect *d,
			 struct doc_node *volumes, struct doc_node *const *ctr_lists, size_t nlists,
			 const char *what, struct err_msg *em);
/* Selected app containers: indices into ctrs per o->containers (all when NULL). */
int inj_select(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctrs,
	       const struct inj_opts *o, const char *what, bool *sel, struct err_msg *em);
/* Does a DOTNET_DiagnosticPorts value already name our socket? ("a;/diag/port,suspend") */
bool inj_names_socket(const char *value);
/* Is path p the same as, inside, or above dir? */
bool inj_path_overlaps(const char *p, const char *dir);
/* The DOTNET_DiagnosticPorts entry the rules add for this mode. */
const char *inj_port_value(enum inj_mode m);
/*
 * The crash-dump settings (the crash-dumps option, inj.h): the runtime's
 * names without prefix, "DbgEnableMiniDump", ..., and the value inject gives
 * setting i for o (borrowed; o->crash_dumps not 0). A container whose own
 * environment names any of them with either prefix (DOTNET_, COMPlus_), as
 * a value or from a secret, has its own crash-dump setup, and inject adds
 * none of them to it (flag C otherwise, status.c).
 */
#define INJ_CRASH_NVARS 4
extern const char *const inj_crash_names[INJ_CRASH_NVARS];
const char *inj_crash_value(const struct inj_opts *o, size_t i);
/* The crash-dumps option's word for a dump type ("mini"; "off" for 0), opts.c. */
const char *inj_crash_type(int t);
/* Is name[0..len) ("DOTNET_DbgMiniDumpType") one of the crash-dump settings, with either prefix? */
bool inj_crash_name(const char *name, size_t len);

/* The agent container (agent.c). */
struct inj_agent_user { long long uid, gid; char *ecs_user; /* ECS "uid:gid" text; owned */ };
struct doc_node *inj_agent_k8s(const struct inj_opts *o, const struct inj_agent_user *u);
struct doc_node *inj_agent_ecs(const struct inj_opts *o, const struct inj_agent_user *u, bool pascal);
/*
 * The agent as a Compose service (user "uid:gid"; status: the project's
 * record, its label). New node.
 */
struct doc_node *inj_agent_compose(const struct inj_opts *o, const char *user, const char *status);
/* The agent's "uid:gid" from an app's user text: numeric and not root, else 1654:1654. New string. */
char *inj_agent_user_text(const char *user);
/* Memory of the agent in MiB (ECS), from the options: reservation and hard limit. */
int inj_agent_mem_mib(const struct inj_opts *o, long long *reservation, long long *limit, struct err_msg *em);
/* Parse a Kubernetes quantity into bytes (memory) or millicores (cpu). */
int inj_quantity(const char *s, bool cpu, long long *out);

/* The agent's requests and limits as injected: the options', else the flavour's defaults (agent.c). */
struct inj_resources {
	const char *cpu, *mem, *limit, *cpu_limit; /* cpu_limit: NULL for none */
};
struct inj_resources inj_agent_resources(const struct inj_opts *o);
/* The agent's settings as a platform would take them: a request over its limit is refused. */
int inj_agent_check(const struct inj_ctx *c, const struct inj_opts *o, const char *what, struct err_msg *em);
const char *inj_default_image(enum inj_flavour f);

/*
 * Options from a workload's annotations / tags / metadata, layered over base into *o (initialised here).
 * `setting` names a key in warnings: "annotation " (prefixed keys), "Metadata.diagport." or "" (bare names).
 */
int inj_opts_from_map(const struct inj_ctx *c, const struct inj_opts *base, const struct doc_node *map,
		      bool prefixed, const char *setting, const char *what, struct inj_opts *o, struct err_msg *em);
/*
 * Set option `name` to v from the workload's own setting, found at `at`, as inj_opts_set does. When the
 * command line set the option (o->flagged) to another value, c->report gets a warning naming the setting
 * (`setting` then `key`, as messages name it: "label " + "diagport.dev/mode"), the object and the value
 * kept; the option is the workload's from then on.
 */
int inj_opts_set_own(const struct inj_ctx *c, struct inj_opts *o, const char *name, const char *v,
		     const char *setting, const char *key, const struct doc_node *at, const char *what,
		     struct err_msg *em);
int inj_opts_from_tags(const struct inj_ctx *c, struct inj_opts *o, const struct doc_node *tags,
		       const char *kkey, const char *vkey, const char *what, struct err_msg *em);
/*
 * Apply c->policy (none: nothing to do) to the options a workload ended up
 * with: every enforced option gets its enforced value (captures: the
 * workload's list intersected with the platform's), with a warning naming
 * the option and both values when the workload's own settings or the
 * command line asked for another. DP_EREFUSED when the intersection of
 * captures is empty (the agent would serve nothing).
 */
int inj_opts_enforce(const struct inj_ctx *c, struct inj_opts *o, const char *what, struct err_msg *em);
/* Recheck options that depend on each other (auth with flavour, ...). */
int inj_opts_check(const struct inj_ctx *c, const struct inj_opts *o, const char *what, struct err_msg *em);

/* The task-definition rules shared by ECS (camelCase) and CloudFormation (PascalCase), ecs.c. */
int inj_taskdef(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *td,
		const struct inj_opts *o, const char *what, struct inj_status *st, struct err_msg *em);
int uninj_taskdef(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *td,
		  const struct inj_status *st, const char *what, struct err_msg *em);
/*
 * The perf option on a task definition: always refused (DP_EREFUSED placed
 * at `own`, the workload's own tag or Metadata value that asked for it; with
 * own NULL it came from the command line or the macro's params, DP_EINVAL),
 * Fargate (requiresCompatibilities) and EC2 with a message each: ECS can
 * grant neither PERFMON nor, on Fargate, anything but SYS_PTRACE.
 */
int inj_taskdef_perf(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *td,
		     const struct doc_node *own, const char *what, struct err_msg *em);

/* Compose, one service (compose_svc.c; compose.c runs them over the project). */
/* Key k of map m as YAML means it: its own key, else through its merge key (<<), in merge order. Borrowed. */
const struct doc_node *inj_merged_get(const struct doc_node *m, const char *k);
/*
 * Map m as YAML means it: its own pairs (no merge key), then the pairs its
 * merge key (<<: a map or a list of maps, resolved in order) gives that it
 * has not. Copies, positions kept; a new map (empty when m is not a map).
 */
struct doc_node *inj_merged_map(const struct doc_node *m);
/* A service's options: base, then its diagport.dev/ labels (inject, mode, ptrace); *o initialised here. */
int inj_compose_service_opts(const struct inj_ctx *c, const struct inj_opts *base, const struct doc_node *svc,
			     const char *what, struct inj_opts *o, struct err_msg *em);
/*
 * Inject one service (cs->name set), recording flags in cs; depends: add its
 * depends_on the agent (not for a service that another one extends: Compose
 * refuses to extend a service with depends_on). And the inverse.
 */
int inj_compose_service(const struct inj_ctx *c, struct doc_node *svc, const struct inj_opts *o, bool depends,
			const char *what, struct inj_cstat *cs, struct err_msg *em);
int uninj_compose_service(const struct inj_ctx *c, struct doc_node *svc, const struct inj_cstat *cs,
			  const char *what, struct err_msg *em);
/* The refusal of the perf option on Compose, placed at `at` with `code`. */
int inj_compose_perf(const struct inj_ctx *c, const struct doc_node *at, int code, const char *what,
		     struct err_msg *em);
/* The value of variable k in a service's environment (map or "K=V" list, merge keys followed), or NULL. Borrowed. */
const char *inj_compose_env_value(const struct doc_node *svc, const char *k);
/* After uninject of a service: refuse when a dependency on the agent or a mount of its volumes is left. */
int inj_compose_leftover(const struct inj_ctx *c, const struct doc_node *svc, const char *what, struct err_msg *em);
/* The value node of a service's label diagport.dev/status (map or list form), or NULL; *skip: the "K=" before it. */
const struct doc_node *inj_compose_status_label(const struct doc_node *svc, size_t *skip);

/*
 * The platform's settings from memory (bytes in the format inj_settings_load
 * reads; name is what messages call them, "DIAGPORT_POLICY"), into a new s.
 * DP_ESYNTAX or DP_EINVAL with em ("NAME:LINE:COL: ..."); s is freeable
 * either way.
 */
int inj_settings_parse(const char *bytes, size_t len, const char *name, struct inj_settings *s, struct err_msg *em);
/*
 * The platform's settings from the environment, for a process that has no
 * file of the platform's to read (the CloudFormation macro's Lambda
 * function): $VAR holding the settings document itself, or $VAR_FILE naming
 * a file. 1 when neither is set (s: the built-in defaults, nothing
 * enforced), 0 when s holds them; otherwise an error with em naming the
 * variable (both set, an empty document, a bad setting with its line and
 * column). s is freeable in every case.
 */
int inj_settings_env(const char *var, struct inj_settings *s, struct err_msg *em);

/*
 * The CloudFormation macro's process-wide settings, read once at cold start
 * (macro_cli.c, lambda.c) and given to every event: the platform's defaults
 * and policy (DIAGPORT_POLICY), or why they could not be read, in which
 * case every event fails with that message: a macro told to enforce a policy
 * never runs without it.
 */
#define INJ_MACRO_POLICY_VAR "DIAGPORT_POLICY"
struct inj_macro_platform {
	struct inj_settings settings; /* defaults under the params, and the policy over everything */
	bool given;                   /* a policy was given (the variable was set) */
	struct err_msg error;         /* non-empty: the one given is bad */
};
/*
 * Read INJ_MACRO_POLICY_VAR (or its _FILE form) into a new p and log the
 * outcome (lambda.c); 0, or the error, also kept in p->error. Free with
 * inj_macro_platform_free.
 */
int inj_macro_platform_load(struct inj_macro_platform *p);
void inj_macro_platform_free(struct inj_macro_platform *p);
/* One event through inj_macro_run with p, its warnings logged (log_warn, one line each): the response in out. */
int inj_macro_answer(const char *event, size_t len, const struct inj_macro_platform *p, struct buf *out);
/*
 * inj_macro with the platform's settings (NULL: none, as inj_macro): the
 * template's params over the platform's defaults, the workload's Metadata
 * and tags over those, and the platform's policy over everything, with a
 * warning in rep (may be NULL; owned by the caller) for each value it
 * overrides. The response is the macro contract's: CloudFormation takes no
 * warnings, so the caller logs them (to the function's log, CloudWatch).
 */
int inj_macro_run(const char *event, size_t len, const struct inj_macro_platform *p, struct inj_report *rep,
		  struct buf *out);

/* Capitalise the first letter of every key under n (the CloudFormation spelling of ECS fields). */
void inj_pascalize(struct doc_node *n);

#endif
