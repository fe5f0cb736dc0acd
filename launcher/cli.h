/*
 * cli.h - `diagport launch`: the in-container agent. Returns the exit status
 * (in init mode, the app's: its code, or 128+N when killed by signal N).
 */
#ifndef DP_LAUNCH_CLI_H
#define DP_LAUNCH_CLI_H

#define LAUNCH_DEFAULT_PORT 52323 /* the agent's HTTP port (fixed names: diag-http) */

int launch_cli(int argc, char **argv);
/* `diagport health [--port N]` (health.c): 0 when the local agent answers /healthz. */
int health_cli(int argc, char **argv);

#endif
