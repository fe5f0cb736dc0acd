/*
 * hclient.c - outbound HTTP through a libcurl loaded on demand (hclient.h).
 *
 * The types and constants come from curl.h, so the calls are checked by the
 * compiler as if linked; only the symbols are found at run time. The
 * GnuTLS build of libcurl is tried first (what Debian's libcurl4-gnutls-dev
 * builds against), then the OpenSSL one.
 *
 * Why loaded and not linked: libcurl's ~20 libraries cost ~3 MiB of resident
 * memory in every process that maps them, and the agent, the same binary,
 * makes no outbound call through it.
 */
#include "hclient.h"

#include <curl/curl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "dynlib.h"
#include "mem.h"

static const char *const sonames[] = { "libcurl-gnutls.so.4", "libcurl.so.4", NULL };

static struct hclient_lib lib;

static const struct dynlib_sym syms[] = {
	DYNLIB_SYM(curl_easy_init, lib.easy_init),	     DYNLIB_SYM(curl_easy_setopt, lib.easy_setopt),
	DYNLIB_SYM(curl_easy_perform, lib.easy_perform),     DYNLIB_SYM(curl_easy_getinfo, lib.easy_getinfo),
	DYNLIB_SYM(curl_easy_cleanup, lib.easy_cleanup),     DYNLIB_SYM(curl_easy_strerror, lib.easy_strerror),
	DYNLIB_SYM(curl_slist_append, lib.slist_append),     DYNLIB_SYM(curl_slist_free_all, lib.slist_free_all),
	DYNLIB_SYM(curl_easy_send, lib.easy_send),	     DYNLIB_SYM(curl_easy_recv, lib.easy_recv),
};
static struct dynlib curl_lib = DYNLIB_INIT("libcurl", sonames, syms);

struct sink {
	struct buf *b;
	bool too_big;
};

static size_t collect(char *p, size_t size, size_t n, void *u)
{
	struct sink *s = u;

	if (s->b == NULL)
		return size * n; /* the caller wants the status only */
	if (buf_append(s->b, p, size * n) != 0) {
		s->too_big = true;
		return 0; /* libcurl stops with CURLE_WRITE_ERROR */
	}
	return size * n;
}

const struct hclient_lib *hclient_lib(struct err_msg *em)
{
	return dynlib_load(&curl_lib, em) == 0 ? &lib : NULL;
}

void hclient_free_headers(struct curl_slist *h)
{
	for (struct curl_slist *i = h; i; i = i->next)
		if (i->data)
			mem_wipe(i->data, strlen(i->data));
	lib.slist_free_all(h);
}

/*
 * For server_name: the URL with its host replaced by name, and the libcurl
 * CURLOPT_CONNECT_TO entry that sends name's connections to the real host,
 * so that TLS (SNI and verification) sees name. Both new; 0 or DP_EINVAL.
 */
static int rename_host(const char *url, const char *name, char **new_url, char **connect_to)
{
	const char *h = strstr(url, "://"), *e, *port;
	size_t hlen;

	if (h == NULL)
		return DP_EINVAL;
	h += 3;
	if (*h == '[') {
		if ((e = strchr(h, ']')) == NULL)
			return DP_EINVAL;
		e++;
	} else {
		e = h + strcspn(h, ":/?#");
	}
	hlen = (size_t)(e - h);
	port = *e == ':' ? e + 1 : (strncasecmp(url, "https", 5) == 0 ? "443" : "80");
	*new_url = mem_printf("%.*s%s%s", (int)(h - url), url, name, e);
	*connect_to = mem_printf("%s:%.*s:%.*s:%.*s", name, (int)strspn(port, "0123456789"), port, (int)hlen, h,
				 (int)strspn(port, "0123456789"), port);
	return 0;
}

