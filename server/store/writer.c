/*
 * writer.c: the writer. A connection per ingest (pooled), its nesting
 * transactions, batches of events, strings and raw bytes, and an
 * artifact's begin, commit (its derived rows: insert.c), failure and drop.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/evpack.h"
#include "store/store_int.h"

static int drop_now(struct store_writer *w, int64_t artifact);

/*
 * Uploads whose drop failed, the disk full, are dropped by the next writer
 * (the next upload, PATCH or delete), not left 'ingesting', their space held,
 * until a restart.
 */
static void retry_drops(struct store_writer *w)
{
	struct store *st = w->store;
	int64_t ids[16];
	int n, i, k;

	pthread_mutex_lock(&st->mu);
	n = st->nundropped;
	memcpy(ids, st->undropped, (size_t)n * sizeof(*ids));
	st->nundropped = 0;
	pthread_mutex_unlock(&st->mu);
	for (i = 0, k = 0; i < n; i++)
		if (drop_now(w, ids[i]))
			ids[k++] = ids[i];
	if (k) {
		pthread_mutex_lock(&st->mu);
		for (i = 0; i < k && st->nundropped < (int)(sizeof(st->undropped) / sizeof(*ids)); i++)
			st->undropped[st->nundropped++] = ids[i];
		pthread_mutex_unlock(&st->mu);
	}
}

int store_writer_open(struct store *st, struct store_writer **out, struct tp_errbuf *err)
{
	struct store_writer *w;
	char *sql[W_NSTMT] = { 0 };
	int rc, i;

	if ((rc = store_ready(st, err)))
		return rc;
	pthread_mutex_lock(&st->mu);
	if (st->nwidle) {
		w = st->widle[--st->nwidle];
		pthread_mutex_unlock(&st->mu);
		retry_drops(w);
		*out = w;
		return TP_OK;
	}
	pthread_mutex_unlock(&st->mu);
	if (!(w = tp_calloc(1, sizeof(*w))))
		return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	w->store = st;
	pthread_mutex_lock(&st->mu);
	w->db = st->spare;
	st->spare = NULL;
	pthread_mutex_unlock(&st->mu);
	if (!w->db && (rc = db_open(st->path, 0, &w->db, err)))
		goto fail;
	if (st->fold_on)
		db_wal_kick(w->db, store_fold_kick, st);
	sql[W_BLOCK] = tp_strdup("INSERT INTO event_blocks(key,kind,n,first,min_ts,max_end,data,max_ts)"
			      " VALUES(?,?,?,?,?,?,?,?)");
	sql[W_STR] = tp_strdup("INSERT INTO strings(key,s) VALUES(?,?)");
	sql[W_RAW] = tp_strdup("INSERT INTO raw_chunks(key,data) VALUES(?,?)");
	sql[W_BEGIN] = tp_strdup("BEGIN IMMEDIATE");
	sql[W_COMMIT] = tp_strdup("COMMIT");
	sql[W_ROLLBACK] = tp_strdup("ROLLBACK");
	for (i = 0; i < W_NSTMT; i++) {
		if (!sql[i]) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			goto fail;
		}
		if (db_prepare(w->db, sql[i], 1, &w->st[i]) !=
		    DB_OK) {
			rc = store_db_fail(err, w->db, "prepare");
			goto fail;
		}
	}
	for (i = 0; i < W_NSTMT; i++)
		tp_free(sql[i]);
	retry_drops(w);
	*out = w;
	return TP_OK;
fail:
	for (i = 0; i < W_NSTMT; i++)
		tp_free(sql[i]);
	store_writer_free(w);
	return rc;
}

void store_writer_free(struct store_writer *w)
{
	int i;

	if (!w)
		return;
	if (w->as_reader) {
		db_finalize(w->as_reader->raw);
		canary_metrics_clear(&w->as_reader->canary);
	}
	tp_free(w->as_reader);
	for (i = 0; i < W_NSTMT; i++)
		db_finalize(w->st[i]);
	db_close(w->db);
	tp_free(w->pack);
	tp_free(w);
}

void store_writer_close(struct store_writer *w)
{
	struct store *st;

	if (!w)
		return;
	st = w->store;
	pthread_mutex_lock(&st->mu);
	if (w->db && !w->depth && !db_in_tx(w->db) && st->nwidle < WRITER_POOL) {
		w->next_block = 0;
		st->widle[st->nwidle++] = w;
		w = NULL;
	}
	pthread_mutex_unlock(&st->mu);
	store_writer_free(w);
}

static int step_done(struct store_writer *w, struct db_stmt *st, const char *what, struct tp_errbuf *err)
{
	int r = db_step(st);

	db_reset(st);
	db_clear_bindings(st);
	return r == DB_DONE ? TP_OK : store_db_fail(err, w->db, what);
}

