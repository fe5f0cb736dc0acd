/*
 * seccomp_deny.c - run a program under a seccomp filter that refuses one
 * system call with EPERM and allows the rest, as a container runtime's
 * default profile refuses perf_event_open to a container without
 * CAP_PERFMON (Docker's and containerd's profiles answer EPERM). The filter
 * is inherited across execve, as the runtime's is.
 *   seccomp_deny SYSCALL PROGRAM [ARGS...]
 */
#include <errno.h>
#include <seccomp.h>
#include <stdio.h>
#include <sys/prctl.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	scmp_filter_ctx ctx;
	int nr;

	if (argc < 3) {
		fprintf(stderr, "usage: seccomp_deny SYSCALL PROGRAM [ARGS...]\n");
		return 2;
	}
	nr = seccomp_syscall_resolve_name(argv[1]);
	ctx = seccomp_init(SCMP_ACT_ALLOW);
	if (nr == __NR_SCMP_ERROR || ctx == NULL || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
	    seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) != 0 || seccomp_load(ctx) != 0) {
		fprintf(stderr, "seccomp_deny: cannot install the filter for %s\n", argv[1]);
		return 2;
	}
	execvp(argv[2], argv + 2);
	perror("seccomp_deny: execvp");
	return 2;
}
