/*
 * mem_json.c - jansson's allocations through mem.h's wrappers (mem_install).
 * Apart from mem.c so that the injector alone, built to WebAssembly for the
 * CDK construct library (cdk/, docs/aws.md), needs no jansson.
 */
#include "mem.h"

#include <jansson.h>

static void *jansson_alloc(size_t n)
{
	return mem_alloc(n);
}

void mem_install(void)
{
	json_set_alloc_funcs(jansson_alloc, mem_free);
}
