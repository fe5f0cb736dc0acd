/*
 * cli.h - the fleet client's subcommands (cli.c): `diagport ps`,
 * `diagport capture KIND` and `diagport ui`, argv as main gives it (argv[0] the subcommand).
 */
#ifndef DP_FLEET_CLI_H
#define DP_FLEET_CLI_H

int fleet_ps_cli(int argc, char **argv);
int fleet_capture_cli(int argc, char **argv);
int fleet_ui_cli(int argc, char **argv);

/* Messages say `kubectl diagport` instead of `diagport` (the binary runs as kubectl-diagport). */
void fleet_cli_as_kubectl_plugin(void);

#endif
