/*
 * pprof.h - a profile built up and written in pprof's format: google/pprof's
 * profile.proto (package perftools.profiles) as protocol buffers, gzip'd,
 * what `go tool pprof` and the continuous profilers read (docs/agent/cpuprofile.md).
 *
 * A builder: the caller adds sample types, then samples whose stacks are
 * locations of functions; strings, functions and locations are kept once
 * each (the builder finds an equal one and gives its id), so a caller names
 * every frame of every stack and the file holds each name once. Ids and
 * string indexes are the file's own: a function id is not a location id.
 *
 * Ownership: the builder copies every string it is given; pprof_free frees
 * everything. Nothing here reads or writes a file: the bytes go into a buf.
 */
#ifndef DP_PPROF_H
#define DP_PPROF_H

#include <stddef.h>
#include <stdint.h>

#include "buf.h"
#include "errors.h"

#define PPROF_MAX_TYPES 4 /* sample types (values per sample) */

struct pprof;

struct pprof *pprof_new(void);
void pprof_free(struct pprof *p); /* accepts NULL */

/* The index of s in the string table, added if new; "" is 0. */
int64_t pprof_string(struct pprof *p, const char *s);
/* One more value per sample, of this type and unit ("cpu", "nanoseconds"); at most PPROF_MAX_TYPES, all before the first sample. */
void pprof_sample_type(struct pprof *p, const char *type, const char *unit);
/* What one sample stands for: period units of type/unit (a CPU profile: the sampling interval in nanoseconds). */
void pprof_period(struct pprof *p, const char *type, const char *unit, int64_t period);
/* When the profile started (ns since the epoch, UTC) and how long it ran (ns). */
void pprof_time(struct pprof *p, int64_t time_nanos, int64_t duration_nanos);
/* A line of free text the viewers show (what was dropped, how it was taken). */
void pprof_comment(struct pprof *p, const char *text);
/* The id (from 1) of the function of this name, system name and file (NULL: ""), added if new. */
uint64_t pprof_function(struct pprof *p, const char *name, const char *system_name, const char *filename);
/* The id (from 1) of the location whose one line is function fn (an id pprof_function gave), added if new. */
uint64_t pprof_location(struct pprof *p, uint64_t fn);
/* A label of a sample: key and either str (a string) or num (a number in num_unit units; NULL: none). */
struct pprof_label {
	const char *key, *str;
	int64_t num;
	const char *num_unit;
};
/*
 * A sample: its stack as location ids, leaf first (n of them), one value per sample type, and n_labels
 * labels (viewers filter and group by them: `go tool pprof -tagfocus`, `-tags`).
 */
void pprof_sample(struct pprof *p, const uint64_t *locations, size_t n, const int64_t *values,
		  const struct pprof_label *labels, size_t n_labels);
/* Samples added so far. */
uint64_t pprof_samples(const struct pprof *p);

/* The profile as protocol buffers (not compressed), appended to out. 0 or DP_ETOOBIG (out's cap). */
int pprof_encode(const struct pprof *p, struct buf *out);
/* The profile as a .pb.gz (gzip'd pprof_encode), appended to out. 0, DP_ETOOBIG (out's cap) or DP_EINTERNAL (zlib). */
int pprof_write(const struct pprof *p, struct buf *out, struct err_msg *em);

/* Protocol buffers' varint of v into out (at most 10 bytes); its length. For the tests. */
size_t pprof_varint(uint8_t out[10], uint64_t v);

#endif
