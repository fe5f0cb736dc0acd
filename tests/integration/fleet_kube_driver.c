/*
 * fleet_kube_driver.c - fleet_kube_discover on its own, for
 * tests/integration/fleet_kube.sh (until `diagport ps -o json` is there).
 *
 *   fleet_kube_driver [--kubeconfig F] [--context C] [-n NS] [-A] [-l SEL] [--container C]
 *                     [--capture] [REF...]
 *
 * Prints {"caller": ...} then one JSON line per agent (the token as
 * "token_ok": whether it equals $EXPECT_TOKEN, never the token itself);
 * on failure "error CODE: MESSAGE" (CODE: EAUTH, ENOTFOUND, EINVAL, ...) on stdout and exit 1.
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"
#include "fleet/fleet.h"
#include "mem.h"

static json_t *str(const char *s)
{
	return s ? json_string(s) : json_null();
}

static const char *code_name(int rc)
{
	switch (rc) {
	case DP_EINVAL: return "EINVAL";
	case DP_ENOTFOUND: return "ENOTFOUND";
	case DP_EAUTH: return "EAUTH";
	case DP_EREMOTE: return "EREMOTE";
	case DP_EIO: return "EIO";
	}
	return err_str(rc);
}

int main(int argc, char **argv)
{
	struct fleet_kube_opts o = { .timeout_ms = 10000 };
	const char *refs[64] = { NULL };
	const char *want = getenv("EXPECT_TOKEN");
	struct fleet_set set = { 0 };
	struct err_msg em = { "" };
	size_t nr = 0;
	int rc;

	mem_install();
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;

		if (strcmp(a, "--kubeconfig") == 0 && v)
			o.kubeconfig = argv[++i];
		else if (strcmp(a, "--context") == 0 && v)
			o.context = argv[++i];
		else if (strcmp(a, "-n") == 0 && v)
			o.namespace_ = argv[++i];
		else if (strcmp(a, "-l") == 0 && v)
			o.selector = argv[++i];
		else if (strcmp(a, "--container") == 0 && v)
			o.container = argv[++i];
		else if (strcmp(a, "-A") == 0)
			o.all_namespaces = true;
		else if (strcmp(a, "--capture") == 0)
			o.for_capture = true;
		else if (nr < 63)
			refs[nr++] = a;
	}
	if (nr)
		o.refs = refs;
	rc = fleet_kube_discover(&o, &set, &em);
	if (rc != 0) {
		printf("error %s: %s\n", code_name(rc), em.text);
		return 1;
	}
	{
		json_t *c = json_pack("{s:o, s:b}", "caller", str(set.caller), "dialer", set.dialer != NULL);
		char *t = json_dumps(c, JSON_COMPACT);

		puts(t);
		free(t);
		json_decref(c);
	}
	for (size_t i = 0; i < set.n; i++) {
		const struct fleet_agent *a = &set.v[i];
		json_t *j = json_pack("{s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:o, s:i, s:b, s:b, s:b}", "name", str(a->name),
				      "url", str(a->url), "namespace", str(a->namespace_), "pod", str(a->pod),
				      "container", str(a->container), "workload", str(a->workload), "mode", str(a->mode),
				      "why_not", str(a->why_not), "port", a->port, "token", a->token != NULL, "token_ok",
				      a->token && want && strcmp(a->token, want) == 0, "dialer",
				      a->dialer != NULL && a->dialer == set.dialer);
		char *t = json_dumps(j, JSON_COMPACT | JSON_SORT_KEYS);

		puts(t);
		free(t);
		json_decref(j);
	}
	fleet_set_free(&set);
	return 0;
}
