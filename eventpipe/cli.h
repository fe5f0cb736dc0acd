/*
 * cli.h - `diagport nettrace`: a .nettrace file read with the streaming reader (nettrace.h).
 */
#ifndef DP_NETTRACE_CLI_H
#define DP_NETTRACE_CLI_H

/* `diagport nettrace stats|events FILE|-`: 0, 1 unreadable, 2 usage, 3 not a whole nettrace stream. */
int nettrace_cli(int argc, char **argv);

#endif
