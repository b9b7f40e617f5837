/*
 * store.c: the store itself (see store.h for the contract, store_int.h for
 * the files that share its work): opening it (schema.c makes it ready),
 * health, counts, and closing.
 *
 * Ingest speed (measured, shared/design.md and evpack.h): 16 KiB pages, WAL
 * with synchronous=NORMAL, one private NOMUTEX connection per writer, events
 * packed into one row per block, a transaction per batch, and no secondary
 * index on the tables written during ingest: their keys are
 * (artifact << 32 | ordinal), so rows arrive as B-tree appends.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alloc.h"
#include "store/evpack.h"
#include "store/store_int.h"

int store_open(const char *path, struct store **out, struct tp_errbuf *err)
{
	struct store *st = tp_calloc(1, sizeof(*st));
	int rc;

	if (!st || !(st->path = tp_strdup(path))) {
		tp_free(st);
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	}
	static _Atomic uint64_t serials;
	st->serial = atomic_fetch_add(&serials, 1) + 1;
	pthread_mutex_init(&st->mu, NULL);
	pthread_mutex_init(&st->setup_mu, NULL);
	pthread_cond_init(&st->beat_cv, NULL);
	pthread_mutex_init(&st->fold_mu, NULL);
	pthread_cond_init(&st->fold_cv, NULL);
	/* marks left by an earlier process: the first read settles them */
	atomic_store(&st->marks, 1);
	st->shared = db_is_postgres(path);
	if (st->shared) {
		uint64_t id = 0;
		if (getrandom(&id, sizeof(id), 0) != (ssize_t)sizeof(id))
			id = (uint64_t)tp_now_ns() ^ ((uint64_t)getpid() << 32);
		st->server_id = (int64_t)(id >> 1);
	}
	/* before setup, so that the writers it opens have their log folded too */
	st->fold_on = !st->shared;
	rc = store_ready(st, err);
	/* a PostgreSQL not there yet: serve 503s, and set up once it is (the heartbeat tries) */
	if (rc == TP_ERR_UNAVAILABLE) {
		tp_warn("%s: waiting for it; every request gets 503 until it answers", err->msg);
		st->waiting = 1;
		rc = TP_OK;
		memset(err, 0, sizeof(*err));
	}
	if (!rc && st->shared) {
		if (pthread_create(&st->beat, NULL, store_beat_main, st))
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "cannot start the heartbeat");
		else
			st->beating = 1;
	}
	if (rc) {
		store_fold_stop(st);
		pthread_cond_destroy(&st->fold_cv);
		pthread_mutex_destroy(&st->fold_mu);
		pthread_cond_destroy(&st->beat_cv);
		pthread_mutex_destroy(&st->setup_mu);
		pthread_mutex_destroy(&st->mu);
		tp_free(st->path);
		tp_free(st);
		return rc;
	}
	*out = st;
	return TP_OK;
}

int store_health(struct store *st, struct tp_errbuf *err)
{
	uint64_t gen;

	if (!st->shared)
		return TP_OK;	/* a file: nothing to reach */
	if (store_ready(st, err))
		return err->rc ? err->rc : TP_ERR_UNAVAILABLE;
	gen = store_generation(st);
	return gen >> 63 ? tp_fail(err, TP_ERR_UNAVAILABLE, "database_unavailable", "database unavailable") : TP_OK;
}

int store_shared(const struct store *st)
{
	return st->shared;
}

void store_close(struct store *st)
{
	struct db *db;

	if (!st)
		return;
	if (st->beating) {
		pthread_mutex_lock(&st->mu);
		st->stopping = 1;
		pthread_cond_signal(&st->beat_cv);
		pthread_mutex_unlock(&st->mu);
		pthread_join(st->beat, NULL);
	}
	store_fold_stop(st);
	pthread_cond_destroy(&st->fold_cv);
	pthread_mutex_destroy(&st->fold_mu);
	pthread_cond_destroy(&st->beat_cv);
	pthread_mutex_destroy(&st->setup_mu);
	while (st->nidle)
		db_close(st->idle[--st->nidle]);
	/*
	 * Fold the WAL back into the main file so the database is one file at rest, through a
	 * read-write connection the store holds (a fresh one reads the whole schema first), or one
	 * opened for it; the readers are closed, so none holds the WAL back.
	 */
	if (!st->shared) {
		struct db *own = NULL;
		db = st->spare ? st->spare : st->nwidle ? st->widle[st->nwidle - 1]->db : NULL;
		if (db || db_open(st->path, 0, &own, NULL) == TP_OK)
			db_checkpoint(db ? db : own, 1, NULL);
		db_close(own);
	}
	db_close(st->spare);
	while (st->nwidle)
		store_writer_free(st->widle[--st->nwidle]);
	pthread_mutex_destroy(&st->mu);
	tp_free(st->path);
	tp_free(st);
}

int store_counts(struct store *st, struct store_counts *out, struct tp_errbuf *err)
{
	struct store_reader *r;
	struct db_stmt *q;
	struct stat sb;
	char wal[4096];
	int rc;

	memset(out, 0, sizeof(*out));
	if ((rc = store_reader_open(st, &r, err)))
		return rc;
	q = store_prepare(r, "SELECT (SELECT COUNT(*) FROM runs),"
		       " (SELECT COUNT(*) FROM artifacts WHERE status='ready'),"
		       " (SELECT COUNT(*) FROM artifacts WHERE status='error'),"
		       " (SELECT COUNT(*) FROM artifacts WHERE status='ingesting')", err);
	if (!q) {
		store_reader_close(r);
		return TP_ERR_DB;
	}
	if (db_step(q) == DB_ROW) {
		out->runs = db_column_int64(q, 0);
		out->ready = db_column_int64(q, 1);
		out->error = db_column_int64(q, 2);
		out->ingesting = db_column_int64(q, 3);
		out->db_bytes = db_size(r->db);
		out->folds = (int64_t)atomic_load(&st->folds);
	} else {
		rc = store_db_fail(err, r->db, "count");
	}
	db_finalize(q);
	store_reader_close(r);
	snprintf(wal, sizeof(wal), "%s-wal", st->path);
	if (!rc && stat(wal, &sb) == 0)
		out->db_bytes += (int64_t)sb.st_size;
	return rc;
}

uint64_t store_serial(const struct store *st)
{
	return st->serial;
}
