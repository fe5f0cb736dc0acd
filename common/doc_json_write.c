/*
 * doc_json_write.c - the JSON writer of doc.h.
 *
 * Prints a tree in the layout the reader saw: `indent` spaces per level with
 * "key": value, or compact. Strings are escaped minimally (quote, backslash,
 * control characters; UTF-8 is written raw). A number whose text is valid
 * JSON is written as that text, so big integers and precise floats pass
 * through untouched; what YAML allows but JSON does not (0x1F, 0644, .5, 1.,
 * +1, yes, ~) is converted to its JSON spelling. A node with a non-standard
 * YAML tag such as !Ref has no JSON form: callers convert those first.
 */
#include "doc.h"

#include "mem.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static bool is_digit(char c)
{
	return c >= '0' && c <= '9';
}

struct jw {
	struct buf *out;
	int indent;
	int buf_rc; /* sticky: the first append that went over the cap */
	struct err_msg *em;
};

static void put(struct jw *w, const char *s, size_t n)
{
	struct buf *b = w->out;

	/* most pieces are a few bytes into room there is: no call (a List's 80 MB are millions of them) */
	if (w->buf_rc == 0 && n < b->alloc - b->len && n <= b->cap - b->len) {
		memcpy(b->data + b->len, s, n);
		b->len += n;
		b->data[b->len] = '\0';
	} else if (w->buf_rc == 0) {
		w->buf_rc = buf_append(b, s, n);
	}
}

static void put_str(struct jw *w, const char *s)
{
	put(w, s, strlen(s));
}

static void newline(struct jw *w, int level)
{
	static const char spaces[] = "                                ";
	size_t n = (size_t)w->indent * (size_t)level;

	if (w->indent == 0)
		return;
	put(w, "\n", 1);
	for (; n > sizeof(spaces) - 1; n -= sizeof(spaces) - 1)
		put(w, spaces, sizeof(spaces) - 1);
	put(w, spaces, n);
}

static void put_string(struct jw *w, const char *s, size_t len)
{
	static const char hex[] = "0123456789abcdef";
	size_t run = 0;

	put(w, "\"", 1);
	for (size_t i = 0; i < len; i++) {
		unsigned char c = (unsigned char)s[i];
		char esc[8];
		const char *e = NULL;

		if (c >= 0x20 && c != '"' && c != '\\')
			continue;
		put(w, s + run, i - run);
		run = i + 1;
		switch (c) {
		case '"': e = "\\\""; break;
		case '\\': e = "\\\\"; break;
		case '\n': e = "\\n"; break;
		case '\t': e = "\\t"; break;
		case '\r': e = "\\r"; break;
		case '\b': e = "\\b"; break;
		case '\f': e = "\\f"; break;
		default:
			memcpy(esc, "\\u00", 4);
			esc[4] = hex[c >> 4];
			esc[5] = hex[c & 15];
			esc[6] = '\0';
			e = esc;
		}
		put_str(w, e);
	}
	put(w, s + run, len - run);
	put(w, "\"", 1);
}

int doc_json_string(struct buf *out, const char *s, size_t len)
{
	struct jw w = { .out = out };

	put_string(&w, s, len);
	return w.buf_rc;
}

static bool in_list(const char *t, const char *const *list)
{
	for (; *list; list++)
		if (strcmp(t, *list) == 0)
			return true;
	return false;
}

static const char *json_bool(const char *t)
{
	static const char *const yes[] = { "true", "True", "TRUE", "yes", "Yes", "YES", "on",
					    "On", "ON", "y", "Y", NULL };
	static const char *const no[] = { "false", "False", "FALSE", "no", "No", "NO", "off",
					   "Off", "OFF", "n", "N", NULL };

	return in_list(t, yes) ? "true" : in_list(t, no) ? "false" : NULL;
}

static bool json_number_ok(const char *s, size_t len)
{
	size_t i = 0;

	if (i < len && s[i] == '-')
		i++;
	if (i < len && s[i] == '0')
		i++;
	else if (i < len && s[i] >= '1' && s[i] <= '9')
		while (i < len && is_digit(s[i]))
			i++;
	else
		return false;
	if (i < len && s[i] == '.') {
		if (++i >= len || !is_digit(s[i]))
			return false;
		while (i < len && is_digit(s[i]))
			i++;
	}
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		if (++i < len && (s[i] == '+' || s[i] == '-'))
			i++;
		if (i >= len || !is_digit(s[i]))
			return false;
		while (i < len && is_digit(s[i]))
			i++;
	}
	return i == len;
}

