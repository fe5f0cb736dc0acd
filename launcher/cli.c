/*
 * cli.c - `diagport launch [--socket PATH] [-- CMD ARGS...]`.
 *
 * Sidecar mode (no command): own the diagnostic port until SIGTERM/SIGINT.
 * Init mode (a command after --): also start the app with
 * DOTNET_DiagnosticPorts pointing at our socket (appended to any value it
 * already has), forward SIGTERM/SIGINT/SIGHUP/SIGQUIT/SIGUSR1/SIGUSR2 to it,
 * reap orphans when we are PID 1, and exit with the app's status.
 *
 * Not built yet (issue 3 continues): the HTTP API and the options that go
 * with it (--urls, --dumps, --auth-token-file, --no-auth, --config). They are
 * refused with a message rather than silently ignored.
 */
#include "cli.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "mem.h"
#include "port.h"

#define DEFAULT_SOCKET "/diag/port"

/* Signals we take with sigwaitinfo: blocked in every thread before any thread starts. */
static const int handled[] = { SIGTERM, SIGINT, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, SIGCHLD };

static void handled_set(sigset_t *set)
{
	sigemptyset(set);
	for (size_t i = 0; i < sizeof(handled) / sizeof(handled[0]); i++)
		sigaddset(set, handled[i]);
}

static void log_event(const char *line)
{
	fprintf(stderr, "%s\n", line);
}

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport launch [--socket PATH] [-- COMMAND [ARGS...]]\n\n"
		   "Owns the .NET diagnostic port at PATH (default %s): every runtime that connects is\n"
		   "resumed at once and kept attached. With a command, also starts it with\n"
		   "DOTNET_DiagnosticPorts pointing here, forwards signals, and exits with its status.\n",
		   DEFAULT_SOCKET);
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

static int run_child(char **cmd, const char *socket, const sigset_t *old)
{
	char *ports = child_ports(socket);
	sigset_t set;
	pid_t child;
	int status = 0;

	handled_set(&set);
	child = fork();
	if (child < 0) {
		fprintf(stderr, "diagport: cannot start %s: %s\n", cmd[0], strerror(errno));
		free(ports);
		return 127;
	}
	if (child == 0) {
		sigprocmask(SIG_SETMASK, old, NULL);
		setenv("DOTNET_DiagnosticPorts", ports, 1);
		execvp(cmd[0], cmd);
		fprintf(stderr, "diagport: cannot run %s: %s\n", cmd[0], strerror(errno));
		_exit(127);
	}
	free(ports);
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

int launch_cli(int argc, char **argv)
{
	const char *socket = getenv("DIAGPORT_SOCKET") ? getenv("DIAGPORT_SOCKET") : DEFAULT_SOCKET;
	char **cmd = NULL;
	struct port_config cfg = { 0 };
	struct port *p = NULL;
	struct err_msg em;
	sigset_t old_mask;
	int rc;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--") == 0) {
			if (i + 1 == argc) {
				fprintf(stderr, "diagport: launch: nothing after --\n");
				return 2;
			}
			cmd = argv + i + 1;
			break;
		} else if (strcmp(argv[i], "--socket") == 0 && i + 1 < argc) {
			socket = argv[++i];
		} else if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--urls") == 0 || strcmp(argv[i], "--dumps") == 0 ||
			   strcmp(argv[i], "--auth-token-file") == 0 || strcmp(argv[i], "--no-auth") == 0 ||
			   strcmp(argv[i], "--config") == 0 || strcmp(argv[i], "--dumps-limit") == 0) {
			fprintf(stderr, "diagport: launch: %s belongs to the HTTP API, which this build does not have yet\n",
				argv[i]);
			return 2;
		} else {
			fprintf(stderr, "diagport: launch: unknown argument '%s'\n", argv[i]);
			usage(stderr);
			return 2;
		}
	}
	cfg.path = socket;
	cfg.on_event = log_event;
	{
		sigset_t set;

		handled_set(&set);
		sigprocmask(SIG_BLOCK, &set, &old_mask);
	}
	if (port_open(&cfg, &p, &em) != 0 || port_start(p, &em) != 0) {
		fprintf(stderr, "diagport: launch: %s\n", em.text);
		port_free(p);
		return 1;
	}
	if (cmd) {
		rc = run_child(cmd, socket, &old_mask);
	} else {
		sigset_t stop;
		int sig;

		sigemptyset(&stop);
		sigaddset(&stop, SIGTERM);
		sigaddset(&stop, SIGINT);
		do
			sig = sigwaitinfo(&stop, NULL);
		while (sig < 0);
		rc = 0;
	}
	port_free(p);
	return rc;
}
