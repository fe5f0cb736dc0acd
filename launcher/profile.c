/*
 * profile.c - CPU profiles (profile.h).
 *
 * While the session runs, each sample of a thread running managed code
 * (SampleProfiler type 2: a thread waiting in the runtime or the kernel is
 * type 1 and is not CPU) is counted under its (thread, stack) in a hash
 * table, the stack's addresses kept once. When it ends, the rundown has
 * named the code (symbols.h); each stack becomes a list of frame names,
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
 * Folded: one line per distinct stack over all threads, "a;b;c COUNT",
 * sorted. Flame graph: those stacks as a tree, drawn as an SVG of
 * rectangles (root at the bottom, width by samples) with the names and a
 * <title> per frame; no script, so it renders anywhere. Speedscope: one
 * "sampled" profile per thread, weights in milliseconds of sampling.
 */
#include "profile.h"

#include <dirent.h>
#include <fcntl.h>
#include <jansson.h>
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
#include "natsym.h"
#include "proc.h"
#include "symbols.h"

#define MAX_STACKS 200000        /* distinct (thread, stack) pairs */
#define MAX_IPS ((size_t)4 << 20) /* addresses kept, all stacks */
#define MAX_DEPTH 512
#define SVG_WIDTH 1200
#define FRAME_H 17
#define MAX_KEPT 10000           /* samples kept one by one for perfscript (its text is made whole: ~1 KiB each) */
#define MAX_COMMS 4096
#define RUNDOWN_TIMEOUT_MS 0     /* the names' session: stopped at once, its rundown is what names */
#define MAX_SEEN 8192            /* slots for the threads of one tick (a power of 2; half may be used) */

struct entry {
	uint64_t thread, hash, count;
	uint64_t ticks; /* EventPipe: the real time its samples stand for, in the trace's ticks */
	size_t at, n;   /* its addresses: ips[at..at+n) */
};

/* A sample kept in order (perfscript). */
struct kept {
	uint64_t time_ns, period;
	uint32_t tid;
	size_t at, n;
};

struct comm {
	uint32_t tid;
	char name[20];
};

struct profile {
	struct symbols *sym;
	struct entry *tab; /* open addressing */
	size_t cap, used;
	uint64_t *ips;
	size_t n_ips, cap_ips;
	uint64_t samples, dropped_stacks;
	double ms_per_sample;
	int64_t ticks_per_sec, period_ticks;
	int64_t tick_at, last_at; /* EventPipe: the sampler's tick now (its first sample), its last sample */
	uint64_t tick_ticks;       /* the time this tick's samples stand for */
	struct seen {
		uint64_t thread, tick; /* in the tick numbered p->tick when equal */
	} *seen;                   /* open addressing, MAX_SEEN slots */
	uint64_t tick;
	size_t n_seen;
	/* the perf engine */
	bool perf, keep;
	struct natsym *nat;
	uint64_t pid, nspid; /* in the agent's pid namespace, and as the process sees itself */
	enum perfev_event event;
	struct perfev_stats st;
	struct kept *kept;
	size_t n_kept, cap_kept;
	struct comm *comms;
	size_t n_comms;
	char proc_comm[20];
	char notes[512]; /* what the reader should know: kernel frames not sampled, samples lost */
};

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
	return -1;
}

static uint64_t hash_stack(uint64_t thread, const uint64_t *ips, size_t n)
{
	uint64_t h = 1469598103934665603ull ^ thread;

	for (size_t i = 0; i < n; i++)
		h = (h ^ ips[i]) * 1099511628211ull;
	return h | 1; /* 0 marks a free slot */
}

static void grow(struct profile *p)
{
	struct entry *old = p->tab;
	size_t old_cap = p->cap;

	p->cap = p->cap ? p->cap * 2 : 1024;
	p->tab = mem_zalloc(p->cap * sizeof(*p->tab));
	for (size_t i = 0; i < old_cap; i++)
		if (old[i].hash) {
			size_t k = old[i].hash & (p->cap - 1);

			while (p->tab[k].hash)
				k = (k + 1) & (p->cap - 1);
			p->tab[k] = old[i];
		}
	free(old);
}

