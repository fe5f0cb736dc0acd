/*
 * ops.c - the operations registry and the /operations routes (ops.h).
 *
 * One mutex guards the list; a condition variable lets ops_free wait for the
 * running workers. Records are kept newest last; when there are more than
 * `keep` finished ones the oldest finished record is dropped.
 *
 * Compatibility notes (dotnet-monitor's documented API, its OperationsController):
 * the list and status bodies carry operationId, createdDateTime, status,
 * egressProviderName, isStoppable, process and tags; the status adds
 * resourceLocation and error {code, message}, and nothing else (its schema
 * allows no other field); the tags are a set, each once, and the list is
 * filtered by tags too. A succeeded operation's status is answered 201, any
 * other 200, as there. diagport's bytesSent (the artifact's bytes delivered
 * so far: written to the file, or acknowledged by the store) is therefore the
 * header X-Diagport-Bytes-Sent, not a field. An unknown id is a 400 problem, as
 * there; DELETE on an operation that is no longer running is a 400 too.
 * DELETE cancels; DELETE ?stop=true ends a stoppable operation (a trace) as it
 * would end on its own, with a complete artifact.
 */
#include "ops.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <time.h>

#include "clock.h"
#include "errors.h"
#include "mem.h"
#include "utf8.h"

enum op_state { OP_RUNNING, OP_SUCCEEDED, OP_FAILED, OP_CANCELLED };
static const char *const state_names[] = { "Running", "Succeeded", "Failed", "Cancelled" };

struct op {
	struct op *next;
	char id[37];
	char created[CLOCK_RFC3339_LEN];
	enum op_state state;
	atomic_bool cancel, stop;
	bool stoppable;
	char *egress, *uid, *name, *location, *error, *tags;
	uint64_t pid;
	unsigned needs;         /* the permission bits a caller must hold to see it (ops_route's mask), or 0 */
	_Atomic uint64_t bytes; /* delivered so far (op_progress) */
};

struct ops {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	struct op *head;
	unsigned keep, finished, running;
};

struct ops *ops_new(unsigned keep)
{
	struct ops *o = mem_zalloc(sizeof(*o));

	pthread_mutex_init(&o->mu, NULL);
	pthread_cond_init(&o->cv, NULL);
	o->keep = keep ? keep : 1;
	return o;
}

static void op_free(struct op *op)
{
	free(op->egress);
	free(op->uid);
	free(op->name);
	free(op->location);
	free(op->error);
	free(op->tags);
	free(op);
}

void ops_free(struct ops *o)
{
	if (o == NULL)
		return;
	pthread_mutex_lock(&o->mu);
	for (struct op *op = o->head; op; op = op->next)
		atomic_store(&op->cancel, true);
	while (o->running)
		pthread_cond_wait(&o->cv, &o->mu);
	pthread_mutex_unlock(&o->mu);
	while (o->head) {
		struct op *next = o->head->next;

		op_free(o->head);
		o->head = next;
	}
	pthread_mutex_destroy(&o->mu);
	pthread_cond_destroy(&o->cv);
	free(o);
}

/* A random (version 4) GUID. */
static void new_id(char out[37])
{
	uint8_t b[16];

	if (getrandom(b, sizeof(b), 0) != (ssize_t)sizeof(b))
		DP_FATAL("getrandom failed");
	b[6] = (uint8_t)((b[6] & 0x0f) | 0x40);
	b[8] = (uint8_t)((b[8] & 0x3f) | 0x80);
	snprintf(out, 37, "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", b[0], b[1], b[2],
		 b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11], b[12], b[13], b[14], b[15]);
}

/* Drop the oldest finished records above the cap. Called locked. */
static void trim(struct ops *o)
{
	struct op **pp = &o->head;

	while (o->finished > o->keep && *pp) {
		struct op *op = *pp;

		if (op->state == OP_RUNNING) {
			pp = &op->next;
			continue;
		}
		*pp = op->next;
		op_free(op);
		o->finished--;
	}
}

struct op *ops_add(struct ops *o, const char *egress, uint64_t pid, const char *uid, const char *name,
		   const char *tags, bool stoppable, unsigned needs, char id[37])
{
	struct op *op = mem_zalloc(sizeof(*op)), **pp;

	new_id(op->id);
	clock_rfc3339(op->created, 6);
	op->state = OP_RUNNING;
	atomic_init(&op->cancel, false);
	atomic_init(&op->stop, false);
	op->stoppable = stoppable;
	op->needs = needs;
	op->egress = egress ? mem_strdup(egress) : NULL;
	op->pid = pid;
	op->uid = mem_strdup(uid);
	op->name = mem_strdup(name);
	op->tags = tags && *tags ? mem_strdup(tags) : NULL;
	memcpy(id, op->id, 37);
	pthread_mutex_lock(&o->mu);
	for (pp = &o->head; *pp; pp = &(*pp)->next)
		;
	*pp = op;
	o->running++;
	pthread_mutex_unlock(&o->mu);
	return op;
}

