/*
 * kexec.c - exec credential plugins (kexec.h), as client-go's
 * plugin/pkg/client/auth/exec runs them.
 *
 * The plugin is spawned (posix_spawn) with stdin on /dev/null (we never
 * run one interactively, and say so in KUBERNETES_EXEC_INFO), stderr shared
 * with ours (its prompts and warnings reach the person), stdout read
 * through a pipe with a deadline and a cap. Its answer is an ExecCredential
 * of the apiVersion the kubeconfig names: a bearer token, or a client
 * certificate and key in PEM. The output is wiped once read.
 */
#include "kexec.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "buf.h"
#include "clock.h"
#include "mem.h"

#define MAX_OUT ((size_t)1 << 20)
#define MAX_ARGS 256
#define MAX_ENV 4096

extern char **environ;

static const char *const versions[] = { "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1",
					NULL };

void kexec_cred_free(struct kexec_cred *c)
{
	char **s[] = { &c->token, &c->cert_pem, &c->key_pem };

	for (size_t i = 0; i < 3; i++)
		if (*s[i]) {
			mem_wipe(*s[i], strlen(*s[i]));
			free(*s[i]);
			*s[i] = NULL;
		}
}

/* argv (NULL-terminated, strings borrowed from the doc) from command and args. */
static int build_argv(const struct kexec_spec *s, const char *cmd, const char **argv, struct err_msg *em)
{
	const struct doc_node *args = doc_get(s->exec, "args");
	size_t n = 0;

	argv[n++] = cmd;
	if (args && args->type != DOC_NULL && args->type != DOC_SEQ)
		return err_set(em, DP_EINVAL, "%s.args: not a list", s->where);
	for (size_t i = 0; args && args->type == DOC_SEQ && i < args->n; i++) {
		if (args->vals[i]->type == DOC_MAP || args->vals[i]->type == DOC_SEQ)
			return err_set(em, DP_EINVAL, "%s.args[%zu]: not a string", s->where, i);
		if (n + 1 >= MAX_ARGS)
			return err_set(em, DP_EINVAL, "%s.args: more than %d", s->where, MAX_ARGS - 2);
		argv[n++] = args->vals[i]->text;
	}
	argv[n] = NULL;
	return 0;
}

static bool env_named(const char *entry, const char *name)
{
	size_t n = strlen(name);

	return strncmp(entry, name, n) == 0 && entry[n] == '=';
}

/* envp: ours, without what env overrides, then env's, then KUBERNETES_EXEC_INFO (all new strings). */
static int build_env(const struct kexec_spec *s, const char *info, char **envp, struct err_msg *em)
{
	const struct doc_node *env = doc_get(s->exec, "env");
	size_t n = 0;

	if (env && env->type != DOC_NULL && env->type != DOC_SEQ)
		return err_set(em, DP_EINVAL, "%s.env: not a list", s->where);
	for (size_t i = 0; env && env->type == DOC_SEQ && i < env->n; i++) {
		const char *name = doc_get_str(env->vals[i], "name"), *value = doc_get_str(env->vals[i], "value");

		if (name == NULL || !name[0] || strchr(name, '=') || value == NULL)
			return err_set(em, DP_EINVAL, "%s.env[%zu]: needs a name and a string value", s->where, i);
	}
	for (char **e = environ; *e && n + 2 < MAX_ENV; e++) {
		bool over = env_named(*e, "KUBERNETES_EXEC_INFO");

		for (size_t i = 0; env && env->type == DOC_SEQ && i < env->n && !over; i++)
			over = env_named(*e, doc_get_str(env->vals[i], "name"));
		if (!over)
			envp[n++] = mem_strdup(*e);
	}
	for (size_t i = 0; env && env->type == DOC_SEQ && i < env->n && n + 2 < MAX_ENV; i++)
		envp[n++] = mem_printf("%s=%s", doc_get_str(env->vals[i], "name"), doc_get_str(env->vals[i], "value"));
	envp[n++] = mem_printf("KUBERNETES_EXEC_INFO=%s", info);
	envp[n] = NULL;
	return 0;
}

/* KUBERNETES_EXEC_INFO: an ExecCredential with spec.interactive false (and the cluster, when asked). New. */
static char *exec_info(const struct kexec_spec *s, const char *version, bool cluster_info)
{
	json_t *spec = json_pack("{s:b}", "interactive", 0), *o;
	char *txt;

	if (cluster_info && s->cluster)
		json_object_set(spec, "cluster", s->cluster);
	o = json_pack("{s:s, s:s, s:o}", "kind", "ExecCredential", "apiVersion", version, "spec", spec);
	txt = json_dumps(o, JSON_COMPACT);
	json_decref(o);
	return txt;
}

