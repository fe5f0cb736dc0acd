/*
 * review.c - the admission decision for one AdmissionReview (review.h).
 *
 * The request is read with the project's document reader (exact numbers,
 * duplicate keys refused, caps), so the pod we diff is the pod the API
 * server sent, field for field. The injector gets that pod exactly as
 * `diagport inject` would see it; the response's patch is the difference
 * between the pod as it came and as the injector left it (patch.c; the
 * "before" side from the document journal, doc.h), so applying it gives
 * what `diagport inject` gives. Repeated requests may be answered from
 * rcache.h, byte for byte the same.
 */
#include "review.h"

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "base64.h"
#include "doc.h"
#include "mem.h"
#include "patch.h"

#define WARNING_MAX 256 /* the API server truncates longer ones */
#define TOKEN_VOLUME "kube-api-access-" /* the generated name rcache.h stands in for */

const char *review_outcome_name(enum review_outcome o)
{
	static const char *const names[] = { "injected", "skipped-not-opted-in", "skipped-opted-out",
					     "skipped-already-injected", "skipped-not-pod-create", "refused", "error",
					     "skipped-excluded-namespace" };

	return names[o];
}

/* Append the base64 of in[0..n) to out, written in place (no copy of the patch's text). */
static int base64(const char *in, size_t n, struct buf *out)
{
	if (buf_reserve(out, B64_LEN(n)) != 0)
		return DP_ETOOBIG;
	out->len += b64_encode_to(in, n, out->data + out->len);
	out->data[out->len] = '\0';
	return 0;
}

/* Warnings, as the members of a JSON array: "a","b" */
struct warnings {
	struct buf json;
	size_t n;
};

static void warn(struct warnings *ws, const char *text)
{
	size_t n = strlen(text);

	if (n > WARNING_MAX) {
		n = WARNING_MAX;
		while (n > 0 && ((unsigned char)text[n] & 0xC0) == 0x80)
			n--; /* never cut a UTF-8 sequence */
	}
	if (ws->n++)
		buf_putc(&ws->json, ',');
	doc_json_string(&ws->json, text, n);
}

static bool is_excluded(const struct review_config *cfg, const char *ns)
{
	for (size_t i = 0; ns && i < cfg->n_excluded; i++)
		if (strcmp(cfg->excluded[i], ns) == 0)
			return true;
	return false;
}

/* The byte offset of 1-based (line, col) in body (the reader counts bytes), or SIZE_MAX. */
static size_t offset_of(const char *body, size_t len, uint32_t line, uint32_t col)
{
	size_t at = 0;

	for (uint32_t l = 1; l < line; l++) {
		const char *nl = memchr(body + at, '\n', len - at);

		if (nl == NULL)
			return SIZE_MAX;
		at = (size_t)(nl - body) + 1;
	}
	return col >= 1 && at + col - 1 < len ? at + col - 1 : SIZE_MAX;
}

static int malformed(struct err_msg *em, const char *what)
{
	return err_set(em, DP_ESYNTAX, "not an admission.k8s.io/v1 AdmissionReview request: %s", what);
}

/* Does any container of the pod add capability cap (SYS_PTRACE, PERFMON)? */
static bool asks_cap(const struct doc_node *pod, const char *cap)
{
	static const char *const lists[] = { "spec/containers", "spec/initContainers", "spec/ephemeralContainers" };

	for (size_t l = 0; l < sizeof(lists) / sizeof(lists[0]); l++) {
		const struct doc_node *cs = doc_path(pod, lists[l]);

		for (size_t i = 0; doc_is(cs, DOC_SEQ) && i < cs->n; i++) {
			const struct doc_node *add = doc_path(cs->vals[i], "securityContext/capabilities/add");

			for (size_t k = 0; doc_is(add, DOC_SEQ) && k < add->n; k++)
				if (doc_strval(add->vals[k]) && strcmp(doc_strval(add->vals[k]), cap) == 0)
					return true;
		}
	}
	return false;
}

/*
 * Inject the pod and diff; fills patch (JSON text) and warnings. The
 * request's own tree is injected under a journal (doc.h) and diffed against
 * the tree as it was, which shares every subtree the injector left alone: no
 * copy of a 1,500-item env list, and the diff skips what is shared at once.
 * cfg->copy_diff (tests) injects a copy instead: the same bytes the long way.
 */
