/*
 * natsym.c - naming native, JIT and kernel addresses of a perf profile
 * (natsym.h).
 *
 * The memory map (/proc/PID/maps, executable mappings only) says which
 * object an address is in and at which file offset. An ELF object is read
 * once, by pread through /proc/PID/root (the process's own filesystem):
 * the header, the program headers (a file offset becomes an address through
 * the PT_LOAD segment that holds it), the section headers, then .symtab if
 * the file has one, else .dynsym, keeping function symbols sorted by
 * address (a symbol of size 0 reaches to the next). A file without .symtab
 * is looked up by its build id (/usr/lib/debug/.build-id/NN/REST.debug) and
 * its .gnu_debuglink (next to it, in .debug/ beside it, under
 * /usr/lib/debug), first in the process's filesystem then in the agent's,
 * as gdb and perf look; a debug file's symbols apply to the file's
 * addresses. Only little-endian 64-bit ELF is read; every offset and count
 * is checked against the file's size and a cap first (the bytes are the
 * app's: fuzzed by tests/fuzz/fuzz_natsym.c).
 *
 * Code in anonymous memory or in the runtime's W^X double mapping
 * (/memfd:doublemapper) is JIT code: the runtime's perf map names it
 * ("START SIZE NAME" lines in hex, later lines winning). Kernel addresses
 * come from /proc/kallsyms (text symbols), unless kptr_restrict shows zeros.
 */
#include "natsym.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/openat2.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "mem.h"

#define MAX_MAPS 65536
#define MAX_OBJS 1024
#define MAX_SECTIONS 4096
#define ELF_BUDGET ((uint64_t)16 << 20) /* the symbol and string tables of every object of a profile, together */
#define MAX_SYMS 4000000
#define MAX_PERFMAP ((uint64_t)16 << 20)
#define MAX_PERFMAP_ENTRIES 500000
#define MAX_KSYMS 2000000
#define MAX_LOADS 32

/* ---- ELF ---- */

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

/*
 * natsym_elf_read with a memory budget: the tables are read only while they
 * fit in *budget, and what is kept (names, symbols) is taken from it.
 */
static struct natsym_elf *elf_read_budget(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf),
					  void *ctx, uint64_t size, uint64_t *budget);

struct natsym_elf *natsym_elf_read(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf), void *ctx,
				   uint64_t size)
{
	uint64_t budget = ELF_BUDGET;

	return elf_read_budget(read_at, ctx, size, &budget);
}

