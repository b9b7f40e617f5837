/*
 * runs.c: the runs and their artifacts as listed, a run's metrics and
 * its project's baseline.
 */
#include <stdio.h>
#include <string.h>

#include "alloc.h"
#include "store/store_int.h"

/*
 * Step count and mean/median step time of a run, at its lowest rank with
 * steps (the summary a run list shows; per-rank views come from store_steps).
 */
/* A text column, copied; NULL for SQL NULL. *fail set when out of memory. */
static char *col_strdup(struct db_stmt *st, int col, int *fail)
{
	const char *t = (const char *)db_column_text(st, col);
	char *c;

	if (!t)
		return NULL;
	if (!(c = tp_strdup(t)))
		*fail = 1;
	return c;
}

static int64_t col_i64(struct db_stmt *st, int col)
{
	return db_column_type(st, col) == DB_NULL ? -1 : db_column_int64(st, col);
}

/* The complete steps' durations of the run's lowest rank with steps, in r->step_dur_ns. */
static int run_step_durations(struct store_reader *r, int64_t run_id, struct store_run_info *ri,
			      struct tp_errbuf *err)
{
	struct db_stmt *st = store_prepare(r,
		"SELECT step, start_ns, dur_ns FROM steps WHERE run_id=?1 AND incomplete=0 AND whole_trace=0"
		" AND rank=(SELECT MIN(rank) FROM steps WHERE run_id=?1 AND whole_trace=0)"
		" ORDER BY step, start_ns", err);
	size_t cap = 0;
	int step;

	if (!st)
		return TP_ERR_DB;
	db_bind_int64(st, 1, run_id);
	while ((step = db_step(st)) == DB_ROW) {
		if (ri->nsteps == cap) {
			int64_t *nd = tp_realloc(ri->step_dur_ns, (cap = cap ? cap * 2 : 64) * sizeof(*nd));
			if (!nd)
				break;
			ri->step_dur_ns = nd;
		}
		ri->step_dur_ns[ri->nsteps++] = db_column_int64(st, 2);
	}
	db_finalize(st);
	if (step == DB_DONE)
		return TP_OK;
	return step == DB_ROW ? tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory") : store_db_fail(err, r->db, "step summary");
}

static const char run_cols[] =
	"SELECT r.id, r.name, r.project, r.created_ns, r.tags, r.metadata, r.baseline,"
	" (SELECT COUNT(*) FROM artifacts a WHERE a.run_id=r.id AND a.status!='ingesting'),"
	" (SELECT COUNT(DISTINCT rank) FROM artifacts a WHERE a.run_id=r.id AND a.status='ready'),"
	" (SELECT MAX(peak_allocated) FROM artifacts a WHERE a.run_id=r.id AND a.status='ready'),"
	" EXISTS (SELECT 1 FROM rank_pending p WHERE p.run_id=r.id), r.polled_ns"
	" FROM runs r WHERE " STORE_RUN_LISTED;

void store_runs_free(struct store_run_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		tp_free(v[i].name);
		tp_free(v[i].project);
		tp_free(v[i].tags_json);
		tp_free(v[i].metadata_json);
		tp_free(v[i].step_dur_ns);
	}
	tp_free(v);
}

int store_runs(struct store_reader *r, const char *run, struct store_run_info **out, size_t *n,
	       struct tp_errbuf *err)
{
	char sql[1024];
	struct db_stmt *st;
	size_t cap = 0;
	int step, fail = 0, rc = TP_OK;

