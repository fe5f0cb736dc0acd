/*
 * perfev.c - sampling a process's threads with perf events (perfev.h).
 *
 * As `perf record -p PID` does: one event per (thread, CPU the process may
 * run on), with inherit set so that the threads it starts later are
 * sampled too; per CPU, the first event's ring buffer takes the records of
 * the others (PERF_EVENT_IOC_SET_OUTPUT), so there are as many buffers as
 * CPUs and threads x CPUs descriptors. All are enabled together once open.
 * The reader polls the buffers (woken when one is half full, else every
 * 50 ms), hands each PERF_RECORD_SAMPLE to the caller and counts the
 * records the kernel dropped (PERF_RECORD_LOST).
 *
 * Before the first event: can the agent read the process's memory map (what
 * the kernel checks for perf too: PTRACE_MODE_READ), and does
 * kernel.perf_event_paranoid let a process without CAP_PERFMON sample at
 * all. A refusal of the first event then tells the seccomp filter (EPERM:
 * the container runtime's profile, which allows perf_event_open only with
 * CAP_PERFMON or CAP_SYS_ADMIN) from the kernel's own rules (EACCES).
 * Kernel call chains are asked for first when allowed or asked; refused,
 * "auto" takes user ones and says why.
 */
#include "perfev.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/perf_event.h>
#include <poll.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "mem.h"

#define MAX_THREADS 4096
#define MAX_EVENTS 16384     /* threads x cpus */
#define DATA_PAGES 16        /* per CPU buffer, halved while the kernel refuses the memory */
#define MAX_CHAIN 1024
#define POLL_MS 50
#define CAP_PERFMON_BIT 38
#define CAP_SYS_ADMIN_BIT 21

struct ring {
	int fd;
	uint8_t *base;
	size_t data_size; /* a power of two */
	size_t page;
};

struct run {
	int *fds;
	size_t n_fds;
	struct ring *rings;
	int *ring_cpu; /* cpu of rings[i] */
	size_t n_rings;
	uint8_t rec[65536]; /* one record, unwrapped (a header's size is 16 bits) */
	uint64_t chain[MAX_CHAIN];
	void (*on_sample)(void *, const struct perfev_sample *);
	void *ctx;
	struct perfev_stats *st;
};

const char *perfev_event_name(enum perfev_event e)
{
	return e == PERFEV_CYCLES ? "cycles" : "cpu-clock";
}

int perfev_event_parse(const char *name)
{
	if (name && strcasecmp(name, "cpu-clock") == 0)
		return PERFEV_CPU_CLOCK;
	if (name && strcasecmp(name, "cycles") == 0)
		return PERFEV_CYCLES;
	return -1;
}

static long read_long_file(const char *path, long dflt)
{
	char b[32] = "";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	ssize_t n;

	if (fd < 0)
		return dflt;
	n = read(fd, b, sizeof(b) - 1);
	close(fd);
	return n > 0 ? strtol(b, NULL, 10) : dflt;
}

/* A "Key:\tvalue" line of /proc/PID/status into out, or "" (a few kB: read whole). */
static void status_field(const char *status_path, const char *key, char *out, size_t max)
{
	char b[8192];
	int fd = open(status_path, O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, b, sizeof(b) - 1) : -1;
	size_t kl = strlen(key);

	out[0] = 0;
	if (fd >= 0)
		close(fd);
	if (n <= 0)
		return;
	b[n] = 0;
	for (char *l = b; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		if (strncmp(l, key, kl) == 0 && l[kl] == ':') {
			char *v = l + kl + 1;

			v += strspn(v, " \t");
			snprintf(out, max, "%.*s", (int)strcspn(v, "\n"), v);
			return;
		}
	}
}

/* The agent may use perf events beyond the paranoid setting: CAP_PERFMON or CAP_SYS_ADMIN in effect. */
static bool privileged(void)
{
	char v[32];
	unsigned long long eff;

	status_field("/proc/self/status", "CapEff", v, sizeof(v));
	eff = strtoull(v, NULL, 16);
	return (eff >> CAP_PERFMON_BIT & 1) || (eff >> CAP_SYS_ADMIN_BIT & 1);
}

