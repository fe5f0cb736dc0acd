/*
 * sha256.h - SHA-256 (FIPS 180-4) and HMAC-SHA256 (RFC 2104), our own: AWS
 * requests are signed with them (SigV4: the fleet client and S3 egress), the
 * fleet client checksums the artifacts it collects, and S3 egress hashes the
 * parts it sends over plain HTTP; no library linked into diagport provides
 * them (libcurl is loaded with dlopen and does not export its hashes).
 *
 * The incremental API takes any number of updates between init and final;
 * final wipes the context (it may have held a key's pad).
 */
#ifndef DP_SHA256_H
#define DP_SHA256_H

#include <stddef.h>
#include <stdint.h>

#define SHA256_LEN 32     /* bytes in a digest */
#define SHA256_HEX_LEN 65 /* its lowercase hex form with the NUL */

struct sha256_ctx {
	union {                   /* nettle's context, when it is the one hashing (sha256.c) */
		uint64_t align;
		unsigned char ctx[128];
	} lib;
	int via_lib;
	uint32_t h[8];
	uint64_t bytes;  /* message length so far */
	uint8_t blk[64]; /* the block being filled */
	size_t n;        /* bytes in blk */
};

void sha256_init(struct sha256_ctx *c);
void sha256_update(struct sha256_ctx *c, const void *p, size_t n);
/* The digest of everything given to update; c is wiped and must be initialised again before reuse. */
void sha256_final(struct sha256_ctx *c, uint8_t out[SHA256_LEN]);

/* One call: the digest of p[0..n). */
void sha256(const void *p, size_t n, uint8_t out[SHA256_LEN]);
/* HMAC-SHA256 of msg under key (any length). Intermediate state is wiped. */
void sha256_hmac(const void *key, size_t key_len, const void *msg, size_t msg_len, uint8_t out[SHA256_LEN]);
/* Hash with our own code only, not nettle's (the unit test checks both against the vectors). */
void sha256_portable_only(void);

/* Lowercase hex of a digest into out (SHA256_HEX_LEN bytes, NUL-terminated). */
void sha256_hex(const uint8_t d[SHA256_LEN], char out[SHA256_HEX_LEN]);

#endif
