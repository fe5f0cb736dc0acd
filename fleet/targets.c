/*
 * targets.c - static targets: agents named by URL on the command line
 * (--target URL, repeatable) or in a file (--targets-file), one a line:
 *
 *     # comments and blank lines are ignored
 *     http://10.0.3.17:52323  name=orders-a  workload=orders
 *     http://10.0.3.18:52323  name=orders-b  workload=orders  token-file=/run/orders-token
 *     https://10.0.3.19:52323 name=orders-c  servername=orders-diag.shop.svc
 *
 * A target's name defaults to its host and port; its workload (what
 * --max-unavailable counts) to itself. Errors name the file and line. The
 * same URL twice is an error (two captures would race on one agent). A
 * token-file= must be the user's own and private (not readable by group or
 * others), as ssh asks of a key: a targets file from elsewhere must not be
 * able to send any readable file to any URL.
 */
#include "targets.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "buf.h"
#include "mem.h"

#define MAX_FILE ((size_t)4 * 1024 * 1024)
#define MAX_TOKEN 4096
#define MAX_TARGETS 10000

/* The token in file (trailing white space removed): new, or NULL with em. */
char *fleet_read_token(const char *file, struct err_msg *em)
{
	struct buf b;
	char *t;

	buf_init(&b, MAX_TOKEN);
	if (buf_read_path(&b, file, NULL, em) != 0) {
		buf_free(&b);
		return NULL;
	}
	while (b.len && strchr(" \t\r\n", b.data[b.len - 1]))
		b.data[--b.len] = '\0';
	if (b.len == 0 || memchr(b.data, '\n', b.len) || memchr(b.data, '\0', b.len)) {
		err_set(em, DP_EINVAL, "%s: %s", file, b.len ? "the token must be one line" : "the file is empty");
		mem_wipe(b.data, b.len);
		buf_free(&b);
		return NULL;
	}
	t = buf_steal(&b, NULL);
	return t;
}

/* Check url is http(s)://HOST[:PORT][/PATH] and give its name (host:port) and port. */
static int parse_url(const char *url, char **name, int *port, struct err_msg *em)
{
	const char *h, *end, *colon;
	size_t n = strlen(url);
	bool https = strncmp(url, "https://", 8) == 0;

	if (!https && strncmp(url, "http://", 7) != 0)
		return err_set(em, DP_EINVAL, "'%.200s' is not an http:// or https:// URL", url);
	if (n > 2048 || strpbrk(url, " \t\r\n?#"))
		return err_set(em, DP_EINVAL, "'%.200s': an agent's URL is a scheme, a host, a port and at most a path "
			       "prefix (no query, no spaces)", url);
	h = url + (https ? 8 : 7);
	end = h + strcspn(h, "/");
	if (end == h)
		return err_set(em, DP_EINVAL, "'%.200s' has no host", url);
	if (*h == '[') { /* [IPv6]:port */
		const char *rb = memchr(h, ']', (size_t)(end - h));

		if (rb == NULL)
			return err_set(em, DP_EINVAL, "'%.200s' has an unclosed '['", url);
		colon = rb + 1 < end && rb[1] == ':' ? rb + 1 : NULL;
	} else {
		colon = memchr(h, ':', (size_t)(end - h));
	}
	*port = https ? 443 : 80;
	if (colon) {
		char *e;
		long p = strtol(colon + 1, &e, 10);

		if (e != end || p < 1 || p > 65535)
			return err_set(em, DP_EINVAL, "'%.200s' has a bad port", url);
		*port = (int)p;
	}
	*name = mem_printf("%.*s", (int)(end - h), h);
	return 0;
}

/* A token file named in a targets file: a regular file of the user's, not readable by group or others. */
static int private_file(const char *path, struct err_msg *em)
{
	struct stat st;

	if (stat(path, &st) != 0)
		return err_set(em, DP_EINVAL, "token-file %s: %s", path, strerror(errno));
	if (!S_ISREG(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 0077) != 0)
		return err_set(em, DP_EINVAL, "token-file %s must be a file of your own that only you can read "
			       "(chmod 600), as it is sent to the target", path);
	return 0;
}

