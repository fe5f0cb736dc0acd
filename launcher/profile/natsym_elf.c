/*
 * natsym_elf.c - the ELF reader behind natsym.c (natsym.h's natsym_elf_*).
 *
 * An ELF object is read once, through a read_at callback: the header, the
 * program headers (a file offset becomes an address through the PT_LOAD
 * segment that holds it), the section headers, then .symtab if the file has
 * one, else .dynsym, keeping function symbols sorted by address (a symbol of
 * size 0 reaches to the next), with the build id and .gnu_debuglink that
 * name its debug file. Only little-endian 64-bit ELF is read; every offset
 * and count is checked against the file's size and a cap first (the bytes
 * are the app's: fuzzed by tests/fuzz/fuzz_natsym.c).
 */
#include "natsym_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define MAX_SECTIONS 4096
#define MAX_SYMS 4000000

struct rd {
	int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf);
	void *ctx;
	uint64_t size;
};

static uint16_t u16(const uint8_t *p)
{
	return (uint16_t)(p[0] | p[1] << 8);
}

static uint32_t u32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t u64(const uint8_t *p)
{
	return (uint64_t)u32(p) | (uint64_t)u32(p + 4) << 32;
}

/* len bytes at off, new, or NULL when outside the file or over max. */
static uint8_t *read_part(const struct rd *r, uint64_t off, uint64_t len, uint64_t max)
{
	uint8_t *b;

	if (len == 0 || len > max || off > r->size || len > r->size - off)
		return NULL;
	b = mem_alloc((size_t)len + 1);
	if (r->read_at(r->ctx, off, (size_t)len, b) != 0) {
		free(b);
		return NULL;
	}
	b[len] = 0;
	return b;
}

static int by_start(const void *a, const void *b)
{
	const struct esym *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

/* Function symbols of table sym (entsize 24) naming into str. */
static void take_syms(struct natsym_elf *e, const uint8_t *sym, uint64_t len, size_t strlen_)
{
	size_t n = (size_t)(len / 24), k = 0;

	if (n > MAX_SYMS)
		n = MAX_SYMS;
	free(e->syms); /* a full table with no function in it, then the dynamic one */
	e->syms = mem_array(n ? n : 1, sizeof(*e->syms));
	for (size_t i = 0; i < n; i++) {
		const uint8_t *s = sym + i * 24;
		unsigned type = s[4] & 0xf;
		uint32_t name = u32(s);
		uint64_t value = u64(s + 8);

		if ((type != 2 && type != 10) || u16(s + 6) == 0 || value == 0 || name == 0 || name >= strlen_)
			continue; /* not a defined function (STT_FUNC, STT_GNU_IFUNC) */
		e->syms[k++] = (struct esym){ value, u64(s + 16), name };
	}
	mem_sort(e->syms, k, sizeof(*e->syms), by_start);
	for (size_t i = 0; i < k; i++)
		if (e->syms[i].size == 0 && i + 1 < k)
			e->syms[i].size = e->syms[i + 1].start - e->syms[i].start;
	e->n_syms = k;
	e->syms = mem_realloc(e->syms, (k ? k : 1) * sizeof(*e->syms)); /* only what was kept stays */
}

static void take_note(struct natsym_elf *e, const uint8_t *p, uint64_t len)
{
	while (len >= 12) {
		uint32_t nsz = u32(p), dsz = u32(p + 4), type = u32(p + 8);
		uint64_t nal = ((uint64_t)nsz + 3) & ~3ull, dal = ((uint64_t)dsz + 3) & ~3ull;

		if (12 + nal + dal > len)
			return;
		if (type == 3 && nsz == 4 && memcmp(p + 12, "GNU", 4) == 0 && dsz <= sizeof(e->build_id)) {
			memcpy(e->build_id, p + 12 + nal, dsz);
			e->build_id_len = dsz;
			return;
		}
		p += 12 + nal + dal;
		len -= 12 + nal + dal;
	}
}

struct natsym_elf *natsym_elf_read(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf), void *ctx,
				   uint64_t size)
{
	uint64_t budget = ELF_BUDGET;

	return natsym_elf_read_budget(read_at, ctx, size, &budget);
}

