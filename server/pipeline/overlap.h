/*
 * overlap.h: a trace upload that repeats events its rank already has. The
 * same events uploaded twice (a file sent again with a byte changed, chunks
 * cut again so that they overlap) would be replayed twice into the rank's
 * one timeline (runrank.h): two steps with one number, operators counted
 * twice, allocations freed twice. So an upload that holds an event identical
 * to one of another ready trace artifact of its rank (the same phase, name,
 * category, time on the common base, length, thread, ids and stored args) is
 * refused with 409 `overlapping_upload`, naming the artifact and the first
 * event; the same bytes sent again are not refused (the store's sha256 makes
 * them one artifact: 200).
 *
 * Cost: only the other artifacts' blocks with an event that starts inside
 * the upload's own span of time are read (event blocks by their bounds), and
 * of those only the ones with an event of the upload's phase, time and length
 * are decoded (the rest skimmed: store_trace_prefilter); two sets of 8 bytes
 * a hash (at most half full) are held for the upload's events while they are
 * read back once. Profiling cycles that do not overlap, and the first trace
 * of a rank, read nothing.
 */
#ifndef OVERLAP_H
#define OVERLAP_H

#include <stdint.h>

#include "store/store.h"
#include "tp.h"

/* The text of the upload's string ids (its parser's). */
typedef const char *(*overlap_str_fn)(void *payload, uint32_t id);

/*
 * TP_OK when artifact (of run, rank; its events written with base base_ns, their ts within
 * [lo, hi] as written; lo > hi: none) repeats no event of the rank's other ready traces, else
 * TP_ERR_CONFLICT with err saying which. Called inside w's transaction, after the artifact's
 * commit (so uploads are checked one at a time against each other).
 */
int overlap_check(struct store_writer *w, const char *run, int rank, int64_t artifact, int64_t base_ns,
		  int64_t lo, int64_t hi, overlap_str_fn str, void *payload, struct tp_errbuf *err);

#endif
