/*
 * logs.c - ILogger output from the logging EventSource (logs.h).
 *
 * The session asks for the JsonMessage keyword: each log call is one
 * MessageJson event (level, category, event id and name, the formatted
 * message, the arguments and the exception as JSON text), and each scope a
 * pair of ActivityJsonStart/Stop events. Async code opens, logs in and closes
 * a scope on different threads, so scopes are followed by activity ID, not
 * by thread, as dotnet-monitor does: the session also turns on TplEventSource's
 * TasksFlowActivityIds, which gives each Start a new activity ID (its parent's
 * as the related one) that flows with the async code, and each log event the
 * ID of its innermost scope; logscopes.h keeps the open scopes and walks a log
 * event's ID up to its outermost scope. Those events come from the threads'
 * buffers in turn, not in time order, so they are held back and applied in
 * timestamp order (on_event says when).
 */
#include "logs.h"

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "eventpipe/evpayload.h"
#include "logscopes.h"
#include "mem.h"
#include "clock.h"

#define LOGGING_PROVIDER "Microsoft-Extensions-Logging"
#define KW_JSON_MESSAGE 0x8ull
#define TPL_PROVIDER "System.Threading.Tasks.TplEventSource"
#define KW_TASKS_FLOW_ACTIVITY_IDS 0x80ull
#define MAX_HELD 65536              /* logging events waiting for their turn */
#define MAX_HELD_BYTES (16u << 20) /* and their text */

static const char *const level_names[] = { "Trace", "Debug", "Information", "Warning", "Error", "Critical" };
static const char *const level_short[] = { "trce", "dbug", "info", "warn", "fail", "crit" };

int logs_level(const char *name)
{
	for (int i = 0; i < 6; i++)
		if (strcasecmp(name, level_names[i]) == 0)
			return i;
	return -1;
}

void logs_filter_free(struct logs_filter *f)
{
	for (size_t i = 0; i < f->n; i++)
		free(f->categories[i]);
	free(f->categories);
	free(f->levels);
	memset(f, 0, sizeof(*f));
}


int logs_filter_json(const char *body, size_t len, struct logs_filter *out, struct err_msg *em)
{
	json_error_t je;
	json_t *doc = json_loadb(body, len, JSON_REJECT_DUPLICATES, &je), *v, *specs;
	struct logs_filter f = { .level = 0, .use_app_filters = true };
	int rc = 0;

	if (doc == NULL)
		return err_set(em, DP_ESYNTAX, "the body is not JSON: line %d, column %d: %s", je.line, je.column, je.text);
	if (!json_is_object(doc)) {
		json_decref(doc);
		return err_set(em, DP_EINVAL, "the body must be a JSON object");
	}
	if ((v = trace_member(doc, "logLevel")) != NULL && !json_is_null(v)) {
		if (!json_is_string(v) || (f.level = logs_level(json_string_value(v))) < 0)
			rc = err_set(em, DP_EINVAL, "'logLevel' must be one of Trace, Debug, Information, Warning, Error, "
				     "Critical");
	}
	if (rc == 0 && (v = trace_member(doc, "useAppFilters")) != NULL && !json_is_null(v)) {
		if (!json_is_boolean(v))
			rc = err_set(em, DP_EINVAL, "'useAppFilters' must be true or false");
		else
			f.use_app_filters = json_is_true(v);
	}
	specs = trace_member(doc, "filterSpecs");
	if (rc == 0 && specs && !json_is_null(specs)) {
		const char *k;

		if (!json_is_object(specs))
			rc = err_set(em, DP_EINVAL, "'filterSpecs' must be an object of category: level");
		else if (json_object_size(specs) > LOGS_MAX_FILTERS)
			rc = err_set(em, DP_ETOOBIG, "'filterSpecs' has more than %d categories", LOGS_MAX_FILTERS);
		json_object_foreach(specs, k, v) {
			int lv = -1;

			if (rc != 0)
				break;
			if (!trace_name_ok(k, ";:=\"")) {
				rc = err_set(em, DP_EINVAL, "filterSpecs: category '%.64s' must be printable, without ; : = \"",
					     k);
				break;
			}
			if (!json_is_null(v) && (!json_is_string(v) || (lv = logs_level(json_string_value(v))) < 0)) {
				rc = err_set(em, DP_EINVAL, "filterSpecs.%.64s must be a log level or null", k);
				break;
			}
			f.categories = mem_realloc(f.categories, (f.n + 1) * sizeof(*f.categories));
			f.levels = mem_realloc(f.levels, (f.n + 1) * sizeof(*f.levels));
			f.categories[f.n] = mem_strdup(k);
			f.levels[f.n++] = lv;
		}
	}
	json_decref(doc);
	if (rc != 0) {
		logs_filter_free(&f);
		return rc;
	}
	*out = f;
	return 0;
}

