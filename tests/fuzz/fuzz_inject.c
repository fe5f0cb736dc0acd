/*
 * fuzz_inject.c - libFuzzer target for the injection rules. For any input
 * that parses, and every document the rules accept, two properties must
 * hold, else the target aborts:
 *   inject(inject(x)) == inject(x)     (idempotent)
 *   uninject(inject(x)) == x           (exactly reversible)
 * The first byte picks the options (mode, sidecar, flavour, ptrace, auth,
 * perf, egress-settings and rules), and the input's length whether the agent
 * serves fewer capture kinds (captures, odd lengths; with an even length of
 * at least 3 bytes, a platform's policy enforcing ptrace false and captures
 * at most stacks and metrics too) and the crash-dump type (its remainder by
 * 3: mini, off, heap), so the fuzzer explores them. The kind is
 * detected (k8s, ecs, cfn, compose).
 * A Kubernetes List (JSON, or YAML without anchors) also goes through
 * inj_k8s_list, item by item as the CLI reads it: the same exit code,
 * message, warnings and bytes as the whole tree injected and written, else
 * the target aborts.
 * Seeds: tests/golden inputs (tests/fuzz/seeds-inject).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "doc.h"
#include "injector/inj.h"
#include "mem.h"

static int apply(struct doc_node **d, const char *kind, bool inject, const struct inj_ctx *c, struct err_msg *em)
{
	if (strcmp(kind, "k8s") == 0)
		return inject ? inj_k8s_object(*d, c, em) : uninj_k8s_object(*d, c, em);
	if (strcmp(kind, "ecs") == 0)
		return inject ? inj_ecs_taskdef(d, c, em) : uninj_ecs_taskdef(d, c, em);
	if (strcmp(kind, "compose") == 0)
		return inject ? inj_compose_project(*d, c, em) : uninj_compose_project(*d, c, em);
	return inject ? inj_cfn_template(*d, c, em) : uninj_cfn_template(*d, c, em);
}

/* The whole List injected (or not) and written, as the CLI did before it read Lists item by item. */
static int whole(const struct doc_stream *s, bool inject, const struct inj_ctx *c, struct buf *out, struct err_msg *em)
{
	struct doc_node *d = doc_copy(s->docs[0]);
	int rc = inject ? inj_k8s_object(d, c, em) : uninj_k8s_object(d, c, em);

	if (rc == 0)
		rc = doc_write_part(out, s, d, 0, s->format, em);
	doc_free(d);
	return rc;
}

static void same_warnings(const struct inj_report *a, const struct inj_report *b)
{
	if (a->nwarn != b->nwarn || a->injected != b->injected || a->passed != b->passed)
		goto differ;
	for (size_t i = 0; i < a->nwarn; i++)
		if (strcmp(a->warnings[i], b->warnings[i]) != 0)
			goto differ;
	return;
differ:
	fprintf(stderr, "a List item by item warns or counts otherwise than whole\n");
	abort();
}

