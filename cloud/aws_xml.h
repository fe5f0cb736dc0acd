/*
 * aws_xml.h - what diagport reads of AWS's XML answers: the text of one
 * element (STS's Arn and Credentials, S3's UploadId and ETag) and an error
 * document's Code and Message (S3's <Error>, the query protocol's
 * <ErrorResponse><Error>). Not an XML parser: the answers are small,
 * flat where we read them, and from a service we chose to call; but they
 * are untrusted bytes, so reading them never goes past len, and
 * tests/fuzz/fuzz_aws_xml.c holds it to that.
 *
 * Ownership: every pointer passed in is borrowed; strings returned are new.
 */
#ifndef DP_AWS_XML_H
#define DP_AWS_XML_H

#include <stddef.h>

/* What an AWS API error said: its code ("NoSuchBucket", "ClusterNotFoundException") and message. */
struct aws_error {
	long status;      /* HTTP status, 0 when no answer came */
	char type[96];    /* the code; "HTTP 503" when the answer had none */
	char message[512];
};

/*
 * The text of the first <tag>...</tag> in x[0..len) (tag names an element
 * without attributes: "UploadId"), with the five predefined entities and
 * numeric character references decoded (S3 escapes quotes in ETags: &quot;).
 * New string, or NULL when there is no such element or the text is over 64 KiB.
 */
char *aws_xml_text(const char *x, size_t len, const char *tag);

/* ae from an XML error answer: Code and Message (control bytes made spaces), status as given. */
void aws_xml_error(const char *x, size_t len, long status, struct aws_error *ae);

/* src[0..len) into dst (n bytes, NUL-terminated, truncated), control bytes made spaces: text for a message. */
void aws_error_copy(char *dst, size_t n, const char *src, size_t len);

#endif
