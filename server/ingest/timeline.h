/*
 * timeline.h: PyTorch's export_memory_timeline files, streaming
 * (shared/reference/formats.md 2.4), into points of a memory timeline:
 *   raw form        [[t_ns, action, bytes, category], ...]: rows of deltas,
 *                   summed per category, one point per distinct t (as HTA's
 *                   MemoryAnalysis does); t = -1 (pre-existing) is put at
 *                   the first real time;
 *   [times, sizes]  times (us since PyTorch 2.2, ns in 2.1: told apart by
 *                   magnitude) and rows of 9 numbers, [0, bytes of each
 *                   category]: cumulative state.
 * Categories in PyTorch's export order: parameter, optimizer_state, input,
 * temporary, activation, gradient, autograd_detail, unknown. Pure: no SQL.
 */
#ifndef TIMELINE_H
#define TIMELINE_H

#include <stddef.h>
#include <stdint.h>

#include "tp.h"

#define MEM_NCAT 8
enum { CAT_PARAMETER, CAT_OPTIMIZER_STATE, CAT_INPUT, CAT_TEMPORARY, CAT_ACTIVATION, CAT_GRADIENT,
       CAT_AUTOGRAD_DETAIL, CAT_UNKNOWN };
extern const char *const mem_cat_names[MEM_NCAT];

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
};

/* A segment the caching allocator had reserved at dump time (a snapshot's). */
struct mem_segment {
	int64_t address, total_size, stream;
	char type[8];				/* "large", "small", or "" */
	const struct mem_block *blocks;
	size_t nblocks;
};

/* One device's timeline, as a source produced it. */
struct mem_series {
	char device[16];		/* "cuda:N" or "cpu" */
	const char *source;		/* "pytorch", "trace" or "snapshot" */
	const struct mem_point *pts;	/* in time order */
	size_t n;
	int64_t baseline;		/* trace: bytes allocated before the first event */
	const struct mem_group *groups;
	size_t ngroups;
	const struct mem_segment *segs;	/* snapshot: its segments at dump time, by address; else NULL */
	size_t nsegs;
};

/* The point's categories summed (saturating): its allocated bytes. */
int64_t mem_point_total(const struct mem_point *p);

struct timeline_parser;

/* New parser; at most max_points points (more is TP_ERR_TOOBIG). NULL when out of memory. */
struct timeline_parser *timeline_parser_new(uint64_t max_points);
/* Next piece; TP_ERR_INVALID (not a memory timeline, with where), TP_ERR_TOOBIG, TP_ERR_NOMEM. */
int timeline_parser_feed(struct timeline_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err);
/* End of input: the points, in time order (borrowed until free). */
int timeline_parser_finish(struct timeline_parser *p, const struct mem_point **points, size_t *n,
			   const char **form, struct tp_errbuf *err);
void timeline_parser_free(struct timeline_parser *p);

#endif
