/*
 * main.c - the diagport binary: picks the subcommand and calls into its
 * component. Argument parsing for each subcommand lives with the component
 * (injector/cli.c, ...); nothing here but dispatch.
 */
#include <stdio.h>
#include <string.h>

#include "eventpipe/cli.h"
#include "fleet/cli.h"
#include "injector/cli.h"
#include "launcher/cli.h"
#include "webhook/cli.h"
#include "mem.h"

struct subcommand {
	const char *name;
	int (*run)(int argc, char **argv);
	const char *summary;
};

static const struct subcommand subcommands[] = {
	{ "inject", inj_cli_inject, "add diagnostics to Kubernetes objects, ECS task definitions, CloudFormation, Compose files" },
	{ "uninject", inj_cli_uninject, "remove exactly what inject added" },
	{ "macro", inj_cli_macro, "the CloudFormation macro: one event in, the response out" },
	{ "health", health_cli, "exit 0 when the local agent is ready (for probes without a shell)" },
	{ "launch", launch_cli, "the in-container agent: own the diagnostic port (and optionally start the app)" },
	{ "webhook", webhook_cli, "the admission webhook: the server, `webhook review`, `webhook certs`" },
	{ "nettrace", nettrace_cli, "read a .nettrace file (an EventPipe trace): `nettrace stats FILE`" },
	{ "ps", fleet_ps_cli, "the .NET processes behind pods, ECS tasks or agents' URLs" },
	{ "capture", fleet_capture_cli, "dumps, traces, stacks, ... from many pods or tasks at once" },
	{ "ui", fleet_ui_cli, "a web page on 127.0.0.1: processes, live counters, captures, flame graphs, heap diffs" },
};

static void usage(FILE *f)
{
	fprintf(f, "usage: diagport COMMAND [ARGS...]\n\ncommands:\n");
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		fprintf(f, "  %-10s %s\n", subcommands[i].name, subcommands[i].summary);
	fprintf(f, "\n`diagport COMMAND --help` describes a command. Version %s.\n", DP_VERSION);
}

int main(int argc, char **argv)
{
	mem_install();
	{ /* the Lambda artefact runs this binary as its bootstrap: that is the macro */
		const char *base = strrchr(argv[0], '/');

		if (strcmp(base ? base + 1 : argv[0], "bootstrap") == 0)
			return inj_cli_macro(argc, argv);
		if (strcmp(base ? base + 1 : argv[0], "kubectl-diagport") == 0)
			fleet_cli_as_kubectl_plugin(); /* `kubectl diagport ps ...` runs kubectl-diagport ps ... */
	}
	if (argc < 2) {
		usage(stderr);
		return 2;
	}
	if (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
		usage(stdout);
		return 0;
	}
	if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
		printf("diagport %s\n", DP_VERSION);
		return 0;
	}
	for (size_t i = 0; i < sizeof(subcommands) / sizeof(subcommands[0]); i++)
		if (strcmp(argv[1], subcommands[i].name) == 0)
			return subcommands[i].run(argc - 1, argv + 1);
	fprintf(stderr, "diagport: unknown command '%s'\n", argv[1]);
	usage(stderr);
	return 2;
}