/* What must hold before the first event: the map readable, the paranoid setting not closed to us. */
static int check_access(const struct perfev_opts *o, long paranoid, bool priv, struct err_msg *em)
{
	char path[64], uid[64];
	int fd;

	snprintf(path, sizeof(path), "/proc/%llu/maps", (unsigned long long)o->pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
		if (errno == ENOENT)
			return err_set(em, DP_ENOTFOUND, "pid %llu is gone", (unsigned long long)o->pid);
		int err = errno;
		char me[64];

		snprintf(path, sizeof(path), "/proc/%llu/status", (unsigned long long)o->pid);
		status_field(path, "Uid", uid, sizeof(uid));
		status_field("/proc/self/status", "Uid", me, sizeof(me)); /* geteuid is not in the sandbox's list */
		uid[strcspn(uid, " \t")] = 0;
		me[strcspn(me, " \t")] = 0;
		return err_set(em, DP_EREFUSED, "the agent (uid %s) may not read the memory map of pid %llu (uid %s): %s. "
			       "Perf events need the rights of a debugger over the app: run the agent as the app's user "
			       "(diagport inject does when the workload names one), or give it CAP_SYS_PTRACE",
			       me[0] ? me : "?", (unsigned long long)o->pid, uid[0] ? uid : "?", strerror(err));
	}
	close(fd);
	if (paranoid >= 3 && !priv)
		return err_set(em, DP_EREFUSED, "kernel.perf_event_paranoid is %ld on this node: only a process with "
			       "CAP_PERFMON may use perf events. Set it to 2 on the node (sysctl kernel.perf_event_paranoid=2: "
			       "your own processes, user space), or run the agent as root with CAP_PERFMON", paranoid);
	return 0;
}

/* Why perf_event_open refused with errno err, as a sentence with the fix. */
static int open_refused(const struct perfev_opts *o, int err, long paranoid, struct err_msg *em)
{
	if (err == ESRCH)
		return err_set(em, DP_ENOTFOUND, "pid %llu is gone", (unsigned long long)o->pid);
	if (err == EPERM)
		return err_set(em, DP_EREFUSED, "perf_event_open was refused with EPERM: a seccomp filter forbids it. The "
			       "container runtime's default profile (Docker, containerd) allows it only to a container "
			       "granted CAP_PERFMON or CAP_SYS_ADMIN: `diagport inject --perf` (annotation "
			       "diagport.dev/perf: \"true\") adds CAP_PERFMON to the agent's container");
	if (err == EACCES)
		return err_set(em, DP_EREFUSED, "perf_event_open was refused with EACCES: kernel.perf_event_paranoid is "
			       "%ld and the agent has no CAP_PERFMON. Set the sysctl to 2 or lower on the node, or run the "
			       "agent as root with CAP_PERFMON", paranoid);
	if ((err == ENOENT || err == EOPNOTSUPP || err == ENODEV) && o->event == PERFEV_CYCLES)
		return err_set(em, DP_EREFUSED, "this machine has no CPU cycles counter for perf events (%s; a virtual "
			       "machine often has none): use event=cpu-clock", strerror(err));
	if (err == EMFILE || err == ENFILE)
		return err_set(em, DP_EIO, "out of file descriptors for perf events (one per thread and CPU): raise the "
			       "agent's RLIMIT_NOFILE (%s)", strerror(err));
	return err_set(em, DP_EIO, "perf_event_open: %s", strerror(err));
}

static void attr_init(struct perf_event_attr *a, const struct perfev_opts *o, bool kernel)
{
	memset(a, 0, sizeof(*a));
	a->size = sizeof(*a);
	a->type = o->event == PERFEV_CYCLES ? PERF_TYPE_HARDWARE : PERF_TYPE_SOFTWARE;
	a->config = o->event == PERFEV_CYCLES ? PERF_COUNT_HW_CPU_CYCLES : PERF_COUNT_SW_CPU_CLOCK;
	a->freq = 1;
	a->sample_freq = o->freq;
	a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_PERIOD |
			 PERF_SAMPLE_CALLCHAIN;
	a->disabled = 1;
	a->inherit = 1;
	a->exclude_hv = 1;
	a->exclude_kernel = !kernel;
	a->exclude_callchain_kernel = !kernel;
	a->use_clockid = 1;
	a->clockid = CLOCK_MONOTONIC;
	a->watermark = 1;
}

