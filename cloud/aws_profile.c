/*
 * aws_profile.c - the AWS shared credentials and config files read as the
 * SDKs read them (aws_profile.h): a line-based INI reader under a size cap,
 * the profile's section of each file, values wiped when freed (they hold
 * secret keys).
 */
#include "aws_profile.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "buf.h"
#include "mem.h"

#define MAX_FILE ((size_t)1 << 20) /* a shared credentials or config file */

static const char *env(const char *name)
{
	const char *v = getenv(name);

	return v && *v ? v : NULL;
}

static void ini_free(struct aws_ini *s)
{
	for (size_t i = 0; i < s->n; i++) {
		free(s->k[i]);
		if (s->v[i])
			mem_wipe(s->v[i], strlen(s->v[i]));
		free(s->v[i]);
	}
	free(s->path);
	memset(s, 0, sizeof(*s));
}

const char *aws_profile_ini_get(const struct aws_ini *s, const char *key)
{
	for (size_t i = 0; i < s->n; i++)
		if (strcmp(s->k[i], key) == 0)
			return s->v[i];
	return NULL;
}

static char *trim(char *a, char *e)
{
	while (a < e && isspace((unsigned char)*a))
		a++;
	while (e > a && isspace((unsigned char)e[-1]))
		e--;
	*e = '\0';
	return a;
}

/* Is the header line [h] the section we want? Config files write "[profile NAME]" (and "[default]"). */
static bool section_is(const char *h, const char *profile, bool config)
{
	if (!config || strcmp(h, "default") == 0)
		return strcmp(h, profile) == 0;
	if (strncmp(h, "profile", 7) != 0 || !isspace((unsigned char)h[7]))
		return false;
	h += 7;
	while (isspace((unsigned char)*h))
		h++;
	return strcmp(h, profile) == 0;
}

/* Read section profile of the file path (a missing file is an empty one). DP_EIO/DP_ETOOBIG with em. */
static int ini_read(const char *path, const char *profile, bool config, struct aws_ini *out, struct err_msg *em)
{
	struct buf b;
	bool in = false, nested = false;
	char *line;
	int rc;

	memset(out, 0, sizeof(*out));
	out->path = mem_strdup(path);
	buf_init(&b, MAX_FILE);
	if ((rc = buf_read_path(&b, path, NULL, em)) != 0) {
		if (rc == DP_EIO && errno == ENOENT)
			rc = 0;
		goto out;
	}
	for (line = b.data; line && *line;) {
		char *nl = strchr(line, '\n'), *end = nl ? nl : line + strlen(line), *eq, *l;
		bool indented = isspace((unsigned char)*line);

		l = trim(line, end);
		line = nl ? nl + 1 : NULL;
		if (*l == '\0' || *l == '#' || *l == ';')
			continue;
		if (*l == '[' && l[strlen(l) - 1] == ']') {
			l[strlen(l) - 1] = '\0';
			in = section_is(trim(l + 1, l + strlen(l)), profile, config);
			out->found |= in;
			nested = false;
			continue;
		}
		if (!in || (eq = strchr(l, '=')) == NULL)
			continue;
		if (indented && nested)
			continue; /* "s3 =\n  max_concurrent_requests = 10": a nested setting */
		*eq = '\0';
		{
			char *k = trim(l, eq), *v = trim(eq + 1, eq + 1 + strlen(eq + 1));

			nested = *v == '\0';
			if (out->n < sizeof(out->k) / sizeof(out->k[0]) && !aws_profile_ini_get(out, k)) {
				out->k[out->n] = mem_strdup(k);
				out->v[out->n++] = mem_strdup(v);
			}
		}
	}
out:
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

static char *home_path(const char *envname, const char *rel)
{
	const char *e = env(envname), *home = env("HOME");

	if (e)
		return mem_strdup(e);
	return mem_printf("%s/%s", home ? home : "", rel);
}

int aws_profile_read(const char *explicit_name, const char *cred_path, struct aws_profile *p, struct err_msg *em)
{
	char *cpath = cred_path ? mem_strdup(cred_path) : home_path("AWS_SHARED_CREDENTIALS_FILE", ".aws/credentials");
	char *fpath = home_path("AWS_CONFIG_FILE", ".aws/config");
	int rc;

	memset(p, 0, sizeof(*p));
	p->name = explicit_name ? explicit_name : env("AWS_PROFILE") ? env("AWS_PROFILE") : "default";
	p->named = explicit_name || env("AWS_PROFILE");
	rc = ini_read(cpath, p->name, false, &p->cred, em);
	if (rc == 0)
		rc = ini_read(fpath, p->name, true, &p->conf, em);
	free(cpath);
	free(fpath);
	return rc;
}

void aws_profile_free(struct aws_profile *p)
{
	ini_free(&p->cred);
	ini_free(&p->conf);
}

const char *aws_profile_get(const struct aws_profile *p, const char *key)
{
	const char *v = aws_profile_ini_get(&p->cred, key);

	return v ? v : aws_profile_ini_get(&p->conf, key);
}
