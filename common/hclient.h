/*
 * hclient.h - diagport's outbound HTTP calls, on libcurl.
 *
 * libcurl is loaded (dlopen) on the first call rather than linked: it brings
 * some twenty libraries with it, about 3 MiB of resident memory in every
 * process that maps them, and the capture agent, which runs in every pod,
 * makes no outbound call. The subcommands that do (`diagport health`,
 * `diagport webhook certs`) load it when they need it.
 */
#ifndef DP_HCLIENT_H
#define DP_HCLIENT_H

#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "errors.h"

/*
 * GET url, drop the body, and give the HTTP status in *status: hclient_request
 * with the system's trust store. 0, or DP_EIO with em (libcurl missing,
 * connection refused, timeout).
 */
int hclient_get_status(const char *url, long timeout_ms, long *status, struct err_msg *em);

/* One request. Everything is borrowed for the duration of the call. */
struct hclient_req {
	const char *method;         /* "GET", "POST", "PUT", "PATCH", ... */
	const char *url;
	const char *const *headers; /* "Name: value" lines, NULL-terminated; may be NULL. libcurl's
				       copies are wiped after the call (they may hold a token) */
	const char *body;           /* sent as is, body_len bytes; NULL: no body */
	size_t body_len;
	const char *ca_file;        /* verify the server against the CAs in this PEM file only;
				       NULL: the system's trust store */
	bool https_only;            /* refuse any scheme but https:// (also on redirects, which are not followed) */
	long timeout_ms;            /* the whole request, connecting included */
};

/*
 * Send req and read the answer: 0 with the HTTP status in *status and the
 * body appended to resp (whose cap limits it; NULL: the body is read and
 * dropped), whatever the status. DP_EIO
 * with em when no answer came (libcurl missing, name not resolved,
 * connection refused, the server's certificate not verified, timeout),
 * DP_ETOOBIG when the body passes resp's cap, DP_EINVAL for a URL that
 * https_only refuses. em names the method and URL, never a header.
 */
int hclient_request(const struct hclient_req *req, long *status, struct buf *resp, struct err_msg *em);

#endif
