/*
 * hclient.h - diagport's outbound HTTP calls, on libcurl: the Kubernetes
 * API, OIDC, the agents the fleet client reaches. AWS calls are not here:
 * every one of them, and every credential endpoint, goes through
 * cloud/webc.h, which the static egress process can use.
 *
 * libcurl is loaded (dlopen) on the first call rather than linked: it brings
 * some twenty libraries with it, about 3 MiB of resident memory in every
 * process that maps them, and the capture agent, which runs in every pod,
 * makes no outbound call. The subcommands that do (`diagport health`,
 * `diagport webhook certs`) load it when they need it.
 */
#ifndef DP_HCLIENT_H
#define DP_HCLIENT_H

#include <curl/curl.h>
#include <stdbool.h>
#include <stddef.h>

#include "buf.h"
#include "errors.h"

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
	const char *cert_file;      /* a client certificate (PEM) and its key, or NULL (a path may be
				       /proc/self/fd/N: a memfd holding kubeconfig's *-data) */
	const char *key_file;
	bool insecure;              /* do not verify the server (kubeconfig's insecure-skip-tls-verify) */
	bool https_only;            /* refuse any scheme but https:// (also on redirects, which are not followed) */
	long timeout_ms;            /* the whole request, connecting included */
	const char *proxy;          /* a proxy URL (http://, https://, socks5://: kubeconfig's proxy-url), or NULL:
				       libcurl's own (the https_proxy, no_proxy environment variables) */
	const char *server_name;    /* verify the server's certificate as this name, not the URL's host
				       (kubeconfig's tls-server-name), or NULL */
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

/*
 * libcurl itself, for callers that drive a transfer (the fleet client's
 * streaming captures and its port-forward tunnels): the one table of libcurl's
 * functions, loaded once per process. NULL with em (DP_ENOLIB) when libcurl
 * is missing. Borrowed, valid for the process.
 */
struct hclient_lib {
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	CURLcode (*easy_send)(CURL *, const void *, size_t, size_t *);
	CURLcode (*easy_recv)(CURL *, void *, size_t, size_t *);
	struct curl_slist *(*slist_append)(struct curl_slist *, const char *);
	void (*slist_free_all)(struct curl_slist *);
};
const struct hclient_lib *hclient_lib(struct err_msg *em);

/* Free a header list after wiping its strings (one of them may hold a token). */
void hclient_free_headers(struct curl_slist *h);

#endif
