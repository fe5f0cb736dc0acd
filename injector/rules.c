/*
 * rules.c - the per-container rules, written once for every platform.
 *
 * For one selected app container: mount the socket and dumps volumes, point
 * DOTNET_DiagnosticPorts at the agent's socket (appended with ';' to an
 * existing value, never duplicated), give it the crash-dump settings unless
 * it has its own, add SYS_PTRACE when the ptrace option asks; and the exact inverse.
 * Field names come from the dialect (inj_int.h), so Kubernetes, ECS and
 * CloudFormation share this code. What was added is recorded as flags in the
 * container's status entry (status.c lists the letters).
 */
#include "inj_int.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

const char *inj_port_value(enum inj_mode m)
{
	return m == INJ_SUSPEND ? INJ_SOCKET ",suspend,connect" : INJ_SOCKET ",nosuspend,connect";
}

bool inj_names_socket(const char *v)
{
	size_t sl = strlen(INJ_SOCKET);

	while (v && *v) {
		while (*v == ' ')
			v++;
		if (strncmp(v, INJ_SOCKET, sl) == 0 && (v[sl] == ',' || v[sl] == ';' || v[sl] == '\0'))
			return true;
		v = strchr(v, ';');
		if (v)
			v++;
	}
	return false;
}

/*
 * Path p as the runtime resolves it, into out (size n): "//", "." and ".."
 * segments folded ("/app/../diag" is /diag). False when it does not fit.
 */
static bool clean_path(const char *p, char *out, size_t n)
{
	size_t len = 0;

	while (*p) {
		size_t sl = strcspn(p, "/");

		if ((sl == 1 && p[0] == '.') || sl == 0) {
			/* an empty or "." segment: nothing */
		} else if (sl == 2 && p[0] == '.' && p[1] == '.') {
			while (len > 0 && out[--len] != '/')
				;
		} else {
			if (len + 1 + sl >= n)
				return false;
			out[len++] = '/';
			memcpy(out + len, p, sl);
			len += sl;
		}
		p += sl + (p[sl] == '/');
	}
	if (len == 0)
		out[len++] = '/';
	out[len] = '\0';
	return true;
}

bool inj_path_overlaps(const char *path, const char *dir)
{
	char clean[4096] = ""; /* zeroed: the analyser cannot follow clean_path's length */
	const char *p = *path == '/' && clean_path(path, clean, sizeof(clean)) ? clean : path;
	size_t pl = strlen(p), dl = strlen(dir);

	while (pl > 1 && p[pl - 1] == '/')
		pl--;
	if (pl == dl && strncmp(p, dir, dl) == 0)
		return true;
	if (pl > dl && strncmp(p, dir, dl) == 0 && p[dl] == '/')
		return true;
	if (dl > pl && strncmp(dir, p, pl) == 0 && (dir[pl] == '/' || pl == 1))
		return true;
	return false;
}

static bool is_our_volume(const char *v)
{
	if (v == NULL)
		return false;
	for (size_t i = 0; i < INJ_NSOURCES; i++)
		if (strcmp(v, inj_sources[i].volume) == 0)
			return true;
	return strcmp(v, INJ_VOL_DIAG) == 0 || strcmp(v, INJ_VOL_DUMPS) == 0 || strcmp(v, INJ_VOL_AUTH) == 0 ||
	       strcmp(v, INJ_VOL_TLS) == 0;
}

static struct doc_node *mount_node(const struct inj_dialect *d, const char *vol, const char *path)
{
	struct doc_node *m = doc_map();

	doc_set(m, d->m_volume, doc_str(vol));
	doc_set(m, d->m_path, doc_str(path));
	return m;
}

static long last_env(const struct inj_dialect *d, const struct doc_node *env)
{
	long found = -1;

	for (size_t i = 0; env && i < env->n; i++) {
		const char *n = doc_get_str(env->vals[i], d->e_name);

		if (n && strcmp(n, INJ_ENV) == 0)
			found = (long)i;
	}
	return found;
}

