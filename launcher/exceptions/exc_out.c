/*
 * exc_out.c - exceptions written out (exc_int.h): frames named, dotnet-
 * monitor's filters applied, and its three formats: newline-delimited JSON
 * and JSON sequences of its ExceptionInstance, and its text layout (the
 * layout .NET prints for an unhandled exception, "First chance exception
 * at" first).
 *
 * What the runtime's events cannot give is said in docs/agent/exceptions.md:
 * moduleVersionId is the empty GUID, hidden is false (StackTraceHidden is
 * an attribute the events do not carry), an exception type's module is the
 * module of a method of that type the rundown named (its constructor,
 * usually), or "".
 */
#include "exc_int.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "clock.h"
#include "mem.h"
#include "launcher/runtime/proc.h"

#define ZERO_GUID "00000000-0000-0000-0000-000000000000"
#define MAX_PARAMS 64

/* The managed frames of an entry, named; the runtime's own exception dispatch above the thrower left out. */
struct frames {
	const struct sym_method *m[EXC_MAX_IPS];
	size_t n;
};

/* Frames of the runtime's exception dispatch (managed since .NET 9), above the method that threw. */
static bool dispatch_frame(const struct sym_method *m)
{
	return strcmp(m->type, "System.Runtime.EH") == 0 || strcmp(m->type, "System.Runtime.ExceptionServices.InternalCalls") == 0;
}

static void frames_of(const struct exc_entry *e, const struct symbols *sym, struct frames *f)
{
	f->n = 0;
	for (size_t i = 0; sym && i < e->n_ips; i++) {
		const struct sym_method *m = symbols_lookup(sym, e->ips[i]);

		if (m == NULL || (f->n == 0 && dispatch_frame(m)))
			continue;
		f->m[f->n++] = m;
	}
}

/* ---- parameter types, from the signature the rundown gives ("instance void  (class System.Object,int32)") ---- */

static const struct {
	const char *il, *clr;
} prims[] = {
	{ "bool", "System.Boolean" },	   { "char", "System.Char" },	     { "int8", "System.SByte" },
	{ "unsigned int8", "System.Byte" }, { "int16", "System.Int16" },    { "unsigned int16", "System.UInt16" },
	{ "int32", "System.Int32" },	   { "unsigned int32", "System.UInt32" }, { "int64", "System.Int64" },
	{ "unsigned int64", "System.UInt64" }, { "float32", "System.Single" }, { "float64", "System.Double" },
	{ "string", "System.String" },	   { "object", "System.Object" },    { "native int", "System.IntPtr" },
	{ "native unsigned int", "System.UIntPtr" }, { "typedref", "System.TypedReference" },
};

/* One parameter's IL name (text, n bytes) as .NET names its type, appended to out. */
static void param_type(const char *t, size_t n, struct buf *out)
{
	size_t base;

	while (n && *t == ' ')
		t++, n--;
	while (n && t[n - 1] == ' ')
		n--;
	if (n > 6 && memcmp(t, "class ", 6) == 0)
		t += 6, n -= 6;
	else if (n > 10 && memcmp(t, "valuetype ", 10) == 0)
		t += 10, n -= 10;
	for (base = 0; base < n && t[base] != '[' && t[base] != '&' && t[base] != '*'; base++)
		;
	for (size_t i = 0; i < sizeof(prims) / sizeof(prims[0]); i++)
		if (strlen(prims[i].il) == base && memcmp(prims[i].il, t, base) == 0) {
			buf_puts(out, prims[i].clr);
			buf_append(out, t + base, n - base);
			return;
		}
	buf_append(out, t, n);
}

/* The parameter types of m, each a NUL-ended string in out (n of them). */
static size_t params_of(const struct sym_method *m, struct buf *out, size_t at[MAX_PARAMS])
{
	const char *s = m->sig ? strchr(m->sig, '(') : NULL, *p;
	size_t n = 0;
	int depth = 0;

	out->len = 0;
	if (s == NULL || s[1] == ')')
		return 0;
	for (p = ++s; *p && n < MAX_PARAMS; p++) {
		if (*p == '<' || *p == '[' || *p == '(')
			depth++;
		else if ((*p == '>' || *p == ']' || *p == ')') && depth > 0)
			depth--;
		else if ((*p == ',' || *p == ')') && depth == 0) {
			at[n++] = out->len;
			param_type(s, (size_t)(p - s), out);
			buf_putc(out, '\0');
			s = p + 1;
			if (*p == ')')
				break;
		}
	}
	return n;
}

/* ---- filters ---- */

static bool is(const char *want, const char *have)
{
	return want == NULL || *want == '\0' || strcmp(want, have) == 0;
}

