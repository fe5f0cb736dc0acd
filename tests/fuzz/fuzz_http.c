/*
 * fuzz_http.c - libFuzzer target for the HTTP request head parser
 * (http/http_parse.c), which reads bytes from anyone who can reach the
 * agent's port. The head is found, parsed in place, and every string the
 * request then holds is walked, so a pointer outside the copy is caught by
 * AddressSanitizer.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "http/http_parse.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct http_request r;
	char *buf;
	size_t head;
	volatile size_t sum = 0;

	if (size > 65536)
		return 0;
	buf = malloc(size ? size : 1);
	memcpy(buf, data, size);
	head = http_head_length(buf, size);
	if (head > size)
		abort();
	if (head && http_parse_head(buf, head, &r) == 0) {
		sum += strlen(r.method) + strlen(r.path);
		for (size_t i = 0; i < r.n_headers; i++)
			sum += strlen(r.headers[i].name) + strlen(r.headers[i].value);
		for (size_t i = 0; i < r.n_params; i++)
			sum += strlen(r.params[i].key) + strlen(r.params[i].value);
		if (r.path[0] != '/' && r.path[0] != '\0')
			abort();
		http_header(&r, "Authorization");
		http_param(&r, "pid");
	}
	free(buf);
	return 0;
}