static struct natsym_elf *elf_read_budget(int (*read_at)(void *ctx, uint64_t off, size_t len, void *buf),
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
static size_t count_le(const void *base, size_t n, size_t stride, uint64_t x)
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
static bool elf_vaddr(const struct natsym_elf *e, uint64_t foff, uint64_t *va)
{
	for (size_t i = 0; i < e->n_load; i++)
		if (foff >= e->load[i].off && foff - e->load[i].off < e->load[i].filesz) {
			*va = foff - e->load[i].off + e->load[i].vaddr;
			return true;
		}
	return false;
}

/* The symbol of a (from syms) holding va, or NULL. */
static const struct esym *sym_at(const struct natsym_elf *syms, uint64_t va)
{
	size_t lo = count_le(syms->syms, syms->n_syms, sizeof(*syms->syms), va);

	if (lo == 0)
		return NULL;
	lo--;
	return va - syms->syms[lo].start < syms->syms[lo].size ? &syms->syms[lo] : NULL;
}

bool natsym_elf_find(const struct natsym_elf *e, uint64_t foff, char *name, size_t max, uint64_t *from)
{
	const struct esym *s;
	uint64_t va;

	if (e == NULL || !elf_vaddr(e, foff, &va) || (s = sym_at(e, va)) == NULL)
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

/* ---- objects, maps, the perf map, kallsyms ---- */

struct obj {
	char *path, *file;
	bool read;
	struct natsym_elf *elf;   /* addresses */
	struct natsym_elf *names; /* symbols: elf itself, or its debug file's */
	const char *why;          /* when unnamed */
};

struct map {
	uint64_t start, end, off;
	struct obj *obj; /* NULL: anonymous or the runtime's double mapping: JIT code */
	const char *special; /* "[vdso]", "[vsyscall]", ... or NULL */
};

struct pm_entry {
	uint64_t start, size;
	size_t order;
	char *name;
};

struct ksym {
	uint64_t addr;
	char *name;
};

struct natsym {
	uint64_t pid, nspid;
	int root_fd; /* /proc/PID/root, O_PATH: the app's filesystem */
	uint64_t budget; /* bytes the objects' tables may still take (ELF_BUDGET at first) */
	struct map *maps;
	size_t n_maps;
	struct obj *objs[MAX_OBJS];
	size_t n_objs;
	struct pm_entry *pm;
	size_t n_pm;
	char pm_path[64];
	struct ksym *ks;
	size_t n_ks;
	bool kernel, ks_hidden;
	char scratch[1024];
};

static int fd_read_at(void *ctx, uint64_t off, size_t len, void *buf)
{
	int fd = *(int *)ctx;

	while (len > 0) {
		ssize_t n = pread(fd, buf, len, (off_t)off);

		if (n <= 0)
			return -1;
		buf = (char *)buf + n;
		off += (uint64_t)n;
		len -= (size_t)n;
	}
	return 0;
}

/*
 * Open path, a regular file, to read: inside the app's root (root_fd, an
 * O_PATH descriptor of /proc/PID/root) with every symlink resolved in that
 * root (openat2 RESOLVE_IN_ROOT: a link the app made cannot reach the
 * agent's files), or in the agent's own (root_fd -1). It is looked at
 * through an O_PATH descriptor first and opened only when it is a regular
 * file (through that descriptor, so it cannot be swapped meanwhile): a FIFO
 * or a device is never opened. The descriptor, or -1.
 */
static int open_in(int root_fd, const char *path)
{
	struct open_how how = { .flags = O_PATH | O_CLOEXEC, .resolve = RESOLVE_IN_ROOT | RESOLVE_NO_MAGICLINKS };
	struct stat st;
	char self[48];
	int pfd, fd = -1;

	if (root_fd >= 0)
		pfd = (int)syscall(SYS_openat2, root_fd, path[0] == '/' ? path + 1 : path, &how, sizeof(how));
	else
		pfd = open(path, O_PATH | O_CLOEXEC);
	if (pfd < 0)
		return -1;
	if (fstat(pfd, &st) == 0 && S_ISREG(st.st_mode)) {
		snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
		fd = open(self, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
	}
	close(pfd);
	return fd;
}

/* Read the ELF file at path in root_fd (open_in) within *budget; NULL with *why when it cannot be. */
static struct natsym_elf *elf_open(int root_fd, const char *path, uint64_t *budget, const char **why)
{
	int fd = open_in(root_fd, path);
	struct stat st;
	struct natsym_elf *e = NULL;

	if (fd < 0) {
		*why = "unreadable";
		return NULL;
	}
	if (fstat(fd, &st) == 0)
		e = elf_read_budget(fd_read_at, &fd, (uint64_t)st.st_size, budget);
	close(fd);
	*why = e ? NULL : "not ELF";
	return e;
}

/* The debug file of o (build id, then debuglink), in the process's root then the agent's: its symbols, or NULL. */
static struct natsym_elf *debug_file(struct natsym *ns, const struct obj *o)
{
	const int roots[2] = { ns->root_fd, -1 };
	char dir[512];
	const char *slash = strrchr(o->path, '/');

	snprintf(dir, sizeof(dir), "%.*s", slash ? (int)(slash - o->path) : 0, o->path);
	for (int r = 0; r < 2; r++) {
		char cand[4][1200];
		int n = 0;

		if (o->elf->build_id_len >= 2) {
			int at = snprintf(cand[n], sizeof(cand[n]), "/usr/lib/debug/.build-id/%02x/", o->elf->build_id[0]);

			for (size_t i = 1; i < o->elf->build_id_len && at < (int)sizeof(cand[n]) - 8; i++)
				at += snprintf(cand[n] + at, sizeof(cand[n]) - (size_t)at, "%02x", o->elf->build_id[i]);
			snprintf(cand[n] + at, sizeof(cand[n]) - (size_t)at, ".debug");
			n++;
		}
		if (o->elf->debuglink[0] && r == 0) { /* next to the library: in the app's root only */
			snprintf(cand[n++], sizeof(cand[0]), "%s/%s", dir, o->elf->debuglink);
			snprintf(cand[n++], sizeof(cand[0]), "%s/.debug/%s", dir, o->elf->debuglink);
		}
		if (o->elf->debuglink[0]) /* in the agent's root: only under /usr/lib/debug */
			snprintf(cand[n++], sizeof(cand[0]), "/usr/lib/debug%s/%s", dir, o->elf->debuglink);
		for (int i = 0; i < n; i++) {
			const char *why;
			struct natsym_elf *d;

			if (r == 0 && strcmp(cand[i], o->path) == 0)
				continue; /* the debuglink names the file itself */
			if ((d = elf_open(roots[r], cand[i], &ns->budget, &why)) != NULL && d->symtab && d->n_syms &&
			    (o->elf->build_id_len == 0 || (d->build_id_len == o->elf->build_id_len &&
							   memcmp(d->build_id, o->elf->build_id, d->build_id_len) == 0)))
				return d; /* a debug file of another build (a stale .debug) would name wrong */
			natsym_elf_free(d);
		}
	}
	return NULL;
}

static void obj_read(struct natsym *ns, struct obj *o)
{
	o->read = true;
	if ((o->elf = elf_open(ns->root_fd, o->path, &ns->budget, &o->why)) == NULL)
		return;
	o->names = o->elf;
	if (!o->elf->symtab) {
		struct natsym_elf *d = debug_file(ns, o);

		if (d)
			o->names = d;
	}
	if (o->names->n_syms == 0 || !o->names->symtab)
		o->why = o->elf->over_budget || o->names->over_budget ? "over the symbol budget" : "stripped";
}

static struct obj *obj_get(struct natsym *ns, const char *path)
{
	struct obj *o;
	const char *slash;

	for (size_t i = 0; i < ns->n_objs; i++)
		if (strcmp(ns->objs[i]->path, path) == 0)
			return ns->objs[i];
	if (ns->n_objs == MAX_OBJS)
		return NULL;
	o = mem_zalloc(sizeof(*o));
	o->path = mem_strdup(path);
	slash = strrchr(path, '/');
	o->file = mem_strdup(slash ? slash + 1 : path);
	ns->objs[ns->n_objs++] = o;
	return o;
}

/* The hex number at *p, then past it and the blanks after; false when there is none. */
static bool hex_field(char **p, unsigned long long *v)
{
	char *end;

	errno = 0;
	*v = strtoull(*p, &end, 16);
	if (end == *p || errno)
		return false;
	*p = end + strspn(end, " \t");
	return true;
}

/* Past the next field and the blanks after. */
static char *skip_field(char *p)
{
	p += strcspn(p, " \t\n");
	return p + strspn(p, " \t");
}

static int by_map(const void *a, const void *b)
{
	const struct map *x = a, *y = b;

	return x->start < y->start ? -1 : x->start > y->start;
}

static void read_maps(struct natsym *ns)
{
	char path[64], line[4200];
	FILE *f;
	size_t cap = 0;

	snprintf(path, sizeof(path), "/proc/%llu/maps", (unsigned long long)ns->pid);
	if ((f = fopen(path, "re")) == NULL)
		return;
	while (fgets(line, sizeof(line), f) && ns->n_maps < MAX_MAPS) {
		unsigned long long s, e, off;
		char *q = line, *perms, *name;
		struct map m;

		if (!hex_field(&q, &s) || *q != '-' || (q++, !hex_field(&q, &e)))
			continue;
		perms = q;
		q = skip_field(q);
		if (strlen(perms) < 4 || perms[2] != 'x' || !hex_field(&q, &off))
			continue;
		name = skip_field(skip_field(q)); /* past dev and inode */
		name[strcspn(name, "\n")] = 0;
		m = (struct map){ s, e, off, NULL, NULL };
		if (name[0] == '[')
			m.special = strncmp(name, "[anon", 5) == 0 ? NULL : (strcmp(name, "[vdso]") == 0 ? "[vdso]" : "[special]");
		else if (name[0] == '/' && strncmp(name, "/memfd:", 7) != 0 &&
			 (strlen(name) < 10 || strcmp(name + strlen(name) - 10, " (deleted)") != 0))
			m.obj = obj_get(ns, name);
		else if (name[0] == '/' && strncmp(name, "/memfd:", 7) != 0)
			m.special = "[deleted]";
		if (ns->n_maps == cap) {
			cap = cap ? cap * 2 : 256;
			ns->maps = mem_realloc(ns->maps, cap * sizeof(*ns->maps));
		}
		ns->maps[ns->n_maps++] = m;
	}
	fclose(f);
	mem_sort(ns->maps, ns->n_maps, sizeof(*ns->maps), by_map);
}

static int by_pm(const void *a, const void *b)
{
	const struct pm_entry *x = a, *y = b;

	if (x->start != y->start)
		return x->start < y->start ? -1 : 1;
	return x->order < y->order ? -1 : x->order > y->order;
}

static void pm_clear(struct natsym *ns)
{
	for (size_t i = 0; i < ns->n_pm; i++)
		free(ns->pm[i].name);
	free(ns->pm);
	ns->pm = NULL;
	ns->n_pm = 0;
}

void natsym_load_perfmap(struct natsym *ns)
{
	char path[128], line[4200];
	FILE *f;
	size_t cap = 0;
	uint64_t bytes = 0;
	int fd;

	pm_clear(ns);
	snprintf(path, sizeof(path), "/tmp/perf-%llu.map", (unsigned long long)ns->nspid);
	if ((fd = open_in(ns->root_fd, path)) < 0)
		return;
	if ((f = fdopen(fd, "r")) == NULL) {
		close(fd);
		return;
	}
	while (fgets(line, sizeof(line), f) && ns->n_pm < MAX_PERFMAP_ENTRIES && bytes < MAX_PERFMAP) {
		unsigned long long s, sz;
		char *name = line;

		off_t at = ftello(f);

		bytes = at > 0 ? (uint64_t)at : MAX_PERFMAP; /* the bytes read, NULs too (strlen stops at one) */
		if (!hex_field(&name, &s) || !hex_field(&name, &sz) || sz == 0 || !*name)
			continue;
		name[strcspn(name, "\n")] = 0;
		if (ns->n_pm == cap) {
			cap = cap ? cap * 2 : 4096;
			ns->pm = mem_realloc(ns->pm, cap * sizeof(*ns->pm));
		}
		ns->pm[ns->n_pm] = (struct pm_entry){ s, sz, ns->n_pm, mem_strdup(name) };
		ns->n_pm++;
	}
	fclose(f);
	mem_sort(ns->pm, ns->n_pm, sizeof(*ns->pm), by_pm);
}

size_t natsym_perfmap_entries(const struct natsym *ns)
{
	return ns->n_pm;
}

/* The perf map's entry holding ip: of those starting at or before it, the latest written that covers it. */
static const struct pm_entry *pm_at(const struct natsym *ns, uint64_t ip)
{
	size_t lo = count_le(ns->pm, ns->n_pm, sizeof(*ns->pm), ip);

	for (size_t i = lo, seen = 0; i-- > 0 && seen < 64; seen++)
		if (ip - ns->pm[i].start < ns->pm[i].size)
			return &ns->pm[i];
	return NULL;
}

static int by_ksym(const void *a, const void *b)
{
	const struct ksym *x = a, *y = b;

	return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static void read_kallsyms(struct natsym *ns)
{
	char line[512];
	FILE *f = fopen("/proc/kallsyms", "re");
	size_t cap = 0;
	bool nonzero = false;

	ns->ks_hidden = true;
	if (f == NULL)
		return;
	while (fgets(line, sizeof(line), f) && ns->n_ks < MAX_KSYMS) {
		unsigned long long a;
		char *q = line, type, *name;

		if (!hex_field(&q, &a) || !*q)
			continue;
		type = *q;
		name = skip_field(q);
		name[strcspn(name, " \t\n")] = 0;
		nonzero |= a != 0;
		if (!*name || (type != 't' && type != 'T' && type != 'w' && type != 'W'))
			continue;
		if (ns->n_ks == cap) {
			cap = cap ? cap * 2 : 65536;
			ns->ks = mem_realloc(ns->ks, cap * sizeof(*ns->ks));
		}
		ns->ks[ns->n_ks++] = (struct ksym){ a, mem_strdup(name) };
	}
	fclose(f);
	ns->ks_hidden = !nonzero;
	mem_sort(ns->ks, ns->n_ks, sizeof(*ns->ks), by_ksym);
}

struct natsym *natsym_new(uint64_t pid, uint64_t nspid, bool kernel)
{
	struct natsym *ns = mem_zalloc(sizeof(*ns));
	char root[48];

	ns->pid = pid;
	ns->nspid = nspid;
	ns->kernel = kernel;
	snprintf(root, sizeof(root), "/proc/%llu/root", (unsigned long long)pid);
	ns->root_fd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
	ns->budget = ELF_BUDGET;
	read_maps(ns);
	if (kernel)
		read_kallsyms(ns);
	return ns;
}

static void kernel_lookup(struct natsym *ns, uint64_t ip, struct natsym_frame *out)
{
	size_t lo;

	out->file = "[kernel]";
	out->dso = "[kernel.kallsyms]";
	out->off = ip;
	if (ns->ks_hidden || ns->n_ks == 0) {
		out->why = "kallsyms unreadable";
		return;
	}
	lo = count_le(ns->ks, ns->n_ks, sizeof(*ns->ks), ip);
	if (lo == 0) {
		out->why = "not in kallsyms";
		return;
	}
	out->sym = ns->ks[lo - 1].name;
	out->off = ip - ns->ks[lo - 1].addr;
}

static void jit_lookup(struct natsym *ns, uint64_t ip, struct natsym_frame *out)
{
	const struct pm_entry *e = pm_at(ns, ip);

	snprintf(ns->pm_path, sizeof(ns->pm_path), "/tmp/perf-%llu.map", (unsigned long long)ns->nspid);
	out->file = "[jit]";
	out->dso = ns->pm_path;
	out->managed_region = true;
	out->off = ip;
	if (e) {
		out->sym = e->name;
		out->off = ip - e->start;
	} else {
		out->why = ns->n_pm ? "no perf map entry" : "no perf map";
	}
}

void natsym_lookup(struct natsym *ns, uint64_t ip, struct natsym_frame *out)
{
	size_t lo;
	const struct map *m;
	const struct esym *s;
	uint64_t va;

	memset(out, 0, sizeof(*out));
	if (ip >= 0x8000000000000000ull) {
		kernel_lookup(ns, ip, out);
		return;
	}
	lo = count_le(ns->maps, ns->n_maps, sizeof(*ns->maps), ip);
	m = lo ? &ns->maps[lo - 1] : NULL;
	if (m == NULL || ip >= m->end) {
		jit_lookup(ns, ip, out); /* code mapped after the map was read (or freed since) */
		if (out->sym == NULL) {
			out->file = "[unknown]";
			out->dso = "[unknown]";
			out->why = "not mapped";
		}
		return;
	}
	if (m->obj == NULL && m->special == NULL) {
		jit_lookup(ns, ip, out);
		return;
	}
	out->off = ip;
	if (m->special) {
		out->file = out->dso = m->special;
		out->why = strcmp(m->special, "[deleted]") == 0 ? "file deleted" : "not read";
		return;
	}
	if (!m->obj->read)
		obj_read(ns, m->obj);
	out->file = m->obj->file;
	out->dso = m->obj->path;
	out->off = ip - m->start + m->off;
	if (m->obj->elf == NULL) {
		out->managed_region = strcmp(m->obj->why ? m->obj->why : "", "not ELF") == 0; /* a ReadyToRun image */
		out->why = m->obj->why;
		return;
	}
	if (elf_vaddr(m->obj->elf, out->off, &va) && (s = sym_at(m->obj->names, va)) != NULL) {
		const struct natsym_elf *n = m->obj->names;

		snprintf(ns->scratch, sizeof(ns->scratch), "%.*s", (int)strnlen(n->strtab + s->name, n->strtab_len - s->name),
			 n->strtab + s->name);
		out->sym = ns->scratch;
		out->off = va - s->start;
		return;
	}
	out->why = m->obj->why ? m->obj->why : "no symbol";
}

void natsym_free(struct natsym *ns)
{
	if (ns == NULL)
		return;
	for (size_t i = 0; i < ns->n_objs; i++) {
		if (ns->objs[i]->names != ns->objs[i]->elf)
			natsym_elf_free(ns->objs[i]->names);
		natsym_elf_free(ns->objs[i]->elf);
		free(ns->objs[i]->path);
		free(ns->objs[i]->file);
		free(ns->objs[i]);
	}
	for (size_t i = 0; i < ns->n_ks; i++)
		free(ns->ks[i].name);
	free(ns->ks);
	pm_clear(ns);
	free(ns->maps);
	if (ns->root_fd >= 0)
		close(ns->root_fd);
	free(ns);
}