static int perf_open(struct perf_event_attr *a, pid_t tid, int cpu)
{
	return (int)syscall(SYS_perf_event_open, a, tid, cpu, -1, PERF_FLAG_FD_CLOEXEC);
}

/* The process's threads, at most MAX_THREADS. */
static size_t list_threads(uint64_t pid, pid_t *out)
{
	char path[64];
	DIR *d;
	struct dirent *e;
	size_t n = 0;

	snprintf(path, sizeof(path), "/proc/%llu/task", (unsigned long long)pid);
	if ((d = opendir(path)) == NULL)
		return 0;
	while ((e = readdir(d)) != NULL && n < MAX_THREADS)
		if (e->d_name[0] >= '1' && e->d_name[0] <= '9')
			out[n++] = (pid_t)strtol(e->d_name, NULL, 10);
	closedir(d);
	return n;
}

/* The CPUs the process may run on (its affinity), else all configured ones. */
static size_t list_cpus(uint64_t pid, int *out, size_t max)
{
	cpu_set_t set;
	size_t n = 0;
	long conf = sysconf(_SC_NPROCESSORS_CONF);

	if (sched_getaffinity((pid_t)pid, sizeof(set), &set) == 0) {
		for (int c = 0; c < CPU_SETSIZE && n < max; c++)
			if (CPU_ISSET(c, &set))
				out[n++] = c;
		return n;
	}
	for (long c = 0; c < conf && n < max; c++)
		out[n++] = (int)c;
	return n;
}

static int ring_map(struct ring *r, int fd, struct err_msg *em)
{
	size_t page = (size_t)sysconf(_SC_PAGESIZE);

	for (size_t pages = DATA_PAGES; pages >= 1; pages /= 2) {
		void *m = mmap(NULL, (pages + 1) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);

		if (m != MAP_FAILED) {
			r->fd = fd;
			r->base = m;
			r->page = page;
			r->data_size = pages * page;
			return 0;
		}
		if (errno != EPERM && errno != ENOMEM)
			break;
	}
	return err_set(em, DP_EIO, "cannot map a perf buffer (%s): the locked-memory allowance for perf "
		       "(kernel.perf_event_mlock_kb, RLIMIT_MEMLOCK) is used up", strerror(errno));
}

static void deliver(struct run *r, const uint8_t *p, size_t len)
{
	struct perfev_sample s = { 0 };
	uint64_t nr, v[3];
	uint32_t pt[2];

	/* ip, pid/tid, time, period, nr, ips[nr] (PERF_RECORD_SAMPLE, fields in bit order) */
	if (len < 40)
		return;
	memcpy(&v[0], p, 8);
	memcpy(pt, p + 8, 8);
	memcpy(&v[1], p + 16, 8);
	memcpy(&v[2], p + 24, 8);
	memcpy(&nr, p + 32, 8);
	if (nr > (len - 40) / 8)
		return;
	s.tid = pt[1];
	s.time_ns = v[1];
	s.period = v[2];
	for (uint64_t i = 0, ctx = 0; i < nr && s.n < MAX_CHAIN; i++) {
		uint64_t ip;

		memcpy(&ip, p + 40 + i * 8, 8);
		if (ip >= (uint64_t)PERF_CONTEXT_MAX) {
			ctx = ip; /* a context marker: kernel, user, ... */
			continue;
		}
		/*
		 * The kernel walks a user stack by its frame pointers: through code
		 * built without them the walk reads other words, which can look like
		 * kernel addresses. In user context such a word ends the chain.
		 */
		if (ctx == (uint64_t)PERF_CONTEXT_USER && PERFEV_KERNEL_IP(ip))
			break;
		if (ctx == (uint64_t)PERF_CONTEXT_KERNEL && (!PERFEV_KERNEL_IP(ip) || !r->st->kernel))
			continue;
		r->chain[s.n++] = ip;
	}
	/*
	 * No chain: the sample's own ip, unless it is the kernel's while kernel frames were not asked for (or
	 * refused): skid can land a user-only event's sample in the kernel on its way out, and such a sample
	 * says nothing of the app's stacks.
	 */
	if (s.n == 0 && PERFEV_KERNEL_IP(v[0]) && !r->st->kernel)
		return;
	if (s.n == 0)
		r->chain[s.n++] = v[0];
	s.ips = r->chain;
	r->st->samples++;
	r->on_sample(r->ctx, &s);
}

