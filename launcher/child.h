/*
 * child.h - `diagport launch -- CMD ARGS...` (init mode): the app, run as the
 * agent's child (cli.c parses the command line and calls in).
 */
#ifndef DP_LAUNCH_CHILD_H
#define DP_LAUNCH_CHILD_H

#include <signal.h>
#include <stdbool.h>

/* The signals the agent takes with sigwaitinfo (and forwards to the app), into *set. */
void child_signals(sigset_t *set);
/* How the app is started. */
struct child_opts {
	const char *socket;     /* DOTNET_DiagnosticPorts names it (appended to any value, never twice) */
	const char *dumps_dir;  /* crash dumps go there (crashes.h's CRASH_NAME) */
	int crash_dump_type;    /* DOTNET_DbgMiniDumpType (1 Mini .. 4 Full), or 0: no crash dumps set up */
	const sigset_t *old;    /* the app's signal mask */
	bool sandbox;           /* the agent's sandbox entered after the fork */
};
/*
 * Runs cmd as o says. The crash settings (DOTNET_DbgEnableMiniDump, DOTNET_DbgMiniDumpType,
 * DOTNET_DbgMiniDumpName, DOTNET_EnableCrashReport) are set only when the environment sets none of them
 * (the app's own choice wins, whole). Forwards signals to it and reaps orphans until it exits. Returns its
 * exit status: its code, 128+N when killed by signal N, 127 when it could not be run; *pid and *status its
 * pid and wait status.
 */
int child_run(char **cmd, const struct child_opts *o, pid_t *pid, int *status);

#endif