/* Read the child's stdout until EOF, the cap or the deadline. 0, DP_ETOOBIG or DP_ECANCELED (time). */
static int read_out(int fd, struct buf *out, long long deadline)
{
	char chunk[4096];

	for (;;) {
		struct pollfd p = { .fd = fd, .events = POLLIN };
		long long left = deadline - clock_ms();
		ssize_t r;

		if (left <= 0)
			return DP_ECANCELED;
		if (poll(&p, 1, (int)(left > 1000 ? 1000 : left)) < 0 && errno != EINTR)
			return DP_EIO;
		if (p.revents == 0)
			continue;
		r = read(fd, chunk, sizeof(chunk));
		if (r < 0 && (errno == EINTR || errno == EAGAIN))
			continue;
		if (r <= 0)
			break;
		if (buf_append(out, chunk, (size_t)r) != 0) {
			mem_wipe(chunk, sizeof(chunk));
			return DP_ETOOBIG;
		}
	}
	mem_wipe(chunk, sizeof(chunk));
	return 0;
}

/* Wait for pid until the deadline (then kill it). 0 with *status, or DP_ECANCELED. */
static int reap(pid_t pid, long long deadline, int *status)
{
	for (;;) {
		pid_t w = waitpid(pid, status, WNOHANG);
		struct timespec t = { 0, 10L * 1000 * 1000 };

		if (w == pid)
			return 0;
		if (w < 0 && errno != EINTR)
			return DP_EIO;
		if (clock_ms() >= deadline) {
			kill(pid, SIGKILL);
			waitpid(pid, status, 0);
			return DP_ECANCELED;
		}
		nanosleep(&t, NULL);
	}
}

/* The ExecCredential in out, for the plugin cmd. */
static int parse_cred(const struct kexec_spec *s, const char *cmd, const char *version, const struct buf *out,
		      struct kexec_cred *cred, struct err_msg *em)
{
	json_error_t jerr;
	json_t *j = json_loadb(out->data ? out->data : "", out->len, 0, &jerr), *st;
	const char *kind, *av, *tok, *cert, *key;
	int rc = 0;

	if (!json_is_object(j)) {
		json_decref(j);
		return err_set(em, DP_EAUTH, "%s: %s printed no ExecCredential (not a JSON object)", s->where, cmd);
	}
	kind = json_string_value(json_object_get(j, "kind"));
	av = json_string_value(json_object_get(j, "apiVersion"));
	st = json_object_get(j, "status");
	tok = json_string_value(json_object_get(st, "token"));
	cert = json_string_value(json_object_get(st, "clientCertificateData"));
	key = json_string_value(json_object_get(st, "clientKeyData"));
	if (kind == NULL || strcmp(kind, "ExecCredential") != 0)
		rc = err_set(em, DP_EAUTH, "%s: %s printed a %s, not an ExecCredential", s->where, cmd,
			     kind ? kind : "document without a kind");
	else if (av == NULL || strcmp(av, version) != 0)
		rc = err_set(em, DP_EAUTH, "%s: %s answered with apiVersion %s, the kubeconfig asks for %s", s->where, cmd,
			     av ? av : "(none)", version);
	else if ((cert == NULL) != (key == NULL) || (cert && (!cert[0] || !key[0])))
		rc = err_set(em, DP_EAUTH, "%s: %s: status.clientCertificateData and clientKeyData come together",
			     s->where, cmd);
	else if ((tok == NULL || !tok[0]) && cert == NULL)
		rc = err_set(em, DP_EAUTH, "%s: %s: the ExecCredential has no status.token and no client certificate",
			     s->where, cmd);
	else if (tok && strspn(tok, "!#$%&'*+-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[]^_`abcdefghijklmnopqrstuvwxyz{|}~\"(),\\") !=
			       strlen(tok))
		rc = err_set(em, DP_EAUTH, "%s: %s: status.token holds a byte a token cannot have", s->where, cmd);
	if (rc == 0) {
		cred->token = tok && tok[0] ? mem_strdup(tok) : NULL;
		cred->cert_pem = cert ? mem_strdup(cert) : NULL;
		cred->key_pem = key ? mem_strdup(key) : NULL;
	}
	/* jansson's copies of the strings: wipe what we can reach before freeing */
	if (tok)
		mem_wipe((char *)tok, strlen(tok));
	if (key)
		mem_wipe((char *)key, strlen(key));
	json_decref(j);
	return rc;
}

static int spawn_plugin(const struct kexec_spec *s, const char *path, bool search, const char **argv,
			char **envp, pid_t *pid, int *rfd, struct err_msg *em)
{
	posix_spawn_file_actions_t fa;
	int p[2], rc;

	if (pipe2(p, O_CLOEXEC) != 0)
		return err_set(em, DP_EIO, "%s: pipe: %s", s->where, strerror(errno));
	posix_spawn_file_actions_init(&fa);
	posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
	posix_spawn_file_actions_adddup2(&fa, p[1], 1);
	rc = search ? posix_spawnp(pid, path, &fa, NULL, (char *const *)argv, envp)
		    : posix_spawn(pid, path, &fa, NULL, (char *const *)argv, envp);
	posix_spawn_file_actions_destroy(&fa);
	close(p[1]);
	if (rc != 0) {
		close(p[0]);
		return rc;
	}
	*rfd = p[0];
	return 0;
}

