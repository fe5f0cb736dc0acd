/*
 * opts.c - the injection options: one table of names, parsed the same way
 * from command-line flags, Kubernetes annotations (diagport.dev/NAME), ECS
 * tags and CloudFormation Metadata.diagport. See inj.h for the layering.
 */
#include "inj_int.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mem.h"

void inj_opts_init(struct inj_opts *o)
{
	memset(o, 0, sizeof(*o));
	o->inject = -1;
	o->mode = INJ_NOSUSPEND;
	o->ptrace = true;
	o->port = INJ_DEFAULT_PORT;
	o->sidecar = INJ_SIDECAR_NATIVE;
	o->flavour = INJ_FLAVOUR_DIAGPORT;
}

static char *dup_or_null(const char *s)
{
	return s ? mem_strdup(s) : NULL;
}

void inj_opts_copy(struct inj_opts *dst, const struct inj_opts *src)
{
	*dst = *src;
	dst->containers = dup_or_null(src->containers);
	dst->image = dup_or_null(src->image);
	dst->cpu_request = dup_or_null(src->cpu_request);
	dst->mem_request = dup_or_null(src->mem_request);
	dst->mem_limit = dup_or_null(src->mem_limit);
	dst->dumps_limit = dup_or_null(src->dumps_limit);
	dst->auth_secret = dup_or_null(src->auth_secret);
}

void inj_opts_free(struct inj_opts *o)
{
	if (o == NULL)
		return;
	mem_free(o->containers);
	mem_free(o->image);
	mem_free(o->cpu_request);
	mem_free(o->mem_request);
	mem_free(o->mem_limit);
	mem_free(o->dumps_limit);
	mem_free(o->auth_secret);
	inj_opts_init(o);
}

static void replace(char **slot, const char *v)
{
	mem_free(*slot);
	*slot = mem_strdup(v);
}

static int parse_bool(const char *v, bool *out)
{
	if (strcmp(v, "true") == 0 || strcmp(v, "True") == 0 || strcmp(v, "TRUE") == 0) {
		*out = true;
		return 0;
	}
	if (strcmp(v, "false") == 0 || strcmp(v, "False") == 0 || strcmp(v, "FALSE") == 0) {
		*out = false;
		return 0;
	}
	return DP_EINVAL;
}

