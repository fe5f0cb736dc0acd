/*
 * fuzz_base64.c - libFuzzer target for common/base64.c, whose decoder reads
 * what the Kubernetes API returns (a Secret's data, a webhook's caBundle):
 * whatever decodes must encode back to exactly the same text (the decoder is
 * strict: one spelling per value), the cap must hold, and what does not
 * decode must leave the outputs untouched.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/base64.h"
#include "common/mem.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *out = (char *)&out, *again; /* a marker: must stay as it is on failure */
	size_t len = 12345, len2, max = size > 0 ? data[0] * 16u : 0;

	if (b64_decode((const char *)data, size, max, &out, &len) != 0) {
		if (out != (char *)&out || len != 12345)
			abort();
		return 0;
	}
	if (len > max || out[len] != '\0')
		abort();
	again = b64_encode(out, len, &len2);
	if (len2 != size || memcmp(again, data, size) != 0 || again[len2] != '\0')
		abort();
	mem_free(again);
	mem_free(out);
	return 0;
}
