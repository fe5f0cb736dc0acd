/*
 * profile.c - CPU profiles (profile.h): the two engines, and the samples
 * counted per stack.
 *
 * While the session runs, each sample of a thread running managed code
 * (SampleProfiler type 2: a thread waiting in the runtime or the kernel is
 * type 1 and is not CPU) is counted under its (thread, stack) in a hash
 * table, the stack's addresses kept once. When it ends, the rundown has
 * named the code (launcher/trace/symbols.h); each stack becomes a list of frame names,
 * root first, runs of unnamed frames as one "[NativeFrames]".
 *
 * The sampler's period is a wish: on a busy machine it ticks less often
 * (about 400 Hz, not 1,000, with two threads spinning on two CPUs), so a
 * sample stands for the real time since the sampler's previous tick, as
 * TraceEvent (dotnet-trace, PerfView) counts it, not for the nominal 1 ms.
 * A tick is a burst of samples, one per thread, taken while the runtime is
 * suspended: a thread seen again, or a silence of four periods, starts the
 * next. (A gap alone would not do: a tick spans ~45 us, but the sampler can
 * be preempted mid-tick; 2.3 ms was seen under load.) Unlike TraceEvent,
 * which carries a thread's last stack over until its next sample, a thread
 * that leaves the sampler's sight (the runtime's ".NET EventPipe" thread,
 * back in native code after an EventSource callback) gets no time for it.
 *
 * The stacks are named and written by profile_out.c.
 */
#include "profile_int.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include "clock.h"
#include "log.h"
#include "mem.h"
#include "launcher/runtime/proc.h"

#define MAX_STACKS 200000        /* distinct (thread, stack) pairs */
#define MAX_IPS ((size_t)4 << 20) /* addresses kept, all stacks */
#define MAX_KEPT 10000           /* samples kept one by one for perfscript (its text is made whole: ~1 KiB each) */
#define MAX_COMMS 4096
#define RUNDOWN_TIMEOUT_MS 0     /* the names' session: stopped at once, its rundown is what names */
#define MAX_SEEN 8192            /* slots for the threads of one tick (a power of 2; half may be used) */

int profile_format(const char *name)
{
	if (name && strcasecmp(name, "perfscript") == 0)
		return PROFILE_PERFSCRIPT;
	if (name && strcasecmp(name, "folded") == 0)
		return PROFILE_FOLDED;
	if (name && strcasecmp(name, "speedscope") == 0)
		return PROFILE_SPEEDSCOPE;
	if (name && strcasecmp(name, "flamegraph") == 0)
		return PROFILE_FLAMEGRAPH;
	if (name && strcasecmp(name, "pprof") == 0)
		return PROFILE_PPROF;
	return -1;
}

static uint64_t hash_stack(uint64_t thread, const uint64_t *ips, size_t n)
{
	uint64_t h = 1469598103934665603ull ^ thread;

	for (size_t i = 0; i < n; i++)
		h = (h ^ ips[i]) * 1099511628211ull;
	return htab_u64(h);
}

static struct profile *profile_empty(void)
{
	struct profile *p = mem_zalloc(sizeof(*p));

	htab_init(&p->stacks, sizeof(struct entry));
	return p;
}

struct stack_key {
	const struct profile *p;
	uint64_t thread;
	const uint64_t *ips;
	size_t n;
};

static bool same_stack(const void *slot, const void *key)
{
	const struct entry *e = slot;
	const struct stack_key *k = key;

	return e->thread == k->thread && e->n == k->n && memcmp(k->p->ips + e->at, k->ips, k->n * 8) == 0;
}

/*
 * Count a sample standing for `ticks` of time under its stack; the entry
 * (valid until the next count), or NULL when the stack was dropped.
 */
static const struct entry *count(struct profile *p, uint64_t thread, const uint64_t *ips, size_t n, uint64_t ticks)
{
	struct stack_key key;
	struct entry *e;
	uint64_t h;

	if (n > MAX_DEPTH)
		n = MAX_DEPTH;
	h = hash_stack(thread, ips, n);
	key = (struct stack_key){ p, thread, ips, n };
	if ((e = htab_find(&p->stacks, h, same_stack, &key)) != NULL) {
		e->count++;
		e->ticks += ticks;
		p->samples++;
		return e;
	}
	if (p->stacks.n == MAX_STACKS || p->n_ips + n > MAX_IPS) {
		p->dropped_stacks++; /* counted nowhere: the profile says how many */
		return NULL;
	}
	MEM_GROW(p->ips, p->cap_ips, p->n_ips + n, 65536);
	memcpy(p->ips + p->n_ips, ips, n * sizeof(*ips));
	e = htab_put(&p->stacks, h);
	*e = (struct entry){ thread, 1, ticks, p->n_ips, n };
	p->n_ips += n;
	p->samples++;
	return e;
}

