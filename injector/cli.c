/*
 * cli.c - the command line of inject and uninject: parse arguments, read the
 * whole input (with a cap), run the rules on every document (a List item by
 * item: k8s_list.c), and only when all of them succeeded write the result:
 * to stdout, or with --in-place to a temporary file beside the input that is
 * renamed over it. On any error nothing is written and the input is untouched.
 */
#include "cli.h"

#include <errno.h>
#include <stdint.h>
#include <fcntl.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "doc.h"
#include "inj.h"
#include "mem.h"
#include "size.h"

#define MAX_WARNINGS_SHOWN 100
/*
 * --max-input's default. A List goes through one item at a time, so the input
 * costs about its size (and the output as much again at most) rather than a
 * tree of it; 256 MiB reads back what inject writes for a List of 64 MiB
 * (about 3.6 times as big: `kubectl get deploy -A -o json` of 18,000
 * Deployments). --max-nodes still bounds the values read, and so any tree.
 */
#define DEFAULT_MAX_INPUT ((size_t)256 << 20)

enum { EX_OK = 0, EX_REFUSED = 1, EX_USAGE = 2, EX_SYNTAX = 3, EX_TOOBIG = 4, EX_IO = 5, EX_INTERNAL = 70 };

struct args {
	const char *kind;   /* k8s, ecs, cfn, or NULL to detect */
	const char *file;   /* NULL or "-" = stdin */
	int out_fmt;        /* -1 = same as input */
	bool in_place, all;
	size_t max_input, max_nodes; /* the limits of what is read */
	struct inj_opts opts;
	const char *policy;          /* --policy FILE: the platform's settings file, for its enforce: map */
	struct inj_settings settings; /* that file, read (defaults when none) */
};

static int exit_code(int rc)
{
	switch (rc) {
	case 0: return EX_OK;
	case DP_EREFUSED: case DP_EUNSUPPORTED: return EX_REFUSED;
	case DP_EINVAL: return EX_USAGE;
	case DP_ESYNTAX: return EX_SYNTAX;
	case DP_ETOOBIG: return EX_TOOBIG;
	case DP_EIO: return EX_IO;
	}
	return EX_INTERNAL;
}

static void usage(FILE *f, const char *cmd)
{
	bool in = strcmp(cmd, "inject") == 0;
	struct buf opts;

	fprintf(f,
		"usage: diagport %s [k8s|ecs|cfn|compose] [OPTIONS] [-f FILE | FILE | -]\n\n"
		"%s\n\n"
		"  k8s|ecs|cfn|compose    the kind of document (detected when not given)\n"
		"  -f, --filename FILE    read FILE ('-' or none: standard input)\n"
		"  -o, --output json|yaml write this format (default: the input's). Several documents in\n"
		"                         JSON are a stream of JSON values, one per input document, one\n"
		"                         after another (what `kubectl apply -f -` and `jq` read); in YAML,\n"
		"                         one stream of documents separated by ---\n"
		"  -i, --in-place         replace FILE atomically instead of writing to stdout\n"
		"      --max-input SIZE   refuse inputs larger than this: 4096, 200M, 64Mi, 1Gi (default 256Mi);\n"
		"                         what is written is not limited (inject's output of a List is\n"
		"                         about 3.6 times its input: uninject it with a --max-input to fit)\n"
		"      --max-nodes N      refuse inputs of more values than this, YAML aliases expanded\n"
		"                         (default 16777216)\n",
		cmd,
		in ? "Adds diagnostics to every workload: shared volumes, DOTNET_DiagnosticPorts, the capture\n"
		     "agent (as the app's uid when the workload sets one), and SYS_PTRACE when asked (--ptrace true). Per-workload settings (diagport.dev/* annotations, ECS tags,\n"
		     "CloudFormation Metadata.diagport) override these options, with a warning on stderr when\n"
		     "they give one another value. Compose: one agent service (diagport-agent) for the\n"
		     "project; --containers names services; a service's labels diagport.dev/inject, mode and\n"
		     "ptrace are its own; the agent's options come from the top-level x-diagport map over these."
		   : "Removes exactly what inject added, as its status record lists it: the data comes back\n"
		     "as it was (JSON byte for byte; YAML without its comments, anchors and layout), except\n"
		     "ECS describe-task-definition output, which inject made register input: that comes back.");
	if (in) {
		buf_init(&opts, 0);
		inj_opts_help(&opts);
		fprintf(f, "%s", opts.data ? opts.data : "");
		buf_free(&opts);
		fprintf(f, "      %-18s %s\n", "--all", "CloudFormation: every task definition, not only opted-in ones");
		fprintf(f, "      --policy FILE      the webhook's configuration file: its enforce: map wins over these\n"
			   "                         options and every workload's own settings, with a warning when\n"
			   "                         one asked for another value (captures: at most its list)\n");
	}
	fprintf(f, "\nExit status: 0 done, 1 refused by the rules, 2 usage, 3 unreadable input,\n"
		   "4 input too large, 5 I/O error. On any error nothing is written.\n");
}

