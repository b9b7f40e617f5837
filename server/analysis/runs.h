/*
 * runs.h: records of one kind in sorted runs. A run of `limit` records is
 * sorted and written to an unlinked temporary file (in $TMPDIR, else /tmp)
 * as the records come, and a cursor reads the runs back merged, a heap of
 * runs by their next record. Fewer records than a run stay in memory, one
 * run sorted, and nothing is written. What the analysis of a trace holds
 * of its host spans and [memory] events, whatever the trace's size.
 *
 *   struct runs r;
 *   runs_init(&r, sizeof(struct rec), limit, "spans", rec_less, rec_sort);
 *   runs_add(&r, &rec, err) ...; runs_seal(&r, err);
 *   rcur_open(&c, &r); while ((p = rcur_next(&c))) ...; rcur_close(&c);
 *
 * less must be a total order (break ties on arrival), so that any way the
 * records are cut into runs merges the same.
 */
#ifndef RUNS_H
#define RUNS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "analysis/sort.h"
#include "tp.h"

/*
 * A record type's order and sort for runs_init(), NAME_order and NAME_sort,
 * from its LESS(const T *, const T *) (sort.h's sort, inlined).
 */
#define RUNS_DEFINE(NAME, T, LESS)								\
SORT_DEFINE(NAME##_sort_typed, T, LESS)								\
static inline int NAME##_order(const void *a, const void *b)						\
{												\
	return LESS((const T *)a, (const T *)b);						\
}												\
static inline void NAME##_sort(void *v, size_t n)							\
{												\
	NAME##_sort_typed((T *)v, n);								\
}

typedef int (*runs_less_fn)(const void *a, const void *b);
typedef void (*runs_sort_fn)(void *v, size_t n);

struct runs {
	char *buf;		/* the run being filled (once sealed with none spilled: all, sorted) */
	size_t n, cap, limit;	/* records */
	size_t size;		/* bytes in a record */
	runs_less_fn less;
	runs_sort_fn sort;
	/* optional: a spilled run is cut where split(previous, next) says, each part a run
	 * (a caller may then merge with another order, one that each part keeps) */
	int (*split)(const void *prev, const void *next);
	/* optional: what is read back of spilled runs, n records at a time, before it is merged */
	void (*fix)(void *ctx, void *recs, size_t n);
	void *fixctx;
	const char *what;	/* in the temporary file's name and in errors */
	int fd;			/* the spilled runs, back to back; -1: none yet */
	off_t end;		/* where they end (the file may go on: runs_fork()) */
	size_t *run_n;		/* records in each spilled run */
	size_t nruns, runcap;
	struct runs_behind *bg;	/* runs_behind(): full runs sorted and written on a thread of their own */
};

void runs_init(struct runs *r, size_t size, size_t limit, const char *what, runs_less_fn less, runs_sort_fn sort);
void runs_free(struct runs *r);
/* Room for k more records at the end of the run being filled (a full run spilled first): fill
 * them, then runs_commit(r, k). NULL: out of memory or the spill failed (in err). */
void *runs_reserve(struct runs *r, size_t k, struct tp_errbuf *err);
void runs_commit(struct runs *r, size_t k);
int runs_add(struct runs *r, const void *rec, struct tp_errbuf *err);
/*
 * to: r as it is now, to go on apart from it (r not sealed): to's records
 * are r's, and either may take more, be sealed and be read while the other
 * lives. They share r's spilled runs (the file, read at offsets); each
 * writes its next runs after them, so one's later runs overwrite the
 * other's: read to's merged records before r spills again, and the other
 * way round. -1 with err set.
 */
int runs_fork(struct runs *to, const struct runs *r, struct tp_errbuf *err);
/* Spill the run being filled when it holds more than keep bytes, and give back the room past
 * what is left (to hold less between forks). */
int runs_flush(struct runs *r, size_t keep, struct tp_errbuf *err);
/* Done adding: the last run sorted, kept in memory when it is the only one, else spilled. */
int runs_seal(struct runs *r, struct tp_errbuf *err);
/*
 * From now on a full run is sorted and written by a thread of r's own (made
 * at the first), while the records after it fill a second buffer: the
 * thread that adds them does not wait for the sort and the write. Every
 * other call on r waits for the run in hand first; runs_seal() and
 * runs_free() end the thread (rcur_open() reads sealed runs: none). Runs cut by split() go on as before. -1: out
 * of memory (r goes on as before).
 */
int runs_behind(struct runs *r);

struct rsrc;

/* The records of sealed runs in sorted order. */
struct rcur {
	const struct runs *r;
	struct rsrc *src;
	char *bufs;
	uint32_t *heap;
	size_t nheap, i;
	int advance;		/* the top run's record was handed out: move past it first */
	int err;		/* errno of a failed read */
};

/* -1: out of memory, or a read failed (c->err); rcur_close() either way. */
int rcur_open(struct rcur *c, const struct runs *r);
/* The next record, valid until the next call; NULL at the end or when a read failed (c->err). */
const void *rcur_next(struct rcur *c);
void rcur_close(struct rcur *c);

/* The temporary files: append to *fd (made on the first call); read back (an errno value, 0: read). */
int spill_append(int *fd, const char *what, const void *buf, size_t len, struct tp_errbuf *err);
int spill_read(int fd, void *buf, size_t len, off_t off);
/* TP_ERR_IO "temp_file": "analysis: <what> its temporary file: <errno's text>" */
int spill_fail(struct tp_errbuf *err, const char *what);
/* Tests: the temporary files made after the next n fail to be made (ENOSPC); -1: none fail. */
void spill_fail_after(long n);

#endif
