/*
 * fold.c: the thread that folds SQLite's write-ahead log back into the
 * database file (store_int.h: store_fold_kick, store_fold_stop).
 */
#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

#include "store/store_int.h"

/*
 * The fold thread, made at the first kick: a PASSIVE checkpoint on its own
 * connection once a writer's commits leave 16 MiB or more in the log and
 * pause for 20 ms, or leave 128 MiB more than the last fold did. The writers go on appending to
 * the log meanwhile. Folded inline by the commit that passed 16 MiB (SQLite's
 * autocheckpoint), each fold stalled the upload that made it for its
 * fsyncs, 25-35 ms here, the parser and the inflate waiting behind the
 * writer: eleven times in a 1 GB trace, 3.3-3.7 s against 3.0-3.3 s here
 * (bench/results/wal_fold-20261130.txt). A busy writer's log grows past
 * what was folded (it starts again from its beginning only once all of it
 * was): up to DB_WAL_MAX, and journal_size_limit keeps 64 MiB of it after.
 */
#define FOLD_QUIET_NS 20000000LL	/* a pause of the writers' commits */
#define FOLD_BUSY (8 * DB_WAL_KICK)	/* pages past the last fold: fold without a pause */
#define FOLD_AGAIN_NS 100000000LL	/* a fold that left pages: again after 100 ms without a kick, */
#define FOLD_TRIES 20			/* 20 times at most */

static void *fold_main(void *arg);

void store_fold_kick(void *arg, int pages)
{
	struct store *st = arg;

	pthread_mutex_lock(&st->fold_mu);
	/* made at the first kick: a store whose log never reaches DB_WAL_KICK pages has none */
	if (!st->folding && !st->fold_stop && !pthread_create(&st->fold, NULL, fold_main, st))
		st->folding = 1;
	st->fold_kicked = 1;
	st->fold_pages = pages;
	pthread_cond_signal(&st->fold_cv);
	pthread_mutex_unlock(&st->fold_mu);
}

static void fold_wait(struct store *st, int64_t ns)
{
	struct timespec until;

	clock_gettime(CLOCK_REALTIME, &until);
	ns += until.tv_nsec;
	until.tv_sec += ns / 1000000000LL;
	until.tv_nsec = ns % 1000000000LL;
	pthread_cond_timedwait(&st->fold_cv, &st->fold_mu, &until);
}

static void *fold_main(void *arg)
{
	struct store *st = arg;
	struct db *db = NULL;
	int left = 0, tries = 0, mark = 0;

	tp_thread_name("ts-fold");
	pthread_mutex_lock(&st->fold_mu);
	for (;;) {
		if (left && tries < FOLD_TRIES && !st->fold_kicked && !st->fold_stop) {
			/* the pages a busy writer added while it folded: folded once it pauses, so that the
			 * log starts again from its beginning at the next write (at most 64 MiB of it kept) */
			fold_wait(st, FOLD_AGAIN_NS);
			tries = st->fold_kicked ? 0 : tries + 1;
		} else {
			while (!st->fold_kicked && !st->fold_stop)
				pthread_cond_wait(&st->fold_cv, &st->fold_mu);
			tries = 0;
		}
		/* while commits go on, wait for a pause, up to FOLD_BUSY pages */
		while (st->fold_kicked && !st->fold_stop &&
		       (st->fold_pages >= mark ? st->fold_pages - mark : st->fold_pages) < FOLD_BUSY) {
			st->fold_kicked = 0;
			fold_wait(st, FOLD_QUIET_NS);
		}
		if (st->fold_stop)
			break;
		st->fold_kicked = 0;
		pthread_mutex_unlock(&st->fold_mu);
		left = 0;
		if (db || db_open(st->path, 0, &db, NULL) == TP_OK) {
			if ((left = db_checkpoint(db, 0, &mark)) >= 0)
				atomic_fetch_add(&st->folds, 1);
			else
				left = 0;
		}
		pthread_mutex_lock(&st->fold_mu);
	}
	pthread_mutex_unlock(&st->fold_mu);
	db_close(db);
	return NULL;
}

void store_fold_stop(struct store *st)
{
	int started;

	pthread_mutex_lock(&st->fold_mu);
	st->fold_stop = 1;
	started = st->folding;
	st->folding = 0;
	pthread_cond_signal(&st->fold_cv);
	pthread_mutex_unlock(&st->fold_mu);
	if (started)
		pthread_join(st->fold, NULL);
}
