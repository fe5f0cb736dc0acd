/*
 * bench_sha256.c - the throughput of common/sha256.c, the hash the fleet
 * client runs over every byte it downloads (fleet/run_capture.c, to_file),
 * so it bounds the client's download rate on one core.
 *
 *   bench_sha256 FILE RUNS
 *
 * Per run: the file read with read(2) in 128 KiB pieces (the size libcurl
 * hands the client's write callback at most is 16 KiB; 128 KiB is what
 * sha256sum reads) and each piece hashed, as `sha256sum FILE` does; then the
 * same bytes hashed from memory (no read), in 16 KiB updates. Prints the
 * digest (to compare with sha256sum's) and, for each way, the median and best
 * MB/s (MB = 10^6 bytes) over RUNS.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "sha256.h"

#define PIECE ((size_t)128 * 1024)
#define UPDATE ((size_t)16 * 1024)
#define MAX_RUNS 100

static double now(void)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;

	return (x > y) - (x < y);
}

static void report(const char *what, double *s, long n, double bytes)
{
	qsort(s, (size_t)n, sizeof(*s), cmp);
	printf("%-32s median %7.1f MB/s (%.3f s)  best %7.1f MB/s\n", what, bytes / s[n / 2] / 1e6, s[n / 2],
	       bytes / s[0] / 1e6);
}

int main(int argc, char **argv)
{
	static char piece[PIECE];
	double by_read[MAX_RUNS], in_mem[MAX_RUNS];
	uint8_t d[SHA256_LEN];
	char hex[SHA256_HEX_LEN];
	struct stat st;
	char *all;
	char *end = NULL;
	long runs = argc == 3 ? strtol(argv[2], &end, 10) : 0;
	int fd;

	if (argc != 3 || !end || *end || runs < 1 || runs > MAX_RUNS) {
		fprintf(stderr, "usage: bench_sha256 FILE RUNS (1..%d)\n", MAX_RUNS);
		return 2;
	}
	fd = open(argv[1], O_RDONLY);
	if (fd < 0 || fstat(fd, &st) != 0 || st.st_size <= 0) {
		perror(argv[1]);
		return 1;
	}
	all = malloc((size_t)st.st_size);
	if (!all) {
		perror("malloc");
		return 1;
	}
	for (long r = 0; r < runs; r++) {
		struct sha256_ctx c;
		size_t got = 0;
		ssize_t n;
		double t0 = now();

		sha256_init(&c);
		if (lseek(fd, 0, SEEK_SET) != 0) {
			perror(argv[1]);
			free(all);
			return 1;
		}
		while ((n = read(fd, piece, sizeof(piece))) > 0) {
			sha256_update(&c, piece, (size_t)n);
			if (r == 0)
				memcpy(all + got, piece, (size_t)n);
			got += (size_t)n;
		}
		sha256_final(&c, d);
		by_read[r] = now() - t0;
		if (n < 0 || got != (size_t)st.st_size) {
			fprintf(stderr, "%s: short read\n", argv[1]);
			free(all);
			return 1;
		}
	}
	sha256_hex(d, hex);
	printf("%s  %s\n", hex, argv[1]);
	for (long r = 0; r < runs; r++) {
		struct sha256_ctx c;
		double t0 = now();

		sha256_init(&c);
		for (size_t off = 0; off < (size_t)st.st_size; off += UPDATE) {
			size_t k = (size_t)st.st_size - off < UPDATE ? (size_t)st.st_size - off : UPDATE;

			sha256_update(&c, all + off, k);
		}
		sha256_final(&c, d);
		in_mem[r] = now() - t0;
	}
	report("common/sha256.c, read + hash", by_read, runs, (double)st.st_size);
	report("common/sha256.c, hash in memory", in_mem, runs, (double)st.st_size);
	free(all);
	close(fd);
	return 0;
}