/* getopt_long's table: the fixed flags, then every injection option's (opts.c); flags[] is what FLAG_BASE + i means. */
#define FLAG_BASE 1000
#define MAX_FLAGS 48
static const struct option fixed_opts[] = {
	{ "filename", required_argument, NULL, 'f' }, { "output", required_argument, NULL, 'o' },
	{ "in-place", no_argument, NULL, 'i' },	      { "help", no_argument, NULL, 'h' },
	{ "all", no_argument, NULL, 'A' },	      { "max-input", required_argument, NULL, 'X' },
	{ "max-nodes", required_argument, NULL, 'N' },  { "policy", required_argument, NULL, 'P' },
};
#define N_FIXED (sizeof(fixed_opts) / sizeof(fixed_opts[0]))

static size_t long_options(struct option *longopts, struct inj_flag *flags)
{
	size_t n = inj_flags(flags, MAX_FLAGS);

	memcpy(longopts, fixed_opts, sizeof(fixed_opts));
	for (size_t i = 0; i < n; i++)
		longopts[N_FIXED + i] = (struct option){ flags[i].flag, flags[i].takes_value ? required_argument : no_argument,
							  NULL, FLAG_BASE + (int)i };
	longopts[N_FIXED + n] = (struct option){ NULL, 0, NULL, 0 };
	return n;
}

/*
 * getopt_long takes any unambiguous prefix of a long flag: --auth would be
 * --auth-secret, and "--auth none" would name a Secret "none". Only whole
 * flag names are taken; the first that is not one is the error.
 */
static int whole_flags(int argc, char **argv, const struct option *longopts)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		size_t n = strcspn(a + 2, "=");
		const struct option *o = longopts;

		if (strcmp(a, "--") == 0)
			break;
		if (strncmp(a, "--", 2) != 0)
			continue;
		while (o->name && (strlen(o->name) != n || strncmp(o->name, a + 2, n) != 0))
			o++;
		if (o->name == NULL) {
			fprintf(stderr, "diagport: unknown flag '%.*s' (see --help)\n", (int)n + 2, a);
			return DP_EINVAL;
		}
		if (o->has_arg == required_argument && a[2 + n] != '=')
			i++; /* its value, whatever it looks like */
	}
	return 0;
}

