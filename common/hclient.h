/*
 * hclient.h - diagport's outbound HTTP calls, on libcurl.
 *
 * libcurl is loaded (dlopen) on the first call rather than linked: it brings
 * some twenty libraries with it, about 3 MiB of resident memory in every
 * process that maps them, and the capture agent, which runs in every pod,
 * makes no outbound call. The subcommands that do (`diagport health`) load
 * it when they need it.
 */
#ifndef DP_HCLIENT_H
#define DP_HCLIENT_H

#include "errors.h"

/*
 * GET url, discard the body, and give the HTTP status in *status. 0, or
 * DP_EIO with em (libcurl missing, connection refused, timeout).
 */
int hclient_get_status(const char *url, long timeout_ms, long *status, struct err_msg *em);

#endif
