/*
 * kubeconfig.c - the API server connection and credentials, read from
 * kubeconfig files the way kubectl reads them (kubeconfig.h, kconn.h; a
 * connection's copy and free are kconn.c's).
 *
 * The files: --kubeconfig alone, else $KUBECONFIG's colon-separated list
 * (missing files skipped) merged by kubectl's rules (the first file to
 * define a cluster, user or context name wins; current-context from the
 * first file that sets one), else ~/.kube/config, else the pod's service
 * account. Paths in an entry are relative to the directory of the file that
 * defined it. Inline data (certificate-authority-data, client-certificate-
 * data, client-key-data, a plugin's certificate) goes into memfds that
 * libcurl reads as /proc/self/fd/N: a key is never written to a disk. Every
 * message names the file and the field, as
 * "~/.kube/config: users[alice].user.token-file: cannot open ...".
 *
 * One idea at ~625 lines: kubectl's merge and resolution rules read top to
 * bottom (files, then clusters, users, contexts, then the chosen entry's
 * credentials); the copy and free of what it builds went to kconn.c.
 */
#include "kubeconfig.h"
#include "kconn.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base64.h"
#include "buf.h"
#include "doc.h"
#include "incluster.h"
#include "kexec.h"
#include "koidc.h"
#include "mem.h"

#define MAX_FILE ((size_t)4 << 20)  /* one kubeconfig file */
#define MAX_FILES 32                /* files in $KUBECONFIG */
#define MAX_DATA ((size_t)1 << 20)  /* one decoded *-data value */
#define MAX_TOKEN ((size_t)64 << 10)
#define MIN_EXEC_MS 10000L

struct kfile {
	char *path;  /* as opened */
	char *shown; /* for messages: $HOME/ written as ~/ */
	char *dir;   /* its directory, for relative paths */
	struct doc_node *root;
};

struct kfiles {
	struct kfile v[MAX_FILES];
	size_t n;
};

void kcfg_free(struct kcfg *c)
{
	if (c == NULL)
		return;
	kube_conn_clear(&c->conn);
	free(c->namespace_);
	free(c->user);
	free(c->source);
	memset(c, 0, sizeof(*c));
}

/* ---- helpers -------------------------------------------------------------- */

/* data[0..n) in a new memfd; *path "/proc/self/fd/N". */
static int to_memfd(const char *name, const void *data, size_t n, char **path, struct err_msg *em)
{
	char full[64];
	int fd;

	snprintf(full, sizeof(full), MEMFD_PREFIX "%s", name);
	fd = memfd_create(full, MFD_CLOEXEC);
	if (fd < 0)
		return err_set(em, DP_EIO, "memfd_create: %s", strerror(errno));
	for (size_t off = 0; off < n;) {
		ssize_t w = write(fd, (const char *)data + off, n - off);

		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			close(fd);
			return err_set(em, DP_EIO, "writing a memfd: %s", strerror(errno));
		}
		off += (size_t)w;
	}
	*path = mem_printf("/proc/self/fd/%d", fd);
	return 0;
}

static char *shown_path(const char *path)
{
	const char *home = getenv("HOME");
	size_t n = home ? strlen(home) : 0;

	if (n > 1 && strncmp(path, home, n) == 0 && path[n] == '/')
		return mem_printf("~%s", path + n);
	return mem_strdup(path);
}

static char *dir_of(const char *path)
{
	const char *slash = strrchr(path, '/');

	if (slash == NULL)
		return mem_strdup(".");
	if (slash == path)
		return mem_strdup("/");
	return mem_strndup(path, (size_t)(slash - path));
}

static char *resolve(const char *dir, const char *p)
{
	return p[0] == '/' ? mem_strdup(p) : mem_printf("%s/%s", dir, p);
}

/* A field that must be a string when present. 0 with *out (borrowed, NULL when absent) or DP_EINVAL. */
static int get_str(const struct doc_node *m, const char *key, const char *where, const char **out,
		   struct err_msg *em)
{
	const struct doc_node *v = doc_get(m, key);

