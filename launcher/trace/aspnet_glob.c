/*
 * aspnet_glob.c - the ASP.NET triggers' IncludePaths and ExcludePaths
 * (aspnet_req.h's aspnet_glob_*).
 *
 * dotnet-monitor's GlobMatcher turns each pattern into a regular expression
 * ("**" "/" into ([^/]*)/)*, "*" into [^/]*, the rest escaped, anchored,
 * case-insensitive, culture-invariant) and lets .NET's regex engine run it,
 * under a 2 s timeout. Both wildcards are regular, so here a pattern is a
 * list of tokens run as an automaton over the path, every state at once:
 * time is the path's length times the pattern's, whatever the pattern.
 */
#include "aspnet_req.h"

#include <stdlib.h>
#include <string.h>

#include "mem.h"

#define TOK_STAR 0xFFFFFFFEu     /* [^/]* */
#define TOK_GLOBSTAR 0xFFFFFFFFu /* ([^/]*)/)*: empty, or anything ending in '/' */
#define INVALID_BYTE 0x110000u   /* + the byte: a byte that is not UTF-8, equal only to itself */

struct pattern {
	uint32_t *tok; /* code points folded, and the two wildcards */
	size_t n;
};

struct aspnet_glob {
	struct pattern *inc, *exc;
	size_t n_inc, n_exc;
};

/*
 * Case-insensitive comparison, as .NET's regex does it culture-invariantly,
 * for the scripts a URL path is likely to hold: ASCII, Latin-1, Latin
 * Extended-A, basic Greek and Cyrillic, and the few letters Unicode folds
 * into those (long s, Kelvin and Angstrom signs, micro sign, final sigma).
 * Other letters compare as they are.
 */
static uint32_t fold(uint32_t c)
{
	if (c < 0x80)
		return c >= 'A' && c <= 'Z' ? c + 32 : c;
	if ((c >= 0xC0 && c <= 0xDE && c != 0xD7) || (c >= 0x391 && c <= 0x3AB && c != 0x3A2) ||
	    (c >= 0x410 && c <= 0x42F))
		return c + 32;
	if (c >= 0x400 && c <= 0x40F)
		return c + 80;
	if ((c >= 0x100 && c <= 0x12F) || (c >= 0x132 && c <= 0x137) || (c >= 0x14A && c <= 0x177))
		return c | 1; /* pairs: upper even, lower odd */
	if ((c >= 0x139 && c <= 0x148) || (c >= 0x179 && c <= 0x17E))
		return c + (c & 1); /* pairs: upper odd, lower even */
	switch (c) {
	case 0x178: return 0xFF;   /* Y with diaeresis */
	case 0x17F: return 's';    /* long s */
	case 0x212A: return 'k';   /* Kelvin sign */
	case 0x212B: return 0xE5;  /* Angstrom sign */
	case 0xB5: return 0x3BC;   /* micro sign */
	case 0x3C2: return 0x3C3;  /* final sigma */
	default: return c;
	}
}

/* The code point at *s (advanced past it); a byte that does not start valid UTF-8 is INVALID_BYTE + it. */
static uint32_t next_cp(const unsigned char **s)
{
	const unsigned char *p = *s;
	uint32_t c = p[0], min;
	int n;

	if (c < 0x80) {
		*s = p + 1;
		return c;
	}
	if (c >= 0xC2 && c <= 0xDF)
		n = 1, c &= 0x1F, min = 0x80;
	else if (c >= 0xE0 && c <= 0xEF)
		n = 2, c &= 0x0F, min = 0x800;
	else if (c >= 0xF0 && c <= 0xF4)
		n = 3, c &= 0x07, min = 0x10000;
	else
		n = 0, min = 0;
	for (int i = 1; i <= n; i++) {
		if ((p[i] & 0xC0) != 0x80) {
			n = 0;
			break;
		}
		c = (c << 6) | (p[i] & 0x3F);
	}
	if (n == 0 || c < min || c > 0x10FFFF || (c >= 0xD800 && c < 0xE000)) {
		*s = p + 1;
		return INVALID_BYTE + p[0];
	}
	*s = p + 1 + n;
	return c;
}

static void compile(const char *glob, struct pattern *out)
{
	const unsigned char *s = (const unsigned char *)glob;

	out->tok = mem_alloc((strlen(glob) + 1) * sizeof(*out->tok));
	out->n = 0;
	while (*s) {
		if (s[0] == '*' && s[1] == '*' && s[2] == '/') {
			out->tok[out->n++] = TOK_GLOBSTAR;
			s += 3;
		} else if (s[0] == '*') {
			out->tok[out->n++] = TOK_STAR;
			s++;
		} else {
			out->tok[out->n++] = fold(next_cp(&s));
		}
	}
}

