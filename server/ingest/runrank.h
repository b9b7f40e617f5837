/*
 * runrank.h: a run's rank as one timeline. The analysis of (run, rank) is
 * that of all its ready trace artifacts together (chunks in any order,
 * overlapping or not, cycles with gaps between them): their stored events are
 * replayed through one analysis (analysis.h), names joined by their text and
 * times put on one base, and the derived tables (steps, operators, kernels,
 * the trace's memory timelines) are stored once for the rank, under its
 * newest trace artifact (store_rank_replace). An operator whose children
 * came in another chunk nests, an allocation freed in another chunk pairs,
 * a step cut by a chunk boundary gets all its events.
 *
 * Cost: the replay reads every event of the rank, so a run of n chunks costs
 * O(n^2) events over its life (bench/results/ has the figure).
 */
#ifndef RUNRANK_H
#define RUNRANK_H

#include "store.h"
#include "tp.h"

/*
 * Derive (run, rank) again, inside w's transaction (store_tx_begin) or as
 * its own. With a single trace artifact, its own analysis is already the
 * rank's: nothing is done unless again (after a removal, the one left may
 * hold none).
 */
int runrank_derive(struct store_writer *w, const char *run, int rank, int again, struct tp_errbuf *err);

#endif
