/*
 * hmap.h: a small open-addressing map, u64 -> u32, for the analysis's and
 * the readers' lookups (thread keys, correlation ids, frame pointers).
 * Zeroed is empty; at most half full; no removal. UINT32_MAX is not a value.
 */
#ifndef HMAP_H
#define HMAP_H

#include <stddef.h>
#include <stdint.h>

struct hmap {
	uint64_t *k;
	uint32_t *v;		/* UINT32_MAX: empty slot */
	size_t cap, n;
};

/* murmur3's 64-bit finalizer's first half: every bit of x into the low bits */
uint64_t hmap_mix(uint64_t x);
/* Room for n keys, so that putting them grows nothing (a growth holds both tables for a moment); -1: out of memory. */
int hmap_reserve(struct hmap *m, size_t n);
/* The value slot of key, inserted with val when missing; NULL: out of memory. */
uint32_t *hmap_put(struct hmap *m, uint64_t key, uint32_t val);
/* key's value; UINT32_MAX: missing */
uint32_t hmap_get(const struct hmap *m, uint64_t key);
/* key's value slot, to change its value; NULL: missing (nothing is inserted) */
uint32_t *hmap_find(struct hmap *m, uint64_t key);
/* to: a copy of m (to's old contents are dropped, not freed); -1: out of memory, to empty. */
int hmap_copy(struct hmap *to, const struct hmap *m);
void hmap_free(struct hmap *m);

#endif
