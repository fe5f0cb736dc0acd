/*
 * stacks.c - /stacks (stacks.h).
 *
 * The session: Microsoft-DotNETCore-SampleProfiler (a sample of every
 * thread each millisecond), the runtime's provider with the Jit and Loader
 * keywords at Verbose (methods and modules loaded while it runs), and the
 * rundown with Loader, Jit, NGen and End (every method's code range and
 * every module, written when the session stops; without the IL-to-native
 * maps, which a stack does not need). Each thread's first sample is its
 * stack; each address is named by binary search over the method ranges.
 *
 * Payload layouts (the runtime's manifest; shared/reference §7):
 * MethodLoadVerbose (runtime, 143) and MethodDCEndVerbose (rundown, 144):
 * u64 method, u64 module, u64 start, u32 size, u32 token, u32 flags, then
 * namespace, name, signature (UTF-16). ModuleLoad (runtime, 152) and
 * ModuleDCEnd (rundown, 154): u64 module, u64 assembly, u32 flags, u32
 * reserved, IL path, native path.
 */
#include "stacks.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "trace.h"

#define RUNTIME "Microsoft-Windows-DotNETRuntime"
#define RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define RUNDOWN_KEYWORDS 0x138ull /* Loader 0x8, Jit 0x10, NGen 0x20, End 0x100 */
#define MAX_THREADS 4096
#define MAX_METHODS 1000000
#define MAX_FRAMES 512

struct method {
	uint64_t start, size, module;
	uint32_t token;
	char *type, *name;
};

struct module {
	uint64_t id;
	char *file; /* the IL path's last component */
};

struct thread {
	uint64_t id;
	uint64_t *ips;
	size_t n;
};

struct stacks {
	struct thread *threads;
	size_t n_threads;
	struct method *methods;
	size_t n_methods, cap_methods;
	struct module *modules;
	size_t n_modules, cap_modules;
	bool sorted;
};

static void add_method(struct stacks *s, const struct nettrace_event *e)
{
	struct nettrace_reader r = { e->payload, e->payload + e->payload_len, false };
	struct method m = { 0 };
	char *ns, *name, *sig;

	nettrace_u64(&r); /* method id */
	m.module = nettrace_u64(&r);
	m.start = nettrace_u64(&r);
	m.size = nettrace_u32(&r);
	m.token = nettrace_u32(&r);
	nettrace_u32(&r); /* flags */
	ns = nettrace_utf16z(&r);
	name = nettrace_utf16z(&r);
	sig = nettrace_utf16z(&r);
	free(sig);
	if (r.bad || m.size == 0 || s->n_methods == MAX_METHODS) {
		free(ns);
		free(name);
		return;
	}
	m.type = ns;
	m.name = name;
	if (s->n_methods == s->cap_methods) {
		s->cap_methods = s->cap_methods ? s->cap_methods * 2 : 1024;
		s->methods = mem_realloc(s->methods, s->cap_methods * sizeof(*s->methods));
	}
	s->methods[s->n_methods++] = m;
	s->sorted = false;
}

static void add_module(struct stacks *s, const struct nettrace_event *e)
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
	if (r.bad || il == NULL)
		goto out;
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i].id == id)
			goto out;
	if (s->n_modules == s->cap_modules) {
		s->cap_modules = s->cap_modules ? s->cap_modules * 2 : 64;
		s->modules = mem_realloc(s->modules, s->cap_modules * sizeof(*s->modules));
	}
	slash = strrchr(il, '/');
	s->modules[s->n_modules].id = id;
	s->modules[s->n_modules++].file = mem_strdup(slash ? slash + 1 : il);
