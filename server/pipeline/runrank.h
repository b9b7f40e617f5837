/*
 * runrank.h: a run's rank as one timeline. The analysis of (run, rank) is
 * that of all its ready trace artifacts together (chunks in any order,
 * overlapping or not, cycles with gaps between them): their stored events are
 * replayed through one analysis (analysis.h), names joined by their text and
 * times put on one base, and the derived tables are stored once for the
 * rank (store_rank_replace), keyed by (run, rank): steps, operators, kernels,
 * collectives and the traces' memory timelines (their points are gone over,
 * so the ones a chunk left as they were are not written again). An operator whose children
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
 * server to derive them itself first (runrank_uploaded). While they go on,
 * the server replays each trace that joins into the rank's kept analysis
 * (growing ahead: runrank.c), so that the derivation has only to finish
 * it. bench/results/ has the figures.
 */
#ifndef RUNRANK_H
#define RUNRANK_H

#include "store/store.h"
#include "tp.h"

/*
 * The derivations of a server (of a test), its object: what it keeps of the ranks derived last,
 * the runs being derived, the background derivations and their pace, and its settings (the
 * --derive-* flags). One per process is the rule; nothing of it is global. Every runrank_*
 * call below takes it.
 */
struct deriver;
struct deriver_opts {
	unsigned pace_k;	/* a run's background derivations start no sooner than pace_k times the last
				 * one's length after it (0: at once; --derive-pace) */
	unsigned quiet_s;	/* runrank_uploaded waits for this long without an upload (0: off; --derive-quiet) */
	int parts;		/* a rank's profiling cycles analysed in parts (--derive-parts) */
	uint64_t split_bytes;	/* and a part that holds more is cut inside its traces, at a step that
				 * nothing crosses (runrank.c: split()); 0: never (--derive-split) */
	uint64_t kept_bytes;	/* what the ranks kept may take in all, memory and temporary files (0: none
				 * is kept; --derive-keep) */
	double kept_idle_s;	/* a rank kept and not derived for this long is dropped at the next derivation */
};
#define RUNRANK_PACE 3
#define RUNRANK_QUIET 2
/*
 * The ranks whose analyses are kept between derivations (and grown ahead), at most: an 8-GPU
 * job's ranks and more. With 4, eight ranks of 20 chunks each took 601-805 ms to their first
 * /ranks, half of them replayed whole; with 16, 302-446 ms, and 18 MiB more memory at peak
 * (bench/ranks_grow.py).
 */
#define RUNRANK_KEPT_RANKS 16
#define RUNRANK_SPLIT (16u << 20)
/* The defaults: RUNRANK_PACE, RUNRANK_QUIET, parts on, RUNRANK_SPLIT, 2 GiB kept for 10 minutes. */
void deriver_opts_default(struct deriver_opts *o);
/* A deriver with o (NULL: the defaults); NULL when out of memory. */
struct deriver *deriver_new(const struct deriver_opts *o);
/* Free dv, after runrank_drain() of every store it derived for. NULL is a no-op. */
void deriver_free(struct deriver *dv);

/*
 * Derive (run, rank) again now, inside w's transaction (store_tx_begin) or
 * as its own, under the write lock, and unmark it: after a removal, and when
 * traces kept joining while runrank_settle replayed.
 */
int runrank_derive(struct deriver *dv, struct store_writer *w, const char *run, int rank, struct tp_errbuf *err);

/*
 * Derive the marked ranks of run (of every run when NULL), each from a read
 * snapshot, without holding the write lock while it replays. Cheap when none
 * is marked. Reads of a run call it first, so they answer for every trace
 * uploaded before them.
 */
int runrank_settle(struct deriver *dv, struct store *st, const char *run, struct tp_errbuf *err);

/*
 * Settle run (every run when NULL) in the background, as runrank_settle
 * would, and return at once: for reads that answer from the analysis as it
 * stands (?wait=0: a page that follows a growing run never waits for a
 * derivation). Nothing is started when nothing is marked, or when one is
 * under way for the run already (the next kick after it ends settles what
 * joined meanwhile). -1 when no thread could be started (a later read
 * derives instead). Paced: deriver_opts.pace_k.
 */
int runrank_kick(struct deriver *dv, struct store *st, const char *run);
/*
 * An upload marked rank of run: settle run in the background once it has had
 * no upload for deriver_opts.quiet_s seconds, so that the next read finds it
 * derived, and until then grow the rank ahead (runrank.c: grow_rank).
 * Nothing when quiet_s is 0. -1 as runrank_kick.
 */
int runrank_uploaded(struct deriver *dv, struct store *st, const char *run, int rank);
/* Wait for st's background derivations to end, and drop what is kept of its ranks (before store_close). */
void runrank_drain(struct deriver *dv, struct store *st);
/* Tests: what the ranks kept may take in all (deriver_opts.kept_bytes), for how long one not derived
 * stays (kept_idle_s), and after how long unused one gives its place to a rank growing ahead
 * (runrank.c: GROWN_YIELD_S), from now on. */
void runrank_set_kept_bytes(struct deriver *dv, uint64_t n);
void runrank_set_kept_idle(struct deriver *dv, double seconds);
void runrank_set_kept_yield(struct deriver *dv, double seconds);
/* Drop what is kept of run's ranks (every run's when NULL) between derivations, and the fingerprints
 * runrank_overlaps holds of them: after a removal. */
void runrank_forget(struct deriver *dv, struct store *st, const char *run);
/* The fingerprints of the ranks' trace events the uploads' overlap checks keep (pipeline/overlap.h);
 * NULL dv: NULL. */
struct overlap_cache *runrank_overlaps(struct deriver *dv);

#endif