	*out = NULL;
	if (v == NULL || v->type == DOC_NULL)
		return 0;
	if (v->type != DOC_STRING)
		return err_set(em, DP_EINVAL, "%s.%s: not a string", where, key);
	*out = v->text[0] ? v->text : NULL;
	return 0;
}

static int get_bool(const struct doc_node *m, const char *key, const char *where, bool *out, struct err_msg *em)
{
	const struct doc_node *v = doc_get(m, key);

	*out = false;
	if (v == NULL || v->type == DOC_NULL)
		return 0;
	if (v->type != DOC_BOOL)
		return err_set(em, DP_EINVAL, "%s.%s: not true or false", where, key);
	*out = strcmp(v->text, "true") == 0 || strcmp(v->text, "True") == 0 || strcmp(v->text, "TRUE") == 0 ||
	       strcmp(v->text, "yes") == 0 || strcmp(v->text, "on") == 0 || strcmp(v->text, "y") == 0;
	return 0;
}

/* base64 text at m[key] decoded into a memfd; *path NULL when absent. */
static int data_memfd(const struct doc_node *m, const char *key, const char *where, char **path,
		      struct err_msg *em)
{
	const char *txt;
	char *raw = NULL;
	size_t n = 0;
	int rc;

	*path = NULL;
	if ((rc = get_str(m, key, where, &txt, em)) != 0 || txt == NULL)
		return rc;
	rc = b64_decode(txt, strlen(txt), MAX_DATA, &raw, &n);
	if (rc != 0)
		return err_set(em, DP_EINVAL, "%s.%s: %s", where, key,
			       rc == DP_ETOOBIG ? "larger than 1 MiB" : "not base64");
	rc = to_memfd(key, raw, n, path, em);
	mem_wipe(raw, n);
	free(raw);
	if (rc != 0)
		err_prefix(em, "%s.%s", where, key);
	return rc;
}

/* A token file's content, trimmed: new, or DP_EINVAL. */
static int read_token(const char *path, const char *where, char **out, struct err_msg *em)
{
	struct buf b;
	size_t n;
	int rc;

	buf_init(&b, MAX_TOKEN);
	if ((rc = buf_read_path(&b, path, NULL, em)) != 0) {
		err_prefix(em, "%s", where);
		buf_free(&b);
		return rc == DP_ETOOBIG ? DP_EINVAL : rc;
	}
	n = b.len;
	while (n && (b.data[n - 1] == '\n' || b.data[n - 1] == '\r' || b.data[n - 1] == ' '))
		n--;
	rc = 0;
	for (size_t i = 0; i < n && rc == 0; i++)
		if ((unsigned char)b.data[i] < 0x21 || (unsigned char)b.data[i] > 0x7e)
			rc = err_set(em, DP_EINVAL, "%s: %s holds a byte a token cannot have", where, path);
	if (rc == 0 && n == 0)
		rc = err_set(em, DP_EINVAL, "%s: %s is empty", where, path);
	if (rc == 0)
		*out = mem_strndup(b.data, n);
	if (b.data)
		mem_wipe(b.data, b.len);
	buf_free(&b);
	return rc;
}

/* ---- the files ------------------------------------------------------------ */

static int check_list(const struct kfile *f, const char *list, const char *inner, struct err_msg *em)
{
	const struct doc_node *s = doc_get(f->root, list);

	if (s == NULL || s->type == DOC_NULL)
		return 0;
	if (s->type != DOC_SEQ)
		return err_set(em, DP_EINVAL, "%s: %s: not a list", f->shown, list);
	for (size_t i = 0; i < s->n; i++) {
		const struct doc_node *e = s->vals[i], *v;

		if (e->type != DOC_MAP || doc_get_str(e, "name") == NULL || !doc_get_str(e, "name")[0])
			return err_set(em, DP_EINVAL, "%s: %s[%zu]: an entry without a name", f->shown, list, i);
		v = doc_get(e, inner);
		if (v && v->type != DOC_MAP && v->type != DOC_NULL)
			return err_set(em, DP_EINVAL, "%s: %s[%s].%s: not a map", f->shown, list, doc_get_str(e, "name"),
				       inner);
	}
	return 0;
}

