/*
 * settings_get.c - the typed getters of the settings tree (settings.h): a
 * node's text, a copy, a number in range, a boolean, a .NET TimeSpan, a list
 * (a JSON array bound as KEY:0, KEY:1, ...) and a list of strings. Each marks
 * what it reads, so that settings.c's check refuses what nobody did, and
 * refuses a bad value by its full path and source.
 */
#include "settings.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

#define DAY_MS (24LL * 3600 * 1000)

int settings_text(struct settings_node *n, const char *name, bool required, const char **out, struct err_msg *em)
{
	struct settings_node *c = settings_get(n, name);

	*out = NULL;
	if (c == NULL || (c->value == NULL && c->n == 0)) {
		if (required && n)
			return settings_refuse_missing(n, name, em, "");
		if (required)
			return err_set(em, DP_EINVAL, "settings: %s: is required", name);
		return 0;
	}
	if (c->n)
		return settings_refuse(DP_EINVAL, c, em, "takes a value, not settings under it");
	*out = c->value;
	return 0;
}

int settings_str(struct settings_node *n, const char *name, bool required, char **out, struct err_msg *em)
{
	const char *t;
	int rc = settings_text(n, name, required, &t, em);

	if (rc == 0 && t) {
		if (*t == '\0' && required)
			return settings_refuse(DP_EINVAL, settings_find(n, name), em, "must not be empty");
		free(*out);
		*out = mem_strdup(t);
	}
	return rc;
}

int settings_double(struct settings_node *n, const char *name, bool *has, double *out, double lo, double hi,
		    struct err_msg *em)
{
	const char *t;
	char *end;
	double v;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	errno = 0;
	v = strtod(t, &end);
	if (end == t || *end || errno || !isfinite(v) || isspace((unsigned char)*t))
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is not a number", t);
	if (v < lo || v > hi)
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "%g is outside %g..%g", v, lo, hi);
	*has = true;
	*out = v;
	return 0;
}

int settings_uint(struct settings_node *n, const char *name, bool *has, unsigned *out, unsigned lo, unsigned hi,
		  struct err_msg *em)
{
	const char *t;
	char *end;
	unsigned long v;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	errno = 0;
	v = strtoul(t, &end, 10);
	if (!isdigit((unsigned char)*t) || *end || errno || v < lo || v > hi)
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is not a whole number in %u..%u",
				       t, lo, hi);
	*has = true;
	*out = (unsigned)v;
	return 0;
}

int settings_bool(struct settings_node *n, const char *name, bool *out, struct err_msg *em)
{
	const char *t;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	if (strcasecmp(t, "true") == 0)
		*out = true;
	else if (strcasecmp(t, "false") == 0)
		*out = false;
	else
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is not true or false", t);
	return 0;
}

long long settings_parse_timespan(const char *s)
{
	long long d = 0, h, m, sec = 0, frac = 0, fdiv = 1;
	const char *p = s;
	char *end;

	if (!isdigit((unsigned char)*p))
		return -1;
	errno = 0;
	h = strtoll(p, &end, 10);
	if (errno || end == p)
		return -1;
	if (*end == '\0') /* "2": days, as .NET reads a lone number */
		return h <= 3650 ? h * DAY_MS : -1;
	if (*end == '.') { /* d.hh:mm... */
		d = h;
		p = end + 1;
		h = strtoll(p, &end, 10);
		if (end == p || !isdigit((unsigned char)*p))
			return -1;
	}
	if (*end != ':')
		return -1;
	p = end + 1;
	m = strtoll(p, &end, 10);
	if (end == p || !isdigit((unsigned char)*p))
		return -1;
	if (*end == ':') {
		p = end + 1;
		sec = strtoll(p, &end, 10);
		if (end == p || !isdigit((unsigned char)*p))
			return -1;
		if (*end == '.') {
			p = end + 1;
			if (!isdigit((unsigned char)*p))
				return -1;
			for (; isdigit((unsigned char)*p) && fdiv < 10000000; p++) {
				frac = frac * 10 + (*p - '0');
				fdiv *= 10;
			}
			end = (char *)p;
		}
	}
	if (*end || d > 3650 || h > 23 || m > 59 || sec > 59)
		return -1;
	return ((d * 24 + h) * 60 + m) * 60000 + sec * 1000 + frac * 1000 / fdiv;
}