/* Transactions nest: only the outermost begin and commit reach SQLite (store_tx_begin). */
int store_begin(struct store_writer *w, struct tp_errbuf *err)
{
	int rc;

	if (w->depth) {
		w->depth++;
		return TP_OK;
	}
	if ((rc = step_done(w, w->st[W_BEGIN], "begin", err)))
		return rc;
	if (db_begin_write(w->db)) {
		rc = store_db_fail(err, w->db, "lock");
		step_done(w, w->st[W_ROLLBACK], "rollback", NULL);
		return rc;
	}
	w->depth = 1;
	return rc;
}

int store_commit(struct store_writer *w, struct tp_errbuf *err)
{
	int rc;

	if (w->depth > 1) {
		w->depth--;
		return TP_OK;
	}
	if (w->store->shared && !w->quiet && db_exec(w->db, "UPDATE generation SET n = n + 1"))
		return store_db_fail(err, w->db, "commit");
	if (!(rc = step_done(w, w->st[W_COMMIT], "commit", err))) {
		w->depth = 0;
		if (!w->quiet)
			atomic_fetch_add(&w->store->gen, 1);
	}
	return rc;
}

/* An inner failure leaves the rollback to the outermost level, which sees the error too. */
void store_rollback(struct store_writer *w)
{
	if (w->depth > 1) {
		w->depth--;
		return;
	}
	w->depth = 0;
	if (!!db_in_tx(w->db))
		step_done(w, w->st[W_ROLLBACK], "rollback", NULL);
}

int store_tx_begin(struct store_writer *w, struct tp_errbuf *err)
{
	return store_begin(w, err);
}

int store_tx_commit(struct store_writer *w, struct tp_errbuf *err)
{
	int rc = store_commit(w, err);

	if (rc)
		store_rollback(w);
	return rc;
}

void store_tx_rollback(struct store_writer *w)
{
	store_rollback(w);
}

struct store_reader *store_writer_reader(struct store_writer *w)
{
	if (!w->as_reader && (w->as_reader = tp_calloc(1, sizeof(*w->as_reader)))) {
		w->as_reader->store = w->store;
		w->as_reader->db = w->db;
	}
	return w->as_reader;
}

/* One block of events of one kind: see evpack.h. */
static int write_block(struct store_writer *w, int64_t artifact, int kind, const struct tp_event *ev,
		       size_t n, uint64_t first, struct tp_errbuf *err)
{
	struct db_stmt *st = w->st[W_BLOCK];
	int64_t min_ts, max_end;
	size_t need = evpack_bound(n), len;

	if (!n)
		return TP_OK;
	if (need > w->pack_cap) {
		uint8_t *p = tp_realloc(w->pack, need);
		if (!p)
			return tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
		w->pack = p;
		w->pack_cap = need;
	}
	len = evpack_encode(w->pack, ev, n, &min_ts, &max_end);
	db_bind_int64(st, 1, artifact << 32 | w->next_block++);
	db_bind_int(st, 2, kind);
	db_bind_int64(st, 3, (int64_t)n);
	db_bind_int64(st, 4, (int64_t)first);
	if (min_ts <= max_end) {
		int64_t max_ts = INT64_MIN;
		for (size_t i = 0; i < n; i++)
			if ((ev[i].have & TH_TS) && ev[i].ts_ns > max_ts)
				max_ts = ev[i].ts_ns;
		db_bind_int64(st, 5, min_ts);
		db_bind_int64(st, 6, max_end);
		db_bind_int64(st, 8, max_ts);
	}
	db_bind_blob(st, 7, w->pack, (int)len, DB_STATIC);
	return step_done(w, st, "insert events", err);
}

static int write_rows(struct store_writer *w, int64_t artifact, const struct store_batch *b,
		      struct tp_errbuf *err)
{
	int64_t base = artifact << 32;
	size_t i;
	int rc = b->nstr && db_batch_begin(w->db) ? store_db_fail(err, w->db, "insert strings") : TP_OK;

	for (i = 0; i < b->nstr && !rc; i++) {
		struct db_stmt *st = w->st[W_STR];
		db_bind_int64(st, 1, base | b->str[i].id);
		db_bind_text(st, 2, b->str[i].s, (int)b->str[i].len, DB_STATIC);
		rc = step_done(w, st, "insert strings", err);
	}
	if (b->nstr && db_batch_end(w->db) && !rc)
		rc = store_db_fail(err, w->db, "insert strings");
	if (rc)
		return rc;
	if ((rc = write_block(w, artifact, 0, b->ev, b->nev, b->ev_first, err)) ||
	    (rc = write_block(w, artifact, 1, b->mev, b->nmev, b->mev_first, err)))
		return rc;
	if (b->nraw) {
		struct db_stmt *st = w->st[W_RAW];
		db_bind_int64(st, 1, base | b->raw_seq);
		db_bind_blob(st, 2, b->raw, (int)b->nraw, DB_STATIC);
		if ((rc = step_done(w, st, "insert raw bytes", err)))
			return rc;
	}
	return TP_OK;
}

