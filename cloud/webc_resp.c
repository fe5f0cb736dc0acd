/*
 * webc_resp.c - reading an HTTP/1.1 answer for webc (webc_int.h): the
 * status line and headers gathered under a cap, then the body as RFC 9112
 * 6.3 says it ends (none for HEAD, 1xx, 204 and 304; Transfer-Encoding
 * chunked; Content-Length; else the connection's close), into the caller's
 * capped buffer. Push-based and pure, so the same bytes in any pieces give
 * the same answer (tests/fuzz/fuzz_webc.c checks that), and a server cannot
 * make it hold more than the head cap, one chunk line and max_resp.
 */
#include "webc_int.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "mem.h"

enum { S_HEAD, S_BODY, S_CHUNK_SIZE, S_CHUNK_DATA, S_CHUNK_END, S_TRAILER, S_TO_CLOSE, S_DONE };

void webc_resp_free(struct webc_resp *r)
{
	if (r == NULL)
		return;
	buf_free(&r->body);
	for (size_t i = 0; i < r->n_headers; i++)
		mem_free(r->headers[i]);
	mem_free(r->headers);
	r->headers = NULL;
	r->n_headers = 0;
	r->status = 0;
}

const char *webc_resp_header(const struct webc_resp *r, const char *name)
{
	size_t n = strlen(name);

	for (size_t i = 0; i < r->n_headers; i++)
		if (strncasecmp(r->headers[i], name, n) == 0 && r->headers[i][n] == ':')
			return r->headers[i] + n + 1 + (r->headers[i][n + 1] == ' ');
	return NULL;
}

void webc_parse_init(struct webc_parse *p, bool head_request, size_t max_resp, const char *const *want,
		     struct webc_resp *resp)
{
	memset(p, 0, sizeof(*p));
	p->head_request = head_request;
	p->max_resp = max_resp ? max_resp : (size_t)1 << 20;
	p->want = want;
	p->resp = resp;
	p->state = S_HEAD;
	buf_init(&p->line, WEBC_HEAD_MAX);
	memset(resp, 0, sizeof(*resp));
	buf_init(&resp->body, p->max_resp);
}

void webc_parse_free(struct webc_parse *p)
{
	buf_free(&p->line);
}

static bool is_tchar(unsigned char c)
{
	return isalnum(c) || (c && strchr("!#$%&'*+-.^_`|~", c));
}

/* The next comma-separated element of a header value, trimmed; false at the end. */
static bool next_item(const char **s, const char **item, size_t *len)
{
	const char *p = *s, *e;

	while (*p == ' ' || *p == '\t' || *p == ',')
		p++;
	if (*p == '\0')
		return false;
	e = p;
	while (*e && *e != ',')
		e++;
	*s = e;
	while (e > p && (e[-1] == ' ' || e[-1] == '\t'))
		e--;
	*item = p;
	*len = (size_t)(e - p);
	return true;
}

static bool item_is(const char *item, size_t len, const char *word)
{
	return len == strlen(word) && strncasecmp(item, word, len) == 0;
}

/* What the head said about the body, gathered over its headers. */
struct framing_seen {
	bool has_length, has_te, te_chunked, http10, conn_close, conn_keep;
	uint64_t length;
};

static int content_length(const char *v, struct framing_seen *f, struct err_msg *em)
{
	const char *item;
	size_t len;

	while (next_item(&v, &item, &len)) {
		uint64_t n = 0;

		if (len == 0 || len > 19)
			return err_set(em, DP_EREMOTE, "the answer's Content-Length is not a number of bytes");
		for (size_t i = 0; i < len; i++) {
			if (!isdigit((unsigned char)item[i]))
				return err_set(em, DP_EREMOTE, "the answer's Content-Length is not a number of bytes");
			n = n * 10 + (uint64_t)(item[i] - '0');
		}
		if (f->has_length && n != f->length)
			return err_set(em, DP_EREMOTE, "the answer has two different Content-Length values");
		f->has_length = true;
		f->length = n;
	}
	return 0;
}