/*
 * Whether thread was sampled in this tick already; marks it sampled. A fixed table whose slots are emptied
 * all at once by the tick's number changing (no clearing between ticks), so not common/htab.h.
 */
static bool seen_again(struct profile *p, uint64_t thread)
{
	size_t k = (size_t)((thread * 0x9E3779B97F4A7C15ull) >> 51) & (MAX_SEEN - 1);

	for (; p->seen[k].tick == p->tick; k = (k + 1) & (MAX_SEEN - 1))
		if (p->seen[k].thread == thread)
			return true;
	if (p->n_seen < MAX_SEEN / 2) { /* past that, a repeat goes unseen: the silence still ends the tick */
		p->seen[k] = (struct seen){ thread, p->tick };
		p->n_seen++;
	}
	return false;
}

/* The time a sample of thread taken at `now` stands for: since the sampler's previous tick (the first: its period). */
static uint64_t tick_time(struct profile *p, uint64_t thread, int64_t now)
{
	if (p->tick == 0 || now - p->last_at > 4 * p->period_ticks || seen_again(p, thread)) {
		if (p->tick == 0)
			p->tick_ticks = (uint64_t)p->period_ticks;
		else
			p->tick_ticks = now > p->tick_at ? (uint64_t)(now - p->tick_at) : 0;
		p->tick_at = now;
		p->tick++;
		p->n_seen = 0;
		seen_again(p, thread);
	}
	if (now > p->last_at)
		p->last_at = now;
	return p->tick_ticks;
}

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct profile *p = ctx;
	bool managed;
	uint64_t ticks;

	if (symbols_event(p->sym, e) || !symbols_sample(e, &managed))
		return 0;
	ticks = tick_time(p, e->thread_id, e->timestamp);
	if (managed && e->stack_n)
		count(p, e->thread_id, e->stack, e->stack_n, ticks);
	return 0;
}

static int on_event_names(void *ctx, const struct nettrace_event *e)
{
	struct profile *p = ctx;

	symbols_event(p->sym, e);
	return 0;
}

static int on_trace(void *ctx, const struct nettrace_trace *t)
{
	struct profile *p = ctx;

	p->ms_per_sample = t->sampling_ns ? t->sampling_ns / 1e6 : 1.0;
	p->ticks_per_sec = t->ticks_per_sec > 0 ? t->ticks_per_sec : 1000000000;
	p->period_ticks = (int64_t)(p->ms_per_sample / 1000.0 * (double)p->ticks_per_sec);
	return 0;
}

int profile_capture(struct port *port, const uint8_t cookie[16], long long duration_ms, const atomic_bool *stop,
		    struct profile **out, struct err_msg *em)
{
	struct trace_config c;
	struct nettrace_callbacks cb = { .trace = on_trace, .event = on_event };
	struct profile *p = profile_empty();
	long long t0;
	int rc;

	p->sym = symbols_new();
	p->ms_per_sample = 1.0;
	p->ticks_per_sec = 1000000000;
	p->period_ticks = 1000000;
	p->seen = mem_array(MAX_SEEN, sizeof(*p->seen));
	p->unix_ms = clock_unix_ms();
	t0 = clock_ms();
	symbols_session(&c);
	if ((rc = trace_run_cb(port, cookie, &c, duration_ms, stop, &cb, p, NULL, em)) != 0) {
		profile_free(p);
		return rc;
	}
	p->took_ms = clock_ms() - t0;
	symbols_done(p->sym);
	*out = p;
	return 0;
}

uint64_t profile_samples(const struct profile *p)
{
	return p->samples;
}

/* ---- the perf engine ---- */

/*
 * The runtimes whose perf map perf profiles turned on, with how many of them
 * run: the first turns it on, the last off.
 */
