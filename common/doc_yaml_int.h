/*
 * doc_yaml_int.h - what the YAML reader (doc_yaml.c) and writer
 * (doc_yaml_write.c) share: how a plain scalar reads (doc_yaml_scalar.c).
 * Private to those three.
 */
#ifndef DP_DOC_YAML_INT_H
#define DP_DOC_YAML_INT_H

#include "doc.h"

#define STD_TAG "tag:yaml.org,2002:"

/* The type a plain scalar's text has: YAML 1.2 core schema plus the YAML 1.1 booleans. */
enum doc_type doc_yaml_plain_type(const char *s, size_t len);
/* True for text a YAML 1.1 reader may take for a non-string though we read a string (1_000, "<<"). */
bool doc_yaml_11_special(const char *s, size_t len);
/* False for a short tag libyaml writes but cannot read back (',', '[' or ']' in it). */
bool doc_yaml_tag_writable(const char *tag);
/* The type a standard tag ("tag:yaml.org,2002:int", "!!int") gives in *t; false for other tags. */
bool doc_yaml_std_tag_type(const char *tag, enum doc_type *t);

#endif
