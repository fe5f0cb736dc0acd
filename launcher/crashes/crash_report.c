/*
 * crash_report.c - createdump's crash report read (crash_report.h).
 *
 * The layout (createdump's crashreportwriter.cpp): {"payload":
 * {"protocol_version", "configuration", "process_name", "threads": [{
 * "is_managed", "crashed": "true"|"false", "managed_exception_type",
 * "managed_exception_hresult", "native_thread_id": "0x17a5",
 * "stack_frames": [{"is_managed": "true", "method_name", "filename", ...}]
 * }]}, "parameters": {...}}. Booleans and numbers are strings there.
 */
#include "crash_report.h"

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define MAX_TEXT 1024 /* a name or type kept */

/* A string member, at most MAX_TEXT bytes, or NULL. */
static const char *text(json_t *o, const char *k)
{
	json_t *v = json_object_get(o, k);

	return json_is_string(v) && json_string_length(v) <= MAX_TEXT ? json_string_value(v) : NULL;
}

static bool is_true(json_t *o, const char *k)
{
	const char *v = text(o, k);

	return v && strcmp(v, "true") == 0;
}

void crash_report_free(struct crash_report *r)
{
	free(r->process);
	free(r->exc_type);
	free(r->hresult);
	for (size_t i = 0; i < r->n_frames; i++)
		free(r->frames[i]);
	free(r->frames);
	memset(r, 0, sizeof(*r));
}

static void crashed_thread(json_t *t, struct crash_report *r)
{
	const char *id = text(t, "native_thread_id"), *v;
	json_t *frames = json_object_get(t, "stack_frames"), *f;
	size_t i;

	r->thread = id ? strtoull(id, NULL, 16) : 0;
	if ((v = text(t, "managed_exception_type")) != NULL)
		r->exc_type = mem_strdup(v);
	if ((v = text(t, "managed_exception_hresult")) != NULL)
		r->hresult = mem_strdup(v);
	if (!json_is_array(frames))
		return;
	r->frames = mem_array(CRASH_REPORT_FRAMES, sizeof(char *));
	json_array_foreach(frames, i, f) {
		const char *m = text(f, "method_name"), *file = text(f, "filename");

		if (r->n_frames == CRASH_REPORT_FRAMES)
			break;
		if (is_true(f, "is_managed") && m)
			r->frames[r->n_frames++] = file ? mem_printf("%s!%s", file, m) : mem_strdup(m);
	}
}

int crash_report_parse(const char *s, size_t len, struct crash_report *out, struct err_msg *em)
{
	struct crash_report r = { 0 };
	json_error_t je;
	json_t *doc, *payload, *threads, *t;
	const char *v;
	size_t i;

	if (len > CRASH_REPORT_MAX)
		return err_set(em, DP_ETOOBIG, "larger than %u bytes", CRASH_REPORT_MAX);
	if ((doc = json_loadb(s, len, 0, &je)) == NULL)
		return err_set(em, DP_ESYNTAX, "not JSON: %s (line %d, column %d)", je.text, je.line, je.column);
	payload = json_object_get(doc, "payload");
	threads = json_object_get(payload, "threads");
	if (!json_is_object(payload) || !json_is_array(threads)) {
		json_decref(doc);
		return err_set(em, DP_EINVAL, "no payload.threads: not a crash report");
	}
	if ((v = text(payload, "process_name")) != NULL)
		r.process = mem_strdup(v);
	json_array_foreach(threads, i, t)
		if (json_is_object(t) && is_true(t, "crashed")) {
			crashed_thread(t, &r);
			break;
		}
	json_decref(doc);
	*out = r;
	return 0;
}
