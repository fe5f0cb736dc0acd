/*
 * sandbox.h - the seccomp allowlist a daemon enters once it is set up
 * (sockets bound, configuration read, child started). After it, a system
 * call outside the daemon's list fails with EPERM instead of running.
 *
 * Entering is all or nothing: any failure is fatal (with file and line), so a
 * daemon never runs believing it is sandboxed when it is not.
 */
#ifndef DP_SANDBOX_H
#define DP_SANDBOX_H

#include <stdbool.h>

enum sandbox_profile {
	SANDBOX_AGENT,   /* diagport launch */
	SANDBOX_WEBHOOK, /* diagport webhook: the agent's list, plus eventfd2 and prctl(PR_SET_NAME) for libmicrohttpd */
	SANDBOX_EGRESS,  /* the agent's egress process: network sockets, files read-only, nothing else */
};

/* Set no_new_privs and load the profile's filter into every thread of the process. */
void sandbox_enter(enum sandbox_profile p);
/* True when this process runs under a seccomp filter (from /proc/self/status). */
bool sandbox_active(void);

#endif