/* Digits (base 2..16) to decimal, in dec (most significant first). */
static bool radix_to_decimal(const char *d, size_t n, unsigned base, struct buf *dec)
{
	unsigned char *acc = mem_zalloc(n * 2 + 2); /* decimal digits, least significant first */
	size_t used = 1;

	for (size_t i = 0; i < n; i++) {
		const char *h = strchr("0123456789abcdef", d[i] | 0x20);
		unsigned carry = h && d[i] ? (unsigned)(h - "0123456789abcdef") : base;

		if (carry >= base) {
			mem_free(acc);
			return false;
		}
		for (size_t j = 0; j < used; j++) {
			unsigned v = acc[j] * base + carry;

			acc[j] = (unsigned char)(v % 10);
			carry = v / 10;
		}
		while (carry) {
			acc[used++] = (unsigned char)(carry % 10);
			carry /= 10;
		}
	}
	while (used > 1 && acc[used - 1] == 0)
		used--;
	for (size_t j = used; j-- > 0;)
		buf_putc(dec, (char)('0' + acc[j]));
	mem_free(acc);
	return true;
}

/* Decimal digits from p[i], with leading zeros dropped ("0" when none are left). */
static size_t put_digits(struct buf *o, const char *p, size_t n)
{
	size_t k = strspn(p, "0123456789"), z = 0;

	if (k > n)
		k = n;
	while (z + 1 < k && p[z] == '0')
		z++;
	buf_append(o, k ? p + z : "0", k ? k - z : 1);
	return k;
}

/*
 * A YAML number in JSON spelling: sign, 0x/0o/0b, a leading-zero octal as
 * Kubernetes' YAML 1.1 reader takes it (0644 = 420), underscores, .5, 1., +1.
 * False when there is none (.inf, .nan, not a number at all).
 */
static bool yaml_number_to_json(const char *t, size_t len, struct buf *o)
{
	struct buf d;
	const char *p;
	size_t n, i = 0, whole, frac = 0;
	bool ok = false;

	if (len > 4096 || memchr(t, '\0', len))
		return false;
	buf_init(&d, 0);
	for (size_t k = 0; k < len; k++)
		if (t[k] != '_')
			buf_putc(&d, t[k]);
	buf_putc(&d, '\0');
	p = d.data;
	n = d.len - 1;
	if (i < n && (p[i] == '+' || p[i] == '-')) {
		if (p[i] == '-')
			buf_putc(o, '-');
		i++;
	}
	if (n - i > 2 && p[i] == '0' && strchr("xXoObB", p[i + 1])) {
		char r = (char)(p[i + 1] | 0x20);

		ok = radix_to_decimal(p + i + 2, n - i - 2, r == 'x' ? 16 : r == 'o' ? 8 : 2, o);
		goto out;
	}
	if (n - i > 1 && p[i] == '0' && strspn(p + i, "01234567") == n - i) {
		ok = radix_to_decimal(p + i + 1, n - i - 1, 8, o);
		goto out;
	}
	whole = put_digits(o, p + i, n - i);
	i += whole;
	if (i < n && p[i] == '.') {
		buf_putc(o, '.');
		frac = strspn(p + i + 1, "0123456789");
		buf_append(o, frac ? p + i + 1 : "0", frac ? frac : 1);
		i += 1 + frac;
	}
	if (whole == 0 && frac == 0)
		goto out;
	if (i < n && p[i] != 'e' && p[i] != 'E')
		goto out;
	buf_append(o, p + i, n - i);
	ok = json_number_ok(o->data, o->len);
out:
	buf_free(&d);
	return ok;
}

static int __attribute__((format(printf, 3, 4)))
jw_fail(struct jw *w, const struct doc_node *n, const char *fmt, ...)
{
	char what[600];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	if (n->line)
		return err_set(w->em, DP_EUNSUPPORTED, "%u:%u: %s", n->line, n->col, what);
	return err_set(w->em, DP_EUNSUPPORTED, "%s", what);
}

