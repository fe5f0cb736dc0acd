/*
 * mem.c - allocation wrappers that abort on failure, and the per-thread
 * arena scope (see mem.h).
 *
 * The arena: chunks mapped from the kernel, each a bump pointer; an
 * allocation is preceded by a 16-byte header holding its size, so
 * mem_realloc() can copy it, or grow it in place when it is the chunk's last
 * allocation (a buffer that keeps growing). The largest chunk up to 2 MiB is
 * kept for the thread's next scope, the others are unmapped at the end.
 * mem_free() tells arena memory from heap memory by address: a scope has a
 * handful of chunks.
 */
#include "mem.h"

#ifndef DP_NO_JANSSON /* cdk/: the rules alone, built to WebAssembly without jansson */
#include <jansson.h>
#endif
#include <pthread.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

static void oom(size_t n)
{
	fprintf(stderr, "diagport: fatal: out of memory (%zu bytes)\n", n);
	abort();
}

/*
 * Under AddressSanitizer the arena fences its allocations itself: a chunk is
 * poisoned when it is made or reused, an allocation unpoisoned when it is
 * taken (its header and padding stay poisoned, so a read or write past its
 * end is reported), and the kept chunk poisoned again when the scope ends
 * (so is a use of arena memory after it). What the arena does not report is
 * a use after mem_free() within the scope: nothing is freed there by design.
 */
#if defined(__SANITIZE_ADDRESS__)
#define ARENA_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define ARENA_ASAN 1
#endif
#endif
#ifdef ARENA_ASAN
#include <sanitizer/asan_interface.h>
#define POISON(p, n) ASAN_POISON_MEMORY_REGION((p), (n))
#define UNPOISON(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (n))
#else
#define POISON(p, n) ((void)(p), (void)(n))
#define UNPOISON(p, n) ((void)(p), (void)(n))
#endif

#define ARENA_HDR 16             /* keeps every allocation 16-byte aligned, like malloc's */
#define ARENA_FIRST (256u << 10)  /* a thread's first chunk */
#define ARENA_KEEP ((size_t)2 << 20) /* the largest chunk kept for the thread's next scope */

struct chunk {
	struct chunk *next;
	size_t size, used; /* bytes of data[] */
	size_t last;       /* offset of the last allocation's header, for growth in place */
	_Alignas(16) unsigned char data[];
};

static __thread struct chunk *kept;   /* the first chunk, kept between scopes */
static __thread struct chunk *chunks; /* the scope's chunks, newest first; NULL outside a scope */
static __thread int in_scope;

static pthread_key_t kept_key;
static pthread_once_t kept_once = PTHREAD_ONCE_INIT;

static struct chunk *chunk_map(size_t size)
{
	struct chunk *c = mmap(NULL, sizeof(*c) + size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);

	if (c == MAP_FAILED)
		oom(size);
	c->size = size;
	c->used = c->last = 0;
	c->next = NULL;
	POISON(c->data, size);
	return c;
}

static void chunk_unmap(void *c)
{
	if (c) {
		UNPOISON(((struct chunk *)c)->data, ((struct chunk *)c)->size);
		munmap(c, sizeof(struct chunk) + ((struct chunk *)c)->size);
	}
}

static void kept_key_make(void)
{
	if (pthread_key_create(&kept_key, chunk_unmap) != 0)
		oom(0);
}

static bool in_arena(const void *p)
{
	for (const struct chunk *c = chunks; c; c = c->next)
		if ((const unsigned char *)p >= c->data && (const unsigned char *)p < c->data + c->used)
			return true;
	return false;
}

static size_t arena_size(const void *p)
{
	const unsigned char *h = (const unsigned char *)p - ARENA_HDR;
	size_t n;

	UNPOISON(h, sizeof(n));
	memcpy(&n, h, sizeof(n));
	POISON(h, sizeof(n));
	return n;
}

static void set_size(unsigned char *h, size_t n)
{
	UNPOISON(h, sizeof(n));
	memcpy(h, &n, sizeof(n));
	POISON(h, sizeof(n));
}

static void *arena_take(size_t n)
{
	size_t need;
	struct chunk *c = chunks;
	unsigned char *p;

	if (n > SIZE_MAX / 2)
		oom(n);
	need = ARENA_HDR + ((n + 15) & ~(size_t)15);
	if (c == NULL || c->size - c->used < need) {
		size_t size = c ? c->size * 2 : ARENA_FIRST;

		while (size < need)
			size *= 2;
		c = chunk_map(size);
		c->next = chunks;
		chunks = c;
	}
	p = c->data + c->used;
	set_size(p, n);
	c->last = c->used;
	c->used += need;
	UNPOISON(p + ARENA_HDR, n);
	return p + ARENA_HDR;
}

