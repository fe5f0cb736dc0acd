/*
 * symbols.c - method and module tables from EventPipe events (symbols.h).
 *
 * Payload layouts (the runtime's manifest; shared/reference §7):
 * MethodLoadVerbose (runtime, 143) and MethodDCEndVerbose (rundown, 144):
 * u64 method, u64 module, u64 start, u32 size, u32 token, u32 flags, then
 * namespace, name, signature (UTF-16). ModuleLoad (runtime, 152) and
 * ModuleDCEnd (rundown, 154): u64 module, u64 assembly, u32 flags, u32
 * reserved, IL path, native path. Tiered compilation gives one method
 * several code ranges: all are kept.
 */
#include "symbols.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define MAX_METHODS 1000000
#define MAX_MODULES 65536

struct module {
	uint64_t id;
	char *file;
};

struct symbols {
	struct sym_method *methods;
	size_t n_methods, cap_methods;
	struct module *modules;
	size_t n_modules, cap_modules;
	bool keep_sigs;
};

void symbols_session(struct trace_config *c)
{
	static struct trace_provider p[2] = { { (char *)SYM_SAMPLER, 0, 4, NULL }, { (char *)SYM_RUNTIME, 0x18, 5, NULL } };

	c->p = p;
	c->n = 2;
	c->buffer_mb = 64;
	c->rundown = SYM_RUNDOWN_KEYWORDS;
}

void symbols_session_names(struct trace_config *c)
{
	static struct trace_provider p[1] = { { (char *)SYM_RUNTIME, 0x18, 5, NULL } };

	c->p = p;
	c->n = 1;
	c->buffer_mb = 64;
	c->rundown = SYM_RUNDOWN_KEYWORDS;
}

struct symbols *symbols_new(void)
{
	return mem_zalloc(sizeof(struct symbols));
}

struct symbols *symbols_new_sigs(void)
{
	struct symbols *s = symbols_new();

	s->keep_sigs = true;
	return s;
}

static void add_method(struct symbols *s, const struct nettrace_event *e)
{
	struct nettrace_reader r = { e->payload, e->payload + e->payload_len, false };
	struct sym_method m = { 0 };
	char *sig;

	nettrace_u64(&r); /* method id */
	m.module = nettrace_u64(&r);
	m.start = nettrace_u64(&r);
	m.size = nettrace_u32(&r);
	m.token = nettrace_u32(&r);
	nettrace_u32(&r); /* flags */
	m.type = nettrace_utf16z(&r);
	m.name = nettrace_utf16z(&r);
	sig = nettrace_utf16z(&r);
	if (r.bad || m.size == 0 || s->n_methods == MAX_METHODS) {
		free(m.type);
		free(m.name);
		free(sig);
		return;
	}
	if (s->keep_sigs)
		m.sig = sig;
	else
		free(sig);
	MEM_GROW(s->methods, s->cap_methods, s->n_methods + 1, 1024);
	s->methods[s->n_methods++] = m;
}

static void add_module(struct symbols *s, const struct nettrace_event *e)
{
	struct nettrace_reader r = { e->payload, e->payload + e->payload_len, false };
	uint64_t id = nettrace_u64(&r);
	char *il, *native, *slash;

	nettrace_u64(&r); /* assembly */
	nettrace_u32(&r); /* flags */
	nettrace_u32(&r);
	il = nettrace_utf16z(&r);
	native = nettrace_utf16z(&r);
	free(native);
	if (r.bad || il == NULL || s->n_modules == MAX_MODULES || *symbols_module(s, id))
		goto out;
	MEM_GROW(s->modules, s->cap_modules, s->n_modules + 1, 64);
	slash = strrchr(il, '/');
	s->modules[s->n_modules].id = id;
	s->modules[s->n_modules++].file = mem_strdup(slash ? slash + 1 : il);
out:
	free(il);
}

bool symbols_event(struct symbols *s, const struct nettrace_event *e)
{
	const struct nettrace_meta *m = e->meta;

	if ((m->event_id == 143 && strcmp(m->provider, SYM_RUNTIME) == 0) ||
	    (m->event_id == 144 && strcmp(m->provider, SYM_RUNDOWN) == 0)) {
		add_method(s, e);
		return true;
	}
	if ((m->event_id == 152 && strcmp(m->provider, SYM_RUNTIME) == 0) ||
	    (m->event_id == 154 && strcmp(m->provider, SYM_RUNDOWN) == 0)) {
		add_module(s, e);
		return true;
	}
	return false;
}

bool symbols_sample(const struct nettrace_event *e, bool *managed)
{
	struct nettrace_reader r = { e->payload, e->payload + e->payload_len, false };

	if (e->meta->event_id != 0 || strcmp(e->meta->provider, SYM_SAMPLER) != 0)
		return false;
	*managed = nettrace_u32(&r) == 2; /* 1 External (native code), 2 Managed */
	return true;
}

static int by_start(const void *a, const void *b)
{
	const struct sym_method *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

void symbols_done(struct symbols *s)
{
	mem_sort(s->methods, s->n_methods, sizeof(*s->methods), by_start);
}

const struct sym_method *symbols_lookup(const struct symbols *s, uint64_t ip)
{
	size_t lo = 0, hi = s->n_methods;

	while (lo < hi) { /* past the last method starting at or before ip */
		size_t mid = lo + (hi - lo) / 2;

		if (s->methods[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k-- > 0 && lo - k <= 8;) /* code versions may overlap: look a few back */
		if (ip < s->methods[k].start + s->methods[k].size)
			return &s->methods[k];
	return NULL;
}

const char *symbols_module(const struct symbols *s, uint64_t module)
{
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i].id == module)
			return s->modules[i].file;
	return "";
}

size_t symbols_index(const struct symbols *s, const struct sym_method *m)
{
	return (size_t)(m - s->methods);
}

size_t symbols_count(const struct symbols *s)
{
	return s->n_methods;
}

const struct sym_method *symbols_at(const struct symbols *s, size_t i)
{
	return &s->methods[i];
}

void symbols_free(struct symbols *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n_methods; i++) {
		free(s->methods[i].type);
		free(s->methods[i].name);
		free(s->methods[i].sig);
	}
	for (size_t i = 0; i < s->n_modules; i++)
		free(s->modules[i].file);
	free(s->methods);
	free(s->modules);
	free(s);
}
