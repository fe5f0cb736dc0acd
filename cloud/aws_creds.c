/*
 * aws_creds.c - the standard AWS credential chain (aws_creds.h), in the
 * SDKs' order: the environment, the shared
 * credentials and config files (static keys, credential_process, a role
 * with a web identity token file), web identity from the environment (STS
 * AssumeRoleWithWebIdentity), the container credentials endpoint, IMDSv2.
 * A source that is not configured is passed over and its reason kept for
 * the final message; a source that is configured but fails stops the chain,
 * named, as the SDKs do. Credentials with an Expiration are renewed before
 * they lapse (aws_creds_fresh). Secrets are wiped wherever they were held
 * and never reach a message. The sources reached over HTTP are
 * aws_creds_remote.c's; region, endpoints and time aws_creds_env.c's
 * (aws_creds_int.h).
 */
#include "aws_creds_int.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "aws_profile.h"
#include "buf.h"
#include "mem.h"

#define REFRESH_BEFORE_S 300L       /* renew five minutes before Expiration */

void aws_creds_free(struct aws_creds *c)
{
	if (c == NULL)
		return;
	free(c->access_key);
	if (c->secret_key) {
		mem_wipe(c->secret_key, strlen(c->secret_key));
		free(c->secret_key);
	}
	if (c->token) {
		mem_wipe(c->token, strlen(c->token));
		free(c->token);
	}
	memset(c, 0, sizeof(*c));
}

void aws_creds_copy(struct aws_creds *out, const struct aws_creds *c)
{
	*out = *c;
	out->access_key = c->access_key ? mem_strdup(c->access_key) : NULL;
	out->secret_key = c->secret_key ? mem_strdup(c->secret_key) : NULL;
	out->token = c->token ? mem_strdup(c->token) : NULL;
}

/* ---- the shared files: static keys, credential_process, a role with a web identity token file ---- */

