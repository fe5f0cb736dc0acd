/*
 * proc.h - one IPC command to a runtime, answered at once: its environment
 * (/env) and its perf map (/perfmap). Each writes the HTTP answer itself.
 */
#ifndef DP_PROC_H
#define DP_PROC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "http/httpd.h"
#include "ipc.h"
#include "port.h"

/* GET /env: the runtime's environment as one JSON object (ProcessEnvironment, .NET 5+). */
void proc_env(struct port *port, const struct port_runtime *p, struct httpd_req *r);
/*
 * POST /perfmap?type=PerfMap|JitDump|All: EnablePerfMap, so that `perf` can
 * name JIT-compiled frames (the runtime writes /tmp/perf-PID.map, or
 * /tmp/jit-PID.dump, or both, in its own filesystem); DELETE /perfmap:
 * DisablePerfMap. type (1 All, 2 JitDump, 3 PerfMap) only when enabling.
 */
void proc_perfmap(struct port *port, const struct port_runtime *p, struct httpd_req *r, bool enable, unsigned type);
/*
 * The same command without an HTTP answer: 0; DP_EUNSUPPORTED (the runtime
 * does not know it: before .NET 8, NativeAOT) or DP_EREMOTE (it refused)
 * with its HRESULT in *hresult; port_take's and ipc_transact's codes.
 */
int proc_perfmap_set(struct port *port, const uint8_t cookie[16], bool enable, unsigned type, uint32_t *hresult);
/*
 * The runtime's pid in the agent's pid namespace, from the credentials of a
 * connection to it (SO_PEERCRED): 0 in *pid when it is not in that
 * namespace. 0, or port_take's codes.
 */
int proc_local_pid(struct port *port, const uint8_t cookie[16], uint64_t *pid);
/* The kernel's name of thread tid of pid (tid 0: of the process) into out, or "" (pids of the agent's namespace). */
void proc_thread_name(uint64_t pid, uint64_t tid, char *out, size_t max);
/*
 * The runtime's ProcessInfo as it is now (ProcessInfo2, else ProcessInfo):
 * its command line is whole only once Main runs (before, the host's path
 * alone), where the port's copy was asked at attach. 0 with *out (new
 * strings); port_take's codes (within timeout_ms), DP_EUNSUPPORTED, DP_EIO.
 */
int proc_info(struct port *port, const uint8_t cookie[16], int timeout_ms, struct ipc_process_info *out);
/* The type a ?type= names (NULL: PerfMap), or 0. */
unsigned proc_perfmap_type(const char *name);

#endif
