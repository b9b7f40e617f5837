/*
 * patch.c: changes to what is stored: a run's PATCH, the delete of a run
 * or an artifact, a rank's derived tables replaced, and a run's metrics.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

/* RFC 7386 merge patch of target by patch; returns the new target (a new reference). */
static json_t *merge_patch(json_t *target, json_t *patch)
{
	const char *key;
	json_t *v, *out;

	if (!json_is_object(patch))
		return json_incref(patch);
	out = json_is_object(target) ? json_deep_copy(target) : json_object();
	if (!out)
		return NULL;
	json_object_foreach(patch, key, v) {
		if (json_is_null(v)) {
			json_object_del(out, key);
		} else {
			json_t *m = merge_patch(json_object_get(out, key), v);
			if (!m || json_object_set_new(out, key, m)) {
				json_decref(out);
				return NULL;
			}
		}
	}
	return out;
}

/* In a write transaction: the run's id, and its metadata (new reference; NULL when none) when meta is given. */
static int writer_run(struct store_writer *w, const char *run, int64_t *id, json_t **meta, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc = TP_OK, step;

	if (db_prepare(w->db, "SELECT id, metadata FROM runs WHERE name=?1", 0, &st) != DB_OK)
		return store_db_fail(err, w->db, "prepare");
	store_bind_text(st, 1, run);
	if ((step = db_step(st)) == DB_DONE) {
		rc = tp_fail(err, TP_ERR_NOTFOUND, "run_not_found", "no run named '%s'", run);
	} else if (step != DB_ROW) {
		/* the database's failure, not the caller's: a 500, not a 404 */
		rc = store_db_fail(err, w->db, "read run");
	} else {
		*id = db_column_int64(st, 0);
		if (meta)
			*meta = json_loads((const char *)db_column_text(st, 1), 0, NULL);
	}
	db_finalize(st);
	return rc;
}

int store_run_patch(struct store_writer *w, const char *run, json_t *patch, struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	json_t *meta = NULL, *v;
	char *text = NULL;
	int64_t run_id;
	int rc;

	if ((rc = store_begin(w, err)))
		return rc;
	if ((rc = writer_run(w, run, &run_id, &meta, err)))
		goto out;

	if ((v = json_object_get(patch, "metadata"))) {
		json_t *m = merge_patch(meta, v);
		json_decref(meta);
		meta = m;
		if (!meta || !(text = json_dumps(meta, JSON_COMPACT))) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			goto out;
		}
		/* each PATCH is capped, their merge too: it is read back with the run */
		if (strlen(text) > STORE_METADATA_MAX) {
			rc = tp_fail(err, TP_ERR_TOOBIG, "metadata_too_large",
				     "the run's merged metadata would be %zu bytes, past the cap of %d", strlen(text),
				     STORE_METADATA_MAX);
			goto out;
		}
	}
	if (db_prepare(w->db, "UPDATE runs SET"
				      " project = CASE WHEN ?2 <> 0 THEN ?3 ELSE project END,"
				      " tags = COALESCE(?4, tags), metadata = COALESCE(?5, metadata),"
				      " baseline = COALESCE(?6, baseline) WHERE id=?1", 0, &st) != DB_OK) {
		rc = store_db_fail(err, w->db, "prepare");
		goto out;
	}
	db_bind_int64(st, 1, run_id);
	if ((v = json_object_get(patch, "project"))) {
		db_bind_int(st, 2, 1);
		store_bind_text(st, 3, json_string_value(v));	/* NULL for null */
	} else {
		db_bind_int(st, 2, 0);
	}
	if ((v = json_object_get(patch, "tags"))) {
		char *tags = json_dumps(v, JSON_COMPACT);
		if (!tags) {
			rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
			goto out;
		}
		db_bind_text(st, 4, tags, -1, tp_free);
	}
	if (text)
		db_bind_text(st, 5, text, -1, DB_TRANSIENT);
	if ((v = json_object_get(patch, "baseline")))
		db_bind_int(st, 6, json_is_true(v));
	if (db_step(st) != DB_DONE) {
		rc = store_db_fail(err, w->db, "update run");
		goto out;
	}
	db_finalize(st);
	st = NULL;
	if (json_is_true(json_object_get(patch, "baseline"))) {
		/* one baseline per project (runs without a project count as one project) */
		if (db_prepare(w->db, "UPDATE runs SET baseline=0 WHERE id!=?1 AND baseline <> 0"
					      " AND project IS NOT DISTINCT FROM (SELECT project FROM runs WHERE id=?1)", 0, &st) != DB_OK) {
			rc = store_db_fail(err, w->db, "prepare");
			goto out;
		}
		db_bind_int64(st, 1, run_id);
		if (db_step(st) != DB_DONE) {
			rc = store_db_fail(err, w->db, "update baselines");
			goto out;
		}
	}
	rc = store_commit(w, err);
