/*
 * opts_int.h - the options table (opts.c) as its readers and writers see it:
 * the platform's policy (opts_policy.c), --help and the docs' table
 * (opts_text.c). Private to the opts*.c files; the rest of the injector
 * goes through inj_int.h's inj_opts_* functions.
 */
#ifndef DP_INJ_OPTS_INT_H
#define DP_INJ_OPTS_INT_H

#include <stddef.h>

#include "buf.h"
#include "inj_int.h"

/* What an option's value is, and so how it is read, shown and checked. */
enum opt_kind {
	OK_CHOICE,    /* one of choices; the field holds its index (an enum, or a bool for two) */
	OK_BOOL,      /* true / false */
	OK_OPTIN,     /* true / false / enabled / disabled; -1 unset */
	OK_PORT,      /* 1-65535 */
	OK_NAMES,     /* comma-separated container names */
	OK_REF,       /* a reference without spaces or quotes (image, Secret name or ARN) */
	OK_QUANTITY,  /* a Kubernetes quantity */
	OK_RESOURCES, /* cpu=Q,memory=Q,memory-limit=Q */
	OK_CAPTURES,  /* comma-separated capture kinds, or all; the field holds a bit each */
};

struct inj_option {
	const char *name;         /* diagport.dev/NAME, the ECS tag, Metadata.diagport.NAME, the configuration key */
	const char *alias;        /* another spelling of the name and the flag, or NULL */
	const char *flag;         /* the flag that takes a value ("--mode"), or NULL */
	const char *switch_flag;  /* a flag without a value ("--no-ptrace") that sets switch_value, or NULL */
	const char *switch_value;
	enum opt_kind kind;
	size_t off, size;         /* the field of struct inj_opts */
	const char *const *choices; /* OK_CHOICE: the values, in the order of the field's values */
	const char *noun;         /* OK_REF: what a value must be ("an image reference") */
	const char *values;       /* what it takes, for the docs */
	const char *arg;          /* what it takes, for --help ("IMAGE"); NULL: the choices */
	const char *def;          /* its default, likewise */
	const char *help;         /* one line */
};

/* The options, one row each (opts.c), and how many. */
extern const struct inj_option inj_options[];
extern const size_t inj_n_options;

/* The row of option name (or its alias), or NULL. */
const struct inj_option *inj_option_find(const char *name);
/* Set opt's field of o from the text v, checked as opt's kind says. 0, or a DP_E* code with em. */
int inj_option_set(struct inj_opts *o, const struct inj_option *opt, const char *v, struct err_msg *em);
/* The value opt has in o, as a flag takes it ("suspend", "cpu=10m,memory=16Mi"), appended to out. */
void inj_option_text(const struct inj_option *opt, const struct inj_opts *o, struct buf *out);

#endif
