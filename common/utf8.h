/*
 * utf8.h - text from outside made safe for JSON: jansson refuses strings
 * that are not valid UTF-8, and the bytes diagport reports come from pods,
 * runtimes, files and request lines. Invalid sequences become U+FFFD.
 */
#ifndef DP_UTF8_H
#define DP_UTF8_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* True when s[0..n) is valid UTF-8 (RFC 3629: no overlong forms, no surrogates, nothing past U+10FFFF). */
bool utf8_valid(const char *s, size_t n);
/* A new jansson string of s[0..n) (NULL s: an empty one), each invalid sequence replaced by U+FFFD. */
json_t *utf8_json(const char *s, size_t n);
/* The same for a NUL-terminated string. */
json_t *utf8_json_str(const char *s);

#endif
