/*
 * mem.c - allocation wrappers that abort on failure (see mem.h).
 */
#include "mem.h"

#include <jansson.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(size_t n)
{
	fprintf(stderr, "diagport: fatal: out of memory (%zu bytes)\n", n);
	abort();
}

void *mem_alloc(size_t n)
{
	void *p = malloc(n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *mem_zalloc(size_t n)
{
	void *p = calloc(1, n ? n : 1);

	if (p == NULL)
		oom(n);
	return p;
}

void *mem_realloc(void *p, size_t n)
{
	void *q = realloc(p, n ? n : 1);

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
	va_list ap;
	int n;
	char *p;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0)
		oom(0);
	p = mem_alloc((size_t)n + 1);
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

static void *jansson_alloc(size_t n)
{
	return mem_alloc(n);
}

void mem_install(void)
{
	json_set_alloc_funcs(jansson_alloc, free);
}
