/*
 * errors.c - text for error codes, and the message helpers of errors.h.
 */
#include "errors.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *err_str(int code)
{
	switch (code) {
	case DP_OK: return "success";
	case DP_EINVAL: return "invalid arguments";
	case DP_ESYNTAX: return "syntax error";
	case DP_ETOOBIG: return "input too large";
	case DP_EIO: return "input/output error";
	case DP_EREFUSED: return "refused by the injection rules";
	case DP_EUNSUPPORTED: return "unsupported input";
	case DP_ENOTFOUND: return "not found";
	case DP_EINTERNAL: return "internal error";
	case DP_ECANCELED: return "cancelled";
	case DP_EAUTH: return "not authenticated or not authorized";
	case DP_EREMOTE: return "the remote API answered with an error";
	case DP_ECRYPTO: return "cryptographic failure";
	case DP_ENOLIB: return "a library is not installed";
	case DP_ETIMEDOUT: return "timed out";
	}
	return "unknown error";
}

int err_set(struct err_msg *e, int code, const char *fmt, ...)
{
	va_list ap;

	if (e == NULL)
		return code;
	va_start(ap, fmt);
	vsnprintf(e->text, sizeof(e->text), fmt, ap);
	va_end(ap);
	return code;
}

void err_prefix(struct err_msg *e, const char *fmt, ...)
{
	char head[512];
	size_t hl, ol;
	va_list ap;

	if (e == NULL)
		return;
	va_start(ap, fmt);
	vsnprintf(head, sizeof(head), fmt, ap);
	va_end(ap);
	hl = strlen(head);
	if (hl + 2 >= sizeof(e->text))
		hl = sizeof(e->text) - 3;
	ol = strnlen(e->text, sizeof(e->text) - 1);
	if (hl + 2 + ol >= sizeof(e->text))
		ol = sizeof(e->text) - 1 - hl - 2;
	memmove(e->text + hl + 2, e->text, ol);
	memcpy(e->text, head, hl);
	e->text[hl] = ':';
	e->text[hl + 1] = ' ';
	e->text[hl + 2 + ol] = '\0';
}

void err_fatal(const char *file, int line, const char *fmt, ...)
{
	va_list ap;

	fprintf(stderr, "diagport: fatal: %s:%d: ", file, line);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	abort();
}