#define MAX_MAP_USERS 64
static struct {
	uint8_t cookie[16];
	unsigned users;
} map_users[MAX_MAP_USERS];
static pthread_mutex_t map_lock = PTHREAD_MUTEX_INITIALIZER;

/* One more profile of runtime cookie wants its perf map: true when it is the first (turn it on). */
static bool map_acquire(const uint8_t cookie[16], bool *held)
{
	bool first = false;
	size_t i, free_at = MAX_MAP_USERS;

	pthread_mutex_lock(&map_lock);
	for (i = 0; i < MAX_MAP_USERS; i++) {
		if (map_users[i].users && memcmp(map_users[i].cookie, cookie, 16) == 0)
			break;
		if (!map_users[i].users && free_at == MAX_MAP_USERS)
			free_at = i;
	}
	if (i == MAX_MAP_USERS && free_at < MAX_MAP_USERS) {
		i = free_at;
		memcpy(map_users[i].cookie, cookie, 16);
		first = true;
	}
	if (i < MAX_MAP_USERS) {
		map_users[i].users++;
		*held = true;
	}
	pthread_mutex_unlock(&map_lock);
	return first;
}

/* One less: true when it was the last (turn it off). */
static bool map_release(const uint8_t cookie[16])
{
	bool last = false;

	pthread_mutex_lock(&map_lock);
	for (size_t i = 0; i < MAX_MAP_USERS; i++)
		if (map_users[i].users && memcmp(map_users[i].cookie, cookie, 16) == 0) {
			last = --map_users[i].users == 0;
			break;
		}
	pthread_mutex_unlock(&map_lock);
	return last;
}

/* The app was started with its perf map on (DOTNET_PerfMapEnabled, COMPlus_PerfMapEnabled): leave it so. */
static bool map_by_env(uint64_t pid)
{
	char path[64], *env = mem_alloc(1 << 20);
	int fd;
	ssize_t n = 0;
	bool on = false;

	snprintf(path, sizeof(path), "/proc/%llu/environ", (unsigned long long)pid);
	if ((fd = open(path, O_RDONLY | O_CLOEXEC)) >= 0) {
		n = read(fd, env, (1 << 20) - 1);
		close(fd);
	}
	env[n > 0 ? n : 0] = 0;
	for (ssize_t at = 0; at < n; at += (ssize_t)strlen(env + at) + 1) {
		const char *v = env + at, *eq;

		if ((strncmp(v, "DOTNET_PerfMapEnabled=", 22) == 0 || strncmp(v, "COMPlus_PerfMapEnabled=", 23) == 0) &&
		    (eq = strchr(v, '=')) != NULL && strcmp(eq + 1, "0") != 0 && eq[1])
			on = true;
	}
	free(env);
	return on;
}

static void on_perf_sample(void *ctx, const struct perfev_sample *s)
{
	struct profile *p = ctx;
	const struct entry *e = count(p, s->tid, s->ips, s->n, 0);

	if (!p->keep || e == NULL)
		return;
	if (p->n_kept == MAX_KEPT)
		return; /* the text says how many it holds */
	MEM_GROW(p->kept, p->cap_kept, p->n_kept + 1, 4096);
	p->kept[p->n_kept++] = (struct kept){ s->time_ns, s->period, s->tid, e->at, e->n };
}

/* The names of the process's threads now (a thread gone by then is named as the process). */
static void read_comms(struct profile *p)
{
	char path[96];
	DIR *d;
	struct dirent *de;

	proc_thread_name(p->pid, 0, p->proc_comm, sizeof(p->proc_comm));
	snprintf(path, sizeof(path), "/proc/%llu/task", (unsigned long long)p->pid);
	if ((d = opendir(path)) == NULL)
		return;
	p->comms = mem_array(MAX_COMMS, sizeof(*p->comms));
	while ((de = readdir(d)) != NULL && p->n_comms < MAX_COMMS) {
		struct comm *c = &p->comms[p->n_comms];

		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		c->tid = (uint32_t)strtoul(de->d_name, NULL, 10);
		proc_thread_name(p->pid, c->tid, c->name, sizeof(c->name));
		p->n_comms++;
	}
	closedir(d);
}