static void seen_header(const char *name, const char *v, struct framing_seen *f)
{
	const char *item;
	size_t len;

	if (strcasecmp(name, "transfer-encoding") == 0) {
		while (next_item(&v, &item, &len)) {
			f->has_te = true;
			f->te_chunked = item_is(item, len, "chunked"); /* the last coding decides */
		}
	} else if (strcasecmp(name, "connection") == 0) {
		while (next_item(&v, &item, &len)) {
			f->conn_close |= item_is(item, len, "close");
			f->conn_keep |= item_is(item, len, "keep-alive");
		}
	}
}

static void keep_header(struct webc_parse *p, const char *name, const char *value)
{
	struct webc_resp *r = p->resp;
	char *h;

	if (p->want == NULL)
		return;
	for (size_t i = 0; p->want[i]; i++) {
		if (strcasecmp(p->want[i], name) != 0)
			continue;
		h = mem_printf("%s: %s", name, value);
		for (char *c = h; *c != ':'; c++)
			*c = (char)tolower((unsigned char)*c);
		r->headers = mem_realloc(r->headers, (r->n_headers + 2) * sizeof(char *));
		r->headers[r->n_headers++] = h;
		r->headers[r->n_headers] = NULL;
		return;
	}
}

static int status_line(char *l, int *status, bool *http10, struct err_msg *em)
{
	if (strncmp(l, "HTTP/1.", 7) != 0 || !isdigit((unsigned char)l[7]) || l[8] != ' ')
		return err_set(em, DP_EREMOTE, "the answer is not HTTP/1.x (it begins \"%.12s\")", l);
	if (!isdigit((unsigned char)l[9]) || !isdigit((unsigned char)l[10]) || !isdigit((unsigned char)l[11]) ||
	    (l[12] != ' ' && l[12] != '\0') || l[9] < '1')
		return err_set(em, DP_EREMOTE, "the answer's status line has no valid status code");
	*status = (l[9] - '0') * 100 + (l[10] - '0') * 10 + (l[11] - '0');
	*http10 = l[7] == '0';
	return 0;
}

/* One header line, in place: "name: value" with the value trimmed; it is checked, kept if wanted, and seen. */
static int header_line(struct webc_parse *p, char *l, struct framing_seen *f, struct err_msg *em)
{
	char *c = strchr(l, ':'), *v, *e;

	if (c == NULL || c == l)
		return err_set(em, DP_EREMOTE, "the answer has a header line without a name");
	for (char *n = l; n < c; n++)
		if (!is_tchar((unsigned char)*n))
			return err_set(em, DP_EREMOTE, "the answer has a header whose name is not a token");
	*c = '\0';
	for (v = c + 1; *v == ' ' || *v == '\t'; v++)
		;
	for (e = v; *e; e++)
		if (((unsigned char)*e < 0x20 && *e != '\t') || *e == 0x7f)
			return err_set(em, DP_EREMOTE, "the answer's header %.64s has a control byte", l);
	while (e > v && (e[-1] == ' ' || e[-1] == '\t'))
		*--e = '\0';
	if (strcasecmp(l, "content-length") == 0 && content_length(v, f, em) != 0)
		return DP_EREMOTE;
	seen_header(l, v, f);
	keep_header(p, l, v);
	return 0;
}