const atomic_bool *op_stop_flag(struct op *op)
{
	return &op->stop;
}

void op_progress(struct op *op, uint64_t bytes)
{
	if (op)
		atomic_store(&op->bytes, bytes);
}

const atomic_bool *op_cancel_flag(struct op *op)
{
	return &op->cancel;
}

int ops_wait(struct ops *o, const char *id, int timeout_ms, char **location, char **error)
{
	struct timespec until;
	struct op *op;
	int rc = DP_ENOTFOUND;

	clock_deadline(&until, timeout_ms);
	pthread_mutex_lock(&o->mu);
	for (;;) {
		for (op = o->head; op && strcasecmp(op->id, id) != 0; op = op->next)
			;
		if (op == NULL)
			break;
		if (op->state != OP_RUNNING) {
			rc = op->state == OP_SUCCEEDED ? 0 : op->state == OP_CANCELLED ? DP_ECANCELED : DP_EIO;
			*location = op->location ? mem_strdup(op->location) : NULL;
			*error = op->error ? mem_strdup(op->error) : NULL;
			break;
		}
		if (pthread_cond_timedwait(&o->cv, &o->mu, &until) != 0) {
			rc = DP_ETIMEDOUT;
			*location = NULL;
			*error = mem_strdup("still running");
			break;
		}
	}
	pthread_mutex_unlock(&o->mu);
	return rc;
}

void op_finish(struct ops *o, struct op *op, int rc, const char *location, const char *error)
{
	pthread_mutex_lock(&o->mu);
	op->state = rc == 0 ? OP_SUCCEEDED : rc == DP_ECANCELED ? OP_CANCELLED : OP_FAILED;
	op->location = location ? mem_strdup(location) : NULL;
	op->error = rc != 0 && error ? mem_strdup(error) : NULL;
	o->running--;
	o->finished++;
	trim(o);
	pthread_cond_broadcast(&o->cv);
	pthread_mutex_unlock(&o->mu);
}

/*
 * Does the comma-separated list, up to end, have the tag t (n bytes)? Empty entries are no tags, as in
 * dotnet-monitor's SplitTags.
 */
static bool has_tag(const char *list, const char *end, const char *t, size_t n)
{
	while (list && list < end && *list) {
		size_t m = strcspn(list, ",");

		if (m == n && memcmp(list, t, n) == 0)
			return true;
		list += m + (list[m] == ',');
	}
	return false;
}

/*
 * The summary (list) or status (one) of op. Called locked. Names and tags came from outside: repaired to UTF-8.
 * The tags are a set, each once (the schema's uniqueItems; dotnet-monitor keeps an ISet).
 */
static json_t *op_json(const struct op *op, bool status)
{
	json_t *tags = json_array(), *j = json_object(), *proc = json_object();

	for (const char *s = op->tags; s && *s;) {
		size_t n = strcspn(s, ",");

		if (n && !has_tag(op->tags, s, s, n)) /* each once: not earlier in the list */
			json_array_append_new(tags, utf8_json(s, n));
		s += n + (s[n] == ',');
	}
	json_object_set_new(j, "operationId", json_string(op->id));
	json_object_set_new(j, "createdDateTime", json_string(op->created));
	json_object_set_new(j, "status", json_string(state_names[op->state]));
	json_object_set_new(j, "egressProviderName", op->egress ? utf8_json_str(op->egress) : json_null());
	json_object_set_new(j, "isStoppable", json_boolean(op->stoppable));
	json_object_set_new(proc, "pid", json_integer((json_int_t)op->pid));
	json_object_set_new(proc, "uid", json_string(op->uid));
	json_object_set_new(proc, "name", utf8_json_str(op->name));
	json_object_set_new(j, "process", proc);
	json_object_set_new(j, "tags", tags);
	if (status) {
		json_object_set_new(j, "resourceLocation", op->location ? utf8_json_str(op->location) : json_null());
		if (op->error) {
			json_t *e = json_object();

			json_object_set_new(e, "code", json_string(op->state == OP_CANCELLED ? "Cancelled" : "Failed"));
			json_object_set_new(e, "message", utf8_json_str(op->error));
			json_object_set_new(j, "error", e);
		} else {
			json_object_set_new(j, "error", json_null());
		}
	}
	return j;
}

