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
/*
 * Runs cmd with DOTNET_DiagnosticPorts naming socket (appended to any value it has, never twice) and the
 * signal mask old, enters the agent's sandbox after the fork when sandbox, forwards signals to it and reaps
 * orphans until it exits. Returns its exit status: its code, 128+N when killed by signal N, 127 when it
 * could not be run.
 */
int child_run(char **cmd, const char *socket, const sigset_t *old, bool sandbox);

#endif
