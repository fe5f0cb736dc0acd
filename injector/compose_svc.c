/*
 * compose_svc.c - the Compose rules for one service (compose.c runs them over
 * the project; its options from its labels are compose_opts.c's): what
 * inject adds to it and uninject takes away, each field in the form the
 * service wrote it (environment and labels as a map or a list of "K=V",
 * depends_on as a list or a map). A field the rules edit that the service gets only through a YAML
 * merge key (<<) is first copied into a key of its own (own keys override
 * merged ones and merges are shallow, so the data means the same); the
 * anchored map, which other services share, is never edited, and uninject
 * deletes the copy while it still equals the merged value. Flags: status.c.
 *
 * One idea at ~650 lines: a service's rules, each field's inject beside its
 * uninject so the pair is read together; the labels went to compose_opts.c.
 */
#include "inj_int.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

#define MERGE_KEY "<<"
#define DIAG_MOUNT INJ_VOL_DIAG ":" INJ_DIAG_DIR
#define DUMPS_MOUNT INJ_VOL_DUMPS ":" INJ_DUMPS_DIR
#define STARTED "service_started"
#define HEALTHY "service_healthy"
#define FLAGS_SIZE sizeof(((struct inj_cstat *)0)->flags)

/* A field the rules edit: its key, the flag "inject created it", the flag "copied from a merge". */
struct field {
	const char *key;
	char created, copied;
};
static const struct field f_env = { "environment", 'l', 'v' }, f_vols = { "volumes", 'm', 'w' },
			  f_caps = { "cap_add", 'c', 'x' }, f_deps = { "depends_on", 'd', 'y' },
			  f_labels = { "labels", 'L', 'u' };

/* ---- merge keys ---- */

/* Key k of map m as its merge key (<<) gives it: the first merged map that has it (merges are resolved in order). */
static const struct doc_node *from_merge(const struct doc_node *m, const char *k)
{
	const struct doc_node *mg = doc_get(m, MERGE_KEY), *v;

	if (doc_is(mg, DOC_MAP))
		return doc_find(mg, k) >= 0 ? doc_get(mg, k) : from_merge(mg, k);
	for (size_t i = 0; doc_is(mg, DOC_SEQ) && i < mg->n; i++) {
		if (!doc_is(mg->vals[i], DOC_MAP))
			continue;
		v = doc_find(mg->vals[i], k) >= 0 ? doc_get(mg->vals[i], k) : from_merge(mg->vals[i], k);
		if (v)
			return v;
	}
	return NULL;
}

/* Key k of map m as YAML means it: its own key, else through its merge key. */
const struct doc_node *inj_merged_get(const struct doc_node *m, const char *k)
{
	return doc_find(m, k) >= 0 ? doc_get(m, k) : from_merge(m, k);
}

struct doc_node *inj_merged_map(const struct doc_node *m)
{
	const struct doc_node *mg = doc_get(m, MERGE_KEY);
	struct doc_node *f = doc_map();

	for (size_t i = 0; doc_is(m, DOC_MAP) && i < m->n; i++)
		if (strcmp(m->keys[i]->text, MERGE_KEY) != 0)
			doc_append_pair(f, doc_copy(m->keys[i]), doc_copy(m->vals[i]));
	for (size_t i = 0; i < (doc_is(mg, DOC_SEQ) ? mg->n : doc_is(mg, DOC_MAP)); i++) {
		struct doc_node *src = inj_merged_map(doc_is(mg, DOC_SEQ) ? mg->vals[i] : mg);

		for (size_t j = 0; j < src->n; j++)
			if (doc_find(f, src->keys[j]->text) < 0)
				doc_append_pair(f, doc_copy(src->keys[j]), doc_copy(src->vals[j]));
		doc_free(src);
	}
	return f;
}

/*
 * Collections in block style and strings as the writer likes them: a copy
 * then reads the same whether its source was written in flow or not (YAML
 * writes a collection inside a flow one in flow, with quoted strings).
 */
