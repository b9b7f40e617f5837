/*
 * memseries.h: a memory series as /memory answers it, from the points of its
 * recordings (every export, snapshot or trace of one source on one device,
 * in the order of their first point): stitched in time, the baseline split
 * into parameters and optimizer state when the run says its param_bytes,
 * and downsampled for a chart. Pure: the store reads the points, this
 * decides which are kept and how they read.
 */
#ifndef MEMSERIES_H
#define MEMSERIES_H

#include <stddef.h>
#include <stdint.h>

#include "memmodel.h"

/*
 * The stitch of a series' recordings, point by point: a recording that
 * overlaps an earlier one joins where the earlier ends (its points up to
 * there are skipped, and no gap is left); one whose first point is after the
 * last point kept leaves a gap, [the last point's time, its first point's
 * time).
 */
struct memstitch {
	int64_t param_bytes;	/* > 0: split each point's parameter bytes (the baseline) at it */
	size_t kept, here;	/* points kept, points kept of the current recording */
	size_t seen;		/* points of the current recording given */
	int64_t last_t;
	size_t first;		/* the recording of the first point kept (once kept > 0) */
	int64_t *gaps;		/* [start, end) pairs, owned */
	size_t ngaps;
};

void memstitch_init(struct memstitch *m, int64_t param_bytes);
/* The next recording begins (call before its first point). */
void memstitch_recording(struct memstitch *m);
/*
 * Point row of recording rec: 1 when it is kept (row split in place by
 * mem_split_param), 0 when
 * an earlier recording covers it, -1 when out of memory.
 */
int memstitch_point(struct memstitch *m, size_t rec, int64_t row[MEM_POINT_COLS]);
void memstitch_free(struct memstitch *m);

/*
 * The window [start_ns, end_ns] of n points in time order, from how many are
 * at or before start_ns (below_start) and at or before end_ns (to_end):
 * [*w0, *w1) from the last point at or before start_ns (the state the window
 * opens with) to the last at or before end_ns; at least one point when n > 0.
 */
void memseries_window(size_t n, size_t below_start, size_t to_end, size_t *w0, size_t *w1);

/*
 * The stretches a chart of at most `buckets` points draws of the points
 * [w0, w1) (0: all): bucket b is [bounds[b], bounds[b + 1]), drawn by its
 * point of highest allocated (the first of equal ones), so the peak always
 * survives and every category comes from that same point (the stack stays
 * consistent); with 3 buckets or more, the first and last points are
 * buckets of their own, so a chart spans the series. bounds has room for
 * min(buckets, w1 - w0) + 1; returns how many buckets.
 */
size_t memseries_buckets(size_t w0, size_t w1, size_t buckets, size_t *bounds);

#endif