static int add_target(struct fleet_set *s, const char *url, const char *name, const char *workload,
		      const char *token_file, const char *servername, const char *token, struct err_msg *em)
{
	struct fleet_agent *a;
	char *host = NULL, *tok = NULL;
	int port = 0, rc;
	size_t len = strlen(url);

	if (s->n >= MAX_TARGETS)
		return err_set(em, DP_ETOOBIG, "more than %d targets", MAX_TARGETS);
	if ((rc = parse_url(url, &host, &port, em)) != 0)
		return rc;
	while (len && url[len - 1] == '/')
		len--;
	for (size_t i = 0; i < s->n; i++)
		if (strlen(s->v[i].url) == len && strncmp(s->v[i].url, url, len) == 0) {
			free(host);
			return err_set(em, DP_EINVAL, "%.*s is listed twice (as %s already)", (int)len, url, s->v[i].name);
		}
	if (servername && (!fleet_dns_name_ok(servername) || strncmp(url, "https://", 8) != 0)) {
		free(host);
		return err_set(em, DP_EINVAL, "servername=%.100s: %s", servername,
			       strncmp(url, "https://", 8) != 0 ? "goes with an https:// URL only"
								: "not a DNS name (letters, digits, '-' and '.')");
	}
	if (token_file && (rc = private_file(token_file, em)) != 0) {
		free(host);
		return rc;
	}
	if (token_file && (tok = fleet_read_token(token_file, em)) == NULL) {
		free(host);
		return DP_EINVAL;
	}
	a = fleet_set_add(s);
	a->url = mem_strndup(url, len);
	a->port = port;
	a->name = mem_strdup(name ? name : host);
	a->workload = workload ? mem_strdup(workload) : NULL;
	a->tls_name = servername ? mem_strdup(servername) : NULL;
	a->token = tok ? tok : token ? mem_strdup(token) : NULL;
	free(host);
	return 0;
}

int fleet_targets_add_url(struct fleet_set *s, const char *url, const char *token, struct err_msg *em)
{
	int rc = add_target(s, url, NULL, NULL, NULL, NULL, token, em);

	if (rc != 0)
		err_prefix(em, "--target");
	return rc;
}

/* One line's "key=value" words after the URL. */
static int line_target(struct fleet_set *s, char *line, const char *token, struct err_msg *em)
{
	char *save = NULL, *url = strtok_r(line, " \t", &save), *w;
	const char *name = NULL, *workload = NULL, *token_file = NULL, *servername = NULL;

	while ((w = strtok_r(NULL, " \t", &save)) != NULL) {
		if (strncmp(w, "name=", 5) == 0 && w[5])
			name = w + 5;
		else if (strncmp(w, "workload=", 9) == 0 && w[9])
			workload = w + 9;
		else if (strncmp(w, "token-file=", 11) == 0 && w[11])
			token_file = w + 11;
		else if (strncmp(w, "servername=", 11) == 0 && w[11])
			servername = w + 11;
		else
			return err_set(em, DP_EINVAL, "'%.100s' is not name=, workload=, token-file= or servername=", w);
	}
	if (name && (strchr(name, '/') || strcmp(name, ".") == 0 || strcmp(name, "..") == 0))
		return err_set(em, DP_EINVAL, "name '%.100s' may not contain '/' (it names files)", name);
	return add_target(s, url, name, workload, token_file, servername, token, em);
}

int fleet_targets_add_file(struct fleet_set *s, const char *file, const char *token, struct err_msg *em)
{
	struct buf b;
	char *p, *nl;
	unsigned line = 0;
	int rc;

	buf_init(&b, MAX_FILE);
	if ((rc = buf_read_path(&b, file, NULL, em)) != 0) {
		buf_free(&b);
		return rc;
	}
	if (b.data && memchr(b.data, '\0', b.len)) {
		size_t at = (size_t)((char *)memchr(b.data, '\0', b.len) - b.data), ln = 1;

		for (size_t i = 0; i < at; i++)
			ln += b.data[i] == '\n';
		buf_free(&b);
		return err_set(em, DP_EINVAL, "%s:%zu: a NUL byte (this is not a text file)", file, ln);
	}
	for (p = b.data ? b.data : (char *)""; *p; p = nl ? nl + 1 : p + strlen(p)) {
		char *t;

		line++;
		if ((nl = strchr(p, '\n')) != NULL)
			*nl = '\0';
		for (t = p + strlen(p); t > p && strchr(" \t\r", t[-1]); t--)
			t[-1] = '\0';
		while (*p == ' ' || *p == '\t')
			p++;
		if (*p == '\0' || *p == '#')
			continue;
		if ((rc = line_target(s, p, token, em)) != 0) {
			err_prefix(em, "%s:%u", file, line);
			break;
		}
		if (nl == NULL)
			break;
	}
	buf_free(&b);
	if (rc == 0 && s->n == 0)
		rc = err_set(em, DP_EINVAL, "%s: no targets in it", file);
	return rc;
}
