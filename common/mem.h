/*
 * mem.h - the one allocation policy: allocation failure aborts.
 *
 * Every allocation in diagport goes through these wrappers (jansson's too,
 * once mem_install() has run), so callers never check for NULL. Memory that
 * held a secret is wiped with mem_wipe() before it is freed.
 */
#ifndef DP_MEM_H
#define DP_MEM_H

#include <stddef.h>

void *mem_alloc(size_t n);               /* uninitialised; never NULL */
void *mem_zalloc(size_t n);              /* zeroed; never NULL */
void *mem_realloc(void *p, size_t n);    /* never NULL */
void *mem_array(size_t n, size_t size);  /* n*size, checked for overflow; zeroed */
char *mem_strdup(const char *s);         /* new copy; never NULL */
char *mem_strndup(const char *s, size_t n); /* copy of at most n bytes, NUL-terminated */
char *mem_printf(const char *fmt, ...) __attribute__((format(printf, 1, 2))); /* new string */
void mem_wipe(void *p, size_t n);        /* zero in a way the compiler keeps */

/* Route jansson's allocations through the wrappers above. Call once at start. */
void mem_install(void);

#endif
