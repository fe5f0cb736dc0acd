/*
 * mem.h - the one allocation policy: allocation failure aborts.
 *
 * Every allocation in diagport goes through these wrappers (jansson's too,
 * once mem_install() has run), so callers never check for NULL. Memory that
 * held a secret is wiped with mem_wipe() before it is freed.
 */
#ifndef DP_MEM_H
#define DP_MEM_H

#include <stdbool.h>
#include <stddef.h>

void *mem_alloc(size_t n);               /* uninitialised; never NULL */
void *mem_zalloc(size_t n);              /* zeroed; never NULL */
void *mem_realloc(void *p, size_t n);    /* never NULL */
void *mem_array(size_t n, size_t size);  /* n*size, checked for overflow; zeroed */
char *mem_strdup(const char *s);         /* new copy; never NULL */
char *mem_strndup(const char *s, size_t n); /* copy of at most n bytes, NUL-terminated */
char *mem_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* new string */
void mem_wipe(void *p, size_t n);        /* zero in a way the compiler keeps */
/*
 * Room for need elements of size bytes in p, whose capacity *cap (elements) is doubled, from first, until
 * it holds need; the capacity and the product are checked for overflow. The one way an array grows:
 * MEM_GROW(arr, cap, need, first) for an array arr with a size_t capacity cap; it tests in line, so a
 * hot loop pays a compare (need is evaluated twice: no side effects in it). Never NULL.
 */
void *mem_grow(void *p, size_t *cap, size_t need, size_t size, size_t first);
#define MEM_GROW(arr, cap, need, first)                                                    \
	do {                                                                              \
		if ((need) > (cap))                                                       \
			(arr) = mem_grow((arr), &(cap), (need), sizeof(*(arr)), (first)); \
	} while (0)
/* qsort that takes an empty array as NULL (qsort itself must not be given NULL) */
void mem_sort(void *base, size_t n, size_t size, int (*cmp)(const void *, const void *));

/*
 * free() for anything from the wrappers above, inside or outside an arena
 * scope. Code that may run inside one (the document tree, the injector, the
 * webhook's review) frees with this, never with free().
 */
void mem_free(void *p);

/*
 * An arena scope on the calling thread. Between mem_arena_begin() and
 * mem_arena_end(), mem_alloc(), mem_zalloc(), mem_array(), the string
 * copies and mem_realloc(NULL, n) take memory from the thread's arena (a bump
 * pointer over chunks kept between scopes); mem_free() of arena memory does
 * nothing, and mem_arena_end() releases all of it at once. mem_realloc() of
 * memory from outside the arena stays outside it, so a buffer allocated
 * before the scope may grow inside it and outlive it; nothing allocated inside
 * may be used after the end. Scopes do not nest. Under AddressSanitizer
 * each allocation is fenced by poisoning (mem.c), so overruns and uses
 * after the scope are reported; uses after mem_free() inside a scope are not
 * errors here, by design. Made for one request's short-lived trees: a review allocates thousands of
 * small nodes and frees them all together.
 */
void mem_arena_begin(void);
void mem_arena_end(void);
/* True inside a scope: trees made in it need not be freed one by one. */
bool mem_arena_active(void);

/* Route jansson's allocations through the wrappers above. Call once at start. */
void mem_install(void);

#endif
