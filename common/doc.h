/*
 * doc.h - an ordered document tree that keeps what it was given.
 *
 * diagport edits people's documents (Kubernetes manifests, ECS task
 * definitions, CloudFormation templates) and must hand back everything it did
 * not change exactly as it came: key order, unknown fields, the exact text of
 * numbers (big integers, precise floats), YAML scalar styles and tags (`!Ref`).
 * A doc_node is that document, not a model of it. This is why the documents
 * diagport rewrites are not read with jansson, which refuses integers past
 * 64 bits, reprints reals and knows nothing of YAML; jansson stays the
 * library for the JSON diagport composes itself (the agent's API bodies).
 *
 * Ownership, in one sentence: every node belongs to exactly one parent (a root
 * belongs to whoever made or read it); functions that put a node into a
 * collection *steal* it, lookups return *borrowed* pointers, and doc_free()
 * frees a node and everything under it.
 *
 * Scalars keep their source text in `text`: a string's decoded UTF-8 value, a
 * number's lexeme as written ("1e400", "0x1F" in YAML), "true"/"yes"/"null" as
 * written. `type` is what the text means (YAML plain scalars are resolved
 * when read: YAML 1.2 core schema plus the YAML 1.1 booleans yes/no/on/off/y/n
 * that Kubernetes' YAML reader accepts). Nodes made in memory have line 0.
 */
#ifndef DP_DOC_H
#define DP_DOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"

enum doc_type { DOC_NULL, DOC_BOOL, DOC_NUMBER, DOC_STRING, DOC_MAP, DOC_SEQ };

/* How a node was written (YAML); DOC_STYLE_ANY lets the writer choose. */
enum doc_style {
	DOC_STYLE_ANY = 0,
	DOC_STYLE_PLAIN,
	DOC_STYLE_SINGLE,
	DOC_STYLE_DOUBLE,
	DOC_STYLE_LITERAL,
	DOC_STYLE_FOLDED,
	DOC_STYLE_FLOW, /* collections written as [..] / {..} */
};

struct doc_node {
	enum doc_type type;
	enum doc_style style;
	uint32_t line, col; /* 1-based source position; 0 when made in memory */
	char *tag;          /* YAML tag as written ("!Ref", "tag:yaml.org,2002:str"), or NULL */
	char *text;         /* scalars: NUL-terminated text (see above); NULL for collections */
	size_t len;         /* scalars: bytes in text (a JSON string may hold \u0000) */
	size_t n;           /* collections: number of items (pairs for a map) */
	size_t alloc;
	struct doc_node **keys; /* maps: key nodes (scalars), parallel to vals */
	struct doc_node **vals; /* maps: values; seqs: items */
	/*
	 * YAML anchors, for the writer only (everything else reads the data):
	 * `anchor` names a node written `&name`; `alias` marks a node that is a
	 * copy of `*name` (doc_copy makes every copy so: a copy of an anchored
	 * node is an alias of it, and never defines an anchor of its own). The
	 * writer writes `*name` only where that means exactly this node's data,
	 * and the node in full otherwise, so an edited copy is simply written out.
	 */
	char *anchor, *alias;
};

/* ---- making nodes (each returns a new node the caller owns) ---- */
struct doc_node *doc_map(void);
struct doc_node *doc_seq(void);
struct doc_node *doc_str(const char *s);              /* DOC_STRING */
struct doc_node *doc_strn(const char *s, size_t len);
struct doc_node *doc_num(const char *lexeme);         /* DOC_NUMBER with this exact text */
struct doc_node *doc_int(long long v);                /* DOC_NUMBER */
struct doc_node *doc_bool(bool v);
struct doc_node *doc_null(void);
/* A scalar of any type with exact text (used by readers). */
struct doc_node *doc_scalar(enum doc_type type, const char *text, size_t len);
/* Deep copy, positions kept; a node's anchor X (or alias X) becomes alias X in the copy. */
struct doc_node *doc_copy(const struct doc_node *n);
void doc_free(struct doc_node *n);                    /* accepts NULL */