out:
	free(il);
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct stacks *s = ctx;
	const struct nettrace_meta *m = e->meta;

	if (m->event_id == 0 && strcmp(m->provider, SAMPLER) == 0) {
		for (size_t i = 0; i < s->n_threads; i++)
			if (s->threads[i].id == e->thread_id)
				return 0; /* its first sample is its stack */
		if (s->n_threads == MAX_THREADS || e->stack_n == 0)
			return 0;
		s->threads = mem_realloc(s->threads, (s->n_threads + 1) * sizeof(*s->threads));
		s->threads[s->n_threads].id = e->thread_id;
		s->threads[s->n_threads].n = e->stack_n < MAX_FRAMES ? e->stack_n : MAX_FRAMES;
		s->threads[s->n_threads].ips = mem_array(s->threads[s->n_threads].n, sizeof(uint64_t));
		memcpy(s->threads[s->n_threads].ips, e->stack, s->threads[s->n_threads].n * sizeof(uint64_t));
		s->n_threads++;
	} else if ((m->event_id == 143 && strcmp(m->provider, RUNTIME) == 0) ||
		   (m->event_id == 144 && strcmp(m->provider, RUNDOWN) == 0)) {
		add_method(s, e);
	} else if ((m->event_id == 152 && strcmp(m->provider, RUNTIME) == 0) ||
		   (m->event_id == 154 && strcmp(m->provider, RUNDOWN) == 0)) {
		add_module(s, e);
	}
	return 0;
}

static int by_start(const void *a, const void *b)
{
	const struct method *x = a, *y = b;

	return (x->start > y->start) - (x->start < y->start);
}

static int by_thread(const void *a, const void *b)
{
	const struct thread *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

/* The method whose code holds ip, or NULL (native code, or code the rundown did not name). */
static const struct method *lookup(const struct stacks *s, uint64_t ip)
{
	size_t lo = 0, hi = s->n_methods;

	while (lo < hi) { /* the last method starting at or before ip */
		size_t mid = lo + (hi - lo) / 2;

		if (s->methods[mid].start <= ip)
			lo = mid + 1;
		else
			hi = mid;
	}
	for (size_t k = lo; k-- > 0 && lo - k <= 8;) /* overlapping code versions: look a little further back */
		if (ip < s->methods[k].start + s->methods[k].size)
			return &s->methods[k];
	return NULL;
}

static const char *module_of(const struct stacks *s, uint64_t id)
{
	for (size_t i = 0; i < s->n_modules; i++)
		if (s->modules[i].id == id)
			return s->modules[i].file;
	return "";
}

int stacks_capture(struct port *port, const uint8_t cookie[16], int sample_ms, struct stacks **out,
		   struct err_msg *em)
{
	struct trace_provider p[2] = { { (char *)SAMPLER, 0, 4, NULL }, { (char *)RUNTIME, 0x18, 5, NULL } };
	struct trace_config c = { p, 2, 64, RUNDOWN_KEYWORDS };
	struct nettrace_callbacks cb = { .event = on_event };
	struct stacks *s = mem_zalloc(sizeof(*s));
	struct trace_session *t = NULL;
	char *chunk;
	long n;
	int rc = trace_start_cb(port, cookie, &c, sample_ms, NULL, &cb, s, &t, em);

	if (rc != 0) {
		stacks_free(s);
		return rc;
	}
	chunk = mem_alloc(1 << 16);
	while ((n = trace_read(t, chunk, 1 << 16)) > 0)
		;
	if (n < 0)
		rc = err_set(em, DP_EIO, "%s", trace_error(t));
	free(chunk);
	trace_free(t);
	if (rc != 0) {
		stacks_free(s);
		return rc;
	}
	qsort(s->methods, s->n_methods, sizeof(*s->methods), by_start);
	qsort(s->threads, s->n_threads, sizeof(*s->threads), by_thread);
	*out = s;
	return 0;
}

size_t stacks_threads(const struct stacks *s)
{
	return s->n_threads;
}

/* Frame i of thread t: its method, or NULL for a run of native frames (only the first of a run is shown). */
static bool frame(const struct stacks *s, const struct thread *t, size_t i, const struct method **m)
{
	*m = lookup(s, t->ips[i]);
	return *m != NULL || i == 0 || lookup(s, t->ips[i - 1]) != NULL;
}

void stacks_text(const struct stacks *s, struct buf *out)
{
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct thread *t = &s->threads[i];

		buf_printf(out, "%sThread: (0x%llX)\n", i ? "\n" : "", (unsigned long long)t->id);
		for (size_t k = 0; k < t->n; k++) {
			const struct method *m;

			if (!frame(s, t, k, &m))
				continue;
			if (m)
				buf_printf(out, "  %s!%s.%s\n", module_of(s, m->module), m->type, m->name);
			else
				buf_puts(out, "  [NativeFrames]\n");
		}
	}
}