static int load_file(const char *path, struct kfile *f, bool must, struct err_msg *em)
{
	struct doc_stream st = { 0 };
	struct doc_limits lim = doc_default_limits;
	struct buf b;
	int rc;

	memset(f, 0, sizeof(*f));
	f->path = mem_strdup(path);
	f->shown = shown_path(path);
	f->dir = dir_of(path);
	if (!must && access(path, F_OK) != 0 && errno == ENOENT)
		return DP_ENOTFOUND;
	buf_init(&b, MAX_FILE);
	if (buf_read_path(&b, path, NULL, em) != 0) {
		buf_free(&b);
		return DP_EINVAL;
	}
	lim.max_bytes = MAX_FILE;
	lim.max_nodes = 200000;
	lim.max_depth = 64;
	rc = doc_read(b.data ? b.data : "", b.len, f->shown, &lim, &st, em);
	buf_free(&b);
	if (rc != 0)
		return DP_EINVAL;
	if (st.n == 0 || st.docs[0]->type == DOC_NULL) {
		f->root = doc_map(); /* an empty file is an empty configuration, as for kubectl */
	} else if (st.n > 1 || st.docs[0]->type != DOC_MAP) {
		doc_stream_free(&st);
		return err_set(em, DP_EINVAL, "%s: not a kubeconfig (one map with clusters, users, contexts)", f->shown);
	} else {
		f->root = st.docs[0];
		st.docs[0] = NULL;
		st.n = 0;
	}
	doc_stream_free(&st);
	if ((rc = check_list(f, "clusters", "cluster", em)) != 0 || (rc = check_list(f, "users", "user", em)) != 0 ||
	    (rc = check_list(f, "contexts", "context", em)) != 0)
		return rc;
	return 0;
}

static void files_free(struct kfiles *fs)
{
	for (size_t i = 0; i < fs->n; i++) {
		free(fs->v[i].path);
		free(fs->v[i].shown);
		free(fs->v[i].dir);
		doc_free(fs->v[i].root);
	}
	fs->n = 0;
}

/* Load the files kubectl would. DP_ENOTFOUND when there are none. */
static int load_files(const char *kubeconfig, struct kfiles *fs, struct err_msg *em)
{
	const char *env = getenv("KUBECONFIG"), *home = getenv("HOME");
	int rc;

	fs->n = 0;
	if (kubeconfig) {
		if ((rc = load_file(kubeconfig, &fs->v[0], true, em)) != 0) {
			fs->n = 1;
			return rc;
		}
		fs->n = 1;
		return 0;
	}
	if (env && env[0]) {
		char *list = mem_strdup(env), *save = NULL;

		rc = 0;
		for (char *p = strtok_r(list, ":", &save); p && rc == 0; p = strtok_r(NULL, ":", &save)) {
			bool seen = false;

			for (size_t i = 0; i < fs->n; i++)
				seen = seen || strcmp(fs->v[i].path, p) == 0;
			if (seen)
				continue;
			if (fs->n == MAX_FILES) {
				rc = err_set(em, DP_EINVAL, "KUBECONFIG: more than %d files", MAX_FILES);
				break;
			}
			rc = load_file(p, &fs->v[fs->n], false, em);
			fs->n++;
			if (rc == DP_ENOTFOUND) { /* kubectl skips the files that do not exist */
				fs->n--;
				free(fs->v[fs->n].path);
				free(fs->v[fs->n].shown);
				free(fs->v[fs->n].dir);
				rc = 0;
			}
		}
		free(list);
		if (rc != 0)
			return rc;
		return fs->n ? 0 : DP_ENOTFOUND;
	}
	if (home && home[0]) {
		char *p = mem_printf("%s/.kube/config", home);

		rc = load_file(p, &fs->v[0], false, em);
		free(p);
		fs->n = 1;
		if (rc == DP_ENOTFOUND) {
			files_free(fs);
			return DP_ENOTFOUND;
		}
		return rc;
	}
	return DP_ENOTFOUND;
}