static void unstyle(struct doc_node *n)
{
	if (n->type == DOC_STRING && n->tag == NULL)
		n->style = DOC_STYLE_ANY;
	if (n->type != DOC_MAP && n->type != DOC_SEQ)
		return;
	n->style = DOC_STYLE_ANY;
	for (size_t i = 0; i < n->n; i++)
		unstyle(n->vals[i]);
}

/* A copy of the value merged maps give key k of map m, for an own key. */
static struct doc_node *merged_copy(const struct doc_node *m, const char *k)
{
	struct doc_node *v = doc_copy(from_merge(m, k));

	unstyle(v);
	return v;
}

/*
 * The service's own value of field f, ready to edit (*out; NULL when neither
 * the service nor a merge has it, or it is null): when the service has no
 * such key but gets one through a merge key, the merged value is copied into
 * an own key first. A value of another type is refused.
 */
static int own_field(const struct inj_ctx *c, struct doc_node *svc, const struct field *f, bool seq_only,
		     const char *what, char *flags, struct doc_node **out, struct err_msg *em)
{
	struct doc_node *v;

	*out = NULL;
	if (doc_find(svc, f->key) < 0 && from_merge(svc, f->key)) {
		doc_set(svc, f->key, merged_copy(svc, f->key));
		inj_flag_add(flags, FLAGS_SIZE, f->copied);
	}
	v = doc_get(svc, f->key);
	if (v == NULL || (v->type == DOC_NULL && v->tag == NULL))
		return 0;
	if (v->type == DOC_SEQ || (v->type == DOC_MAP && !seq_only)) {
		*out = v;
		return 0;
	}
	return inj_fail(c, em, v, DP_EUNSUPPORTED, what, "%s is %s, expected a list%s", f->key,
			v->type == DOC_MAP ? "a map" : "a scalar", seq_only ? "" : " or a map");
}

/* The inverse of the copy: delete the own key while it still equals what the merge gives. */
static void unshare(struct doc_node *svc, const struct field *f, const char *flags)
{
	inj_prune(svc, f->key, flags, f->created);
	if (inj_flag(flags, f->copied) && doc_equal(doc_get(svc, f->key), from_merge(svc, f->key)))
		doc_del(svc, f->key);
}

/* ---- K=V lists and maps ---- */

/* Index of the entry for name k in a map, or in a list of "K=V" / "K" strings (the last one); -1. */
static long kv_find(const struct doc_node *coll, const char *k)
{
	size_t kl = strlen(k);
	long found = -1;

	if (doc_is(coll, DOC_MAP))
		return doc_find(coll, k);
	for (size_t i = 0; doc_is(coll, DOC_SEQ) && i < coll->n; i++) {
		const char *s = doc_strval(coll->vals[i]);

		if (s && strncmp(s, k, kl) == 0 && (s[kl] == '=' || s[kl] == '\0'))
			found = (long)i;
	}
	return found;
}

const char *inj_compose_env_value(const struct doc_node *svc, const char *k)
{
	const struct doc_node *env = inj_merged_get(svc, f_env.key);
	const char *s;
	long i;

	if (doc_is(env, DOC_MAP))
		return inj_scalar_text(inj_merged_get(env, k));
	if ((i = kv_find(env, k)) < 0 || !doc_strval(env->vals[i]))
		return NULL;
	s = env->vals[i]->text + strlen(k);
	return *s == '=' ? s + 1 : NULL;
}

/* Add K=V to a map or a list, in the form it has. */
static void kv_add(struct doc_node *coll, const char *k, const char *v)
{
	if (coll->type == DOC_MAP) {
		doc_set(coll, k, doc_str(v));
	} else {
		char *item = mem_printf("%s=%s", k, v);

		doc_push(coll, doc_str(item));
		mem_free(item);
	}
}

static void kv_del(struct doc_node *coll, const char *k)
{
	long i = kv_find(coll, k);

	if (i >= 0 && coll->type == DOC_MAP)
		doc_del(coll, k);
	else if (i >= 0)
		doc_remove(coll, (size_t)i);
}

/* ---- the rules, per service ---- */

