/*
 * nettrace_cli.c - `diagport nettrace stats FILE|-`: read a .nettrace file
 * (a /trace download, or dotnet-trace's) with the streaming reader and print
 * what it holds as one JSON object: the Trace header, the totals, the events
 * the runtime dropped, and the events counted per provider and event id.
 *
 * Exit codes: 0 read to its end tag; 1 the file cannot be read; 2 usage;
 * 3 not nettrace, malformed or truncated (the message names the byte
 * offset). Nothing is printed on stdout unless the whole file read.
 */
#include "eventpipe/cli.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "evpayload.h"
#include "mem.h"
#include "nettrace.h"

struct count {
	const struct nettrace_meta *meta;
	uint64_t n;
};

struct counts {
	struct count *c; /* by metadata id */
	size_t cap;
};

static int on_event(void *ctx, const struct nettrace_event *e)
{
	struct counts *cs = ctx;
	uint32_t id = e->meta->id;

	if (id >= cs->cap) {
		size_t was = cs->cap;

		MEM_GROW(cs->c, cs->cap, (size_t)id + 1, 64);
		memset(cs->c + was, 0, (cs->cap - was) * sizeof(*cs->c));
	}
	cs->c[id].meta = e->meta;
	cs->c[id].n++;
	return 0;
}

static int by_provider_id(const void *a, const void *b)
{
	const struct count *x = a, *y = b;
	int c = strcmp(x->meta->provider, y->meta->provider);

	if (c)
		return c;
	if (x->meta->event_id != y->meta->event_id)
		return x->meta->event_id < y->meta->event_id ? -1 : 1;
	return strcmp(x->meta->name, y->meta->name);
}

/* The counts merged by (provider, event id, name): one event type can have several metadata ids. */
static json_t *events_json(struct counts *cs)
{
	json_t *arr = json_array();
	struct count *l = mem_array(cs->cap ? cs->cap : 1, sizeof(*l));
	size_t n = 0;

	for (size_t i = 0; i < cs->cap; i++)
		if (cs->c[i].n)
			l[n++] = cs->c[i];
	mem_sort(l, n, sizeof(*l), by_provider_id);
	for (size_t i = 0; i < n; i++) {
		uint64_t total = l[i].n;

		while (i + 1 < n && by_provider_id(&l[i], &l[i + 1]) == 0)
			total += l[++i].n;
		json_array_append_new(arr, json_pack("{s:s, s:I, s:s, s:I}", "provider", l[i].meta->provider, "id",
						     (json_int_t)l[i].meta->event_id, "name", l[i].meta->name, "count",
						     (json_int_t)total));
	}
	free(l);
	return arr;
}

/* `events`: each event as one JSON line, its fields decoded by its metadata. */
struct events_ctx {
	struct evpayload pl;
	uint64_t n;
	bool failed;
};

static json_t *value_json(const struct evvalue *v)
{
	switch (v->type) {
	case NT_STRING:
	case NT_GUID:
		return json_string(v->s ? v->s : "");
	case NT_SINGLE:
	case NT_DOUBLE:
		return json_real(v->d);
	case NT_BOOLEAN:
		return json_boolean(v->i != 0);
	case NT_UINT64:
		return v->i < 0 ? json_real(v->d) : json_integer(v->i);
	default:
		return json_integer(v->i);
	}
}

/* The values from i on at depth d into o; returns the index after them. */
static size_t fields_json(const struct evpayload *p, size_t i, int d, json_t *o)
{
	while (i < p->n && p->v[i].depth == d) {
		const struct evvalue *v = &p->v[i++];

		if (v->type == NT_OBJECT) {
			json_t *sub = json_object();

			i = fields_json(p, i, d + 1, sub);
			json_object_set_new(o, v->name, sub);
		} else if (v->type == NT_ARRAY) {
			json_object_set_new(o, v->name, json_pack("{s:I}", "count", (json_int_t)v->i));
			while (i < p->n && p->v[i].depth > d) /* its elements */
				i++;
		} else {
			json_object_set_new(o, v->name, value_json(v));
		}
	}
	return i;
}

static int on_event_line(void *ctx, const struct nettrace_event *e)
{
	struct events_ctx *x = ctx;
	struct err_msg em;
	json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:I}", "provider", e->meta->provider, "id",
			      (json_int_t)e->meta->event_id, "name", e->meta->name, "timestamp", (json_int_t)e->timestamp,
			      "thread", (json_int_t)e->thread_id);

	if (e->meta->n_fields == 0) {
		json_object_set_new(o, "payloadBytes", json_integer((json_int_t)e->payload_len));
	} else if (evpayload_decode(&x->pl, e, &em) != 0) {
		json_object_set_new(o, "error", json_string(em.text));
	} else {
		json_t *f = json_object();

		fields_json(&x->pl, 0, 0, f);
		json_object_set_new(o, "fields", f);
	}
	if (json_dumpf(o, stdout, JSON_COMPACT) != 0 || fputc('\n', stdout) == EOF)
		x->failed = true;
	json_decref(o);
	x->n++;
	return x->failed ? DP_EIO : 0;
}

