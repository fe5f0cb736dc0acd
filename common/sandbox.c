/*
 * sandbox.c - seccomp allowlists (libseccomp), one per daemon (sandbox.h).
 *
 * The agent's list is what `diagport launch` was seen to use (strace over
 * every route, both dump transports, init and sidecar modes, --connect-dir)
 * once set up: threads, sockets already bound, reading and writing, the dump
 * pipe and staging file, sendfile, signals and waiting for its child, and
 * --connect-dir's listing of a directory and connecting to the Unix sockets
 * in it. socket() is allowed for AF_UNIX stream sockets only, so the agent
 * cannot open a network connection. No exec, no bind or listen (no new
 * listening sockets), no ptrace, no mount, no module or key syscalls.
 *
 * A call outside the list fails with EPERM rather than killing the process:
 * a stray call (a library's new syscall after an upgrade) then fails visibly
 * in a log line instead of killing the agent in the middle of a dump.
 *
 * The egress process (launcher/capture/eproc.h) gets a list of its own: threads,
 * reading files it opens read-only (CA bundle, token files, /etc/hosts,
 * /etc/resolv.conf), and sockets of the Internet families (TCP to the stores
 * and the credential endpoints, UDP for DNS) and netlink (getaddrinfo's
 * look at the interfaces), never AF_UNIX: it cannot reach a runtime's
 * socket. It writes only to what it was handed (its pipes, the log).
 */
#include "sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <seccomp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>

#include "errors.h"

static const char *const agent_calls[] = {
	/* memory and threads */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "clone", "clone3", "set_robust_list", "rseq",
	"futex", "exit", "exit_group", "sched_yield", "getrandom", "gettid", "getpid", "getppid",
	/* a wait interrupted by SIGSTOP/SIGCONT (or a debugger) is resumed by the kernel through this */
	"restart_syscall",
	/* time */
	"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday",
	/* signals and the child (init mode) */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "rt_sigtimedwait", "kill", "tgkill", "wait4", "waitid",
	/* files: dumps staging and pipe, token already read */
	"openat", "close", "read", "readv", "pread64", "write", "writev", "lseek", "fstat", "newfstatat", "statx",
	"fcntl", "unlink", "unlinkat", "mknodat", "chmod", "fchmodat", "getdents64", "pipe2", "ioctl",
	/* /stacks: is /proc/PID the runtime (its exe), to read its threads' names */
	"readlink", "readlinkat",
	/* dumps through the pipe: staging and egress files, atomic publish */
	"splice", "fsync", "fdatasync", "rename", "renameat", "renameat2", "link", "linkat",
	/* ... the staging volume's free space (whether a dump's head waits for 32 MiB staged) */
	"fstatfs",
	/* sockets already bound: accept and talk */
	"accept4", "poll", "ppoll", "select", "pselect6", "epoll_create1", "epoll_ctl", "epoll_wait", "epoll_pwait",
	"recvfrom", "recvmsg", "sendto", "sendmsg", "sendfile", "shutdown", "setsockopt", "getsockopt",
	"getsockname", "getpeername",
	/* --connect-dir: connect to runtimes' default sockets (socket() itself is below, AF_UNIX only) */
	"connect",
	/* CPU profiles with engine=perf: sampling the app's threads on the CPUs it may run on */
	"perf_event_open", "sched_getaffinity",
	/* a dump's download, while createdump still writes, yields the CPU to it (its own thread's nice) */
	"setpriority",
	/* ... reading the app's libraries and perf map inside its root (RESOLVE_IN_ROOT) */
	"openat2",
	NULL,
};

static const char *const egress_calls[] = {
	/* memory and threads */
	"brk", "mmap", "munmap", "mremap", "mprotect", "madvise", "clone", "clone3", "set_robust_list", "rseq",
	"futex", "exit", "exit_group", "sched_yield", "getrandom", "gettid", "getpid", "restart_syscall",
	/* time */
	"clock_gettime", "clock_nanosleep", "nanosleep", "gettimeofday",
	/* signals (abort), identity (TLS library probes) */
	"rt_sigaction", "rt_sigprocmask", "rt_sigreturn", "tgkill", "getuid", "geteuid", "getgid", "getegid", "uname",
	/* files: read what is opened read-only (below), write to the pipes and the log it holds */
	"close", "read", "readv", "pread64", "write", "writev", "lseek", "fstat", "newfstatat", "statx", "fcntl",
	"readlink",
	/* sockets (socket() itself is below: Internet families and netlink only) */
	"connect", "poll", "ppoll", "select", "pselect6", "recvfrom", "recvmsg", "sendto", "sendmsg", "sendmmsg",
	"shutdown", "setsockopt", "getsockopt", "getsockname", "getpeername", "bind",
	NULL,
};