static int append_port(const struct inj_ctx *c, struct doc_node *n, size_t skip, const char *ours,
		       const char *what, char *flags, struct err_msg *em)
{
	const char *v = n->text + skip;
	char *joined;

	if (strlen(n->text) != n->len || strchr(v, '$'))
		return inj_fail(c, em, n, DP_EREFUSED, what,
				"environment: %s is '%s', which Compose interpolates from the shell (or holds a NUL); "
				"diagport cannot see its value to append to it: set it literally, or leave this "
				"service out (label " INJ_PREFIX "inject: \"false\")", INJ_ENV, v);
	if (inj_names_socket(v))
		return 0;
	if (*v == '\0')
		joined = mem_printf("%.*s%s", (int)skip, n->text, ours);
	else
		joined = mem_printf("%s;%s", n->text, ours);
	inj_flag_add(flags, FLAGS_SIZE, *v == '\0' ? 'z' : 'e');
	doc_set_text(n, joined);
	mem_free(joined);
	return 0;
}

static int add_env(const struct inj_ctx *c, struct doc_node *svc, const struct inj_opts *o, const char *what,
		   char *flags, struct err_msg *em)
{
	const char *ours = inj_port_value(o->mode);
	struct doc_node *env, *n;
	long i;
	int rc;

	if ((rc = own_field(c, svc, &f_env, false, what, flags, &env, em)) != 0)
		return rc;
	if (env == NULL)
		env = inj_create(svc, f_env.key, DOC_MAP, flags, FLAGS_SIZE, f_env.created);
	if (env->type == DOC_MAP && doc_find(env, INJ_ENV) < 0 && from_merge(env, INJ_ENV)) {
		/* environment: {<<: *env}: the variable of the merged map, copied to an own key to be edited */
		doc_set(env, INJ_ENV, merged_copy(env, INJ_ENV));
		inj_flag_add(flags, FLAGS_SIZE, 'k');
	}
	if ((i = kv_find(env, INJ_ENV)) < 0) {
		kv_add(env, INJ_ENV, ours);
		inj_flag_add(flags, FLAGS_SIZE, 'E');
		return 0;
	}
	n = env->vals[i];
	if (n->type == DOC_NULL || (env->type == DOC_SEQ && n->text[strlen(INJ_ENV)] == '\0'))
		return inj_fail(c, em, n, DP_EREFUSED, what,
				"environment: %s has no value here, so Compose takes it from the shell's environment; "
				"diagport cannot see it to append to it: set it literally, or leave this service out",
				INJ_ENV);
	if (n->type != DOC_STRING)
		return inj_fail(c, em, n, DP_EUNSUPPORTED, what, "environment: %s is not a string", INJ_ENV);
	return append_port(c, n, env->type == DOC_SEQ ? strlen(INJ_ENV) + 1 : 0, ours, what, flags, em);
}

static int undo_env(const struct inj_ctx *c, struct doc_node *svc, const char *flags, const char *what,
		    struct err_msg *em)
{
	struct doc_node *env = doc_get(svc, f_env.key), *n;
	long i = kv_find(env, INJ_ENV);
	size_t skip = doc_is(env, DOC_SEQ) ? strlen(INJ_ENV) + 1 : 0;
	char *semi, *kept;

	if (!inj_flag(flags, 'E') && !inj_flag(flags, 'e') && !inj_flag(flags, 'z'))
		return 0;
	if (i < 0 || !doc_strval(env->vals[i]) || strlen(env->vals[i]->text) < skip)
		return inj_fail(c, em, svc, DP_EREFUSED, what, "the status record says diagport set %s, but the "
				"service's environment no longer has it; remove the rest by hand", INJ_ENV);
	n = env->vals[i];
	if (inj_flag(flags, 'E')) {
		kv_del(env, INJ_ENV);
		return 0;
	}
	semi = strrchr(n->text + skip, ';');
	if (inj_flag(flags, 'z')) {
		kept = mem_strndup(n->text, skip);
	} else if (semi && strncmp(semi + 1, INJ_SOCKET, strlen(INJ_SOCKET)) == 0) {
		kept = mem_strndup(n->text, (size_t)(semi - n->text));
	} else {
		return inj_fail(c, em, n, DP_EREFUSED, what, "%s no longer ends with the entry diagport appended "
				"(;%s...); fix it by hand", INJ_ENV, INJ_SOCKET);
	}
	doc_set_text(n, kept);
	mem_free(kept);
	if (inj_flag(flags, 'k') && doc_equal(n, from_merge(env, INJ_ENV)))
		doc_del(env, INJ_ENV);
	return 0;
}