int store_write_batch(struct store_writer *w, int64_t artifact, const struct store_batch *b,
		      struct tp_errbuf *err)
{
	int rc;

	if ((rc = store_begin(w, err)))
		return rc;
	/* rows of an upload still invisible: no answer changes, so the generation stays (one transaction alone) */
	w->quiet = w->depth == 1;
	if ((rc = write_rows(w, artifact, b, err)) || (rc = store_commit(w, err)))
		store_rollback(w);
	w->quiet = 0;
	return rc;
}

/* Bind text or NULL. */
int store_artifact_begin(struct store_writer *w, const char *run, int rank, const char *kind,
			 const char *name, int64_t *id_out, struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	int rc;

	if ((rc = store_begin(w, err)))
		return rc;
	if (db_prepare(w->db, "INSERT INTO runs(name, created_ns) VALUES(?1, ?2)"
				      " ON CONFLICT(name) DO NOTHING", 0, &st) != DB_OK) {
		rc = store_db_fail(err, w->db, "prepare");
		goto out;
	}
	store_bind_text(st, 1, run);
	db_bind_int64(st, 2, tp_now_ns());
	if (db_step(st) != DB_DONE) {
		rc = store_db_fail(err, w->db, "create run");
		goto out;
	}
	db_finalize(st);
	if (db_prepare(w->db, "INSERT INTO artifacts(run_id, rank, kind, name, created_ns, owner)"
				      " SELECT id, ?2, ?3, ?4, ?5, ?6 FROM runs WHERE name=?1 RETURNING id", 0, &st) != DB_OK) {
		rc = store_db_fail(err, w->db, "prepare");
		goto out;
	}
	store_bind_text(st, 1, run);
	db_bind_int(st, 2, rank);
	store_bind_text(st, 3, kind);
	store_bind_text(st, 4, name);
	db_bind_int64(st, 5, tp_now_ns());
	db_bind_int64(st, 6, w->store->server_id);
	if (db_step(st) != DB_ROW) {
		rc = store_db_fail(err, w->db, "create artifact");
		goto out;
	}
	*id_out = db_column_int64(st, 0);
	if (db_step(st) != DB_DONE) {
		rc = store_db_fail(err, w->db, "create artifact");
		goto out;
	}
	w->next_block = 0;
	rc = store_commit(w, err);
out:
	db_finalize(st);
	if (rc)
		store_rollback(w);
	return rc;
}

/* The id of another finished artifact of the same run with this sha256, or 0. */
static int find_duplicate(struct store_writer *w, int64_t artifact, const char *sha, int64_t *out,
			  struct tp_errbuf *err)
{
	struct db_stmt *st;
	int r;