static int check_mounts(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *mounts,
			const char *what, struct err_msg *em)
{
	static const char *const dirs[] = { INJ_DIAG_DIR, INJ_DUMPS_DIR };

	for (size_t i = 0; mounts && i < mounts->n; i++) {
		const struct doc_node *m = mounts->vals[i];
		const char *vol = doc_get_str(m, d->m_volume), *path = doc_get_str(m, d->m_path);

		if (is_our_volume(vol))
			return inj_fail(c, em, m, DP_EREFUSED, what,
					"%s[%zu] already mounts a volume named %s, a name diagport adds, and there is no "
					"diagport status record; rename that volume or remove the mount",
					d->c_mounts, i, vol);
		for (size_t k = 0; path && k < 2; k++)
			if (inj_path_overlaps(path, dirs[k]))
				return inj_fail(c, em, m, DP_EREFUSED, what,
						"%s[%zu] mounts volume %s at %s, which collides with diagport's %s; "
						"move that mount", d->c_mounts, i, vol ? vol : "?", path, dirs[k]);
	}
	return 0;
}

static int add_env(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		   struct doc_node *env, const struct inj_opts *o, const char *what, struct inj_cstat *cs,
		   struct err_msg *em)
{
	long i = last_env(d, env);
	const char *ours = inj_port_value(o->mode);
	struct doc_node *item, *val;
	int rc;

	if (i < 0) {
		struct doc_node *secrets;

		if (d->c_secrets) {
			rc = inj_seq_field(c, ctr, d->c_secrets, what, &secrets, em);
			if (rc != 0)
				return rc;
			if (inj_seq_find(secrets, d->e_name, INJ_ENV) >= 0)
				return inj_fail(c, em, secrets, DP_EREFUSED, what,
						"%s is set from a secret (%s), so diagport cannot append its port to it; "
						"set it as a plain value, or leave this container out (containers option)",
						INJ_ENV, d->c_secrets);
		}
		if (env == NULL)
			env = inj_create(ctr, d->c_env, DOC_SEQ, cs->flags, sizeof(cs->flags), 'l');
		item = doc_map();
		doc_set(item, d->e_name, doc_str(INJ_ENV));
		doc_set(item, d->e_value, doc_str(ours));
		doc_push(env, item);
		inj_flag_add(cs->flags, sizeof(cs->flags), 'E');
		return 0;
	}
	item = env->vals[i];
	if (d->e_value_from && doc_get(item, d->e_value_from))
		return inj_fail(c, em, item->keys[doc_find(item, d->e_value_from)], DP_EREFUSED, what,
				"%s[%ld] (%s) comes from %s, so diagport cannot append its port to it; set it as "
				"a plain value, or leave this container out (containers option)",
				d->c_env, i, INJ_ENV, d->e_value_from);
	val = doc_get(item, d->e_value);
	if (val == NULL) {
		doc_set(item, d->e_value, doc_str(ours));
		inj_flag_add(cs->flags, sizeof(cs->flags), 'Z');
		return 0;
	}
	if (val->type != DOC_STRING || inj_intrinsic(val))
		return inj_fail(c, em, val, DP_EUNSUPPORTED, what,
				"%s[%ld] (%s) has a value that is not a plain string (%s); diagport cannot append to it",
				d->c_env, i, INJ_ENV, inj_intrinsic(val) ? inj_intrinsic(val) : "not a string");
	if (inj_names_socket(val->text))
		return 0;
	if (val->len == 0) {
		doc_set_text(val, ours);
		inj_flag_add(cs->flags, sizeof(cs->flags), 'z');
		return 0;
	}
	{
		char *joined = mem_printf("%s;%s", val->text, ours);

		doc_set_text(val, joined);
		mem_free(joined);
	}
	inj_flag_add(cs->flags, sizeof(cs->flags), 'e');
	return 0;
}

const char *const inj_crash_names[INJ_CRASH_NVARS] = { "DbgEnableMiniDump", "DbgMiniDumpType", "DbgMiniDumpName",
							 "EnableCrashReport" };

const char *inj_crash_value(const struct inj_opts *o, size_t i)
{
	static const char *const types[] = { "0", "1", "2", "3", "4" };

	switch (i) {
	case 1:
		return types[o->crash_dumps >= 0 && o->crash_dumps <= 4 ? o->crash_dumps : INJ_CRASH_DEFAULT];
	case 2:
		return INJ_CRASH_FILE;
	default:
		return "1";
	}
}

bool inj_crash_name(const char *name, size_t len)
{
	static const char *const prefixes[] = { "DOTNET_", INJ_CRASH_PREFIX };

	for (size_t p = 0; p < 2; p++) {
		size_t pl = strlen(prefixes[p]);

		if (len <= pl || strncmp(name, prefixes[p], pl) != 0)
			continue;
		for (size_t i = 0; i < INJ_CRASH_NVARS; i++)
			if (strlen(inj_crash_names[i]) == len - pl && strncmp(name + pl, inj_crash_names[i], len - pl) == 0)
				return true;
	}
	return false;
}