/* Read what ring g holds, record by record. */
static void drain(struct run *r, struct ring *g)
{
	struct perf_event_mmap_page *mp = (struct perf_event_mmap_page *)g->base;
	const uint8_t *data = g->base + g->page;
	uint64_t head = __atomic_load_n(&mp->data_head, __ATOMIC_ACQUIRE), tail = mp->data_tail;

	while (tail + sizeof(struct perf_event_header) <= head) {
		struct perf_event_header h;
		size_t at = tail & (g->data_size - 1), first;

		first = g->data_size - at < sizeof(h) ? g->data_size - at : sizeof(h);
		memcpy(&h, data + at, first);
		memcpy((uint8_t *)&h + first, data, sizeof(h) - first);
		if (h.size < sizeof(h) || tail + h.size > head)
			break;
		first = g->data_size - at < h.size ? g->data_size - at : h.size;
		memcpy(r->rec, data + at, first);
		memcpy(r->rec + first, data, h.size - first);
		if (h.type == PERF_RECORD_SAMPLE) {
			deliver(r, r->rec + sizeof(h), h.size - sizeof(h));
		} else if (h.type == PERF_RECORD_LOST && h.size >= sizeof(h) + 16) {
			uint64_t lost;

			memcpy(&lost, r->rec + sizeof(h) + 8, 8);
			r->st->lost += lost;
		}
		tail += h.size;
	}
	__atomic_store_n(&mp->data_tail, tail, __ATOMIC_RELEASE);
}

static void run_close(struct run *r)
{
	for (size_t i = 0; i < r->n_rings; i++)
		if (r->rings[i].base)
			munmap(r->rings[i].base, r->rings[i].page + r->rings[i].data_size);
	for (size_t i = 0; i < r->n_fds; i++)
		close(r->fds[i]);
	free(r->fds);
	free(r->rings);
	free(r->ring_cpu);
}

/* Open the events of every (thread, cpu), kernel chains or not: 0, or DP_EIO with the refusal's errno in *err, or
 * ring_map's error with *err 0. */
