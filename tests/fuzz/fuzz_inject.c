/*
 * fuzz_inject.c - libFuzzer target for the injection rules. For any input
 * that parses, and every document the rules accept, two properties must
 * hold, else the target aborts:
 *   inject(inject(x)) == inject(x)     (idempotent)
 *   uninject(inject(x)) == x           (exactly reversible)
 * The first byte picks the options (mode, sidecar, flavour, ptrace, auth,
 * perf, egress-settings and rules), so the fuzzer explores them too. The kind is
 * detected (k8s, ecs, cfn, compose).
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

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct doc_limits lim = { .max_bytes = 1 << 20, .max_depth = 64, .max_nodes = 100000 };
	struct doc_stream s;
	struct err_msg em;
	struct inj_opts o;
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
	for (size_t i = 0; i < s.n; i++) {
		struct inj_ctx c = { .file = "fuzz", .base = &o, .all = (sel & 64) != 0 };
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
	doc_stream_free(&s);
	return 0;
}