out:
	db_finalize(st);
	json_decref(meta);
	tp_free(text);
	if (rc)
		store_rollback(w);
	return rc;
}

int store_run_delete(struct store_writer *w, const char *run, int64_t artifact, int64_t *deleted,
		     int *run_gone, int *trace_rank, struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	int64_t run_id, *ids = NULL;
	size_t n = 0, cap = 0, i;
	int rc, step, busy = 0;

	*deleted = 0;
	*run_gone = 0;
	*trace_rank = -1;
	if ((rc = store_begin(w, err)))
		return rc;
	if ((rc = writer_run(w, run, &run_id, NULL, err)))
		goto out;
	if (db_prepare(w->db, "SELECT id, status, kind, rank FROM artifacts WHERE run_id=?1 AND (?2=0 OR id=?2)", 0, &st) != DB_OK) {
		st = NULL;
		rc = store_db_fail(err, w->db, "prepare");
		goto out;
	}
	db_bind_int64(st, 1, run_id);
	db_bind_int64(st, 2, artifact);
	while ((step = db_step(st)) == DB_ROW) {
		if (!strcmp((const char *)db_column_text(st, 1), "ingesting")) {
			busy = 1;
			continue;
		}
		if (n == cap) {
			int64_t *nids = tp_realloc(ids, (cap = cap ? cap * 2 : 16) * sizeof(*ids));
			if (!nids) {
				rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
				goto out;
			}
			ids = nids;
		}
		ids[n++] = db_column_int64(st, 0);
		if (artifact && !strcmp((const char *)db_column_text(st, 1), "ready") &&
		    !strcmp((const char *)db_column_text(st, 2), "trace"))
			*trace_rank = db_column_int(st, 3);
	}
	db_finalize(st);
	st = NULL;
	if (step != DB_DONE) {
		rc = store_db_fail(err, w->db, "read artifacts");
		goto out;
	}
	/* an upload still going on would write into what is removed: the client comes back after it */
	if (busy) {
		rc = artifact ? tp_fail(err, TP_ERR_CONFLICT, "ingest_in_progress", "artifact %lld of run '%s' is"
					" still being ingested; delete it once its upload has answered",
					(long long)artifact, run)
			      : tp_fail(err, TP_ERR_CONFLICT, "ingest_in_progress", "run '%s' has an upload still"
					" being ingested; delete it once the upload has answered", run);
		goto out;
	}
	if (artifact && !n) {
		rc = tp_fail(err, TP_ERR_NOTFOUND, "artifact_not_found", "run '%s' has no artifact %lld", run,
			     (long long)artifact);
		goto out;
	}
	for (i = 0; i < n; i++)
		if ((rc = store_drop_artifact(w->db, ids[i], err)))
			goto out;
	/* the rank's analysis goes with its last trace (else it is derived again: runrank_derive) */
	if (!artifact)
		rc = store_rank_rows_delete(w->db, run_id, -1, 0, 0, err);
	else if (*trace_rank >= 0) {
		int left;
		if (db_prepare(w->db, "SELECT EXISTS (SELECT 1 FROM artifacts WHERE run_id=?1 AND rank=?2 AND"
				      " status='ready' AND kind='trace')", 0, &st) != DB_OK) {
			st = NULL;
			rc = store_db_fail(err, w->db, "prepare");
			goto out;
		}
		db_bind_int64(st, 1, run_id);
		db_bind_int(st, 2, *trace_rank);
		if (db_step(st) != DB_ROW) {
			rc = store_db_fail(err, w->db, "read artifacts");
			goto out;
		}
		left = db_column_int(st, 0);
		db_finalize(st);
		st = NULL;
		if (!left)
			rc = store_rank_rows_delete(w->db, run_id, *trace_rank, 0, 0, err);
	}
	if (rc)
		goto out;
	/* the whole run goes with its metrics; one artifact takes its run along only when that was all
	 * (a run a collector polled for stays, waiting for its next capture) */
	if (db_prepare(w->db, artifact ? "DELETE FROM runs WHERE id=?1 AND NOT EXISTS"
						 " (SELECT 1 FROM artifacts WHERE run_id=?1)"
						 " AND NOT EXISTS (SELECT 1 FROM metrics WHERE run_id=?1)"
						 " AND polled_ns IS NULL"
					       : "DELETE FROM metrics WHERE run_id=?1", 0, &st) != DB_OK ||
	    (db_bind_int64(st, 1, run_id), db_step(st)) != DB_DONE) {
		rc = store_db_fail(err, w->db, "delete run");
		goto out;
	}
	*run_gone = artifact ? db_changes(w->db) > 0 : 1;
	db_finalize(st);
	st = NULL;
	if (!artifact && (db_prepare(w->db, "DELETE FROM runs WHERE id=?1", 0, &st) != DB_OK ||
			  (db_bind_int64(st, 1, run_id), db_step(st)) != DB_DONE)) {
		rc = store_db_fail(err, w->db, "delete run");
		goto out;
	}
	if (*run_gone && ((rc = store_exec(w->db, "DELETE FROM rank_pending WHERE run_id NOT IN (SELECT id FROM runs)", err)) ||
			  (rc = store_exec(w->db, "DELETE FROM capture_ranks WHERE capture_id IN (SELECT id FROM captures"
					   " WHERE run_id NOT IN (SELECT id FROM runs))", err)) ||
			  (rc = store_exec(w->db, "DELETE FROM capture_artifacts WHERE capture_id IN (SELECT id FROM captures"
					   " WHERE run_id NOT IN (SELECT id FROM runs))", err)) ||
			  (rc = store_exec(w->db, "DELETE FROM captures WHERE run_id NOT IN (SELECT id FROM runs)", err))))
		goto out;
	*deleted = (int64_t)n;
	rc = store_commit(w, err);
out:
	db_finalize(st);
	tp_free(ids);
	if (rc) {
		store_rollback(w);
		*deleted = 0;
		*run_gone = 0;
		*trace_rank = -1;
	}
	return rc;
}

