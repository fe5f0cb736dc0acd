/*
 * doc_json.c - the JSON reader of doc.h (the writer is doc_json_write.c).
 *
 * The reader is a strict RFC 8259 recursive-descent parser over a byte range:
 * a stream of one or more values separated by whitespace (what kubectl
 * accepts), UTF-8 validated, escapes decoded (surrogate pairs joined, \u0000
 * kept with the string's length), numbers checked against the grammar and
 * kept as their exact lexeme, every node stamped with its 1-based line and
 * byte column. Caps (bytes, depth, nodes) are checked before the work they
 * guard. We do not use jansson here because it rejects big integers and
 * reformats reals; diagport must give such text back byte for byte.
 *
 * Over ~600 lines as one idea: one parser, every function a rule of the same
 * grammar over the same cursor (struct jr); the one-item-at-a-time reading
 * of a top-level array (doc_json_items_*) is that parser stopped and resumed
 * inside the array.
 */
#include "doc.h"

#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

struct jr {
	const char *p, *end, *line_start;
	uint32_t line;
	const char *name;
	const struct doc_limits *lim;
	size_t nodes, depth;
	struct buf scratch; /* decoded text of a string with escapes */
	struct err_msg *em;
	/* doc_json_items_open: the top-level member whose array is skipped, and where that array is */
	const char *split_key;
	struct doc_node *split_seq;
	const char *split_at, *split_line_start;
	uint32_t split_line;
};

static int parse_value(struct jr *r, struct doc_node **out);

/* Not an error: doc_json_items_open gives up and the input is read whole. */
#define SPLIT_WHOLE 1

/* ---- errors and positions ---- */

static uint32_t col_of(const struct jr *r, const char *at)
{
	return (uint32_t)(at - r->line_start) + 1;
}

static int __attribute__((format(printf, 4, 5)))
jr_err(struct jr *r, const char *at, int code, const char *fmt, ...)
{
	char what[768];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	err_set(r->em, code, "%s:%u:%u: %s", r->name, r->line, col_of(r, at), what);
	return code;
}

/* "expected ..." at the current byte, saying so when the input has ended. */
static int jr_expected(struct jr *r, const char *what)
{
	if (r->p >= r->end)
		return jr_err(r, r->p, DP_ESYNTAX, "unexpected end of input: expected %s", what);
	return jr_err(r, r->p, DP_ESYNTAX, "expected %s", what);
}

static int jr_unexpected(struct jr *r)
{
	unsigned char c = (unsigned char)*r->p;

	if (c > 0x20 && c < 0x7f)
		return jr_err(r, r->p, DP_ESYNTAX, "unexpected character '%c'", c);
	return jr_err(r, r->p, DP_ESYNTAX, "unexpected byte 0x%02X", c);
}

static void skip_ws(struct jr *r)
{
	while (r->p < r->end) {
		char c = *r->p;

		if (c == '\n') {
			r->line++;
			r->line_start = r->p + 1;
		} else if (c != ' ' && c != '\t' && c != '\r') {
			return;
		}
		r->p++;
	}
}

/* Count a node against max_nodes before it is made, and stamp its position. */
static int new_node(struct jr *r, const char *at, struct doc_node *n)
{
	if (++r->nodes > r->lim->max_nodes) {
		doc_free(n);
		return jr_err(r, at, DP_ETOOBIG, "more than %zu values (%s)",
			      r->lim->max_nodes, DOC_NODES_NAME(r->lim));
	}
	n->line = r->line;
	n->col = col_of(r, at);
	return 0;
}

/* ---- strings ---- */