int kexec_run(const struct kexec_spec *s, struct kexec_cred *out, struct err_msg *em)
{
	const char *argv[MAX_ARGS], *cmd, *version, *mode, *hint;
	char **envp = mem_array(MAX_ENV, sizeof(char *)), *info = NULL, *path = NULL;
	struct buf o;
	bool cluster_info = false, known = false;
	long long deadline = clock_ms() + s->timeout_ms;
	pid_t pid = 0;
	int rc, fd = -1, status = 0;
	const struct doc_node *pci = doc_get(s->exec, "provideClusterInfo");

	buf_init(&o, MAX_OUT);
	cmd = doc_get_str(s->exec, "command");
	version = doc_get_str(s->exec, "apiVersion");
	mode = doc_get_str(s->exec, "interactiveMode");
	hint = doc_get_str(s->exec, "installHint");
	for (size_t i = 0; version && versions[i]; i++)
		known = known || strcmp(version, versions[i]) == 0;
	if (cmd == NULL || !cmd[0]) {
		rc = err_set(em, DP_EINVAL, "%s.command: missing", s->where);
		goto out;
	}
	if (!known) {
		rc = err_set(em, DP_EINVAL, "%s.apiVersion: %s: not client.authentication.k8s.io/v1 or v1beta1", s->where,
			     version ? version : "missing");
		goto out;
	}
	if (strcmp(version, versions[0]) == 0 && mode == NULL) {
		rc = err_set(em, DP_EINVAL, "%s.interactiveMode: required with %s (Never, IfAvailable or Always)",
			     s->where, version);
		goto out;
	}
	if (mode && strcmp(mode, "Always") == 0) {
		rc = err_set(em, DP_EAUTH, "%s.interactiveMode: Always: %s needs a terminal, which diagport does not give "
					   "it; run it yourself (or kubectl) first, or change interactiveMode",
			     s->where, cmd);
		goto out;
	}
	if (mode && strcmp(mode, "Never") != 0 && strcmp(mode, "IfAvailable") != 0) {
		rc = err_set(em, DP_EINVAL, "%s.interactiveMode: %s: not Never, IfAvailable or Always", s->where, mode);
		goto out;
	}
	if (pci && pci->type == DOC_BOOL)
		cluster_info = strcmp(pci->text, "true") == 0;
	if ((rc = build_argv(s, cmd, argv, em)) != 0)
		goto out;
	info = exec_info(s, version, cluster_info);
	if ((rc = build_env(s, info, envp, em)) != 0)
		goto out;
	/* client-go: a command with a path separator is relative to the kubeconfig's directory */
	path = strchr(cmd, '/') && cmd[0] != '/' ? mem_printf("%s/%s", s->dir, cmd) : mem_strdup(cmd);
	rc = spawn_plugin(s, path, strchr(cmd, '/') == NULL, argv, envp, &pid, &fd, em);
	if (rc == DP_EIO)
		goto out;
	if (rc != 0) {
		rc = err_set(em, DP_EAUTH, "%s: cannot run %s: %s%s%s", s->where, path, strerror(rc),
			     hint ? ". " : "", hint ? hint : "");
		goto out;
	}
	rc = read_out(fd, &o, deadline);
	close(fd);
	if (rc != 0) {
		kill(pid, SIGKILL);
		waitpid(pid, &status, 0);
		rc = err_set(em, DP_EAUTH, "%s: %s %s", s->where, cmd,
			     rc == DP_ETOOBIG ? "printed more than 1 MiB"
			     : rc == DP_ECANCELED ? "did not answer in time, and was stopped"
						  : "could not be read");
		goto out;
	}
	if (reap(pid, deadline, &status) != 0) {
		rc = err_set(em, DP_EAUTH, "%s: %s did not exit in time, and was stopped", s->where, cmd);
		goto out;
	}
	if (WIFSIGNALED(status)) {
		rc = err_set(em, DP_EAUTH, "%s: %s was killed by signal %d", s->where, cmd, WTERMSIG(status));
		goto out;
	}
	if (WEXITSTATUS(status) != 0) {
		rc = err_set(em, DP_EAUTH, "%s: %s failed with exit status %d (its own message is above)", s->where, cmd,
			     WEXITSTATUS(status));
		goto out;
	}
	rc = parse_cred(s, cmd, version, &o, out, em);
out:
	for (size_t i = 0; envp[i]; i++)
		free(envp[i]);
	free(envp);
	free(info);
	free(path);
	if (o.data)
		mem_wipe(o.data, o.len);
	buf_free(&o);
	return rc;
}
