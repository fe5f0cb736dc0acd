/*
 * size.c - sizes in bytes (size.h).
 */
#include "size.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "errors.h"

int size_parse(const char *s, uint64_t *out)
{
	static const struct {
		const char *suffix;
		uint64_t mult;
	} units[] = { { "", 1 },	       { "k", 1000 },	   { "K", 1000 },	  { "Ki", 1 << 10 },
		      { "M", 1000000 },	       { "Mi", 1 << 20 },  { "G", 1000000000 },	  { "Gi", 1 << 30 },
		      { "T", 1000000000000ULL }, { "Ti", 1ULL << 40 } };
	char *end;
	unsigned long long v;

	if (s == NULL || *s < '0' || *s > '9')
		return DP_EINVAL;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (errno != 0)
		return DP_EINVAL;
	for (size_t i = 0; i < sizeof(units) / sizeof(units[0]); i++)
		if (strcmp(end, units[i].suffix) == 0) {
			if (v > UINT64_MAX / units[i].mult)
				return DP_EINVAL;
			*out = v * units[i].mult;
			return 0;
		}
	return DP_EINVAL;
}