/* The method rundown: every method's code range, for managed frames in perf stacks. */
static int name_methods(struct profile *p, struct port *port, const uint8_t cookie[16], struct err_msg *em)
{
	struct trace_config c;
	struct nettrace_callbacks cb = { .event = on_event_names };

	symbols_session_names(&c);
	return trace_run_cb(port, cookie, &c, RUNDOWN_TIMEOUT_MS, NULL, &cb, p, NULL, em);
}

int profile_perf_capture(struct port *port, const uint8_t cookie[16], uint64_t target_pid,
			 const struct profile_perf *o, long long duration_ms, const atomic_bool *stop,
			 struct profile **out, struct err_msg *em)
{
	struct profile *p = profile_empty();
	struct perfev_opts po = { 0, o->freq, o->event, o->kernel };
	char path[64];
	struct stat stb;
	bool map_held = false;
	uint32_t hr = 0;
	long long t0;
	int rc = proc_local_pid(port, cookie, &p->pid);

	p->sym = symbols_new();
	p->perf = true;
	p->keep = o->keep_samples;
	p->event = o->event;
	p->nspid = target_pid;
	p->ms_per_sample = 1000.0 / (double)o->freq;
	if (rc != 0)
		goto out;
	if (p->pid == 0) {
		rc = err_set(em, DP_EREFUSED, "pid %llu is not in the agent's pid namespace, so perf events cannot reach "
			     "it: share the pod's process namespace (shareProcessNamespace: true; `diagport inject --perf` "
			     "sets it), or on ECS pidMode: task", (unsigned long long)target_pid);
		goto out;
	}
	if (!map_by_env(p->pid) && map_acquire(cookie, &map_held))
		proc_perfmap_set(port, cookie, true, 3, &hr); /* refused (before .NET 8): the rundown still names */
	po.pid = p->pid;
	p->unix_ms = clock_unix_ms();
	t0 = clock_ms();
	rc = perfev_run(&po, duration_ms, stop, on_perf_sample, p, &p->st, em);
	p->took_ms = clock_ms() - t0;
	t0 = clock_ms();
	snprintf(path, sizeof(path), "/proc/%llu/stat", (unsigned long long)p->pid);
	if (rc == 0 && stat(path, &stb) != 0)
		rc = err_set(em, DP_EIO, "the process exited during the profile, after %llu samples: without it their "
			     "frames cannot be named", (unsigned long long)p->st.samples);
	if (rc == 0) {
		read_comms(p);
		p->nat = natsym_new(p->pid, target_pid, p->st.kernel);
		natsym_load_perfmap(p->nat);
		if (name_methods(p, port, cookie, em) != 0)
			log_warn("no method rundown: managed frames named by the perf map alone", LOG_STR("event", "warning"),
				 LOG_UINT("pid", target_pid), LOG_STR("reason", em->text));
		symbols_done(p->sym);
	}
	if (map_held && map_release(cookie))
		proc_perfmap_set(port, cookie, false, 0, &hr);
	if (rc != 0)
		goto out;
	snprintf(p->notes, sizeof(p->notes), "%s%s", p->st.no_kernel, p->st.no_kernel[0] && p->st.lost ? "; " : "");
	if (p->st.lost)
		snprintf(p->notes + strlen(p->notes), sizeof(p->notes) - strlen(p->notes),
			 "%llu samples lost (buffers full)", (unsigned long long)p->st.lost);
	log_info("perf profile", LOG_STR("event", "perf-profile"), LOG_UINT("pid", target_pid),
		 LOG_UINT("samples", p->st.samples), LOG_UINT("lost", p->st.lost), LOG_STR("counter", perfev_event_name(o->event)),
		 LOG_UINT("frequency", o->freq), LOG_UINT("threads", p->st.threads), LOG_UINT("cpus", p->st.cpus),
		 LOG_BOOL("kernel", p->st.kernel), LOG_INT("namingMs", clock_ms() - t0),
		 LOG_UINT("perfMapEntries", natsym_perfmap_entries(p->nat)));
	*out = p;
	return 0;
out:
	profile_free(p);
	return rc;
}

void profile_free(struct profile *p)
{
	if (p == NULL)
		return;
	symbols_free(p->sym);
	natsym_free(p->nat);
	free(p->kept);
	free(p->comms);
	free(p->seen);
	htab_free(&p->stacks);
	free(p->ips);
	free(p);
}