/* After a step: a wildcard may match nothing, so the state before it is also the state after it. */
static void closure(const struct pattern *pt, uint8_t *at)
{
	for (size_t i = 0; i < pt->n; i++)
		if (at[i] && (pt->tok[i] == TOK_STAR || pt->tok[i] == TOK_GLOBSTAR))
			at[i + 1] = 1;
}

/*
 * Whether the pattern matches path[0..len) whole. The automaton's states:
 * at[i], the next token to match is i (at[n]: all matched); mid[i], inside a
 * globstar's segment (i a globstar), which must reach a '/' to end.
 */
static bool match_one(const struct pattern *pt, const char *path, size_t len)
{
	uint8_t small[4 * 64], *buf = pt->n < 63 ? small : mem_alloc(4 * (pt->n + 1));
	uint8_t *at = buf, *mid = buf + pt->n + 1, *nat = mid + pt->n + 1, *nmid = nat + pt->n + 1;
	const unsigned char *s = (const unsigned char *)path, *end = s + len;
	bool any = true, ok;

	memset(buf, 0, 4 * (pt->n + 1));
	at[0] = 1;
	closure(pt, at);
	while (s < end && any) {
		uint32_t c = fold(next_cp(&s));
		uint8_t *t;

		memset(nat, 0, pt->n + 1);
		memset(nmid, 0, pt->n + 1);
		any = false;
		for (size_t i = 0; i < pt->n; i++) {
			uint32_t k = pt->tok[i];

			if (at[i]) {
				if (k == TOK_STAR) {
					if (c != '/')
						nat[i] = 1;
				} else if (k == TOK_GLOBSTAR) {
					(c == '/' ? nat : nmid)[i] = 1;
				} else if (k == c) {
					nat[i + 1] = 1;
				}
			}
			if (mid[i])
				(c == '/' ? nat : nmid)[i] = 1;
		}
		closure(pt, nat);
		for (size_t i = 0; i <= pt->n && !any; i++)
			any = nat[i] || nmid[i];
		t = at, at = nat, nat = t;
		t = mid, mid = nmid, nmid = t;
	}
	ok = s == end && at[pt->n];
	if (buf != small)
		free(buf);
	return ok;
}

/* As .NET's "$" without Multiline: at the end, or before a final '\n'. */
static bool match_path(const struct pattern *pt, const char *path)
{
	size_t len = strlen(path);

	return match_one(pt, path, len) || (len > 0 && path[len - 1] == '\n' && match_one(pt, path, len - 1));
}

int aspnet_glob_new(char *const *include, size_t n_include, char *const *exclude, size_t n_exclude,
		    struct aspnet_glob **out, struct err_msg *em)
{
	struct aspnet_glob *g;

	for (size_t i = 0; i < n_include + n_exclude; i++) {
		const char *s = i < n_include ? include[i] : exclude[i - n_include];

		if (strstr(s, "***"))
			return err_set(em, DP_EINVAL, "%s '%.100s': only * or **/ wildcard characters are allowed",
				       i < n_include ? "IncludePaths" : "ExcludePaths", s);
	}
	g = mem_zalloc(sizeof(*g));
	g->inc = mem_zalloc((n_include ? n_include : 1) * sizeof(*g->inc));
	g->exc = mem_zalloc((n_exclude ? n_exclude : 1) * sizeof(*g->exc));
	for (; g->n_inc < n_include; g->n_inc++)
		compile(include[g->n_inc], &g->inc[g->n_inc]);
	for (; g->n_exc < n_exclude; g->n_exc++)
		compile(exclude[g->n_exc], &g->exc[g->n_exc]);
	*out = g;
	return 0;
}

bool aspnet_glob_match(const struct aspnet_glob *g, const char *path)
{
	for (size_t i = 0; i < g->n_exc; i++)
		if (match_path(&g->exc[i], path))
			return false;
	if (g->n_inc == 0)
		return true;
	for (size_t i = 0; i < g->n_inc; i++)
		if (match_path(&g->inc[i], path))
			return true;
	return false;
}

void aspnet_glob_free(struct aspnet_glob *g)
{
	if (g == NULL)
		return;
	for (size_t i = 0; i < g->n_inc; i++)
		free(g->inc[i].tok);
	for (size_t i = 0; i < g->n_exc; i++)
		free(g->exc[i].tok);
	free(g->inc);
	free(g->exc);
	free(g);
}
