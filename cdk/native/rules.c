/*
 * rules.c - the injection rules' one entry for the CDK construct library:
 * the CloudFormation macro contract (inj.h inj_macro), compiled with the
 * rules to WebAssembly by emscripten (Makefile, cdk/lib/rules-wasm.cjs).
 *
 * The Aspect (cdk/src/rules.ts) hands over one task definition as a
 * template of one resource, with the options as params, exactly as the
 * macro receives them; what comes back is what `diagport inject cfn` and the
 * macro would write. No rule is written a second time in TypeScript.
 */
#include <stddef.h>

#include "buf.h"
#include "inj.h"

#define EXPORT __attribute__((used, visibility("default")))

/*
 * The response to the event (event_len bytes of JSON), NUL-terminated, its
 * length in *out_len; the caller frees it. NULL when the response could not
 * be written (it is larger than the buffer may grow).
 */
EXPORT char *dp_rules(const char *event, size_t event_len, size_t *out_len)
{
	struct buf out;

	buf_init(&out, 0);
	if (inj_macro(event, event_len, &out) != 0) {
		buf_free(&out);
		*out_len = 0;
		return NULL;
	}
	*out_len = out.len;
	return out.data;
}
