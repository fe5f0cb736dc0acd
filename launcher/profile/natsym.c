/*
 * natsym.c - naming native, JIT and kernel addresses of a perf profile
 * (natsym.h).
 *
 * The memory map (/proc/PID/maps, executable mappings only) says which
 * object an address is in and at which file offset. An ELF object is read
 * once (natsym_elf.c, the reader), by pread through /proc/PID/root (the
 * process's own filesystem). A file without .symtab is looked up by its
 * build id (/usr/lib/debug/.build-id/NN/REST.debug) and its .gnu_debuglink
 * (next to it, in .debug/ beside it, under /usr/lib/debug), first in the
 * process's filesystem then in the agent's, as gdb and perf look; a debug
 * file's symbols apply to the file's addresses.
 *
 * Code in anonymous memory or in the runtime's W^X double mapping
 * (/memfd:doublemapper) is JIT code: the runtime's perf map names it
 * ("START SIZE NAME" lines in hex, later lines winning). Kernel addresses
 * come from /proc/kallsyms (text symbols), unless kptr_restrict shows zeros.
 */
#include "natsym_int.h"

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
#define MAX_PERFMAP ((uint64_t)16 << 20)
#define MAX_PERFMAP_ENTRIES 500000
#define MAX_KSYMS 2000000

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
		e = natsym_elf_read_budget(fd_read_at, &fd, (uint64_t)st.st_size, budget);
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
		MEM_GROW(ns->maps, cap, ns->n_maps + 1, 256);
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
		MEM_GROW(ns->pm, cap, ns->n_pm + 1, 4096);
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
	size_t lo = natsym_count_le(ns->pm, ns->n_pm, sizeof(*ns->pm), ip);

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
		MEM_GROW(ns->ks, cap, ns->n_ks + 1, 65536);
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
	lo = natsym_count_le(ns->ks, ns->n_ks, sizeof(*ns->ks), ip);
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
	lo = natsym_count_le(ns->maps, ns->n_maps, sizeof(*ns->maps), ip);
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
	if (natsym_elf_vaddr(m->obj->elf, out->off, &va) && (s = natsym_sym_at(m->obj->names, va)) != NULL) {
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

