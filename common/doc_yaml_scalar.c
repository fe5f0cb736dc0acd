/*
 * doc_yaml_scalar.c - how a YAML plain scalar reads, shared by the reader
 * (doc_yaml.c) and the writer (doc_yaml_write.c) through doc_yaml_int.h: the
 * YAML 1.2 core schema plus the YAML 1.1 booleans that Kubernetes accepts,
 * the types the standard tags give, and which tags libyaml can read back.
 * The writer quotes a string exactly when this file would read it as
 * something else.
 */
#include "doc.h"
#include "doc_yaml_int.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* The longest word any list below holds ("+.inf"): a longer scalar is none of them (most are). */
#define WORD_MAX 5

static bool text_is(const char *s, size_t len, const char *const *list)
{
	if (len == 0 || len > WORD_MAX)
		return false;
	for (; *list; list++)
		if ((*list)[0] == s[0] && strlen(*list) == len && memcmp(s, *list, len) == 0)
			return true;
	return false;
}

static size_t span(const char *s, size_t len, const char *set)
{
	size_t i = 0;

	while (i < len && s[i] && strchr(set, s[i]))
		i++;
	return i;
}

static bool is_int(const char *s, size_t len)
{
	size_t i = 0;

	if (len > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'o'))
		return span(s + 2, len - 2, s[1] == 'x' ? "0123456789abcdefABCDEF" : "01234567") ==
		       len - 2;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	return i < len && span(s + i, len - i, "0123456789") == len - i;
}

static bool is_float(const char *s, size_t len)
{
	static const char *const special[] = {
		".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf", "-.Inf", "-.INF",
		".nan", ".NaN", ".NAN", NULL
	};
	size_t i = 0, whole, frac = 0, exp;

	if (text_is(s, len, special))
		return true;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	whole = span(s + i, len - i, "0123456789");
	i += whole;
	if (i < len && s[i] == '.') {
		i++;
		frac = span(s + i, len - i, "0123456789");
		i += frac;
	}
	if (whole == 0 && frac == 0)
		return false;
	if (i < len && (s[i] == 'e' || s[i] == 'E')) {
		i++;
		if (i < len && (s[i] == '-' || s[i] == '+'))
			i++;
		exp = span(s + i, len - i, "0123456789");
		if (exp == 0)
			return false;
		i += exp;
	}
	return i == len;
}

enum doc_type doc_yaml_plain_type(const char *s, size_t len)
{
	static const char *const nulls[] = { "~", "null", "Null", "NULL", NULL };
	static const char *const bools[] = {
		"true", "True", "TRUE", "false", "False", "FALSE", "yes", "Yes", "YES",
		"no", "No", "NO", "on", "On", "ON", "off", "Off", "OFF", "y", "Y", "n", "N", NULL
	};

	if (len == 0 || text_is(s, len, nulls))
		return DOC_NULL;
	if (text_is(s, len, bools))
		return DOC_BOOL;
	if (is_int(s, len) || is_float(s, len))
		return DOC_NUMBER;
	return DOC_STRING;
}

/*
 * Text that a YAML 1.1 reader (go-yaml v2, which Kubernetes uses) may take
 * for something other than a string although our resolver does not:
 * 1_000, 0b101, 1:20 (base 60), 2001-12-14, "=", "<<". Written quoted to be
 * safe; quoting a string never changes what it reads back as.
 */
bool doc_yaml_11_special(const char *s, size_t len)
{
	size_t i = 0;

	if ((len == 1 && s[0] == '=') || (len == 2 && memcmp(s, "<<", 2) == 0))
		return true;
	if (i < len && (s[i] == '-' || s[i] == '+'))
		i++;
	if (i + 1 < len && s[i] == '.' && s[i + 1] >= '0' && s[i + 1] <= '9')
		i++;
	if (i >= len || s[i] < '0' || s[i] > '9')
		return false;
	if (len - i > 2 && s[i] == '0' && strchr("xXbBoO", s[i + 1]))
		return span(s + i + 2, len - i - 2, "0123456789abcdefABCDEF_") == len - i - 2;
	return span(s + i, len - i, "0123456789_:.eE+-") == len - i;
}

/* The type a standard tag gives; false for other tags. */
bool doc_yaml_std_tag_type(const char *tag, enum doc_type *t)
{
	static const struct {
		const char *name;
		enum doc_type type;
	} std[] = { { "str", DOC_STRING }, { "int", DOC_NUMBER }, { "float", DOC_NUMBER },
		    { "bool", DOC_BOOL }, { "null", DOC_NULL } };

	if (strncmp(tag, STD_TAG, strlen(STD_TAG)) != 0)
		return false;
	for (size_t i = 0; i < sizeof(std) / sizeof(std[0]); i++)
		if (strcmp(tag + strlen(STD_TAG), std[i].name) == 0) {
			*t = std[i].type;
			return true;
		}
	return false;
}

/*
 * libyaml's emitter abbreviates a tag that starts with "!" or the standard
 * prefix ("!Ref", "!!str") and writes ',', '[' and ']' in the short form
 * as they are, but its scanner stops a short tag at those characters. Such
 * a tag cannot come back; refuse it on reading rather than write what we
 * cannot read.
 */
bool doc_yaml_tag_writable(const char *tag)
{
	const char *suffix = NULL;

	if (tag[0] == '!' && tag[1])
		suffix = tag + 1;
	else if (strncmp(tag, STD_TAG, strlen(STD_TAG)) == 0 && tag[strlen(STD_TAG)])
		suffix = tag + strlen(STD_TAG);
	return suffix == NULL || strpbrk(suffix, ",[]") == NULL;
}