bool inj_name_ok(const char *s, size_t len)
{
	if (len == 0 || len > 255)
		return false;
	for (size_t i = 0; i < len; i++)
		if (!isalnum((unsigned char)s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
			return false;
	return true;
}

static int set_containers(struct inj_opts *o, const char *v, struct err_msg *em)
{
	const char *p = v;

	if (*v == '\0')
		return err_set(em, DP_EINVAL, "option containers: empty list");
	while (*p) {
		size_t n = strcspn(p, ",");

		if (!inj_name_ok(p, n))
			return err_set(em, DP_EINVAL,
				       "option containers: '%.*s' is not a container name (expected a comma-separated list of names)",
				       (int)n, p);
		p += n;
		if (*p == ',')
			p++;
	}
	replace(&o->containers, v);
	return 0;
}

static int set_resources(struct inj_opts *o, const char *v, struct err_msg *em)
{
	char *copy = mem_strdup(v), *save = NULL;
	int rc = 0;

	for (char *tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');
		long long q;

		if (eq == NULL) {
			rc = err_set(em, DP_EINVAL, "option resources: '%s' is not KEY=QUANTITY (keys: cpu, memory, memory-limit)", tok);
			break;
		}
		*eq = '\0';
		bool cpu = strcmp(tok, "cpu") == 0;
		if (inj_quantity(eq + 1, cpu, &q) != 0 || q <= 0) {
			rc = err_set(em, DP_EINVAL, "option resources: %s=%s is not a Kubernetes quantity (e.g. cpu=10m, memory=16Mi)", tok, eq + 1);
			break;
		}
		if (cpu)
			replace(&o->cpu_request, eq + 1);
		else if (strcmp(tok, "memory") == 0)
			replace(&o->mem_request, eq + 1);
		else if (strcmp(tok, "memory-limit") == 0)
			replace(&o->mem_limit, eq + 1);
		else {
			rc = err_set(em, DP_EINVAL, "option resources: unknown key '%s' (keys: cpu, memory, memory-limit)", tok);
			break;
		}
	}
	mem_free(copy);
	return rc;
}

int inj_opts_set(struct inj_opts *o, const char *name, const char *v, struct err_msg *em)
{
	bool b = false;

	if (strcmp(name, "inject") == 0) {
		if (parse_bool(v, &b) != 0 && strcmp(v, "enabled") != 0 && strcmp(v, "disabled") != 0)
			return err_set(em, DP_EINVAL, "option inject: '%s' is not true or false", v);
		o->inject = strcmp(v, "enabled") == 0 ? 1 : strcmp(v, "disabled") == 0 ? 0 : b;
	} else if (strcmp(name, "mode") == 0) {
		if (strcmp(v, "suspend") == 0)
			o->mode = INJ_SUSPEND;
		else if (strcmp(v, "nosuspend") == 0)
			o->mode = INJ_NOSUSPEND;
		else
			return err_set(em, DP_EINVAL, "option mode: '%s' is not suspend or nosuspend", v);
	} else if (strcmp(name, "containers") == 0) {
		return set_containers(o, v, em);
	} else if (strcmp(name, "ptrace") == 0) {
		if (parse_bool(v, &b) != 0)
			return err_set(em, DP_EINVAL, "option ptrace: '%s' is not true or false", v);
		o->ptrace = b;
	} else if (strcmp(name, "image") == 0) {
		if (*v == '\0' || strpbrk(v, " \t\r\n\"'") != NULL)
			return err_set(em, DP_EINVAL, "option image: '%s' is not an image reference", v);
		replace(&o->image, v);
	} else if (strcmp(name, "port") == 0) {
		char *end;
		long p = strtol(v, &end, 10);

		if (*v == '\0' || *end != '\0' || p < 1 || p > 65535)
			return err_set(em, DP_EINVAL, "option port: '%s' is not a port number (1-65535)", v);
		o->port = (int)p;
	} else if (strcmp(name, "resources") == 0) {
		return set_resources(o, v, em);
	} else if (strcmp(name, "dumps-size-limit") == 0) {
		long long q;

		if (inj_quantity(v, false, &q) != 0 || q <= 0)
			return err_set(em, DP_EINVAL, "option dumps-size-limit: '%s' is not a Kubernetes quantity (e.g. 2Gi)", v);
		replace(&o->dumps_limit, v);
	} else if (strcmp(name, "sidecar") == 0) {
		if (strcmp(v, "native") == 0)
			o->sidecar = INJ_SIDECAR_NATIVE;
		else if (strcmp(v, "container") == 0)
			o->sidecar = INJ_SIDECAR_CONTAINER;
		else
			return err_set(em, DP_EINVAL, "option sidecar: '%s' is not native or container", v);
	} else if (strcmp(name, "flavour") == 0 || strcmp(name, "flavor") == 0) {
		if (strcmp(v, "diagport") == 0)
			o->flavour = INJ_FLAVOUR_DIAGPORT;
		else if (strcmp(v, "dotnet-monitor") == 0)
			o->flavour = INJ_FLAVOUR_DOTNET_MONITOR;
		else
			return err_set(em, DP_EINVAL, "option flavour: '%s' is not diagport or dotnet-monitor", v);
	} else if (strcmp(name, "auth-secret") == 0) {
		if (*v == '\0' || strpbrk(v, " \t\r\n\"'") != NULL)
			return err_set(em, DP_EINVAL, "option auth-secret: '%s' is not a Secret name or ARN", v);
		replace(&o->auth_secret, v);
	} else if (strcmp(name, "auth") == 0) {
		if (strcmp(v, "none") == 0)
			o->no_auth = true;
		else if (strcmp(v, "required") == 0)
			o->no_auth = false;
		else
			return err_set(em, DP_EINVAL, "option auth: '%s' is not none or required", v);
	} else {
		return err_set(em, DP_ENOTFOUND, "unknown option '%s' (options: %s)", name, inj_opts_names());
	}
	return 0;
}

const char *inj_opts_names(void)
{
	return "inject, mode, containers, ptrace, image, port, resources, dumps-size-limit, sidecar, flavour, auth-secret, auth";
}

int inj_opts_check(const struct inj_ctx *c, const struct inj_opts *o, const char *what, struct err_msg *em)
{
	if (o->auth_secret && o->no_auth)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"auth-secret and auth=none contradict each other; give one");
	if (o->flavour == INJ_FLAVOUR_DOTNET_MONITOR && !o->auth_secret && !o->no_auth)
		return inj_fail(c, em, NULL, DP_EREFUSED, what,
				"flavour dotnet-monitor serves the pod network and needs authentication: "
				"name a Secret with its API key (auth-secret, keys Subject and PublicKey) "
				"or turn authentication off explicitly (auth=none / --no-auth)");
	return 0;
}

/*
 * Layer the options found in `map` over base. With `prefixed`, keys are
 * annotations ("diagport.dev/mode") and other keys are ignored; else they
 * are bare option names (CloudFormation Metadata.diagport), where "status"
 * is ours and skipped.
 */
int inj_opts_from_map(const struct inj_ctx *c, const struct inj_opts *base, const struct doc_node *map,
		      bool prefixed, const char *what, struct inj_opts *o, struct err_msg *em)
{
	size_t plen = strlen(INJ_PREFIX);

	inj_opts_copy(o, base);
	if (!doc_is(map, DOC_MAP))
		return 0;
	for (size_t i = 0; i < map->n; i++) {
		const char *k = map->keys[i]->text;
		const char *v = inj_scalar_text(map->vals[i]);
		int rc;

		if (prefixed) {
			if (strncmp(k, INJ_PREFIX, plen) != 0)
				continue;
			k += plen;
		}
		if (strcmp(k, "status") == 0)
			continue;
		if (v == NULL) {
			inj_opts_free(o);
			return inj_fail(c, em, map->vals[i], DP_EREFUSED, what, "%s%s must be a string", prefixed ? INJ_PREFIX : "", k);
		}
		rc = inj_opts_set(o, k, v, em);
		if (rc != 0) {
			struct err_msg inner = *em;

			inj_opts_free(o);
			return inj_fail(c, em, map->vals[i], DP_EREFUSED, what, "%s%s: %s", prefixed ? INJ_PREFIX : "", k, inner.text);
		}
	}
	return 0;
}

/* Layer options from a tag list [{KKEY: "diagport.dev/mode", VKEY: "suspend"}, ...] onto o. */
int inj_opts_from_tags(const struct inj_ctx *c, struct inj_opts *o, const struct doc_node *tags,
		       const char *kkey, const char *vkey, const char *what, struct err_msg *em)
{
	size_t plen = strlen(INJ_PREFIX);

	if (!doc_is(tags, DOC_SEQ))
		return 0;
	for (size_t i = 0; i < tags->n; i++) {
		const char *k = doc_get_str(tags->vals[i], kkey);
		const char *v = inj_scalar_text(doc_get(tags->vals[i], vkey));

		if (k == NULL || strncmp(k, INJ_PREFIX, plen) != 0 || strcmp(k + plen, "status") == 0)
			continue;
		if (v == NULL || inj_opts_set(o, k + plen, v, em) != 0) {
			struct err_msg inner = *em;

			if (v == NULL)
				snprintf(inner.text, sizeof(inner.text), "the tag has no string value");
			return inj_fail(c, em, tags->vals[i], DP_EREFUSED, what, "tag %s: %s", k, inner.text);
		}
	}
	return 0;
}

/*
 * Kubernetes quantities, the subset people write for containers: a decimal
 * number with an optional suffix (m, k, M, G, T, Ki, Mi, Gi, Ti, or an
 * exponent). Memory comes back in bytes, cpu in millicores.
 */
int inj_quantity(const char *s, bool cpu, long long *out)
{
	char *end;
	double v;
	double mul = 1;

	if (s == NULL || *s == '\0' || !(isdigit((unsigned char)*s) || *s == '.'))
		return DP_EINVAL;
	v = strtod(s, &end);
	if (end == s)
		return DP_EINVAL;
	if (*end == '\0')
		mul = 1;
	else if (strcmp(end, "m") == 0)
		mul = 1e-3;
	else if (strcmp(end, "k") == 0)
		mul = 1e3;
	else if (strcmp(end, "M") == 0)
		mul = 1e6;
	else if (strcmp(end, "G") == 0)
		mul = 1e9;
	else if (strcmp(end, "T") == 0)
		mul = 1e12;
	else if (strcmp(end, "Ki") == 0)
		mul = 1024.0;
	else if (strcmp(end, "Mi") == 0)
		mul = 1024.0 * 1024;
	else if (strcmp(end, "Gi") == 0)
		mul = 1024.0 * 1024 * 1024;
	else if (strcmp(end, "Ti") == 0)
		mul = 1024.0 * 1024 * 1024 * 1024;
	else
		return DP_EINVAL;
	v *= mul;
	if (cpu)
		v *= 1000;
	if (v < 0 || v > 9e18)
		return DP_EINVAL;
	*out = (long long)(v + 0.999999);
	return 0;
}