struct natsym_elf *natsym_elf_read_budget(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf),
					  void *ctx, uint64_t size, uint64_t *budget)
{
	struct rd r = { read_at, ctx, size };
	uint8_t *h = read_part(&r, 0, 64, 64), *ph = NULL, *sh = NULL, *names = NULL;
	struct natsym_elf *e = NULL;
	uint64_t phoff, shoff, names_len = 0;
	unsigned phnum, shnum, shstrndx;
	int sym_i = -1, dyn_i = -1;

	if (h == NULL || memcmp(h, "\177ELF", 4) != 0 || h[4] != 2 || h[5] != 1)
		goto out; /* not ELF, or not little-endian 64-bit */
	e = mem_zalloc(sizeof(*e));
	phoff = u64(h + 32);
	shoff = u64(h + 40);
	phnum = u16(h + 56);
	shnum = u16(h + 60);
	shstrndx = u16(h + 62);
	if (u16(h + 54) == 56 && phnum && (ph = read_part(&r, phoff, (uint64_t)phnum * 56, (uint64_t)56 * 65535)) != NULL)
		for (unsigned i = 0; i < phnum && e->n_load < MAX_LOADS; i++) {
			const uint8_t *p = ph + (size_t)i * 56;

			if (u32(p) == 1) /* PT_LOAD */
				e->load[e->n_load].off = u64(p + 8), e->load[e->n_load].vaddr = u64(p + 16),
				e->load[e->n_load++].filesz = u64(p + 32);
		}
	if (u16(h + 58) != 64 || shnum == 0 || shnum > MAX_SECTIONS || shstrndx >= shnum ||
	    (sh = read_part(&r, shoff, (uint64_t)shnum * 64, (uint64_t)64 * MAX_SECTIONS)) == NULL)
		goto out;
	names_len = u64(sh + (size_t)shstrndx * 64 + 32);
	names = read_part(&r, u64(sh + (size_t)shstrndx * 64 + 24), names_len, 1 << 20);
	for (unsigned i = 0; i < shnum; i++) {
		const uint8_t *s = sh + (size_t)i * 64;
		uint32_t type = u32(s + 4), name = u32(s);
		const char *nm = names && name < names_len ? (const char *)names + name : "";

		if (type == 2) /* SHT_SYMTAB */
			sym_i = (int)i;
		else if (type == 11) /* SHT_DYNSYM */
			dyn_i = (int)i;
		else if (type == 7 && strcmp(nm, ".note.gnu.build-id") == 0) {
			uint8_t *n = read_part(&r, u64(s + 24), u64(s + 32), 4096);

			if (n)
				take_note(e, n, u64(s + 32));
			free(n);
		} else if (strcmp(nm, ".gnu_debuglink") == 0 && type != 8) {
			uint8_t *n = read_part(&r, u64(s + 24), u64(s + 32), 4096);

			if (n && memchr(n, 0, (size_t)u64(s + 32)) && strlen((char *)n) < sizeof(e->debuglink) &&
			    strchr((char *)n, '/') == NULL)
				snprintf(e->debuglink, sizeof(e->debuglink), "%s", (char *)n);
			free(n);
		}
	}
	for (int pass = 0; pass < 2 && e->n_syms == 0; pass++) {
		int i = pass == 0 ? sym_i : dyn_i;
		const uint8_t *s, *l;
		uint8_t *tab, *str;
		uint32_t link;

		if (i < 0)
			continue;
		s = sh + (size_t)i * 64;
		link = u32(s + 40);
		if (link >= shnum || u32(s + 4 + 0) == 8)
			continue;
		l = sh + (size_t)link * 64;
		if (u32(l + 4) == 8) /* SHT_NOBITS: a table stripped away */
			continue;
		if (u64(s + 32) > *budget || u64(l + 32) > *budget - u64(s + 32)) {
			e->over_budget = true; /* the tables do not fit in what the profile may still hold */
			continue;
		}
		tab = read_part(&r, u64(s + 24), u64(s + 32), *budget);
		str = read_part(&r, u64(l + 24), u64(l + 32), *budget);
		if (tab && str) {
			free(e->strtab);
			e->strtab = (char *)str;
			e->strtab_len = (size_t)u64(l + 32);
			str = NULL;
			take_syms(e, tab, u64(s + 32), e->strtab_len);
			e->symtab = pass == 0;
			*budget -= e->strtab_len + e->n_syms * sizeof(*e->syms);
		}
		free(tab);
		free(str);
	}
out:
	free(h);
	free(ph);
	free(sh);
	free(names);
	return e;
}

/* How many of n elements (stride bytes apart, each starting with its uint64_t key, sorted by it) have key <= x. */
size_t natsym_count_le(const void *base, size_t n, size_t stride, uint64_t x)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		uint64_t k;

		memcpy(&k, (const char *)base + mid * stride, sizeof(k));
		if (k <= x)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* The address of file offset foff, through the PT_LOAD that holds it; false when none does. */
bool natsym_elf_vaddr(const struct natsym_elf *e, uint64_t foff, uint64_t *va)
{
	for (size_t i = 0; i < e->n_load; i++)
		if (foff >= e->load[i].off && foff - e->load[i].off < e->load[i].filesz) {
			*va = foff - e->load[i].off + e->load[i].vaddr;
			return true;
		}
	return false;
}

/* The symbol of a (from syms) holding va, or NULL. */
const struct esym *natsym_sym_at(const struct natsym_elf *syms, uint64_t va)
{
	size_t lo = natsym_count_le(syms->syms, syms->n_syms, sizeof(*syms->syms), va);

	if (lo == 0)
		return NULL;
	lo--;
	return va - syms->syms[lo].start < syms->syms[lo].size ? &syms->syms[lo] : NULL;
}

bool natsym_elf_find(const struct natsym_elf *e, uint64_t foff, char *name, size_t max, uint64_t *from)
{
	const struct esym *s;
	uint64_t va;

	if (e == NULL || !natsym_elf_vaddr(e, foff, &va) || (s = natsym_sym_at(e, va)) == NULL)
		return false;
	snprintf(name, max, "%.*s", (int)strnlen(e->strtab + s->name, e->strtab_len - s->name),
		 e->strtab + s->name);
	*from = va - s->start;
	return true;
}

void natsym_elf_free(struct natsym_elf *e)
{
	if (e == NULL)
		return;
	free(e->syms);
	free(e->strtab);
	free(e);
}