/* The whole head is in p->line: parse it and choose how the body ends. 0, or DP_EREMOTE / DP_ETOOBIG. */
static int end_of_head(struct webc_parse *p, struct err_msg *em)
{
	struct framing_seen f = { 0 };
	char *s = p->line.data, *nl;
	int status = 0, n = 0, rc;

	for (bool first = true;; first = false) {
		nl = strchr(s, '\n');
		*nl = '\0';
		if (nl > s && nl[-1] == '\r')
			nl[-1] = '\0';
		if (*s == '\0')
			break;
		if (first)
			rc = status_line(s, &status, &f.http10, em);
		else if (*s == ' ' || *s == '\t')
			rc = err_set(em, DP_EREMOTE, "the answer has a folded header line (obsolete, refused)");
		else if (++n > WEBC_HEADERS_MAX)
			rc = err_set(em, DP_EREMOTE, "the answer has more than %d headers", WEBC_HEADERS_MAX);
		else
			rc = header_line(p, s, &f, em);
		if (rc != 0)
			return rc;
		s = nl + 1;
	}
	buf_reset(&p->line);
	if (status < 200) {
		if (status == 101)
			return err_set(em, DP_EREMOTE, "the answer switches protocols, which was not asked for");
		webc_resp_free(p->resp); /* an interim answer: its kept headers go, the final one follows */
		buf_init(&p->resp->body, p->max_resp);
		return 0;
	}
	p->resp->status = status;
	p->keep_alive = f.http10 ? f.conn_keep && !f.conn_close : !f.conn_close;
	if (p->head_request || status == 204 || status == 304) {
		p->framing = WEBC_NONE;
		p->state = S_DONE;
	} else if (f.has_te) {
		p->framing = f.te_chunked ? WEBC_CHUNKED : WEBC_TO_CLOSE;
		p->state = f.te_chunked ? S_CHUNK_SIZE : S_TO_CLOSE;
		p->keep_alive &= f.te_chunked && !f.has_length; /* both: a smuggling attempt, or a broken server */
	} else if (f.has_length) {
		if (f.length > p->max_resp)
			return err_set(em, DP_ETOOBIG, "the answer's body (%" PRIu64 " bytes) is over the cap of %zu",
				       f.length, p->max_resp);
		p->framing = WEBC_LENGTH;
		p->left = f.length;
		p->state = f.length ? S_BODY : S_DONE;
	} else {
		p->framing = WEBC_TO_CLOSE;
		p->state = S_TO_CLOSE;
		p->keep_alive = false;
	}
	return 0;
}

static int body_bytes(struct webc_parse *p, const char *d, size_t n, struct err_msg *em)
{
	if (buf_append(&p->resp->body, d, n) != 0)
		return err_set(em, DP_ETOOBIG, "the answer's body is over the cap of %zu bytes", p->max_resp);
	return 0;
}

/* A chunk-size line (without its LF): hex digits, then maybe ";extensions". */
static int chunk_size(struct webc_parse *p, const char *l, struct err_msg *em)
{
	uint64_t n = 0;
	int digits = 0;

	for (; isxdigit((unsigned char)*l); l++, digits++) {
		if (digits == 15)
			return err_set(em, DP_EREMOTE, "the answer has a chunk size over 15 hex digits");
		n = n * 16 + (uint64_t)(isdigit((unsigned char)*l) ? *l - '0' : (tolower((unsigned char)*l) - 'a' + 10));
	}
	while (*l == ' ' || *l == '\t')
		l++;
	if (digits == 0 || (*l != ';' && *l != '\r' && *l != '\0') || (*l == '\r' && l[1] != '\0'))
		return err_set(em, DP_EREMOTE, "the answer has a malformed chunk size line");
	if (n > p->max_resp - p->resp->body.len)
		return err_set(em, DP_ETOOBIG, "the answer's body is over the cap of %zu bytes", p->max_resp);
	p->left = n;
	p->state = n ? S_CHUNK_DATA : S_TRAILER;
	return 0;
}

/* Gather one line into p->line up to cap; true once its LF is in (the LF is not kept). */
static int gather_line(struct webc_parse *p, const char **d, size_t *n, size_t cap, bool *whole,
		       struct err_msg *em)
{
	const char *lf = memchr(*d, '\n', *n);
	size_t take = lf ? (size_t)(lf - *d) + 1 : *n;

	if (p->line.len + take > cap)
		return err_set(em, DP_EREMOTE, "the answer's %s passes %zu bytes", p->state == S_HEAD ? "head" : "chunk framing",
			       cap);
	(void)buf_append(&p->line, *d, take);
	*d += take;
	*n -= take;
	*whole = lf != NULL;
	return 0;
}

