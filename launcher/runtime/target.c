/*
 * target.c - choosing the runtime a request means (target.h).
 */
#include "target.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "buf.h"
#include "utf8.h"

const char *target_name(const struct port_runtime *p, size_t *len)
{
	const char *cl = p->info.command_line, *sp, *sl, *n;

	if (p->info.assembly && *p->info.assembly)
		n = p->info.assembly;
	else if (cl == NULL)
		n = "";
	else {
		sp = strchr(cl, ' ');
		sl = memrchr(cl, '/', sp ? (size_t)(sp - cl) : strlen(cl));
		n = sl ? sl + 1 : cl;
	}
	*len = strcspn(n, " ");
	return n;
}

void target_uid(const struct port_runtime *p, char out[37])
{
	ipc_cookie_guid(p->cookie, out);
}

static bool matches(const struct port_runtime *p, const struct target_sel *sel, unsigned long long pid)
{
	char g[37];
	size_t len;
	const char *n = target_name(p, &len);

	target_uid(p, g);
	return (!sel->pid || p->pid == pid) && (!sel->uid || strcasecmp(sel->uid, g) == 0) &&
	       (!sel->name || (strlen(sel->name) == len && strncmp(n, sel->name, len) == 0));
}

static int ambiguous(const struct port_runtime *l, size_t n, struct err_msg *em)
{
	struct buf b;
	int rc;

	buf_init(&b, 4096);
	for (size_t i = 0; i < n; i++) {
		char g[37];
		size_t len;
		const char *name = target_name(&l[i], &len);

		target_uid(&l[i], g);
		buf_printf(&b, "%s pid %llu uid %s name %.*s", i ? ";" : "", (unsigned long long)l[i].pid, g, (int)len,
			   name);
	}
	rc = err_set(em, DP_EREFUSED, "%zu processes are attached; choose one with pid, uid or name:%s", n,
		     b.data ? b.data : "");
	buf_free(&b);
	return rc;
}

int target_choose(struct port *port, const struct target_sel *sel, struct port_runtime *out, struct err_msg *em)
{
	struct port_runtime *l;
	unsigned long long pid = 0;
	size_t n, hit = 0, at = 0;
	char *end;
	int rc = 0;

	if (sel->pid) {
		errno = 0;
		pid = strtoull(sel->pid, &end, 10);
		if (*sel->pid < '0' || *sel->pid > '9' || *end != '\0' || errno != 0 || pid > 0xFFFFFFFFull)
			return err_set(em, DP_EINVAL, "pid '%.32s' is not a number", sel->pid);
	}
	n = port_list(port, &l);
	for (size_t i = 0; i < n; i++)
		if (matches(&l[i], sel, pid)) {
			hit++;
			at = i;
		}
	if (hit == 1) {
		*out = l[at];
		memset(&l[at].info, 0, sizeof(l[at].info)); /* moved to *out */
	} else if (hit == 0) {
		rc = err_set(em, DP_ENOTFOUND, "%s", n == 0 ? "no .NET process is attached to the agent" :
			     "no attached process matches the given pid/uid/name");
	} else {
		rc = ambiguous(l, n, em);
	}
	port_list_free(l, n);
	return rc;
}

json_t *target_identifier(const struct port_runtime *p, bool is_default)
{
	json_t *o = json_object();
	char g[37];
	size_t len;
	const char *n = target_name(p, &len);

	target_uid(p, g);
	json_object_set_new(o, "pid", json_integer((json_int_t)p->pid));
	json_object_set_new(o, "uid", json_string(g));
	json_object_set_new(o, "name", utf8_json(n, len));
	json_object_set_new(o, "isDefault", json_boolean(is_default));
	return o;
}