/*
 * The crash-dump settings (rules.c says which), added to the service's own
 * environment (add_env has made it) unless the environment names one of them
 * itself, through its merge key too: flag C.
 */
static void add_crash(struct doc_node *svc, const struct inj_opts *o, char *flags)
{
	struct doc_node *env = doc_get(svc, f_env.key);
	static const char *const prefixes[] = { "DOTNET_", INJ_CRASH_PREFIX };

	for (size_t i = 0; i < INJ_CRASH_NVARS; i++)
		for (size_t p = 0; p < 2; p++) {
			char *name = mem_printf("%s%s", prefixes[p], inj_crash_names[i]);
			bool own = doc_is(env, DOC_MAP) ? inj_merged_get(env, name) != NULL : kv_find(env, name) >= 0;

			mem_free(name);
			if (own)
				return;
		}
	for (size_t i = 0; i < INJ_CRASH_NVARS; i++) {
		char *name = mem_printf(INJ_CRASH_PREFIX "%s", inj_crash_names[i]);

		kv_add(env, name, inj_crash_value(o, i));
		mem_free(name);
	}
	inj_flag_add(flags, FLAGS_SIZE, 'C');
}

static void undo_crash(struct doc_node *svc, const char *flags)
{
	struct doc_node *env = doc_get(svc, f_env.key);

	for (size_t i = 0; inj_flag(flags, 'C') && env && i < INJ_CRASH_NVARS; i++) {
		char *name = mem_printf(INJ_CRASH_PREFIX "%s", inj_crash_names[i]);

		kv_del(env, name);
		mem_free(name);
	}
}

/* A short volume "SOURCE:TARGET[:MODE]" or "TARGET": its source (may be empty) and target, colons in ${...} skipped. */
static void short_volume(const char *s, char **src, char **tgt)
{
	const char *colon[2] = { NULL, NULL };
	int depth = 0, n = 0;

	for (const char *p = s; *p && n < 2; p++) {
		if (p[0] == '$' && p[1] == '{')
			depth++;
		else if (*p == '}' && depth > 0)
			depth--;
		else if (*p == ':' && depth == 0)
			colon[n++] = p;
	}
	if (n == 0) {
		*src = mem_strdup("");
		*tgt = mem_strdup(s);
		return;
	}
	*src = mem_strndup(s, (size_t)(colon[0] - s));
	*tgt = colon[1] ? mem_strndup(colon[0] + 1, (size_t)(colon[1] - colon[0] - 1)) : mem_strdup(colon[0] + 1);
}

/* A mount of the service that would collide with ours: a volume of our names, or a target at /diag or /dumps. */
static int check_mount(const struct inj_ctx *c, const struct doc_node *at, const char *field, const char *src,
		       const char *tgt, const char *what, struct err_msg *em)
{
	static const char *const dirs[] = { INJ_DIAG_DIR, INJ_DUMPS_DIR };

	if (src && (strcmp(src, INJ_VOL_DIAG) == 0 || strcmp(src, INJ_VOL_DUMPS) == 0))
		return inj_fail(c, em, at, DP_EREFUSED, what, "%s mounts a volume named %s, a name diagport adds, and "
				"there is no diagport status record; rename that volume", field, src);
	for (size_t k = 0; tgt && *tgt && k < 2; k++)
		if (inj_path_overlaps(tgt, dirs[k]))
			return inj_fail(c, em, at, DP_EREFUSED, what, "%s mounts %s at %s, which collides with "
					"diagport's %s; move that mount", field, src && *src ? src : "something", tgt,
					dirs[k]);
	return 0;
}