/* GET /operations' filters: the selectors, and tags (the operation has every one of them, as dotnet-monitor's). */
static bool op_matches(const struct op *op, const char *pid, const char *uid, const char *name, const char *tags)
{
	char want[24];

	snprintf(want, sizeof(want), "%llu", (unsigned long long)op->pid);
	if ((pid && strcmp(pid, want) != 0) || (uid && strcasecmp(uid, op->uid) != 0) ||
	    (name && strcmp(name, op->name) != 0))
		return false;
	for (const char *s = tags; s && *s;) {
		size_t n = strcspn(s, ",");

		if (n && !has_tag(op->tags, op->tags ? op->tags + strlen(op->tags) : NULL, s, n))
			return false;
		s += n + (s[n] == ',');
	}
	return true;
}

/* After a cancel: wait (locked, up to 5 s) until operation id is no longer running, so a GET that follows sees it. */
static void wait_stopped(struct ops *o, const char *id)
{
	struct timespec until;

	clock_deadline(&until, 5000);
	for (;;) {
		struct op *op;

		for (op = o->head; op && strcasecmp(op->id, id) != 0; op = op->next)
			;
		if (op == NULL || op->state != OP_RUNNING)
			return;
		if (pthread_cond_timedwait(&o->cv, &o->mu, &until) != 0)
			return;
	}
}

void ops_route(struct ops *o, struct httpd_req *r, unsigned may_see)
{
	const char *path = httpd_path(r), *m = httpd_method(r), *id = NULL;
	json_t *out = NULL;
	struct op *op;

	if (strncmp(path, "/operations/", 12) == 0)
		id = path + 12;
	if (strcmp(m, "HEAD") == 0)
		m = "GET"; /* the server leaves the body out; api.c's route table let only GET, HEAD, DELETE in */
	pthread_mutex_lock(&o->mu);
	if (id == NULL) {
		const char *pid = httpd_query(r, "pid"), *uid = httpd_query(r, "uid"), *name = httpd_query(r, "name");
		const char *tags = httpd_query(r, "tags");

		out = json_array();
		for (op = o->head; op; op = op->next)
			if ((op->needs & may_see) == op->needs && op_matches(op, pid, uid, name, tags))
				json_array_append_new(out, op_json(op, false));
		pthread_mutex_unlock(&o->mu);
		httpd_send_json(r, 200, out);
		return;
	}
	for (op = o->head; op && (strcasecmp(op->id, id) != 0 || (op->needs & may_see) != op->needs); op = op->next)
		;
	if (op == NULL) {
		pthread_mutex_unlock(&o->mu);
		httpd_problem(r, 400, "Bad Request", "there is no operation '%.64s' (finished operations are kept "
			      "for the newest %u)", id, o->keep);
		return;
	}
	if (strcmp(m, "GET") == 0) {
		char sent[24];
		unsigned status = op->state == OP_SUCCEEDED ? 201 : 200;

		snprintf(sent, sizeof(sent), "%llu", (unsigned long long)atomic_load(&op->bytes));
		out = op_json(op, true);
		pthread_mutex_unlock(&o->mu);
		httpd_set_header(r, "X-Diagport-Bytes-Sent", sent);
		httpd_send_json(r, status, out);
		return;
	}
	if (op->state != OP_RUNNING) {
		const char *st = state_names[op->state];

		pthread_mutex_unlock(&o->mu);
		httpd_problem(r, 400, "Bad Request", "operation %s is %s, not Running; only a running operation can be "
			      "cancelled", id, st);
		return;
	}
	{
		const char *stop = httpd_query(r, "stop");
		bool graceful = stop && (strcasecmp(stop, "true") == 0 || strcmp(stop, "1") == 0);

		if (graceful && !op->stoppable) {
			pthread_mutex_unlock(&o->mu);
			httpd_problem(r, 400, "Bad Request", "operation %s cannot be stopped, only cancelled (DELETE "
				      "without stop=true)", id);
			return;
		}
		atomic_store(graceful ? &op->stop : &op->cancel, true);
	}
	wait_stopped(o, id);
	pthread_mutex_unlock(&o->mu);
	httpd_send(r, 200, "application/json; charset=utf-8", "", 0);
}
