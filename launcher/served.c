/*
 * served.c - the capture kinds an agent serves (served.h): the names of the
 * contract and the list form of --captures. Which route is which kind is
 * api.c's table; which collection rule action is which kind is cli.c's.
 */
#include "served.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const char *const names[SERVED_KINDS] = {
	[SERVED_DUMP] = "dump",     [SERVED_GCDUMP] = "gcdump",   [SERVED_TRACE] = "trace",
	[SERVED_CPUPROFILE] = "cpuprofile", [SERVED_STACKS] = "stacks", [SERVED_METRICS] = "metrics",
	[SERVED_LOGS] = "logs",     [SERVED_ENV] = "env",      [SERVED_EXCEPTIONS] = "exceptions",
};

const char *served_name(enum served_kind k)
{
	return k < SERVED_KINDS ? names[k] : "";
}

int served_parse(const char *list, unsigned *mask, const char *where, struct err_msg *em)
{
	const char *p = list;
	unsigned m = 0;

	for (;;) {
		const char *e = strchr(p, ',');
		size_t n = e ? (size_t)(e - p) : strlen(p);
		unsigned k;

		while (n && (*p == ' ' || *p == '\t')) {
			p++;
			n--;
		}
		while (n && (p[n - 1] == ' ' || p[n - 1] == '\t'))
			n--;
		if (n == 3 && strncasecmp(p, "all", 3) == 0) {
			m = SERVED_ALL;
		} else {
			for (k = 0; k < SERVED_KINDS; k++)
				if (strlen(names[k]) == n && strncasecmp(p, names[k], n) == 0)
					break;
			if (k == SERVED_KINDS)
				return err_set(em, DP_EINVAL, "%s: %s%.*s%s is not a capture kind; captures takes "
					       "dump, gcdump, trace, cpuprofile, stacks, metrics, logs, env, exceptions (comma-separated), "
					       "or all", where, n ? "'" : "", (int)(n > 64 ? 64 : n), p,
					       n ? "'" : "an empty name");
			m |= 1u << k;
		}
		if (e == NULL)
			break;
		p = e + 1;
	}
	*mask = m;
	return 0;
}

void served_text(unsigned mask, char *out, size_t n)
{
	size_t o = 0;

	if (n == 0)
		return;
	out[0] = '\0';
	if ((mask & SERVED_ALL) == SERVED_ALL) {
		snprintf(out, n, "all");
		return;
	}
	for (unsigned k = 0; k < SERVED_KINDS; k++)
		if (mask & (1u << k)) {
			int w = snprintf(out + o, n - o, "%s%s", o ? "," : "", names[k]);

			if (w < 0 || (size_t)w >= n - o)
				return;
			o += (size_t)w;
		}
	if (o == 0)
		snprintf(out, n, "none");
}
