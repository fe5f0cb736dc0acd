/*
 * doc_io.c - a document stream read or written in either syntax: doc_read
 * tells JSON from YAML by the first byte that is not white space, doc_write
 * writes the stream as JSON values one after another or as one YAML stream.
 * It sits above the tree (doc.c) and both syntaxes (doc_json*.c, doc_yaml.c),
 * which never call up into it.
 */
#include "doc.h"

#include <string.h>

int doc_read(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
	     struct doc_stream *s, struct err_msg *em)
{
	size_t i = 0;

	if (bytes == NULL)
		bytes = "";
	if (len >= 3 && memcmp(bytes, "\xEF\xBB\xBF", 3) == 0)
		i = 3;
	while (i < len && (bytes[i] == ' ' || bytes[i] == '\t' || bytes[i] == '\r' ||
			   bytes[i] == '\n'))
		i++;
	if (i < len && (bytes[i] == '{' || bytes[i] == '['))
		return doc_read_json(bytes, len, name, lim, s, em);
	return doc_read_yaml(bytes, len, name, lim, s, em);
}

/*
 * The writers' messages start with the node's "LINE:COL: " when it has a
 * position; put the stream's name in front the way the readers do.
 */
static void name_message(struct err_msg *em, const char *name)
{
	char old[sizeof(em->text)];

	if (em == NULL)
		return;
	memcpy(old, em->text, sizeof(old));
	err_set(em, 0, "%s:%s%s", name ? name : "<input>",
		old[0] >= '0' && old[0] <= '9' ? "" : " ", old);
}

int doc_write(struct buf *out, const struct doc_stream *s, enum doc_format fmt, struct err_msg *em)
{
	int rc, indent;

	if (fmt == DOC_YAML) {
		rc = doc_write_yaml(out, s->docs, s->n, s->yaml_explicit_start, em);
		if (rc != 0)
			name_message(em, s->name);
		return rc;
	}
	indent = s->format == DOC_JSON ? s->json_indent : 2;
	for (size_t i = 0; i < s->n; i++) {
		rc = doc_write_json(out, s->docs[i], indent, em);
		if (rc == 0 && indent == 0 && buf_putc(out, '\n') != 0)
			rc = err_set(em, DP_ETOOBIG, "output is over the %zu-byte cap", out->cap);
		if (rc != 0) {
			name_message(em, s->name);
			return rc;
		}
	}
	return 0;
}