static int parse_args(int argc, char **argv, struct args *a)
{
	struct option longopts[N_FIXED + MAX_FLAGS + 1];
	struct inj_flag flags[MAX_FLAGS];
	bool inject = strcmp(argv[0], "inject") == 0;
	struct err_msg em;
	int ch, idx;

	long_options(longopts, flags);
	memset(a, 0, sizeof(*a));
	if (whole_flags(argc, argv, longopts) != 0)
		return DP_EINVAL;
	a->out_fmt = -1;
	a->max_input = DEFAULT_MAX_INPUT;
	a->max_nodes = doc_default_limits.max_nodes;
	inj_opts_init(&a->opts);
	optind = 1;
	opterr = 0;
	/* GNU getopt permutes: options may come before or after the kind and the file. */
	while ((ch = getopt_long(argc, argv, "f:o:ih", longopts, &idx)) != -1) {
		const char *arg = optarg ? optarg : ""; /* every option with a value requires one */

		if (!inject && (ch >= FLAG_BASE || ch == 'A' || ch == 'P')) {
			fprintf(stderr, "diagport: uninject takes no injection options ('%s')\n", argv[optind - 1]);
			return DP_EINVAL;
		}
		if (ch >= FLAG_BASE) {
			const struct inj_flag *fl = &flags[ch - FLAG_BASE];

			if (inj_opts_set_flag(&a->opts, fl->option, fl->takes_value ? arg : fl->value, &em) != 0) {
				const char *why = strchr(em.text, ':'); /* "option NAME: why": the flag names it */

				fprintf(stderr, "diagport: --%s: %s\n", fl->flag, why ? why + 2 : em.text);
				return DP_EINVAL;
			}
			continue;
		}
		switch (ch) {
		case 'f':
			if (a->file) {
				fprintf(stderr, "diagport: more than one input given\n");
				return DP_EINVAL;
			}
			a->file = arg;
			break;
		case 'o':
			if (strcmp(arg, "json") == 0) {
				a->out_fmt = DOC_JSON;
			} else if (strcmp(arg, "yaml") == 0) {
				a->out_fmt = DOC_YAML;
			} else {
				fprintf(stderr, "diagport: -o takes json or yaml, not '%s'\n", arg);
				return DP_EINVAL;
			}
			break;
		case 'i': a->in_place = true; break;
		case 'h': usage(stdout, argv[0]); exit(0);
		case 'A': a->all = true; break;
		case 'P':
			if (a->policy) {
				fprintf(stderr, "diagport: --policy is given twice\n");
				return DP_EINVAL;
			}
			a->policy = arg;
			break;
		case 'X': {
			uint64_t v;

			if (size_parse(arg, &v) != 0 || v == 0 || v > SIZE_MAX) {
				fprintf(stderr, "diagport: --max-input takes a size: bytes, or with a unit as Kubernetes "
					"writes them (64Mi, 200M), not '%s'\n", arg);
				return DP_EINVAL;
			}
			a->max_input = (size_t)v;
			break;
		}
		case 'N': {
			char *end;
			unsigned long long v;

			errno = 0;
			v = strtoull(arg, &end, 10);
			if (*arg < '0' || *arg > '9' || *end != '\0' || errno != 0 || v == 0 || v > ((size_t)1 << 32)) {
				fprintf(stderr, "diagport: --max-nodes takes a whole number from 1 to 4294967296, not "
					"'%s'\n", arg);
				return DP_EINVAL;
			}
			a->max_nodes = (size_t)v;
			break;
		}
		default:
			fprintf(stderr, "diagport: unknown option or missing value: '%s'\n", argv[optind - 1]);
			usage(stderr, argv[0]);
			return DP_EINVAL;
		}
	}
	for (; optind < argc; optind++) {
		const char *w = argv[optind];

		if (strcmp(w, "k8s") == 0 || strcmp(w, "ecs") == 0 || strcmp(w, "cfn") == 0 || strcmp(w, "compose") == 0) {
			if (a->kind) {
				fprintf(stderr, "diagport: the kind is given twice ('%s' and '%s')\n", a->kind, w);
				return DP_EINVAL;
			}
			a->kind = w;
		} else if (a->file) {
			fprintf(stderr, "diagport: more than one input given ('%s' and '%s')\n", a->file, w);
			return DP_EINVAL;
		} else {
			a->file = w;
		}
	}
	if (a->in_place && (a->file == NULL || strcmp(a->file, "-") == 0)) {
		fprintf(stderr, "diagport: --in-place needs a file (-f FILE)\n");
		return DP_EINVAL;
	}
	if (a->opts.auth_secret && a->opts.no_auth) {
		fprintf(stderr, "diagport: --auth-secret and --no-auth contradict each other; give one\n");
		return DP_EINVAL;
	}
	return 0;
}

