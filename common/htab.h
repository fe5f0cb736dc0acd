/*
 * htab.h - the one small hash table: open addressing with linear probing over
 * slots of the caller's type, each kept beside its key's 64-bit hash.
 *
 * The caller hashes its key (htab_bytes, htab_u64) and says how a slot
 * matches a key; the table keeps the hashes, so it grows and deletes (by
 * backward shift, no tombstones) without calling back. It grows at half
 * full: a probe always ends at an empty slot, and a miss (the common case of
 * a lookup that guards an insert) ends after about two and a half slots,
 * where three quarters full would take eight. A slot pointer is
 * good until the next htab_put (which may move every slot) or htab_del.
 * Capping the entries is the caller's: a table has no limit of its own.
 *
 * Ownership: the table owns its slot memory only; what a slot points to is
 * the caller's to free (walk with htab_next before htab_free).
 */
#ifndef DP_HTAB_H
#define DP_HTAB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct htab {
	unsigned char *slot; /* cap slots of size bytes */
	uint64_t *hash;      /* cap hashes; 0 marks an empty slot */
	size_t size, cap, n; /* cap: 0 or a power of two */
};

/* An empty table of slots of size bytes (no allocation until the first put). */
void htab_init(struct htab *t, size_t size);
void htab_free(struct htab *t);

/*
 * The slot whose key matches: eq(slot, key) is asked of the slots whose stored
 * hash is h only. NULL when there is none.
 */
void *htab_find(const struct htab *t, uint64_t h, bool (*eq)(const void *slot, const void *key), const void *key);

/* A zeroed slot for a key with hash h that is not in the table; the caller fills it. Never NULL. */
void *htab_put(struct htab *t, uint64_t h);

/* Remove a slot htab_find or htab_put gave (and the caller has emptied of what it owns). */
void htab_del(struct htab *t, void *slot);

/* Iteration: *pos starts at 0; each call gives the next full slot, NULL at the end. No put or del between. */
void *htab_next(const struct htab *t, size_t *pos);

/* Hashes for keys: bytes (strings, IDs) and integers (addresses, IDs). Never 0 (0 marks empty). */
uint64_t htab_bytes(const void *p, size_t n);
uint64_t htab_u64(uint64_t x);

#endif