static enum review_outcome inject(const struct review_config *cfg, struct doc_node *request_pod, struct buf *patch,
				  size_t *n_ops, struct warnings *warnings)
{
	bool journal = mem_arena_active() && !cfg->copy_diff; /* a journal needs the arena: review_admit has one */
	struct doc_node *copy = journal ? request_pod : doc_copy(request_pod);
	const struct doc_node *pod = request_pod;
	struct inj_report rep = { 0 };
	struct inj_opts base;
	struct inj_ctx ctx = { .file = "pod", .base = &base, .policy = cfg->policy, .report = &rep };
	struct err_msg em = { "" };
	enum review_outcome o = REVIEW_INJECTED;
	bool pss;
	int rc;

	inj_opts_copy(&base, cfg->base);
	if (cfg->no_ptrace) { /* Pod Security baseline and restricted: neither SYS_PTRACE nor PERFMON */
		base.ptrace = false;
		base.perf = false;
	}
	if (journal)
		doc_journal_begin();
	rc = inj_k8s_pod(copy, &ctx, &em);
	if (journal) {
		pod = doc_journal_before(request_pod);
		doc_journal_end();
	}
	pss = rc == 0 && cfg->no_ptrace;
	if (pss && asks_cap(copy, "SYS_PTRACE") && !asks_cap(pod, "SYS_PTRACE"))
		rc = err_set(&em, DP_EREFUSED, "the pod asks for SYS_PTRACE (diagport.dev/ptrace), which its namespace's "
			     "Pod Security level forbids; the API server would refuse it");
	else if (pss && asks_cap(copy, "PERFMON") && !asks_cap(pod, "PERFMON"))
		rc = err_set(&em, DP_EREFUSED, "the pod asks for perf (diagport.dev/perf), whose PERFMON its namespace's "
			     "Pod Security level forbids; the API server would refuse it");
	else if (pss && cfg->base->ptrace) /* the configuration asked for it: say why it is not there */
		warn(warnings, "diagport: SYS_PTRACE left out: this namespace enforces Pod Security baseline or "
			       "restricted, which forbid it; dumps need it only from an app that is not dumpable");
	pss = pss && rc != 0; /* refused here: the injection's own warnings are about a pod that is not made */
	if (rc == 0)
		rc = patch_diff(pod, copy, patch, n_ops, &em);
	inj_opts_free(&base);
	if (rc != 0) {
		char msg[1200];

		o = rc == DP_EREFUSED || rc == DP_EUNSUPPORTED || rc == DP_EINVAL ? REVIEW_REFUSED : REVIEW_ERROR;
		if (doc_get(doc_path(pod, "metadata/annotations"), INJ_STATUS_KEY) != NULL) /* injected beforehand */
			snprintf(msg, sizeof(msg), "diagport: pod admitted as it came, with the diagnostics agent it "
				 "carries, which the platform's policy could not be applied to: %s", em.text);
		else
			snprintf(msg, sizeof(msg), "diagport: pod admitted without diagnostics: %s", em.text);
		warn(warnings, msg);
		*n_ops = 0;
	}
	for (size_t i = 0; i < rep.nwarn && !pss; i++)
		warn(warnings, rep.warnings[i]);
	inj_report_free(&rep);
	if (!journal)
		doc_free(copy);
	return o;
}

int review_admit(const struct review_config *cfg, const char *body, size_t len, struct buf *out,
		 enum review_outcome *outcome, struct err_msg *em)
{
	/*
	 * Nodes: a pod with 1,500 env vars is about 10,000; the cap allows ten
	 * times that. It bounds memory as well as time: a review holds the
	 * request's tree (about 100 bytes a node) and what the journal keeps, or
	 * a whole copy the long way, on each of the server's threads, and the
	 * webhook's pod has 64 MiB.
	 */
	struct doc_limits lim = { .max_bytes = cfg->max_body ? cfg->max_body : (size_t)16 << 20, .max_depth = 256,
				  .max_nodes = REVIEW_MAX_NODES };
	struct doc_stream s = { 0 };
	const struct doc_node *rv, *req, *pod = NULL;
	const char *uid, *kind, *op, *av;
	struct buf patch;
	size_t n_ops = 0;
	struct warnings ws = { .n = 0 };
	const struct doc_node *uid_node;
	unsigned key = (cfg->namespace_enabled ? 1u : 0u) | (cfg->no_ptrace ? 2u : 0u);
	size_t start = out->len, hole = SIZE_MAX, ans_hole = 0, ans_hole_len = 0;
	enum review_outcome o = REVIEW_ERROR;
	bool names_free = false;
	int rc, tag;