static int read_input(const struct args *a, struct buf *in, struct err_msg *em)
{
	const char *name = a->file && strcmp(a->file, "-") != 0 ? a->file : NULL;
	int fd, rc;

	buf_init(in, a->max_input);
	fd = name ? open(name, O_RDONLY | O_CLOEXEC) : STDIN_FILENO;
	if (fd < 0)
		return err_set(em, DP_EIO, "%s: cannot open: %s", name ? name : "<stdin>", strerror(errno));
	rc = buf_read_fd(in, fd);
	if (rc == DP_EIO)
		err_set(em, DP_EIO, "%s: cannot read: %s", name ? name : "<stdin>", strerror(errno));
	else if (rc == DP_ETOOBIG)
		err_set(em, DP_ETOOBIG, "%s: input is larger than %zu bytes (--max-input)", name ? name : "<stdin>",
			a->max_input);
	if (name)
		close(fd);
	return rc;
}

static int run_doc(const char *kind, bool inject, struct doc_node **doc, size_t index,
		   const struct inj_ctx *c, struct err_msg *em)
{
	if (kind == NULL)
		return err_set(em, DP_ESYNTAX,
			       "%s:%u:%u: document %zu is not a Kubernetes object, an ECS task definition, a "
			       "CloudFormation template or a Compose file; name the kind (diagport %s "
			       "k8s|ecs|cfn|compose)",
			       c->file, (*doc)->line, (*doc)->col, index + 1, inject ? "inject" : "uninject");
	if (!doc_is(*doc, DOC_MAP))
		return err_set(em, DP_ESYNTAX, "%s:%u:%u: document %zu is not a map", c->file, (*doc)->line,
			       (*doc)->col, index + 1);
	if (strcmp(kind, "k8s") == 0)
		return inject ? inj_k8s_object(*doc, c, em) : uninj_k8s_object(*doc, c, em);
	if (strcmp(kind, "ecs") == 0)
		return inject ? inj_ecs_taskdef(doc, c, em) : uninj_ecs_taskdef(doc, c, em);
	if (strcmp(kind, "compose") == 0)
		return inject ? inj_compose_project(*doc, c, em) : uninj_compose_project(*doc, c, em);
	return inject ? inj_cfn_template(*doc, c, em) : uninj_cfn_template(*doc, c, em);
}

/*
 * --in-place writes a temporary file beside the input (same mode), and
 * replace_end renames it over the input after an fsync. A symbolic link
 * is followed: the file it names is replaced and the link stays (kustomize
 * bases and checked-in manifests are often links), as sed -i
 * --follow-symlinks does.
 */
struct replacement {
	char *path, *tmp;
	int fd;
};

static int replace_open(const char *link, struct replacement *r, struct err_msg *em)
{
	const char *why = NULL;
	struct stat st;

	r->tmp = NULL;
	r->fd = -1;
	if ((r->path = realpath(link, NULL)) == NULL) {
		err_set(em, DP_EIO, "%s: %s", link, strerror(errno));
		goto fail;
	}
	/* renaming over it would work in a writable directory: a read-only file is kept, as an editor keeps it */
	if (stat(r->path, &st) != 0 || access(r->path, W_OK) != 0)
		why = strerror(errno);
	else if ((st.st_mode & 0222) == 0)
		why = "the file is read-only";
	if (why) {
		err_set(em, DP_EIO, "%s: %s: --in-place replaces only a file that may be written; make it "
			"writable, or write to standard output", r->path, why);
		goto fail;
	}
	r->tmp = mem_printf("%s.diagport-XXXXXX", r->path);
	if ((r->fd = mkstemp(r->tmp)) < 0) {
		err_set(em, DP_EIO, "%s: cannot create a temporary file beside it: %s", r->path, strerror(errno));
		goto fail;
	}
	(void)fchmod(r->fd, st.st_mode & 07777);
	return 0;
fail:
	mem_free(r->tmp);
	free(r->path);
	r->tmp = r->path = NULL;
	return DP_EIO;
}

/* rc == 0: the written file takes the input's place; else (or when that fails) it is removed. */
static int replace_end(struct replacement *r, int rc, struct err_msg *em)
{
	if (rc == 0 && fsync(r->fd) != 0)
		rc = err_set(em, DP_EIO, "%s: cannot write: %s", r->tmp, strerror(errno));
	if (close(r->fd) != 0 && rc == 0)
		rc = err_set(em, DP_EIO, "%s: cannot write: %s", r->tmp, strerror(errno));
	if (rc == 0 && rename(r->tmp, r->path) != 0)
		rc = err_set(em, DP_EIO, "%s: cannot replace: %s", r->path, strerror(errno));
	if (rc != 0)
		unlink(r->tmp);
	mem_free(r->tmp);
	free(r->path);
	return rc;
}

