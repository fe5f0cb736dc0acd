/*
 * errors.h - the one error convention of diagport.
 *
 * Functions return int: 0 on success, one of the negative DP_E* codes below on
 * failure. Where a caller needs to tell a person what went wrong and where, the
 * function also takes a `struct err_msg *` (may be NULL) and fills it on
 * failure with a complete sentence that names the file, line, object and field.
 * Output parameters are set only on success.
 */
#ifndef DP_ERRORS_H
#define DP_ERRORS_H

#include <stddef.h>

enum dp_err {
	DP_OK = 0,
	DP_EINVAL = -1,       /* bad arguments or options (a usage error) */
	DP_ESYNTAX = -2,      /* input is not well-formed JSON/YAML, or not the document kind asked for */
	DP_ETOOBIG = -3,      /* input over a size, depth or count cap */
	DP_EIO = -4,          /* reading or writing a file or stream failed */
	DP_EREFUSED = -5,     /* the rules refuse the input: a collision, a valueFrom, what ECS forbids */
	DP_EUNSUPPORTED = -6, /* well-formed input that diagport cannot rewrite without mangling it */
	DP_ENOTFOUND = -7,    /* a looked-up thing is absent */
	DP_EINTERNAL = -8,    /* a bug: never expected */
	DP_ECANCELED = -9,    /* stopped at someone's request (an operation cancelled) */
	DP_EAUTH = -10,       /* a remote API refused our credentials (HTTP 401 or 403) */
	DP_EREMOTE = -11,     /* a remote API answered with an error, or with something we cannot use */
	DP_ECRYPTO = -12,     /* the crypto library failed (key or certificate generation) */
	DP_ENOLIB = -13,      /* an optional library loaded at run time is missing, or lacks a function (dynlib.h) */
	DP_ETIMEDOUT = -14,   /* a wait ended before what it waited for */
};

/* Static text for a DP_E* code ("syntax error", ...). Never NULL. */
const char *err_str(int code);

/* A message for a person, filled by the function that fails. */
struct err_msg {
	char text[1024];
};

/* Format into e->text (truncating safely); does nothing when e is NULL.
 * Returns code, so that `return err_set(em, DP_EREFUSED, "...")` reads well. */
int err_set(struct err_msg *e, int code, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Prefix e->text with "PREFIX: " (keeping the old text). Does nothing when e is NULL. */
void err_prefix(struct err_msg *e, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Report a broken invariant with file and line, then abort. Never returns. */
#define DP_FATAL(...) err_fatal(__FILE__, __LINE__, __VA_ARGS__)
void err_fatal(const char *file, int line, const char *fmt, ...)
	__attribute__((noreturn, format(printf, 3, 4)));

#endif