/* A scalar's JSON text (without quotes for strings) into tmp; or an error. */
static int scalar_text(struct jw *w, const struct doc_node *n, struct buf *tmp)
{
	const char *b;

	switch (n->type) {
	case DOC_NULL:
		buf_puts(tmp, "null");
		return 0;
	case DOC_BOOL:
		if ((b = json_bool(n->text)) == NULL)
			return jw_fail(w, n, "boolean %s has no JSON form", n->text);
		buf_puts(tmp, b);
		return 0;
	case DOC_NUMBER:
		if (json_number_ok(n->text, n->len)) {
			buf_append(tmp, n->text, n->len);
			return 0;
		}
		if (!yaml_number_to_json(n->text, n->len, tmp))
			return jw_fail(w, n, "number %s has no JSON form", n->text);
		return 0;
	default:
		buf_append(tmp, n->text, n->len);
		return 0;
	}
}

static int write_node(struct jw *w, const struct doc_node *n, int level);

static int write_scalar(struct jw *w, const struct doc_node *n, bool as_key)
{
	struct buf tmp;
	int rc;

	/* Keys are names: `80:`, `y:` and `0x1F:` stay "80", "y" and "0x1F". */
	if (n->type == DOC_STRING || as_key) {
		put_string(w, n->text, n->len);
		return 0;
	}
	buf_init(&tmp, 0);
	rc = scalar_text(w, n, &tmp);
	if (rc == 0)
		put(w, tmp.data, tmp.len);
	buf_free(&tmp);
	return rc;
}

static int check_tag(struct jw *w, const struct doc_node *n)
{
	if (n->tag && strncmp(n->tag, "tag:yaml.org,2002:", 18) != 0)
		return jw_fail(w, n, "YAML tag %s has no JSON form", n->tag);
	return 0;
}

static int write_collection(struct jw *w, const struct doc_node *n, int level)
{
	bool map = n->type == DOC_MAP;
	int rc;

	put(w, map ? "{" : "[", 1);
	for (size_t i = 0; i < n->n; i++) {
		if (i)
			put(w, ",", 1);
		newline(w, level + 1);
		if (map) {
			if ((rc = check_tag(w, n->keys[i])) != 0)
				return rc;
			if (n->keys[i]->type == DOC_MAP || n->keys[i]->type == DOC_SEQ)
				return jw_fail(w, n->keys[i], "a map key that is a collection has no JSON form");
			if ((rc = write_scalar(w, n->keys[i], true)) != 0)
				return rc;
			put_str(w, w->indent ? ": " : ":");
		}
		if ((rc = write_node(w, n->vals[i], level + 1)) != 0)
			return rc;
	}
	if (n->n)
		newline(w, level);
	put(w, map ? "}" : "]", 1);
	return 0;
}

static int write_node(struct jw *w, const struct doc_node *n, int level)
{
	int rc;

	if ((rc = check_tag(w, n)) != 0)
		return rc;
	if (n->type == DOC_MAP || n->type == DOC_SEQ)
		return write_collection(w, n, level);
	return write_scalar(w, n, false);
}

int doc_write_json(struct buf *out, const struct doc_node *n, int indent, struct err_msg *em)
{
	size_t mark = out->len;
	int rc = doc_write_json_at(out, n, indent, 0, em);

	if (rc == 0 && indent > 0 && buf_putc(out, '\n') != 0) {
		out->len = mark;
		out->data[mark] = '\0';
		rc = err_set(em, DP_ETOOBIG, "JSON output is over the %zu-byte cap", out->cap);
	}
	return rc;
}

int doc_write_json_at(struct buf *out, const struct doc_node *n, int indent, int level, struct err_msg *em)
{
	struct jw w = { .out = out, .indent = indent < 0 ? 0 : indent, .em = em };
	size_t mark = out->len;
	int rc = write_node(&w, n, level);

	if (rc == 0 && w.buf_rc != 0)
		rc = err_set(em, DP_ETOOBIG, "JSON output is over the %zu-byte cap", out->cap);
	if (rc != 0) {
		out->len = mark;
		if (out->data)
			out->data[mark] = '\0';
	}
	return rc;
}
