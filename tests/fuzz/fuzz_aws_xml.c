/*
 * fuzz_aws_xml.c - libFuzzer target for cloud/aws_xml.c, which reads the
 * answers of S3 and STS (and whatever answers in their place). The input is
 * copied into an allocation of exactly its size, not NUL-terminated, so a
 * read past the length given is caught by AddressSanitizer; every element
 * egress and the credential chain read is asked for, and what comes back
 * must be shorter than the input (entities only shrink) and NUL-free but for
 * the end.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cloud/aws_xml.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const tags[] = { "UploadId", "Code", "Message", "AccessKeyId", "SecretAccessKey",
					    "SessionToken", "Expiration", "Arn", "E" };
	struct aws_error ae;
	char *x;

	if (size > 65536)
		return 0;
	x = malloc(size ? size : 1);
	memcpy(x, data, size);
	for (size_t i = 0; i < sizeof(tags) / sizeof(tags[0]); i++) {
		char *t = aws_xml_text(x, size, tags[i]);

		if (t && strlen(t) >= size)
			abort();
		free(t);
	}
	aws_xml_error(x, size, 500, &ae);
	if (strlen(ae.type) >= sizeof(ae.type) || strlen(ae.message) >= sizeof(ae.message))
		abort();
	free(x);
	return 0;
}