int logs_trace_config(const struct logs_filter *f, struct trace_config *out, struct err_msg *em)
{
	struct trace_config c = { .buffer_mb = 16 };
	struct buf specs, args;
	int rc;
	/* EventLevel for the least LogLevel: Trace/Debug Verbose, Information Informational, ... Critical Critical */
	static const uint32_t event_level[] = { 5, 5, 4, 3, 2, 1 };
	int least = f->level < 0 ? 0 : f->level;

	buf_init(&specs, 0);
	buf_init(&args, 0);
	if (f->use_app_filters)
		buf_puts(&specs, "UseAppFilters");
	for (size_t i = 0; i < f->n; i++) {
		buf_printf(&specs, "%s%s", specs.len ? ";" : "", f->categories[i]);
		if (f->levels[i] >= 0)
			buf_printf(&specs, ":%s", level_names[f->levels[i]]);
		if (f->levels[i] >= 0 && f->levels[i] < least)
			least = f->levels[i];
	}
	/* a value with ; or = goes in double quotes, as the .NET client writes arguments */
	if (specs.len)
		buf_printf(&args, strpbrk(specs.data, ";=") ? "FilterSpecs=\"%s\"" : "FilterSpecs=%s", specs.data);
	rc = trace_config_add(&c, LOGGING_PROVIDER, KW_JSON_MESSAGE, f->use_app_filters ? 5 : event_level[least],
			      specs.len ? args.data : NULL, em);
	/* activity IDs that flow with async code, at Informational: what turns the runtime's ActivityTracker on */
	if (rc == 0)
		rc = trace_config_add(&c, TPL_PROVIDER, KW_TASKS_FLOW_ACTIVITY_IDS, 4, NULL, em);
	buf_free(&specs);
	buf_free(&args);
	if (rc != 0) {
		trace_config_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

/* ---- the converter ---- */

enum held_kind { HELD_MESSAGE, HELD_START, HELD_STOP };
enum { STR_CATEGORY, STR_MESSAGE, STR_EVENT_NAME, STR_EXCEPTION, STR_ARGUMENTS, N_STR };

/* A logging event read but not yet applied (what it needs of its payload, copied). */
struct held_event {
	int64_t ts;
	uint64_t seq; /* arrival order, for equal timestamps */
	enum held_kind kind;
	int level, eid;
	uint8_t activity[16], related[16];
	char *str[N_STR]; /* owned; a start has only its arguments */
};

struct logs {
	struct logs_filter f; /* level and use_app_filters only */
	enum logs_format fmt;
	struct buf *out;
	struct held_event *held;
	size_t n_held, cap_held, held_bytes;
	uint64_t seq;
	struct nettrace_trace header;
	bool have_header;
	struct evpayload pl;
	struct logscopes *scopes;
	uint64_t entries;
};

struct logs *logs_new(const struct logs_filter *f, enum logs_format fmt, struct buf *out)
{
	struct logs *l = mem_zalloc(sizeof(*l));

	l->f.level = f->level;
	l->f.use_app_filters = f->use_app_filters;
	l->fmt = fmt;
	l->out = out;
	l->scopes = logscopes_new();
	return l;
}

static void held_free(struct logs *l, struct held_event *h)
{
	for (int i = 0; i < N_STR; i++)
		if (h->str[i]) {
			l->held_bytes -= strlen(h->str[i]);
			free(h->str[i]);
		}
}

void logs_free(struct logs *l)
{
	if (l == NULL)
		return;
	for (size_t i = 0; i < l->n_held; i++)
		held_free(l, &l->held[i]);
	free(l->held);
	logscopes_free(l->scopes);
	evpayload_free(&l->pl);
	free(l);
}

uint64_t logs_entries(const struct logs *l)
{
	return l->entries;
}

static int on_header(void *ctx, const struct nettrace_trace *h)
{
	struct logs *l = ctx;

	l->header = *h;
	l->have_header = true;
	return 0;
}

/* "2026-11-22 15:06:39Z" (.NET's "u" format, as dotnet-monitor writes it). */
static void stamp(struct logs *l, int64_t ticks, char out[40])
{
	int64_t ms = l->have_header ? nettrace_wall_ms(&l->header, ticks) : clock_unix_ms();

	clock_rfc3339_at(out, ms);
	out[10] = ' ';
	out[19] = 'Z';
	out[20] = '\0';
}

/* Arguments JSON text as an object (strings as they are); NULL when it is not an object. */
static json_t *args_object(const char *text)
{
	json_t *o = *text ? json_loads(text, 0, NULL) : NULL;

	if (o && !json_is_object(o)) {
		json_decref(o);
		o = NULL;
	}
	return o;
}

static void put_record(struct logs *l, json_t *o)
{
	char *text = json_dumps(o, JSON_COMPACT | JSON_PRESERVE_ORDER);

	if (text == NULL)
		return;
	if (l->fmt == LOGS_JSON_SEQ)
		buf_putc(l->out, 0x1e);
	buf_puts(l->out, text);
	buf_putc(l->out, '\n');
	free(text);
}

/* text: every line of s after the first indented by 6 spaces */
static void indented(struct buf *b, const char *s)
{
	buf_puts(b, "      ");
	for (; *s; s++) {
		if (*s == '\r')
			continue;
		buf_putc(b, *s);
		if (*s == '\n' && s[1])
			buf_puts(b, "      ");
	}
	buf_putc(b, '\n');
}

static void message(struct logs *l, const struct held_event *e)
{
	int level = e->level, eid = e->eid;
	const char *cat = e->str[STR_CATEGORY], *msg = e->str[STR_MESSAGE], *ename = e->str[STR_EVENT_NAME];
	const char *scopes[LOGSCOPES_MAX_DEPTH];
	size_t n_scopes;
	json_t *exo = args_object(e->str[STR_EXCEPTION]), *state = args_object(e->str[STR_ARGUMENTS]);
	char ts[40];
	struct buf *b = l->out;

	if (level < 0 || level > 5 || (l->f.level > 0 && level < l->f.level))
		goto out;
	/* by the related ID when the ID is unknown: another session's Start (TplEventSource's flow is shared by
	 * every session) may have branched it once more, as dotnet-monitor allows for */
	n_scopes = logscopes_chain(l->scopes, e->activity, scopes);
	if (n_scopes == 0)
		n_scopes = logscopes_chain(l->scopes, e->related, scopes);
	stamp(l, e->ts, ts);
	if (l->fmt == LOGS_TEXT) {
		buf_printf(b, "%s %s: %s[%d]", ts, level_short[level], cat, eid);
		if (*ename)
			buf_printf(b, "[%s]", ename);
		buf_putc(b, '\n');
		if (n_scopes) {
			buf_puts(b, "      ");
			for (size_t i = 0; i < n_scopes; i++) {
				json_t *so = args_object(scopes[i]);
				const char *k;
				json_t *v;
				bool first = true;

				buf_puts(b, i ? " => " : "=> ");
				json_object_foreach(so, k, v) {
					buf_printf(b, "%s%s:%s", first ? "" : ", ", k,
						   json_is_string(v) ? json_string_value(v) : "");
					first = false;
				}
				json_decref(so);
			}
			buf_putc(b, '\n');
		}
		indented(b, msg);
		if (exo && json_object_size(exo)) {
			json_t *m = trace_member(exo, "Message"), *ty = trace_member(exo, "Type"), *st = trace_member(exo, "VerboseMessage");
			const char *text = json_is_string(st) ? json_string_value(st) : NULL;

			if (text == NULL && json_is_string(ty))
				buf_printf(b, "      %s: %s\n", json_string_value(ty),
					   json_is_string(m) ? json_string_value(m) : "");
			else if (text)
				indented(b, text);
		}
	} else {
		json_t *o = json_pack("{s:s, s:s, s:i, s:s, s:s, s:s}", "Timestamp", ts, "LogLevel", level_names[level],
				      "EventId", eid, "EventName", ename, "Category", cat, "Message", msg);

		if (o == NULL)
			goto out;
		if (exo && json_object_size(exo)) {
			json_t *vm = trace_member(exo, "VerboseMessage"), *m = trace_member(exo, "Message"), *ty = trace_member(exo, "Type");
			char *joined = NULL;

			if (json_is_string(vm)) {
				json_object_set(o, "Exception", vm);
			} else if (json_is_string(ty)) {
				joined = mem_printf("%s: %s", json_string_value(ty), json_is_string(m) ? json_string_value(m) : "");
				json_object_set_new(o, "Exception", json_string(joined));
				free(joined);
			}
		}
		if (state) {
			json_t *st = json_object();

			json_object_set_new(st, "Message", json_string(msg));
			json_object_update(st, state);
			json_object_set_new(o, "State", st);
		}
		if (n_scopes) {
			json_t *arr = json_array();

			for (size_t i = 0; i < n_scopes; i++) {
				json_t *so = args_object(scopes[i]);

				json_array_append_new(arr, so ? so : json_object());
			}
			json_object_set_new(o, "Scopes", arr);
		}
		put_record(l, o);
		json_decref(o);
	}
	l->entries++;
out:
	json_decref(exo);
	json_decref(state);
}

static void apply(struct logs *l, struct held_event *h)
{
	if (h->kind == HELD_MESSAGE)
		message(l, h);
	else if (h->kind == HELD_START)
		(void)logscopes_start(l->scopes, h->activity, h->related, h->str[STR_ARGUMENTS]);
	else
		logscopes_stop(l->scopes, h->activity);
	held_free(l, h);
}

static int by_time(const void *a, const void *b)
{
	const struct held_event *x = a, *y = b;

	if (x->ts != y->ts)
		return x->ts < y->ts ? -1 : 1;
	return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Apply, in timestamp order, the held events up to ts (all of them: INT64_MAX). */
static void apply_until(struct logs *l, int64_t ts)
{
	size_t k = 0;

	mem_sort(l->held, l->n_held, sizeof(*l->held), by_time);
	while (k < l->n_held && l->held[k].ts <= ts)
		apply(l, &l->held[k++]);
	if (k < l->n_held) /* not memmove(NULL, ...) when nothing was ever held */
		memmove(l->held, l->held + k, (l->n_held - k) * sizeof(*l->held));
	l->n_held -= k;
}

void logs_flush(struct logs *l)
{
	apply_until(l, INT64_MAX);
}

/* Hold a logging event of that kind, its payload decoded in l->pl. */
static void hold(struct logs *l, const struct nettrace_event *e, enum held_kind kind)
{
	static const char *const fields[N_STR] = { "LoggerName", "FormattedMessage", "EventName", "ExceptionJson",
						   "ArgumentsJson" };
	struct held_event *h;
	/* range-checked before the cast: a level indexes the level names */
	int level = (int)evpayload_int(&l->pl, "Level", -1, 255, -1);

	if (kind == HELD_MESSAGE && (level < 0 || level > 5 || (l->f.level > 0 && level < l->f.level)))
		return;
	/* a stream that does not say what is sorted: apply what is there */
	if (l->n_held == MAX_HELD || l->held_bytes > MAX_HELD_BYTES)
		apply_until(l, INT64_MAX);
	MEM_GROW(l->held, l->cap_held, l->n_held + 1, 64);
	h = &l->held[l->n_held++];
	memset(h, 0, sizeof(*h));
	h->ts = e->timestamp;
	h->seq = l->seq++;
	h->kind = kind;
	memcpy(h->activity, e->activity, 16);
	memcpy(h->related, e->related, 16);
	h->level = level;
	h->eid = (int)evpayload_int(&l->pl, "EventId", INT_MIN, INT_MAX, 0);
	for (int i = 0; i < N_STR; i++)
		if (kind == HELD_MESSAGE || (kind == HELD_START && i == STR_ARGUMENTS)) {
			h->str[i] = mem_strdup(evpayload_str(&l->pl, fields[i]));
			l->held_bytes += strlen(h->str[i]);
		}
}

/*
 * Each thread's events come in order, but not the threads' among themselves
 * (the runtime writes each thread's buffer in turn), and a scope's Start, a
 * log line inside it and its Stop are often on different threads. So logging
 * events are held and applied in timestamp order once nothing earlier can
 * still come, by TraceEvent's rule: an event marked sorted has every earlier
 * event of the stream before it; so does a sequence point; and the end.
 */
static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct logs *l = ctx;
	struct err_msg em;
	const char *name = e->meta->name;

	if (strcmp(e->meta->provider, LOGGING_PROVIDER) == 0 && e->meta->n_fields != 0 &&
	    evpayload_decode(&l->pl, e, &em) == 0) {
		if (strcmp(name, "MessageJson") == 0)
			hold(l, e, HELD_MESSAGE);
		else if (strcmp(name, "ActivityJsonStart") == 0)
			hold(l, e, HELD_START);
		else if (strcmp(name, "ActivityJsonStop") == 0)
			hold(l, e, HELD_STOP);
	}
	if (e->sorted)
		apply_until(l, e->timestamp);
	return 0;
}

static int on_sequence_point(void *ctx, int64_t timestamp)
{
	(void)timestamp;
	apply_until(ctx, INT64_MAX);
	return 0;
}

const struct nettrace_callbacks logs_callbacks = { .trace = on_header, .event = on_event,
						   .sequence_point = on_sequence_point };
