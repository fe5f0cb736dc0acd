/*
 * status.c - the status record: exactly what inject added to one workload.
 *
 * Format (one line, fits an ECS tag value):
 *   v1 mode=nosuspend flavour=diagport sidecar=native +WFLAGS NAME:FLAGS ...
 * The mode/flavour/sidecar words (and captures=KIND+KIND when the agent serves
 * fewer than all kinds, crash-dumps=TYPE when it is not mini) are for
 * people; uninject reads the flags.
 *
 * Workload flags (+...):
 *   V  the volumes list was created       I  the initContainers list was created
 *   A  the annotations map was created    T  the pod template's metadata was created
 *   G  the ECS tags list was created      X  CloudFormation Metadata was created
 *   Y  Metadata.diagport was created      S  the agent is a regular container (k8s)
 *   N  shareProcessNamespace: true was set (k8s, perf; it was absent or null)
 * Container flags (NAME:...):
 *   M  diag and dumps mounts added        m  the mounts list was created
 *   E  the DOTNET_DiagnosticPorts entry was added
 *   e  our port was appended to its value with ';'
 *   z  ... to a value that was ""        Z  ... to an entry that had no value field
 *   l  the env list was created
 *   P  SYS_PTRACE added                   1 2 3  capability path levels created
 *   C  the four crash-dump settings added (COMPlus_DbgEnableMiniDump, ...); absent
 *      with crash-dumps on: the container sets one of them itself, and its own
 *      setup is kept as it is
 *   D  dependsOn on the agent added (ECS) d  the dependsOn list was created
 * Compose services (compose.c; the record is on diagport-agent's labels, and
 * each service's own entry in its label diagport.dev/status):
 *   E e z  as above, in environment (map or "K=V" list)   l  environment created
 *   C  as above, in environment
 *   k  DOTNET_DiagnosticPorts was copied from environment's own merge key
 *   M  the two volumes added   m  volumes created   P  SYS_PTRACE added   c  cap_add created
 *   D  depends_on diagport-agent added   d  depends_on created
 *   R  a depends_on list was rewritten as a map (suspend: service_healthy)
 *   L  labels created
 *   v w x y u  environment, volumes, cap_add, depends_on, labels were copied
 *      from the service's merge key (<<) into a key of its own
 *   V  (project) the top-level volumes map was created
 * A mark right after a "was created" letter means it replaced a null (such
 * as `env:` with nothing under it), and which spelling: . "" _ null = ~
 * - Null / NULL; uninject puts that null back.
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

bool inj_flag(const char *flags, char f)
{
	return strchr(flags, f) != NULL;
}

/* Insert c right after flag f (the "was null" mark). */
static void inj_flag_add_after(char *flags, size_t size, char f, char c)
{
	char *p = strchr(flags, f);
	size_t n = strlen(flags);

	if (p == NULL || p[1] == c)
		return;
	if (n + 1 >= size)
		DP_FATAL("status flags overflow");
	memmove(p + 2, p + 1, n - (size_t)(p - flags));
	p[1] = c;
}

void inj_flag_add(char *flags, size_t size, char f)
{
	size_t n = strlen(flags);

	if (inj_flag(flags, f))
		return;
	if (n + 1 >= size)
		DP_FATAL("status flags overflow");
	flags[n] = f;
	flags[n + 1] = '\0';
}

/*
 * The spellings of a null that a created collection replaced, each with the
 * mark that follows its flag letter (characters an ECS tag value allows).
 */
static const struct { char mark; const char *text; } null_marks[] = {
	{ '.', "" }, { '_', "null" }, { '=', "~" }, { '-', "Null" }, { '/', "NULL" },
};

void inj_put(struct doc_node *m, const char *k, struct doc_node *v, char *flags, size_t size, char f)
{
	struct doc_node *old = doc_get(m, k);
	char mark = '_';

	for (size_t i = 0; old && i < sizeof(null_marks) / sizeof(null_marks[0]); i++)
		if (strcmp(old->text ? old->text : "", null_marks[i].text) == 0)
			mark = null_marks[i].mark;
	inj_flag_add(flags, size, f);
	if (old)
		inj_flag_add_after(flags, size, f, mark);
	doc_set(m, k, v); /* replaces the null in place, else appends */
}

