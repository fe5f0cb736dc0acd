/*
 * crules_hist.c - what limits a collection rule outlives the agent.
 *
 * Each runtime's history (action lists run, when, and whether the rule
 * finished) is written to STATE_DIR/.diagport-rules-UID whenever it changes,
 * before the actions run, so an agent restarted under a live app (its
 * container, in the same pod, with the same dumps volume) neither repeats a
 * Startup rule nor exceeds an ActionCount the old agent reached: at most
 * once, never twice. Times are kept as wall-clock times in the file and as
 * monotonic ones in memory. A runtime that goes away takes its file with it
 * (crules.c); files no runtime claims within STATE_CLAIM_MS of the start are
 * removed. The directory is the app's too: files are read capped, regular
 * files only, and written under names nothing could have put there first.
 */
#include "crules_int.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "launcher/fsutil.h"
#include "log.h"
#include "mem.h"

#define STATE_PREFIX ".diagport-rules-"
#define STATE_MAX_BYTES (256 << 10)
#define STATE_MAX_RUNS 1000  /* per rule: more than any ActionCount a window could need is dropped */

char *crules_hist_path(const struct crules *e, const char *uid)
{
	return mem_printf("%s/" STATE_PREFIX "%s", e->cfg.state_dir, uid);
}

/* Write the history of every rule on runtime cookie (temporary file, renamed over the old one). */
void crules_hist_save(struct crules *e, const struct inst *of)
{
	json_t *doc, *rules;
	char *path, *tmp, *text;
	long long mono = clock_ms(), wall = clock_unix_ms();
	int fd;

	if (e->cfg.state_dir == NULL)
		return;
	doc = json_object();
	rules = json_object();
	json_object_set_new(doc, "pid", json_integer((json_int_t)of->pid));
	json_object_set_new(doc, "rules", rules);
	for (size_t i = 0; i < e->n; i++) {
		const struct inst *in = e->in[i];
		json_t *r, *runs;

		if (memcmp(in->cookie, of->cookie, 16) != 0)
			continue;
		r = json_object();
		runs = json_array();
		for (size_t k = 0; k < in->n_exec; k++)
			json_array_append_new(runs, json_integer(wall - (mono - in->exec[k])));
		json_object_set_new(r, "lifetime", json_integer(in->lifetime));
		json_object_set_new(r, "runs", runs);
		json_object_set_new(r, "finished", in->state == IS_FINISHED ? json_string(in->reason) : json_null());
		json_object_set_new(rules, in->r->name, r);
	}
	text = json_dumps(doc, JSON_COMPACT);
	json_decref(doc);
	path = crules_hist_path(e, of->uid);
	/*
	 * The dumps directory is the app's too: a name of our own that nothing can have put there first
	 * (mkostemp's O_EXCL), not a fixed PATH.tmp the app could have made a symlink (we would write through
	 * it, as root perhaps) or a FIFO (we would block, holding mu, for ever). Its prefix is STATE_PREFIX:
	 * one a killed agent left is swept at the next start.
	 */
	tmp = mem_printf("%s.XXXXXX", path);
	if ((fd = mkostemp(tmp, O_CLOEXEC)) < 0) {
		log_warn("cannot keep the rules' history", LOG_STR("event", "warning"), LOG_STR("file", path),
			 LOG_STR("error", strerror(errno)));
	} else {
		bool ok = fs_write_all(fd, text, strlen(text)) == 0;

		ok = close(fd) == 0 && ok;
		if (!ok || rename(tmp, path) != 0) {
			log_warn("cannot keep the rules' history", LOG_STR("event", "warning"), LOG_STR("file", path),
				 LOG_STR("error", strerror(errno)));
			unlink(tmp);
		}
	}
	free(text);
	free(tmp);
	free(path);
}