/* Length of the valid UTF-8 sequence at p (1-4), or 0 when it is not valid. */
static size_t utf8_seq(const unsigned char *p, const unsigned char *end)
{
	size_t n;
	unsigned lo = 0x80, hi = 0xBF;

	if (p[0] < 0x80)
		return 1;
	if (p[0] >= 0xC2 && p[0] <= 0xDF)
		n = 2;
	else if (p[0] >= 0xE0 && p[0] <= 0xEF)
		n = 3;
	else if (p[0] >= 0xF0 && p[0] <= 0xF4)
		n = 4;
	else
		return 0;
	if ((size_t)(end - p) < n)
		return 0;
	if (p[0] == 0xE0)
		lo = 0xA0; /* overlong */
	else if (p[0] == 0xED)
		hi = 0x9F; /* surrogates */
	else if (p[0] == 0xF0)
		lo = 0x90; /* overlong */
	else if (p[0] == 0xF4)
		hi = 0x8F; /* past U+10FFFF */
	if (p[1] < lo || p[1] > hi)
		return 0;
	for (size_t i = 2; i < n; i++)
		if (p[i] < 0x80 || p[i] > 0xBF)
			return 0;
	return n;
}

static int hex4(const char *p, const char *end, unsigned *cp)
{
	unsigned v = 0;

	if (end - p < 4)
		return -1;
	for (int i = 0; i < 4; i++) {
		char c = p[i];

		v <<= 4;
		if (c >= '0' && c <= '9')
			v |= (unsigned)(c - '0');
		else if (c >= 'a' && c <= 'f')
			v |= (unsigned)(c - 'a' + 10);
		else if (c >= 'A' && c <= 'F')
			v |= (unsigned)(c - 'A' + 10);
		else
			return -1;
	}
	*cp = v;
	return 0;
}

/* The \uXXXX escape at r->p (pointing at the backslash); appends its UTF-8. */
static int unicode_escape(struct jr *r)
{
	const char *at = r->p;
	unsigned cp, lo;

	if (hex4(r->p + 2, r->end, &cp) != 0)
		return jr_err(r, at, DP_ESYNTAX, "\\u must be followed by four hex digits");
	r->p += 6;
	if (cp >= 0xDC00 && cp <= 0xDFFF)
		return jr_err(r, at, DP_ESYNTAX, "lone low surrogate \\u%04X in a string", cp);
	if (cp >= 0xD800 && cp <= 0xDBFF) {
		if (r->end - r->p < 6 || r->p[0] != '\\' || r->p[1] != 'u' ||
		    hex4(r->p + 2, r->end, &lo) != 0 || lo < 0xDC00 || lo > 0xDFFF)
			return jr_err(r, at, DP_ESYNTAX,
				      "high surrogate \\u%04X is not followed by a low surrogate", cp);
		cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
		r->p += 6;
	}
	buf_put_utf8(&r->scratch, cp);
	return 0;
}

static int escape(struct jr *r)
{
	static const char from[] = "\"\\/bfnrt", to[] = "\"\\/\b\f\n\r\t";
	const char *hit;

	if (r->p + 1 >= r->end)
		return jr_err(r, r->p, DP_ESYNTAX, "unexpected end of input in a string");
	if (r->p[1] == 'u')
		return unicode_escape(r);
	hit = r->p[1] ? strchr(from, r->p[1]) : NULL;
	if (hit == NULL) {
		unsigned char c = (unsigned char)r->p[1];

		if (c > 0x20 && c < 0x7f)
			return jr_err(r, r->p, DP_ESYNTAX, "invalid escape '\\%c' in a string", c);
		return jr_err(r, r->p, DP_ESYNTAX, "invalid escape (byte 0x%02X) in a string", c);
	}
	buf_putc(&r->scratch, to[hit - from]);
	r->p += 2;
	return 0;
}

/*
 * The length of the run at p of bytes that need no look in a string: ASCII
 * from 0x20 up, not '"' nor '\\'. Eight at a time (bit tricks on a 64-bit
 * word: a byte below 0x20, a byte equal to '"' or '\\', a byte with the high
 * bit); the caller looks at the byte where it stops one by one.
 */
static size_t plain_run(const char *p, const char *end)
{
	const uint64_t ones = 0x0101010101010101ull, highs = 0x8080808080808080ull;
	const char *s = p;

	while (end - p >= 8) {
		uint64_t w, q, b;

		memcpy(&w, p, 8);
		q = w ^ (ones * '"');
		b = w ^ (ones * '\\');
		if (((w - ones * 0x20) | (q - ones) | (b - ones) | w) & highs)
			break;
		p += 8;
	}
	return (size_t)(p - s);
}