/* Does list (env or secrets, items named by e_name; a seq or NULL) set a crash-dump setting of its own? */
static bool names_crash(const struct inj_dialect *d, const struct doc_node *list)
{
	for (size_t i = 0; list && i < list->n; i++) {
		const char *n = doc_get_str(list->vals[i], d->e_name);

		if (n && inj_crash_name(n, strlen(n)))
			return true;
	}
	return false;
}

/*
 * The crash-dump settings, appended to env (created, flag l, when there is
 * none) unless the container sets one of them itself: then its setup is its
 * own and none is added. Flag C when they were.
 */
static int add_crash(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		     const struct inj_opts *o, const char *what, struct inj_cstat *cs, struct err_msg *em)
{
	struct doc_node *env, *secrets = NULL;
	int rc;

	if ((rc = inj_seq_field(c, ctr, d->c_env, what, &env, em)) != 0 ||
	    (d->c_secrets && (rc = inj_seq_field(c, ctr, d->c_secrets, what, &secrets, em)) != 0))
		return rc;
	if (names_crash(d, env) || names_crash(d, secrets))
		return 0;
	if (env == NULL)
		env = inj_create(ctr, d->c_env, DOC_SEQ, cs->flags, sizeof(cs->flags), 'l');
	for (size_t i = 0; i < INJ_CRASH_NVARS; i++) {
		struct doc_node *item = doc_map();
		char *name = mem_printf(INJ_CRASH_PREFIX "%s", inj_crash_names[i]);

		doc_set(item, d->e_name, doc_str(name));
		doc_set(item, d->e_value, doc_str(inj_crash_value(o, i)));
		doc_push(env, item);
		mem_free(name);
	}
	inj_flag_add(cs->flags, sizeof(cs->flags), 'C');
	return 0;
}

/* The inverse: each setting inject appended (the last entry of its name), whatever its value now. */
static void undo_crash(const struct inj_dialect *d, struct doc_node *ctr, const char *flags)
{
	struct doc_node *env = doc_get(ctr, d->c_env);

	if (!inj_flag(flags, 'C') || !doc_is(env, DOC_SEQ))
		return;
	for (size_t k = 0; k < INJ_CRASH_NVARS; k++) {
		char *name = mem_printf(INJ_CRASH_PREFIX "%s", inj_crash_names[k]);

		for (size_t i = env->n; i-- > 0;) {
			const char *n = doc_get_str(env->vals[i], d->e_name);

			if (n && strcmp(n, name) == 0) {
				doc_remove(env, i);
				break;
			}
		}
		mem_free(name);
	}
}

static bool has_ptrace(const struct doc_node *add)
{
	for (size_t i = 0; add && i < add->n; i++) {
		const char *s = doc_strval(add->vals[i]);

		if (s && (strcasecmp(s, "SYS_PTRACE") == 0 || strcasecmp(s, "CAP_SYS_PTRACE") == 0))
			return true;
	}
	return false;
}

static int add_ptrace(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		      const char *what, struct inj_cstat *cs, struct err_msg *em)
{
	struct doc_node *lvl[3] = { NULL, NULL, NULL };
	struct doc_node *cur = ctr;
	int rc;

	/* Look first, so that nothing is created when the capability is already there. */
	for (int k = 0; k < 2 && cur; k++) {
		rc = inj_map_field(c, cur, d->caps[k], what, &lvl[k], em);
		if (rc != 0)
			return rc;
		cur = lvl[k];
	}
	if (lvl[1]) {
		rc = inj_seq_field(c, lvl[1], d->caps[2], what, &lvl[2], em);
		if (rc != 0)
			return rc;
	}
	if (has_ptrace(lvl[2]))
		return 0;
	cur = ctr;
	for (int k = 0; k < 3; k++) {
		if (lvl[k] == NULL)
			lvl[k] = inj_create(cur, d->caps[k], k == 2 ? DOC_SEQ : DOC_MAP, cs->flags, sizeof(cs->flags),
					    (char)('1' + k));
		cur = lvl[k];
	}
	doc_push(lvl[2], doc_str("SYS_PTRACE"));
	inj_flag_add(cs->flags, sizeof(cs->flags), 'P');
	return 0;
}

