/*
 * base.c: what every file of server/store/ calls and which calls none of
 * them: a database failure made an error, a statement run, a text bound,
 * an artifact's rows deleted, and a rank's analysis rows (its memory series
 * among them).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "store/store_int.h"

int store_db_fail(struct tp_errbuf *err, struct db *db, const char *what)
{
	tp_err("%s: %s", what, db ? db_errmsg(db) : "no connection");
	switch (db ? db_errkind(db) : DB_ERR_OTHER) {
	case DB_ERR_IO:
		return tp_fail(err, TP_ERR_IO, "storage_error", "%s: %s", what, db_errstr(db));
	case DB_ERR_UNAVAILABLE:
		return tp_fail(err, TP_ERR_UNAVAILABLE, "database_unavailable", "%s: database unavailable", what);
	default:
		return tp_fail(err, TP_ERR_DB, "database_error", "%s: %s", what, db ? db_errstr(db) : "no connection");
	}
}

int store_exec(struct db *db, const char *sql, struct tp_errbuf *err)
{
	return db_exec(db, sql) ? store_db_fail(err, db, "exec") : TP_OK;
}

void store_bind_text(struct db_stmt *st, int col, const char *s)
{
	if (s)
		db_bind_text(st, col, s, -1, DB_TRANSIENT);
	else
		db_bind_null(st, col);
}

void store_bind_opt(struct db_stmt *st, int col, int64_t v)
{
	if (v < 0)
		db_bind_null(st, col);
	else
		db_bind_int64(st, col, v);
}

void store_bind_real(struct db_stmt *st, int col, double v)
{
	if (isnan(v))
		db_bind_null(st, col);
	else
		db_bind_double(st, col, v);
}

int store_step_reset(struct db *db, struct db_stmt *st, struct tp_errbuf *err)
{
	int r = db_step(st);

	db_reset(st);
	return r == DB_DONE ? TP_OK : store_db_fail(err, db, "insert rows");
}

/* DELETE the artifact's rows of table, keyed by artifact_id. */
static int delete_by_id(struct db *db, const char *table, int64_t artifact, struct tp_errbuf *err)
{
	struct db_stmt *st;
	char sql[128];
	int r;

	snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE artifact_id=?1", table);
	if (db_prepare(db, sql, 0, &st) != DB_OK)
		return store_db_fail(err, db, "prepare delete");
	db_bind_int64(st, 1, artifact);
	r = db_step(st);
	db_finalize(st);
	return r == DB_DONE ? TP_OK : store_db_fail(err, db, "delete rows");
}

/* A table name as format_tables may hold one: [a-z0-9_], 1 to 63 of them. */
static int table_name(const char *s)
{
	size_t n = s ? strspn(s, "abcdefghijklmnopqrstuvwxyz0123456789_") : 0;

	return n && n < 64 && !s[n];
}

/*
 * Rows of every per-artifact table, except (keep_raw) the raw bytes: those keyed by the
 * artifact's row keys, the memory series', and the tables format_tables lists.
 */
int store_delete_rows(struct db *db, int64_t artifact, int keep_raw, struct tp_errbuf *err)
{
	static const char *const tables[] = { "event_blocks", "strings", "raw_chunks" };
	struct db_stmt *st;
	char sql[128];
	size_t i;
	int r = DB_DONE, rc = TP_OK;

	for (i = 0; i < sizeof(tables) / sizeof(tables[0]) - (keep_raw ? 1 : 0); i++) {
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE key BETWEEN ?1 AND ?2", tables[i]);
		if (db_prepare(db, sql, 0, &st) != DB_OK)
			return store_db_fail(err, db, "prepare delete");
		db_bind_int64(st, 1, artifact << 32);
		db_bind_int64(st, 2, (artifact << 32) | 0xffffffffLL);
		r = db_step(st);
		db_finalize(st);
		if (r != DB_DONE)
			return store_db_fail(err, db, "delete rows");
	}
	/* the memory series' tables, which several formats fill */
	static const char *const by_id[] = { "memory_series", "memory_point_blocks",
					     "memory_groups", "memory_segments", "memory_blocks" };
	for (i = 0; i < sizeof(by_id) / sizeof(by_id[0]); i++)
		if ((rc = delete_by_id(db, by_id[i], artifact, err)))
			return rc;
	/* each format's own tables, as the migrations that made them listed them (format_tables) */
	if (db_prepare(db, "SELECT name FROM format_tables ORDER BY name", 0, &st) != DB_OK)
		return store_db_fail(err, db, "prepare delete");
	while (!rc && (r = db_step(st)) == DB_ROW) {
		const char *name = (const char *)db_column_text(st, 0);
		rc = table_name(name) ? delete_by_id(db, name, artifact, err)
				      : tp_fail(err, TP_ERR_DB, "database_error", "format_tables: no table name: %.64s",
						name ? name : "NULL");
	}
	if (!rc && r != DB_DONE)
		rc = store_db_fail(err, db, "read format_tables");
	db_finalize(st);
	return rc;
}

const char *const store_rank_analysis[] = { "steps", "op_stats", "kernel_stats", "collectives", "inside_steps",
					     "rank_memory_series", "rank_memory_groups", "rank_memory_point_blocks" };

int store_rank_rows_delete(struct db *db, int64_t run_id, int rank, int64_t colls_from, int keep_points,
			   struct tp_errbuf *err)
{
	struct db_stmt *st;
	char sql[160];
	size_t i;

	for (i = 0; i < sizeof(store_rank_analysis) / sizeof(store_rank_analysis[0]) - (keep_points ? 1 : 0); i++) {
		int colls = !strcmp(store_rank_analysis[i], "collectives");
		/* two statements, not "(?2 < 0 OR rank=?2)": with the OR, SQLite searches the
		 * (run_id, rank, ...) key by run_id alone and reads every rank's rows of the run */
		snprintf(sql, sizeof(sql), "DELETE FROM %s WHERE run_id=?1%s%s", store_rank_analysis[i],
			 rank >= 0 ? " AND rank=?2" : "", !colls ? "" : rank >= 0 ? " AND n >= ?3" : " AND n >= ?2");
		if (db_prepare(db, sql, 0, &st) != DB_OK)
			return store_db_fail(err, db, "prepare delete");
		db_bind_int64(st, 1, run_id);
		if (rank >= 0)
			db_bind_int(st, 2, rank);
		if (colls)
			db_bind_int64(st, rank >= 0 ? 3 : 2, colls_from);
		int r = db_step(st);
		db_finalize(st);
		if (r != DB_DONE)
			return store_db_fail(err, db, "delete rank analysis");
	}
	return TP_OK;
}

int store_drop_artifact(struct db *db, int64_t artifact, struct tp_errbuf *err)
{
	struct db_stmt *st;
	int rc;

	if ((rc = store_delete_rows(db, artifact, 0, err)))
		return rc;
	if (db_prepare(db, "DELETE FROM artifacts WHERE id=?1", 0, &st) != DB_OK)
		return store_db_fail(err, db, "prepare delete");
	db_bind_int64(st, 1, artifact);
	rc = db_step(st) == DB_DONE ? TP_OK : store_db_fail(err, db, "delete artifact");
	db_finalize(st);
	return rc;
}

const char store_empty_runs_sql[] =
	"DELETE FROM runs WHERE NOT EXISTS (SELECT 1 FROM artifacts WHERE run_id=runs.id)"
	" AND metadata='{}' AND tags='[]' AND project IS NULL"
	" AND NOT EXISTS (SELECT 1 FROM metrics WHERE run_id=runs.id) AND polled_ns IS NULL";
