/*
 * main_probe.c - how long a .NET app takes from exec to its first line of
 * Main, with and without something in its environment, for bench/agent.sh
 * (issue 3). Not part of diagport; built by the script.
 *
 *   main_probe [-n RUNS] -e NAME=VALUE [-e NAME=VALUE ...] -- COMMAND [ARGS...]
 *
 * The app must print "MAIN <pid> <unix time in ms, fractional>" as the first
 * thing Main does (tests/apps/console does). Variant 0 runs COMMAND with
 * every NAME given by -e removed from its environment; variant k runs it with
 * the k-th -e set. Runs are interleaved (0, 1, ..., 0, 1, ...), RUNS of each,
 * so drift on a shared machine falls on all variants alike.
 *
 * The child stores CLOCK_REALTIME in a shared page just before execve; "main"
 * is the app's MAIN time minus that, "exit" is the time until it was reaped.
 * Prints one line per run, then per variant the median, p90, min and max of
 * "main" and the median of "exit", and for each variant its median minus
 * variant 0's and the median of its paired differences (same round).
 * Exits 0 whenever it could run the command; 2 on bad usage.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "stats.h"

#define MAX_RUNS 500
#define MAX_VARIANTS 4

static double wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void usage(void)
{
	fprintf(stderr, "usage: main_probe [-n RUNS] -e NAME=VALUE [-e ...] -- COMMAND [ARGS...]\n");
	exit(2);
}

/*
 * One run of variant v. Sets *main_ms and *exit_ms; false when the app
 * printed no MAIN line.
 */
static bool run_once(char **cmd, char **sets, int nsets, int v, volatile double *t_exec, double *main_ms,
		     double *exit_ms)
{
	char line[256];
	double t_main = 0;
	int pfd[2];
	pid_t pid;
	FILE *out;

	if (pipe2(pfd, O_CLOEXEC) != 0)
		return false;
	*t_exec = 0;
	pid = fork();
	if (pid < 0) {
		perror("main_probe: fork");
		exit(1);
	}
	if (pid == 0) {
		int null = open("/dev/null", O_RDWR);

		for (int i = 0; i < nsets; i++) {
			char name[128];

			snprintf(name, sizeof(name), "%.*s", (int)strcspn(sets[i], "="), sets[i]);
			unsetenv(name);
		}
		if (v > 0)
			putenv(sets[v - 1]);
		dup2(null, 0);
		dup2(pfd[1], 1);
		dup2(null, 2);
		*t_exec = wall_ms();
		execvp(cmd[0], cmd);
		_exit(127);
	}
	close(pfd[1]);
	out = fdopen(pfd[0], "r");
	while (fgets(line, sizeof(line), out)) {
		double ms;

		if (t_main == 0 && sscanf(line, "MAIN %*d %lf", &ms) == 1)
			t_main = ms;
	}
	fclose(out);
	waitpid(pid, NULL, 0);
	*exit_ms = wall_ms() - *t_exec;
	if (t_main == 0)
		return false;
	*main_ms = t_main - *t_exec;
	return true;
}

int main(int argc, char **argv)
{
	static double main_ms[MAX_VARIANTS][MAX_RUNS], exit_ms[MAX_VARIANTS][MAX_RUNS];
	static double round_ms[MAX_VARIANTS][MAX_RUNS], pair_ms[MAX_RUNS];
	char *sets[MAX_VARIANTS - 1];
	int runs = 20, nsets = 0, opt, ok[MAX_VARIANTS] = { 0 };
	double med[MAX_VARIANTS] = { 0 };
	volatile double *t_exec;

	while ((opt = getopt(argc, argv, "n:e:")) != -1) {
		if (opt == 'n')
			runs = atoi(optarg);
		else if (opt == 'e' && nsets < MAX_VARIANTS - 1 && strchr(optarg, '='))
			sets[nsets++] = optarg;
		else
			usage();
	}
	if (optind >= argc || nsets == 0 || runs < 1 || runs > MAX_RUNS)
		usage();
	t_exec = mmap(NULL, sizeof(*t_exec), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
	if (t_exec == MAP_FAILED)
		return 1;

	for (int r = 1; r <= runs; r++) {
		for (int v = 0; v <= nsets; v++) {
			double m, e;

			round_ms[v][r - 1] = -1;
			if (run_once(argv + optind, sets, nsets, v, t_exec, &m, &e)) {
				round_ms[v][r - 1] = m;
				main_ms[v][ok[v]] = m;
				exit_ms[v][ok[v]++] = e;
				printf("run %d variant %d: main %.2f ms, exit %.2f ms\n", r, v, m, e);
			} else {
				printf("run %d variant %d: no MAIN line\n", r, v);
			}
			fflush(stdout);
		}
	}
	for (int v = 0; v <= nsets; v++) {
		const char *label = v ? sets[v - 1] : "none";

		if (ok[v] == 0) {
			printf("variant %d (%s): no run reached Main\n", v, label);
			continue;
		}
		stats_sort(main_ms[v], ok[v]);
		stats_sort(exit_ms[v], ok[v]);
		med[v] = stats_pct(main_ms[v], ok[v], 50);
		printf("variant %d (%s): %d runs; exec to Main median %.2f ms, p90 %.2f, min %.2f, max %.2f; "
		       "exec to exit median %.2f ms\n",
		       v, label, ok[v], med[v], stats_pct(main_ms[v], ok[v], 90), main_ms[v][0], main_ms[v][ok[v] - 1],
		       stats_pct(exit_ms[v], ok[v], 50));
	}
	for (int v = 1; v <= nsets; v++) {
		int np = 0;

		if (ok[0] == 0 || ok[v] == 0)
			continue;
		for (int r = 0; r < runs; r++)
			if (round_ms[0][r] >= 0 && round_ms[v][r] >= 0)
				pair_ms[np++] = round_ms[v][r] - round_ms[0][r];
		stats_sort(pair_ms, np);
		printf("difference: variant %d - variant 0 = %+.2f ms (medians); median of %d paired differences %+.2f ms\n",
		       v, med[v] - med[0], np, stats_pct(pair_ms, np, 50));
	}
	return 0;
}
