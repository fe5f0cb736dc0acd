/*
 * webc_proxy.c - webc through an HTTP proxy (webc.h's proxy option,
 * webc_int.h): which proxy the environment names for a URL, as libcurl
 * reads it (the fleet client's AWS calls went through libcurl before they
 * went through webc, and honour the same variables, as the AWS CLI does),
 * the proxy URL taken apart, and the proxy's answer to CONNECT read. Pure
 * but for getenv: the bytes go through webc.c's connection.
 *
 * Only http:// proxies: an https:// or socks proxy is refused by name
 * rather than passed over, so a call never leaves by a road nobody chose.
 */
#include "webc_int.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "base64.h"
#include "mem.h"

#define PROXY_PORT "1080" /* libcurl's default for a proxy URL without one */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

/* Whether host is no_proxy's entry e[0..n): "*", the host itself, or a domain above it (a leading dot or none). */
static bool no_proxy_entry(const char *host, const char *e, size_t n)
{
	size_t hl = strlen(host);

	if (n == 1 && e[0] == '*')
		return true;
	if (n > 0 && e[0] == '.')
		e++, n--;
	else if (n > 1 && e[0] == '[' && e[n - 1] == ']') /* an IPv6 address, as the URL writes it */
		e++, n -= 2;
	if (n == 0 || n > hl)
		return false;
	if (n == hl)
		return strncasecmp(host, e, n) == 0;
	return host[hl - n - 1] == '.' && strncasecmp(host + hl - n, e, n) == 0;
}

static bool no_proxy(const char *host)
{
	const char *list = env("no_proxy") ? env("no_proxy") : env("NO_PROXY");

	while (list && *list) {
		size_t n;

		list += strspn(list, ", \t");
		n = strcspn(list, ", \t");
		if (n > 0 && no_proxy_entry(host, list, n))
			return true;
		list += n;
	}
	return false;
}

char *webc_proxy_env(const char *url)
{
	bool https = strncasecmp(url, "https://", 8) == 0;
	const char *a = url + (https ? 8 : 7), *p, *end;
	char *host;
	bool skip;

	if (!https && strncasecmp(url, "http://", 7) != 0)
		return NULL;
	p = https ? (env("https_proxy") ? env("https_proxy") : env("HTTPS_PROXY")) : env("http_proxy");
	if (p == NULL)
		p = env("all_proxy") ? env("all_proxy") : env("ALL_PROXY");
	if (p == NULL)
		return NULL;
	end = a + strcspn(a, "/?#");
	if (memchr(a, '@', (size_t)(end - a)))
		a = (const char *)memchr(a, '@', (size_t)(end - a)) + 1;
	if (*a == '[') {
		const char *rb = memchr(a, ']', (size_t)(end - a));

		host = mem_strndup(a + 1, rb ? (size_t)(rb - a - 1) : 0);
	} else {
		host = mem_strndup(a, strcspn(a, ":/?#"));
	}
	skip = no_proxy(host);
	mem_free(host);
	return skip ? NULL : mem_strdup(p);
}

/* s[0..n) with %XX decoded (as libcurl decodes a proxy URL's user and password): a new string. */
static char *pct_decode(const char *s, size_t n)
{
	char *out = mem_alloc(n + 1), *o = out;

	for (size_t i = 0; i < n; i++) {
		if (s[i] == '%' && i + 2 < n && isxdigit((unsigned char)s[i + 1]) && isxdigit((unsigned char)s[i + 2])) {
			char hex[3] = { s[i + 1], s[i + 2], '\0' };

			*o++ = (char)strtol(hex, NULL, 16);
			i += 2;
		} else {
			*o++ = s[i];
		}
	}
	*o = '\0';
	return out;
}

int webc_proxy_parse(const char *proxy, struct webc_proxy *out, struct err_msg *em)
{
	const char *a = proxy, *end, *at, *colon, *port = NULL;
	unsigned char v6[16];
	long v = 0;

	memset(out, 0, sizeof(*out));
	if (strstr(proxy, "://")) {
		if (strncasecmp(proxy, "http://", 7) != 0)
			return err_set(em, DP_EINVAL, "the proxy %.*s is not an http:// proxy, the only kind webc speaks to",
				       (int)strcspn(proxy, ":"), proxy);
		a = proxy + 7;
	}
	end = a + strcspn(a, "/?#");
	if ((at = memchr(a, '@', (size_t)(end - a))) != NULL) {
		char *user, *pass, *cred, *b64;
		size_t un;

		colon = memchr(a, ':', (size_t)(at - a));
		un = (size_t)((colon ? colon : at) - a);
		user = pct_decode(a, un);
		pass = colon ? pct_decode(colon + 1, (size_t)(at - colon - 1)) : mem_strdup("");
		cred = mem_printf("%s:%s", user, pass);
		b64 = b64_encode(cred, strlen(cred), NULL);
		out->auth = mem_printf("Proxy-Authorization: Basic %s", b64);
		mem_wipe(b64, strlen(b64));
		mem_wipe(pass, strlen(pass));
		mem_wipe(cred, strlen(cred));
		mem_free(b64);
		mem_free(user);
		mem_free(pass);
		mem_free(cred);
		a = at + 1;
	}
	if (*a == '[') {
		const char *rb = memchr(a, ']', (size_t)(end - a));

		out->host = mem_strndup(a + 1, rb ? (size_t)(rb - a - 1) : 0);
		if (rb == NULL || inet_pton(AF_INET6, out->host, v6) != 1 || (rb + 1 != end && rb[1] != ':'))
			goto bad;
		port = rb + 1 != end ? rb + 2 : NULL;
	} else {
		colon = memchr(a, ':', (size_t)(end - a));
		out->host = mem_strndup(a, (size_t)((colon ? colon : end) - a));
		if (out->host[0] == '\0')
			goto bad;
		port = colon ? colon + 1 : NULL;
	}
	if (port == NULL) {
		snprintf(out->port, sizeof(out->port), "%s", PROXY_PORT);
		return 0;
	}
	for (const char *d = port; d < end; d++) {
		if (*d < '0' || *d > '9' || (v = v * 10 + (*d - '0')) > 65535)
			goto bad;
	}
	if (v == 0)
		goto bad;
	snprintf(out->port, sizeof(out->port), "%ld", v);
	return 0;
bad:
	webc_proxy_free(out);
	return err_set(em, DP_EINVAL, "the proxy's host or port is not valid");
}

void webc_proxy_free(struct webc_proxy *p)
{
	if (p->auth)
		mem_wipe(p->auth, strlen(p->auth));
	mem_free(p->auth);
	mem_free(p->host);
	memset(p, 0, sizeof(*p));
}

int webc_proxy_answer(const char *data, size_t n, size_t *head_len, int *status, struct err_msg *em)
{
	const char *end = memmem(data, n, "\r\n\r\n", 4);

	if (end == NULL)
		return n > WEBC_HEAD_MAX ? err_set(em, DP_EREMOTE, "the proxy's answer to CONNECT passes %d bytes",
						   WEBC_HEAD_MAX) : 0;
	if (n < 12 || memcmp(data, "HTTP/1.", 7) != 0 || data[8] != ' ' || !isdigit((unsigned char)data[9]) ||
	    !isdigit((unsigned char)data[10]) || !isdigit((unsigned char)data[11]))
		return err_set(em, DP_EREMOTE, "the proxy's answer to CONNECT is not HTTP/1.x");
	*status = (data[9] - '0') * 100 + (data[10] - '0') * 10 + (data[11] - '0');
	*head_len = (size_t)(end - data) + 4;
	return 1;
}
