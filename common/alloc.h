/*
 * alloc.h: every allocation of ours, and of jansson, SQLite and our zlib
 * streams, goes through here, so that tests can make allocation N fail, for
 * N = 0, 1, 2 ... through a whole operation (SQLite's and Expat's allocation
 * tests): each must end in a clean error, no leak, no corrupt database.
 *
 * The JSON tokenizer under the trace and timeline parsers is ours
 * (server/ingest/jtok.c), so their every allocation is under this too.
 */
#ifndef ALLOC_H
#define ALLOC_H

#include <stddef.h>

void *tp_malloc(size_t n);
void *tp_calloc(size_t count, size_t n);
void *tp_realloc(void *p, size_t n);
void tp_free(void *p);
char *tp_strdup(const char *s);
char *tp_strndup(const char *s, size_t n);
/*
 * Room for need elements of size in the array *p of capacity *cap (both
 * updated), doubling from 64; -1 (*p and *cap as they were) when out of
 * memory or past what a size_t counts.
 */
int tp_grow(void **p, size_t *cap, size_t need, size_t size);
/*
 * Fault in at once the pages wholly inside [p, p + len), about to be written
 * (MADV_POPULATE_WRITE: Linux 5.14 and later; elsewhere, or when it fails,
 * nothing, and the writes fault them in one by one). On the 2-core VM of
 * bench/results/fork_prefault-20261130.txt a page faulted by its first write
 * costs about 11 µs.
 */
void tp_prefault(void *p, size_t len);

/*
 * n bytes of zeroes for a large table written and read at random, in their own
 * mapping aligned to 2 MiB and advised as huge pages (MADV_HUGEPAGE), so that
 * where the kernel has them (transparent_hugepage "madvise" or "always") each
 * 2 MiB faults in once, not as 512 pages (about 11 us each on the 2-core VM of
 * bench/results/fork_prefault-20261130.txt), and its lookups miss the TLB less.
 * NULL when out of memory (a refused allocation under tp_alloc_fail_after too).
 * Freed by tp_unmap(p, n) with the same n.
 */
#define TP_HUGE_PAGE ((size_t)2 << 20)
void *tp_map(size_t n);
void tp_unmap(void *p, size_t n);

/* zlib's z_stream.zalloc / zfree */
void *tp_zalloc(void *opaque, unsigned items, unsigned size);
void tp_zfree(void *opaque, void *p);

/*
 * Tests: from the n-th allocation on (0 = the next one), every allocation
 * fails; n < 0 turns that off. Returns nothing; see tp_alloc_failures().
 */
void tp_alloc_fail_after(long n);
/* How many allocations were refused since the last tp_alloc_fail_after(). */
long tp_alloc_failures(void);

/*
 * Route jansson through the functions above. Idempotent; call before jansson
 * is used. (store.c routes SQLite, the only place that knows SQLite.)
 */
void tp_alloc_install(void);

#endif
