/*
 * dynlib.c - loading an optional library at run time (dynlib.h): dlopen of
 * the first soname that opens, dlsym of every name in the table, all or
 * nothing, once per process.
 */
#include "dynlib.h"

#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>

/* pthread_once calls a function without arguments: the library being loaded is passed beside it. */
static __thread struct dynlib *loading;

static void load(void)
{
	struct dynlib *lib = loading;
	int flags = RTLD_NOW | RTLD_LOCAL | (lib->noload ? RTLD_NOLOAD : 0);
	const char *why = NULL, *tried = NULL;
	void *h = NULL, *addr[64];

	if (lib->n_syms > sizeof(addr) / sizeof(addr[0]))
		DP_FATAL("dynlib: %s has more than %zu symbols", lib->what, sizeof(addr) / sizeof(addr[0]));
	/*
	 * A static executable has no program interpreter (AT_BASE 0). glibc's dlopen there maps the
	 * library and its own libc beside ours and crashes in it (the static image's webhook died
	 * with SIGSEGV, printing nothing): refuse in one sentence instead.
	 */
	if (getauxval(AT_BASE) == 0) {
		lib->rc = DP_ENOLIB;
		snprintf(lib->error, sizeof(lib->error),
			 "%s cannot be loaded: this diagport is linked statically (the agent's image); this command "
			 "needs the dynamically linked build (make), or for the webhook the diagport-webhook image (docs/image.md)",
			 lib->what);
		return;
	}
	for (size_t i = 0; h == NULL && lib->sonames[i]; i++) {
		tried = lib->sonames[i];
		if ((h = dlopen(tried, flags)) == NULL)
			why = dlerror();
	}
	if (h == NULL) {
		lib->rc = DP_ENOLIB;
		snprintf(lib->error, sizeof(lib->error), "%s is not installed (%s: %s)", lib->what, tried ? tried : "",
			 lib->noload ? "not loaded" : why ? why : "dlopen failed");
		return;
	}
	for (size_t i = 0; i < lib->n_syms; i++) {
		addr[i] = dlsym(h, lib->syms[i].name);
		if (addr[i] == NULL && !lib->syms[i].optional) {
			lib->rc = DP_ENOLIB;
			snprintf(lib->error, sizeof(lib->error), "the %s found (%s) lacks %s", lib->what, tried,
				 lib->syms[i].name);
			return; /* the handle stays open: dlclose of a half-used library buys nothing */
		}
	}
	/* POSIX guarantees that a data pointer from dlsym converts to a function pointer */
	for (size_t i = 0; i < lib->n_syms; i++) {
		/* slot is where a function pointer goes: one pointer's bytes are what is meant */
		// cppcheck-suppress pointerSize
		memcpy(lib->syms[i].slot, &addr[i], sizeof(void *));
	}
}

int dynlib_load(struct dynlib *lib, struct err_msg *em)
{
	loading = lib;
	pthread_once(&lib->once, load);
	loading = NULL;
	return lib->rc ? err_set(em, lib->rc, "%s", lib->error) : 0;
}