/* Grow arena allocation p to n bytes: in place when it is the newest, else a copy. */
static void *arena_grow(void *p, size_t n)
{
	struct chunk *c = chunks;
	size_t old = arena_size(p), need = ARENA_HDR + ((n + 15) & ~(size_t)15);
	void *q;

	if ((unsigned char *)p - ARENA_HDR == c->data + c->last && c->size - c->last >= need) {
		set_size((unsigned char *)p - ARENA_HDR, n);
		c->used = c->last + need;
		if (n < old)
			POISON((unsigned char *)p + n, old - n);
		UNPOISON(p, n);
		return p;
	}
	q = arena_take(n);
	memcpy(q, p, old < n ? old : n);
	return q;
}

void mem_arena_begin(void)
{
	if (in_scope) {
		fprintf(stderr, "diagport: fatal: %s:%d: arena scopes do not nest\n", __FILE__, __LINE__);
		abort();
	}
	in_scope = 1;
	if (kept == NULL) {
		kept = chunk_map(ARENA_FIRST);
		pthread_once(&kept_once, kept_key_make);
		pthread_setspecific(kept_key, kept); /* unmapped when the thread exits (a retired server's workers) */
	}
	kept->used = kept->last = 0;
	kept->next = NULL;
	POISON(kept->data, kept->size);
	chunks = kept;
}

void mem_arena_end(void)
{
	struct chunk *keep = kept;

	/*
	 * The largest chunk up to ARENA_KEEP is kept for the next scope, so a
	 * thread that reviews large pods maps its memory once; the rest goes
	 * back to the kernel (from malloc it would stay in the heap: glibc
	 * raises its mmap threshold as such blocks are freed).
	 */
	for (struct chunk *c = chunks; c; c = c->next)
		if (c->size <= ARENA_KEEP && c->size > keep->size)
			keep = c;
	while (chunks) {
		struct chunk *next = chunks->next;

		if (chunks != keep)
			chunk_unmap(chunks);
		chunks = next;
	}
	if (keep != kept) {
		kept = keep;
		pthread_setspecific(kept_key, kept);
	}
	if (kept)
		POISON(kept->data, kept->size);
	chunks = NULL;
	in_scope = 0;
}

bool mem_arena_active(void)
{
	return chunks != NULL;
}

void mem_free(void *p)
{
	if (p != NULL && chunks != NULL && in_arena(p))
		return;
	free(p);
}

void *mem_alloc(size_t n)
{
	void *p;

	if (chunks != NULL)
		return arena_take(n ? n : 1);
	p = malloc(n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *mem_zalloc(size_t n)
{
	void *p;

	if (chunks != NULL)
		return memset(arena_take(n ? n : 1), 0, n ? n : 1);
	p = calloc(1, n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *mem_realloc(void *p, size_t n)
{
	void *q;

	if (chunks != NULL && p == NULL)
		return arena_take(n ? n : 1);
	if (chunks != NULL && in_arena(p))
		return arena_grow(p, n ? n : 1);
	q = realloc(p, n ? n : 1);

	if (q == NULL)
		oom(n);
	return q;
}

void *mem_array(size_t n, size_t size)
{
	if (size != 0 && n > SIZE_MAX / size)
		oom(SIZE_MAX);
	return mem_zalloc(n * size);
}

void *mem_grow(void *p, size_t *cap, size_t need, size_t size, size_t first)
{
	size_t c = *cap;

	if (need <= c)
		return p;
	if (c == 0)
		c = first ? first : 1;
	while (c < need) {
		if (c > SIZE_MAX / 2)
			oom(SIZE_MAX);
		c *= 2;
	}
	if (size != 0 && c > SIZE_MAX / size)
		oom(SIZE_MAX);
	p = mem_realloc(p, c * size);
	*cap = c;
	return p;
}

void mem_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *))
{
	if (n > 1)
		qsort(base, n, size, cmp);
}

char *mem_strdup(const char *s)
{
	return mem_strndup(s, strlen(s));
}

char *mem_strndup(const char *s, size_t n)
{
	size_t len = strnlen(s, n);
	char *p = mem_alloc(len + 1);

	memcpy(p, s, len);
	p[len] = '\0';
	return p;
}

char *mem_printf(const char *fmt, ...)
{
	char small[256]; /* most strings: formatted once (and no NULL buffer, which GCC's fortify check dislikes) */
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(small, sizeof(small), fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(0);
	p = mem_alloc((size_t)n + 1);
	if ((size_t)n < sizeof(small)) {
		memcpy(p, small, (size_t)n + 1);
		return p;
	}
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

void mem_wipe(void *p, size_t n)
{
	volatile unsigned char *v = p;

	while (n--)
		*v++ = 0;
}

#ifndef DP_NO_JANSSON
static void *jansson_alloc(size_t n)
{
	return mem_alloc(n);
}

void mem_install(void)
{
	json_set_alloc_funcs(jansson_alloc, mem_free);
}
#endif