/* ---- reading (all borrowed; NULL when absent or of another type) ---- */
/* The value under key `k` of map m (NULL if m is not a map or has no such key). */
struct doc_node *doc_get(const struct doc_node *m, const char *k);
/* Index of key k in map m, or -1. */
long doc_find(const struct doc_node *m, const char *k);
/* Follow a path of keys separated by '/', e.g. "spec/template/spec". */
struct doc_node *doc_path(const struct doc_node *m, const char *path);
/* The text of a DOC_STRING node, or NULL (for any other type, or NULL n). */
const char *doc_strval(const struct doc_node *n);
/* String value of map m's key k if it is a string, else NULL. */
const char *doc_get_str(const struct doc_node *m, const char *k);
/*
 * The value of key k in map m as a YAML 1.1 reader that applies merge keys
 * sees it: m's own k, else from the maps under m's "<<" key (a map, or a
 * sequence of maps, each merged in turn with its own "<<"), the first that
 * has it winning. Borrowed; NULL when none has it. The tree keeps "<<" as
 * a plain key (written back as written); this only reads through it.
 */
struct doc_node *doc_get_merged(const struct doc_node *m, const char *k);
bool doc_is(const struct doc_node *n, enum doc_type t);
/* Deep equality of meaning: type, text (numbers compared by text), tags, order. */
bool doc_equal(const struct doc_node *a, const struct doc_node *b);
/*
 * Added for the readers: find a repeated key in map m (keys with the same
 * text, whatever their type). True with *second = the index of the first
 * repeat and *first = its earlier twin. Linear for small maps, a temporary
 * hash set above 16 keys, so it stays O(n) on a 10,000-resource template.
 */
bool doc_dup_key(const struct doc_node *m, size_t *first, size_t *second);
/* When map m has a duplicate key: fill em with "NAME:LINE:COL: duplicate key ..." and return DP_ESYNTAX; else 0. */
int doc_dup_error(const struct doc_node *m, const char *name, struct err_msg *em);

/* ---- changing (steal the node given) ---- */
/* Set m[k] = v: replaces in place when k exists (the old value is freed), else appends. */
void doc_set(struct doc_node *m, const char *k, struct doc_node *v);
/* Insert key k at index i (0..n); k must not exist. */
void doc_insert_at(struct doc_node *m, size_t i, const char *k, struct doc_node *v);
/* Append the pair (key node k, value v) to map m, stealing both, without a duplicate check (readers check once per map). */
void doc_append_pair(struct doc_node *m, struct doc_node *k, struct doc_node *v);
/* Remove m[k] and free it; returns true when it was there. */
bool doc_del(struct doc_node *m, const char *k);
/* The map under m[k], created (appended) when absent. NULL when m[k] exists but is not a map. */
struct doc_node *doc_get_or_add_map(struct doc_node *m, const char *k, bool *created);
struct doc_node *doc_get_or_add_seq(struct doc_node *m, const char *k, bool *created);
void doc_push(struct doc_node *s, struct doc_node *v);            /* append to seq */
void doc_insert(struct doc_node *s, size_t i, struct doc_node *v); /* insert into seq at i */
void doc_remove(struct doc_node *s, size_t i);                    /* remove seq item i and free it */
/* Detach and return seq item i (the caller owns it). */
struct doc_node *doc_take(struct doc_node *s, size_t i);
/* Replace a scalar's text (keeps type, style, tag, position). */
void doc_set_text(struct doc_node *n, const char *text);

/*
 * ---- the journal: a tree as it was before it was changed ----
 * Between doc_journal_begin() and doc_journal_end(), on this thread and
 * inside an arena scope (mem.h; fatal otherwise), every change made through
 * the functions above first keeps a shallow snapshot of the node it
 * changes. doc_journal_before(root) then gives the tree under root as it
 * was at doc_journal_begin(): every subtree nothing touched is shared with
 * the live tree (the same nodes), the changed spine is made of snapshots.
 * The webhook diffs that against the changed tree instead of copying the
 * whole pod first. Everything is arena memory, gone with the scope.
 */
void doc_journal_begin(void);
struct doc_node *doc_journal_before(struct doc_node *root);
void doc_journal_end(void);
/* n is about to change: its snapshot is kept, once, when a journal is on. doc.c's changes call it. */
void doc_journal_touch(const struct doc_node *n);

/* ---- streams and I/O ---- */
enum doc_format { DOC_JSON, DOC_YAML };

/* What came in: one or more documents, and how they were written. */
struct doc_stream {
	enum doc_format format;
	struct doc_node **docs; /* owned */
	size_t n;
	int json_indent;        /* JSON: indent width seen in the input (0 = compact) */
	bool yaml_explicit_start; /* YAML: the first document began with "---" */
	const char *name;       /* for messages: the file name, or "<stdin>"; borrowed */
};