/*
 * What one pass over the input hands on. The first pass writes the output
 * into memory while it fits in `budget` (the input's size, at least
 * MIN_BUDGET); past that it goes on to the end only checking: each document
 * is still written, to see that it can be, and the bytes are thrown away (a
 * JSON List's items need not be: what was read as JSON can be written as
 * JSON). Only when every document went through is anything written: the
 * memory, or (when it went past the budget) a second pass (fd >= 0) that
 * makes the output again and writes it as it goes, in pieces of FLUSH_AT
 * bytes. A List of thousands of workloads thus costs its input, at most as
 * much output and one item's tree; and nothing is written when a document
 * fails.
 */
#define MIN_BUDGET ((size_t)4 << 20)
#define FLUSH_AT ((size_t)1 << 20)

struct run_ctx {
	const struct args *a;
	bool inject;
	const struct inj_ctx *c;
	struct buf *out;
	int fmt;
	size_t budget;
	bool over;   /* the first pass went past the budget: the output is only checked */
	int fd;      /* the second pass: where the output goes; -1 in the first */
	struct err_msg *em;
};

/* After each document or item: the second pass writes what it has; the first keeps it, up to the budget. */
static int drain(struct run_ctx *x, bool last)
{
	if (x->fd >= 0) {
		if (x->out->len < FLUSH_AT && !last)
			return 0;
		if (buf_write_fd(x->out, x->fd) != 0)
			return err_set(x->em, DP_EIO, "cannot write %s: %s",
				       x->a->in_place ? "the new file" : "to standard output", strerror(errno));
		buf_reset(x->out);
	} else if (x->over || x->out->len > x->budget) {
		x->over = true;
		buf_reset(x->out);
	}
	return 0;
}

/* After each item of a List: drain(); past the budget, the first pass need not write JSON items, only check them. */
static int list_drain(void *ctx)
{
	struct run_ctx *x = ctx;
	int rc = drain(x, false);

	return rc == 0 && x->over && x->fd < 0 ? 1 : rc;
}

static int run_one(void *ctx, const struct doc_stream *s, struct doc_node *doc, size_t index)
{
	struct run_ctx *x = ctx;
	struct doc_stream ws = *s;
	const char *kind = x->a->kind ? x->a->kind : inj_detect(doc);
	int rc;

	if (index == 0)
		x->fmt = x->a->out_fmt >= 0 ? x->a->out_fmt : (int)s->format;
	rc = run_doc(kind, x->inject, &doc, index, x->c, x->em);
	if (rc == 0 && kind && strcmp(kind, "compose") == 0) /* merge keys stay merge keys when written */
		rc = inj_compose_merge_keys(doc, x->fmt == DOC_YAML, x->c->file, x->em);
	if (rc == 0 && x->fmt == DOC_JSON && s->format == DOC_YAML) {
		rc = inj_cfn_expand_tags(doc, x->c->file, x->em);
		ws.json_indent = 2;
	}
	if (rc == 0)
		rc = doc_write_part(x->out, &ws, doc, index, (enum doc_format)x->fmt, x->em);
	doc_free(doc);
	return rc == 0 ? drain(x, false) : rc;
}

/* One pass over the input: a List item by item, anything else one document at a time (doc_read_each). */
static int run_pass(struct run_ctx *x, const struct buf *in, const struct doc_limits *lim, struct err_msg *em)
{
	struct doc_stream s;
	int rc;

	memset(&s, 0, sizeof(s));
	rc = x->a->out_fmt >= 0 && x->a->out_fmt != (int)doc_sniff(in->data, in->len) ? 1 :
	     inj_k8s_list(in->data, in->len, lim, x->a->kind, x->inject, x->c, x->out, list_drain, x, em);
	if (rc == 1)
		rc = doc_read_each(in->data ? in->data : "", in->len, x->c->file, lim, &s, run_one, x, em);
	else if (rc == 0)
		s.n = 1;
	if (rc == 0 && s.n == 0)
		rc = err_set(em, DP_ESYNTAX, "%s: no documents in the input", x->c->file);
	return rc == 0 ? drain(x, true) : rc;
}

