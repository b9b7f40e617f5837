/*
 * runrank_int.h: what runrank.c (derivations and the analyses kept between
 * them) and schedule.c (background derivations) share of a deriver.
 * runrank.h is the interface.
 */
#ifndef RUNRANK_INT_H
#define RUNRANK_INT_H

#include <time.h>

#include "pipeline/runrank.h"

/* Seconds since t0, both on CLOCK_MONOTONIC. */
static inline double runrank_since(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)(t.tv_sec - t0->tv_sec) + (double)(t.tv_nsec - t0->tv_nsec) / 1e9;
}

/*
 * runrank.c, for schedule.c (which makes and frees a deriver: deriver_new, deriver_free): a
 * deriver with its background derivations ks (NULL when out of memory), freed without them;
 * dv's background derivations and settings.
 */
struct kick_set;
struct deriver *runrank_new(const struct deriver_opts *o, struct kick_set *ks);
void runrank_free(struct deriver *dv);
struct kick_set *runrank_kicks(struct deriver *dv);
const struct deriver_opts *runrank_opts(const struct deriver *dv);
/* The marked ranks of run (of every run when NULL), from a reader of its own. */
int runrank_pending_of(struct store *st, const char *run, struct store_pending **p, size_t *n, struct tp_errbuf *err);
/*
 * Replay the traces that joined run's ranks (n of them) since their last derivation into the
 * analyses kept for them, without deriving (runrank.c: grow_rank()); failures are left to the
 * next read.
 */
void runrank_grow(struct deriver *dv, struct store *st, const char *run, const int *ranks, size_t n);

#endif