/* The first entry named name in list across the files, and its file; NULL when none has it. */
static const struct doc_node *find_entry(const struct kfiles *fs, const char *list, const char *name,
					 const struct kfile **file)
{
	for (size_t i = 0; i < fs->n; i++) {
		const struct doc_node *s = doc_get(fs->v[i].root, list);

		for (size_t j = 0; s && s->type == DOC_SEQ && j < s->n; j++) {
			const char *n = doc_get_str(s->vals[j], "name");

			if (n && strcmp(n, name) == 0) {
				*file = &fs->v[i];
				return s->vals[j];
			}
		}
	}
	return NULL;
}

/* ---- cluster and user --------------------------------------------------- */

static int load_cluster(const struct kfile *f, const char *name, const struct doc_node *c, struct kube_conn *k,
			json_t *info, struct err_msg *em)
{
	char *where = mem_printf("%s: clusters[%s].cluster", f->shown, name);
	const char *server, *ca, *sni, *proxy;
	int rc;

	if ((rc = get_str(c, "server", where, &server, em)) != 0 ||
	    (rc = get_str(c, "certificate-authority", where, &ca, em)) != 0 ||
	    (rc = get_str(c, "tls-server-name", where, &sni, em)) != 0 ||
	    (rc = get_str(c, "proxy-url", where, &proxy, em)) != 0 ||
	    (rc = get_bool(c, "insecure-skip-tls-verify", where, &k->insecure, em)) != 0)
		goto out;
	if (server == NULL) {
		rc = err_set(em, DP_EINVAL, "%s.server: missing", where);
		goto out;
	}
	if (strncmp(server, "https://", 8) != 0 && strncmp(server, "http://", 7) != 0) {
		rc = err_set(em, DP_EINVAL, "%s.server: %s is not an http:// or https:// URL", where, server);
		goto out;
	}
	k->server = mem_strdup(server);
	for (size_t n = strlen(k->server); n > 8 && k->server[n - 1] == '/'; n--)
		k->server[n - 1] = '\0';
	if ((rc = data_memfd(c, "certificate-authority-data", where, &k->ca_file, em)) != 0)
		goto out;
	if (k->ca_file == NULL && ca)
		k->ca_file = resolve(f->dir, ca);
	if (sni)
		k->tls_server_name = mem_strdup(sni);
	if (proxy)
		k->proxy_url = mem_strdup(proxy);
	/* what an exec plugin with provideClusterInfo gets (client-go's clientauthentication.Cluster) */
	json_object_set_new(info, "server", json_string(k->server));
	if (sni)
		json_object_set_new(info, "tls-server-name", json_string(sni));
	if (proxy)
		json_object_set_new(info, "proxy-url", json_string(proxy));
	if (k->insecure)
		json_object_set_new(info, "insecure-skip-tls-verify", json_true());
	if (k->ca_file) {
		struct buf b;

		buf_init(&b, MAX_DATA);
		if (buf_read_path(&b, k->ca_file, NULL, NULL) == 0 && b.len) {
			char *e = b64_encode(b.data, b.len, NULL);

			json_object_set_new(info, "certificate-authority-data", json_string(e));
			free(e);
		}
		buf_free(&b);
	}
	{
		const struct doc_node *ext = doc_get(c, "extensions");

		for (size_t i = 0; ext && ext->type == DOC_SEQ && i < ext->n; i++) {
			const char *en = doc_get_str(ext->vals[i], "name");
			struct buf j;

			if (en == NULL || strcmp(en, "client.authentication.k8s.io/exec") != 0 ||
			    doc_get(ext->vals[i], "extension") == NULL)
				continue;
			buf_init(&j, MAX_DATA);
			if (doc_write_json(&j, doc_get(ext->vals[i], "extension"), 0, NULL) == 0)
				json_object_set_new(info, "config", json_loadb(j.data, j.len, 0, NULL));
			buf_free(&j);
		}
	}
out:
	free(where);
	return rc;
}