/*
 * Count a sample standing for `ticks` of time under its stack; the entry
 * (valid until the next count), or NULL when the stack was dropped.
 */
static const struct entry *count(struct profile *p, uint64_t thread, const uint64_t *ips, size_t n, uint64_t ticks)
{
	uint64_t h;
	size_t k;

	if (n > MAX_DEPTH)
		n = MAX_DEPTH;
	h = hash_stack(thread, ips, n);
	if ((p->used + 1) * 2 > p->cap)
		grow(p);
	for (k = h & (p->cap - 1); p->tab[k].hash; k = (k + 1) & (p->cap - 1)) {
		struct entry *e = &p->tab[k];

		if (e->hash == h && e->thread == thread && e->n == n && memcmp(p->ips + e->at, ips, n * 8) == 0) {
			e->count++;
			e->ticks += ticks;
			p->samples++;
			return e;
		}
	}
	if (p->used == MAX_STACKS || p->n_ips + n > MAX_IPS) {
		p->dropped_stacks++; /* counted nowhere: the profile says how many */
		return NULL;
	}
	if (p->n_ips + n > p->cap_ips) {
		p->cap_ips = p->cap_ips ? p->cap_ips * 2 : 65536;
		while (p->cap_ips < p->n_ips + n)
			p->cap_ips *= 2;
		p->ips = mem_realloc(p->ips, p->cap_ips * sizeof(*p->ips));
	}
	memcpy(p->ips + p->n_ips, ips, n * sizeof(*ips));
	p->tab[k] = (struct entry){ thread, h, 1, ticks, p->n_ips, n };
	p->n_ips += n;
	p->used++;
	p->samples++;
	return &p->tab[k];
}

/* Whether thread was sampled in this tick already; marks it sampled. */
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
	struct profile *p = mem_zalloc(sizeof(*p));
	int rc;

	p->sym = symbols_new();
	p->ms_per_sample = 1.0;
	p->ticks_per_sec = 1000000000;
	p->period_ticks = 1000000;
	p->seen = mem_array(MAX_SEEN, sizeof(*p->seen));
	symbols_session(&c);
	if ((rc = trace_run_cb(port, cookie, &c, duration_ms, stop, &cb, p, NULL, em)) != 0) {
		profile_free(p);
		return rc;
	}
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
	if (p->n_kept == p->cap_kept) {
		p->cap_kept = p->cap_kept ? p->cap_kept * 2 : 4096;
		p->kept = mem_realloc(p->kept, p->cap_kept * sizeof(*p->kept));
	}
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

