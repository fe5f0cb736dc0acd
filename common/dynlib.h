/*
 * dynlib.h - optional libraries loaded at run time, the one way diagport
 * does it.
 *
 * libcurl (hclient.c), libmicrohttpd (webhook/server.c) and GnuTLS
 * (webhook/certgen.c) are loaded with dlopen when first needed instead of
 * linked: the agent, which is the same binary, runs in every pod and must
 * not carry their resident memory (docs/ARCHITECTURE.md, "Choices that
 * differ from the usual library"). A user fills a table of symbol names and the function
 * pointers they go into; dynlib_load opens the library once per process,
 * resolves every symbol, and reports a missing library or function in one
 * sentence with one code, DP_ENOLIB.
 */
#ifndef DP_DYNLIB_H
#define DP_DYNLIB_H

#include <pthread.h>
#include <stdbool.h>
#include <stddef.h>

#include "errors.h"

/* One function of the library: its exported name and where its address goes (a function pointer's address). */
struct dynlib_sym {
	const char *name;
	void *slot;
	bool optional; /* a missing one leaves the slot NULL instead of failing the load */
};
#define DYNLIB_SYM(fn, ptr) { #fn, &(ptr), false }
#define DYNLIB_OPTIONAL(fn, ptr) { #fn, &(ptr), true }

/*
 * A library: the names to try in order (NULL-terminated), what to call it
 * in messages, and its table. Define one statically with DYNLIB_INIT; the
 * rest is dynlib.c's.
 */
struct dynlib {
	const char *what;                 /* "libcurl" */
	const char *const *sonames;       /* { "libcurl-gnutls.so.4", "libcurl.so.4", NULL } */
	const struct dynlib_sym *syms;
	size_t n_syms;
	bool noload;                      /* only if already mapped by another library (RTLD_NOLOAD) */
	pthread_once_t once;
	int rc;
	char error[256];
};
#define DYNLIB_INIT(what_, sonames_, syms_)                                                                        \
	{ .what = (what_), .sonames = (sonames_), .syms = (syms_),                                                 \
	  .n_syms = sizeof(syms_) / sizeof((syms_)[0]), .once = PTHREAD_ONCE_INIT }

/*
 * Load lib (once per process; later calls give the first call's result) and
 * fill every slot. 0, or DP_ENOLIB with em saying which library or function
 * is missing ("libcurl is not installed (libcurl.so.4: cannot open ...)";
 * "the libmicrohttpd found (libmicrohttpd.so.12) lacks MHD_quiesce_daemon").
 * When it fails, no slot is filled.
 */
int dynlib_load(struct dynlib *lib, struct err_msg *em);

#endif
