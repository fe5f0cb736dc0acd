/*
 * hclient.c - outbound HTTP through a libcurl loaded on demand (hclient.h).
 *
 * The types and constants come from curl.h, so the calls are checked by the
 * compiler as if linked; only the symbols are found at run time. The
 * GnuTLS build of libcurl is tried first (what Debian's libcurl4-gnutls-dev
 * builds against), then the OpenSSL one.
 */
#include "hclient.h"

#include <curl/curl.h>
#include <dlfcn.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>

static const char *const sonames[] = { "libcurl-gnutls.so.4", "libcurl.so.4" };

static struct {
	CURL *(*easy_init)(void);
	CURLcode (*easy_setopt)(CURL *, CURLoption, ...);
	CURLcode (*easy_perform)(CURL *);
	CURLcode (*easy_getinfo)(CURL *, CURLINFO, ...);
	void (*easy_cleanup)(CURL *);
	const char *(*easy_strerror)(CURLcode);
	char error[256];
} lib;

static pthread_once_t once = PTHREAD_ONCE_INIT;

static void load(void)
{
	void *h = NULL;

	for (size_t i = 0; h == NULL && i < sizeof(sonames) / sizeof(sonames[0]); i++)
		h = dlopen(sonames[i], RTLD_NOW | RTLD_LOCAL);
	if (h == NULL) {
		const char *why = dlerror();

		snprintf(lib.error, sizeof(lib.error), "libcurl is not installed (%s)", why ? why : "dlopen failed");
		return;
	}
	*(void **)&lib.easy_init = dlsym(h, "curl_easy_init");
	*(void **)&lib.easy_setopt = dlsym(h, "curl_easy_setopt");
	*(void **)&lib.easy_perform = dlsym(h, "curl_easy_perform");
	*(void **)&lib.easy_getinfo = dlsym(h, "curl_easy_getinfo");
	*(void **)&lib.easy_cleanup = dlsym(h, "curl_easy_cleanup");
	*(void **)&lib.easy_strerror = dlsym(h, "curl_easy_strerror");
	if (!lib.easy_init || !lib.easy_setopt || !lib.easy_perform || !lib.easy_getinfo || !lib.easy_cleanup ||
	    !lib.easy_strerror) {
		snprintf(lib.error, sizeof(lib.error), "the libcurl found lacks the easy interface");
		lib.easy_init = NULL;
	}
}

static size_t discard(char *p, size_t size, size_t n, void *u)
{
	(void)p;
	(void)u;
	return size * n;
}

int hclient_get_status(const char *url, long timeout_ms, long *status, struct err_msg *em)
{
	CURL *c;
	CURLcode rc;
	long code = 0;

	pthread_once(&once, load);
	if (lib.easy_init == NULL)
		return err_set(em, DP_EIO, "%s: %s", url, lib.error);
	if ((c = lib.easy_init()) == NULL)
		return err_set(em, DP_EIO, "%s: libcurl could not start", url);
	lib.easy_setopt(c, CURLOPT_URL, url);
	lib.easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
	lib.easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
	lib.easy_setopt(c, CURLOPT_WRITEFUNCTION, discard);
	rc = lib.easy_perform(c);
	if (rc == CURLE_OK)
		lib.easy_getinfo(c, CURLINFO_RESPONSE_CODE, &code);
	lib.easy_cleanup(c);
	if (rc != CURLE_OK)
		return err_set(em, DP_EIO, "%s: %s", url, lib.easy_strerror(rc));
	*status = code;
	return 0;
}