/*
 * The rank's analysis rows go (but the collectives stored as f has them) and f's take their
 * place; its trace memory timelines go but their points, which f's go over block by block: a live
 * run's earlier points mostly stay as they were, and are not written again. owner 0: the rank
 * has no trace left, and nothing of its analysis stays.
 */
int store_rank_replace(struct store_writer *w, const char *run, int rank, int64_t owner,
		       const struct store_final *f, struct store_blocks *count, struct tp_errbuf *err)
{
	struct store_blocks c = { 0 };
	size_t same_colls = owner && !w->store->shared && f->analysis && f->same_colls <= f->analysis->ncolls
				    ? f->same_colls : 0;
	struct store_final g = *f;
	struct db_stmt *q;
	int64_t run_id = 0;
	int rc, step;

	g.rank = rank;
	if ((rc = store_begin(w, err)))
		return rc;
	if (db_prepare(w->db, "SELECT id FROM runs WHERE name=?1", 0, &q) != DB_OK)
		rc = store_db_fail(err, w->db, "prepare");
	else {
		store_bind_text(q, 1, run);
		if ((step = db_step(q)) == DB_ROW)
			run_id = db_column_int64(q, 0);
		else if (step != DB_DONE)
			rc = store_db_fail(err, w->db, "read run");
		db_finalize(q);
	}
	/* no run: nothing stored to replace (a derivation of a run deleted since finds no trace) */
	if (!rc && run_id)
		rc = store_rank_rows_delete(w->db, run_id, rank, (int64_t)same_colls, owner != 0, err);
	if (!rc && owner)
		rc = store_insert_analysis(w, owner, run_id, &g, &c, same_colls, err);
	if (!rc && owner)
		rc = store_drop_points_after(w->db, run_id, rank, NULL, 0, err);
	if (!rc)
		rc = store_commit(w, err);
	if (rc)
		store_rollback(w);
	else if (count) {
		c.colls_kept = (int64_t)same_colls;
		c.colls_written = f->analysis && owner ? (int64_t)(f->analysis->ncolls - same_colls) : 0;
		*count = c;
	}
	return rc;
}

int store_metrics_put(struct store_writer *w, const char *run, const struct store_metric *m, size_t n,
		      struct tp_errbuf *err)
{
	struct db_stmt *st = NULL;
	int64_t run_id;
	size_t i;
	int rc;

	if ((rc = store_begin(w, err)))
		return rc;
	if ((rc = writer_run(w, run, &run_id, NULL, err)))
		goto out;
	if (db_prepare(w->db, "INSERT INTO metrics(run_id, name, step, value) VALUES(?1, ?2, ?3, ?4)"
				  " ON CONFLICT(run_id, name, step) DO UPDATE SET value=excluded.value", 0, &st) != DB_OK) {
		st = NULL;
		rc = store_db_fail(err, w->db, "prepare");
		goto out;
	}
	for (i = 0; i < n; i++) {
		db_reset(st);
		db_bind_int64(st, 1, run_id);
		store_bind_text(st, 2, m[i].name);
		db_bind_int64(st, 3, m[i].step);
		db_bind_double(st, 4, m[i].value);
		if (db_step(st) != DB_DONE) {
			rc = store_db_fail(err, w->db, "write metrics");
			goto out;
		}
	}
	rc = store_commit(w, err);
out:
	db_finalize(st);
	if (rc)
		store_rollback(w);
	return rc;
}
