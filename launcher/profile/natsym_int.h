/*
 * natsym_int.h - the ELF reader's symbols as natsym.c (a process's view:
 * its maps, objects, perf map, kallsyms) uses them; natsym_elf.c reads them.
 */
#ifndef DP_NATSYM_INT_H
#define DP_NATSYM_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "natsym.h"

#define ELF_BUDGET ((uint64_t)16 << 20) /* the symbol and string tables of every object of a profile, together */
#define MAX_LOADS 32

struct esym {
	uint64_t start, size;
	uint32_t name;
};

struct natsym_elf {
	struct {
		uint64_t off, vaddr, filesz;
	} load[MAX_LOADS];
	size_t n_load;
	struct esym *syms;
	size_t n_syms;
	char *strtab;
	size_t strtab_len;
	uint8_t build_id[64];
	size_t build_id_len;
	char debuglink[256];
	bool symtab; /* the full table, not only the dynamic one */
	bool over_budget; /* a table left unread: the profile's symbol budget was spent */
};

/*
 * natsym_elf_read with a memory budget: the tables are read only while they
 * fit in *budget, and what is kept (names, symbols) is taken from it. New, or NULL.
 */
struct natsym_elf *natsym_elf_read_budget(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf),
					  void *ctx, uint64_t size, uint64_t *budget);
/* How many of n elements (stride bytes apart, each starting with its uint64_t key, sorted by it) have key <= x. */
size_t natsym_count_le(const void *base, size_t n, size_t stride, uint64_t x);
/* The address of file offset foff, through the PT_LOAD that holds it; false when none does. */
bool natsym_elf_vaddr(const struct natsym_elf *e, uint64_t foff, uint64_t *va);
/* The symbol of syms holding va (borrowed), or NULL. */
const struct esym *natsym_sym_at(const struct natsym_elf *syms, uint64_t va);

#endif