static int check_mounts(const struct inj_ctx *c, const struct doc_node *svc, const char *what, struct err_msg *em)
{
	const struct doc_node *vols = inj_merged_get(svc, "volumes"), *tmpfs = inj_merged_get(svc, "tmpfs");
	int rc = 0;

	for (size_t i = 0; doc_is(vols, DOC_SEQ) && i < vols->n && rc == 0; i++) {
		const struct doc_node *v = vols->vals[i];

		if (doc_strval(v)) {
			char *src, *tgt;

			short_volume(v->text, &src, &tgt);
			rc = check_mount(c, v, "volumes", src, tgt, what, em);
			mem_free(src);
			mem_free(tgt);
		} else if (doc_is(v, DOC_MAP)) {
			rc = check_mount(c, v, "volumes", doc_get_str(v, "source"), doc_get_str(v, "target"), what, em);
		}
	}
	if (doc_strval(tmpfs))
		return rc ? rc : check_mount(c, tmpfs, "tmpfs", "tmpfs", tmpfs->text, what, em);
	for (size_t i = 0; doc_is(tmpfs, DOC_SEQ) && i < tmpfs->n && rc == 0; i++)
		if (doc_strval(tmpfs->vals[i])) {
			char *path = mem_strndup(tmpfs->vals[i]->text, strcspn(tmpfs->vals[i]->text, ":"));

			rc = check_mount(c, tmpfs->vals[i], "tmpfs", "tmpfs", path, what, em);
			mem_free(path);
		}
	return rc;
}

static int add_volumes(const struct inj_ctx *c, struct doc_node *svc, const char *what, char *flags,
		       struct err_msg *em)
{
	struct doc_node *vols;
	int rc;

	if ((rc = own_field(c, svc, &f_vols, true, what, flags, &vols, em)) != 0)
		return rc;
	if (vols == NULL)
		vols = inj_create(svc, f_vols.key, DOC_SEQ, flags, FLAGS_SIZE, f_vols.created);
	doc_push(vols, doc_str(DIAG_MOUNT));
	doc_push(vols, doc_str(DUMPS_MOUNT));
	inj_flag_add(flags, FLAGS_SIZE, 'M');
	return 0;
}

/* Remove the last item of seq s that is the string v. */
static void remove_str(struct doc_node *s, const char *v)
{
	for (size_t i = doc_is(s, DOC_SEQ) ? s->n : 0; i-- > 0;)
		if (doc_strval(s->vals[i]) && strcmp(s->vals[i]->text, v) == 0) {
			doc_remove(s, i);
			return;
		}
}

static bool has_ptrace(const struct doc_node *caps)
{
	for (size_t i = 0; doc_is(caps, DOC_SEQ) && i < caps->n; i++) {
		const char *s = doc_strval(caps->vals[i]);

		if (s && (strcasecmp(s, "SYS_PTRACE") == 0 || strcasecmp(s, "CAP_SYS_PTRACE") == 0 ||
			  strcasecmp(s, "ALL") == 0 || strcasecmp(s, "CAP_ALL") == 0))
			return true;
	}
	return false;
}

static int add_ptrace(const struct inj_ctx *c, struct doc_node *svc, const char *what, char *flags,
		      struct err_msg *em)
{
	struct doc_node *caps;
	int rc;

	if (has_ptrace(inj_merged_get(svc, f_caps.key)))
		return 0;
	if ((rc = own_field(c, svc, &f_caps, true, what, flags, &caps, em)) != 0)
		return rc;
	if (caps == NULL)
		caps = inj_create(svc, f_caps.key, DOC_SEQ, flags, FLAGS_SIZE, f_caps.created);
	doc_push(caps, doc_str("SYS_PTRACE"));
	inj_flag_add(flags, FLAGS_SIZE, 'P');
	return 0;
}

/* Does a depends_on (list or map) name the agent? */
static bool names_agent(const struct doc_node *deps)
{
	if (doc_is(deps, DOC_MAP))
		return doc_find(deps, INJ_AGENT_NAME) >= 0;
	for (size_t i = 0; doc_is(deps, DOC_SEQ) && i < deps->n; i++)
		if (doc_strval(deps->vals[i]) && strcmp(deps->vals[i]->text, INJ_AGENT_NAME) == 0)
			return true;
	return false;
}

static struct doc_node *condition(const char *cond)
{
	struct doc_node *m = doc_map();

	doc_set(m, "condition", doc_str(cond));
	return m;
}