static int load_user(const struct kfile *f, const char *name, const struct doc_node *u, struct kube_conn *k,
		     json_t *info, long timeout_ms, struct err_msg *em)
{
	char *where = mem_printf("%s: users[%s].user", f->shown, name), *field = NULL;
	const char *cert, *key, *token, *token_file, *user, *pass;
	const struct doc_node *exec = doc_get(u, "exec"), *ap = doc_get(u, "auth-provider");
	int rc;

	if ((rc = get_str(u, "client-certificate", where, &cert, em)) != 0 ||
	    (rc = get_str(u, "client-key", where, &key, em)) != 0 || (rc = get_str(u, "token", where, &token, em)) != 0 ||
	    (rc = get_str(u, "tokenFile", where, &token_file, em)) != 0 ||
	    (rc = get_str(u, "username", where, &user, em)) != 0 ||
	    (rc = get_str(u, "password", where, &pass, em)) != 0)
		goto out;
	if ((rc = data_memfd(u, "client-certificate-data", where, &k->cert_file, em)) != 0 ||
	    (rc = data_memfd(u, "client-key-data", where, &k->key_file, em)) != 0)
		goto out;
	if (k->cert_file == NULL && cert)
		k->cert_file = resolve(f->dir, cert);
	if (k->key_file == NULL && key)
		k->key_file = resolve(f->dir, key);
	if ((k->cert_file == NULL) != (k->key_file == NULL)) {
		rc = err_set(em, DP_EINVAL, "%s: a client certificate needs a client key, and a key a certificate", where);
		goto out;
	}
	if (token) {
		k->token = mem_strdup(token);
	} else if (token_file) {
		char *p = resolve(f->dir, token_file);

		field = mem_printf("%s.tokenFile", where);
		rc = read_token(p, field, &k->token, em);
		free(p);
		if (rc != 0)
			goto out;
	}
	if (user || pass)
		k->basic = mem_printf("%s:%s", user ? user : "", pass ? pass : "");
	if (exec && exec->type != DOC_NULL) {
		struct kexec_cred cred = { 0 };
		struct kexec_spec spec = { .dir = f->dir, .exec = exec, .cluster = info,
					   .timeout_ms = timeout_ms > MIN_EXEC_MS ? timeout_ms : MIN_EXEC_MS };

		free(field);
		field = mem_printf("%s.exec", where);
		spec.where = field;
		if (exec->type != DOC_MAP) {
			rc = err_set(em, DP_EINVAL, "%s: not a map", field);
			goto out;
		}
		if ((rc = kexec_run(&spec, &cred, em)) != 0)
			goto out;
		if (cred.token) {
			kube_conn_secret_free(k->token);
			k->token = cred.token;
			cred.token = NULL;
		}
		if (cred.cert_pem) {
			kube_conn_path_free(k->cert_file);
			kube_conn_path_free(k->key_file);
			k->cert_file = k->key_file = NULL;
			if ((rc = to_memfd("exec-cert", cred.cert_pem, strlen(cred.cert_pem), &k->cert_file, em)) != 0 ||
			    (rc = to_memfd("exec-key", cred.key_pem, strlen(cred.key_pem), &k->key_file, em)) != 0) {
				kexec_cred_free(&cred);
				goto out;
			}
		}
		kexec_cred_free(&cred);
	} else if (ap && ap->type != DOC_NULL) {
		const char *pname = doc_get_str(ap, "name");

		free(field);
		field = mem_printf("%s.auth-provider", where);
		if (ap->type != DOC_MAP || pname == NULL) {
			rc = err_set(em, DP_EINVAL, "%s: a map with a name", field);
			goto out;
		}
		if (strcmp(pname, "oidc") != 0) {
			rc = err_set(em, DP_EINVAL,
				     "%s.name: %s: kubectl removed this auth provider; use its exec credential plugin "
				     "(gke-gcloud-auth-plugin, kubelogin)",
				     field, pname);
			goto out;
		}
		kube_conn_secret_free(k->token);
		k->token = NULL;
		if ((rc = koidc_token(doc_get(ap, "config"), field, f->dir, timeout_ms, &k->token, em)) != 0)
			goto out;
	}
out:
	free(field);
	free(where);
	return rc;
}

/* ---- in-cluster ------------------------------------------------------------ */