static int run(int argc, char **argv, bool inject)
{
	struct args a;
	struct buf in, out;
	struct doc_limits lim = doc_default_limits;
	struct inj_report report = { 0 };
	struct inj_ctx c, quiet;
	struct replacement r;
	struct err_msg em = { "" };
	struct run_ctx x = { .inject = inject, .out = &out, .fd = -1, .em = &em };
	int rc;

	if (parse_args(argc, argv, &a) != 0) {
		inj_opts_free(&a.opts);
		return EX_USAGE;
	}
	if (a.policy == NULL) {
		inj_settings_defaults(&a.settings);
	} else if ((rc = inj_settings_load(a.policy, &a.settings, &em)) != 0) {
		fprintf(stderr, "diagport: --policy: %s\n", em.text);
		inj_opts_free(&a.opts);
		return rc == DP_EIO ? EX_IO : EX_USAGE;
	}
	buf_init(&in, 0);
	buf_init(&out, 0);
	c = (struct inj_ctx){ .file = a.file && strcmp(a.file, "-") != 0 ? a.file : "<stdin>",
			      .base = &a.opts, .policy = &a.settings.enforce, .all = a.all, .report = &report };
	x.a = &a;
	x.c = &c;
	lim.max_bytes = a.max_input;
	lim.max_nodes = a.max_nodes;
	lim.bytes_name = "--max-input";
	lim.nodes_name = "--max-nodes";
	if ((rc = read_input(&a, &in, &em)) != 0)
		goto out;
	x.budget = in.len > MIN_BUDGET ? in.len : MIN_BUDGET;
	if ((rc = run_pass(&x, &in, &lim, &em)) != 0)
		goto out;
	if (x.over) {
		/* the same pass again, now writing as it goes; its warnings were given by the first */
		buf_free(&out);
		quiet = c;
		quiet.report = NULL;
		x.c = &quiet;
		x.fd = STDOUT_FILENO;
		if (a.in_place && (rc = replace_open(a.file, &r, &em)) == 0) {
			x.fd = r.fd;
			rc = replace_end(&r, run_pass(&x, &in, &lim, &em), &em);
		} else if (!a.in_place) {
			rc = run_pass(&x, &in, &lim, &em);
		}
		goto out;
	}
	buf_free(&in); /* before the output is written: the two need not be held at once on the way out */
	if (a.in_place) {
		if ((rc = replace_open(a.file, &r, &em)) == 0)
			rc = replace_end(&r, buf_write_fd(&out, r.fd) != 0 ?
					 err_set(&em, DP_EIO, "%s: cannot write: %s", r.tmp, strerror(errno)) : 0, &em);
	} else if (buf_write_fd(&out, STDOUT_FILENO) != 0) {
		rc = err_set(&em, DP_EIO, "cannot write to standard output: %s", strerror(errno));
	}
out:
	for (size_t i = 0; i < report.nwarn && i < MAX_WARNINGS_SHOWN; i++)
		fprintf(stderr, "diagport: warning: %s\n", report.warnings[i]);
	if (report.nwarn > MAX_WARNINGS_SHOWN)
		fprintf(stderr, "diagport: warning: and %zu more warnings like these\n", report.nwarn - MAX_WARNINGS_SHOWN);
	if (rc != 0)
		fprintf(stderr, "diagport: %s\n", em.text[0] ? em.text : err_str(rc));
	inj_report_free(&report);
	buf_free(&in);
	buf_free(&out);
	inj_opts_free(&a.opts);
	inj_settings_free(&a.settings);
	return exit_code(rc);
}

/* A reader that goes away (`| head`) is a failed write, exit 5 as documented, not death by SIGPIPE (141). */
int inj_cli_inject(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	return run(argc, argv, true);
}

int inj_cli_uninject(int argc, char **argv)
{
	signal(SIGPIPE, SIG_IGN);
	return run(argc, argv, false);
}