/* A string at r->p (the opening quote) into a new DOC_STRING node. */
static int parse_string(struct jr *r, struct doc_node **out)
{
	const char *open = r->p, *run;
	bool copied = false;
	int rc;

	r->p++;
	buf_reset(&r->scratch);
	run = r->p;
	for (;;) {
		unsigned char c;
		size_t k;

		r->p += plain_run(r->p, r->end);
		if (r->p >= r->end)
			return jr_err(r, open, DP_ESYNTAX, "unterminated string");
		c = (unsigned char)*r->p;
		if (c == '"')
			break;
		if (c < 0x20)
			return jr_err(r, r->p, DP_ESYNTAX,
				      "control character 0x%02X in a string (write it as \\u%04X)",
				      c, c);
		if (c == '\\') {
			buf_append(&r->scratch, run, (size_t)(r->p - run));
			copied = true;
			if ((rc = escape(r)) != 0)
				return rc;
			run = r->p;
			continue;
		}
		k = utf8_seq((const unsigned char *)r->p, (const unsigned char *)r->end);
		if (k == 0)
			return jr_err(r, r->p, DP_ESYNTAX, "invalid UTF-8 (byte 0x%02X) in a string", c);
		r->p += k;
	}
	if (copied) {
		buf_append(&r->scratch, run, (size_t)(r->p - run));
		*out = doc_strn(r->scratch.data, r->scratch.len);
	} else {
		*out = doc_strn(run, (size_t)(r->p - run));
	}
	r->p++;
	return new_node(r, open, *out);
}

/* ---- numbers and literals ---- */

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

/* Bytes that may not follow a number or literal directly. */
static bool word_char(char c)
{
	return is_digit(c) || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
	       c == '+' || c == '-' || c == '_';
}

static int parse_number(struct jr *r, struct doc_node **out)
{
	const char *s = r->p, *p = r->p, *e = r->end;

	if (p < e && *p == '-')
		p++;
	if (p < e && *p == '0') {
		p++;
	} else if (p < e && is_digit(*p)) {
		while (p < e && is_digit(*p))
			p++;
	} else {
		return jr_err(r, s, DP_ESYNTAX, "invalid number: expected a digit");
	}
	if (p < e && *p == '.') {
		if (++p >= e || !is_digit(*p))
			return jr_err(r, s, DP_ESYNTAX, "invalid number: expected a digit after '.'");
		while (p < e && is_digit(*p))
			p++;
	}
	if (p < e && (*p == 'e' || *p == 'E')) {
		p++;
		if (p < e && (*p == '+' || *p == '-'))
			p++;
		if (p >= e || !is_digit(*p))
			return jr_err(r, s, DP_ESYNTAX, "invalid number: expected a digit in the exponent");
		while (p < e && is_digit(*p))
			p++;
	}
	if (p < e && word_char(*p))
		return jr_err(r, s, DP_ESYNTAX, "invalid number");
	*out = doc_scalar(DOC_NUMBER, s, (size_t)(p - s));
	r->p = p;
	return new_node(r, s, *out);
}