static bool included(const struct exc_filter *f, const struct exc_entry *e, const struct frames *fr,
		     const struct symbols *sym)
{
	const struct sym_method *top = fr->n ? fr->m[0] : NULL;

	if (top && !(is(f->method, top->name) && is(f->type, top->type) && is(f->module, symbols_module(sym, top->module))))
		return false;
	return is(f->exception, e->type);
}

/* dotnet-monitor's ShouldExclude: a filter with nothing set excludes nothing. */
static bool excluded(const struct exc_filter *f, const struct exc_entry *e, const struct frames *fr,
		     const struct symbols *sym)
{
	const struct sym_method *top = fr->n ? fr->m[0] : NULL;
	bool any = f->exception && *f->exception;

	if (top) {
		any = any || (f->method && *f->method) || (f->type && *f->type) || (f->module && *f->module);
		if (!(is(f->method, top->name) && is(f->type, top->type) && is(f->module, symbols_module(sym, top->module))))
			return false;
	}
	return any && is(f->exception, e->type);
}

static bool kept(const struct exc_filters *f, const struct exc_entry *e, const struct frames *fr,
		 const struct symbols *sym)
{
	bool in = f == NULL || f->n_include == 0;

	for (size_t i = 0; f && i < f->n_exclude; i++)
		if (excluded(&f->exclude[i], e, fr, sym))
			return false;
	for (size_t i = 0; f && i < f->n_include && !in; i++)
		in = included(&f->include[i], e, fr, sym);
	return in;
}

/* ---- what the formats share ---- */

struct out_ctx {
	const struct exc_entry *e;
	size_t n;
	const struct symbols *sym;
	bool *keep;        /* per entry: passed the filters */
	bool name_threads; /* /proc is the app's */
	uint64_t pid;
	struct buf params;
	size_t at[MAX_PARAMS];
	const char *type_cache[16], *module_cache[16];
	size_t n_cache;
};

/* The module of the exception's type: of a method of that type the rundown named, or "". */
static const char *type_module(struct out_ctx *o, const char *type)
{
	const char *mod = "";

	for (size_t i = 0; i < o->n_cache; i++)
		if (strcmp(o->type_cache[i], type) == 0)
			return o->module_cache[i];
	for (size_t i = 0; o->sym && i < symbols_count(o->sym) && !*mod; i++) {
		const struct sym_method *m = symbols_at(o->sym, i);

		if (strcmp(m->type, type) == 0)
			mod = symbols_module(o->sym, m->module);
	}
	if (o->n_cache < 16) {
		o->type_cache[o->n_cache] = type;
		o->module_cache[o->n_cache++] = mod;
	}
	return mod;
}

/* The entry with this id among those kept, or NULL. Entries are in id order. */
static const struct exc_entry *by_id(const struct out_ctx *o, uint64_t id)
{
	size_t lo = 0, hi = o->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (o->e[mid].id < id)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < o->n && o->e[lo].id == id && o->keep[lo] ? &o->e[lo] : NULL;
}

/* ---- JSON ---- */

static json_t *frame_json(struct out_ctx *o, const struct sym_method *m)
{
	json_t *params = json_array();
	size_t np = params_of(m, &o->params, o->at);

	for (size_t i = 0; i < np; i++)
		json_array_append_new(params, json_string(o->params.data + o->at[i]));
	return json_pack("{s:s, s:I, s:o, s:s, s:s, s:s, s:b}", "methodName", m->name, "methodToken",
			 (json_int_t)m->token, "parameterTypes", params, "typeName", m->type, "moduleName",
			 symbols_module(o->sym, m->module), "moduleVersionId", ZERO_GUID, "hidden", 0);
}

static void write_json(struct out_ctx *o, const struct exc_entry *e, const struct frames *fr, bool seq, struct buf *out)
{
	json_t *frames = json_array(), *inner = json_array(), *doc;
	char ts[CLOCK_RFC3339_LEN], tname[16] = "";
	char *text;

	for (size_t i = 0; i < fr->n; i++)
		json_array_append_new(frames, frame_json(o, fr->m[i]));
	if (e->inner)
		json_array_append_new(inner, json_pack("{s:I}", "id", (json_int_t)e->inner));
	if (o->name_threads)
		proc_thread_name(o->pid, e->thread, tname, sizeof(tname));
	clock_rfc3339_at(ts, e->wall_ms);
	doc = json_pack("{s:I, s:s, s:s, s:s, s:s, s:o, s:{s:I, s:o, s:o}}", "id", (json_int_t)e->id, "timestamp", ts,
			"typeName", e->type, "moduleName", type_module(o, e->type), "message", e->message,
			"innerExceptions", inner, "stack", "threadId", (json_int_t)e->thread, "threadName",
			*tname ? json_string(tname) : json_null(), "frames", frames);
	text = json_dumps(doc, JSON_COMPACT | JSON_PRESERVE_ORDER | JSON_ENSURE_ASCII);
	if (seq)
		buf_putc(out, 0x1e);
	buf_puts(out, text ? text : "{}");
	buf_putc(out, '\n');
	free(text);
	json_decref(doc);
}

