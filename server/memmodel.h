/*
 * memmodel.h: the memory model every memory source is read into and every
 * memory answer is made from: a device's timeline of points by category
 * (struct mem_series), what was alive at its peak (mem_group), a snapshot's
 * segments and blocks at dump time, and the small structures their readers
 * share (an address map, the peak's groups). The parsers (ingest/timeline.c,
 * ingest/snapshot.c), the analysis (analysis/memory.c) and the store meet
 * here; it depends on none of them.
 */
#ifndef MEMMODEL_H
#define MEMMODEL_H

#include <stddef.h>
#include <stdint.h>

#define MEM_NCAT 8
enum { CAT_PARAMETER, CAT_OPTIMIZER_STATE, CAT_INPUT, CAT_TEMPORARY, CAT_ACTIVATION, CAT_GRADIENT,
       CAT_AUTOGRAD_DETAIL, CAT_UNKNOWN };
extern const char *const mem_cat_names[MEM_NCAT];

/*
 * A stored point, as the store reads it and memory answers are made from:
 * t_ns, the MEM_NCAT categories in this order, allocated, reserved.
 */
#define MEM_POINT_COLS (3 + MEM_NCAT)
#define MEM_COL_ALLOCATED (1 + MEM_NCAT)
#define MEM_COL_RESERVED (2 + MEM_NCAT)
/*
 * A stored point's parameter bytes (a trace's or a snapshot's baseline: what
 * was allocated before recording began) split at the run's param_bytes: that
 * much parameter, then up to twice as much optimizer state (Adam's two
 * moments a parameter; an optimizer with less state leaves the rest there
 * too), and what is left over unknown: a batch or the last step's outputs
 * still held (param_bytes <= 0: unchanged).
 */
void mem_split_param(int64_t row[MEM_POINT_COLS], int64_t param_bytes);

struct mem_point {
	int64_t t_ns;
	int64_t cat[MEM_NCAT];		/* bytes live per category; they sum to allocated */
	int64_t reserved;		/* -1: unknown */
};

/* What was alive at a series' peak, by category and the operator that made it. */
struct mem_group {
	int cat;
	const char *op;			/* NULL: not known (pre-existing, or an export) */
	int64_t bytes, count;
};

/* A block of a snapshot's segment at dump time. */
enum { MEM_BLOCK_INACTIVE, MEM_BLOCK_ALLOCATED, MEM_BLOCK_PENDING_FREE, MEM_BLOCK_OTHER };
extern const char *const mem_block_states[4];	/* "inactive", "active_allocated", "active_pending_free", "other" */

struct mem_block {
	int64_t offset, size, requested;	/* offset from the segment's address */
	int state;				/* MEM_BLOCK_* */
	int cat;				/* allocated or pending free: its category; else -1 */
	const char *op;				/* who allocated it, when the frames say; else NULL */
	const char *rule;			/* allocated or pending free: the rule that gave cat
						 * (a snapshot's: snap_rule_names); else NULL */
};

/* A segment the caching allocator had reserved at dump time (a snapshot's). */
struct mem_segment {
	int64_t address, total_size, stream;
	char type[8];				/* "large", "small", or "" */
	const struct mem_block *blocks;
	size_t nblocks;
};

typedef int (*mem_point_fn)(void *arg, const struct mem_point *p);

/*
 * What a series' first n points come to: the first's time, the first point of
 * the most bytes allocated (mem_point_total) and those bytes, the most bytes
 * reserved (-1: none known). The store keeps it with a series; a series that
 * goes on from one stored before starts from it (mem_series.same).
 */
struct mem_prefix {
	int64_t n, first_t, best, best_at, max_reserved;
};
#define MEM_PREFIX_INIT ((struct mem_prefix){ 0, 0, INT64_MIN, -1, -1 })
/* p, the next point, to x; its mem_point_total */
int64_t mem_prefix_add(struct mem_prefix *x, const struct mem_point *p);

/* Points per stored block: a series stored before is gone on from a block's first point. */
#define MEM_PT_BLOCK 1024

/* One device's timeline, as a source produced it. */
struct mem_series {
	char device[16];		/* "cuda:N" or "cpu" */
	const char *source;		/* "pytorch", "trace" or "snapshot" */
	const struct mem_point *pts;	/* in time order; NULL: made by replay */
	size_t n;
	/* a series too long to hold (a snapshot's): its n points made again, in order, at each call */
	int (*replay)(const void *src, mem_point_fn fn, void *arg);
	/*
	 * Points [0, same) are those the last write of the series this one goes on
	 * from stored (a multiple of MEM_PT_BLOCK; 0: none known), and come to
	 * pre; replay_from makes the points from there on (memory.c's marks).
	 */
	size_t same;
	struct mem_prefix pre;
	int (*replay_from)(const void *src, size_t from, mem_point_fn fn, void *arg);
	const void *src;
	int64_t baseline;		/* trace: bytes allocated before the first event */
	const struct mem_group *groups;
	size_t ngroups;
	const struct mem_segment *segs;	/* snapshot: its segments at dump time, by address; else NULL */
	size_t nsegs;
};

/* The point's categories summed (saturating): its allocated bytes. */
int64_t mem_point_total(const struct mem_point *p);

/* Each point of s, in order, to fn (held or replayed); stops at fn's first non-zero, which it returns. */
int mem_series_each(const struct mem_series *s, mem_point_fn fn, void *arg);
/* The same from point from on: 0, or s->same (TP_ERR_UNSUPPORTED else). */
int mem_series_each_from(const struct mem_series *s, size_t from, mem_point_fn fn, void *arg);

/*
 * Address -> allocation index, open addressing, for at most n addresses.
 * A slot's value: -1 empty (never seen), -2 an address whose block was
 * freed (kept so probe chains stay whole), >= 0 the caller's index.
 */
struct mem_amap {
	int64_t *key;
	int32_t *val;
	size_t cap;
	size_t n;		/* slots given a value through mem_amap_put */
};
int mem_amap_init(struct mem_amap *m, size_t n);
void mem_amap_free(struct mem_amap *m);
/* key's slot (a lookup too: -1 when missing); the map must have room */
int32_t *mem_amap_slot(struct mem_amap *m, int64_t key);
/* key's slot, the map grown first when a new key would fill it past half; NULL: out of memory */
int32_t *mem_amap_put(struct mem_amap *m, int64_t key);
/* dst (uninitialized) as a copy of src, with room for as many keys again */
int mem_amap_copy(struct mem_amap *dst, const struct mem_amap *src);

/*
 * Groups of what was alive at a peak, in g (room for MEM_MAX_GROUPS + 2):
 * the group of (cat, op), made when new; past MEM_MAX_GROUPS the rest go to
 * (cat, "(other)"); NULL when even that has no room. *is_new (may be NULL):
 * a group was made for op itself, so a caller that does not own op copies it.
 */
#define MEM_MAX_GROUPS 200
struct mem_group *mem_group_add(struct mem_group *g, size_t *ng, int cat, const char *op, int *is_new);
/* Largest first. */
void mem_groups_sort(struct mem_group *g, size_t n);

#endif
