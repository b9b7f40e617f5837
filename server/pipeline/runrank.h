/*
 * runrank.h: a run's rank as one timeline. The analysis of (run, rank) is
 * that of all its ready trace artifacts together (chunks in any order,
 * overlapping or not, cycles with gaps between them): their stored events are
 * replayed through one analysis (analysis.h), names joined by their text and
 * times put on one base, and the derived tables are stored once for the
 * rank (store_rank_replace): steps, operators, kernels and collectives keyed
 * by (run, rank), the trace's memory timelines under the rank's first trace
 * artifact (its memory points are gone over, so the ones a chunk left as
 * they were are not written again). An operator whose children
 * came in another chunk nests, an allocation freed in another chunk pairs,
 * a step cut by a chunk boundary gets all its events.
 *
 * Cost: a derivation replays the events of the artifacts that joined since
 * the rank's last one (the analysis of the rank's earlier ones is kept, for
 * the last few ranks derived: runrank.c), then finishes the analysis of the
 * rank's last part: the artifacts since the last one that began after all
 * the ones before it ended (a profiling cycle; analysis.h's parts), merged
 * with the parts before it, whose results are kept, and whose memory model
 * goes on with the last part's [memory] events (made again from every part's
 * when it cannot: analysis.h). Chunks of one trace overlap in time and make
 * one part, but one that holds more than --derive-split is cut at a step that
 * nothing crosses, when they come in time order (runrank.c: split()), so
 * that the steps before close a part. An upload does not
 * derive: a trace that joins a rank which has one is committed with the rank
 * marked (store_rank_defer), so uploads cost their own size (and when the
 * upload names a rank that has a trace already, it is not even analysed on
 * its own: pipeline/ingest.c); the first read
 * of the run derives each marked rank once (runrank_settle), however many
 * chunks joined since, unless the run's uploads paused long enough for the
 * server to derive them itself first (runrank_uploaded). bench/results/ has
 * the figures.
 */
#ifndef RUNRANK_H
#define RUNRANK_H

#include "store/store.h"
#include "tp.h"

/*
 * Derive (run, rank) again now, inside w's transaction (store_tx_begin) or
 * as its own, under the write lock, and unmark it: after a removal, and when
 * traces kept joining while runrank_settle replayed.
 */
int runrank_derive(struct store_writer *w, const char *run, int rank, struct tp_errbuf *err);

/*
 * Derive the marked ranks of run (of every run when NULL), each from a read
 * snapshot, without holding the write lock while it replays. Cheap when none
 * is marked. Reads of a run call it first, so they answer for every trace
 * uploaded before them.
 */
int runrank_settle(struct store *st, const char *run, struct tp_errbuf *err);

/*
 * Settle run (every run when NULL) in the background, as runrank_settle
 * would, and return at once: for reads that answer from the analysis as it
 * stands (?wait=0: a page that follows a growing run never waits for a
 * derivation). Nothing is started when nothing is marked, or when one is
 * under way for the run already (the next kick after it ends settles what
 * joined meanwhile). -1 when no thread could be started (a later read
 * derives instead).
 */
int runrank_kick(struct store *st, const char *run);
/* A run's background derivations start no sooner than k times the last one's length after it
 * (runrank.c; 0: at once); RUNRANK_PACE until set. */
#define RUNRANK_PACE 3
void runrank_set_pace(unsigned k);
/*
 * An upload marked one of run's ranks: settle run in the background once it
 * has had no upload for --derive-quiet seconds (runrank_set_quiet), so that
 * the next read finds it derived. Nothing when that is 0. -1 as
 * runrank_kick.
 */
int runrank_uploaded(struct store *st, const char *run);
#define RUNRANK_QUIET 2
void runrank_set_quiet(unsigned seconds);
/* Whether a rank's profiling cycles are analysed in parts (runrank.c; on until set). */
void runrank_set_parts(int on);
/* And a part that holds more than bytes is cut inside its traces (the chunks of one), at a step that
 * nothing crosses (runrank.c: split()); 0: never. Default 16 MiB. */
void runrank_set_split(uint64_t bytes);
/* Wait for st's background derivations to end, and drop what is kept of its ranks (before store_close). */
void runrank_drain(struct store *st);
/* What the ranks kept may take in all, memory and temporary files (--derive-keep; runrank.c's GROWN_BYTES by
 * default; 0: none is kept). */
void runrank_set_kept_bytes(uint64_t n);
/* Tests: a rank kept and not derived for this long is dropped at the next derivation (runrank.c's GROWN_IDLE_S). */
void runrank_set_kept_idle(double seconds);
/* Drop what is kept of run's ranks (every run's when NULL) between derivations: after a removal. */
void runrank_forget(struct store *st, const char *run);

#endif