/* The history of in's rule on its runtime, as an earlier agent left it (a file that does not read is ignored). */
void crules_hist_load(struct crules *e, struct inst *in)
{
	char *path;
	json_t *doc, *r, *runs, *v;
	json_error_t je;
	long long mono = clock_ms(), wall = clock_unix_ms();
	size_t i;

	if (e->cfg.state_dir == NULL)
		return;
	path = crules_hist_path(e, in->uid);
	for (i = 0; i < e->n_unclaimed; i++) /* claimed: kept while the runtime lives */
		if (e->unclaimed[i] && strcmp(e->unclaimed[i], path) == 0) {
			free(e->unclaimed[i]);
			e->unclaimed[i] = NULL;
		}
	{ /* capped: the dumps volume is the app's too */
		struct buf b;

		/* a regular file only: not a symlink to elsewhere, not a FIFO that would block us (under mu) */
		int fd = open(path, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
		struct stat st;

		buf_init(&b, STATE_MAX_BYTES);
		doc = fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && buf_read_fd(&b, fd) == 0 && b.data ?
			      json_loadb(b.data, b.len, JSON_REJECT_DUPLICATES, &je) : NULL;
		if (fd >= 0)
			close(fd);
		buf_free(&b);
	}
	free(path);
	if (doc == NULL || (r = json_object_get(json_object_get(doc, "rules"), in->r->name)) == NULL) {
		json_decref(doc);
		return;
	}
	if (json_is_integer(v = json_object_get(r, "lifetime")) && json_integer_value(v) >= 0)
		in->lifetime = (unsigned)json_integer_value(v);
	runs = json_object_get(r, "runs");
	json_array_foreach(runs, i, v) {
		/* forged times: none in the future (a rule throttled for ever), none before the epoch (overflow) */
		if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > wall ||
		    in->n_exec == STATE_MAX_RUNS)
			continue;
		in->exec = mem_realloc(in->exec, (in->n_exec + 1) * sizeof(*in->exec));
		in->exec[in->n_exec++] = mono - (wall - (long long)json_integer_value(v));
	}
	if (json_is_string(v = json_object_get(r, "finished"))) {
		static const char *const reasons[] = { REASON_STARTUP, REASON_COUNT, REASON_DURATION };

		for (size_t k = 0; k < sizeof(reasons) / sizeof(reasons[0]); k++)
			if (strcmp(json_string_value(v), reasons[k]) == 0) {
				in->state = IS_FINISHED;
				in->reason = reasons[k];
			}
	}
	if (in->lifetime || in->state == IS_FINISHED)
		log_info("collection rule history kept", LOG_STR("event", "rule-history"), LOG_STR("rule", in->r->name),
			 LOG_UINT("pid", in->pid), LOG_UINT("lifetimeOccurrences", in->lifetime),
			 LOG_STR("state", crules_state_name(in->state)));
	json_decref(doc);
}

/* The files of the runtimes an earlier agent saw: kept for STATE_CLAIM_MS for their runtimes to come back. */
void crules_hist_scan(struct crules *e)
{
	DIR *d;
	struct dirent *de;

	if (e->cfg.state_dir == NULL || (d = opendir(e->cfg.state_dir)) == NULL)
		return;
	while ((de = readdir(d)) != NULL && e->n_unclaimed < 4096)
		if (strncmp(de->d_name, STATE_PREFIX, strlen(STATE_PREFIX)) == 0) {
			e->unclaimed = mem_realloc(e->unclaimed, (e->n_unclaimed + 1) * sizeof(*e->unclaimed));
			e->unclaimed[e->n_unclaimed++] = mem_printf("%s/%s", e->cfg.state_dir, de->d_name);
		}
	closedir(d);
}

void crules_hist_sweep(struct crules *e)
{
	for (size_t i = 0; i < e->n_unclaimed; i++)
		if (e->unclaimed[i]) {
			unlink(e->unclaimed[i]);
			free(e->unclaimed[i]);
		}
	free(e->unclaimed);
	e->unclaimed = NULL;
	e->n_unclaimed = 0;
}

