/*
 * pending.c: ranks waiting to be derived again (table rank_pending):
 * marks made when a trace joins a rank, read and settled by pipeline/runrank.c.
 */
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

/* The run id of (run, rank)'s first ready trace artifact other than artifact (0: none), or of run itself
 * when any_run. */
static int rank_trace_run(struct store_writer *w, const char *run, int rank, int64_t artifact, int any_run,
			  int64_t *run_id, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*run_id = 0;
	if (db_prepare(w->db, any_run ? "SELECT id FROM runs WHERE name=?1" :
				      "SELECT a.run_id FROM artifacts a JOIN runs r ON r.id=a.run_id"
				      " WHERE r.name=?1 AND a.rank=?2 AND a.status='ready' AND a.kind='trace'"
				      " AND a.id<>?3 LIMIT 1", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	store_bind_text(st, 1, run);
	if (!any_run) {
		db_bind_int(st, 2, rank);
		db_bind_int64(st, 3, artifact);
	}
	if ((step = db_step(st)) == DB_ROW)
		*run_id = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, w->db, "read rank");
}

int store_rank_has_trace(struct store_writer *w, const char *run, int rank, int *has, struct tp_errbuf *err)
{
	int64_t run_id;
	int rc = rank_trace_run(w, run, rank, 0, 0, &run_id, err);

	*has = run_id != 0;
	return rc;
}

int store_rank_defer(struct store_writer *w, const char *run, int rank, int64_t artifact, int force,
		     int *deferred, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int64_t run_id = 0;
	int rc = TP_OK, step;

	*deferred = 0;
	if ((rc = rank_trace_run(w, run, rank, artifact, 0, &run_id, err)) ||
	    (!run_id && force && (rc = rank_trace_run(w, run, rank, artifact, 1, &run_id, err))))
		return rc;
	if (!run_id)
		return TP_OK;
	if (db_prepare(w->db, "INSERT INTO rank_pending(run_id, rank, seq) VALUES(?1, ?2, 1)"
				      " ON CONFLICT(run_id, rank) DO UPDATE SET seq=rank_pending.seq+1", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	db_bind_int64(st, 1, run_id);
	db_bind_int(st, 2, rank);
	step = db_step(st);
	db_finalize(st);
	if (step != DB_DONE)
		return store_db_fail(err, w->db, "mark rank");
	atomic_fetch_add(&w->store->marks, 1);
	*deferred = 1;
	return TP_OK;
}

void store_pending_free(struct store_pending *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		tp_free(p[i].run);
	tp_free(p);
}

int store_maybe_pending(struct store *st)
{
	/* another server's marks are not counted here: ask the database every time */
	return st->shared || atomic_load(&st->marks) != atomic_load(&st->marks_clear);
}

int store_rank_pending(struct store_reader *r, const char *run, struct store_pending **out, size_t *n,
		       struct tp_errbuf *err)
{
	uint64_t marks = atomic_load(&r->store->marks);
	struct store_pending *v = NULL;
	size_t cap = 0;
	struct db_stmt *st;
	int step;

	*out = NULL;
	*n = 0;
	if (!(st = store_prepare(r, "SELECT r.name, p.rank, p.seq FROM rank_pending p JOIN runs r ON r.id=p.run_id"
			      " WHERE ?1 IS NULL OR r.name=?1 ORDER BY r.name, p.rank", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	while ((step = db_step(st)) == DB_ROW) {
		if (*n == cap) {
			size_t nc = cap ? cap * 2 : 8;
			struct store_pending *nv = tp_realloc(v, nc * sizeof(*nv));
			if (!nv)
				break;
			v = nv;
			cap = nc;
		}
		if (!(v[*n].run = tp_strdup((const char *)db_column_text(st, 0))))
			break;
		v[*n].rank = db_column_int(st, 1);
		v[(*n)++].seq = db_column_int64(st, 2);
	}
	db_finalize(st);
	if (step != DB_DONE) {
		store_pending_free(v, *n);
		*n = 0;
		return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory")
					  : store_db_fail(err, r->db, "read pending ranks");
	}
	if (!run && !*n)
		atomic_store(&r->store->marks_clear, marks);
	*out = v;
	return TP_OK;
}

int store_rank_seq(struct store_reader *r, const char *run, int rank, int64_t *seq, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	*seq = 0;
	if (!(st = store_prepare(r, "SELECT p.seq FROM rank_pending p JOIN runs r ON r.id=p.run_id"
			      " WHERE r.name=?1 AND p.rank=?2", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	db_bind_int(st, 2, rank);
	if ((step = db_step(st)) == DB_ROW)
		*seq = db_column_int64(st, 0);
	db_finalize(st);
	return step == DB_ROW || step == DB_DONE ? TP_OK : store_db_fail(err, r->db, "read pending rank");
}

int store_rank_settled(struct store_writer *w, const char *run, int rank, int64_t seq, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	if (db_prepare(w->db, "DELETE FROM rank_pending WHERE rank=?2 AND (?3 < 0 OR seq=?3)"
				      " AND run_id=(SELECT id FROM runs WHERE name=?1)", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	store_bind_text(st, 1, run);
	db_bind_int(st, 2, rank);
	db_bind_int64(st, 3, seq);
	step = db_step(st);
	db_finalize(st);
	return step == DB_DONE ? TP_OK : store_db_fail(err, w->db, "unmark rank");
}