/* Caps on untrusted input, checked before the bytes are used. */
struct doc_limits {
	size_t max_bytes; /* whole input */
	size_t max_depth; /* nesting */
	size_t max_nodes; /* nodes in the whole stream, aliases expanded */
	/* how messages name the caps (a command's flags: "--max-input"); NULL: "max_bytes", "max_nodes" */
	const char *bytes_name, *nodes_name;
};
#define DOC_BYTES_NAME(l) ((l)->bytes_name ? (l)->bytes_name : "max_bytes")
#define DOC_NODES_NAME(l) ((l)->nodes_name ? (l)->nodes_name : "max_nodes")
extern const struct doc_limits doc_default_limits; /* 64 MiB, depth 256, 16M nodes */

/*
 * Parse `len` bytes as JSON (a value, or several separated by whitespace) or
 * YAML (a stream of documents). `name` names the input in messages (borrowed,
 * must outlive s). On failure returns DP_ESYNTAX / DP_ETOOBIG with em holding
 * "NAME:LINE:COL: what is wrong", and *s is untouched.
 * YAML aliases are expanded into copies (counted against max_nodes) that
 * remember their anchor, as doc_node's anchor and alias say, so the YAML
 * writer gives them back; duplicate map keys are a syntax error in both
 * formats.
 */
int doc_read_json(const char *bytes, size_t len, const char *name,
		  const struct doc_limits *lim, struct doc_stream *s, struct err_msg *em);
int doc_read_yaml(const char *bytes, size_t len, const char *name,
		  const struct doc_limits *lim, struct doc_stream *s, struct err_msg *em);
/* The format doc_read takes bytes to be in: JSON when the first non-blank byte is '{' or '[', else YAML. */
enum doc_format doc_sniff(const char *bytes, size_t len);
/* Pick the reader by the first non-blank byte ('{' or '[' = JSON), then parse. */
int doc_read(const char *bytes, size_t len, const char *name,
	     const struct doc_limits *lim, struct doc_stream *s, struct err_msg *em);
void doc_stream_free(struct doc_stream *s); /* frees the docs; s may be reused */

/*
 * doc_read, one document at a time: fn(ctx, s, doc, index) gets each
 * document (new: fn owns it) as soon as it is whole, in order, so a YAML
 * stream of many documents costs one document's tree at a time (JSON is read
 * whole first). *s is filled as doc_read fills it, but its docs stay empty
 * and s->n counts the documents handed over. The limits are the whole
 * stream's, as doc_read's. A non-zero return of fn stops the reading and is
 * returned; a document after the one that failed is not read.
 */
typedef int (*doc_each_fn)(void *ctx, const struct doc_stream *s, struct doc_node *doc, size_t index);
int doc_read_each(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
		  struct doc_stream *s, doc_each_fn fn, void *ctx, struct err_msg *em);
int doc_read_yaml_each(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
		       struct doc_stream *s, doc_each_fn fn, void *ctx, struct err_msg *em);
/*
 * A JSON object read around one of its arrays, an element at a time: a
 * Kubernetes List of thousands of objects costs one element's tree, not the
 * List's. doc_json_items_open splits `bytes` when they hold one JSON object
 * (and nothing after it but white space) with a member `key` whose value is
 * an array: it returns 1, *s holds that object as its one document (new, with
 * the array empty, in its place and position; the stream's format and indent
 * as doc_read_json gives them), *k is the member's index, and *it (new, freed
 * by doc_json_items_free) is at the array's first element. It returns 0
 * when the input is not of that shape or has an error or is over a cap: read
 * it whole then (doc_read_json), which names the first error as it always did.
 * doc_json_items_next puts the next element in *item (new: the caller owns
 * it) and returns 1, returns 0 after the last, or an error (DP_ESYNTAX,
 * DP_ETOOBIG) named as doc_read_json names it. The limits are the whole
 * input's: the object's values and every element's count against max_nodes.
 */
struct doc_json_items;
int doc_json_items_open(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
			const char *key, struct doc_json_items **it, struct doc_stream *s, size_t *k);
int doc_json_items_next(struct doc_json_items *it, struct doc_node **item, struct err_msg *em);
void doc_json_items_free(struct doc_json_items *it); /* accepts NULL */

/*
 * Write map m (the document of stream s) in JSON as doc_write_part writes it,
 * with the elements of the array at its member k (empty in m) given one at a
 * time: doc_write_json_open writes up to that array's '[', doc_write_json_item
 * element `index`, doc_write_json_close, given how many there were, the rest.
 * The three together give doc_write_part's bytes for m with those elements.
 */
int doc_write_json_open(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t k,
			struct err_msg *em);
