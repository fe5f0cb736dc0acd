/*
 * stacks.c - /stacks (stacks.h).
 *
 * The session is dotnet-stack's: the sample profiler (a sample of every
 * thread each millisecond) and the method rundown, which names the
 * addresses (symbols.h). Each thread's first sample is its stack. No
 * runtime provider: enabling Microsoft-Windows-DotNETRuntime wakes the
 * managed NativeRuntimeEventSource, and in a process's first sessions the
 * runtime's diagnostics thread then spends ~100 ms building EventSource
 * manifests in managed code, which the sampler caught as one more
 * "thread" of the app that dotnet-stack does not show (docs/agent/stacks.md).
 */
#include "stacks.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "mem.h"
#include "launcher/runtime/proc.h"
#include "symbols.h"

#define MAX_THREADS 4096
#define MAX_FRAMES 512

struct thread {
	uint64_t id;
	uint64_t *ips;
	size_t n;
	char name[16]; /* the OS thread's name (".NET TP Worker"), or "" */
};

struct stacks {
	struct thread *threads;
	size_t n_threads;
	struct symbols *sym;
};

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct stacks *s = ctx;
	bool managed;

	if (symbols_event(s->sym, e) || !symbols_sample(e, &managed))
		return 0;
	for (size_t i = 0; i < s->n_threads; i++)
		if (s->threads[i].id == e->thread_id)
			return 0; /* its first sample is its stack */
	if (s->n_threads == MAX_THREADS || e->stack_n == 0)
		return 0;
	s->threads = mem_realloc(s->threads, (s->n_threads + 1) * sizeof(*s->threads));
	s->threads[s->n_threads].name[0] = '\0';
	s->threads[s->n_threads].id = e->thread_id;
	s->threads[s->n_threads].n = e->stack_n < MAX_FRAMES ? e->stack_n : MAX_FRAMES;
	s->threads[s->n_threads].ips = mem_array(s->threads[s->n_threads].n, sizeof(uint64_t));
	memcpy(s->threads[s->n_threads].ips, e->stack, s->threads[s->n_threads].n * sizeof(uint64_t));
	s->n_threads++;
	return 0;
}

static void stacks_session(struct trace_config *c)
{
	static struct trace_provider p[1] = { { (char *)SYM_SAMPLER, 0, 4, NULL } };

	c->p = p;
	c->n = 1;
	c->buffer_mb = 64;
	c->rundown = SYM_RUNDOWN_KEYWORDS;
}

static int by_thread(const void *a, const void *b)
{
	const struct thread *x = a, *y = b;

	return (x->id > y->id) - (x->id < y->id);
}

int stacks_capture(struct port *port, const uint8_t cookie[16], int sample_ms, struct stacks **out,
		   struct err_msg *em)
{
	struct trace_config c;
	struct nettrace_callbacks cb = { .event = on_event };
	struct stacks *s = mem_zalloc(sizeof(*s));
	int rc;

	s->sym = symbols_new();
	stacks_session(&c);
	if ((rc = trace_run_cb(port, cookie, &c, sample_ms, NULL, &cb, s, NULL, em)) != 0) {
		stacks_free(s);
		return rc;
	}
	symbols_done(s->sym);
	mem_sort(s->threads, s->n_threads, sizeof(*s->threads), by_thread);
	*out = s;
	return 0;
}

/*
 * EventPipe carries no thread names; the kernel has them (the runtime names
 * its threads: ".NET TP Worker", ".NET Finalizer"). They are read from
 * /proc/PID/task/TID/comm when PID in our /proc is the runtime itself, which
 * holds when the agent shares the app's PID namespace (it started the app,
 * or the pod sets shareProcessNamespace): the process there must run the
 * executable the runtime reported. Otherwise names stay empty.
 */
void stacks_name_threads(struct stacks *s, uint64_t pid, const char *command_line)
{
	char path[64], exe[PATH_MAX];
	size_t want = command_line ? strcspn(command_line, " ") : 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%llu/exe", (unsigned long long)pid);
	if (want == 0 || (n = readlink(path, exe, sizeof(exe))) <= 0 || (size_t)n != want ||
	    memcmp(exe, command_line, want) != 0)
		return;
	for (size_t i = 0; i < s->n_threads; i++)
		proc_thread_name(pid, s->threads[i].id, s->threads[i].name, sizeof(s->threads[i].name));
}

size_t stacks_threads(const struct stacks *s)
{
	return s->n_threads;
}

/* Frame i of thread t: its method, or NULL for a run of native frames (only the first of a run is shown). */
static bool frame(const struct stacks *s, const struct thread *t, size_t i, const struct sym_method **m)
{
	*m = symbols_lookup(s->sym, t->ips[i]);
	return *m != NULL || i == 0 || symbols_lookup(s->sym, t->ips[i - 1]) != NULL;
}

void stacks_text(const struct stacks *s, struct buf *out)
{
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct thread *t = &s->threads[i];

		buf_printf(out, "%sThread: (0x%llX)\n", i ? "\n" : "", (unsigned long long)t->id);
		for (size_t k = 0; k < t->n; k++) {
			const struct sym_method *m;

			if (!frame(s, t, k, &m))
				continue;
			if (m)
				buf_printf(out, "  %s!%s.%s\n", symbols_module(s->sym, m->module), m->type, m->name);
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
			const struct sym_method *m;

			if (!frame(s, t, k, &m))
				continue;
			json_array_append_new(frames, m ? json_pack("{s:s, s:s, s:s, s:I}", "methodName", m->name, "typeName",
								     m->type, "moduleName", symbols_module(s->sym, m->module),
								     "methodToken", (json_int_t)m->token) :
							    json_pack("{s:s, s:s, s:s, s:I}", "methodName", "[NativeFrames]",
								      "typeName", "", "moduleName", "", "methodToken",
								      (json_int_t)0));
		}
		json_array_append_new(arr, json_pack("{s:I, s:s, s:o}", "threadId", (json_int_t)t->id, "threadName", t->name,
						     "frames", frames));
	}
	return arr;
}

void stacks_speedscope(const struct stacks *s, struct buf *out)
{
	json_t *frames = json_array(), *profiles = json_array(), *doc;
	char *text;
	size_t native = SIZE_MAX;
	size_t nm = symbols_count(s->sym), *index = mem_array(nm ? nm : 1, sizeof(size_t));

	for (size_t i = 0; i < nm; i++)
		index[i] = SIZE_MAX;
	for (size_t i = 0; i < s->n_threads; i++) {
		const struct thread *t = &s->threads[i];
		json_t *sample = json_array();
		char name[64];

		for (size_t k = t->n; k-- > 0;) { /* speedscope lists a sample root first */
			const struct sym_method *m;
			size_t *at;

			if (!frame(s, t, k, &m))
				continue;
			at = m ? &index[symbols_index(s->sym, m)] : &native;
			if (*at == SIZE_MAX) {
				char *fn = m ? mem_printf("%s.%s", m->type, m->name) : mem_strdup("[NativeFrames]");

				*at = json_array_size(frames);
				json_array_append_new(frames, json_pack("{s:s, s:s}", "name", fn, "file",
									m ? symbols_module(s->sym, m->module) : ""));
				free(fn);
			}
			json_array_append_new(sample, json_integer((json_int_t)*at));
		}
		snprintf(name, sizeof(name), "%s%sThread (0x%llX)", t->name, t->name[0] ? " " : "", (unsigned long long)t->id);
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
	free(s->threads);
	symbols_free(s->sym);
	free(s);
}
