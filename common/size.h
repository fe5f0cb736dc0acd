/*
 * size.h - a size in bytes as people write one, the way Kubernetes writes
 * quantities: "4096", "100M" (10^6), "512Mi" (2^20), "2Gi"; "k"/"K", "M",
 * "G", "T" decimal, "Ki", "Mi", "Gi", "Ti" binary. Digits only before the
 * unit (no sign, space or fraction). The agent's sizes and inject's
 * --max-input read it.
 */
#ifndef DP_SIZE_H
#define DP_SIZE_H

#include <stdint.h>

/* 0 with *out the bytes, or DP_EINVAL when s is not a size or does not fit 64 bits. */
int size_parse(const char *s, uint64_t *out);

#endif
