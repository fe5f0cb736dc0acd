/*
 * http_parse.h - parsing an HTTP/1.x request head (request line and
 * headers) from untrusted bytes, in place, for the HTTP server (httpd.c).
 *
 * Pure functions over a buffer the caller owns: no allocation, no I/O, every
 * length bounded by the buffer, so it can be fuzzed (tests/fuzz/fuzz_http.c).
 * What is accepted is RFC 9112's grammar, strictly: a token method, an
 * origin-form target ("/path?query"), HTTP/1.0 or HTTP/1.1, "name: value"
 * headers with token names; obsolete line folding, bare CR or LF line ends
 * other than a lone LF, and control bytes are refused.
 */
#ifndef DP_HTTP_PARSE_H
#define DP_HTTP_PARSE_H

#include <stdbool.h>
#include <stddef.h>

#define HTTP_MAX_HEADERS 64
#define HTTP_MAX_PARAMS 32

struct http_header {
	const char *name, *value; /* NUL-terminated, inside the buffer */
};

struct http_param {
	const char *key, *value; /* percent-decoded ('+' is a space), inside the buffer */
};

struct http_request {
	const char *method;
	const char *path;  /* percent-decoded */
	int minor;         /* HTTP/1.minor */
	struct http_header headers[HTTP_MAX_HEADERS];
	size_t n_headers;
	struct http_param params[HTTP_MAX_PARAMS];
	size_t n_params;
};

/*
 * The length of the request head in buf (through the blank line), or 0 when
 * the blank line has not arrived yet.
 */
size_t http_head_length(const char *buf, size_t len);

/*
 * Parse the head of length n (from http_head_length) in place: the buffer is
 * modified and the request's strings point into it. 0, or the HTTP status to
 * answer with: 400 (malformed), 414 (target over 8 KiB), 431 (more than
 * HTTP_MAX_HEADERS headers or HTTP_MAX_PARAMS parameters), 505 (not HTTP/1.x).
 */
int http_parse_head(char *buf, size_t n, struct http_request *out);

/* The first header named name (any letter case), or NULL. */
const char *http_header(const struct http_request *r, const char *name);
/* The first query parameter named key (exact), or NULL. */
const char *http_param(const struct http_request *r, const char *key);

#endif