	*out = NULL;
	*n = 0;
	snprintf(sql, sizeof(sql), "%s %s", run_cols, run ? "AND r.name=?1" : "ORDER BY r.created_ns DESC, r.id DESC");
	if (!(st = store_prepare(r, sql, err)))
		return TP_ERR_DB;
	if (run)
		store_bind_text(st, 1, run);
	while (!fail && (step = db_step(st)) == DB_ROW) {
		struct store_run_info *ri;
		if (*n == cap) {
			struct store_run_info *nv = tp_realloc(*out, (cap = cap ? cap * 2 : 16) * sizeof(*nv));
			if (!nv) {
				fail = 1;
				break;
			}
			*out = nv;
		}
		ri = &(*out)[(*n)++];
		memset(ri, 0, sizeof(*ri));
		ri->name = col_strdup(st, 1, &fail);
		ri->project = col_strdup(st, 2, &fail);
		ri->created_ns = col_i64(st, 3);
		ri->tags_json = col_strdup(st, 4, &fail);
		ri->metadata_json = col_strdup(st, 5, &fail);
		ri->baseline = db_column_int(st, 6);
		ri->artifacts = col_i64(st, 7);
		ri->ranks = col_i64(st, 8);
		ri->peak_allocated = col_i64(st, 9);
		ri->analysis_pending = db_column_int(st, 10);
		ri->polled = db_column_type(st, 11) != DB_NULL;
		if (!fail && (rc = run_step_durations(r, db_column_int64(st, 0), ri, err)))
			break;
	}
	db_finalize(st);
	if (!rc && fail)
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	else if (!rc && step != DB_DONE)
		rc = store_db_fail(err, r->db, "list runs");
	else if (!rc && run && !*n)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "run_not_found", "no run named '%s'", run);
	if (rc) {
		store_runs_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

static const char artifact_cols[] =
	"SELECT a.id, r.name, a.rank, a.kind, a.name, a.sha256, a.bytes, a.status, a.events,"
	" a.error_code, a.error, a.created_ns FROM artifacts a JOIN runs r ON r.id=a.run_id";

void store_artifacts_free(struct store_artifact_info *v, size_t n)
{
	for (size_t i = 0; v && i < n; i++) {
		tp_free(v[i].run);
		tp_free(v[i].kind);
		tp_free(v[i].name);
		tp_free(v[i].sha256);
		tp_free(v[i].status);
		tp_free(v[i].error_code);
		tp_free(v[i].error);
	}
	tp_free(v);
}

int store_artifacts(struct store_reader *r, const char *run, int64_t id, struct store_artifact_info **out,
		    size_t *n, struct tp_errbuf *err)
{
	char sql[512];
	struct db_stmt *st;
	size_t cap = 0;
	int step, fail = 0, rc = TP_OK;

	*out = NULL;
	*n = 0;
	snprintf(sql, sizeof(sql), "%s WHERE r.name=?1 AND a.status!='ingesting'%s ORDER BY a.id", artifact_cols,
		 id ? " AND a.id=?2" : "");
	if (!(st = store_prepare(r, sql, err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	if (id)
		db_bind_int64(st, 2, id);
	while (!fail && (step = db_step(st)) == DB_ROW) {
		struct store_artifact_info *a;
		if (*n == cap) {
			struct store_artifact_info *nv = tp_realloc(*out, (cap = cap ? cap * 2 : 16) * sizeof(*nv));
			if (!nv) {
				fail = 1;
				break;
			}
			*out = nv;
		}
		a = &(*out)[(*n)++];
		*a = (struct store_artifact_info){ .id = col_i64(st, 0), .rank = col_i64(st, 2), .bytes = col_i64(st, 6),
						   .events = col_i64(st, 8), .created_ns = col_i64(st, 11) };
		a->run = col_strdup(st, 1, &fail);
		a->kind = col_strdup(st, 3, &fail);
		a->name = col_strdup(st, 4, &fail);
		a->sha256 = col_strdup(st, 5, &fail);
		a->status = col_strdup(st, 7, &fail);
		if (db_column_type(st, 10) != DB_NULL) {
			a->error_code = col_strdup(st, 9, &fail);
			a->error = col_strdup(st, 10, &fail);
		}
	}
	db_finalize(st);
	if (fail)
		rc = tp_fail(err, TP_ERR_NOMEM, NULL, "out of memory");
	else if (step != DB_DONE)
		rc = store_db_fail(err, r->db, "read artifacts");
	else if (id && !*n)
		rc = tp_fail(err, TP_ERR_NOTFOUND, "artifact_not_found", "run '%s' has no artifact %lld", run, (long long)id);
	if (rc) {
		store_artifacts_free(*out, *n);
		*out = NULL;
		*n = 0;
	}
	return rc;
}

int store_metrics(struct store_reader *r, const char *run, const char *name, struct store_rows *out,
		  struct tp_errbuf *err)
{
	static const char *const cols[] = { "step", "name", "value" };
	struct db_stmt *st;

	memset(out, 0, sizeof(*out));
	if (store_run_exists(r, run, err))
		return err->rc;
	if (!(st = store_prepare(r, "SELECT m.step, m.name, m.value FROM metrics m JOIN runs r ON r.id=m.run_id"
			      " WHERE r.name=?1 AND (?2 IS NULL OR m.name=?2) ORDER BY m.name, m.step", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	store_bind_text(st, 2, name);
	return store_rows_read(r, st, cols, 3, out, err);
}

int store_baseline_of(struct store_reader *r, const char *run, char out[129], struct tp_errbuf *err)
{
	struct db_stmt *st;
	int step;

	if (store_run_exists(r, run, err))
		return err->rc;
	/* the newest, should two ever be marked (PATCH keeps one per project) */
	if (!(st = store_prepare(r, "SELECT b.name FROM runs b, runs t WHERE t.name=?1 AND b.baseline <> 0"
			      " AND b.project IS NOT DISTINCT FROM t.project ORDER BY b.id DESC LIMIT 1", err)))
		return TP_ERR_DB;
	store_bind_text(st, 1, run);
	step = db_step(st);
	if (step == DB_ROW)
		snprintf(out, 129, "%s", db_column_text(st, 0));
	db_finalize(st);
	if (step == DB_ROW)
		return TP_OK;
	if (step == DB_DONE)
		return tp_fail(err, TP_ERR_NOTFOUND, "no_baseline", "the project of run '%s' has no baseline run:"
			       " PATCH one with {\"baseline\": true}, or give base", run);
	return store_db_fail(err, r->db, "read baseline");
}