static int from_process(const struct aws_profile *p, const char *cmd, struct aws_creds *out, struct err_msg *em)
{
	char what[160];
	struct buf b;
	FILE *f;
	int rc, st;

	snprintf(what, sizeof(what), "credential_process of profile %s", p->name);
	fflush(stdout);
	if ((f = popen(cmd, "r")) == NULL) /* NOLINT(cert-env33-c): the user's own configured command */
		return err_set(em, DP_EAUTH, "%s: cannot run it: %s", what, strerror(errno));
	buf_init(&b, AWS_CREDS_MAX_ANSWER);
	rc = buf_read_fd(&b, fileno(f));
	st = pclose(f);
	if (rc != 0)
		rc = err_set(em, DP_EAUTH, "%s: its output is over %zu bytes or did not read", what, AWS_CREDS_MAX_ANSWER);
	else if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
		rc = err_set(em, DP_EAUTH, "%s: it exited with status %d", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
	else
		rc = aws_creds_from_json(b.data ? b.data : "", b.len, "SessionToken", what, out, em);
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

/* 1 when the profile has no credentials of a kind we take (why says what it has), 0 when out is set. */
static int from_profile(const struct aws_creds_opts *o, const struct aws_profile *p, struct aws_creds *out, char *why,
			size_t wn, struct err_msg *em)
{
	const char *ak = aws_profile_get(p, "aws_access_key_id"), *sk = aws_profile_get(p, "aws_secret_access_key");
	const char *proc = aws_profile_get(p, "credential_process"), *wif = aws_profile_get(p, "web_identity_token_file");
	const char *role = aws_profile_get(p, "role_arn");
	const char *other[] = { "role_arn", "sso_session", "sso_start_url" };

	if (ak && sk && *ak && *sk) {
		const char *tk = aws_profile_get(p, "aws_session_token");

		out->access_key = mem_strdup(ak);
		out->secret_key = mem_strdup(sk);
		out->token = tk && *tk ? mem_strdup(tk) : NULL;
		snprintf(out->source, sizeof(out->source), "profile %s in %s", p->name,
			 aws_profile_ini_get(&p->cred, "aws_access_key_id") ? p->cred.path : p->conf.path);
		return 0;
	}
	if (ak || sk)
		return err_set(em, DP_EAUTH, "profile %s has %s but not %s", p->name,
			       ak ? "aws_access_key_id" : "aws_secret_access_key",
			       ak ? "aws_secret_access_key" : "aws_access_key_id");
	if (proc && *proc)
		return from_process(p, proc, out, em);
	if (wif && *wif && role && *role)
		return aws_creds_web_identity(o, wif, role, aws_profile_get(p, "role_session_name"), out, em);
	for (size_t i = 0; i < sizeof(other) / sizeof(other[0]); i++)
		if (aws_profile_get(p, other[i]))
			return err_set(em, DP_EAUTH, "profile %s uses %s, which diagport does not support; export "
						     "credentials first (aws configure export-credentials --profile %s "
						     "--format env)", p->name, other[i], p->name);
	if (!p->cred.found && !p->conf.found)
		snprintf(why, wn, "profile %s: not in %s or %s", p->name, p->cred.path, p->conf.path);
	else
		snprintf(why, wn, "profile %s: no keys in it", p->name);
	return 1;
}

/* ---- the chain ---- */

int aws_creds_load(const struct aws_creds_opts *o, struct aws_creds *out, struct err_msg *em)
{
	const char *ak = aws_creds_env("AWS_ACCESS_KEY_ID"), *sk = aws_creds_env("AWS_SECRET_ACCESS_KEY");
	char why[5][400] = { "", "", "", "", "" };
	struct aws_creds c = { 0 };
	struct aws_profile p;
	int rc;

	if (o->profile) {
		snprintf(why[0], sizeof(why[0]), "environment: skipped, a profile was named");
	} else if (ak && sk) {
		c.access_key = mem_strdup(ak);
		c.secret_key = mem_strdup(sk);
		c.token = aws_creds_env("AWS_SESSION_TOKEN") ? mem_strdup(aws_creds_env("AWS_SESSION_TOKEN")) : NULL;
		snprintf(c.source, sizeof(c.source), "the environment variables AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY");
		*out = c;
		return 0;
	} else if (ak || sk) {
		return err_set(em, DP_EAUTH, "the environment has %s but not %s", ak ? "AWS_ACCESS_KEY_ID" : "AWS_SECRET_ACCESS_KEY",
			       ak ? "AWS_SECRET_ACCESS_KEY" : "AWS_ACCESS_KEY_ID");
	} else {
		snprintf(why[0], sizeof(why[0]), "environment: AWS_ACCESS_KEY_ID is not set");
	}
	if (aws_profile_read(o->profile, o->profile_path, &p, em) != 0) {
		aws_profile_free(&p);
		return DP_EINVAL;
	}
	if (p.named && !p.cred.found && !p.conf.found) {
		rc = err_set(em, DP_EINVAL, "AWS profile %s is not in %s or %s", p.name, p.cred.path, p.conf.path);
		aws_profile_free(&p);
		return rc;
	}
	rc = from_profile(o, &p, &c, why[1], sizeof(why[1]), em);
	aws_profile_free(&p);
	if (rc == 1)
		rc = aws_creds_from_web_identity_env(o, &c, why[2], sizeof(why[2]), em);
	if (rc == 1)
		rc = aws_creds_from_container(o, &c, why[3], sizeof(why[3]), em);
	if (rc == 1)
		rc = aws_creds_from_imds(o, &c, why[4], sizeof(why[4]), em);
	if (rc == 1)
		return err_set(em, DP_EAUTH, "no AWS credentials found: %s; %s; %s; %s; %s", why[0], why[1], why[2], why[3],
			       why[4]);
	if (rc != 0) {
		aws_creds_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}

int aws_creds_fresh(const struct aws_creds_opts *o, struct aws_creds *c, bool *renewed, struct err_msg *em)
{
	long before = o->refresh_before_s > 0 ? o->refresh_before_s : REFRESH_BEFORE_S;
	time_t now = time(NULL);
	struct aws_creds n = { 0 };
	struct err_msg e = { "" };
	int rc;

	if (renewed)
		*renewed = false;
	if (c->expires == 0 || now + before < c->expires)
		return 0;
	if ((rc = aws_creds_load(o, &n, &e)) != 0) {
		if (now < c->expires)
			return 0; /* still good for a while: try again on the next call */
		return err_set(em, rc, "the AWS credentials from %s lapsed and could not be renewed: %s", c->source, e.text);
	}
	aws_creds_free(c);
	*c = n;
	if (renewed)
		*renewed = true;
	return 0;
}

