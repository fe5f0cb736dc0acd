/*
 * profile_out.c - CPU profiles written (profile.h): each counted stack
 * named, root first: by the method rundown (launcher/trace/symbols.h), else (perf) by
 * natsym.h, a run of unnamed frames as one "[NativeFrames]" (perf:
 * "FILE![why]").
 *
 * Folded: one line per distinct stack over all threads, "a;b;c COUNT",
 * sorted. Flame graph: those stacks as a tree, drawn as an SVG of
 * rectangles (root at the bottom, width by samples) with the names and a
 * <title> per frame; no script, so it renders anywhere. Speedscope: one
 * "sampled" profile per thread, weights in milliseconds (EventPipe: the
 * real time its samples stand for; perf: samples times the period).
 * Perfscript (perf): `perf script`'s text, a sample at a time. Pprof
 * (launcher/pprof.h): a sample per counted stack, its frames leaf first as
 * functions named "Type.Method" (or a native symbol) whose file is the
 * module, valued in samples and CPU nanoseconds (speedscope's weights),
 * labelled with the thread.
 */
#include "profile_int.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"
#include "launcher/pprof.h"

#define SVG_WIDTH 1200
#define FRAME_H 17

static const char *comm_of(const struct profile *p, uint64_t tid)
{
	for (size_t i = 0; i < p->n_comms; i++)
		if (p->comms[i].tid == tid)
			return p->comms[i].name;
	return p->proc_comm[0] ? p->proc_comm : "dotnet";
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
	struct line *l = mem_array(p->stacks.n ? p->stacks.n : 1, sizeof(*l));
	char **names = mem_array(MAX_DEPTH, sizeof(char *));
	const struct entry *e;
	struct buf scratch;
	size_t k = 0, out = 0;

	buf_init(&scratch, 0);
	for (size_t pos = 0; (e = htab_next(&p->stacks, &pos)) != NULL;) {
		size_t nf = frames(p, e, names, &scratch);

		l[k].key = join(names, nf);
		l[k++].count = e->count;
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

/* A thread as speedscope's profiles and pprof's "thread" label name it: perf "COMM (TID)", EventPipe "Thread (0xID)". */
static void thread_name(const struct profile *p, uint64_t thread, char *name, size_t size)
{
	if (p->perf)
		snprintf(name, size, "%s (%llu)", comm_of(p, thread), (unsigned long long)thread);
	else
		snprintf(name, size, "Thread (0x%llX)", (unsigned long long)thread);
}

static void speedscope(const struct profile *p, const char *title, struct buf *out)
{
	json_t *frames_j = json_array(), *profiles = json_array(), *doc, *names_idx = json_object();
	char **names = mem_array(MAX_DEPTH, sizeof(char *)), *text;
	struct buf scratch;
	uint64_t *threads = mem_array(p->stacks.n ? p->stacks.n : 1, sizeof(uint64_t));
	const struct entry *e;
	size_t n_threads = 0;

	buf_init(&scratch, 0);
	for (size_t pos = 0; (e = htab_next(&p->stacks, &pos)) != NULL;) { /* the threads, in table order */
		bool seen = false;

		for (size_t t = 0; t < n_threads && !seen; t++)
			seen = threads[t] == e->thread;
		if (!seen)
			threads[n_threads++] = e->thread;
	}
	for (size_t t = 0; t < n_threads; t++) {
		json_t *samples = json_array(), *weights = json_array();
		double total = 0;
		char name[48];

		for (size_t pos = 0; (e = htab_next(&p->stacks, &pos)) != NULL;) {
			json_t *sample;
			size_t nf;

			if (e->thread != threads[t])
				continue;
			nf = frames(p, e, names, &scratch);
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
			json_array_append_new(weights, json_real(weight_ms(p, e)));
			total += weight_ms(p, e);
		}
		thread_name(p, threads[t], name, sizeof(name));
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

/* ---- pprof ---- */

/*
 * The code address ip (a frame's, as looked up) named for pprof: the name
 * into name, the module or object file into *file (borrowed); false when
 * nothing named it (then the name is the other formats' "[NativeFrames]" or
 * "FILE![why]").
 */
static bool pprof_frame(const struct profile *p, uint64_t ip, struct buf *name, const char **file)
{
	const struct sym_method *m = p->perf && PERFEV_KERNEL_IP(ip) ? NULL : symbols_lookup(p->sym, ip);
	struct natsym_frame f;

	buf_reset(name);
	if (m) {
		buf_printf(name, "%s.%s", m->type, m->name);
		*file = symbols_module(p->sym, m->module);
		return true;
	}
	if (!p->perf) {
		buf_puts(name, "[NativeFrames]");
		*file = "";
		return false;
	}
	natsym_lookup(p->nat, ip, &f);
	*file = f.file;
	if (f.sym) {
		buf_puts(name, f.sym);
		return true;
	}
	buf_printf(name, "%s![%s]", f.file, f.why ? f.why : "unknown");
	return false;
}

/* An address already named: stacks share most of their frames, and naming (perf's above all) is the cost. */
struct named_ip {
	uint64_t ip, fn;
	bool named;
};

static bool ip_eq(const void *slot, const void *key)
{
	return ((const struct named_ip *)slot)->ip == *(const uint64_t *)key;
}

/*
 * A sample per counted stack (threads apart, as counted), valued in samples and CPU nanoseconds, labelled
 * with its thread as speedscope names it.
 */
static int write_pprof(const struct profile *p, const char *title, struct buf *out, struct err_msg *em)
{
	struct pprof *pp = pprof_new();
	uint64_t *locs = mem_array(MAX_DEPTH, sizeof(uint64_t));
	const struct entry *e;
	struct htab seen;
	struct buf name;
	int rc;

	buf_init(&name, 0);
	htab_init(&seen, sizeof(struct named_ip));
	pprof_sample_type(pp, "samples", "count");
	pprof_sample_type(pp, "cpu", "nanoseconds");
	pprof_period(pp, "cpu", "nanoseconds", (int64_t)(p->ms_per_sample * 1e6 + 0.5));
	pprof_time(pp, (int64_t)p->unix_ms * 1000000, (int64_t)p->took_ms * 1000000);
	pprof_comment(pp, title);
	if (p->notes[0])
		pprof_comment(pp, p->notes);
	for (size_t pos = 0; (e = htab_next(&p->stacks, &pos)) != NULL;) {
		int64_t v[2] = { (int64_t)e->count, (int64_t)(weight_ms(p, e) * 1e6 + 0.5) };
		uint64_t last_unnamed = 0;
		size_t n = 0;
		char thread[48];
		struct pprof_label label = { "thread", thread, 0, NULL };

		for (size_t i = 0; i < e->n && n < MAX_DEPTH; i++) {
			uint64_t ip = p->perf ? lookup_ip(p->ips + e->at, i) : p->ips[e->at + i], h = htab_u64(ip);
			struct named_ip *k = htab_find(&seen, h, ip_eq, &ip);

			if (k == NULL) {
				const char *file;
				bool named = pprof_frame(p, ip, &name, &file);
				uint64_t fn = pprof_function(pp, name.data ? name.data : "", name.data, file);

				k = htab_put(&seen, h);
				*k = (struct named_ip){ ip, fn, named };
			}
			if (!k->named && k->fn == last_unnamed) /* a run of unnamed frames of one file is one */
				continue;
			last_unnamed = k->named ? 0 : k->fn;
			locs[n++] = pprof_location(pp, k->fn);
		}
		thread_name(p, e->thread, thread, sizeof(thread));
		pprof_sample(pp, locs, n, v, &label, 1);
	}
	rc = pprof_write(pp, out, em);
	htab_free(&seen);
	buf_free(&name);
	free(locs);
	pprof_free(pp);
	return rc;
}

int profile_write(const struct profile *p, enum profile_format f, const char *title, struct buf *out,
		  struct err_msg *em)
{
	if (f == PROFILE_PPROF)
		return write_pprof(p, title, out, em);
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
	return 0;
}
