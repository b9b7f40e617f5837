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
 *
 * Chunks of one trace cut in file order each span most of its time, so each
 * read most of the chunks before it: 20 chunks of the V100 fixture, 12 ms a
 * chunk, growing with their number. So the server keeps the fingerprints of
 * the ranks checked last (struct overlap_cache): an upload's are taken as it
 * is parsed (struct overlap_prints, on the parser's thread) and, once it is
 * committed and answered, added to its rank's (a chunk's: 64 K events at most); an
 * upload none of whose fingerprints are among them reads only the rank's
 * artifacts they do not cover (uploaded before the server started, by
 * another server on the same database, or too large to hold), and of
 * those, when the cache noted the artifact's span of time (every chunk
 * committed since), only the ones whose span meets its own: past the 1 M
 * fingerprints held, a 1 GB run of 1,015 chunks cut in windows of time
 * cost 46 ms a chunk at its end, now 12 as at its start
 * (bench/results/chunk_cost-20261129.txt). One that repeats one of them
 * is checked in the store as before, which says how many and the first.
 */
#ifndef OVERLAP_H
#define OVERLAP_H

#include <stdint.h>

#include "event.h"
#include "store/store.h"
#include "tp.h"

/* The text of the upload's string ids (its parser's). */
typedef const char *(*overlap_str_fn)(void *payload, uint32_t id);

/*
 * The fingerprints of the events of the ranks checked last: 8 ranks, 1 M fingerprints in all
 * (8 to 16 MiB of tables, 32 at most), the least recently checked dropped first, and any rank
 * idle for 10 minutes. One per server (the deriver's: runrank.h), thread-safe.
 */
struct overlap_cache;
struct overlap_cache *overlap_cache_new(void);
void overlap_cache_free(struct overlap_cache *oc);
/* Drop store's (store_serial; 0: every store's) run's ranks (every run's when NULL): after a removal,
 * whose artifact ids may be given again. */
void overlap_cache_forget(struct overlap_cache *oc, uint64_t store, const char *run);
/* The fingerprints oc holds, all ranks' (NULL: 0). */
size_t overlap_cache_held(struct overlap_cache *oc);

/*
 * An upload's timed events ('M' ones aside) as it is parsed, 24 bytes an event, for oc (NULL:
 * none) of store (store_serial); str gives the text of their string ids. _add takes an event as
 * the store keeps it (not the flows the ingest drops); -1 when out of memory or past the events
 * taken at most: 1 M when checked (the upload's rank has a trace already), else 64 K (they are
 * only kept): then the prints are of no use. _note, once the upload is committed as a new trace
 * artifact of (run, rank) with base base_ns and its timed events' ts in [lo, hi] as written (lo >
 * hi: none), says so (-1 when out of memory: then nothing is kept); str is not called after it.
 * _done keeps what was noted in oc's for that rank, with its fingerprints when they are 64 K at
 * most (a chunk's) and oc has room for them, unless a removal came (overlap_cache_forget) since
 * the prints were begun, and frees p (NULL: nothing). The upload's answer need not wait for it
 * (h_artifacts.c: after it is sent): a later upload that finds the artifact not kept yet reads
 * its events from the store instead. Later uploads read neither an artifact whose fingerprints
 * oc holds nor one whose span misses their own.
 */
struct overlap_prints;
struct overlap_prints *overlap_prints_new(struct overlap_cache *oc, uint64_t store, int checked, overlap_str_fn str,
					  void *payload);
int overlap_prints_add(struct overlap_prints *p, const struct tp_event *e);
int overlap_prints_note(struct overlap_prints *p, const char *run, int rank, int64_t artifact, int64_t base_ns,
			int64_t lo, int64_t hi);
void overlap_prints_done(struct overlap_prints *p);
void overlap_prints_free(struct overlap_prints *p);

/*
 * TP_OK when artifact (of run, rank; its events written with base base_ns, their ts within
 * [lo, hi] as written; lo > hi: none) repeats no event of the rank's other ready traces, else
 * TP_ERR_CONFLICT with err saying which. Called inside w's transaction, after the artifact's
 * commit (so uploads are checked one at a time against each other). prints (NULL: the upload's
 * events are read back from the store) are the upload's; with them, the artifacts their cache
 * holds every fingerprint of are not read.
 */
int overlap_check(struct store_writer *w, const char *run, int rank, int64_t artifact, int64_t base_ns,
		  int64_t lo, int64_t hi, overlap_str_fn str, void *payload, const struct overlap_prints *prints,
		  struct tp_errbuf *err);

#endif