int hclient_request(const struct hclient_req *req, long *status, struct buf *resp, struct err_msg *em)
{
	struct curl_slist *headers = NULL, *connect_to = NULL;
	char *url = NULL, *ct = NULL;
	struct sink sink = { .b = resp };
	char errbuf[CURL_ERROR_SIZE] = "";
	size_t start = resp ? resp->len : 0;
	long code = 0;
	CURL *c = NULL;
	CURLcode rc;
	int ret = 0;

	if (req->https_only && strncasecmp(req->url, "https://", 8) != 0)
		return err_set(em, DP_EINVAL, "%s %s: only https:// URLs are allowed here", req->method, req->url);
	if (dynlib_load(&curl_lib, em) != 0) {
		err_prefix(em, "%s %s", req->method, req->url);
		return DP_ENOLIB;
	}
	if ((c = lib.easy_init()) == NULL)
		return err_set(em, DP_EIO, "%s %s: libcurl could not start", req->method, req->url);
	/* no "Expect: 100-continue" wait before a body: the servers we call answer at once */
	headers = lib.slist_append(headers, "Expect:");
	for (size_t i = 0; req->headers && req->headers[i]; i++)
		if (headers)
			headers = lib.slist_append(headers, req->headers[i]);
	if (headers == NULL) {
		ret = err_set(em, DP_EIO, "%s %s: libcurl could not allocate the headers", req->method, req->url);
		goto out;
	}
	if (req->server_name) {
		if (rename_host(req->url, req->server_name, &url, &ct) != 0 ||
		    (connect_to = lib.slist_append(NULL, ct)) == NULL) {
			ret = err_set(em, DP_EINVAL, "%s %s: cannot verify the server as %s", req->method, req->url,
				      req->server_name);
			goto out;
		}
		lib.easy_setopt(c, CURLOPT_CONNECT_TO, connect_to);
	}
	lib.easy_setopt(c, CURLOPT_URL, url ? url : req->url);
	if (req->proxy)
		lib.easy_setopt(c, CURLOPT_PROXY, req->proxy);
	lib.easy_setopt(c, CURLOPT_CUSTOMREQUEST, req->method);
	lib.easy_setopt(c, CURLOPT_HTTPHEADER, headers);
	if (req->body) {
		lib.easy_setopt(c, CURLOPT_POSTFIELDS, req->body);
		lib.easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)req->body_len);
	} else {
		lib.easy_setopt(c, CURLOPT_HTTPGET, 1L);
	}
	if (req->https_only) {
		lib.easy_setopt(c, CURLOPT_PROTOCOLS_STR, "https");
		lib.easy_setopt(c, CURLOPT_REDIR_PROTOCOLS_STR, "https");
	}
	lib.easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
	lib.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 1L);
	lib.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 2L);
	if (req->ca_file) {
		lib.easy_setopt(c, CURLOPT_CAINFO, req->ca_file);
		lib.easy_setopt(c, CURLOPT_CAPATH, (char *)NULL); /* this CA only, not also the system's directory */
	}
	if (req->insecure) {
		lib.easy_setopt(c, CURLOPT_SSL_VERIFYPEER, 0L);
		lib.easy_setopt(c, CURLOPT_SSL_VERIFYHOST, 0L);
	}
	if (req->cert_file) {
		lib.easy_setopt(c, CURLOPT_SSLCERT, req->cert_file);
		lib.easy_setopt(c, CURLOPT_SSLKEY, req->key_file);
	}
	lib.easy_setopt(c, CURLOPT_TIMEOUT_MS, req->timeout_ms);
	lib.easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, req->timeout_ms);
	lib.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	lib.easy_setopt(c, CURLOPT_ERRORBUFFER, errbuf);
	lib.easy_setopt(c, CURLOPT_WRITEFUNCTION, collect);
	lib.easy_setopt(c, CURLOPT_WRITEDATA, &sink);
	rc = lib.easy_perform(c);
	if (sink.too_big) {
		ret = err_set(em, DP_ETOOBIG, "%s %s: the response is larger than %zu bytes", req->method, req->url,
			      resp ? resp->cap : 0); /* too_big is only set with a resp */
	} else if (rc != CURLE_OK) {
		ret = err_set(em, DP_EIO, "%s %s: %s", req->method, req->url, errbuf[0] ? errbuf : lib.easy_strerror(rc));
	} else {
		lib.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
		*status = code;
	}
out:
	if (ret != 0 && resp && resp->data) {
		mem_wipe(resp->data + start, resp->len - start); /* a partial body may hold a secret */
		resp->len = start;
		resp->data[start] = '\0';
	}
	if (headers)
		hclient_free_headers(headers);
	if (connect_to)
		lib.slist_free_all(connect_to);
	free(url);
	free(ct);
	lib.easy_cleanup(c);
	return ret;
}

