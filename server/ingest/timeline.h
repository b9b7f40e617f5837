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

#include "memmodel.h"
#include "tp.h"

struct timeline_parser;

/* New parser; at most max_points points (more is TP_ERR_TOOBIG). NULL when out of memory. */
struct timeline_parser *timeline_parser_new(uint64_t max_points);
/* Next piece; TP_ERR_INVALID (not a memory timeline, with where), TP_ERR_TOOBIG, TP_ERR_NOMEM. */
int timeline_parser_feed(struct timeline_parser *p, const uint8_t *data, size_t len, struct tp_errbuf *err);
/*
 * End of input: how many points, and the form ("raw", "times_sizes"). The
 * points are held packed (a point costs what changed in it); an export out of
 * time order is sorted, unpacked, when it has at most 2^20 points, else
 * TP_ERR_TOOBIG.
 */
int timeline_parser_finish(struct timeline_parser *p, size_t *n, const char **form, struct tp_errbuf *err);
/* A finished parser's points (src: the parser), in time order, each to fn until it returns nonzero. */
int timeline_replay(const void *src, mem_point_fn fn, void *arg);
void timeline_parser_free(struct timeline_parser *p);

#endif
