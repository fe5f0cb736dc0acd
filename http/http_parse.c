/*
 * http_parse.c - the HTTP/1.x request head parser (http_parse.h).
 *
 * One pass over the head, writing NULs over the separators so that every
 * string the request holds points into the caller's buffer. Each byte is
 * checked against the grammar before it is kept; nothing is read past n.
 */
#include "http_parse.h"

#include <string.h>
#include <strings.h>

#define MAX_TARGET 8192

size_t http_head_length(const char *buf, size_t len)
{
	for (size_t i = 0; i + 1 < len; i++) {
		if (buf[i] != '\n')
			continue;
		if (buf[i + 1] == '\n')
			return i + 2;
		if (buf[i + 1] == '\r' && i + 2 < len && buf[i + 2] == '\n')
			return i + 3;
	}
	return 0;
}

/* RFC 9110 tchar. */
static bool is_tchar(unsigned char c)
{
	return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
	       (c != 0 && strchr("!#$%&'*+-.^_`|~", c) != NULL);
}

static int hexval(unsigned char c)
{
	if (c >= '0' && c <= '9')
		return c - '0';
	if (c >= 'a' && c <= 'f')
		return c - 'a' + 10;
	if (c >= 'A' && c <= 'F')
		return c - 'A' + 10;
	return -1;
}

/* Percent-decode s in place ('+' as a space when plus). -1 on a bad escape or an encoded NUL. */
static int decode(char *s, bool plus)
{
	char *w = s;

	for (const char *r = s; *r; r++) {
		if (*r == '%') {
			int h = hexval((unsigned char)r[1]), l = h < 0 ? -1 : hexval((unsigned char)r[2]);

			if (h < 0 || l < 0 || (h == 0 && l == 0))
				return -1;
			*w++ = (char)(h * 16 + l);
			r += 2;
		} else {
			*w++ = plus && *r == '+' ? ' ' : *r;
		}
	}
	*w = '\0';
	return 0;
}

/* Split the query (NUL-terminated, in place) into decoded parameters. */
static int parse_query(char *q, struct http_request *out)
{
	while (*q) {
		char *amp = strchr(q, '&'), *eq;

		if (amp)
			*amp = '\0';
		if (*q) {
			if (out->n_params == HTTP_MAX_PARAMS)
				return 431;
			eq = strchr(q, '=');
			if (eq)
				*eq = '\0';
			if (decode(q, true) != 0 || (eq && decode(eq + 1, true) != 0))
				return 400;
			out->params[out->n_params].key = q;
			out->params[out->n_params].value = eq ? eq + 1 : "";
			out->n_params++;
		}
		if (amp == NULL)
			break;
		q = amp + 1;
	}
	return 0;
}

/* Cut the line that starts at p (ends at "\r\n" or "\n" before end); *next is after it. NULL when none. */
static char *line(char *p, char *end, char **next)
{
	char *nl = memchr(p, '\n', (size_t)(end - p));

	if (nl == NULL)
		return NULL;
	*next = nl + 1;
	if (nl > p && nl[-1] == '\r')
		nl--;
	*nl = '\0';
	return p;
}

static int request_line(char *l, struct http_request *out)
{
	char *sp1 = strchr(l, ' '), *sp2, *target, *q;

	if (sp1 == NULL || sp1 == l)
		return 400;
	*sp1 = '\0';
	for (const char *c = l; *c; c++)
		if (!is_tchar((unsigned char)*c))
			return 400;
	target = sp1 + 1;
	sp2 = strchr(target, ' ');
	if (sp2 == NULL)
		return 400;
	*sp2 = '\0';
	if ((size_t)(sp2 - target) > MAX_TARGET)
		return 414;
	if (target[0] != '/')
		return 400;
	for (const unsigned char *c = (const unsigned char *)target; *c; c++)
		if (*c <= 0x20 || *c == 0x7f)
			return 400;
	if (strncmp(sp2 + 1, "HTTP/1.", 7) != 0 || strlen(sp2 + 1) != 8)
		return strncmp(sp2 + 1, "HTTP/", 5) == 0 ? 505 : 400;
	if (sp2[8] != '0' && sp2[8] != '1')
		return 505;
	out->minor = sp2[8] - '0';
	out->method = l;
	if ((q = strchr(target, '?')) != NULL) {
		int rc;

		*q = '\0';
		if ((rc = parse_query(q + 1, out)) != 0)
			return rc;
	}
	if (decode(target, false) != 0)
		return 400;
	out->path = target;
	return 0;
}

static int header_line(char *l, struct http_request *out)
{
	char *colon = strchr(l, ':'), *v, *e;

	if (colon == NULL || colon == l)
		return 400; /* also a line that starts with a space: obsolete folding */
	*colon = '\0';
	for (const char *c = l; *c; c++)
		if (!is_tchar((unsigned char)*c))
			return 400;
	v = colon + 1;
	while (*v == ' ' || *v == '\t')
		v++;
	for (const unsigned char *c = (const unsigned char *)v; *c; c++)
		if ((*c < 0x20 && *c != '\t') || *c == 0x7f)
			return 400;
	e = v + strlen(v);
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	if (out->n_headers == HTTP_MAX_HEADERS)
		return 431;
	out->headers[out->n_headers].name = l;
	out->headers[out->n_headers].value = v;
	out->n_headers++;
	return 0;
}

int http_parse_head(char *buf, size_t n, struct http_request *out)
{
	char *end = buf + n, *p = buf, *next, *l;
	int rc;

	memset(out, 0, sizeof(*out));
	if (memchr(buf, '\0', n) != NULL)
		return 400;
	while (p < end && (*p == '\r' || *p == '\n'))
		p++; /* RFC 9112 2.2: ignore empty lines before the request line */
	if ((l = line(p, end, &next)) == NULL)
		return 400;
	if (strchr(l, '\r'))
		return 400;
	if ((rc = request_line(l, out)) != 0)
		return rc;
	for (p = next; p < end; p = next) {
		if ((l = line(p, end, &next)) == NULL)
			return 400;
		if (*l == '\0')
			return 0; /* the blank line */
		if (strchr(l, '\r'))
			return 400;
		if ((rc = header_line(l, out)) != 0)
			return rc;
		if (strcasecmp(out->headers[out->n_headers - 1].name, "Host") == 0 &&
		    http_header(out, "Host") != out->headers[out->n_headers - 1].value)
			return 400; /* RFC 9112 3.2: a request with more than one Host is answered 400 */
	}
	return 400; /* no blank line within n */
}

const char *http_header(const struct http_request *r, const char *name)
{
	for (size_t i = 0; i < r->n_headers; i++)
		if (strcasecmp(r->headers[i].name, name) == 0)
			return r->headers[i].value;
	return NULL;
}

const char *http_param(const struct http_request *r, const char *key)
{
	for (size_t i = 0; i < r->n_params; i++)
		if (strcmp(r->params[i].key, key) == 0)
			return r->params[i].value;
	return NULL;
}