static int open_all(struct run *r, const struct perfev_opts *o, bool kernel, const pid_t *tids, size_t n_tids,
		    const int *cpus, size_t n_cpus, int *err, struct err_msg *em)
{
	struct perf_event_attr a;
	size_t n_tids_open = 0;

	attr_init(&a, o, kernel);
	r->fds = mem_array(n_tids * n_cpus, sizeof(int));
	r->rings = mem_array(n_cpus, sizeof(struct ring));
	r->ring_cpu = mem_array(n_cpus, sizeof(int));
	for (size_t t = 0; t < n_tids; t++) {
		bool any = false;

		for (size_t c = 0; c < n_cpus; c++) {
			int fd = perf_open(&a, tids[t], cpus[c]), rc;
			size_t k;

			if (fd < 0) {
				if (errno == ESRCH && (t > 0 || n_tids_open > 0))
					break; /* the thread ended meanwhile */
				if (errno == ENODEV && c > 0)
					continue; /* that CPU is offline */
				*err = errno;
				return DP_EIO;
			}
			r->fds[r->n_fds++] = fd;
			any = true;
			for (k = 0; k < r->n_rings && r->ring_cpu[k] != cpus[c]; k++)
				;
			if (k == r->n_rings) {
				if ((rc = ring_map(&r->rings[k], fd, em)) != 0) {
					*err = 0;
					return rc;
				}
				r->ring_cpu[k] = cpus[c];
				r->n_rings++;
			} else if (ioctl(fd, PERF_EVENT_IOC_SET_OUTPUT, r->rings[k].fd) != 0) {
				*err = errno;
				return DP_EIO;
			}
		}
		n_tids_open += any;
	}
	r->st->threads = (unsigned)n_tids_open;
	r->st->cpus = (unsigned)r->n_rings;
	return 0;
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static bool alive(uint64_t pid)
{
	char path[48];
	struct stat st;

	snprintf(path, sizeof(path), "/proc/%llu/stat", (unsigned long long)pid);
	return stat(path, &st) == 0;
}

int perfev_run(const struct perfev_opts *o, long long duration_ms, const atomic_bool *stop,
	       void (*on_sample)(void *ctx, const struct perfev_sample *s), void *ctx, struct perfev_stats *st,
	       struct err_msg *em)
{
	struct run *r = mem_zalloc(sizeof(*r));
	long paranoid = read_long_file("/proc/sys/kernel/perf_event_paranoid", 2);
	bool priv = privileged(), kernel = o->kernel != PERFEV_KERNEL_OFF;
	pid_t *tids = mem_array(MAX_THREADS, sizeof(pid_t));
	int cpus[1024], err = 0, rc;
	size_t n_tids, n_cpus;
	uint64_t end;
	struct pollfd *pf;

	memset(st, 0, sizeof(*st));
	r->on_sample = on_sample;
	r->ctx = ctx;
	r->st = st;
	if ((rc = check_access(o, paranoid, priv, em)) != 0)
		goto out;
	n_tids = list_threads(o->pid, tids);
	n_cpus = list_cpus(o->pid, cpus, sizeof(cpus) / sizeof(cpus[0]));
	if (n_tids == 0) {
		rc = err_set(em, DP_ENOTFOUND, "pid %llu is gone", (unsigned long long)o->pid);
		goto out;
	}
	if (n_tids * n_cpus > MAX_EVENTS) {
		rc = err_set(em, DP_ETOOBIG, "pid %llu has %zu threads on %zu CPUs: more than the %d perf events a profile "
			     "may open", (unsigned long long)o->pid, n_tids, n_cpus, MAX_EVENTS);
		goto out;
	}
	if (kernel && !priv && paranoid >= 2 && o->kernel == PERFEV_KERNEL_AUTO)
		kernel = false; /* the kernel would refuse: say so without asking */
	rc = open_all(r, o, kernel, tids, n_tids, cpus, n_cpus, &err, em);
	if (rc != 0 && err == EACCES && kernel && o->kernel == PERFEV_KERNEL_AUTO) {
		run_close(r);
		r->fds = NULL;
		r->rings = NULL;
		r->ring_cpu = NULL;
		r->n_fds = r->n_rings = 0;
		err = 0;
		kernel = false;
		rc = open_all(r, o, false, tids, n_tids, cpus, n_cpus, &err, em);
	}
	if (rc != 0) {
		if (err == EACCES && kernel)
			rc = err_set(em, DP_EREFUSED, "kernel call chains (kernel=true) are refused: "
				     "kernel.perf_event_paranoid is %ld and the agent has no CAP_PERFMON. Use kernel=auto or "
				     "false, set the sysctl to 1 or lower on the node, or run the agent as root with "
				     "CAP_PERFMON", paranoid);
		else if (err != 0)
			rc = open_refused(o, err, paranoid, em);
		goto out_close;
	}
	st->kernel = kernel;
	if (!kernel && o->kernel == PERFEV_KERNEL_AUTO)
		snprintf(st->no_kernel, sizeof(st->no_kernel), "kernel frames not sampled: kernel.perf_event_paranoid is "
			 "%ld and the agent has no CAP_PERFMON", paranoid);
	for (size_t i = 0; i < r->n_fds; i++)
		ioctl(r->fds[i], PERF_EVENT_IOC_ENABLE, 0);
	pf = mem_array(r->n_rings, sizeof(*pf));
	for (size_t i = 0; i < r->n_rings; i++)
		pf[i] = (struct pollfd){ .fd = r->rings[i].fd, .events = POLLIN };
	end = duration_ms >= 0 ? now_ms() + (uint64_t)duration_ms : UINT64_MAX;
	for (;;) {
		uint64_t t = now_ms();

		if (t >= end || (stop && atomic_load(stop)) || !alive(o->pid))
			break;
		poll(pf, r->n_rings, (int)(end - t < POLL_MS ? end - t : POLL_MS));
		for (size_t i = 0; i < r->n_rings; i++)
			drain(r, &r->rings[i]);
	}
	for (size_t i = 0; i < r->n_fds; i++)
		ioctl(r->fds[i], PERF_EVENT_IOC_DISABLE, 0);
	for (size_t i = 0; i < r->n_rings; i++)
		drain(r, &r->rings[i]);
	free(pf);
	rc = 0;
out_close:
	run_close(r);
out:
	free(tids);
	free(r);
	return rc;
}
