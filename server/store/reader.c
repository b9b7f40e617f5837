/*
 * reader.c: the reader. A connection per request (pooled), the
 * generation, a read snapshot, and what the read rooms share: the row reader
 * (store_rows_read) and the lookups of a run and its ranks.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

int store_reader_open(struct store *st, struct store_reader **out, struct tp_errbuf *err)
{
	struct store_reader *r;
	int rc;

	if ((rc = store_ready(st, err)))
		return rc;
	if (!(r = tp_calloc(1, sizeof(*r))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	r->store = st;
	pthread_mutex_lock(&st->mu);
	if (st->nidle)
		r->db = st->idle[--st->nidle];
	pthread_mutex_unlock(&st->mu);
	if (!r->db && (rc = db_open(st->path, DB_OPEN_READONLY, &r->db, err))) {
		tp_free(r);
		return rc;
	}
	*out = r;
	return TP_OK;
}

uint64_t store_generation(struct store *st)
{
	struct store_reader *r;
	struct db_stmt *q = NULL;
	uint64_t gen = 0;
	int ok = 0;

	if (!st->shared)
		return atomic_load(&st->gen);
	/* on a pooled reader, so that the requests' checks run side by side */
	if (!store_reader_open(st, &r, NULL)) {
		if (!db_prepare(r->db, "SELECT n FROM generation", 0, &q) && db_step(q) == DB_ROW) {
			gen = (uint64_t)db_column_int64(q, 0);
			ok = 1;
		}
		db_finalize(q);
		store_reader_close(r);
	}
	/* unreadable: a number no cached answer holds, so none is served */
	return ok ? gen : (1ull << 63) | atomic_fetch_add(&st->gen, 1);
}

void store_reader_close(struct store_reader *r)
{
	if (!r)
		return;
	db_finalize(r->raw);
	canary_metrics_clear(&r->canary);
	store_diag_lent_clear(r);
	/* back to the pool, unless it is full or the connection is inside a transaction */
	pthread_mutex_lock(&r->store->mu);
	if (r->store->nidle < READER_POOL && !db_in_tx(r->db) && !db_busy(r->db)) {
		r->store->idle[r->store->nidle++] = r->db;
		r->db = NULL;
	}
	pthread_mutex_unlock(&r->store->mu);
	db_close(r->db);
	tp_free(r);
}

struct db_stmt *store_prepare(struct store_reader *r, const char *sql, struct tp_errbuf *err)
{
	struct db_stmt *st;

	if (db_prepare(r->db, sql, 0, &st) != DB_OK) {
		store_db_fail(err, r->db, "prepare");
		return NULL;
	}
	return st;
}

int store_run_exists(struct store_reader *r, const char *run, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT 1 FROM runs r WHERE r.name=?1 AND " STORE_RUN_LISTED, err);
	int step;

	if (!st)
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	step = db_step(st);
	db_finalize(st);
	if (step == DB_ROW)
		return TP_OK;
	if (step == DB_DONE)
		return tp_fail(err, TP_ERR_NOTFOUND, "run_not_found", "no run named '%s'", run);
	return store_db_fail(err, r->db, "read run");
}

/* The lowest rank of the run's ready artifacts (0 when none); -1 on error. */
static int lowest_rank(struct store_reader *r, const char *run, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT MIN(a.rank) FROM artifacts a JOIN runs r ON r.id=a.run_id"
				      " WHERE r.name=?1 AND a.status='ready'", err);
	int rank, step;

	if (!st)
		return -1;
	store_bind_text(st, 1, run);
	step = db_step(st);
	rank = step == DB_ROW ? db_column_int(st, 0) : -1;
	if (step != DB_ROW)
		store_db_fail(err, r->db, "read ranks");
	db_finalize(st);
	return rank;
}

/* Rows of st (bound, not yet stepped) as an array of objects named by cols; finalizes st. */
void store_rows_free(struct store_rows *rows)
{
	for (size_t i = 0; rows->v && i < rows->nrows * rows->ncols; i++)
		tp_free(rows->v[i].s);
	tp_free(rows->v);
	memset(rows, 0, sizeof(*rows));
}

/* Every row of st (finalized here) into out, its columns named cols. */
int store_rows_read(struct store_reader *r, struct db_stmt *st, const char *const *cols, int ncols,
		     struct store_rows *out, struct tp_errbuf *err)
{
	size_t cap = 0;
	int step, i, fail = 0;