/* A List read whole: item by item (inj_k8s_list) gives the same answer, and the same bytes. */
static void list_path(const char *text, size_t len, const struct doc_limits *lim, const struct doc_stream *s,
		      const struct inj_opts *o, const struct inj_policy *policy)
{
	const struct doc_node *d = s->n == 1 ? s->docs[0] : NULL;

	if (!doc_is(d, DOC_MAP) || inj_detect(d) == NULL ||
	    strcmp(inj_detect(d), "k8s") != 0 || !inj_k8s_is_list(d))
		return;
	for (int inject = 0; inject < 2; inject++) {
		struct inj_report r1 = { 0 }, r2 = { 0 };
		struct inj_ctx c1 = { .file = "fuzz", .base = o, .policy = policy, .report = &r1 }, c2 = c1;
		struct err_msg e1 = { "" }, e2 = { "" };
		struct buf b1, b2;
		int rc1, rc2;

		c2.report = &r2;
		buf_init(&b1, 0);
		buf_init(&b2, 0);
		rc1 = whole(s, inject, &c1, &b1, &e1);
		rc2 = inj_k8s_list(text, len, lim, NULL, inject, &c2, &b2, NULL, NULL, &e2);
		if (rc2 == 1 && s->format == DOC_JSON) {
			fprintf(stderr, "a JSON List that reads whole was not split into its items\n");
			abort();
		}
		if (rc2 == 1) /* a YAML List with anchors, or in flow style: read whole, as it was */
			goto next;
		if (rc1 != rc2 || strcmp(e1.text, e2.text) != 0 ||
		    (rc1 == 0 && (b1.len != b2.len || memcmp(b1.data, b2.data, b1.len) != 0))) {
			fprintf(stderr, "a List item by item is not the List whole: %d %s / %d %s\n", rc1, e1.text, rc2,
				e2.text);
			abort();
		}
		same_warnings(&r1, &r2);
next:
		inj_report_free(&r1);
		inj_report_free(&r2);
		buf_free(&b1);
		buf_free(&b2);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doc_limits lim = { .max_bytes = 1 << 20, .max_depth = 64, .max_nodes = 100000 };
	struct doc_stream s;
	struct err_msg em;
	struct inj_opts o;
	struct inj_policy policy;
	uint8_t sel;

	if (size < 1)
		return 0;
	sel = data[0];
	if (doc_read((const char *)data + 1, size - 1, "fuzz", &lim, &s, &em) != 0)
		return 0;
	inj_opts_init(&o);
	o.mode = (sel & 1) ? INJ_SUSPEND : INJ_NOSUSPEND;
	o.sidecar = (sel & 2) ? INJ_SIDECAR_CONTAINER : INJ_SIDECAR_NATIVE;
	o.ptrace = !(sel & 4);
	if (sel & 8)
		inj_opts_set(&o, "auth-secret", "token", NULL);
	else if (sel & 16)
		o.no_auth = true;
	o.perf = (sel & 24) == 24; /* with a token: shareProcessNamespace and the agent's PERFMON (k8s) */
	if (sel & 32)
		o.flavour = INJ_FLAVOUR_DOTNET_MONITOR;
	if (sel & 128) { /* the settings sources: a volume and mount each (k8s), secrets (ECS), configs (Compose) */
		inj_opts_set(&o, "egress-settings", "egress", NULL);
		inj_opts_set(&o, "rules", "rules", NULL);
	}
	if (size & 1)
		inj_opts_set(&o, "captures", "stacks,dump,metrics", NULL);
	if (size % 3 == 1) /* the crash-dump settings are on by default (mini); off, or heap, a third of the time each */
		inj_opts_set(&o, "crash-dumps", "off", NULL);
	else if (size % 3 == 2)
		inj_opts_set(&o, "crash-dumps", "heap", NULL);
	inj_policy_init(&policy);
	if (size % 2 == 0 && size >= 3) {
		inj_policy_set(&policy, "ptrace", "false", NULL);
		inj_policy_set(&policy, "captures", "stacks,metrics", NULL);
	}
	list_path((const char *)data + 1, size - 1, &lim, &s, &o, &policy);
	for (size_t i = 0; i < s.n; i++) {
		struct inj_ctx c = { .file = "fuzz", .base = &o, .policy = &policy, .all = (sel & 64) != 0 };
		const char *kind = inj_detect(s.docs[i]);
		struct doc_node *orig, *once, *twice;

		if (kind == NULL)
			continue;
		/* Uninject first: the input may carry a status record of its own. */
		if (apply(&s.docs[i], kind, false, &c, &em) != 0)
			continue;
		orig = doc_copy(s.docs[i]);
		if (apply(&s.docs[i], kind, true, &c, &em) != 0) {
			doc_free(orig);
			continue;
		}
		once = doc_copy(s.docs[i]);
		if (apply(&s.docs[i], kind, true, &c, &em) != 0 || !doc_equal(s.docs[i], once)) {
			fprintf(stderr, "inject is not idempotent: %s\n", em.text);
			abort();
		}
		twice = s.docs[i];
		if (apply(&twice, kind, false, &c, &em) != 0 || !doc_equal(twice, orig)) {
			fprintf(stderr, "uninject(inject(x)) != x: %s\n", em.text);
			abort();
		}
		s.docs[i] = twice;
		doc_free(orig);
		doc_free(once);
	}
	inj_opts_free(&o);
	inj_policy_free(&policy);
	doc_stream_free(&s);
	return 0;
}