static int parse_literal(struct jr *r, struct doc_node **out)
{
	static const struct {
		const char *text;
		enum doc_type type;
	} lits[] = { { "true", DOC_BOOL }, { "false", DOC_BOOL }, { "null", DOC_NULL } };
	const char *s = r->p;

	for (size_t i = 0; i < sizeof(lits) / sizeof(lits[0]); i++) {
		size_t n = strlen(lits[i].text);

		if ((size_t)(r->end - s) < n || memcmp(s, lits[i].text, n) != 0)
			continue;
		if ((size_t)(r->end - s) > n && word_char(s[n]))
			break;
		*out = doc_scalar(lits[i].type, s, n);
		r->p += n;
		return new_node(r, s, *out);
	}
	if ((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z'))
		return jr_err(r, s, DP_ESYNTAX, "invalid literal (JSON has true, false and null)");
	return jr_unexpected(r);
}

/* ---- collections ---- */

static int enter(struct jr *r)
{
	if (++r->depth > r->lim->max_depth)
		return jr_err(r, r->p, DP_ETOOBIG, "nesting deeper than %zu levels (max_depth)",
			      r->lim->max_depth);
	return 0;
}

static int dup_check(struct jr *r, const struct doc_node *m)
{
	return doc_dup_error(m, r->name, r->em);
}

/*
 * The array at r->p, skipped for doc_json_items_open: an empty DOC_SEQ in its
 * place (counted and stamped as the reader stamps it), r->p after its ']'.
 * Only brackets and strings are looked at; the elements are parsed later by
 * doc_json_items_next. SPLIT_WHOLE when the array does not end or is over a
 * cap (the caller reads the input whole, which names what is wrong).
 */
static int split_array(struct jr *r, struct doc_node **out)
{
	const char *at = r->p, *line_start = r->line_start;
	uint32_t line = r->line;
	size_t depth = 0;

	while (r->p < r->end) {
		char c = *r->p++;

		if (c == '"') {
			for (;;) {
				r->p += plain_run(r->p, r->end);
				if (r->p >= r->end)
					return SPLIT_WHOLE;
				c = *r->p++;
				if (c == '"')
					break;
				if (c == '\\' && r->p < r->end)
					r->p++;
				else if (c == '\n')
					return SPLIT_WHOLE;
			}
		} else if (c == '[' || c == '{') {
			depth++;
		} else if (c == ']' || c == '}') {
			if (--depth == 0)
				break;
		} else if (c == '\n') {
			r->line++;
			r->line_start = r->p;
		}
	}
	if (depth != 0)
		return SPLIT_WHOLE;
	*out = doc_seq();
	(*out)->line = line;
	(*out)->col = (uint32_t)(at - line_start) + 1;
	if (++r->nodes > r->lim->max_nodes) {
		doc_free(*out);
		return SPLIT_WHOLE; /* the whole reading says where */
	}
	r->split_seq = *out;
	r->split_at = at;
	r->split_line = line;
	r->split_line_start = line_start;
	return 0;
}

/* One "key": value member of the object m; r->p is at the key. */
static int parse_member(struct jr *r, struct doc_node *m, bool after_comma)
{
	struct doc_node *k = NULL, *v = NULL;
	int rc;

	if (after_comma && r->p < r->end && *r->p == '}')
		return jr_err(r, r->p, DP_ESYNTAX, "expected a key after ',' (JSON has no trailing commas)");
	if (r->p >= r->end || *r->p != '"')
		return jr_expected(r, after_comma ? "a string key after ','" : "a string key or '}'");
	if ((rc = parse_string(r, &k)) != 0)
		return rc;
	skip_ws(r);
	if (r->p >= r->end || *r->p != ':') {
		doc_free(k);
		return jr_expected(r, "':' after an object key");
	}
	r->p++;
	skip_ws(r);
	if (r->split_key && r->depth == 1 && r->split_seq == NULL && r->p < r->end && *r->p == '[' &&
	    strcmp(k->text, r->split_key) == 0)
		rc = split_array(r, &v);
	else
		rc = parse_value(r, &v);
	if (rc != 0) {
		doc_free(k);
		return rc;
	}
	doc_append_pair(m, k, v);
	return 0;
}

static int parse_object(struct jr *r, struct doc_node *m)
{
	int rc;

	r->p++;
	skip_ws(r);
	if (r->p < r->end && *r->p == '}') {
		r->p++;
		return 0;
	}
	for (bool after_comma = false;; after_comma = true) {
		if ((rc = parse_member(r, m, after_comma)) != 0)
			return rc;
		skip_ws(r);
		if (r->p < r->end && *r->p == '}')
			break;
		if (r->p >= r->end || *r->p != ',')
			return jr_expected(r, "',' or '}' after an object member");
		r->p++;
		skip_ws(r);
	}
	r->p++;
	return dup_check(r, m);
}

/*
 * After an array element and the blanks behind it: 0 with *end set at ']' (not consumed), or 0 past
 * the ',' and its blanks at the next value (JSON has no trailing commas); shared by the whole-tree
 * reader and the List reader that hands out one element at a time.
 */
static int array_next(struct jr *r, bool *end)
{
	*end = r->p < r->end && *r->p == ']';
	if (*end)
		return 0;
	if (r->p >= r->end || *r->p != ',')
		return jr_expected(r, "',' or ']' after an array element");
	r->p++;
	skip_ws(r);
	if (r->p < r->end && *r->p == ']')
		return jr_err(r, r->p, DP_ESYNTAX, "expected a value after ',' (JSON has no trailing commas)");
	return 0;
}

static int parse_array(struct jr *r, struct doc_node *s)
{
	struct doc_node *v = NULL;
	bool end;
	int rc;

	r->p++;
	skip_ws(r);
	if (r->p < r->end && *r->p == ']') {
		r->p++;
		return 0;
	}
	for (;;) {
		if (r->p >= r->end)
			return jr_expected(r, "a value or ']'");
		if ((rc = parse_value(r, &v)) != 0)
			return rc;
		doc_push(s, v);
		skip_ws(r);
		if ((rc = array_next(r, &end)) != 0)
			return rc;
		if (end)
			break;
	}
	r->p++;
	return 0;
}

static int parse_collection(struct jr *r, struct doc_node **out)
{
	bool obj = *r->p == '{';
	struct doc_node *c = obj ? doc_map() : doc_seq();
	int rc;

	if ((rc = new_node(r, r->p, c)) != 0)
		return rc;
	if ((rc = enter(r)) != 0) {
		doc_free(c);
		return rc;
	}
	rc = obj ? parse_object(r, c) : parse_array(r, c);
	r->depth--;
	if (rc != 0) {
		doc_free(c);
		return rc;
	}
	*out = c;
	return 0;
}

static int parse_value(struct jr *r, struct doc_node **out)
{
	if (r->p >= r->end)
		return jr_expected(r, "a value");
	switch (*r->p) {
	case '{':
	case '[':
		return parse_collection(r, out);
	case '"':
		return parse_string(r, out);
	case '-':
	case '0': case '1': case '2': case '3': case '4':
	case '5': case '6': case '7': case '8': case '9':
		return parse_number(r, out);
	default:
		return parse_literal(r, out);
	}
}

/* The indent width of the first indented line inside [s, e), or 0. */
static int detect_indent(const char *s, const char *e)
{
	const char *nl = memchr(s, '\n', (size_t)(e - s));
	int n = 0;

	if (nl == NULL)
		return 0;
	for (const char *p = nl + 1; p < e && *p == ' ' && n < 64; p++)
		n++;
	return n;
}

int doc_read_json(const char *bytes, size_t len, const char *name,
		  const struct doc_limits *lim, struct doc_stream *s, struct err_msg *em)
{
	struct jr r = { .line = 1, .name = name ? name : "<input>", .em = em };
	struct doc_node **docs = NULL, *v = NULL;
	size_t n = 0, alloc = 0;
	int indent = 0, rc = 0;

	if (bytes == NULL)
		bytes = "";
	r.p = r.line_start = bytes;
	r.end = bytes + len;
	r.lim = lim ? lim : &doc_default_limits;
	if (len > r.lim->max_bytes)
		return err_set(em, DP_ETOOBIG, "%s: input is %zu bytes, over the %zu-byte cap (%s)",
			       r.name, len, r.lim->max_bytes, DOC_BYTES_NAME(r.lim));
	buf_init(&r.scratch, 0);
	if (len >= 3 && memcmp(bytes, "\xEF\xBB\xBF", 3) == 0)
		r.p = r.line_start = bytes + 3;
	skip_ws(&r);
	if (r.p >= r.end) {
		err_set(em, DP_ESYNTAX, "%s: no document (the input is empty)", r.name);
		rc = DP_ESYNTAX;
	}
	while (rc == 0 && r.p < r.end) {
		const char *at = r.p;

		if ((rc = parse_value(&r, &v)) != 0)
			break;
		if (n == 0)
			indent = detect_indent(at, r.p);
		if (n == alloc) {
			alloc = alloc ? alloc * 2 : 4;
			docs = mem_realloc(docs, alloc * sizeof(*docs));
		}
		docs[n++] = v;
		skip_ws(&r);
	}
	buf_free(&r.scratch);
	if (rc != 0) {
		while (n)
			doc_free(docs[--n]);
		mem_free(docs);
		return rc;
	}
	s->format = DOC_JSON;
	s->docs = docs;
	s->n = n;
	s->json_indent = indent;
	s->yaml_explicit_start = false;
	s->name = name;
	return 0;
}

/* ---- one array member of an object, an element at a time ---- */

struct doc_json_items {
	struct jr r;      /* at the next element, or at the array's ']' */
	size_t index;     /* elements handed over */
	bool done;
	struct err_msg open_em; /* what went wrong while splitting: not shown, the whole reading says it */
};

int doc_json_items_open(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
			const char *key, struct doc_json_items **it, struct doc_stream *s, size_t *k)
{
	struct doc_json_items *x;
	struct doc_node *obj = NULL;
	const char *start;
	int rc;

	if (bytes == NULL)
		bytes = "";
	lim = lim ? lim : &doc_default_limits;
	if (len > lim->max_bytes)
		return 0; /* doc_read_json's message */
	x = mem_zalloc(sizeof(*x));
	x->r = (struct jr){ .line = 1, .name = name ? name : "<input>", .lim = lim, .em = &x->open_em, .split_key = key };
	x->r.p = x->r.line_start = bytes;
	x->r.end = bytes + len;
	buf_init(&x->r.scratch, 0);
	buf_reserve(&x->r.scratch, 256); /* on the heap: it outlives a caller's arena scope around _next */
	if (len >= 3 && memcmp(bytes, "\xEF\xBB\xBF", 3) == 0)
		x->r.p = x->r.line_start = bytes + 3;
	skip_ws(&x->r);
	start = x->r.p;
	rc = start < x->r.end && *start == '{' ? parse_value(&x->r, &obj) : SPLIT_WHOLE;
	if (rc == 0) {
		skip_ws(&x->r);
		if (x->r.p < x->r.end || x->r.split_seq == NULL)
			rc = SPLIT_WHOLE; /* more than one value, or no such array */
	}
	if (rc != 0) {
		/* an error too: the whole reading names the first one in the text, as it always did */
		doc_free(obj);
		doc_json_items_free(x);
		return 0;
	}
	*k = (size_t)doc_find(obj, key);
	memset(s, 0, sizeof(*s));
	s->format = DOC_JSON;
	s->json_indent = detect_indent(start, x->r.p);
	s->name = name;
	s->docs = mem_alloc(sizeof(*s->docs));
	s->docs[0] = obj;
	s->n = 1;
	/* back to the array's first element, one level inside the object and the array */
	x->r.p = x->r.split_at + 1;
	x->r.line = x->r.split_line;
	x->r.line_start = x->r.split_line_start;
	x->r.depth = 2;
	skip_ws(&x->r);
	if (x->r.p < x->r.end && *x->r.p == ']')
		x->done = true;
	*it = x;
	return 1;
}

int doc_json_items_next(struct doc_json_items *x, struct doc_node **item, struct err_msg *em)
{
	struct jr *r = &x->r;
	int rc;

	if (x->done)
		return 0;
	r->em = em;
	if (x->index > 0) {
		if ((rc = array_next(r, &x->done)) != 0 || x->done)
			return rc;
	}
	if (r->p >= r->end)
		return jr_expected(r, "a value or ']'");
	if ((rc = parse_value(r, item)) != 0)
		return rc;
	skip_ws(r);
	x->index++;
	return 1;
}

void doc_json_items_free(struct doc_json_items *x)
{
	if (x == NULL)
		return;
	buf_free(&x->r.scratch);
	mem_free(x);
}
