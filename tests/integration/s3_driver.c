/*
 * s3_driver.c - egress/s3.c driven from a test (s3.sh): uploads FILE as the
 * object NAME with the metadata given, the way the egress process will.
 *
 *   s3_driver FILE NAME [KEY=VALUE...]
 *
 * Settings from the environment (Egress:S3Storage's keys): S3_ENDPOINT,
 * S3_BUCKET, S3_REGION, S3_ACCESS_KEY_ID, S3_SECRET_ACCESS_KEY,
 * S3_SECRET_ACCESS_KEY_FILE, S3_PROFILE, S3_PATH_STYLE=1, S3_PREFIX,
 * S3_PART_BUFFERS, S3_ATTEMPTS, S3_RETRY_MS; the test's own: S3_CHUNK
 * (bytes per s3_write, default 1 MiB), S3_DELAY_MS (a pause after each
 * write: a slow producer), S3_ABORT_AFTER (s3_abort once that many bytes
 * are written: a capture that failed midway).
 *
 * Prints "progress N" per callback (to stderr), then "ok BYTES" on stdout;
 * on failure "error CODE: MESSAGE" on stdout and exit status 1 (2: usage).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "egress/s3.h"
#include "errors.h"
#include "mem.h"

static const char *env(const char *n)
{
	const char *v = getenv(n);

	return v && *v ? v : NULL;
}

static void progress(void *ctx, uint64_t n)
{
	(void)ctx;
	fprintf(stderr, "progress %llu\n", (unsigned long long)n);
}

int main(int argc, char **argv)
{
	struct s3_cfg cfg = { 0 };
	struct s3_meta meta[S3_MAX_META];
	struct s3_upload *u = NULL;
	struct err_msg em = { "" };
	size_t n_meta = 0, chunk = env("S3_CHUNK") ? strtoul(env("S3_CHUNK"), NULL, 10) : (size_t)1 << 20;
	long delay = env("S3_DELAY_MS") ? atol(env("S3_DELAY_MS")) : 0;
	unsigned long long abort_after = env("S3_ABORT_AFTER") ? strtoull(env("S3_ABORT_AFTER"), NULL, 10) : 0;
	unsigned long long done = 0;
	uint64_t total = 0;
	char *buf;
	FILE *f;
	int rc;

	if (argc < 3 || chunk == 0) {
		fprintf(stderr, "usage: s3_driver FILE NAME [KEY=VALUE...]\n");
		return 2;
	}
	cfg.endpoint = env("S3_ENDPOINT");
	cfg.bucket = env("S3_BUCKET");
	cfg.region = env("S3_REGION");
	cfg.access_key_id = env("S3_ACCESS_KEY_ID");
	cfg.secret_access_key = env("S3_SECRET_ACCESS_KEY");
	cfg.secret_access_key_file = env("S3_SECRET_ACCESS_KEY_FILE");
	cfg.profile = env("S3_PROFILE");
	cfg.force_path_style = env("S3_PATH_STYLE") != NULL;
	cfg.key_prefix = env("S3_PREFIX");
	cfg.part_buffers = env("S3_PART_BUFFERS") ? atoi(env("S3_PART_BUFFERS")) : 0;
	cfg.attempts = env("S3_ATTEMPTS") ? atoi(env("S3_ATTEMPTS")) : 0;
	cfg.retry_base_ms = env("S3_RETRY_MS") ? atol(env("S3_RETRY_MS")) : 0;
	for (int i = 3; i < argc && n_meta < S3_MAX_META; i++) {
		char *eq = strchr(argv[i], '=');

		if (eq == NULL)
			continue;
		*eq = '\0';
		meta[n_meta].name = argv[i];
		meta[n_meta++].value = eq + 1;
	}
	if ((f = fopen(argv[1], "rb")) == NULL) {
		perror(argv[1]);
		return 2;
	}
	rc = s3_begin(&cfg, argv[2], meta, n_meta, "application/octet-stream", progress, NULL, &u, &em);
	buf = mem_alloc(chunk);
	while (rc == 0) {
		size_t n = fread(buf, 1, chunk, f);

		if (n == 0)
			break;
		if ((rc = s3_write(u, buf, n, &em)) != 0)
			break;
		done += n;
		if (abort_after && done >= abort_after) {
			s3_abort(u);
			u = NULL;
			printf("aborted %llu\n", done);
			fclose(f);
			free(buf);
			return 1;
		}
		if (delay > 0)
			nanosleep(&(struct timespec){ delay / 1000, (delay % 1000) * 1000000L }, NULL);
	}
	fclose(f);
	free(buf);
	if (rc == 0)
		rc = s3_finish(u, &total, &em);
	else
		s3_abort(u);
	if (rc != 0) {
		printf("error %s: %s\n", err_str(rc), em.text);
		return 1;
	}
	printf("ok %llu\n", (unsigned long long)total);
	return 0;
}