struct doc_node *inj_create(struct doc_node *m, const char *k, enum doc_type t, char *flags, size_t size, char f)
{
	struct doc_node *v = t == DOC_MAP ? doc_map() : doc_seq();

	inj_put(m, k, v, flags, size, f);
	return v;
}

void inj_unput(struct doc_node *m, const char *k, const char *flags, char f)
{
	const char *p = strchr(flags, f);

	if (p == NULL || doc_get(m, k) == NULL)
		return;
	for (size_t i = 0; i < sizeof(null_marks) / sizeof(null_marks[0]); i++)
		if (p[1] == null_marks[i].mark) {
			struct doc_node *n = doc_scalar(DOC_NULL, null_marks[i].text, strlen(null_marks[i].text));

			doc_set(m, k, n);
			return;
		}
	doc_del(m, k);
}

void inj_prune(struct doc_node *m, const char *k, const char *flags, char f)
{
	struct doc_node *v = doc_get(m, k);

	if (v == NULL || (v->type != DOC_MAP && v->type != DOC_SEQ) || v->n != 0)
		return;
	inj_unput(m, k, flags, f);
}

int inj_status_load(const struct inj_ctx *c, const struct doc_node *n, const char *field, const char *what,
		    struct inj_status *st, struct err_msg *em)
{
	const char *text = doc_strval(n);
	int rc = inj_status_parse(text ? text : "", st, em);

	if (rc != 0) {
		struct err_msg inner = *em;

		rc = inj_fail(c, em, n, rc, what, "%s: %s", field, inner.text);
	}
	return rc;
}

char *inj_status_format(const struct inj_status *st, const struct inj_opts *o)
{
	struct buf b;

	buf_init(&b, 0);
	buf_printf(&b, "v1 mode=%s flavour=%s sidecar=%s", o->mode == INJ_SUSPEND ? "suspend" : "nosuspend",
		   o->flavour == INJ_FLAVOUR_DOTNET_MONITOR ? "dotnet-monitor" : "diagport",
		   o->sidecar == INJ_SIDECAR_CONTAINER ? "container" : "native");
	if (o->captures != INJ_CAPTURE_ALL) { /* '+' between kinds: an ECS tag value holds no comma */
		char list[128];

		inj_captures_text(o->captures, '+', list, sizeof(list));
		buf_printf(&b, " captures=%s", list);
	}
	if (o->crash_dumps != INJ_CRASH_DEFAULT)
		buf_printf(&b, " crash-dumps=%s", inj_crash_type(o->crash_dumps));
	buf_printf(&b, " +%s", st->wflags);
	for (size_t i = 0; i < st->n; i++)
		buf_printf(&b, " %s:%s", st->c[i].name, st->c[i].flags);
	return buf_steal(&b, NULL);
}

int inj_status_parse(const char *text, struct inj_status *st, struct err_msg *em)
{
	char *copy = mem_strdup(text), *save = NULL;
	int rc = 0, i = 0;

	memset(st, 0, sizeof(*st));
	for (char *tok = strtok_r(copy, " ", &save); tok; tok = strtok_r(NULL, " ", &save), i++) {
		char *colon;

		if (i == 0) {
			if (strcmp(tok, "v1") != 0) {
				rc = err_set(em, DP_EUNSUPPORTED, "status record '%s' is not version v1", text);
				break;
			}
		} else if (tok[0] == '+') {
			snprintf(st->wflags, sizeof(st->wflags), "%s", tok + 1);
		} else if ((colon = strchr(tok, ':')) != NULL) {
			if (st->n == INJ_MAX_CONTAINERS || (size_t)(colon - tok) >= sizeof(st->c[0].name)) {
				rc = err_set(em, DP_EUNSUPPORTED, "status record lists too many or too long container names");
				break;
			}
			snprintf(st->c[st->n].name, sizeof(st->c[0].name), "%.*s", (int)(colon - tok), tok);
			snprintf(st->c[st->n].flags, sizeof(st->c[0].flags), "%s", colon + 1);
			st->n++;
		} else if (strchr(tok, '=') == NULL) {
			rc = err_set(em, DP_EUNSUPPORTED, "status record: cannot read '%s'", tok);
			break;
		}
	}
	if (rc == 0 && i == 0)
		rc = err_set(em, DP_EUNSUPPORTED, "status record is empty");
	mem_free(copy);
	return rc;
}
