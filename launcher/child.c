/*
 * child.c - init mode's app (child.h): started with DOTNET_DiagnosticPorts
 * pointing at the agent's socket and the runtime's crash settings (unless it
 * has its own), sent the signals the agent takes, reaped with every orphan
 * while the agent is PID 1, and its exit status returned.
 */
#include "child.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "launcher/crashes/crashes.h"
#include "log.h"
#include "mem.h"
#include "sandbox.h"

/* Signals we take with sigwaitinfo: blocked in every thread before any thread starts. */
static const int handled[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };

void child_signals(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
		sigaddset(set, handled[i]);
}

/* DOTNET_DiagnosticPorts for the child: ours appended to what it had, never twice. */
static char *child_ports(const char *socket)
{
	const char *old = getenv("DOTNET_DiagnosticPorts");
	char *ours = mem_printf("%s,nosuspend,connect", socket);
	char *v;

	if (old == NULL || *old == '\0')
		return ours;
	if (strstr(old, socket) != NULL) {
		free(ours);
		return mem_strdup(old);
	}
	v = mem_printf("%s;%s", old, ours);
	free(ours);
	return v;
}

/*
 * The runtime's crash settings for the app, unless it set any of them itself, under either of the
 * runtime's prefixes (its choice wins, whole: the injector's rule too).
 */
static void crash_env(const struct child_opts *o)
{
	static const char *const vars[] = { "DbgEnableMiniDump", "DbgMiniDumpType", "DbgMiniDumpName",
					    "EnableCrashReport" };
	char type[8], *name, var[64];

	if (o->crash_dump_type == 0 || o->dumps_dir == NULL)
		return;
	for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
		snprintf(var, sizeof(var), "DOTNET_%s", vars[i]);
		if (getenv(var))
			return;
		snprintf(var, sizeof(var), "COMPlus_%s", vars[i]);
		if (getenv(var))
			return;
	}
	snprintf(type, sizeof(type), "%d", o->crash_dump_type);
	name = mem_printf("%s/%s", o->dumps_dir, CRASH_NAME);
	setenv("DOTNET_DbgEnableMiniDump", "1", 1);
	setenv("DOTNET_DbgMiniDumpType", type, 1);
	setenv("DOTNET_DbgMiniDumpName", name, 1);
	setenv("DOTNET_EnableCrashReport", "1", 1);
	free(name);
}

int child_run(char **cmd, const struct child_opts *o, pid_t *pid, int *status_out)
{
	char *ports = child_ports(o->socket);
	sigset_t set;
	pid_t child;
	int status = 0;

	child_signals(&set);
	child = fork();
	if (child < 0) {
		log_error("cannot start the app", LOG_STR("command", cmd[0]), LOG_STR("error", strerror(errno)));
		free(ports);
		*pid = 0;
		*status_out = 127 << 8;
		return 127;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, o->old, NULL);
		setenv("DOTNET_DiagnosticPorts", ports, 1);
		crash_env(o);
		execvp(cmd[0], cmd);
		log_error("cannot run the app", LOG_STR("command", cmd[0]), LOG_STR("error", strerror(errno)));
		_exit(127);
	}
	free(ports);
	*pid = child;
	if (o->sandbox)
		sandbox_enter(SANDBOX_AGENT); /* after the fork: the app must not inherit the filter */
	for (;;) {
		siginfo_t si;
		int sig = sigwaitinfo(&set, &si);
		pid_t w;

		if (sig < 0)
			continue;
		if (sig != SIGCHLD) {
			kill(child, sig);
			continue;
		}
		/* Reap everything that exited: our child, and orphans when we are PID 1. */
		while ((w = waitpid(-1, &status, WNOHANG)) > 0)
			if (w == child)
				goto done;
	}
done:
	*status_out = status;
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

