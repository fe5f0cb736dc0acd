/*
 * natsym.h - naming the addresses of a perf profile that managed-code
 * events do not: native code from the ELF symbol tables of the libraries the
 * process has mapped (or their separate debug files), read through
 * /proc/PID/root, so in the process's own filesystem; JIT-compiled code and
 * the runtime's stubs from its perf map (/tmp/perf-NSPID.map, NSPID being
 * the pid the process sees); kernel code from /proc/kallsyms. An address no
 * source names says why.
 */
#ifndef DP_NATSYM_H
#define DP_NATSYM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct natsym;

/* What an address is. Strings borrowed from the natsym. */
struct natsym_frame {
	const char *file; /* basename of the object ("libc.so.6"), "[kernel]", or "[jit]" for anonymous code */
	const char *dso;  /* its path as the process sees it, "[kernel.kallsyms]", or the perf map's path */
	const char *sym;  /* the symbol, or NULL when unnamed */
	uint64_t off;     /* from the symbol's start when named, else the address */
	const char *why;  /* when unnamed: "stripped", "unreadable", "no perf map entry", "kallsyms unreadable", ... */
	bool managed_region; /* not an ELF file: JIT memory or a ReadyToRun image, where managed names apply */
};

/*
 * Read pid's memory map (in the agent's pid namespace; nspid as the process
 * sees itself, for its perf map's name) and, when kernel, /proc/kallsyms.
 * ELF files are read when first needed. Never fails: what cannot be read
 * leaves its addresses unnamed, with the reason.
 */
struct natsym *natsym_new(uint64_t pid, uint64_t nspid, bool kernel);
/* Read the perf map again (after the samples, so that it holds code compiled during them). */
void natsym_load_perfmap(struct natsym *ns);
/* Entries the perf map held when read. */
size_t natsym_perfmap_entries(const struct natsym *ns);
/* Name ip (for a return address, pass ip - 1). */
void natsym_lookup(struct natsym *ns, uint64_t ip, struct natsym_frame *out);
void natsym_free(struct natsym *ns); /* accepts NULL */

/*
 * The ELF reader on its own (natsym_elf.c), for the fuzzer and the tests: the symbols of an
 * ELF image read through read_at (len bytes at off into buf: 0, or -1),
 * size the file's length. The function symbol covering file offset foff,
 * into name (at most max bytes), with its start's offset in *from: true when
 * found.
 */
struct natsym_elf;
struct natsym_elf *natsym_elf_read(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf), void *ctx,
				   uint64_t size);
bool natsym_elf_find(const struct natsym_elf *e, uint64_t foff, char *name, size_t max, uint64_t *from);
void natsym_elf_free(struct natsym_elf *e); /* accepts NULL */

#endif
