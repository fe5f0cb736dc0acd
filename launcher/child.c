/*
 * child.c - init mode's app (child.h): started with DOTNET_DiagnosticPorts
 * pointing at the agent's socket, sent the signals the agent takes, reaped
 * with every orphan while the agent is PID 1, and its exit status returned.
 */
#include "child.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

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

int child_run(char **cmd, const char *socket, const sigset_t *old, bool sandbox)
{
	char *ports = child_ports(socket);
	sigset_t set;
	pid_t child;
	int status = 0;

	child_signals(&set);
	child = fork();
	if (child < 0) {
		log_error("cannot start the app", LOG_STR("command", cmd[0]), LOG_STR("error", strerror(errno)));
		free(ports);
		return 127;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		setenv("DOTNET_DiagnosticPorts", ports, 1);
		execvp(cmd[0], cmd);
		log_error("cannot run the app", LOG_STR("command", cmd[0]), LOG_STR("error", strerror(errno)));
		_exit(127);
	}
	free(ports);
	if (sandbox)
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
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	return 128 + WTERMSIG(status);
}