int inj_container(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		  const struct inj_opts *o, const char *what, struct inj_cstat *cs, struct err_msg *em)
{
	struct doc_node *mounts, *env;
	int rc;

	if ((rc = inj_seq_field(c, ctr, d->c_mounts, what, &mounts, em)) != 0 ||
	    (rc = inj_seq_field(c, ctr, d->c_env, what, &env, em)) != 0 ||
	    (rc = check_mounts(c, d, mounts, what, em)) != 0)
		return rc;
	if ((rc = add_env(c, d, ctr, env, o, what, cs, em)) != 0 ||
	    (o->crash_dumps && (rc = add_crash(c, d, ctr, o, what, cs, em)) != 0))
		return rc;
	if (mounts == NULL)
		mounts = inj_create(ctr, d->c_mounts, DOC_SEQ, cs->flags, sizeof(cs->flags), 'm');
	doc_push(mounts, mount_node(d, INJ_VOL_DIAG, INJ_DIAG_DIR));
	doc_push(mounts, mount_node(d, INJ_VOL_DUMPS, INJ_DUMPS_DIR));
	inj_flag_add(cs->flags, sizeof(cs->flags), 'M');
	if (o->ptrace)
		return add_ptrace(c, d, ctr, what, cs, em);
	return 0;
}

static int undo_env(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		    const char *flags, const char *what, struct err_msg *em)
{
	struct doc_node *env = doc_get(ctr, d->c_env);
	long i = last_env(d, env);
	struct doc_node *val;

	if (!inj_flag(flags, 'E') && !inj_flag(flags, 'e') && !inj_flag(flags, 'z') && !inj_flag(flags, 'Z'))
		return 0;
	if (i < 0)
		return inj_fail(c, em, ctr, DP_EREFUSED, what,
				"the status record says diagport set %s, but the container no longer has it; "
				"remove the rest by hand", INJ_ENV);
	if (inj_flag(flags, 'E')) {
		doc_remove(env, (size_t)i);
	} else if (inj_flag(flags, 'Z')) {
		doc_del(env->vals[i], d->e_value);
	} else {
		val = doc_get(env->vals[i], d->e_value);
		char *semi = val && val->type == DOC_STRING ? strrchr(val->text, ';') : NULL;

		if (inj_flag(flags, 'z')) {
			doc_set_text(val, "");
		} else if (semi && strncmp(semi + 1, INJ_SOCKET, strlen(INJ_SOCKET)) == 0) {
			char *kept = mem_strndup(val->text, (size_t)(semi - val->text));

			doc_set_text(val, kept);
			mem_free(kept);
		} else {
			return inj_fail(c, em, val, DP_EREFUSED, what,
					"%s no longer ends with the entry diagport appended (;%s...); fix it by hand",
					INJ_ENV, INJ_SOCKET);
		}
	}
	inj_prune(ctr, d->c_env, flags, 'l');
	return 0;
}

static void undo_ptrace(const struct inj_dialect *d, struct doc_node *ctr, const char *flags)
{
	struct doc_node *l1 = doc_get(ctr, d->caps[0]);
	struct doc_node *l2 = doc_get(l1, d->caps[1]);
	struct doc_node *add = doc_get(l2, d->caps[2]);

	if (!inj_flag(flags, 'P'))
		return;
	for (size_t i = add ? add->n : 0; i-- > 0;) {
		const char *s = doc_strval(add->vals[i]);

		if (s && strcmp(s, "SYS_PTRACE") == 0) {
			doc_remove(add, i);
			break;
		}
	}
	if (l2)
		inj_prune(l2, d->caps[2], flags, '3');
	if (l1)
		inj_prune(l1, d->caps[1], flags, '2');
	inj_prune(ctr, d->caps[0], flags, '1');
}

int uninj_container(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctr,
		    const struct inj_cstat *cs, const char *what, struct err_msg *em)
{
	struct doc_node *mounts = doc_get(ctr, d->c_mounts);
	int rc;

	if (inj_flag(cs->flags, 'M') && doc_is(mounts, DOC_SEQ)) {
		for (size_t i = mounts->n; i-- > 0;) {
			const char *vol = doc_get_str(mounts->vals[i], d->m_volume);

			if (vol && (strcmp(vol, INJ_VOL_DIAG) == 0 || strcmp(vol, INJ_VOL_DUMPS) == 0))
				doc_remove(mounts, i);
		}
		inj_prune(ctr, d->c_mounts, cs->flags, 'm');
	}
	undo_crash(d, ctr, cs->flags);
	if ((rc = undo_env(c, d, ctr, cs->flags, what, em)) != 0)
		return rc;
	undo_ptrace(d, ctr, cs->flags);
	return 0;
}