/* A line of the head just ended: is the head whole (an empty line after at least the status line)? */
static bool head_ends(const struct buf *l)
{
	if (l->len >= 2 && l->data[l->len - 2] == '\n')
		return true;
	return l->len >= 3 && l->data[l->len - 3] == '\n' && l->data[l->len - 2] == '\r';
}

static int step(struct webc_parse *p, const char **d, size_t *n, struct err_msg *em)
{
	bool whole = false;
	size_t take;
	int rc = 0;

	switch (p->state) {
	case S_HEAD:
		if ((rc = gather_line(p, d, n, WEBC_HEAD_MAX, &whole, em)) != 0 || !whole)
			return rc;
		if (memchr(p->line.data, '\0', p->line.len) != NULL)
			return err_set(em, DP_EREMOTE, "the answer's head has a NUL byte");
		if (p->line.data[0] == '\n' || (p->line.data[0] == '\r' && p->line.data[1] == '\n'))
			return err_set(em, DP_EREMOTE, "the answer begins with an empty line");
		return head_ends(&p->line) ? end_of_head(p, em) : 0;
	case S_BODY:
	case S_CHUNK_DATA:
	case S_TO_CLOSE:
		take = p->state == S_TO_CLOSE || *n < p->left ? *n : (size_t)p->left;
		if ((rc = body_bytes(p, *d, take, em)) != 0)
			return rc;
		*d += take;
		*n -= take;
		if (p->state != S_TO_CLOSE && (p->left -= take) == 0)
			p->state = p->state == S_BODY ? S_DONE : S_CHUNK_END;
		return 0;
	case S_CHUNK_SIZE:
	case S_CHUNK_END:
		if ((rc = gather_line(p, d, n, WEBC_CHUNK_LINE_MAX, &whole, em)) != 0 || !whole)
			return rc;
		p->line.data[--p->line.len] = '\0';
		if (p->state == S_CHUNK_SIZE)
			rc = chunk_size(p, p->line.data, em);
		else if (strcmp(p->line.data, "\r") != 0 && p->line.len != 0)
			rc = err_set(em, DP_EREMOTE, "the answer's chunk is longer than its size says");
		else
			p->state = S_CHUNK_SIZE;
		buf_reset(&p->line);
		return rc;
	case S_TRAILER:
		if ((rc = gather_line(p, d, n, WEBC_CHUNK_LINE_MAX, &whole, em)) != 0 || !whole)
			return rc;
		if ((p->trailer_bytes += p->line.len) > WEBC_HEAD_MAX)
			return err_set(em, DP_EREMOTE, "the answer's trailers pass %d bytes", WEBC_HEAD_MAX);
		if (p->line.len == 1 || (p->line.len == 2 && p->line.data[0] == '\r'))
			p->state = S_DONE; /* trailer fields are read and dropped */
		buf_reset(&p->line);
		return 0;
	default:
		return 0;
	}
}

int webc_parse_feed(struct webc_parse *p, const char *data, size_t n, size_t *used, struct err_msg *em)
{
	const char *d = data;
	int rc;

	if (n > 0)
		p->any = true;
	while (n > 0 && p->state != S_DONE)
		if ((rc = step(p, &d, &n, em)) != 0)
			return rc;
	*used = (size_t)(d - data);
	return p->state == S_DONE;
}

int webc_parse_eof(struct webc_parse *p, struct err_msg *em)
{
	switch (p->state) {
	case S_DONE:
	case S_TO_CLOSE:
		p->state = S_DONE;
		return 1;
	case S_HEAD:
		return err_set(em, DP_EIO, p->any ? "the server closed the connection in the middle of the answer's head"
						 : "the server closed the connection without answering");
	case S_BODY:
		return err_set(em, DP_EIO, "the server closed the connection %" PRIu64 " bytes before the body's end",
			       p->left);
	default:
		return err_set(em, DP_EIO, "the server closed the connection in the middle of a chunked body");
	}
}