/* ---- text ---- */

/*
 * The app's words into the text layout: a control character (an escape sequence that would retitle or
 * clear the reader's terminal, a carriage return that would hide a line) becomes '?'; line feeds and tabs
 * stay (multi-line messages are the layout's own, as .NET prints them).
 */
static void put_safe(struct buf *out, const char *s)
{
	for (; *s; s++)
		buf_putc(out, ((unsigned char)*s < 0x20 && *s != '\n' && *s != '\t') || *s == 0x7f ? '?' : *s);
}

static void text_frames(struct out_ctx *o, const struct frames *fr, struct buf *out)
{
	for (size_t i = 0; i < fr->n; i++) {
		size_t np = params_of(fr->m[i], &o->params, o->at);

		buf_puts(out, "\n   at ");
		put_safe(out, fr->m[i]->type);
		buf_putc(out, '.');
		put_safe(out, fr->m[i]->name);
		buf_putc(out, '(');
		for (size_t k = 0; k < np; k++) {
			if (k)
				buf_putc(out, ',');
			put_safe(out, o->params.data + o->at[k]);
		}
		buf_putc(out, ')');
	}
}

/* Type: message, then the inner exception (" ---> ", its frames, the end line), then the frames. */
static void text_body(struct out_ctx *o, const struct exc_entry *e, const struct frames *fr, unsigned depth,
		      struct buf *out)
{
	put_safe(out, e->type);
	if (*e->message) {
		buf_puts(out, ": ");
		put_safe(out, e->message);
	}
	if (e->inner) {
		const struct exc_entry *in = by_id(o, e->inner);

		if (in && depth < 16) {
			struct frames *ifr = mem_zalloc(sizeof(*ifr));

			frames_of(in, o->sym, ifr);
			buf_puts(out, "\n ---> ");
			text_body(o, in, ifr, depth + 1, out);
			buf_puts(out, "\n   --- End of inner exception stack trace ---");
			free(ifr);
		} else {
			buf_puts(out, "\n   --- The inner exception was not included in the filter ---");
		}
	}
	text_frames(o, fr, out);
}

static void write_text(struct out_ctx *o, const struct exc_entry *e, const struct frames *fr, struct buf *out)
{
	char ts[CLOCK_RFC3339_LEN];

	clock_rfc3339_at(ts, e->wall_ms);
	buf_printf(out, "First chance exception at %s\n", ts);
	text_body(o, e, fr, 0, out);
	buf_puts(out, "\n\n");
}

/* Whether /proc/PID is the app itself (the agent shares its PID namespace): its exe is the command's. */
static bool proc_is_app(uint64_t pid, const char *command_line)
{
	char path[64], exe[PATH_MAX];
	size_t want = command_line ? strcspn(command_line, " ") : 0;
	ssize_t n;

	snprintf(path, sizeof(path), "/proc/%llu/exe", (unsigned long long)pid);
	return want && (n = readlink(path, exe, sizeof(exe))) > 0 && (size_t)n == want &&
	       memcmp(exe, command_line, want) == 0;
}

void exc_out_write(const struct exc_entry *e, size_t n, const struct symbols *sym, const struct exc_filters *f,
		   enum exc_format fmt, uint64_t pid, const char *command_line, struct buf *out)
{
	struct out_ctx o = { .e = e, .n = n, .sym = sym, .pid = pid };
	struct frames *fr = mem_zalloc(sizeof(*fr));

	o.keep = mem_array(n ? n : 1, sizeof(bool));
	o.name_threads = fmt != EXC_TEXT && proc_is_app(pid, command_line);
	buf_init(&o.params, 256);
	for (size_t i = 0; i < n; i++) {
		frames_of(&e[i], sym, fr);
		o.keep[i] = kept(f, &e[i], fr, sym);
	}
	for (size_t i = 0; i < n; i++) {
		if (!o.keep[i])
			continue;
		frames_of(&e[i], sym, fr);
		if (fmt == EXC_TEXT)
			write_text(&o, &e[i], fr, out);
		else
			write_json(&o, &e[i], fr, fmt == EXC_JSON_SEQ, out);
	}
	buf_free(&o.params);
	free(o.keep);
	free(fr);
}