int inj_check_collisions(const struct inj_ctx *c, const struct inj_dialect *d,
			 struct doc_node *volumes, struct doc_node *const *ctr_lists, size_t nlists,
			 const char *what, struct err_msg *em)
{
	for (size_t i = 0; volumes && i < volumes->n; i++) {
		const char *v = doc_get_str(volumes->vals[i], d->v_name);

		if (is_our_volume(v))
			return inj_fail(c, em, volumes->vals[i], DP_EREFUSED, what,
					"a volume named %s already exists and there is no diagport status record; "
					"diagport adds a volume of that name, so rename yours", v);
	}
	for (size_t l = 0; l < nlists; l++)
		for (size_t i = 0; ctr_lists[l] && i < ctr_lists[l]->n; i++) {
			const char *n = doc_get_str(ctr_lists[l]->vals[i], d->c_name);

			if (n && strcmp(n, INJ_AGENT_NAME) == 0)
				return inj_fail(c, em, ctr_lists[l]->vals[i], DP_EREFUSED, what,
						"a container named %s already exists and there is no diagport status "
						"record; diagport adds a container of that name, so rename yours",
						INJ_AGENT_NAME);
		}
	return 0;
}

int inj_ctr_named(const struct inj_ctx *c, const struct inj_dialect *d, const struct doc_node *ctr,
		  const char *list, size_t i, size_t n, const char *what, struct err_msg *em)
{
	const char *name = doc_get_str(ctr, d->c_name);

	if (!doc_is(ctr, DOC_MAP) || name == NULL || !inj_name_ok(name, strlen(name)))
		return inj_fail(c, em, ctr, DP_EREFUSED, what, "%s[%zu] has no valid %s (letters, digits, '-', '_', "
				"'.'; at most 255)", list, i, d->c_name);
	if (n == INJ_MAX_CONTAINERS)
		return inj_fail(c, em, ctr, DP_EREFUSED, what, "more than %d containers to inject (the most one status "
				"record holds); choose them with the containers option", INJ_MAX_CONTAINERS);
	return 0;
}

struct named {
	const char *name;
	size_t i;
};

static int by_name(const void *a, const void *b)
{
	const struct named *x = a, *y = b;
	int r = strcmp(x->name, y->name);

	return r ? r : (x->i > y->i) - (x->i < y->i);
}

/* The entry named p[0..n) in ix (sorted by_name), or NULL. */
static const struct named *find_named(const struct named *ix, size_t m, const char *p, size_t n)
{
	size_t lo = 0, hi = m;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = strncmp(ix[mid].name, p, n);

		if (r == 0)
			r = ix[mid].name[n] != '\0';
		if (r == 0)
			return &ix[mid];
		if (r < 0)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Names are sorted once, so a pod with thousands of containers costs n log n, not n squared. */
int inj_select(const struct inj_ctx *c, const struct inj_dialect *d, struct doc_node *ctrs,
	       const struct inj_opts *o, const char *what, bool *sel, struct err_msg *em)
{
	const char *p = o->containers;
	struct named *ix = mem_array(ctrs->n ? ctrs->n : 1, sizeof(*ix));
	size_t m = 0, dup = (size_t)-1;
	int rc = 0;

	for (size_t i = 0; i < ctrs->n; i++) {
		const char *a = doc_get_str(ctrs->vals[i], d->c_name);

		sel[i] = p == NULL;
		if (a)
			ix[m++] = (struct named){ a, i };
	}
	qsort(ix, m, sizeof(*ix), by_name);
	for (size_t k = 1; k < m; k++) /* the first container whose name an earlier one has */
		if (strcmp(ix[k].name, ix[k - 1].name) == 0 && ix[k].i < dup)
			dup = ix[k].i;
	if (dup != (size_t)-1) {
		rc = inj_fail(c, em, ctrs->vals[dup], DP_EREFUSED, what, "two containers are named %s; %s requires "
			      "unique names", doc_get_str(ctrs->vals[dup], d->c_name), d->platform);
		goto out;
	}
	while (p && *p) {
		size_t n = strcspn(p, ",");
		const struct named *hit = find_named(ix, m, p, n);

		if (hit == NULL) {
			rc = inj_fail(c, em, ctrs, DP_EREFUSED, what,
				      "the containers option names '%.*s', but there is no such container", (int)n, p);
			goto out;
		}
		sel[hit->i] = true;
		p += n;
		if (*p == ',')
			p++;
	}
out:
	mem_free(ix);
	return rc;
}
