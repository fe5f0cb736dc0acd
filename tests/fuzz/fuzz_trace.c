/*
 * fuzz_trace.c - libFuzzer target for the providers document of POST /trace
 * (trace_config_json): anything an HTTP client sends. A document that is
 * accepted must also encode (or be refused as too big) and be freed cleanly.
 */
#include <stdint.h>
#include <stdlib.h>

#include "launcher/trace/trace.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct trace_config c;
	struct err_msg em;
	struct buf req;

	if (trace_config_json((const char *)data, size, &c, &em) != 0)
		return 0;
	if (c.n == 0 || c.n > TRACE_MAX_PROVIDERS || c.buffer_mb < 1 || c.buffer_mb > TRACE_MAX_BUFFER_MB)
		abort(); /* accepted, so it must be within the caps */
	buf_init(&req, 0);
	if (trace_encode(&c, true, &req, &em) == 0 && req.len > 65535)
		abort();
	buf_free(&req);
	trace_config_free(&c);
	return 0;
}