/*
 * depends_on the agent: a list stays a list when the condition is
 * service_started; service_healthy (suspend mode: the app waits for the
 * agent to listen) needs the map form, so a list is rewritten as the map
 * that means the same (each name service_started), flag R.
 */
static int add_depends(const struct inj_ctx *c, struct doc_node *svc, const struct inj_opts *o, const char *what,
		       char *flags, struct err_msg *em)
{
	bool healthy = o->mode == INJ_SUSPEND;
	struct doc_node *deps, *map;
	int rc;

	if ((rc = own_field(c, svc, &f_deps, false, what, flags, &deps, em)) != 0)
		return rc;
	if (names_agent(deps))
		return inj_fail(c, em, deps, DP_EREFUSED, what, "depends_on already names %s and there is no "
				"diagport status record; diagport adds that dependency, so remove yours",
				INJ_AGENT_NAME);
	if (deps == NULL)
		deps = inj_create(svc, f_deps.key, healthy ? DOC_MAP : DOC_SEQ, flags, FLAGS_SIZE, f_deps.created);
	if (deps->type == DOC_SEQ && healthy) {
		map = doc_map();
		for (size_t i = 0; i < deps->n; i++) {
			const char *name = doc_strval(deps->vals[i]);

			if (name == NULL || doc_find(map, name) >= 0) {
				doc_free(map);
				return inj_fail(c, em, deps->vals[i], DP_EREFUSED, what,
						"depends_on[%zu] is %s; suspend mode rewrites the list as a map "
						"(condition: service_healthy on the agent) and cannot", i,
						name ? "a second entry of the same service" : "not a service name");
			}
			doc_set(map, name, condition(STARTED));
		}
		doc_set(svc, f_deps.key, map);
		deps = map;
		inj_flag_add(flags, FLAGS_SIZE, 'R');
	}
	if (deps->type == DOC_SEQ)
		doc_push(deps, doc_str(INJ_AGENT_NAME));
	else
		doc_set(deps, INJ_AGENT_NAME, condition(healthy ? HEALTHY : STARTED));
	inj_flag_add(flags, FLAGS_SIZE, 'D');
	return 0;
}

static int undo_depends(const struct inj_ctx *c, struct doc_node *svc, const char *flags, const char *what,
			struct err_msg *em)
{
	struct doc_node *deps = doc_get(svc, f_deps.key), *list;

	if (inj_flag(flags, 'D')) {
		if (doc_is(deps, DOC_MAP))
			doc_del(deps, INJ_AGENT_NAME);
		remove_str(deps, INJ_AGENT_NAME);
	}
	if (inj_flag(flags, 'R') && doc_is(deps, DOC_MAP)) {
		list = doc_seq();
		for (size_t i = 0; i < deps->n; i++) {
			const struct doc_node *v = deps->vals[i];

			if (!doc_is(v, DOC_MAP) || v->n != 1 || !doc_get_str(v, "condition") ||
			    strcmp(doc_get_str(v, "condition"), STARTED) != 0) {
				doc_free(list);
				return inj_fail(c, em, v, DP_EREFUSED, what, "depends_on.%s is no longer {condition: "
						STARTED "}, as inject wrote it when it rewrote the list as a map; "
						"write the list back by hand", deps->keys[i]->text);
			}
			doc_push(list, doc_str(deps->keys[i]->text));
		}
		doc_set(svc, f_deps.key, list);
	}
	unshare(svc, &f_deps, flags);
	return 0;
}

/* The status label: map form or list form ("K=V") as written; labels created as a map when absent. */
static int add_status_label(const struct inj_ctx *c, struct doc_node *svc, const struct inj_opts *o,
			    struct inj_cstat *cs, const char *what, struct err_msg *em)
{
	struct inj_status one;
	struct doc_node *labels;
	char *text;
	int rc;

	if ((rc = own_field(c, svc, &f_labels, false, what, cs->flags, &labels, em)) != 0)
		return rc;
	if (labels == NULL)
		labels = inj_create(svc, f_labels.key, DOC_MAP, cs->flags, FLAGS_SIZE, f_labels.created);
	memset(&one, 0, sizeof(one));
	one.c[0] = *cs;
	one.n = 1;
	text = inj_status_format(&one, o);
	kv_del(labels, INJ_STATUS_KEY);
	kv_add(labels, INJ_STATUS_KEY, text);
	mem_free(text);
	return 0;
}