#if defined(__SANITIZE_ADDRESS__)
/*
 * AddressSanitizer's runtime, in `make SANITIZER=address` builds only: every
 * new thread sets up an alternate signal stack and reads its affinity, and
 * LeakSanitizer's exit check opens /proc/self/task and ptraces the threads.
 */
static const char *const sanitizer_calls[] = { "sigaltstack", "sched_getaffinity", "open", "getdents", "ptrace", "prctl",
					       "readlink", NULL };
#else
static const char *const sanitizer_calls[] = { NULL };
#endif

static void allow(scmp_filter_ctx ctx, const char *const *calls)
{
	int rc;

	for (; *calls; calls++) {
		int nr = seccomp_syscall_resolve_name(*calls);

		if (nr == __NR_SCMP_ERROR)
			continue; /* not a system call on this architecture */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, nr, 0)) != 0)
			DP_FATAL("sandbox: allowing %s: %s", *calls, strerror(-rc));
	}
}

void sandbox_enter(enum sandbox_profile p)
{
	const char *const *calls = agent_calls;
	scmp_filter_ctx ctx;
	int rc;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
		DP_FATAL("sandbox: PR_SET_NO_NEW_PRIVS: %s", strerror(errno));
	ctx = seccomp_init(SCMP_ACT_ERRNO(EPERM));
	if (ctx == NULL)
		DP_FATAL("sandbox: seccomp_init failed");
	if (p == SANDBOX_EGRESS)
		calls = egress_calls;
	allow(ctx, calls);
	allow(ctx, sanitizer_calls);
	if (p == SANDBOX_EGRESS) {
		static const int families[] = { AF_INET, AF_INET6, AF_NETLINK };

		/* open only to read: openat(dirfd, path, flags) with O_ACCMODE == O_RDONLY, and neither O_CREAT
		 * nor O_TRUNC (with O_RDONLY, Linux still creates and truncates) */
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(openat), 1,
					   SCMP_A2(SCMP_CMP_MASKED_EQ, O_ACCMODE | O_CREAT | O_TRUNC, O_RDONLY))) != 0)
			DP_FATAL("sandbox: allowing openat: %s", strerror(-rc));
		for (size_t i = 0; i < sizeof(families) / sizeof(families[0]); i++)
			if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 1,
						   SCMP_A0(SCMP_CMP_EQ, (scmp_datum_t)families[i]))) != 0)
				DP_FATAL("sandbox: allowing socket: %s", strerror(-rc));
		goto load;
	}
	if (p == SANDBOX_WEBHOOK) {
		/* libmicrohttpd: an eventfd per daemon (a certificate reload starts one), and its threads' names */
		static const char *const webhook_calls[] = { "eventfd2", NULL };

		allow(ctx, webhook_calls);
		if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(prctl), 1, SCMP_A0(SCMP_CMP_EQ, PR_SET_NAME))) != 0)
			DP_FATAL("sandbox: allowing prctl: %s", strerror(-rc));
	}
	/* socket(AF_UNIX, SOCK_STREAM | flags, ...) and no other. */
	if ((rc = seccomp_rule_add(ctx, SCMP_ACT_ALLOW, SCMP_SYS(socket), 2, SCMP_A0(SCMP_CMP_EQ, AF_UNIX),
				   SCMP_A1(SCMP_CMP_MASKED_EQ, 0xf, SOCK_STREAM))) != 0)
		DP_FATAL("sandbox: allowing socket: %s", strerror(-rc));
load:
	/* Every thread (listener, HTTP), not only this one. */
	if ((rc = seccomp_attr_set(ctx, SCMP_FLTATR_CTL_TSYNC, 1)) != 0)
		DP_FATAL("sandbox: thread sync: %s", strerror(-rc));
	if ((rc = seccomp_load(ctx)) != 0)
		DP_FATAL("sandbox: loading the filter: %s", strerror(-rc));
	seccomp_release(ctx);
	if (!sandbox_active())
		DP_FATAL("sandbox: the filter is not in force after loading it");
}

bool sandbox_active(void)
{
	FILE *f = fopen("/proc/self/status", "re");
	char line[256];
	bool on = false;

	if (f == NULL)
		return false;
	while (fgets(line, sizeof(line), f))
		if (strncmp(line, "Seccomp:", 8) == 0)
			on = strtol(line + 8, NULL, 10) == 2;
	fclose(f);
	return on;
}
