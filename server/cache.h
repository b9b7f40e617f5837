/*
 * cache.h: answers of read requests, kept while the store's generation
 * (store_generation) stays the same. Analysis is stored at ingest, so an
 * answer changes only when a write commits; between writes, a repeated read
 * costs a lookup and a copy instead of SQL and JSON encoding. Bounded in
 * bytes; thread-safe.
 */
#ifndef CACHE_H
#define CACHE_H

#include <stddef.h>
#include <stdint.h>

struct cache;

/* NULL when out of memory (the server then runs without a cache). */
struct cache *cache_new(size_t max_bytes);
void cache_free(struct cache *c);

struct cache_hit {
	char *data;		/* a copy (tp_malloc), the caller's */
	size_t len;
	char content_type[64];
	int gzip;		/* data is gzip (Content-Encoding) */
};
/* 1 and *hit filled when key has an answer made at generation gen, else 0. */
int cache_get(struct cache *c, const char *key, uint64_t gen, struct cache_hit *hit);
/* Keep a copy of an answer made at generation gen (best effort: skipped when it does not fit). */
void cache_put(struct cache *c, const char *key, uint64_t gen, const char *data, size_t len,
	       const char *content_type, int gzip);

#endif