	memset(out, 0, sizeof(*out));
	out->cols = cols;
	out->ncols = (size_t)ncols;
	while (!fail && (step = db_step(st)) == DB_ROW) {
		if (out->nrows == cap) {
			struct store_val *nv = tp_realloc(out->v, (cap = cap ? cap * 2 : 64) * (size_t)ncols * sizeof(*nv));
			if (!nv) {
				fail = 1;
				break;
			}
			out->v = nv;
		}
		struct store_val *row = &out->v[out->nrows++ * (size_t)ncols];
		for (i = 0; i < ncols; i++) {
			struct store_val *x = &row[i];
			memset(x, 0, sizeof(*x));
			switch (db_column_type(st, i)) {
			case DB_INTEGER: x->type = SV_INT; x->i = db_column_int64(st, i); break;
			case DB_FLOAT: x->type = SV_REAL; x->r = db_column_double(st, i); break;
			case DB_TEXT:
				x->type = SV_TEXT;
				if (!(x->s = tp_strdup((const char *)db_column_text(st, i))))
					fail = 1;
				break;
			default: x->type = SV_NULL;
			}
		}
	}
	db_finalize(st);
	if (!fail && step == DB_DONE)
		return TP_OK;
	store_rows_free(out);
	return fail || step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "read");
}

/* 0 when the run has an artifact of rank (any status), else -1 with err set (rank_not_found: 404). */
static int rank_exists(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, "SELECT 1 FROM artifacts a JOIN runs r ON r.id=a.run_id"
				      " WHERE r.name=?1 AND a.rank=?2 LIMIT 1", err);
	int step;

	if (!st)
		return -1;
	store_bind_text(st, 1, run);
	db_bind_int(st, 2, rank);
	step = db_step(st);
	db_finalize(st);
	if (step == DB_ROW)
		return 0;
	if (step == DB_DONE)
		tp_fail(err, TP_ERR_NOTFOUND, "rank_not_found", "run '%s' has no rank %d (GET /api/v1/runs/%s/ranks"
			" lists its ranks)", run, rank, run);
	else
		store_db_fail(err, r->db, "read ranks");
	return -1;
}

/* Check the run (and rank, when given) and resolve rank -1 to its lowest rank; -1 with err set on failure. */
int store_rank_of(struct store_reader *r, const char *run, int rank, struct tp_errbuf *err)
{
	if (store_run_exists(r, run, err))
		return -1;
	if (rank >= 0)
		return rank_exists(r, run, rank, err) ? -1 : rank;
	return lowest_rank(r, run, err);
}

struct db_stmt *store_prepare_rank(struct store_reader *r, const char *sql, const char *run, int rank,
				  struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r, sql, err);

	if (st) {
		store_bind_text(st, 1, run);
		db_bind_int(st, 2, rank);
	}
	return st;
}

/*
 * st's rows' two integer columns into the arrays *a and *b, empty (NULL,
 * *n 0) before and grown. The last db_step, or DB_ROW when out of memory.
 */
int store_read_pairs(struct db_stmt *st, int64_t **a, int64_t **b, size_t *n)
{
	size_t cap = 0;
	int step;

	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			cap = cap ? cap * 2 : 8;
			int64_t *na = tp_realloc(*a, cap * sizeof(*na));
			if (na)
				*a = na;
			int64_t *nb = na ? tp_realloc(*b, cap * sizeof(*nb)) : NULL;
			if (!nb)
				break;
			*b = nb;
		}
		(*a)[*n] = db_column_int64(st, 0);
		(*b)[(*n)++] = db_column_int64(st, 1);
	}
	return step;
}

uint64_t store_reader_serial(const struct store_reader *r)
{
	return r->store->serial;
}

int store_read_snapshot(struct store_reader *r, int on, struct tp_errbuf *err)
{
	if (on)
		return store_exec(r->db, "BEGIN", err) || store_exec(r->db, "SELECT 1 FROM runs LIMIT 1", err) ? TP_ERR_DB : TP_OK;
	return store_exec(r->db, "COMMIT", err) ? TP_ERR_DB : TP_OK;
}

/* What an earlier store_diag_input on r lent. */
void store_diag_lent_clear(struct store_reader *r)
{
	for (size_t i = 0; i < r->nactions; i++)
		tp_free((char *)r->actions[i].name);
	tp_free(r->actions);
	tp_free(r->gpus);
	r->actions = NULL;
	r->nactions = 0;
	r->gpus = NULL;
}
