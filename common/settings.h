/*
 * settings.h - the one settings binder: a tree of colon paths, each node with
 * its value and where that value came from, read by typed getters that mark
 * what they read, and a final check that refuses what nobody read.
 *
 * Every source (a file, a key-per-file directory, the environment, the
 * command line) puts its leaves in with settings_put; a later put of the same
 * path (names compare case-insensitively, as .NET configuration compares them)
 * replaces the value and its source. Consumers then take their subtree and read
 * it with settings_get and the typed getters; each read marks the node, and each
 * name asked for is remembered at its level. settings_check_unread refuses the
 * first node no consumer read, by its full path and its source, with the name
 * asked for there that it most likely misspells.
 *
 * Ownership: the tree owns every node and string in it (values are wiped when
 * freed: they may be keys). Getters hand out borrowed pointers into the tree,
 * except settings_str and settings_strings, whose results are new. A list is a
 * section whose children are named 0, 1, ... (as .NET binds a JSON array).
 * Functions returning int: 0, or a negative DP_E* code with em set.
 */
#ifndef DP_SETTINGS_H
#define DP_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>

#include "errors.h"
#include "htab.h"

#define SETTINGS_MAX_LIST 64 /* items of one list setting */

struct settings_node {
	char *name;      /* as first written */
	char *value;     /* a leaf's value, or NULL (a section) */
	char *where;     /* where the value came from ("rules.yaml:4:7", "environment variable X", "--urls") */
	struct settings_node *up, **k;
	size_t n, cap;
	size_t total; /* the root's: nodes put below it (counted as put, so a cap costs no walk) */
	bool used;
	char **asked; /* the names consumers asked for under this node: the suggestions for a misspelling */
	size_t n_asked, cap_asked;
	struct htab kix, aix; /* k[] and asked[] by name, case-insensitive (of size_t: an index) */
};

/* An empty root (new; free with settings_free). */
struct settings_node *settings_new(void);
/* Free a tree from its root (NULL accepted); every value wiped first. */
void settings_free(struct settings_node *root);

/*
 * Put value at the colon path (Egress:S3Storage:s3:BucketName) under root, from
 * where; an earlier value at that path is replaced (wiped), its source with it.
 * DP_EINVAL for a path with an empty part, DP_ETOOBIG past max_nodes (0: no cap).
 */
int settings_put(struct settings_node *root, const char *path, const char *value, const char *where,
		 size_t max_nodes, struct err_msg *em);

/* A child by name, not marked (NULL when absent or n is NULL). */
struct settings_node *settings_find(const struct settings_node *n, const char *name);
/* A child by name, marked read and the name remembered at n; NULL when absent (or n is NULL). */
struct settings_node *settings_get(struct settings_node *n, const char *name);
/* The node at a colon path under root, or NULL; mark: each level on the way is read as settings_get reads it. */
struct settings_node *settings_at(struct settings_node *root, const char *path, bool mark);
/* Remember each part of a colon path a consumer knows as asked for, at the levels of it root has. */
void settings_ask_path(struct settings_node *root, const char *path);
/* Mark n and everything under it read (a section accepted whole, or warned about and skipped). */
void settings_mark(struct settings_node *n);
/* Remember name as one asked for under n without marking anything (a name a consumer knows here). */
void settings_ask(struct settings_node *n, const char *name);
/* n's full colon path from the root, in out (truncated to cap). */
void settings_path(const struct settings_node *n, char *out, size_t cap);
/* Wipe every value under n (secrets handed on elsewhere). */
void settings_wipe(struct settings_node *n);

/* A refusal naming where n came from and its full path: "WHERE: PATH: WHAT". Returns code. */
int settings_refuse(int code, const struct settings_node *n, struct err_msg *em, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));
/* A required setting name under n is absent: DP_EINVAL naming its full path (and a stray name beside it). */
int settings_refuse_missing(const struct settings_node *n, const char *name, struct err_msg *em, const char *hint);

/*
 * The typed getters: each reads the child name of n (n may be NULL: absent), marks it and
 * remembers the name. Absent: 0 with the output untouched (*has false), or refused when required.
 * A section where a value is expected, or a value that does not parse or is out of range, is
 * DP_EINVAL naming the full path and source.
 */
int settings_text(struct settings_node *n, const char *name, bool required, const char **out, struct err_msg *em);
int settings_str(struct settings_node *n, const char *name, bool required, char **out, struct err_msg *em);
int settings_uint(struct settings_node *n, const char *name, bool *has, unsigned *out, unsigned lo, unsigned hi,
		  struct err_msg *em);
int settings_double(struct settings_node *n, const char *name, bool *has, double *out, double lo, double hi,
		    struct err_msg *em);
/* true or false (any case) */
int settings_bool(struct settings_node *n, const char *name, bool *out, struct err_msg *em);
/* A .NET TimeSpan ([d.]hh:mm[:ss[.fffffff]], or a whole number of days) in milliseconds, within lo..hi. */
int settings_timespan(struct settings_node *n, const char *name, bool *has, long long *out, long long lo,
		      long long hi, struct err_msg *em);
/* A list: the children 0, 1, ... in order; *out new (nodes borrowed), NULL with *count 0 when absent. */
int settings_list(struct settings_node *n, const char *name, struct settings_node ***out, size_t *count,
		  struct err_msg *em);
/* A list of text values, each new (the array too). */
int settings_strings(struct settings_node *n, const char *name, char ***out, size_t *count, struct err_msg *em);

/* TimeSpan text in milliseconds (-1 when it is not one); and milliseconds as TimeSpan text. */
long long settings_parse_timespan(const char *s);
void settings_timespan_text(char *out, size_t n, long long ms);

/* The first child of n nobody read, refused (takes: what the section takes, for the message); 0 when none. */
int settings_unread(const struct settings_node *n, const char *takes, struct err_msg *em);
/*
 * The final check, once every consumer has read: the first node under root that nobody read, in
 * the order put, refused as "PATH (WHERE): unknown setting; did you mean NAME?" (the suggestion when
 * a name asked for beside it is a few edits away). DP_EINVAL, or 0 when every node was read.
 */
int settings_check_unread(const struct settings_node *root, struct err_msg *em);
/*
 * A setting no consumer knows, refused with code as settings_check_unread refuses one: n's full path
 * and source, and the name it most likely misspells at the first level of its path nobody asked for.
 */
int settings_refuse_unknown(int code, const struct settings_node *n, struct err_msg *em);
/* The child of n whose name is nearest name, when close enough to be its misspelling (a name asked for that is absent). */
const struct settings_node *settings_nearest_child(const struct settings_node *n, const char *name);
/* The name asked for under n's parent nearest to n's name, when it is close enough to be a misspelling; else NULL. */
const char *settings_suggest(const struct settings_node *n);

#endif
