/*
 * cli_args.h - the command line of `diagport ps` and `diagport capture KIND`
 * (cli_args.c), for the commands themselves (cli.c): the capture kinds, the
 * parsed arguments, the usage texts and the usage error. Private to those two.
 */
#ifndef DP_FLEET_CLI_ARGS_H
#define DP_FLEET_CLI_ARGS_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include "buf.h"

#define MAX_REFS 256
#define CONFIRM_OVER 10

/* A format a kind can be captured in: the agent's spelling, an Accept header, the file extension. */
struct format {
	const char *name, *query, *accept, *ext;
};

struct kind {
	const char *name, *method, *path;
	bool freezes, per_process, takes_duration;
	long default_timeout_s;      /* beyond --duration */
	uint64_t default_max;        /* bytes per artifact unless --max-size says otherwise (0: only what the
					output disk can take, run.h keep_free) */
	const struct format *formats; /* the first is the default; NULL-named end */
	const char *help;
};

struct args {
	/* targets */
	const char *kubeconfig, *context, *namespace_, *selector, *container;
	bool all_namespaces;
	const char *ecs_cluster, *ecs_service, *region, *profile;
	bool public_ip;
	const char *targets[MAX_REFS];
	size_t n_targets;
	const char *targets_file, *token_file;
	const char *cacert;  /* --cacert: https agents verified against it (else the system's store) */
	bool insecure_http;  /* --insecure-http: a token may go over plain http beyond loopback */
	const char *tls_name; /* --tls-server-name: the name https agents reached directly must bear */
	const char *refs[MAX_REFS + 1];
	size_t n_refs;
	unsigned parallel;
	long request_timeout_s;
	/* ps */
	const char *output;
	/* ui */
	int port;
	/* capture */
	const struct kind *kind;
	const char *type, *profile_names, *providers, *format, *level, *egress, *tags;
	const char *filter;  /* --filter: POST /exceptions's body, inline JSON or a file */
	long duration_s, timeout_s, top;
	uint64_t max_size;
	unsigned max_unavailable;
	bool yes;
	struct buf params;   /* "&k=v" for each --param */
};


/* The kind named name ("dump"), or NULL. */
const struct kind *fleet_cli_kind(const char *name);
/* "dump, trace, ... or exceptions" onto b: the kinds, for a message. */
void fleet_cli_kind_names(struct buf *b);
/* How the program is named in messages: "diagport", or "kubectl diagport" (fleet_cli_as_kubectl_plugin). */
const char *fleet_cli_prog(void);
/* The usage texts, for --help (stdout) or a mistake (stderr). */
void fleet_cli_usage_ps(FILE *f);
void fleet_cli_usage_capture(FILE *f);
void fleet_cli_usage_ui(FILE *f);
/* "PROG CMD: message" and where --help is, on stderr; returns FLEET_EXIT_USAGE. */
int fleet_cli_usage_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* "&k=v" onto b, v percent-encoded. */
void fleet_cli_add_param(struct buf *b, const char *k, const char *v);
/*
 * The options of cmd ("ps" or "capture") from argv (getopt_long's, from argv[1]) into a, whose kind
 * the caller has set for a capture. 0, or an exit code after a message; a->params is a's own (buf_free).
 */
int fleet_cli_parse(int argc, char **argv, const char *cmd, struct args *a);

#endif