static int load_in_cluster(struct kcfg *out, struct err_msg *em)
{
	char server[300];
	struct buf ns;
	int rc;

	if (incluster_server(server, sizeof(server), em) != 0) {
		err_prefix(em, "no kubeconfig (--kubeconfig, KUBECONFIG, ~/.kube/config) and not in a pod");
		return DP_ENOTFOUND;
	}
	if ((rc = read_token(INCLUSTER_SA_DIR "/token", "in-cluster: the service account token", &out->conn.token,
			     em)) != 0)
		return rc;
	out->conn.server = mem_strdup(server);
	out->conn.ca_file = mem_strdup(INCLUSTER_SA_DIR "/ca.crt");
	out->source = mem_strdup("in-cluster");
	out->user = mem_strdup("the pod's service account");
	buf_init(&ns, 256);
	if (buf_read_path(&ns, INCLUSTER_SA_DIR "/namespace", NULL, NULL) == 0 && ns.len) {
		size_t n = strcspn(ns.data, "\r\n \t");

		if (n)
			out->namespace_ = mem_strndup(ns.data, n);
	}
	buf_free(&ns);
	return 0;
}

/* ---- the whole ------------------------------------------------------------- */

int kcfg_load(const char *kubeconfig, const char *context, long timeout_ms, struct kcfg *out, struct err_msg *em)
{
	struct kfiles *fs = mem_zalloc(sizeof(*fs));
	struct kcfg c = { 0 };
	const struct kfile *cf = NULL, *clf = NULL, *uf = NULL;
	const struct doc_node *ctx, *cl, *us;
	const char *cur = context, *cname, *uname, *ns;
	json_t *info = json_object();
	char *where = NULL;
	int rc;

	rc = load_files(kubeconfig, fs, em);
	if (rc == DP_ENOTFOUND && kubeconfig == NULL) {
		files_free(fs);
		rc = load_in_cluster(&c, em);
		goto out;
	}
	if (rc != 0)
		goto out;
	for (size_t i = 0; cur == NULL && i < fs->n; i++) {
		const char *cc = doc_get_str(fs->v[i].root, "current-context");

		if (cc && cc[0])
			cur = cc;
	}
	if (cur == NULL) {
		rc = err_set(em, DP_EINVAL, "%s: current-context: not set (give --context)", fs->v[0].shown);
		goto out;
	}
	if ((ctx = find_entry(fs, "contexts", cur, &cf)) == NULL) {
		rc = err_set(em, DP_EINVAL, "%s: contexts[%s]: no such context%s", fs->v[0].shown, cur,
			     context ? " (--context)" : " (current-context)");
		goto out;
	}
	ctx = doc_get(ctx, "context"); /* absent: every field absent */
	where = mem_printf("%s: contexts[%s].context", cf->shown, cur);
	if ((rc = get_str(ctx, "cluster", where, &cname, em)) != 0 || (rc = get_str(ctx, "user", where, &uname, em)) != 0 ||
	    (rc = get_str(ctx, "namespace", where, &ns, em)) != 0)
		goto out;
	if (cname == NULL || (cl = find_entry(fs, "clusters", cname, &clf)) == NULL) {
		rc = err_set(em, DP_EINVAL, "%s.cluster: %s%s", where, cname ? cname : "missing",
			     cname ? ": no such cluster" : "");
		goto out;
	}
	if ((rc = load_cluster(clf, cname, doc_get(cl, "cluster"), &c.conn, info, em)) != 0)
		goto out;
	if (uname && (us = find_entry(fs, "users", uname, &uf)) == NULL) {
		rc = err_set(em, DP_EINVAL, "%s.user: %s: no such user", where, uname);
		goto out;
	}
	if (uname && (rc = load_user(uf, uname, doc_get(us, "user"), &c.conn, info, timeout_ms, em)) != 0)
		goto out;
	c.namespace_ = ns ? mem_strdup(ns) : NULL;
	c.user = mem_strdup(uname ? uname : "anonymous");
	c.source = mem_strdup(cf->shown);
out:
	json_decref(info);
	free(where);
	files_free(fs);
	free(fs);
	if (rc != 0) {
		kcfg_free(&c);
		return rc;
	}
	*out = c;
	return 0;
}