	if (len > lim.max_bytes)
		return err_set(em, DP_ETOOBIG, "the request is %zu bytes; the cap is %zu", len, lim.max_bytes);
	if (rcache_get(cfg->cache, key, body, len, out, &tag)) {
		*outcome = (enum review_outcome)tag;
		return 0;
	}
	/*
	 * Everything below but the answer is the request's own: thousands of
	 * small nodes read, injected and diffed, then dropped together.
	 * They come from the thread's arena (mem.h); the answer goes to out,
	 * made room for before the scope, so it grows on the heap and outlives it.
	 */
	buf_reserve(out, 4096);
	mem_arena_begin();
	if ((rc = doc_read_json(body, len, "request", &lim, &s, em)) != 0)
		goto out;
	rc = 0;
	rv = s.n == 1 ? s.docs[0] : NULL;
	req = doc_get(rv, "request");
	uid = doc_get_str(req, "uid");
	av = doc_get_str(rv, "apiVersion");
	if (!doc_is(rv, DOC_MAP))
		rc = malformed(em, "the body is not one JSON object");
	else if (av == NULL || strcmp(av, "admission.k8s.io/v1") != 0 || !doc_get_str(rv, "kind") ||
		 strcmp(doc_get_str(rv, "kind"), "AdmissionReview") != 0)
		rc = malformed(em, "apiVersion must be admission.k8s.io/v1 and kind AdmissionReview");
	else if (!doc_is(req, DOC_MAP))
		rc = malformed(em, "there is no request object");
	else if (uid == NULL || *uid == '\0')
		rc = malformed(em, "request.uid is missing");
	if (rc != 0)
		goto out;
	kind = doc_get_str(doc_get(req, "kind"), "kind");
	op = doc_get_str(req, "operation");
	buf_init(&ws.json, (size_t)1 << 20);
	buf_init(&patch, (size_t)64 << 20);
	if (kind == NULL || strcmp(kind, "Pod") != 0 || op == NULL || strcmp(op, "CREATE") != 0) {
		o = REVIEW_SKIPPED_NOT_POD_CREATE;
	} else if (!doc_is(pod = doc_get(req, "object"), DOC_MAP)) {
		buf_free(&ws.json);
		buf_free(&patch);
		rc = malformed(em, "request.object is not a Pod object");
		goto out;
	} else if (is_excluded(cfg, doc_get_str(req, "namespace"))) {
		o = REVIEW_SKIPPED_EXCLUDED;
	} else {
		const struct doc_node *bad = NULL; /* -2, a label the injector refuses with its message */
		int want = inj_k8s_wants(doc_get(pod, "metadata"), &bad);

		/* a pod that comes injected (our own reinvocation, or injected offline) is left alone, unless the
		 * platform enforces something: then it is injected again under the policy (inject is idempotent),
		 * whatever it opts into, so that a pod injected beforehand without --policy cannot carry auth: none
		 * past enforce:; one that opts out loses the agent it carries, as `inject --policy` takes it out */
		bool injected = doc_get(doc_path(pod, "metadata/annotations"), INJ_STATUS_KEY) != NULL;
		bool policy = cfg->policy != NULL && cfg->policy->set != 0;

		if (injected && !policy)
			o = REVIEW_SKIPPED_INJECTED;
		else if (!injected && want == 0)
			o = REVIEW_SKIPPED_OPTED_OUT;
		else if (!injected && want == -1 && !cfg->namespace_enabled)
			o = REVIEW_SKIPPED_NOT_OPTED;
		else
			o = inject(cfg, (struct doc_node *)pod, &patch, &n_ops, &ws); /* the request's tree is ours */
	}
	buf_puts(out, "{\"apiVersion\":\"admission.k8s.io/v1\",\"kind\":\"AdmissionReview\",\"response\":{\"uid\":");
	uid_node = doc_get(req, "uid");
	hole = offset_of(body, len, uid_node->line, uid_node->col);
	ans_hole = out->len;
	doc_json_string(out, uid, uid_node->len);
	ans_hole_len = out->len - ans_hole;
	buf_puts(out, ",\"allowed\":true");
	if (o == REVIEW_INJECTED && n_ops > 0) {
		buf_puts(out, ",\"patchType\":\"JSONPatch\",\"patch\":\"");
		base64(patch.data, patch.len, out);
		buf_putc(out, '"');
	}
	if (ws.n) {
		buf_puts(out, ",\"warnings\":[");
		buf_append(out, ws.json.data, ws.json.len);
		buf_putc(out, ']');
	}
	buf_puts(out, "}}");
	names_free = !memmem(patch.data ? patch.data : "", patch.len, TOKEN_VOLUME, strlen(TOKEN_VOLUME)) &&
		     !memmem(ws.json.data ? ws.json.data : "", ws.json.len, TOKEN_VOLUME, strlen(TOKEN_VOLUME));
	buf_free(&ws.json);
	buf_free(&patch);
	*outcome = o;
out:
	if (!mem_arena_active()) /* else the arena's end drops the trees at once, without a walk */
		doc_stream_free(&s);
	mem_arena_end();
	if (rc == 0 && o != REVIEW_ERROR && hole < len) /* an internal failure may not happen again: not kept */
		rcache_put(cfg->cache, key, body, len, hole, ans_hole_len, out->data + start, out->len - start,
			   ans_hole - start, ans_hole_len, names_free, (int)o);
	return rc;
}