static int stats(const char *path, bool lines)
{
	struct counts cs = { 0 };
	struct events_ctx ev = { 0 };
	struct nettrace_callbacks cb = { .event = on_event }, lcb = { .event = on_event_line };
	struct nettrace *t = lines ? nettrace_new(NULL, &lcb, &ev) : nettrace_new(NULL, &cb, &cs);
	struct nettrace_stats st;
	const struct nettrace_trace *h;
	struct err_msg em;
	char *buf = mem_alloc(1 << 16);
	int fd = strcmp(path, "-") == 0 ? 0 : open(path, O_RDONLY | O_CLOEXEC), rc = 0;
	ssize_t n;
	json_t *o;
	char start[48];

	if (fd < 0) {
		fprintf(stderr, "diagport: nettrace: cannot open %s: %s\n", path, strerror(errno));
		rc = 1;
		goto out;
	}
	while ((n = read(fd, buf, 1 << 16)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			fprintf(stderr, "diagport: nettrace: reading %s: %s\n", path, strerror(errno));
			rc = 1;
			goto out;
		}
		if (nettrace_feed(t, buf, (size_t)n, &em) != 0)
			break;
	}
	if (nettrace_finish(t, &em) != 0) {
		fprintf(stderr, "diagport: %s: %s\n", path, em.text);
		rc = 3;
		goto out;
	}
	if (lines) {
		if (ev.failed || fflush(stdout) != 0) {
			fprintf(stderr, "diagport: nettrace: writing the events: %s\n", strerror(errno));
			rc = 1;
		}
		goto out;
	}
	nettrace_stats(t, &st);
	h = nettrace_header(t);
	snprintf(start, sizeof(start), "%04u-%02u-%02uT%02u:%02u:%02u.%03uZ", h->year, h->month, h->day, h->hour,
		 h->minute, h->second, h->millisecond);
	o = json_pack("{s:s, s:{s:i, s:s, s:i, s:i, s:I, s:i, s:i}, s:I, s:I, s:I, s:I, s:I, s:I, s:I}", "file", path,
		      "trace", "version", (int)h->version, "start", start, "pid", (int)h->pid, "pointerSize",
		      (int)h->pointer_size, "ticksPerSecond", (json_int_t)h->ticks_per_sec, "processors",
		      (int)h->processors, "samplingNs", (int)h->sampling_ns, "bytes", (json_int_t)st.bytes, "blocks",
		      (json_int_t)st.blocks, "totalEvents", (json_int_t)st.events, "metadata", (json_int_t)st.metadata,
		      "stacks", (json_int_t)st.stacks, "sequencePoints", (json_int_t)st.sequence_points, "dropped",
		      (json_int_t)st.dropped);
	json_object_set_new(o, "events", events_json(&cs));
	if (json_dumpf(o, stdout, JSON_INDENT(1)) != 0 || fputc('\n', stdout) == EOF || fflush(stdout) != 0) {
		fprintf(stderr, "diagport: nettrace: writing the result: %s\n", strerror(errno));
		rc = 1;
	}
	json_decref(o);
out:
	if (fd > 0)
		close(fd);
	free(buf);
	free(cs.c);
	evpayload_free(&ev.pl);
	nettrace_free(t);
	return rc;
}

int nettrace_cli(int argc, char **argv)
{
	if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
		printf("usage: diagport nettrace stats|events FILE|-\n\n"
		       "Reads a .nettrace file (an EventPipe trace: /trace, dotnet-trace) to its end.\n"
		       "stats prints one JSON object: the Trace header, totals, dropped events, and the events\n"
		       "counted per provider and event id. events prints each event as a line of JSON, with the\n"
		       "fields of self-describing events (EventSources) decoded; the runtime's own events give\n"
		       "their payload's size. A malformed stream stops events where it goes wrong.\n"
		       "Exit codes: 0 read whole; 1 cannot read the file; 2 usage; 3 not nettrace, malformed or\n"
		       "truncated (the message names the byte offset).\n");
		return 0;
	}
	if (argc != 3 || (strcmp(argv[1], "stats") != 0 && strcmp(argv[1], "events") != 0)) {
		fprintf(stderr, "usage: diagport nettrace stats|events FILE|-\n");
		return 2;
	}
	return stats(argv[2], strcmp(argv[1], "events") == 0);
}