int inj_compose_service(const struct inj_ctx *c, struct doc_node *svc, const struct inj_opts *o, bool depends,
			const char *what, struct inj_cstat *cs, struct err_msg *em)
{
	int rc;

	if ((rc = check_mounts(c, svc, what, em)) != 0 || (rc = add_env(c, svc, o, what, cs->flags, em)) != 0)
		return rc;
	if (o->crash_dumps)
		add_crash(svc, o, cs->flags);
	if ((rc = add_volumes(c, svc, what, cs->flags, em)) != 0 ||
	    (o->ptrace && (rc = add_ptrace(c, svc, what, cs->flags, em)) != 0) ||
	    (depends && (rc = add_depends(c, svc, o, what, cs->flags, em)) != 0))
		return rc;
	return add_status_label(c, svc, o, cs, what, em);
}

int uninj_compose_service(const struct inj_ctx *c, struct doc_node *svc, const struct inj_cstat *cs,
			    const char *what, struct err_msg *em)
{
	const char *f = cs->flags;
	int rc;

	undo_crash(svc, f);
	if ((rc = undo_env(c, svc, f, what, em)) != 0 || (rc = undo_depends(c, svc, f, what, em)) != 0)
		return rc;
	unshare(svc, &f_env, f);
	if (inj_flag(f, 'M')) {
		remove_str(doc_get(svc, f_vols.key), DUMPS_MOUNT);
		remove_str(doc_get(svc, f_vols.key), DIAG_MOUNT);
	}
	unshare(svc, &f_vols, f);
	if (inj_flag(f, 'P'))
		remove_str(doc_get(svc, f_caps.key), "SYS_PTRACE");
	unshare(svc, &f_caps, f);
	kv_del(doc_get(svc, f_labels.key), INJ_STATUS_KEY);
	unshare(svc, &f_labels, f);
	return 0;
}

/*
 * After uninject: what only diagport adds must be gone from a service its
 * record named (a record forged or an injected file edited by hand leaves
 * some behind, and the project would name an agent and volumes that are gone).
 */
int inj_compose_leftover(const struct inj_ctx *c, const struct doc_node *svc, const char *what, struct err_msg *em)
{
	const struct doc_node *deps = inj_merged_get(svc, f_deps.key), *vols = inj_merged_get(svc, f_vols.key);

	if (names_agent(deps))
		return inj_fail(c, em, deps, DP_EREFUSED, what, "depends_on still names %s after uninject: the "
				"project's status record does not say that diagport added it (edited by hand?); "
				"remove it by hand", INJ_AGENT_NAME);
	for (size_t i = 0; doc_is(vols, DOC_SEQ) && i < vols->n; i++) {
		const struct doc_node *v = vols->vals[i];
		char *src = NULL, *tgt = NULL;
		const char *s = doc_is(v, DOC_MAP) ? doc_get_str(v, "source") : NULL;
		bool ours;

		if (doc_strval(v)) {
			short_volume(v->text, &src, &tgt);
			s = src;
		}
		ours = s && (strcmp(s, INJ_VOL_DIAG) == 0 || strcmp(s, INJ_VOL_DUMPS) == 0);
		mem_free(src);
		mem_free(tgt);
		if (ours)
			return inj_fail(c, em, v, DP_EREFUSED, what, "volumes still mounts a volume of diagport's after "
					"uninject: the project's status record does not say that diagport added it "
					"(edited by hand?); remove it by hand");
	}
	return 0;
}

const struct doc_node *inj_compose_status_label(const struct doc_node *svc, size_t *skip)
{
	const struct doc_node *labels = doc_get(svc, f_labels.key);
	long i = kv_find(labels, INJ_STATUS_KEY);

	*skip = doc_is(labels, DOC_SEQ) ? strlen(INJ_STATUS_KEY) + 1 : 0;
	return i >= 0 ? labels->vals[i] : NULL;
}