void settings_timespan_text(char *out, size_t n, long long ms)
{
	long long s = ms / 1000, d = s / 86400;

	if (d)
		snprintf(out, n, "%lld.%02lld:%02lld:%02lld", d, s / 3600 % 24, s / 60 % 60, s % 60);
	else
		snprintf(out, n, "%02lld:%02lld:%02lld", s / 3600 % 24, s / 60 % 60, s % 60);
	if (ms % 1000) {
		size_t l = strlen(out);

		snprintf(out + l, n - l, ".%03lld0000", ms % 1000);
	}
}

int settings_timespan(struct settings_node *n, const char *name, bool *has, long long *out, long long lo,
		      long long hi, struct err_msg *em)
{
	const char *t;
	char a[32], b[32];
	long long v;
	int rc = settings_text(n, name, false, &t, em);

	if (rc != 0 || t == NULL)
		return rc;
	if ((v = settings_parse_timespan(t)) < 0)
		return settings_refuse(DP_EINVAL, settings_find(n, name), em,
				       "'%.64s' is not a TimeSpan ([d.]hh:mm:ss, e.g. 00:00:30)", t);
	if (v < lo || v > hi) {
		settings_timespan_text(a, sizeof(a), lo);
		settings_timespan_text(b, sizeof(b), hi);
		return settings_refuse(DP_EINVAL, settings_find(n, name), em, "'%.64s' is outside %s..%s", t, a, b);
	}
	*has = true;
	*out = v;
	return 0;
}

int settings_list(struct settings_node *n, const char *name, struct settings_node ***out, size_t *count_out,
		  struct err_msg *em)
{
	struct settings_node *c = settings_get(n, name), **items;
	size_t m;

	*out = NULL;
	*count_out = 0;
	if (c == NULL)
		return 0;
	if (c->value && c->n == 0) {
		if (*c->value == '\0') /* "Filters": "" - .NET binds an empty list */
			return 0;
		return settings_refuse(DP_EINVAL, c, em, "takes a list (%s:0, %s:1, ...), not one value", c->name,
				       c->name);
	}
	if ((m = c->n) > SETTINGS_MAX_LIST)
		return settings_refuse(DP_ETOOBIG, c, em, "more than %d items", SETTINGS_MAX_LIST);
	items = mem_zalloc((m ? m : 1) * sizeof(*items));
	for (size_t i = 0; i < m; i++) {
		char *end;
		unsigned long idx = strtoul(c->k[i]->name, &end, 10);

		if (!isdigit((unsigned char)c->k[i]->name[0]) || *end || idx >= m || items[idx]) {
			free(items);
			return settings_refuse(DP_EINVAL, c->k[i], em, "a list's items are numbered 0 to %zu", m - 1);
		}
		items[idx] = c->k[i];
		c->k[i]->used = true;
	}
	*out = items;
	*count_out = m;
	return 0;
}

int settings_strings(struct settings_node *n, const char *name, char ***out, size_t *count_out, struct err_msg *em)
{
	struct settings_node **items;
	size_t m;
	int rc = settings_list(n, name, &items, &m, em);

	if (rc != 0 || items == NULL)
		return rc;
	*out = mem_zalloc((m ? m : 1) * sizeof(**out));
	for (size_t i = 0; i < m && rc == 0; i++) {
		if (items[i]->value == NULL || items[i]->n)
			rc = settings_refuse(DP_EINVAL, items[i], em, "must be a text value");
		else
			(*out)[(*count_out)++] = mem_strdup(items[i]->value);
	}
	free(items);
	return rc;
}
