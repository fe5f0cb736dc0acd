/*
 * kexec.h - a kubeconfig exec credential plugin (client.authentication.k8s.io
 * v1 and v1beta1), run as client-go runs it: `aws eks get-token`,
 * `gke-gcloud-auth-plugin`, `kubelogin`, or a script of one's own.
 *
 * Ownership: the spec is borrowed; a kexec_cred owns its strings, which are
 * wiped when freed.
 */
#ifndef DP_FLEET_KEXEC_H
#define DP_FLEET_KEXEC_H

#include <jansson.h>

#include "doc.h"
#include "errors.h"

struct kexec_spec {
	const char *where;           /* names the exec map in messages: "FILE: users[alice].user.exec" */
	const char *dir;             /* the kubeconfig file's directory (a relative command with a '/') */
	const struct doc_node *exec; /* the user's exec map: apiVersion, command, args, env, ... */
	json_t *cluster;             /* borrowed: ExecCredential spec.cluster, sent with provideClusterInfo */
	long timeout_ms;             /* the plugin must have answered by then, else it is killed */
};

struct kexec_cred {
	char *token;    /* status.token, or NULL */
	char *cert_pem; /* status.clientCertificateData and clientKeyData (PEM), or NULL */
	char *key_pem;
};

/*
 * Run the plugin: its command found in PATH (or relative to dir when it
 * names a path), its args, the environment plus its env and
 * KUBERNETES_EXEC_INFO (spec.interactive false), stdin /dev/null, stderr
 * passed through, stdout (at most 1 MiB) read as an ExecCredential of the
 * same apiVersion. 0 with *out; DP_EINVAL (em names where and the field)
 * for a bad exec map; DP_EAUTH naming the command for a plugin that is
 * missing, fails (its exit status), times out or prints something else.
 */
int kexec_run(const struct kexec_spec *s, struct kexec_cred *out, struct err_msg *em);
void kexec_cred_free(struct kexec_cred *c);

#endif