static const char *comm_of(const struct profile *p, uint64_t tid)
{
	for (size_t i = 0; i < p->n_comms; i++)
		if (p->comms[i].tid == tid)
			return p->comms[i].name;
	return p->proc_comm[0] ? p->proc_comm : "dotnet";
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
	struct profile *p = mem_zalloc(sizeof(*p));
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
	rc = perfev_run(&po, duration_ms, stop, on_perf_sample, p, &p->st, em);
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

/*
 * The address to look up for frame i of a stack (leaf first): a return
 * address one byte back (the call is just before it), but not the leaf, nor
 * the first user frame under kernel ones (the interrupted instruction).
 */
static uint64_t lookup_ip(const uint64_t *ips, size_t i)
{
	if (i == 0 || (PERFEV_KERNEL_IP(ips[i - 1]) && !PERFEV_KERNEL_IP(ips[i])))
		return ips[i];
	return ips[i] - 1;
}

/* Name ip into out; false when nothing named it (out then says "FILE![why]"). */
static bool perf_name(const struct profile *p, uint64_t ip, struct buf *out)
{
	const struct sym_method *m = PERFEV_KERNEL_IP(ip) ? NULL : symbols_lookup(p->sym, ip);
	struct natsym_frame f;

	if (m) {
		buf_printf(out, "%s!%s.%s", symbols_module(p->sym, m->module), m->type, m->name);
		return true;
	}
	natsym_lookup(p->nat, ip, &f);
	if (f.sym) {
		buf_printf(out, "%s!%s", f.file, f.sym);
		return true;
	}
	buf_printf(out, "%s![%s]", f.file, f.why ? f.why : "unknown");
	return false;
}

/* Entry e's frames named, root first; a run of unnamed frames of one file as one. */
static size_t frames_perf(const struct profile *p, const struct entry *e, char **names, struct buf *scratch)
{
	size_t n = 0;
	bool last_unnamed = false;

	for (size_t i = e->n; i-- > 0;) {
		bool named;

		buf_reset(scratch);
		named = perf_name(p, lookup_ip(p->ips + e->at, i), scratch);
		if (!named && last_unnamed && strcmp(names[n - 1], scratch->data) == 0)
			continue;
		last_unnamed = !named;
		names[n++] = mem_strdup(scratch->data);
	}
	return n;
}

/* `perf script`'s text: per sample a header line, then a frame a line, leaf first; a blank line after. */
/* Append text from the app (a name, a path, a thread's name) with control characters as '?': it makes no line. */
static void put_clean(struct buf *out, const char *s)
{
	for (; *s; s++)
		buf_putc(out, ((unsigned char)*s < 0x20 || *s == 0x7f) ? '?' : *s);
}

static void perfscript(const struct profile *p, struct buf *out)
{
	const char *ev = perfev_event_name(p->event);

	buf_printf(out, "# diagport %s: perf events (%s) of pid %llu, %llu samples, %zu written here%s%s\n", DP_VERSION,
		   ev, (unsigned long long)p->nspid, (unsigned long long)p->samples, p->n_kept,
		   p->notes[0] ? "; " : "", p->notes);
	for (size_t k = 0; k < p->n_kept; k++) {
		const struct kept *s = &p->kept[k];

		put_clean(out, comm_of(p, s->tid));
		buf_printf(out, " %u %llu.%06llu: %llu %s: \n", s->tid, (unsigned long long)(s->time_ns / 1000000000ull),
			   (unsigned long long)(s->time_ns % 1000000000ull / 1000), (unsigned long long)s->period, ev);
		for (size_t i = 0; i < s->n; i++) {
			uint64_t ip = p->ips[s->at + i], look = lookup_ip(p->ips + s->at, i);
			const struct sym_method *m = PERFEV_KERNEL_IP(ip) ? NULL : symbols_lookup(p->sym, look);
			struct natsym_frame f;

			natsym_lookup(p->nat, look, &f);
			buf_printf(out, "\t%16llx ", (unsigned long long)ip);
			if (m) {
				put_clean(out, m->type);
				buf_putc(out, '.');
				put_clean(out, m->name);
				buf_printf(out, "+0x%llx", (unsigned long long)(ip - m->start));
			} else if (f.sym) {
				put_clean(out, f.sym);
				buf_printf(out, "+0x%llx", (unsigned long long)f.off + (unsigned long long)(ip - look));
			} else {
				buf_puts(out, "[unknown]");
			}
			buf_puts(out, " (");
			put_clean(out, f.dso ? f.dso : "[unknown]");
			buf_puts(out, ")\n");
		}
		buf_putc(out, '\n');
	}
}

/* The frame names of entry e, root first, into names (borrowed strings); "[NativeFrames]" for a run of unnamed ones. */
static size_t frames(const struct profile *p, const struct entry *e, char **names, struct buf *scratch)
{
	size_t n = 0;
	bool native = false;

	if (p->perf)
		return frames_perf(p, e, names, scratch);
	for (size_t i = e->n; i-- > 0;) {
		const struct sym_method *m = symbols_lookup(p->sym, p->ips[e->at + i]);

		if (m == NULL) {
			if (!native)
				names[n++] = mem_strdup("[NativeFrames]");
			native = true;
			continue;
		}
		native = false;
		buf_reset(scratch);
		buf_printf(scratch, "%s!%s.%s", symbols_module(p->sym, m->module), m->type, m->name);
		names[n++] = mem_strdup(scratch->data);
	}
	return n;
}

/* A stack as one folded line's key: names joined by ';' (a ';' inside a name becomes ':'). */
static char *join(char **names, size_t n)
{
	struct buf b;

	buf_init(&b, 0);
	for (size_t i = 0; i < n; i++) {
		if (i)
			buf_putc(&b, ';');
		for (const char *c = names[i]; *c; c++) /* a name cannot make a line or a frame of its own */
			buf_putc(&b, *c == ';' ? ':' : ((unsigned char)*c < 0x20 || *c == 0x7f) ? '?' : *c);
	}
	return b.data ? b.data : mem_strdup("");
}

struct line {
	char *key;
	uint64_t count;
};

static int by_key(const void *a, const void *b)
{
	return strcmp(((const struct line *)a)->key, ((const struct line *)b)->key);
}

/* Every distinct stack over all threads with its samples, sorted by key; *n lines. */
static struct line *folded(const struct profile *p, size_t *n)
{
	struct line *l = mem_array(p->used ? p->used : 1, sizeof(*l));
	char **names = mem_array(MAX_DEPTH, sizeof(char *));
	struct buf scratch;
	size_t k = 0, out = 0;

	buf_init(&scratch, 0);
	for (size_t i = 0; i < p->cap; i++) {
		size_t nf;

		if (!p->tab[i].hash)
			continue;
		nf = frames(p, &p->tab[i], names, &scratch);
		l[k].key = join(names, nf);
		l[k++].count = p->tab[i].count;
		for (size_t j = 0; j < nf; j++)
			free(names[j]);
	}
	mem_sort(l, k, sizeof(*l), by_key);
	for (size_t i = 0; i < k; i++) {
		if (out && strcmp(l[out - 1].key, l[i].key) == 0) {
			l[out - 1].count += l[i].count;
			free(l[i].key);
		} else {
			l[out++] = l[i];
		}
	}
	buf_free(&scratch);
	free(names);
	*n = out;
	return l;
}

static void lines_free(struct line *l, size_t n)
{
	for (size_t i = 0; i < n; i++)
		free(l[i].key);
	free(l);
}

/* ---- the flame graph ---- */

struct node {
	char *name;
	uint64_t count;
	struct node *child, *next;
};

static struct node *child_of(struct node *parent, const char *name, size_t len)
{
	struct node **pp = &parent->child;

	for (; *pp; pp = &(*pp)->next)
		if (strlen((*pp)->name) == len && strncmp((*pp)->name, name, len) == 0)
			return *pp;
	*pp = mem_zalloc(sizeof(**pp));
	(*pp)->name = mem_strndup(name, len);
	return *pp;
}

static void tree_free(struct node *n)
{
	while (n) {
		struct node *next = n->next;

		tree_free(n->child);
		free(n->name);
		free(n);
		n = next;
	}
}

static void xml_text(struct buf *out, const char *s, size_t max)
{
	for (size_t i = 0; i < max && s[i]; i++) {
		switch (s[i]) {
		case '&': buf_puts(out, "&amp;"); break;
		case '<': buf_puts(out, "&lt;"); break;
		case '>': buf_puts(out, "&gt;"); break;
		case '"': buf_puts(out, "&quot;"); break;
		default: buf_putc(out, s[i]);
		}
	}
}

/* Draw n and its children: x in samples from the left, depth from the bottom. */
static void draw(struct buf *out, const struct node *n, uint64_t x, int depth, int max_depth, double px, uint64_t total)
{
	double w = (double)n->count * px, left = 10 + (double)x * px;
	int y = (max_depth - depth) * FRAME_H + 56; /* below the title and its notes */
	unsigned h = 0;

	for (const char *c = n->name; *c; c++)
		h = h * 31 + (unsigned char)*c;
	if (w >= 0.5) {
		size_t fit = w > 12 ? (size_t)((w - 6) / 7) : 0;

		buf_printf(out, "<g><title>");
		xml_text(out, n->name, 4096);
		buf_printf(out, " (%llu samples, %.2f%%)</title><rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"%d\" "
			   "fill=\"rgb(%u,%u,%u)\" rx=\"2\"/>",
			   (unsigned long long)n->count, 100.0 * (double)n->count / (double)total, left, y, w, FRAME_H - 1,
			   205 + h % 50, 80 + (h >> 8) % 120, (h >> 16) % 55);
		if (fit >= 3) {
			buf_printf(out, "<text x=\"%.1f\" y=\"%d\">", left + 3, y + FRAME_H - 5);
			xml_text(out, n->name, strlen(n->name) <= fit ? fit : fit - 2);
			if (strlen(n->name) > fit)
				buf_puts(out, "..");
			buf_puts(out, "</text>");
		}
		buf_puts(out, "</g>\n");
	}
	for (const struct node *c = n->child; c; c = c->next) {
		draw(out, c, x, depth + 1, max_depth, px, total);
		x += c->count;
	}
}

static int tree_depth(const struct node *n)
{
	int d = 0;

	for (const struct node *c = n->child; c; c = c->next) {
		int cd = tree_depth(c) + 1;

		if (cd > d)
			d = cd;
	}
	return d;
}

static void flamegraph(const struct profile *p, const char *title, struct buf *out)
{
	size_t n;
	struct line *l = folded(p, &n);
	struct node root = { .name = (char *)"all" };
	int depth, height;
	double px;

	for (size_t i = 0; i < n; i++) {
		struct node *at = &root;
		const char *s = l[i].key;

		root.count += l[i].count;
		while (*s) {
			size_t len = strcspn(s, ";");

			at = child_of(at, s, len);
			at->count += l[i].count;
			s += len + (s[len] == ';');
		}
	}
	depth = tree_depth(&root);
	height = (depth + 1) * FRAME_H + 76;
	px = root.count ? (double)(SVG_WIDTH - 20) / (double)root.count : 0;
	buf_printf(out, "<?xml version=\"1.0\" standalone=\"no\"?>\n<svg version=\"1.1\" width=\"%d\" height=\"%d\" "
		   "viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n<rect x=\"0\" y=\"0\" width=\"100%%\" "
		   "height=\"100%%\" fill=\"rgb(250,250,240)\"/>\n<style>text { font-family: monospace; font-size: 12px; "
		   "fill: rgb(0,0,0); }</style>\n<text x=\"%d\" y=\"24\" text-anchor=\"middle\" style=\"font-size:17px\">",
		   SVG_WIDTH, height, SVG_WIDTH, height, SVG_WIDTH / 2);
	xml_text(out, title, 200);
	buf_printf(out, " (%llu samples)</text>\n", (unsigned long long)root.count);
	if (p->notes[0]) {
		buf_printf(out, "<text x=\"%d\" y=\"40\" text-anchor=\"middle\">", SVG_WIDTH / 2);
		xml_text(out, p->notes, sizeof(p->notes));
		buf_puts(out, "</text>\n");
	}
	if (root.count)
		draw(out, &root, 0, 0, depth, px, root.count);
	buf_puts(out, "</svg>\n");
	tree_free(root.child);
	lines_free(l, n);
}

/* ---- speedscope ---- */

/* The milliseconds entry e stands for: its samples' real time (EventPipe), or samples times the period (perf). */
static double weight_ms(const struct profile *p, const struct entry *e)
{
	if (p->perf)
		return (double)e->count * p->ms_per_sample;
	return (double)e->ticks * 1000.0 / (double)p->ticks_per_sec;
}

static void speedscope(const struct profile *p, const char *title, struct buf *out)
{
	json_t *frames_j = json_array(), *profiles = json_array(), *doc, *names_idx = json_object();
	char **names = mem_array(MAX_DEPTH, sizeof(char *)), *text;
	struct buf scratch;
	uint64_t *threads = mem_array(p->used ? p->used : 1, sizeof(uint64_t));
	size_t n_threads = 0;

	buf_init(&scratch, 0);
	for (size_t i = 0; i < p->cap; i++) { /* the threads, in order of first appearance in the table */
		bool seen = false;

		if (!p->tab[i].hash)
			continue;
		for (size_t t = 0; t < n_threads && !seen; t++)
			seen = threads[t] == p->tab[i].thread;
		if (!seen)
			threads[n_threads++] = p->tab[i].thread;
	}
	for (size_t t = 0; t < n_threads; t++) {
		json_t *samples = json_array(), *weights = json_array();
		double total = 0;
		char name[48];

		for (size_t i = 0; i < p->cap; i++) {
			json_t *sample;
			size_t nf;

			if (!p->tab[i].hash || p->tab[i].thread != threads[t])
				continue;
			nf = frames(p, &p->tab[i], names, &scratch);
			sample = json_array();
			for (size_t j = 0; j < nf; j++) {
				json_t *ix = json_object_get(names_idx, names[j]);

				if (ix == NULL) {
					ix = json_integer((json_int_t)json_array_size(frames_j));
					json_object_set_new(names_idx, names[j], ix);
					json_array_append_new(frames_j, json_pack("{s:s}", "name", names[j]));
				}
				json_array_append(sample, ix);
				free(names[j]);
			}
			json_array_append_new(samples, sample);
			json_array_append_new(weights, json_real(weight_ms(p, &p->tab[i])));
			total += weight_ms(p, &p->tab[i]);
		}
		if (p->perf)
			snprintf(name, sizeof(name), "%s (%llu)", comm_of(p, threads[t]), (unsigned long long)threads[t]);
		else
			snprintf(name, sizeof(name), "Thread (0x%llX)", (unsigned long long)threads[t]);
		json_array_append_new(profiles, json_pack("{s:s, s:s, s:s, s:i, s:f, s:o, s:o}", "type", "sampled", "name",
							  name, "unit", "milliseconds", "startValue", 0, "endValue", total,
							  "samples", samples, "weights", weights));
	}
	buf_reset(&scratch);
	buf_printf(&scratch, "%s%s%s", title, p->notes[0] ? " - " : "", p->notes);
	doc = json_pack("{s:s, s:{s:o}, s:o, s:s, s:i, s:s}", "$schema", "https://www.speedscope.app/file-format-schema.json",
			"shared", "frames", frames_j, "profiles", profiles, "name", scratch.data, "activeProfileIndex", 0,
			"exporter", "diagport " DP_VERSION);
	text = json_dumps(doc, JSON_COMPACT);
	buf_puts(out, text);
	free(text);
	json_decref(doc);
	json_decref(names_idx);
	buf_free(&scratch);
	free(names);
	free(threads);
}

void profile_write(const struct profile *p, enum profile_format f, const char *title, struct buf *out)
{
	if (f == PROFILE_PERFSCRIPT) {
		perfscript(p, out);
	} else if (f == PROFILE_FLAMEGRAPH) {
		flamegraph(p, title, out);
	} else if (f == PROFILE_SPEEDSCOPE) {
		speedscope(p, title, out);
	} else {
		size_t n;
		struct line *l = folded(p, &n);

		for (size_t i = 0; i < n; i++)
			buf_printf(out, "%s %llu\n", l[i].key, (unsigned long long)l[i].count);
		lines_free(l, n);
	}
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
	free(p->tab);
	free(p->ips);
	free(p);
}
