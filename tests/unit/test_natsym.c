/*
 * test_natsym.c - naming addresses for perf profiles (launcher/profile/natsym.h),
 * on this very process: a function of this program named from its ELF
 * symbol table through /proc/self/maps and /proc/PID/root; an address in
 * anonymous executable memory named by a perf map written here as the
 * runtime writes one (later lines winning, a missing entry said so), and a
 * perf map that is a FIFO not waited on; a
 * kernel address named from /proc/kallsyms as the kernel lists it (or
 * "kallsyms unreadable" when it hides addresses); and the ELF reader on
 * damaged copies of this program (truncated, bytes changed) neither
 * crashing nor naming outside its tables.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "launcher/profile/natsym.h"
#include "mem.h"
#include "t.h"

/* A function with a name to find: kept out of line and exported. */
__attribute__((noinline)) int natsym_test_target(int x);
__attribute__((noinline)) int natsym_test_target(int x)
{
	return x * 3 + 1;
}

static void elf_symbol(void)
{
	struct natsym *ns = natsym_new((uint64_t)getpid(), (uint64_t)getpid(), false);
	struct natsym_frame f;
	uint64_t ip = (uint64_t)(uintptr_t)&natsym_test_target + 4;

	natsym_lookup(ns, ip, &f);
	T_STREQ(f.sym, "natsym_test_target");
	T_CHECK(f.off == 4);
	T_STREQ(f.file, "test_natsym");
	T_CHECK(!f.managed_region);
	natsym_lookup(ns, (uint64_t)(uintptr_t)&natsym_test_target, &f); /* its first byte */
	T_STREQ(f.sym, "natsym_test_target");
	T_CHECK(f.off == 0);
	natsym_free(ns);
}

static void perf_map(void)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	uint8_t *code = mmap(NULL, page, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	char path[64];
	FILE *f;
	struct natsym *ns;
	struct natsym_frame fr;
	uint64_t base = (uint64_t)(uintptr_t)code;

	T_CHECK(code != MAP_FAILED);
	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	f = fopen(path, "w");
	T_CHECK(f != NULL);
	/* as the runtime writes it: hex start, hex size, the name; a method compiled again later wins */
	fprintf(f, "%llx 40 void [app] Program::Old()[QuickJitted]\n", (unsigned long long)base);
	fprintf(f, "%llx 20 stub ReportStubBlock<Unknown>\n", (unsigned long long)base + 0x100);
	fprintf(f, "not a line\n");
	fprintf(f, "%llx 40 void [app] Program::Spin()[OptimizedTier1]\n", (unsigned long long)base);
	fclose(f);
	ns = natsym_new((uint64_t)getpid(), (uint64_t)getpid(), false);
	natsym_load_perfmap(ns);
	unlink(path);
	T_CHECK(natsym_perfmap_entries(ns) == 3);
	natsym_lookup(ns, base + 0x10, &fr);
	T_STREQ(fr.sym, "void [app] Program::Spin()[OptimizedTier1]");
	T_CHECK(fr.off == 0x10 && fr.managed_region);
	T_STREQ(fr.file, "[jit]");
	natsym_lookup(ns, base + 0x104, &fr);
	T_STREQ(fr.sym, "stub ReportStubBlock<Unknown>");
	natsym_lookup(ns, base + 0x200, &fr);
	T_CHECK(fr.sym == NULL);
	T_STREQ(fr.why, "no perf map entry");
	natsym_free(ns);
	munmap(code, page);
}

/* A perf map that is a FIFO (the app's to make) is not waited on: no entries, at once. */
static void perf_map_fifo(void)
{
	char path[64];
	struct natsym *ns;

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	unlink(path);
	T_CHECK(mkfifo(path, 0600) == 0);
	ns = natsym_new((uint64_t)getpid(), (uint64_t)getpid(), false);
	natsym_load_perfmap(ns);
	unlink(path);
	T_CHECK(natsym_perfmap_entries(ns) == 0);
	natsym_free(ns);
}

/*
 * A perf map of NUL bytes (a sparse file: the app's to make) is read no
 * further than the byte cap: lines of NULs count their bytes too. Before the
 * fix, strlen() counted 0 per line and the reader went through the whole
 * file (1 TB sparse: hours, unstoppable). 2 GB of holes, then a valid line:
 * the line must not be reached, and it must take well under 10 s.
 */
