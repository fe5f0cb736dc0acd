/*
 * stacks.h - /stacks: the call stack of every managed thread of a process,
 * now, without loading anything into it. A short EventPipe session with the
 * sample profiler (one sample per thread is enough) and the runtime's
 * method rundown; each sampled address is named by the method whose code
 * range holds it (methods JIT-compiled during the session come from the
 * runtime's own MethodLoad events).
 */
#ifndef DP_STACKS_H
#define DP_STACKS_H

#include <jansson.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"
#include "launcher/runtime/port.h"

struct stacks;

/*
 * Sample runtime `cookie` for sample_ms, then stop (the rundown names the
 * code). *out is new. DP_EREMOTE and others with em as trace_start; DP_EIO
 * when the stream did not end whole.
 */
int stacks_capture(struct port *port, const uint8_t cookie[16], int sample_ms, struct stacks **out,
		   struct err_msg *em);
/*
 * Name the threads from /proc/PID/task/TID/comm, when PID in this agent's
 * /proc runs the executable command_line starts with (the runtime's own
 * ProcessInfo); else leave them unnamed.
 */
void stacks_name_threads(struct stacks *s, uint64_t pid, const char *command_line);
size_t stacks_threads(const struct stacks *s);
/* dotnet-monitor's text: "Thread: (0xID)" then one "  module!Type.Method" line per frame, innermost first. */
void stacks_text(const struct stacks *s, struct buf *out);
/* dotnet-monitor's JSON: [{"threadId","threadName","frames":[{"methodName","typeName","moduleName","methodToken"}]}] (new). */
json_t *stacks_json(const struct stacks *s);
/* A speedscope document: one "sampled" profile per thread, one sample of its stack, root first. */
void stacks_speedscope(const struct stacks *s, struct buf *out);
void stacks_free(struct stacks *s); /* accepts NULL */

#endif