	*out = 0;
	if (db_prepare(w->db, "SELECT b.id FROM artifacts a JOIN artifacts b"
				      " ON b.run_id=a.run_id AND b.sha256=?2 AND b.id!=a.id"
				      " AND b.status!='ingesting' WHERE a.id=?1 ORDER BY b.id LIMIT 1", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	db_bind_int64(st, 1, artifact);
	store_bind_text(st, 2, sha);
	r = db_step(st);
	if (r == DB_ROW)
		*out = db_column_int64(st, 0);
	db_finalize(st);
	return r == DB_ROW || r == DB_DONE ? TP_OK : store_db_fail(err, w->db, "find duplicate");
}

/*
 * A trace's analysis is its rank's (migration 020): *run_id, and whether the rank has a ready trace
 * other than artifact (*joins: then the upload's analysis is not stored, the rank is derived
 * again from all of its traces: store_rank_defer).
 */
static int rank_of(struct store_writer *w, int64_t artifact, int rank, int64_t *run_id, int *joins,
		   struct tp_errbuf *err)
{
	struct db_stmt *st;
	int r;

	if (db_prepare(w->db, "SELECT a.run_id, EXISTS (SELECT 1 FROM artifacts o WHERE o.run_id=a.run_id AND o.rank=?2"
			      " AND o.status='ready' AND o.kind='trace' AND o.id<>a.id) FROM artifacts a WHERE a.id=?1",
		       0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	db_bind_int64(st, 1, artifact);
	db_bind_int(st, 2, rank);
	if ((r = db_step(st)) == DB_ROW) {
		*run_id = db_column_int64(st, 0);
		*joins = db_column_int(st, 1);
	}
	db_finalize(st);
	return r == DB_ROW ? TP_OK : store_db_fail(err, w->db, "read rank");
}

static int finish(struct store_writer *w, int64_t artifact, const struct store_final *f, int failed,
		  int64_t *existing_out, struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	struct store_final own = *f;
	int64_t run_id = 0;
	int joins = 0, rc;

	if ((rc = store_begin(w, err)))
		return rc;
	if ((rc = find_duplicate(w, artifact, f->sha256, existing_out, err)))
		goto out;
	if (*existing_out) {
		rc = store_drop_artifact(w->db, artifact, err);
		goto out;
	}
	if (failed)
		rc = store_delete_rows(w->db, artifact, 1, err);
	else if (f->analysis && (rc = rank_of(w, artifact, f->rank, &run_id, &joins, err)))
		goto out;
	else if (joins) {
		/* the rank's analysis stays as it is until the rank is derived again */
		own.analysis = NULL;
		own.mem = NULL;
		own.nmem = 0;
		rc = store_insert_analysis(w, artifact, run_id, &own, NULL, 0, err);
	} else if (!(rc = f->analysis ? store_rank_rows_delete(w->db, run_id, f->rank, 0, 0, err) : TP_OK))
		rc = store_insert_analysis(w, artifact, run_id, f, NULL, 0, err);
	if (rc)
		goto out;
	if (db_prepare(w->db, "UPDATE artifacts SET status=?2, sha256=?3, bytes=?4, events=?5,"
				      " base_ns=?6, rank=?7, kind=?8, raw_encoding=?9, meta=?10,"
				      " peak_allocated=?11, error_code=?12, error=?13 WHERE id=?1", 0, &st) != DB_OK) {
		rc = store_db_fail(err, w->db, "prepare");
		goto out;
	}
	db_bind_int64(st, 1, artifact);
	store_bind_text(st, 2, failed ? "error" : "ready");
	store_bind_text(st, 3, f->sha256);
	db_bind_int64(st, 4, (int64_t)f->bytes);
	db_bind_int64(st, 5, failed ? 0 : (int64_t)f->events);
	db_bind_int64(st, 6, f->base_ns);
	db_bind_int(st, 7, f->rank);
	store_bind_text(st, 8, f->kind);
	store_bind_text(st, 9, f->raw_encoding);
	store_bind_text(st, 10, f->meta_json);
	if (f->peak_allocated >= 0 && !failed)
		db_bind_int64(st, 11, f->peak_allocated);
	store_bind_text(st, 12, failed ? f->error_code : NULL);
	store_bind_text(st, 13, failed ? f->error_msg : NULL);
	if (db_step(st) != DB_DONE) {
		rc = store_db_fail(err, w->db, "finish artifact");
		goto out;
	}
	/* sharing the database, others drop the uploads of a server they think gone: this one, if so */
	rc = db_changes(w->db) == 1 ? TP_OK : tp_fail(err, TP_ERR_UNAVAILABLE, "upload_lost",
						       "the upload was dropped while this server was out of reach of the"
						       " database: send it again");
out:
	db_finalize(st);
	if (!rc)
		rc = store_commit(w, err);
	if (rc)
		store_rollback(w);
	return rc;
}

int store_artifact_commit(struct store_writer *w, int64_t artifact, const struct store_final *f,
			  int64_t *existing_out, struct tp_errbuf *err)
{
	return finish(w, artifact, f, 0, existing_out, err);
}

int store_artifact_fail(struct store_writer *w, int64_t artifact, const struct store_final *f,
			int64_t *existing_out, struct tp_errbuf *err)
{
	return finish(w, artifact, f, 1, existing_out, err);
}

static int drop_now(struct store_writer *w, int64_t artifact)
{
	int rc;

	if ((rc = store_begin(w, NULL)))
		return rc;
	if ((rc = store_drop_artifact(w->db, artifact, NULL)) || (rc = store_exec(w->db, store_empty_runs_sql, NULL)) ||
	    (rc = store_commit(w, NULL)))
		store_rollback(w);
	return rc;
}

int store_artifact_drop(struct store_writer *w, int64_t artifact)
{
	int rc = drop_now(w, artifact);

	if (rc) {
		/* a full disk refuses the delete too: the next writer drops it */
		pthread_mutex_lock(&w->store->mu);
		if (w->store->nundropped < (int)(sizeof(w->store->undropped) / sizeof(w->store->undropped[0])))
			w->store->undropped[w->store->nundropped++] = artifact;
		pthread_mutex_unlock(&w->store->mu);
	}
	return rc;
}
