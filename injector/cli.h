/*
 * cli.h - `diagport inject` and `diagport uninject`. Each takes the
 * subcommand's argc/argv (argv[0] is the subcommand) and returns the exit
 * status documented in docs/INJECTION.md ("Exit status"): 0 done, 1 refused by the rules, 2 usage,
 * 3 unreadable input, 4 input over a cap, 5 I/O error, 70 internal error.
 */
#ifndef DP_INJ_CLI_H
#define DP_INJ_CLI_H

int inj_cli_inject(int argc, char **argv);
int inj_cli_uninject(int argc, char **argv);
/* `diagport macro`: one CloudFormation macro event in, the response out (0 success, 1 failure). */
int inj_cli_macro(int argc, char **argv);

#endif