json_t *stacks_json(const struct stacks *s)
{
	json_t *arr = json_array();

	for (size_t i = 0; i < s->n_threads; i++) {
		const struct thread *t = &s->threads[i];
		json_t *frames = json_array();

		for (size_t k = 0; k < t->n; k++) {
			const struct method *m;

			if (!frame(s, t, k, &m))
				continue;
			json_array_append_new(frames, m ? json_pack("{s:s, s:s, s:s, s:I}", "methodName", m->name, "typeName",
								     m->type, "moduleName", module_of(s, m->module),
								     "methodToken", (json_int_t)m->token) :
							    json_pack("{s:s, s:s, s:s, s:I}", "methodName", "[NativeFrames]",
								      "typeName", "", "moduleName", "", "methodToken",
								      (json_int_t)0));
		}
		json_array_append_new(arr, json_pack("{s:I, s:s, s:o}", "threadId", (json_int_t)t->id, "threadName", "",
						     "frames", frames));
	}
	return arr;
}

void stacks_speedscope(const struct stacks *s, struct buf *out)
{
	json_t *frames = json_array(), *profiles = json_array(), *doc;
	char *text;
	size_t native = SIZE_MAX;
	size_t *index = mem_array(s->n_methods ? s->n_methods : 1, sizeof(size_t));

	for (size_t i = 0; i < s->n_methods; i++)
		index[i] = SIZE_MAX;
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct thread *t = &s->threads[i];
		json_t *sample = json_array();
		char name[48];

		for (size_t k = t->n; k-- > 0;) { /* speedscope lists a sample root first */
			const struct method *m;
			size_t *at;

			if (!frame(s, t, k, &m))
				continue;
			at = m ? &index[m - s->methods] : &native;
			if (*at == SIZE_MAX) {
				char *fn = m ? mem_printf("%s.%s", m->type, m->name) : mem_strdup("[NativeFrames]");

				*at = json_array_size(frames);
				json_array_append_new(frames, json_pack("{s:s, s:s}", "name", fn, "file",
									m ? module_of(s, m->module) : ""));
				free(fn);
			}
			json_array_append_new(sample, json_integer((json_int_t)*at));
		}
		snprintf(name, sizeof(name), "Thread (0x%llX)", (unsigned long long)t->id);
		json_array_append_new(profiles, json_pack("{s:s, s:s, s:s, s:i, s:i, s:[o], s:[i]}", "type", "sampled", "name",
							  name, "unit", "none", "startValue", 0, "endValue", 1, "samples",
							  sample, "weights", 1));
	}
	free(index);
	doc = json_pack("{s:s, s:{s:o}, s:o, s:s, s:i, s:s}", "$schema", "https://www.speedscope.app/file-format-schema.json",
			"shared", "frames", frames, "profiles", profiles, "name", "diagport stacks", "activeProfileIndex", 0,
			"exporter", "diagport " DP_VERSION);
	text = json_dumps(doc, JSON_COMPACT);
	buf_puts(out, text);
	free(text);
	json_decref(doc);
}

void stacks_free(struct stacks *s)
{
	if (s == NULL)
		return;
	for (size_t i = 0; i < s->n_threads; i++)
		free(s->threads[i].ips);
	for (size_t i = 0; i < s->n_methods; i++) {
		free(s->methods[i].type);
		free(s->methods[i].name);
	}
	for (size_t i = 0; i < s->n_modules; i++)
		free(s->modules[i].file);
	free(s->threads);
	free(s->methods);
	free(s->modules);
	free(s);
}