static void perf_map_nul_cap(void)
{
	char path[64];
	struct natsym *ns;
	int fd;
	long long t0 = (long long)time(NULL);
	const char line[] = "\n7f0000000000 1000 PAST_THE_CAP\n";

	snprintf(path, sizeof(path), "/tmp/perf-%d.map", (int)getpid());
	unlink(path);
	fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
	T_CHECK(fd >= 0);
	T_CHECK(pwrite(fd, line, sizeof(line) - 1, (off_t)2 << 30) == (ssize_t)(sizeof(line) - 1));
	close(fd);
	ns = natsym_new((uint64_t)getpid(), (uint64_t)getpid(), false);
	natsym_load_perfmap(ns);
	unlink(path);
	T_CHECK(natsym_perfmap_entries(ns) == 0);
	T_CHECK((long long)time(NULL) - t0 < 10);
	natsym_free(ns);
}

static void kernel(void)
{
	FILE *f = fopen("/proc/kallsyms", "r");
	char line[512], name[256] = "";
	unsigned long long addr = 0;
	struct natsym *ns;
	struct natsym_frame fr;

	T_CHECK(f != NULL);
	while (fgets(line, sizeof(line), f)) { /* the first text symbol the kernel lists */
		char type;
		char *end;

		addr = strtoull(line, &end, 16);
		type = end[1];
		if (type == 'T' || type == 't') {
			snprintf(name, sizeof(name), "%.*s", (int)strcspn(end + 3, " \t\n"), end + 3);
			break;
		}
	}
	fclose(f);
	T_CHECK(name[0]);
	ns = natsym_new((uint64_t)getpid(), (uint64_t)getpid(), true);
	natsym_lookup(ns, addr == 0 ? 0xffffffff81000000ull : addr, &fr);
	T_STREQ(fr.file, "[kernel]");
	if (addr == 0) { /* kptr_restrict: the kernel shows zeros to this user */
		T_STREQ(fr.why, "kallsyms unreadable");
	} else {
		T_CHECK(fr.sym != NULL);
		T_CHECK(fr.off == 0);
	}
	natsym_free(ns);
}

struct mem {
	const uint8_t *p;
	size_t n;
};

static int mem_read_at(void *ctx, uint64_t off, size_t len, void *buf)
{
	const struct mem *m = ctx;

	if (off > m->n || len > m->n - off)
		return -1;
	memcpy(buf, m->p + off, len);
	return 0;
}

static void damaged(void)
{
	int fd = open("/proc/self/exe", O_RDONLY);
	struct stat st;
	uint8_t *img, *copy;
	struct natsym_elf *e;
	char name[128];
	uint64_t from;
	struct mem m;
	unsigned seed = 12345;
	size_t found = 0, n;

	T_CHECK(fd >= 0 && fstat(fd, &st) == 0);
	img = mem_alloc((size_t)st.st_size);
	T_CHECK(read(fd, img, (size_t)st.st_size) == st.st_size);
	close(fd);
	n = (size_t)st.st_size;
	m = (struct mem){ img, n };
	e = natsym_elf_read(mem_read_at, &m, n);
	T_CHECK(e != NULL);
	for (uint64_t off = 0; off < m.n; off += 4096) /* a whole copy names something */
		found += natsym_elf_find(e, off, name, sizeof(name), &from);
	T_CHECK(found > 0);
	natsym_elf_free(e);
	copy = mem_alloc(n);
	for (int round = 0; round < 300; round++) {
		size_t len = round < 100 ? (size_t)rand_r(&seed) % n : n; /* truncated, then changed */

		memcpy(copy, img, n);
		for (int k = 0; round >= 100 && k < 16; k++) {
			size_t at = (size_t)rand_r(&seed) % (n < 8192 ? n : 8192); /* the headers' region */

			copy[at] = (uint8_t)rand_r(&seed);
		}
		m = (struct mem){ copy, len };
		e = natsym_elf_read(mem_read_at, &m, len);
		for (uint64_t off = 0; e && off < len; off += 1024)
			if (natsym_elf_find(e, off, name, sizeof(name), &from))
				T_CHECK(strlen(name) < sizeof(name));
		natsym_elf_free(e);
	}
	m = (struct mem){ (const uint8_t *)"\177ELF", 4 };
	T_CHECK(natsym_elf_read(mem_read_at, &m, 4) == NULL);
	free(copy);
	free(img);
}

int main(void)
{
	T_BEGIN("natsym");
	T_RUN(elf_symbol);
	T_RUN(perf_map);
	T_RUN(perf_map_fifo);
	T_RUN(perf_map_nul_cap);
	T_RUN(kernel);
	T_RUN(damaged);
	return t_failed_cases ? 1 : 0;
}