int doc_write_json_item(struct buf *out, const struct doc_stream *s, const struct doc_node *item, size_t index,
			struct err_msg *em);
int doc_write_json_close(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t k,
			 size_t n, struct err_msg *em);

/*
 * The same for YAML, doc_yaml_items_*: `bytes` hold one YAML document, a
 * block mapping whose key `key` holds a block sequence, and neither it nor
 * the rest of the document has an anchor or an alias (an item could mean
 * another); else 0 (read it whole). libyaml reads the bytes twice: once for
 * the mapping (the sequence's events are only looked at), once for the items.
 */
struct doc_yaml_items;
int doc_yaml_items_open(const char *bytes, size_t len, const char *name, const struct doc_limits *lim,
			const char *key, struct doc_yaml_items **it, struct doc_stream *s, size_t *k);
int doc_yaml_items_next(struct doc_yaml_items *it, struct doc_node **item, struct err_msg *em);
void doc_yaml_items_free(struct doc_yaml_items *it); /* accepts NULL */
/*
 * Write map m (the one document of YAML stream s, as doc_yaml_items_open
 * gave it) as doc_write_part writes it, the items of the sequence at its
 * member k given one at a time: doc_write_yaml_open makes *w (new) and
 * writes up to the sequence, doc_write_yaml_item writes an item (libyaml's
 * emitter may hold the last few events back: the bytes come out in order),
 * doc_write_yaml_close the rest, and frees *w, as doc_write_yaml_free does
 * (accepts NULL) when the writing stops early.
 */
struct doc_yaml_list;
int doc_write_yaml_open(struct buf *out, const struct doc_stream *s, const struct doc_node *m, size_t k,
			struct doc_yaml_list **w, struct err_msg *em);
int doc_write_yaml_item(struct doc_yaml_list *w, const struct doc_node *item, struct err_msg *em);
int doc_write_yaml_close(struct doc_yaml_list *w, const struct doc_node *m, size_t k, struct err_msg *em);
void doc_write_yaml_free(struct doc_yaml_list *w);
/*
 * A writer's message starts with the node's "LINE:COL: " when it has a
 * position: put the stream's name in front, the way the readers do.
 */
void doc_name_message(struct err_msg *em, const char *name);

/* Nodes in the tree under n (n included), as the readers count them against max_nodes. */
size_t doc_count(const struct doc_node *n);

/*
 * Write one node as JSON to out: `indent` spaces per level (0 = compact, no
 * spaces). Numbers are written as their text when it is valid JSON, else
 * converted (YAML 0x1F, 1_000, .5, +1); YAML booleans and nulls as JSON ones.
 * A node with a tag fails with DP_EUNSUPPORTED (convert tags first). Ends
 * with a newline when indent > 0.
 */
int doc_write_json(struct buf *out, const struct doc_node *n, int indent, struct err_msg *em);
/* doc_write_json's bytes for n written `level` levels deep (its inner lines indented so), without the newline at the end. */
int doc_write_json_at(struct buf *out, const struct doc_node *n, int indent, int level, struct err_msg *em);
/* Append s[0..len) as a JSON string literal, escaped as the writer escapes. 0 or DP_ETOOBIG. */
int doc_json_string(struct buf *out, const char *s, size_t len);
/*
 * Write documents as a YAML stream (block style, 2-space indent, no line
 * folding, UTF-8). Scalars keep their style where YAML allows it; a string
 * with DOC_STYLE_ANY is plain when that reads back as the same string, else
 * double-quoted. Tags are written as given. Anchors are written `&name`; a
 * node marked as alias X is written `*X` when the last `&X` written before
 * it in this document is a node equal to it (doc_equal), else in full. The
 * output always reads back as the tree's data. Documents after the first
 * are preceded by "---"; the first too when explicit_start.
 */
int doc_write_yaml(struct buf *out, struct doc_node *const *docs, size_t n, bool explicit_start,
		   struct err_msg *em);
/* Write the stream in `fmt` (JSON: one value per document, each followed by a newline). */
int doc_write(struct buf *out, const struct doc_stream *s, enum doc_format fmt, struct err_msg *em);
/*
 * Write document `index` of stream s (its format, indent and explicit start
 * as s says) in `fmt`: writing each document of a stream in turn gives
 * doc_write's bytes, so a stream read with doc_read_each can be written as it
 * is read.
 */
int doc_write_part(struct buf *out, const struct doc_stream *s, const struct doc_node *doc, size_t index,
		   enum doc_format fmt, struct err_msg *em);

#endif
