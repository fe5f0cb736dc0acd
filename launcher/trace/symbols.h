/*
 * symbols.h - naming code addresses from an EventPipe stream, with nothing
 * loaded into the app: the method ranges of the runtime's MethodLoadVerbose
 * (methods compiled during the session) and the rundown's
 * MethodDCEndVerbose (every method, written when the session stops), and
 * the modules of ModuleLoad and ModuleDCEnd. Used by /stacks and the CPU
 * profiles.
 */
#ifndef DP_SYMBOLS_H
#define DP_SYMBOLS_H

#include <stdbool.h>
#include <stdint.h>

#include "eventpipe/nettrace.h"
#include "trace.h"

#define SYM_RUNTIME "Microsoft-Windows-DotNETRuntime"
#define SYM_RUNDOWN "Microsoft-Windows-DotNETRuntimeRundown"
#define SYM_SAMPLER "Microsoft-DotNETCore-SampleProfiler"
#define SYM_RUNDOWN_KEYWORDS 0x138ull /* rundown: Loader 0x8, Jit 0x10, NGen 0x20, End 0x100 (no IL maps) */

struct symbols;

struct sym_method {
	uint64_t start, size, module;
	uint32_t token;
	char *type, *name; /* "System.Threading.Monitor", "Enter" */
	char *sig;         /* "instance void  (class System.Object)", with symbols_new_sigs only; else NULL */
};

/*
 * The session a sampled profile needs: the sample profiler, the runtime's
 * Jit and Loader events at Verbose, rundown as above. Static: nothing to free.
 */
void symbols_session(struct trace_config *c);
/* The same without the sample profiler: only names (the perf engine's samples come from the kernel). */
void symbols_session_names(struct trace_config *c);

struct symbols *symbols_new(void);
/* The same, keeping each method's signature (the exception history's parameter types). */
struct symbols *symbols_new_sigs(void);
/* Take what it needs from an event (a method or a module); true when the event was one of those. */
bool symbols_event(struct symbols *s, const struct nettrace_event *e);
/* Once the stream has ended: make lookups possible. */
void symbols_done(struct symbols *s);
/* The method whose code holds ip (borrowed), or NULL: native code, or code no event named. */
const struct sym_method *symbols_lookup(const struct symbols *s, uint64_t ip);
/* A module's file name ("System.Private.CoreLib.dll"), or "" (borrowed). */
const char *symbols_module(const struct symbols *s, uint64_t module);
/* Index of m among the methods (0..symbols_count-1), for tables keyed by method. */
size_t symbols_index(const struct symbols *s, const struct sym_method *m);
size_t symbols_count(const struct symbols *s);
/* Method i (0..symbols_count-1) after symbols_done, in address order (borrowed). */
const struct sym_method *symbols_at(const struct symbols *s, size_t i);
void symbols_free(struct symbols *s); /* accepts NULL */

/* A SampleProfiler sample: true for event id 0 of the sampler, with *managed set when the thread ran managed code. */
bool symbols_sample(const struct nettrace_event *e, bool *managed);

#endif
