/*
 * fleet.c - the set of agents a discovery found (fleet.h): growing it,
 * ordering it, and releasing it with every string it owns.
 */
#include "fleet.h"

#include <stdlib.h>
#include <strings.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

#include <jansson.h>

struct fleet_agent *fleet_set_add(struct fleet_set *s)
{
	struct fleet_agent *a;

	if (s->n == s->cap) {
		s->cap = s->cap ? 2 * s->cap : 16;
		s->v = mem_realloc(s->v, s->cap * sizeof(*s->v));
	}
	a = &s->v[s->n++];
	memset(a, 0, sizeof(*a));
	a->port = FLEET_AGENT_PORT;
	return a;
}

static void agent_free(struct fleet_agent *a)
{
	char **strs[] = { &a->name, &a->url, &a->workload, &a->namespace_, &a->pod, &a->container,
			  &a->cluster, &a->task, &a->service, &a->mode, &a->why_not, &a->tls_name };

	if (a->token) {
		mem_wipe(a->token, strlen(a->token));
		free(a->token);
	}
	for (size_t i = 0; i < sizeof(strs) / sizeof(strs[0]); i++)
		free(*strs[i]);
}

void fleet_set_free(struct fleet_set *s)
{
	for (size_t i = 0; i < s->n; i++)
		agent_free(&s->v[i]);
	free(s->v);
	if (s->dialer && s->dialer->free)
		s->dialer->free(s->dialer);
	free(s->caller);
	memset(s, 0, sizeof(*s));
}

static int by_workload_name(const void *x, const void *y)
{
	const struct fleet_agent *a = x, *b = y;
	int c = strcmp(a->workload ? a->workload : a->name, b->workload ? b->workload : b->name);

	return c ? c : strcmp(a->name, b->name);
}

void fleet_set_sort(struct fleet_set *s)
{
	if (s->n > 1)
		qsort(s->v, s->n, sizeof(*s->v), by_workload_name);
}

char *fleet_pct_escape(const char *s)
{
	struct buf b;

	buf_init(&b, 0);
	buf_puts(&b, "");
	buf_pct_encode(&b, s, strlen(s), false);
	return buf_steal(&b, NULL);
}

static void set_str(json_t *o, const char *k, const char *v)
{
	if (v)
		json_object_set_new(o, k, json_string(v));
}

void fleet_agent_describe(json_t *o, const struct fleet_agent *a)
{
	set_str(o, "namespace", a->namespace_);
	set_str(o, "pod", a->pod);
	set_str(o, "container", a->container);
	set_str(o, "cluster", a->cluster);
	set_str(o, "task", a->task);
	set_str(o, "service", a->service);
	set_str(o, "workload", a->workload);
	set_str(o, "url", a->dialer ? NULL : a->url);
}

const char *fleet_agent_urls(const json_t *args, const json_t *env)
{
	size_t i;
	json_t *e;

	for (i = 0; i + 1 < json_array_size(args); i++) {
		const char *f = json_string_value(json_array_get(args, i));

		if (f && strcmp(f, "--urls") == 0)
			return json_string_value(json_array_get(args, i + 1));
	}
	json_array_foreach(env, i, e) {
		const char *n = json_string_value(json_object_get(e, "name"));

		if (n && strcmp(n, "DOTNETMONITOR_Urls") == 0)
			return json_string_value(json_object_get(e, "value"));
	}
	return NULL;
}

bool fleet_dns_name_ok(const char *s)
{
	size_t n = s ? strlen(s) : 0;

	if (n == 0 || n > 253 || s[0] == '.' || s[0] == '-' || s[n - 1] == '.' || s[n - 1] == '-')
		return false;
	const char *last = strrchr(s, '.') ? strrchr(s, '.') + 1 : s;
	bool digits = true;

	for (size_t i = 0; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z') || (s[i] >= '0' && s[i] <= '9') ||
		      s[i] == '-' || (s[i] == '.' && s[i + 1] != '.')))
			return false;
	for (const char *p = last; *p; p++)
		digits = digits && *p >= '0' && *p <= '9';
	/* a last label of digits, or 0x..., is an address to a resolver (2130706433, 0x7f000001, 10.0.0.1) */
	return !digits && strncasecmp(last, "0x", 2) != 0;
}

bool fleet_urls_https(const char *urls)
{
	return urls && strncasecmp(urls, "https://", 8) == 0;
}

void fleet_safe_text(char *s)
{
	for (unsigned char *p = (unsigned char *)s; p && *p; p++) {
		if (*p < 0x20 || *p == 0x7f) {
			*p = '?';
		} else if (*p == 0xc2 && p[1] >= 0x80 && p[1] <= 0x9f) {
			p[0] = '?';
			p[1] = '?';
			p++;
		}
	}
}

void fleet_set_safe(struct fleet_set *s)
{
	for (size_t i = 0; i < s->n; i++) {
		struct fleet_agent *a = &s->v[i];
		char *strs[] = { a->name, a->workload, a->namespace_, a->pod, a->container, a->cluster, a->task,
				 a->service, a->mode, a->why_not };

		for (size_t k = 0; k < sizeof(strs) / sizeof(strs[0]); k++)
			fleet_safe_text(strs[k]);
	}
	fleet_safe_text(s->caller);
}
